//! The controller against misbehaving harnesses, providers, executors and journals: each test
//! quotes the spec words (spec/agentsessions-writing-a-harness.txt, research/agentsessions.md)
//! that say what must happen instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use harness_core::event::{EventBody, EventKind, LifecycleKind};
use harness_core::message::{
    DataPart, JsonObject, Mediation, Message, ModelRequest, Part, Role, ToolCall, ToolResult,
};
use harness_core::model::ScriptedModel;
use harness_core::tool::ToolContext;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{FileJournal, Journal, JournalError, MemoryJournal, SessionMeta};
use harness_sessions::record::{Fence, Head, Record, Seq};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::tools::{ToolError, ToolExecutor};
use harness_sessions::{Code, Error};
use serde_json::json;

/// A journal on which another writer takes the session over just before the SUSPEND of a
/// parked turn is appended (another host, or an `approve` racing the park).
struct TakenOverAtSuspend(MemoryJournal);

impl Journal for TakenOverAtSuspend {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        self.0.create(session, meta)
    }
    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        self.0.meta(session)
    }
    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        self.0.sessions()
    }
    fn head(&self, session: &str) -> Result<Head, JournalError> {
        self.0.head(session)
    }
    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        self.0.acquire_fence(session)
    }
    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        if records.iter().any(|r| {
            matches!(&r.event.body, EventBody::Lifecycle(l) if l.kind == LifecycleKind::Suspend)
        }) {
            self.0.acquire_fence(session)?;
        }
        self.0.append(session, expected_last_seq, fence, records)
    }
    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        self.0.read(session, from, to)
    }
    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError> {
        self.0.fork(parent, at, child, meta)
    }
}

/// "The host requires actual ACK/EOF and connection closure before an external snapshot and
/// durable SUSPEND make the live pause successful. Transport/snapshot/append failures leave
/// the request recoverable and retain the actual error, not a fake successful park."
/// A SUSPEND refused because another writer fenced this one is that writer's
/// `JournalError::Fenced` (ABORTED, as every other fenced append), not an INTERNAL i/o error.
#[test]
fn a_refused_suspend_keeps_the_journal_error_and_the_request_stays_recoverable() {
    let journal = Arc::new(TakenOverAtSuspend(MemoryJournal::new()));
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let host = Controller::builder(journal.clone())
        .model(counting_model())
        .executor(dedup(&effects, &receipts))
        .harness("script", ScriptHarness::new(vec![Op::Gated]))
        .build();
    host.create_session("s", None).unwrap();
    let err = block(host.exec(ExecRequest::text("s", "go"))).unwrap_err();
    assert!(
        matches!(err, Error::Journal(JournalError::Fenced { .. })),
        "{err:?}"
    );
    assert_eq!(err.code(), Code::Aborted);
    // No SUSPEND was recorded, and the request is still there to decide.
    let kinds: Vec<_> = host
        .records("s")
        .unwrap()
        .iter()
        .map(|r| r.event.kind())
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::ExecutionStart,
            EventKind::Input,
            EventKind::ToolCall,
            EventKind::ApprovalRequest
        ]
    );
    let pending = host.pending_approval("s").unwrap().unwrap();
    host.approve("s", &pending.call.id, true, "").unwrap();
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(effects.count(), 1);
    host.verify("s").unwrap();
}

/// The journal holds agentsessions `Event`s, whose `Usage` counts are proto `int64`
/// (research §1: "`Usage {model=1, input_tokens=2, output_tokens=3, reasoning_tokens=4}`
/// (all int64)"; Go `InputTokens, OutputTokens, ReasoningTokens int64`). A harness reporting
/// a count beyond `i64::MAX` through `sink.usage` is refused before anything is recorded,
/// as the sink refuses every call it cannot journal faithfully; before, it was journaled as
/// `"18446744073709551615"`, which no agentsessions reader parses.
#[test]
fn usage_beyond_int64_is_refused_before_it_is_recorded() {
    for (n, accepted) in [
        (i64::MAX as u64, true),
        (i64::MAX as u64 + 1, false),
        (u64::MAX, false),
    ] {
        let journal = Arc::new(MemoryJournal::new());
        let host = Controller::builder(journal.clone())
            .harness("script", ScriptHarness::new(vec![Op::Usage(n)]))
            .build();
        host.create_session("s", None).unwrap();
        let turn = block(host.exec(ExecRequest::text("s", "go")));
        let usages = host
            .records("s")
            .unwrap()
            .iter()
            .filter(|r| r.event.kind() == EventKind::Usage)
            .count();
        if accepted {
            assert_eq!(turn.unwrap().status, TurnStatus::Completed);
            assert_eq!(usages, 1);
            block(host.replay("s")).unwrap();
        } else {
            assert!(
                matches!(
                    turn,
                    Err(Error::TurnFailed {
                        error: HarnessError::Sink(SinkError::Rejected(_)),
                        ..
                    })
                ),
                "{n}: {turn:?}"
            );
            assert_eq!(usages, 0, "{n}");
        }
        host.verify("s").unwrap();
    }
}

/// An executor whose results hold a negative zero.
struct NegativeZero;

#[async_trait]
impl ToolExecutor for NegativeZero {
    async fn execute(&self, _cx: &ToolContext, _call: &ToolCall) -> Result<ToolResult, ToolError> {
        let mut out = JsonObject::new();
        out.insert("delta".into(), json!(-0.0));
        out.insert("total".into(), json!(2.0));
        Ok(ToolResult::ok("", out))
    }
}

/// Writes what it was handed back as its own output, numbers as serde_json prints them.
struct Echoing;

#[async_trait]
impl Harness for Echoing {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("echoing", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let resp = sink.model(ModelRequest::new(start.inputs)).await?;
        sink.output(&serde_json::to_string(&resp.message).unwrap_or_default())
            .await?;
        let call = ToolCall::new("c1", "effect", JsonObject::new())
            .with_mediation(Mediation::ControllerMediated)
            .with_idempotency_key(format!("{}-1", start.execution_id));
        let result = sink.tool_call(call).await?;
        sink.output(&serde_json::to_string(&result).unwrap_or_default())
            .await?;
        Ok(())
    }
}

/// Rule 1: "Live, the host invokes the provider and records the result. On replay, the host
/// serves the recorded result and does not call the provider. Because the completion always
/// flows back through this one mediated call, ... replay is exact for free"; I5: "Replay
/// reproduces the recorded events byte-for-byte". The journal holds a completion or tool
/// result in canonical (RFC 8785) form, where `-0.0` is `0` and `2.0` is `2`: the harness
/// must be handed what the journal will serve, or the next request it builds from it hashes
/// `-0` live and `0` on replay from a file journal (an I0 mismatch on a deterministic
/// harness), and an output it prints from it reads `2.0` live and `2` on replay.
#[test]
fn a_completion_or_tool_result_is_handed_over_as_a_file_journal_serves_it() {
    let mut data = JsonObject::new();
    data.insert("x".into(), json!(-0.0));
    data.insert(
        "nested".into(),
        json!({"list": [-0.0, 1.5, 3.0, 1e21, {"y": -0.0}]}),
    );
    let completion = Message {
        role: Role::Assistant,
        parts: vec![Part::Data(DataPart { data })],
    };
    let dir = scratch_dir("negzero");
    let ops = vec![Op::Model, Op::Tool, Op::Model, Op::Model];
    let model = Arc::new(
        ScriptedModel::new()
            .reply_with(completion.clone())
            .reply("a")
            .reply("b")
            .reply_with(completion),
    );
    let build = |model: Option<Arc<ScriptedModel>>| {
        let mut b = Controller::builder(Arc::new(FileJournal::open(&dir).unwrap()))
            .harness("script", ScriptHarness::new(ops.clone()))
            .harness("echoing", Echoing);
        if let Some(m) = model {
            b = b.model(m).executor(NegativeZero);
        }
        b.build()
    };
    {
        let host = build(Some(model.clone()));
        for (session, harness) in [("s", "script"), ("e", "echoing")] {
            host.create_session(session, Some(harness)).unwrap();
            let turn = block(host.exec(ExecRequest::text(session, "go"))).unwrap();
            assert_eq!(turn.status, TurnStatus::Completed);
            // The same controller, whose journal hands back records decoded from the file.
            let replay = block(host.replay(session)).unwrap();
            assert_eq!(
                (replay.executions, replay.provider_calls),
                (1, 0),
                "{session}"
            );
        }
    }
    let host = build(None);
    for session in ["s", "e"] {
        let replay = block(host.replay(session)).unwrap();
        assert_eq!(
            (
                replay.executions,
                replay.provider_calls,
                replay.executor_calls
            ),
            (1, 0, 0),
            "{session}"
        );
        host.verify(session).unwrap();
    }
    assert_eq!(model.calls(), 4);
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}
