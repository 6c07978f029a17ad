//! Replay (I0, I1, I5: "On replay the recorded model result is served from the journal"): the
//! input hash check, serving everything, skipping incomplete turns, the version guard and the
//! recorded harness. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::*;
use harness_core::event::{EventBody, EventKind};
use harness_core::message::{Message, ModelRequest};
use harness_core::model::{ModelError, ScriptedModel};
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::{Code, Error};

/// I0 on replay: "replay: model input hash mismatch — harness violated STATELESS_REPLAY
/// (I0)" (research §4).
#[test]
fn replay_detects_an_input_hash_change() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    // Same id and version, but the harness now sends another request.
    let other = Controller::builder(h.journal.clone())
        .harness("script", ChangedRequest)
        .build();
    let err = block(other.replay("s")).unwrap_err();
    match &err {
        Error::Diverged { detail, .. } => assert!(detail.contains("(I0)"), "{detail}"),
        other => panic!("{other}"),
    }
    assert_eq!(err.code(), Code::FailedPrecondition);
}

struct ChangedRequest;

#[async_trait::async_trait]
impl harness_core::Harness for ChangedRequest {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        Ok(harness_core::Descriptor::new("script", "1"))
    }
    async fn run(
        &self,
        start: harness_core::Start,
        sink: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        let mut msgs = start.inputs.clone();
        msgs.push(Message::user("something new"));
        sink.model(ModelRequest::new(msgs).with_model("m")).await?;
        Ok(())
    }
}

/// I1: "On replay the recorded model result is served from the journal. The model is called
/// zero times." I5: "Replay reproduces the recorded events byte-for-byte".
#[test]
fn replay_serves_everything_and_calls_nothing() {
    let h = host(vec![
        Op::Model,
        Op::Tool,
        Op::Report,
        Op::Usage(3),
        Op::Model,
        Op::Output("!".into()),
    ]);
    for i in 0..3 {
        block(h.host.exec(ExecRequest::text("s", format!("turn {i}")))).unwrap();
    }
    let (calls, effects) = (h.model.calls(), h.effects.count());
    let rep = block(h.host.replay("s")).unwrap();
    assert_eq!(rep.executions, 3);
    assert_eq!(rep.provider_calls, 0);
    assert_eq!(rep.executor_calls, 0);
    // 9 effects (MODEL_CALL, OUTPUT, TOOL_CALL, TOOL_RESULT, TOOL_RESULT, USAGE, MODEL_CALL,
    // OUTPUT, OUTPUT) + END per turn.
    assert_eq!(rep.records_reproduced, 3 * 10);
    assert_eq!((h.model.calls(), h.effects.count()), (calls, effects));
    // Replay appends nothing.
    assert_eq!(h.host.records("s").unwrap().len(), 3 * 12);
}

/// "Completed replay skips incomplete trailing turns"; "Replay itself never calls the
/// provider: it skips turns without END".
#[test]
fn replay_skips_incomplete_turns_and_error_records() {
    let model = Arc::new(
        ScriptedModel::new()
            .reply("one")
            .fail(ModelError::Provider("boom".into()))
            .reply("three"),
    );
    let h = host_with(vec![Op::Model], model);
    block(h.host.exec(ExecRequest::text("s", "1"))).unwrap();
    assert!(block(h.host.exec(ExecRequest::text("s", "2"))).is_err());
    block(h.host.exec(ExecRequest::text("s", "3"))).unwrap();
    let rep = block(h.host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.skipped, rep.provider_calls), (2, 1, 0));
    // The failed turn's input stays in the later turn's history (the harness saw it).
    let recs = h.host.records("s").unwrap();
    assert!(
        recs.iter()
            .any(|r| matches!(&r.event.body, EventBody::Error(_)))
    );
}

/// "Known recorded versions must match exactly on controller replay/interrupted recovery;
/// served empty is a mismatch for a known version. ... older markers without a version have
/// no version guard."
#[test]
fn version_guard() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    for served in ["2", ""] {
        let mut v = ScriptHarness::new(vec![Op::Model]);
        v.version = served.into();
        let other = Controller::builder(h.journal.clone())
            .harness("script", v.clone())
            .build();
        let err = block(other.replay("s")).unwrap_err();
        assert!(matches!(err, Error::HarnessVersionMismatch { .. }), "{err}");
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert_eq!(v.runs.load(Ordering::SeqCst), 0, "checked before any Run");
    }
    // An unversioned recording is unguarded.
    let mut unversioned = ScriptHarness::new(vec![Op::Model]);
    unversioned.version = String::new();
    let h2 = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(counting_model())
        .harness("script", unversioned)
        .build();
    h2.create_session("s", None).unwrap();
    block(h2.exec(ExecRequest::text("s", "hi"))).unwrap();
    let rec = h2.records("s").unwrap();
    let EventBody::ExecutionStart(m) = &rec[0].event.body else {
        panic!()
    };
    assert_eq!(
        m.harness_version, "",
        "the advertised value is recorded, including empty"
    );
    let j = h2.journal().clone();
    let v9 = {
        let mut s = ScriptHarness::new(vec![Op::Model]);
        s.version = "9".into();
        s
    };
    let other = Controller::builder(j).harness("script", v9).build();
    assert_eq!(block(other.replay("s")).unwrap().executions, 1);
}

/// "The recorded executing name is the host's resolved registry name"; "removing it ...
/// yields FAILED_PRECONDITION"; "Raw Sessions.Replay remains readable even when the recorded
/// implementation is not served."
#[test]
fn recorded_harness_must_be_served() {
    let h = host(vec![Op::Model]);
    block(
        h.host
            .exec(ExecRequest::text("s", "a").with_harness("echo")),
    )
    .unwrap();
    block(h.host.exec(ExecRequest::text("s", "b"))).unwrap();
    let only_script = Controller::builder(h.journal.clone())
        .harness("script", h.harness.clone())
        .build();
    let before = h.harness.runs.load(Ordering::SeqCst);
    let err = block(only_script.replay("s")).unwrap_err();
    assert!(
        matches!(err, Error::HarnessMismatch { ref recorded, .. } if recorded == "echo"),
        "{err}"
    );
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        h.harness.runs.load(Ordering::SeqCst),
        before,
        "no Run before the check"
    );
    assert_eq!(only_script.records("s").unwrap().len(), 10);
}

/// DESIGN principle 4 ("Unknown is kept, not dropped"): a record of an event kind this
/// version does not know (say, one a newer agentsessions wrote) keeps the journal readable,
/// verifiable and replayable; it is passed over, never dropped or rewritten.
#[test]
fn a_record_of_an_unknown_kind_is_kept_and_passed_over() {
    use harness_sessions::record::Record;
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "one"))).unwrap();
    let unknown: harness_core::event::Event = serde_json::from_value(serde_json::json!({
        "kind": "EVENT_SNAPSHOT",
        "schema_version": 1,
        "snapshot": {"uri": "s3://bucket/snap", "size": "42"}
    }))
    .unwrap();
    let head = h.journal.head("s").unwrap();
    let fence = h.journal.acquire_fence("s").unwrap();
    let rec = Record::seal(unknown, head.seq + 1, head.hash, fence).unwrap();
    h.journal.append("s", head.seq, fence, &[rec]).unwrap();
    block(h.host.exec(ExecRequest::text("s", "two"))).unwrap();

    let records = h.host.records("s").unwrap();
    let kept = &records[usize::try_from(head.seq).unwrap()];
    assert_eq!(kept.event.kind(), EventKind::Unknown);
    assert!(kept.canonical().contains("s3://bucket/snap"));
    h.host.verify("s").unwrap();
    let calls = h.model.calls();
    let rep = block(h.host.replay("s")).unwrap();
    assert_eq!(rep.executions, 2);
    assert_eq!(rep.provider_calls, 0);
    assert_eq!(h.model.calls(), calls);
}
