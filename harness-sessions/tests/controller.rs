//! The controller against the spec (spec/agentsessions-writing-a-harness.txt): exec, replay,
//! resume, fork, mediation, approvals, the version guard and placement. Each test quotes
//! the words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use EventKind::*;
use common::*;
use harness_core::event::{EventBody, EventKind, LifecycleKind};
use harness_core::message::{Mediation, Message, ModelRequest, ToolResultCode};
use harness_core::model::{ModelError, ScriptedModel};
use harness_core::{Resumability, Timestamp};
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::{CounterHarness, EchoHarness};
use harness_sessions::input_hash::model_input_hash;
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::{Code, Error};

struct Host {
    host: Controller,
    journal: Arc<MemoryJournal>,
    model: Arc<ScriptedModel>,
    effects: Arc<Effects>,
    harness: ScriptHarness,
}

fn host_with(ops: Vec<Op>, model: Arc<ScriptedModel>) -> Host {
    let journal = Arc::new(MemoryJournal::new());
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let harness = ScriptHarness::new(ops);
    let host = Controller::builder(journal.clone())
        .model(model.clone())
        .executor(dedup(&effects, &receipts))
        .harness("script", Arc::new(harness.clone()))
        .harness("echo", Arc::new(EchoHarness))
        .build();
    host.create_session("s", Some("script")).unwrap();
    Host {
        host,
        journal,
        model,
        effects,
        harness,
    }
}

fn host(ops: Vec<Op>) -> Host {
    host_with(ops, counting_model())
}

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
    let exec = harness_sessions::tools::executor_fn(move |_, call| {
        let last = j3.read("s", 1, None).unwrap().last().unwrap().event.kind();
        s3.lock().unwrap().push(("tool", last));
        Ok(harness_core::message::ToolResult::ok(
            &call.id,
            Default::default(),
        ))
    });
    let host = Controller::builder(journal.clone())
        .model(Arc::new(model))
        .executor(Arc::new(exec))
        .harness(
            "script",
            Arc::new(ScriptHarness::new(vec![Op::Model, Op::Tool, Op::Model])),
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

/// Rule 1: "On Resume, when your harness re-issues that request, the host serves everything
/// recorded before it, checks the re-issued request's input hash against the recorded one,
/// then invokes the provider live and records the completion after that same MODEL_CALL. It
/// never records a second MODEL_CALL or a second OUTPUT for it."
#[test]
fn resume_redrives_a_trailing_model_call_once() {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let script = ScriptHarness::new(vec![Op::Model, Op::Tool, Op::Model]);
    let crashing = Arc::new(Crashing::new(journal.clone(), Some(6)));
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(model.clone())
            .executor(dedup(&effects, &receipts))
            .harness("script", Arc::new(script.clone()))
            .build()
    };
    let first = build(crashing.clone());
    first.create_session("s", None).unwrap();
    // START, INPUT, MODEL_CALL, OUTPUT, TOOL_CALL, TOOL_RESULT fit; the 2nd MODEL_CALL does not.
    let err = block(first.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert!(matches!(err, Error::Journal(_)), "{err}");
    let host = build(journal.clone());
    // Make the second model call's record exist but not its completion.
    let crashing = Arc::new(Crashing::new(journal.clone(), Some(1)));
    let second = build(crashing);
    let _ = block(second.resume("s"));
    assert_eq!(
        kinds(&host, "s"),
        vec![
            ExecutionStart,
            Input,
            ModelCall,
            Output,
            ToolCall,
            ToolResult,
            ModelCall
        ]
    );
    let before = model.calls();
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.provider_calls, 1);
    assert_eq!(model.calls(), before + 1);
    assert_eq!(turn.executor_calls, 0, "the completed tool pair is served");
    assert_eq!(
        kinds(&host, "s"),
        vec![
            ExecutionStart,
            Input,
            ModelCall,
            Output,
            ToolCall,
            ToolResult,
            ModelCall,
            Output,
            End
        ]
    );
    assert_eq!(effects.count(), 1);
    assert!(host.verify("s").is_ok());
}

/// Rule 1: "A different input hash fails as divergence (I0) without calling the provider."
#[test]
fn resume_with_a_different_request_diverges_without_calling_the_provider() {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let run = |prefix: &str, budget| {
        let j: Arc<dyn Journal> = match budget {
            Some(n) => Arc::new(Crashing::new(journal.clone(), Some(n))),
            None => journal.clone(),
        };
        let script = ScriptHarness::new(vec![Op::Output(prefix.into()), Op::Model]);
        Controller::builder(j)
            .model(model.clone())
            .harness("script", Arc::new(script))
            .build()
    };
    let first = run("x", Some(4));
    first.create_session("s", None).unwrap();
    // START, INPUT, OUTPUT("x"), MODEL_CALL recorded; the completion is lost.
    assert!(block(first.exec(ExecRequest::text("s", "hi"))).is_err());
    // A harness that now builds another conversation: its OUTPUT differs first.
    let changed = Controller::builder(journal.clone())
        .model(model.clone())
        .harness("script", Arc::new(ScriptHarness::new(vec![Op::Model])))
        .build();
    let calls = model.calls();
    let err = block(changed.resume("s")).unwrap_err();
    assert!(matches!(err, Error::Diverged { .. }), "{err}");
    assert_eq!(model.calls(), calls, "no provider call on divergence");
    // The recorded harness recovers it.
    let turn = block(run("x", None).resume("s")).unwrap().unwrap();
    assert_eq!(turn.provider_calls, 1);
}

/// I0 on replay: "replay: model input hash mismatch — harness violated STATELESS_REPLAY
/// (I0)" (research §4).
#[test]
fn replay_detects_an_input_hash_change() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    // Same id and version, but the harness now sends another request.
    let other = Controller::builder(h.journal.clone())
        .harness("script", Arc::new(ChangedRequest))
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
            .harness("script", Arc::new(v.clone()))
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
        .harness("script", Arc::new(unversioned))
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
    let other = Controller::builder(j)
        .harness("script", Arc::new(v9))
        .build();
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
        .harness("script", Arc::new(h.harness.clone()))
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

/// Rule 4: "sink.ToolCall with UNSPECIFIED or IN_HARNESS_REPORTED → ErrUnmediatedToolCall,
/// rejected before anything is recorded"; "Every such call requires a nonempty idempotency
/// key, rejected before intent if absent".
#[test]
fn unmediated_calls_and_missing_keys_are_rejected_before_intent() {
    let journal = Arc::new(MemoryJournal::new());
    let effects = Arc::new(Effects::default());
    let host = Controller::builder(journal.clone())
        .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
        .harness("bad", Arc::new(BadCalls))
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", "go"))).unwrap();
    assert_eq!(
        turn.output,
        "rejected:unmediated|rejected:unspecified|rejected:key|"
    );
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, Output, Output, Output, End]
    );
    assert_eq!(effects.count(), 0);
    // Replay reproduces the handled rejections.
    assert_eq!(block(host.replay("s")).unwrap().executions, 1);
}

struct BadCalls;

#[async_trait::async_trait]
impl harness_core::Harness for BadCalls {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        Ok(harness_core::Descriptor::new("bad", "1"))
    }
    async fn run(
        &self,
        _start: harness_core::Start,
        sink: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        let cases = [
            ("unmediated", call_for("x", 1, Mediation::InHarnessReported)),
            ("unspecified", call_for("x", 2, Mediation::Unspecified)),
            (
                "key",
                call_for("x", 3, Mediation::ControllerMediated).with_idempotency_key(""),
            ),
        ];
        for (name, call) in cases {
            match sink.tool_call(call).await {
                Err(harness_core::SinkError::Rejected(_)) => {
                    sink.output(&format!("rejected:{name}|")).await?
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        Ok(())
    }
}

/// "Without an executor, controller-mediated calls fail closed after recording intent and
/// perform no host effect."
#[test]
fn without_an_executor_calls_fail_closed_after_intent() {
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .harness("script", Arc::new(ScriptHarness::new(vec![Op::Tool])))
        .build();
    host.create_session("s", None).unwrap();
    let err = block(host.exec(ExecRequest::text("s", "go"))).unwrap_err();
    assert!(matches!(err, Error::TurnFailed { .. }));
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, ToolCall, Error]
    );
}

/// I3 and Rule 4: "intent without a result is re-driven using the original recorded key only
/// within the same session"; "the tool side dedups on session UID plus idempotency key".
#[test]
fn resume_redrives_a_tool_intent_with_its_key_and_dedups() {
    let journal = Arc::new(MemoryJournal::new());
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let script = ScriptHarness::new(vec![Op::Tool, Op::Output("after".into())]);
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(counting_model())
            .executor(dedup(&effects, &receipts))
            .harness("script", Arc::new(script.clone()))
            .build()
    };
    // The effect runs, then the process dies before TOOL_RESULT is recorded.
    let first = build(Arc::new(Crashing::new(journal.clone(), Some(3))));
    first.create_session("s", None).unwrap();
    assert!(block(first.exec(ExecRequest::text("s", "go"))).is_err());
    assert_eq!(effects.count(), 1);
    let host = build(journal.clone());
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.executor_calls, 1, "re-driven once");
    assert_eq!(
        effects.count(),
        1,
        "the receipt was returned, the effect not repeated"
    );
    let exec_id = turn.execution_id.clone();
    assert_eq!(
        effects.keys(),
        vec![("s".to_owned(), format!("{exec_id}-0"))]
    );
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, ToolCall, ToolResult, Output, End]
    );
}

/// "A crash or fork cut before all inputs commit returns ErrInvalidExecutionLog without
/// calling Run, the model, or tools, and without appending execution records"; "Once all
/// inputs commit, resume is valid even if the crash preceded Run."
#[test]
fn resume_refuses_an_invocation_whose_inputs_did_not_all_commit() {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let script = ScriptHarness::new(vec![Op::Model]);
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(model.clone())
            .harness("script", Arc::new(script.clone()))
            .build()
    };
    let first = build(Arc::new(Crashing::new(journal.clone(), Some(2))));
    first.create_session("s", None).unwrap();
    let inputs = vec![Message::user("a"), Message::user("b")];
    assert!(block(first.exec(ExecRequest::new("s", inputs.clone()))).is_err());
    let host = build(journal.clone());
    let fence = journal.head("s").unwrap().fence;
    let err = block(host.resume("s")).unwrap_err();
    assert!(matches!(err, Error::InvalidExecutionLog(_)), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(script.runs.load(Ordering::SeqCst), 0);
    assert_eq!(model.calls(), 0);
    assert_eq!(kinds(&host, "s"), vec![ExecutionStart, Input]);
    assert_eq!(
        journal.head("s").unwrap().fence,
        fence,
        "no new writer incarnation"
    );
    // A fork cut inside the inputs is refused the same way.
    block(host.fork("s", 2, "c")).unwrap();
    assert!(matches!(
        block(host.resume("c")),
        Err(Error::InvalidExecutionLog(_))
    ));
    // All inputs committed, crash before Run: resume runs the turn.
    let first = build(Arc::new(Crashing::new(journal.clone(), Some(3))));
    first.create_session("t", None).unwrap();
    assert!(block(first.exec(ExecRequest::new("t", inputs))).is_err());
    assert_eq!(kinds(&host, "t"), vec![ExecutionStart, Input, Input]);
    let turn = block(host.resume("t")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    // An explicit zero input count is a valid inputless invocation.
    let turn = block(host.exec(ExecRequest::new("t", vec![]))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert!(
        block(host.resume("t")).unwrap().is_none(),
        "nothing to resume"
    );
}

/// Fork: "copies records 1..atSeq verbatim, and appends LIFECYCLE{FORK, detail
/// "parent@<atSeq>"}"; "The first new record (LIFECYCLE FORK) has prev_hash =
/// parent@atSeq.content_hash" (research §3, §7).
#[test]
fn fork_copies_the_prefix_and_chains_the_fork_marker() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "one"))).unwrap();
    block(h.host.exec(ExecRequest::text("s", "two"))).unwrap();
    let parent = h.host.records("s").unwrap();
    let out = block(h.host.fork("s", 5, "c")).unwrap();
    assert_eq!(out.fork_seq, 6);
    let child = h.host.records("c").unwrap();
    assert_eq!(&child[..5], &parent[..5]);
    assert_eq!(child[5].prev_hash, Some(parent[4].content_hash));
    let EventBody::Lifecycle(l) = &child[5].event.body else {
        panic!()
    };
    assert_eq!(
        (l.kind, l.detail.as_str()),
        (LifecycleKind::Fork, "parent@5")
    );
    assert!(child[5].event.execution_id.is_empty());
    assert_eq!(h.journal.meta("c").unwrap().parent.unwrap().session, "s");
    // The child's new turn sees the inherited conversation, and both replay independently.
    block(h.host.exec(ExecRequest::text("c", "three"))).unwrap();
    assert_eq!(block(h.host.replay("c")).unwrap().executions, 2);
    assert_eq!(block(h.host.replay("s")).unwrap().executions, 2);
    assert!(h.host.verify("c").is_ok());
    assert_eq!(
        block(h.host.fork("s", 99, "d")).unwrap_err().code(),
        Code::InvalidArgument
    );
}

/// "A fork whose fork point is a MODEL_CALL copies the call without any completion the parent
/// recorded later, so Resume on the child re-calls the provider once".
#[test]
fn fork_at_a_model_call_costs_one_provider_call() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "one"))).unwrap();
    block(h.host.fork("s", 3, "c")).unwrap();
    let before = h.model.calls();
    let turn = block(h.host.resume("c")).unwrap().unwrap();
    assert_eq!(turn.provider_calls, 1);
    assert_eq!(h.model.calls(), before + 1);
    assert_eq!(
        kinds(&h.host, "c"),
        vec![ExecutionStart, Input, ModelCall, Lifecycle, Output, End]
    );
    assert_eq!(block(h.host.replay("c")).unwrap().executions, 1);
}

/// "Resume returns controller.ErrInheritedToolIntent before running the harness or appending
/// any event if the unfinished execution has inherited tool intents still unresolved at the
/// journal head"; "Completed inherited pairs are served from the journal without invoking the
/// executor"; "An intent first written by the child after the fork is not inherited and can
/// be re-driven under the child's UID."
#[test]
fn fork_refuses_inherited_unresolved_intents() {
    let h = host(vec![Op::Tool, Op::Tool]);
    block(h.host.exec(ExecRequest::text("s", "go"))).unwrap();
    // s: START INPUT TOOL_CALL(3) TOOL_RESULT(4) TOOL_CALL(5) TOOL_RESULT(6) END(7)
    block(h.host.fork("s", 5, "c")).unwrap();
    let runs = h.harness.runs.load(Ordering::SeqCst);
    let len = h.host.records("c").unwrap().len();
    let err = block(h.host.resume("c")).unwrap_err();
    match &err {
        Error::InheritedToolIntent {
            tool_call_id, seq, ..
        } => {
            assert_eq!((tool_call_id.as_str(), *seq), ("call-1", 5))
        }
        other => panic!("{other}"),
    }
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(h.harness.runs.load(Ordering::SeqCst), runs);
    assert_eq!(h.host.records("c").unwrap().len(), len);
    // Fork at the result instead: the completed inherited pair is served, and the second
    // intent, first written by the child, runs under the child's UID.
    block(h.host.fork("s", 4, "d")).unwrap();
    let effects = h.effects.count();
    let turn = block(h.host.resume("d")).unwrap().unwrap();
    assert_eq!(turn.executor_calls, 1);
    assert_eq!(h.effects.count(), effects + 1);
    assert_eq!(
        h.effects.keys().last().unwrap().0,
        "d",
        "a new dedup namespace"
    );
}

/// "REQUIRES_APPROVAL parks the turn, a decision is recorded, resume delivers it" (issue);
/// "An unresolved call returns a typed *api.ApprovalParkedError: stop Run and propagate it,
/// with no END"; "approved call can return success".
#[test]
fn approval_parks_then_an_approval_runs_the_executor_once() {
    let h = host(vec![Op::Gated, Op::Model]);
    let turn = block(h.host.exec(ExecRequest::text("s", "delete it"))).unwrap();
    let TurnStatus::Parked {
        tool_call_id,
        request_seq,
    } = turn.status.clone()
    else {
        panic!("{turn:?}")
    };
    assert_eq!((tool_call_id.as_str(), request_seq), ("call-0", 4));
    assert_eq!(
        kinds(&h.host, "s"),
        vec![ExecutionStart, Input, ToolCall, ApprovalRequest, Lifecycle]
    );
    assert_eq!(h.effects.count(), 0);
    let pending = h.host.pending_approval("s").unwrap().unwrap();
    assert_eq!(pending.call.tool, "effect");
    // Resume before a decision: still parked, nothing runs.
    let err = block(h.host.resume("s")).unwrap_err();
    assert!(matches!(err, Error::ApprovalPending { .. }), "{err}");
    let decision = h.host.approve("s", "call-0", true, "ok by me").unwrap();
    assert!(h.host.pending_approval("s").unwrap().is_none());
    assert!(matches!(
        h.host.approve("s", "call-0", true, ""),
        Err(Error::NoPendingApproval(_))
    ));
    let turn = block(h.host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(h.effects.count(), 1);
    let recs = h.host.records("s").unwrap();
    let receipt = recs
        .iter()
        .find_map(|r| match &r.event.body {
            EventBody::ToolResult(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(receipt.approval_request_seq, 4);
    assert_eq!(
        receipt.approval_decision_seq,
        i64::try_from(decision).unwrap()
    );
    assert!(!receipt.is_error);
    assert_eq!(
        kinds(&h.host, "s"),
        vec![
            ExecutionStart,
            Input,
            ToolCall,
            ApprovalRequest,
            Lifecycle,
            ApprovalResult,
            Lifecycle,
            ToolResult,
            ModelCall,
            Output,
            End
        ]
    );
    // Replay serves the decision and the receipt; no executor.
    let rep = block(h.host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.executor_calls), (1, 0));
    assert_eq!(h.effects.count(), 1);
}

/// "A denial supplies APPROVAL_DENIED with IsError=true and never invokes the executor."
#[test]
fn a_denial_gives_approval_denied_and_never_runs_the_executor() {
    let h = host(vec![Op::Gated]);
    block(h.host.exec(ExecRequest::text("s", "delete it"))).unwrap();
    h.host.approve("s", "call-0", false, "not today").unwrap();
    let turn = block(h.host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(h.effects.count(), 0);
    let recs = h.host.records("s").unwrap();
    let EventBody::ToolResult(r) = &recs[recs.len() - 2].event.body else {
        panic!()
    };
    assert!(r.is_error);
    assert_eq!(r.code, ToolResultCode::ApprovalDenied);
    assert!(r.error.contains("not today"));
}

/// Rule 3 / capability matching: "A REQUIRES_MEMORY_SNAPSHOT harness on a filesystem-only
/// backend is refused up front with a FailedPrecondition"; "refuses a
/// REQUIRES_MEMORY_SNAPSHOT harness with FAILED_PRECONDITION before anything is journaled".
#[test]
fn can_place_refuses_a_memory_snapshot_harness_before_journaling() {
    let journal = Arc::new(MemoryJournal::new());
    let counter = Arc::new(CounterHarness::new());
    let host = Controller::builder(journal.clone())
        .harness("counter", counter.clone())
        .runtime(RuntimeCapabilities::filesystem_only())
        .build();
    host.create_session("s", Some("counter")).unwrap();
    let err = block(host.exec(ExecRequest::text("s", "tick"))).unwrap_err();
    assert!(matches!(err, Error::CannotPlace { .. }), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        journal.head("s").unwrap(),
        Default::default(),
        "no record, no fence"
    );
    assert_eq!(counter.count(), 0);
}

/// Reference harness 3 and I4: "it never reads s.History. The count is pure process RAM";
/// "Approval ... Memory-snapshot harnesses are refused before the effect."
#[test]
fn counter_runs_on_a_memory_runtime_and_is_never_replayed() {
    let journal = Arc::new(MemoryJournal::new());
    let counter = Arc::new(CounterHarness::new());
    let host = Controller::builder(journal.clone())
        .harness("counter", counter.clone())
        .runtime(RuntimeCapabilities {
            memory_snapshot: true,
            ..Default::default()
        })
        .build();
    host.create_session("s", Some("counter")).unwrap();
    let outs: Vec<String> = (0..3)
        .map(|_| {
            block(host.exec(ExecRequest::text("s", "tick")))
                .unwrap()
                .output
        })
        .collect();
    assert_eq!(outs, ["1", "2", "3"]);
    for (op, err) in [
        ("replay", block(host.replay("s")).unwrap_err()),
        ("fork", block(host.fork("s", 2, "c")).unwrap_err()),
    ] {
        assert!(
            matches!(err, Error::NeedsMemorySnapshot { .. }),
            "{op}: {err}"
        );
    }
    let desc = block(harness_core::Harness::describe(&*counter)).unwrap();
    assert_eq!(
        desc.capabilities.resumability,
        Resumability::RequiresMemorySnapshot
    );
    assert!(!desc.capabilities.fork_safe);
    assert_eq!(desc.version, "1");
}

/// Timestamps come from the host's clock; the library reads none.
#[test]
fn timestamps_come_from_the_clock() {
    let clock = Arc::new(|| Some(Timestamp::new(1_700_000_000, 0)));
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(counting_model())
        .harness("echo", Arc::new(EchoHarness))
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

/// Echo: "It sends the last input to the model through the sink and lets the recorded
/// completion be the output"; "It does not call sink.Output."
#[test]
fn echo_sends_the_last_input_and_never_outputs() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let model = Hooked {
        inner: ScriptedModel::echo(),
        hook: Box::new(move |req: &ModelRequest| s2.lock().unwrap().push(req.clone())),
    };
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(Arc::new(model))
        .harness("echo", Arc::new(EchoHarness))
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::new(
        "s",
        vec![Message::user("first"), Message::user("last")],
    )))
    .unwrap();
    assert_eq!(turn.output, "You said: last");
    let req = seen.lock().unwrap()[0].clone();
    assert_eq!(
        req,
        ModelRequest::new(vec![Message::user("last")]).with_model("echo")
    );
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, Input, ModelCall, Output, End]
    );
}

/// The journal's single-writer order: a zombie controller whose fence was superseded cannot
/// append ("The log rejects a lower fence").
#[test]
fn a_superseded_writer_is_fenced() {
    let journal = Arc::new(MemoryJournal::new());
    journal
        .create(
            "s",
            &harness_sessions::journal::SessionMeta {
                harness: "x".into(),
                parent: None,
            },
        )
        .unwrap();
    let old = journal.acquire_fence("s").unwrap();
    let _new = journal.acquire_fence("s").unwrap();
    let r = harness_sessions::Record::seal(
        harness_core::event::Event::new("e", EventBody::Output(Message::assistant("late"))),
        1,
        None,
        old,
    )
    .unwrap();
    let err: Error = journal.append("s", 0, old, &[r]).unwrap_err().into();
    assert_eq!(err.code(), Code::Aborted);
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

/// No panic on any input: a store whose head is already at `u64::MAX` (a hostile or broken
/// journal) has no next seq. Exec, fork and the store's append report it; nothing panics.
#[test]
fn a_head_at_u64_max_is_an_error_not_an_overflow() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    let last = h.host.records("s").unwrap().pop().unwrap();
    let forged =
        harness_sessions::Record::seal(last.event.clone(), u64::MAX, last.prev_hash, last.fence)
            .unwrap();
    h.journal.tamper("s", last.seq, forged.clone()).unwrap();
    assert_eq!(h.journal.head("s").unwrap().seq, u64::MAX);
    let err = block(h.host.exec(ExecRequest::text("s", "again"))).unwrap_err();
    assert!(matches!(err, Error::Journal(_)), "{err}");
    // The fork copies the prefix up to that head; its FORK marker has no seq left.
    let err = block(h.host.fork("s", u64::MAX, "c")).unwrap_err();
    assert!(matches!(err, Error::Journal(_)), "{err}");
    let f = h.journal.acquire_fence("s").unwrap();
    let next = harness_sessions::Record::seal(last.event, 1, Some(forged.content_hash), f).unwrap();
    assert!(h.journal.append("s", u64::MAX, f, &[next]).is_err());
}

/// Appends events as a v0.1.2 host wrote them: no execution ids, no start markers.
fn append_legacy(journal: &MemoryJournal, session: &str, bodies: Vec<EventBody>) {
    let fence = journal.acquire_fence(session).unwrap();
    for body in bodies {
        let head = journal.head(session).unwrap();
        let r = harness_sessions::Record::seal(
            harness_core::event::Event::new("", body),
            head.seq + 1,
            head.hash,
            fence,
        )
        .unwrap();
        journal.append(session, head.seq, fence, &[r]).unwrap();
    }
}

/// Rule 1: "This applies to journals with execution IDs; a v0.1.2 journal without them is not
/// re-driven, and Resume fails with “recorded completion missing” without calling the
/// provider." and "A legacy END or ERROR finishes the turn, making Resume a no-op." An
/// unfinished legacy turn is not "nothing to resume": resume refuses it (FAILED_PRECONDITION)
/// without running anything or appending; a finished one is a no-op; a new Exec supersedes
/// the unfinished legacy tail.
#[test]
fn resume_refuses_an_unfinished_legacy_turn_and_skips_a_finished_one() {
    let h = host(vec![Op::Model]);
    append_legacy(
        &h.journal,
        "s",
        vec![
            EventBody::Input(Message::user("old")),
            EventBody::ModelCall(Default::default()),
        ],
    );
    let head = h.journal.head("s").unwrap();
    let err = block(h.host.resume("s")).unwrap_err();
    assert!(matches!(err, Error::Legacy(_)), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        h.journal.head("s").unwrap(),
        head,
        "nothing appended, no fence"
    );
    assert_eq!(
        (h.model.calls(), h.harness.runs.load(Ordering::SeqCst)),
        (0, 0)
    );
    // A legacy END finishes the turn: resume is a no-op.
    append_legacy(
        &h.journal,
        "s",
        vec![EventBody::End(harness_core::event::HarnessEnd::completed())],
    );
    assert!(block(h.host.resume("s")).unwrap().is_none());
    // An unfinished legacy tail after that, then a new Exec supersedes it.
    append_legacy(
        &h.journal,
        "s",
        vec![EventBody::Input(Message::user("again"))],
    );
    assert!(matches!(block(h.host.resume("s")), Err(Error::Legacy(_))));
    let turn = block(h.host.exec(ExecRequest::text("s", "new"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert!(block(h.host.resume("s")).unwrap().is_none());
}

/// "unresolved inherited tool intents still cannot be resumed"; "Resume refuses an unfinished
/// inherited execution if an inherited tool intent still lacks a matching result at the
/// journal head, rather than re-driving the parent's effect under the child UID." A decision
/// on a gated call the child inherited could never be delivered, so approve refuses it too
/// (FAILED_PRECONDITION) and appends nothing; the parent's request is still decided in the
/// parent, and the child can still supersede it with a new turn.
#[test]
fn an_inherited_approval_request_cannot_be_decided_in_the_child() {
    let h = host(vec![Op::Gated]);
    let turn = block(h.host.exec(ExecRequest::text("s", "delete it"))).unwrap();
    assert!(matches!(turn.status, TurnStatus::Parked { .. }));
    let at = h.journal.head("s").unwrap().seq;
    block(h.host.fork("s", at, "c")).unwrap();
    let pending = h.host.pending_approval("c").unwrap().unwrap();
    let head = h.journal.head("c").unwrap();
    for approved in [true, false] {
        let err = h
            .host
            .approve("c", &pending.call.id, approved, "")
            .unwrap_err();
        assert!(matches!(err, Error::InheritedToolIntent { .. }), "{err}");
        assert_eq!(err.code(), Code::FailedPrecondition);
    }
    assert_eq!(
        h.journal.head("c").unwrap(),
        head,
        "nothing appended, no fence"
    );
    h.host.approve("s", &pending.call.id, false, "no").unwrap();
    assert_eq!(
        block(h.host.resume("s")).unwrap().unwrap().status,
        TurnStatus::Completed
    );
    assert_eq!(h.effects.count(), 0);
}

/// Records the `Start` of every run.
struct Recorder(Arc<Mutex<Vec<harness_core::Start>>>);

#[async_trait::async_trait]
impl harness_core::Harness for Recorder {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        Ok(harness_core::Descriptor::new("rec", "1"))
    }
    async fn run(
        &self,
        start: harness_core::Start,
        sink: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        self.0.lock().unwrap().push(start.clone());
        sink.model(ModelRequest::new(start.inputs).with_model("m"))
            .await?;
        Ok(())
    }
}

/// "Controller replay and interrupted recovery restore the original Start.Inputs from the
/// journal"; config "the host always journals it before calling the harness and restores them
/// verbatim for controller replay, interrupted-turn resume"; "ResumeFromSeq is journaled at
/// the same boundary"; "The current execution's host-owned EXECUTION_START is excluded from
/// History; prior executions' start markers remain in the exact history prefix";
/// "Experimental markers lacking the count fail closed when reconstructed".
#[test]
fn resume_and_replay_rebuild_start_from_the_journal() {
    let journal = Arc::new(MemoryJournal::new());
    let starts = Arc::new(Mutex::new(Vec::new()));
    let model = counting_model();
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(model.clone())
            .harness("rec", Arc::new(Recorder(starts.clone())))
            .build()
    };
    let host = build(journal.clone());
    host.create_session("s", None).unwrap();
    block(host.exec(ExecRequest::text("s", "one"))).unwrap();
    // Turn 2 dies after START, INPUT, INPUT, MODEL_CALL.
    let mut req = ExecRequest::new("s", vec![Message::user("a"), Message::user("b")])
        .with_config(b"\x01cfg".to_vec());
    req.resume_from_seq = -7;
    assert!(block(build(Arc::new(Crashing::new(journal.clone(), Some(4)))).exec(req)).is_err());
    block(host.resume("s")).unwrap().unwrap();
    block(host.replay("s")).unwrap();
    let starts = starts.lock().unwrap().clone();
    // exec 1, exec 2 (crashed), resume 2, replay 1, replay 2.
    assert_eq!(starts.len(), 5);
    for s in [&starts[1], &starts[2], &starts[4]] {
        assert_eq!(s.inputs, vec![Message::user("a"), Message::user("b")]);
        assert_eq!(
            (s.config.as_slice(), s.resume_from_seq),
            (&b"\x01cfg"[..], -7)
        );
        assert_eq!(s.execution_id, starts[1].execution_id);
        // History: turn 1 whole (its start marker included), not turn 2's own marker.
        let kinds: Vec<EventKind> = s.history.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds, vec![ExecutionStart, Input, ModelCall, Output, End]);
    }
    assert_eq!(starts[0].history, starts[3].history);
    assert!(starts[3].history.is_empty());

    // A start marker without an input count fails closed, on resume and on replay, without
    // running the harness or calling the provider.
    let j2 = Arc::new(MemoryJournal::new());
    let host2 = build(j2.clone());
    host2.create_session("t", None).unwrap();
    let f = j2.acquire_fence("t").unwrap();
    let marker = harness_core::event::ExecutionStart {
        harness: "rec".into(),
        harness_version: "1".into(),
        input_count: None,
        ..Default::default()
    };
    let r1 = harness_sessions::Record::seal(
        harness_core::event::Event::new("x1", EventBody::ExecutionStart(marker)),
        1,
        None,
        f,
    )
    .unwrap();
    j2.append("t", 0, f, std::slice::from_ref(&r1)).unwrap();
    let calls = model.calls();
    let err = block(host2.resume("t")).unwrap_err();
    assert!(matches!(err, Error::InvalidExecutionLog(_)), "{err}");
    let end = harness_sessions::Record::seal(
        harness_core::event::Event::new(
            "x1",
            EventBody::End(harness_core::event::HarnessEnd::completed()),
        ),
        2,
        Some(r1.content_hash),
        f,
    )
    .unwrap();
    j2.append("t", 1, f, &[end]).unwrap();
    let err = block(host2.replay("t")).unwrap_err();
    assert!(matches!(err, Error::InvalidExecutionLog(_)), "{err}");
    assert_eq!(model.calls(), calls);
}

/// What a harness does with the sink around an approval gate.
#[derive(Clone, Copy, PartialEq)]
enum GateCase {
    /// Reports a result carrying host receipt fields (each variant in turn).
    ForgeReceipts,
    /// Catches the park and keeps using the sink, then returns Ok.
    IgnorePark,
    /// A memory-snapshot harness asks for a gated call.
    MemorySnapshot,
}

struct Gate(GateCase);

#[async_trait::async_trait]
impl harness_core::Harness for Gate {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        let mut d = harness_core::Descriptor::new("gate", "1");
        if self.0 == GateCase::MemorySnapshot {
            d.capabilities.resumability = Resumability::RequiresMemorySnapshot;
        }
        Ok(d)
    }
    async fn run(
        &self,
        start: harness_core::Start,
        sink: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        use harness_core::SinkError;
        use harness_core::message::{JsonObject, ToolResult};
        match self.0 {
            GateCase::ForgeReceipts => {
                let base = || ToolResult::error("own", "failed");
                let mut a = base();
                a.approval_request_seq = 3;
                let mut b = base();
                b.approval_decision_seq = 4;
                for (i, r) in [
                    a,
                    b,
                    base().with_code(ToolResultCode::ApprovalDenied),
                    base().with_code(ToolResultCode::ExecutorError),
                ]
                .into_iter()
                .enumerate()
                {
                    match sink.report(r).await {
                        Err(SinkError::Rejected(_)) => {
                            sink.output(&format!("rejected {i}|")).await?
                        }
                        other => panic!("{i}: {other:?}"),
                    }
                }
                sink.report(base()).await?;
            }
            GateCase::IgnorePark => {
                let call = call_for(&start.execution_id, 0, Mediation::RequiresApproval);
                let parked = sink.tool_call(call).await;
                assert!(matches!(parked, Err(SinkError::ApprovalParked { .. })));
                // "stop Run and propagate it, with no END or later model/tool/sink operation"
                assert!(sink.output("after the park").await.is_err());
                assert!(sink.model(ModelRequest::new(vec![])).await.is_err());
                assert!(sink.usage(Default::default()).await.is_err());
                assert!(
                    sink.report(ToolResult::ok("x", JsonObject::new()))
                        .await
                        .is_err()
                );
            }
            GateCase::MemorySnapshot => {
                let call = call_for(&start.execution_id, 0, Mediation::RequiresApproval);
                match sink.tool_call(call).await {
                    Err(SinkError::Rejected(_)) => sink.output("refused").await?,
                    other => panic!("{other:?}"),
                }
            }
        }
        Ok(())
    }
}

/// "do not forge approval request/decision or host receipt fields with sink.Report"; "stop
/// Run and propagate it, with no END or later model/tool/sink operation"; "REQUIRES_APPROVAL
/// uses the same executor after a durable decision, for STATELESS_REPLAY only";
/// "Memory-snapshot harnesses are refused before the effect".
#[test]
fn the_approval_gate_is_host_owned() {
    let run = |case: GateCase| {
        let journal = Arc::new(MemoryJournal::new());
        let effects = Arc::new(Effects::default());
        let host = Controller::builder(journal.clone())
            .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
            .harness("gate", Arc::new(Gate(case)))
            .runtime(RuntimeCapabilities {
                memory_snapshot: true,
                ..Default::default()
            })
            .build();
        host.create_session("s", None).unwrap();
        let turn = block(host.exec(ExecRequest::text("s", "go"))).unwrap();
        assert_eq!(effects.count(), 0);
        (turn, kinds(&host, "s"))
    };
    // Every host receipt field is refused on sink.report, before anything is recorded; a
    // plain failed result is reported.
    let (turn, k) = run(GateCase::ForgeReceipts);
    assert_eq!(turn.output, "rejected 0|rejected 1|rejected 2|rejected 3|");
    assert_eq!(
        k,
        vec![
            ExecutionStart,
            Input,
            Output,
            Output,
            Output,
            Output,
            ToolResult,
            End
        ]
    );
    // A parked turn takes no further sink operation and records no END, whatever the
    // harness returns.
    let (turn, k) = run(GateCase::IgnorePark);
    assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
    assert_eq!(
        k,
        vec![ExecutionStart, Input, ToolCall, ApprovalRequest, Lifecycle]
    );
    // A memory-snapshot harness's gated call is refused before its intent is recorded.
    let (turn, k) = run(GateCase::MemorySnapshot);
    assert_eq!(turn.output, "refused");
    assert_eq!(k, vec![ExecutionStart, Input, Output, End]);
}

/// Rule 4: the executor "dedups on session UID plus idempotency key", and "If an effect
/// succeeds but its journal result append fails, recovery must retrieve that session's
/// original receipt rather than repeat the effect": a receipt answers a re-drive of *its*
/// call. Harnesses derive keys from `Start::execution_id`, so an execution id must never
/// name two different invocations of a session. When a turn's records are lost while the
/// durable receipts are not (a power loss under `Durability::EveryTurn` loses the turn in
/// flight), the next Exec at the same position with other inputs must get another id, so
/// its effect runs instead of being answered with the lost turn's receipt.
#[test]
fn a_lost_turn_never_lends_its_receipts_to_another_invocation() {
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let script = ScriptHarness::new(vec![Op::Tool]);
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .executor(dedup(&effects, &receipts))
            .harness("script", Arc::new(script.clone()))
            .build()
    };
    // The journal as it was durable before the turn: the session, no records.
    let durable = Arc::new(MemoryJournal::new());
    build(durable.clone()).create_session("s", None).unwrap();
    // The turn runs on a copy that is then lost (its records never reached the disk).
    let volatile = Arc::new(MemoryJournal::new());
    build(volatile.clone()).create_session("s", None).unwrap();
    let lost = block(build(volatile.clone()).exec(ExecRequest::text("s", "send A"))).unwrap();
    assert_eq!(effects.count(), 1);
    // After the restart, another invocation at the same position.
    let turn = block(build(durable.clone()).exec(ExecRequest::text("s", "send B"))).unwrap();
    assert_ne!(turn.execution_id, lost.execution_id);
    assert_eq!(turn.executor_calls, 1);
    assert_eq!(effects.count(), 2, "the new call's effect ran");
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

/// A provider that is pending once before it answers, so concurrent turns interleave.
struct Slow(Arc<ScriptedModel>);

#[async_trait::async_trait]
impl harness_core::model::Model for Slow {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> harness_core::model::ModelStream<'a> {
        let mut yielded = false;
        let pause = futures::stream::poll_fn(move |cx| {
            if yielded {
                std::task::Poll::Ready(None)
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        });
        Box::pin(futures::StreamExt::chain(pause, self.0.stream(req)))
    }
}

/// Rule 1: "a cut during a model call costs at most one extra provider call. That bound
/// holds within one host, where the placement layer's per-session guard serializes Exec,
/// Suspend and Resume". Two resumes of the same interrupted turn racing on one host must not
/// both re-drive its MODEL_CALL: the second waits for the first, then finds nothing to resume.
#[test]
fn concurrent_resumes_on_one_host_call_the_provider_once() {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(Arc::new(Slow(model.clone())))
            .harness("script", Arc::new(ScriptHarness::new(vec![Op::Model])))
            .build()
    };
    build(journal.clone()).create_session("s", None).unwrap();
    // START, INPUT, MODEL_CALL reach the journal; the completion does not.
    assert!(
        block(
            build(Arc::new(Crashing::new(journal.clone(), Some(3))))
                .exec(ExecRequest::text("s", "go"))
        )
        .is_err()
    );
    let calls = model.calls();
    let host = build(journal.clone());
    let (a, b) = block(futures::future::join(host.resume("s"), host.resume("s")));
    let done: Vec<_> = [a, b]
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(done.iter().filter(|t| t.is_some()).count(), 1, "{done:?}");
    assert_eq!(model.calls(), calls + 1, "one provider call for one cut");
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, ModelCall, Output, End]
    );
    // Concurrent execs on one session run one after the other, both complete.
    let (a, b) = block(futures::future::join(
        host.exec(ExecRequest::text("s", "a")),
        host.exec(ExecRequest::text("s", "b")),
    ));
    assert_eq!(a.unwrap().status, TurnStatus::Completed);
    assert_eq!(b.unwrap().status, TurnStatus::Completed);
    assert!(host.verify("s").is_ok());
    assert_eq!(block(host.replay("s")).unwrap().executions, 3);
}

/// Logs the writes a controller makes to its journal.
struct Logged<J> {
    inner: J,
    log: Mutex<Vec<&'static str>>,
}

impl<J: Journal> Journal for Logged<J> {
    fn create(
        &self,
        s: &str,
        m: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.inner.create(s, m)
    }
    fn meta(
        &self,
        s: &str,
    ) -> Result<harness_sessions::journal::SessionMeta, harness_sessions::JournalError> {
        self.inner.meta(s)
    }
    fn sessions(&self) -> Result<Vec<String>, harness_sessions::JournalError> {
        self.inner.sessions()
    }
    fn head(
        &self,
        s: &str,
    ) -> Result<harness_sessions::record::Head, harness_sessions::JournalError> {
        self.inner.head(s)
    }
    fn acquire_fence(&self, s: &str) -> Result<u64, harness_sessions::JournalError> {
        self.log.lock().unwrap().push("fence");
        self.inner.acquire_fence(s)
    }
    fn append(
        &self,
        s: &str,
        e: u64,
        f: u64,
        r: &[harness_sessions::Record],
    ) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("append");
        self.inner.append(s, e, f, r)
    }
    fn read(
        &self,
        s: &str,
        from: u64,
        to: Option<u64>,
    ) -> Result<Vec<harness_sessions::Record>, harness_sessions::JournalError> {
        self.inner.read(s, from, to)
    }
    fn fork(
        &self,
        p: &str,
        at: u64,
        c: &str,
        m: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("fork");
        self.inner.fork(p, at, c, m)
    }
    fn sync(&self, s: &str) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("sync");
        self.inner.sync(s)
    }
}

/// Issue: "durability policy explicit (fsync per turn by default, configurable)": the
/// controller ends every operation that wrote records with the journal's durability point
/// (`Journal::sync`, where the file journal fsyncs by default), whatever the outcome:
/// completed, failed, parked, approved, forked, or cut short by a journal failure.
#[test]
fn every_operation_that_writes_ends_at_a_durability_point() {
    let mem = Arc::new(MemoryJournal::new());
    let model = Arc::new(
        ScriptedModel::new()
            .reply("one")
            .fail(ModelError::Provider("down".into()))
            .otherwise(|_| Ok(Message::assistant("ok"))),
    );
    let effects = Arc::new(Effects::default());
    let run = |budget: Option<usize>, op: &dyn Fn(&Controller)| {
        let logged = Arc::new(Logged {
            inner: Crashing::new(mem.clone(), budget),
            log: Mutex::new(Vec::new()),
        });
        let host = Controller::builder(logged.clone())
            .model(model.clone())
            .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
            .harness("script", Arc::new(ScriptHarness::new(vec![Op::Model])))
            .harness("gated", Arc::new(ScriptHarness::new(vec![Op::Gated])))
            .build();
        op(&host);
        let log = logged.log.lock().unwrap().clone();
        assert!(log.contains(&"append"), "{log:?}");
        assert_eq!(log.last(), Some(&"sync"), "{log:?}");
    };
    run(None, &|h| {
        h.create_session("s", Some("script")).unwrap();
        block(h.exec(ExecRequest::text("s", "completed"))).unwrap();
    });
    run(None, &|h| {
        assert!(block(h.exec(ExecRequest::text("s", "failed"))).is_err());
    });
    run(None, &|h| {
        block(h.resume("s")).unwrap().unwrap();
    });
    run(Some(3), &|h| {
        assert!(block(h.exec(ExecRequest::text("s", "cut"))).is_err());
    });
    run(None, &|h| {
        let t = block(h.exec(ExecRequest::text("s", "parked").with_harness("gated"))).unwrap();
        assert!(matches!(t.status, TurnStatus::Parked { .. }));
    });
    run(None, &|h| {
        h.approve("s", "call-0", true, "").unwrap();
    });
    run(None, &|h| {
        block(h.fork("s", 3, "c")).unwrap();
    });
}

/// A harness that cannot describe itself (a remote one that does not answer).
struct Silent;

#[async_trait::async_trait]
impl harness_core::Harness for Silent {
    async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
        Err(harness_core::HarnessError::failed("connection refused"))
    }
    async fn run(
        &self,
        _: harness_core::Start,
        _: &mut dyn harness_core::EventSink,
    ) -> Result<(), harness_core::HarnessError> {
        panic!("never run")
    }
}

/// "If nothing answers at the address when an exec, resume, or fork is admitted (the
/// connection is refused, or the harness has not answered Describe ...), the call fails with
/// UNAVAILABLE and nothing is journaled, so it is safe to retry".
#[test]
fn a_harness_that_does_not_describe_itself_is_unavailable_and_nothing_is_journaled() {
    let journal = Arc::new(MemoryJournal::new());
    let host = Controller::builder(journal.clone())
        .harness("silent", Arc::new(Silent))
        .build();
    host.create_session("s", None).unwrap();
    let head = journal.head("s").unwrap();
    let err = block(host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert!(matches!(err, Error::Describe(_)), "{err}");
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.code().grpc(), 14);
    let err = block(host.fork("s", 0, "c")).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(
        journal.head("s").unwrap(),
        head,
        "nothing journaled, no fence"
    );
    assert!(journal.meta("c").is_err(), "no child created");
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

/// Every other operation on an unknown session is NOT_FOUND, and on an unusable uid
/// INVALID_ARGUMENT; `verify` is no different (it said INTERNAL, which tells a caller the
/// host broke rather than that the session does not exist).
#[test]
fn verify_maps_journal_errors_like_every_other_operation() {
    let h = host_with(vec![], counting_model());
    let err = h.host.verify("nope").unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    assert_eq!(
        err.code(),
        h.host.records("nope").unwrap_err().code(),
        "records and verify agree"
    );
    let dir = std::env::temp_dir().join(format!("hs-verify-codes-{}", std::process::id()));
    let files = Arc::new(harness_sessions::journal::FileJournal::open(&dir).unwrap());
    let host = Controller::builder(files).build();
    let err = host.verify("../x").unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let err = host.verify("nope").unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
