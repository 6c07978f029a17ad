//! A file journal holding every event kind the host writes (all lifecycle kinds this host
//! uses, approvals granted and denied, reasoning, file and data parts, tool arguments with
//! numbers and unicode), verified here; `scripts/interop/harness-sessions/run.sh` points
//! `HARNESS_SESSIONS_INTEROP_DIR` at a folder and checks the same files with Python's `jcs`
//! and `protobuf` (the agentsessions schema compiled by protoc).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use harness_core::event::EventKind;
use harness_core::message::{
    DataPart, FilePart, JsonObject, Mediation, Message, ModelRequest, Part, Role, ToolCall,
    ToolResult,
};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start, Timestamp};
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::harnesses::{ChatHarness, EchoHarness};
use harness_sessions::journal::{Durability, FileJournal, Journal};
use harness_sessions::testing::CrashAfter;
use harness_sessions::tools::MemoryReceipts;
use serde_json::json;

/// Uses every sink call and every part kind.
struct Everything;

#[async_trait]
impl Harness for Everything {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("everything", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let mut args = JsonObject::new();
        args.insert("n".into(), json!(3));
        args.insert("ratio".into(), json!(0.1));
        args.insert("big".into(), json!(1e21));
        args.insert("tiny".into(), json!(1.5e-7));
        args.insert(
            "nested".into(),
            json!({"é": [true, null, "x<y&z"], "\u{1F600}": {}}),
        );
        let mut data = JsonObject::new();
        data.insert("k".into(), json!([1, 2.5, "v"]));
        let user = Message {
            role: Role::User,
            parts: vec![
                Part::text(start.inputs.last().map(Message::text).unwrap_or_default()),
                Part::File(FilePart {
                    mime: "image/png".into(),
                    bytes: Some(vec![0, 159, 146, 150]),
                    name: "img.png".into(),
                    digest: "sha256:00".into(),
                    ..Default::default()
                }),
                Part::Data(DataPart { data }),
            ],
        };
        sink.reasoning("weighing the options").await?;
        let resp = sink
            .model(ModelRequest::new(vec![user]).with_model("m"))
            .await?;
        sink.usage(resp.usage.clone()).await?;
        let call = ToolCall::new("c1", "lookup", args.clone())
            .with_mediation(Mediation::ControllerMediated)
            .with_idempotency_key(format!("{}-c1", start.execution_id));
        sink.tool_call(call).await?;
        let mut out = JsonObject::new();
        out.insert("rows".into(), json!(2));
        sink.report(ToolResult::ok("own-1", out)).await?;
        let gated = ToolCall::new("c2", "delete", args)
            .with_mediation(Mediation::RequiresApproval)
            .with_idempotency_key(format!("{}-c2", start.execution_id));
        let r = sink.tool_call(gated).await?;
        sink.output(&format!("gated: error={} \u{2028}\t\"q\"", r.is_error))
            .await?;
        Ok(())
    }
}

#[test]
fn a_journal_with_every_event_kind_verifies() {
    let dir = match std::env::var_os("HARNESS_SESSIONS_INTEROP_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!(
            "harness-sessions-every-kind-{}",
            std::process::id()
        )),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let journal: Arc<dyn Journal> =
        Arc::new(FileJournal::with_durability(&dir, Durability::Never).unwrap());
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(reasoning_model())
            .executor(dedup(&effects, &receipts))
            .harness("everything", Everything)
            .harness("chat", ChatHarness::new("m"))
            .harness("echo", EchoHarness)
            .clock(|| Some(Timestamp::new(1_700_000_000, 123_000_000)))
            .build()
    };
    let host = build(journal.clone());
    host.create_session("all", Some("everything")).unwrap();
    // Approved turn.
    block(host.exec(ExecRequest::text("all", "first"))).unwrap();
    host.approve("all", "c2", true, "fine").unwrap();
    block(host.resume("all")).unwrap().unwrap();
    // Denied turn.
    block(host.exec(ExecRequest::text("all", "second"))).unwrap();
    host.approve("all", "c2", false, "no").unwrap();
    block(host.resume("all")).unwrap().unwrap();
    // A failed chat turn (ERROR), an interrupted echo turn resumed, a fork.
    let mut bad = ExecRequest::text("all", "x")
        .with_harness("chat")
        .with_config("null");
    bad.resume_from_seq = 9_007_199_254_740_993;
    assert!(block(host.exec(bad)).is_err());
    let crashing = build(Arc::new(CrashAfter::new(journal.clone(), 3)));
    assert!(block(crashing.exec(ExecRequest::new("all", vec![]).with_harness("echo"))).is_err());
    block(host.resume("all")).unwrap().unwrap();
    block(host.fork("all", 12, "child")).unwrap();
    block(host.exec(ExecRequest::text("child", "after the fork").with_harness("echo"))).unwrap();

    let mut kinds = BTreeSet::new();
    for s in ["all", "child"] {
        for r in host.records(s).unwrap() {
            kinds.insert(r.event.kind());
        }
        assert!(host.verify(s).is_ok());
    }
    use EventKind::*;
    for k in [
        Input,
        ModelCall,
        Output,
        ToolCall,
        ToolResult,
        ApprovalRequest,
        ApprovalResult,
        Usage,
        Lifecycle,
        End,
        Error,
        ExecutionStart,
    ] {
        assert!(kinds.contains(&k), "{k:?} missing");
    }
    assert_eq!(block(host.replay("all")).unwrap().provider_calls, 0);
    if std::env::var_os("HARNESS_SESSIONS_INTEROP_DIR").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
