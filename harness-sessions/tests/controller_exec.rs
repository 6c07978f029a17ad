//! Exec ("Run: drive one turn"; Rule 1, "The host records MODEL_CALL ... before it invokes
//! the provider"): the records of a new turn in order, intent before effect, a failed turn, the
//! per-turn harness, timestamps and the session uid. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use EventKind::*;
use common::*;
use harness_core::Timestamp;
use harness_core::event::{EventBody, EventKind};
use harness_core::message::{Message, ModelRequest};
use harness_core::model::{ModelError, ScriptedModel};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::EchoHarness;
use harness_sessions::input_hash::model_input_hash;
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::{Code, Error};

/// "EXECUTION_START with config, resume_from_seq, input_count, harness name and version;
/// one INPUT per input" (issue) and "The host records MODEL_CALL (with the request's input
/// hash) before it invokes the provider and records the completion as OUTPUT after" (Rule 1).
#[test]
fn exec_records_start_inputs_and_effects_in_order() {
    let h = host(vec![
        Op::Model,
        Op::Tool,
        Op::Output("done".into()),
        Op::Usage(7),
    ]);
    let mut req = ExecRequest::new("s", vec![Message::user("a"), Message::user("b")])
        .with_config(b"\x00cfg".to_vec());
    req.resume_from_seq = 42;
    let turn = block(h.host.exec(req)).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(
        kinds(&h.host, "s"),
        vec![
            ExecutionStart,
            Input,
            Input,
            ModelCall,
            Output,
            ToolCall,
            ToolResult,
            Output,
            Usage,
            End
        ]
    );
    let recs = h.host.records("s").unwrap();
    let EventBody::ExecutionStart(m) = &recs[0].event.body else {
        panic!()
    };
    assert_eq!(m.config, b"\x00cfg");
    assert_eq!(m.resume_from_seq, 42);
    assert_eq!(m.input_count, Some(2));
    assert_eq!(m.harness, "script");
    assert_eq!(m.harness_version, "1");
    // Every record of the turn carries the execution id; it is 16 hex chars.
    assert_eq!(turn.execution_id.len(), 16);
    assert!(
        recs.iter()
            .all(|r| r.event.execution_id == turn.execution_id)
    );
    // The MODEL_CALL holds the I0 hash of the request and no messages.
    let EventBody::ModelCall(mc) = &recs[3].event.body else {
        panic!()
    };
    let req = ModelRequest::new(vec![Message::user("a"), Message::user("b")]).with_model("m");
    assert_eq!(mc.input_hash, model_input_hash(&req));
    assert!(mc.messages.is_empty());
    // "stamps the result ID with the call ID"
    let EventBody::ToolResult(r) = &recs[6].event.body else {
        panic!()
    };
    assert_eq!(r.id, "call-1");
    assert_eq!(turn.output, "answer to 2 messagesdone");
    assert_eq!((turn.provider_calls, turn.executor_calls), (1, 1));
    assert_eq!(h.host.verify("s").unwrap().records, 10);
}

/// Rule 1: "The host records MODEL_CALL ... before it invokes the provider"; Rule 4 host
/// composition: "The controller records intent before invoking the executor".
#[test]
fn intent_is_journaled_before_the_provider_and_the_executor_run() {
    let journal = Arc::new(MemoryJournal::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (j2, s2) = (journal.clone(), seen.clone());
    let model = Hooked {
        inner: ScriptedModel::new().otherwise(|_| Ok(Message::assistant("ok"))),
        hook: Box::new(move |_| {
            let last = j2.read("s", 1, None).unwrap().last().unwrap().event.kind();
            s2.lock().unwrap().push(("model", last));
        }),
    };
    let (j3, s3) = (journal.clone(), seen.clone());
    let effect = harness_core::Tool::sync("effect", "Looks at the journal", move |call| {
        let last = j3.read("s", 1, None).unwrap().last().unwrap().event.kind();
        s3.lock().unwrap().push(("tool", last));
        harness_core::message::ToolResult::ok(&call.id, Default::default())
    });
    let host = Controller::builder(journal.clone())
        .model(model)
        .tools(harness_core::Tools::new().with(effect))
        .harness(
            "script",
            ScriptHarness::new(vec![Op::Model, Op::Tool, Op::Model]),
        )
        .build();
    host.create_session("s", None).unwrap();
    block(host.exec(ExecRequest::text("s", "hi"))).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("model", ModelCall),
            ("tool", ToolCall),
            ("model", ModelCall)
        ]
    );
}

/// "Run error → best-effort ERROR{description} and return the error" (research §7); "A
/// process death or provider error between the two leaves a turn whose last effect is a
/// MODEL_CALL with no completion" (Rule 1).
#[test]
fn a_failed_turn_records_error_and_leaves_model_call_last() {
    let model = Arc::new(
        ScriptedModel::new()
            .fail(ModelError::Unavailable("down".into()))
            .reply("recovered"),
    );
    let h = host_with(vec![Op::Model], model);
    let err = block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert!(matches!(err, Error::TurnFailed { .. }), "{err}");
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(
        kinds(&h.host, "s"),
        vec![ExecutionStart, Input, ModelCall, Error]
    );
    // "ERROR events ... stay in the journal as an audit trail; they are not effects, so they
    // are skipped on replay and do not block a later Resume."
    let turn = block(h.host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.provider_calls, 1);
    assert_eq!(turn.output, "recovered");
    assert_eq!(
        kinds(&h.host, "s"),
        vec![ExecutionStart, Input, ModelCall, Error, Output, End]
    );
    assert_eq!(h.model.calls(), 2);
    let rep = block(h.host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.provider_calls), (1, 0));
    assert_eq!(h.model.calls(), 2);
}

/// Per-turn override: "exec --harness overrides the harness for that turn only; omitting it
/// uses the stored session harness"; an unknown name is INVALID_ARGUMENT.
#[test]
fn harness_override_is_per_turn() {
    let h = host(vec![Op::Model]);
    block(
        h.host
            .exec(ExecRequest::text("s", "a").with_harness("echo")),
    )
    .unwrap();
    block(h.host.exec(ExecRequest::text("s", "b"))).unwrap();
    let names: Vec<String> = h
        .host
        .records("s")
        .unwrap()
        .iter()
        .filter_map(|r| match &r.event.body {
            EventBody::ExecutionStart(m) => Some(m.harness.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["echo", "script"]);
    let err = block(
        h.host
            .exec(ExecRequest::text("s", "c").with_harness("nope")),
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(h.host.records("s").unwrap().len(), 10, "nothing journaled");
    assert_eq!(
        h.host.create_session("t", Some("nope")).unwrap_err().code(),
        Code::InvalidArgument
    );
}

/// Timestamps come from the host's clock; the library reads none.
#[test]
fn timestamps_come_from_the_clock() {
    let clock = Arc::new(|| Some(Timestamp::new(1_700_000_000, 0)));
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(counting_model())
        .harness("echo", EchoHarness)
        .clock(clock)
        .build();
    host.create_session("s", None).unwrap();
    block(host.exec(ExecRequest::text("s", "hi"))).unwrap();
    assert!(
        host.records("s")
            .unwrap()
            .iter()
            .all(|r| r.event.timestamp == Some(Timestamp::new(1_700_000_000, 0)))
    );
    assert_eq!(block(host.replay("s")).unwrap().executions, 1);
}

/// "Direct controller users must configure controller.WithSessionUID(uid) with a nonempty
/// UID; controller.New returns controller.ErrMissingSessionUID ... without advancing the
/// log's fence."
#[test]
fn an_empty_session_uid_is_refused_before_any_fence() {
    let h = host(vec![Op::Tool]);
    let fence = h.journal.head("s").unwrap().fence;
    for err in [
        block(h.host.exec(ExecRequest::text("", "x"))).unwrap_err(),
        h.host.create_session("", None).unwrap_err(),
        block(h.host.fork("s", 0, "")).unwrap_err(),
    ] {
        assert_eq!(err, Error::MissingSessionUid);
        assert_eq!(err.code(), Code::InvalidArgument);
    }
    assert_eq!(h.journal.head("s").unwrap().fence, fence);
    assert_eq!(h.effects.count(), 0);
}

/// A host runs turns of many sessions concurrently on a multi-threaded executor: the
/// controller is shared across threads and its futures can move between them. (A compile-time
/// check: this test fails to build if that stops being true.)
#[test]
fn the_controller_and_its_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    fn shared<T: Send + Sync>() {}
    shared::<Controller>();
    let host = Controller::builder(Arc::new(MemoryJournal::new())).build();
    send(&host.exec(ExecRequest::text("s", "x")));
    send(&host.resume("s"));
    send(&host.replay("s"));
    send(&host.fork("s", 0, "c"));
}
