//! Resume (Rule 1: "a cut during a model call costs at most one extra provider call"): the
//! re-driven MODEL_CALL, divergence, uncommitted inputs, legacy turns, the rebuilt `Start` and
//! the per-session guard. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use EventKind::*;
use common::*;
use harness_core::event::{EventBody, EventKind};
use harness_core::message::{Message, ModelRequest};
use harness_core::model::ScriptedModel;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::{Code, Error};

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
            .harness("script", script.clone())
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
            .harness("script", script)
            .build()
    };
    let first = run("x", Some(4));
    first.create_session("s", None).unwrap();
    // START, INPUT, OUTPUT("x"), MODEL_CALL recorded; the completion is lost.
    assert!(block(first.exec(ExecRequest::text("s", "hi"))).is_err());
    // A harness that now builds another conversation: its OUTPUT differs first.
    let changed = Controller::builder(journal.clone())
        .model(model.clone())
        .harness("script", ScriptHarness::new(vec![Op::Model]))
        .build();
    let calls = model.calls();
    let err = block(changed.resume("s")).unwrap_err();
    assert!(matches!(err, Error::Diverged { .. }), "{err}");
    assert_eq!(model.calls(), calls, "no provider call on divergence");
    // The recorded harness recovers it.
    let turn = block(run("x", None).resume("s")).unwrap().unwrap();
    assert_eq!(turn.provider_calls, 1);
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
            .harness("script", script.clone())
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
/// provider." and "A legacy END or ERROR finishes the turn, making Resume a no-op." A legacy
/// turn cut after its MODEL_CALL is refused (FAILED_PRECONDITION) without running anything or
/// appending; a finished one is a no-op; an unfinished legacy INPUT is continued ("Legacy
/// Resume selects only the last INPUT and continues the invocation"); a new Exec supersedes
/// an unfinished legacy tail. (tests/legacy.rs runs the real v0.1.2 journals.)
#[test]
fn resume_refuses_a_cut_legacy_model_call_and_skips_a_finished_turn() {
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
    assert!(
        err.to_string().contains("recorded completion missing"),
        "{err}"
    );
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
    // An unfinished legacy tail after that is continued from its last INPUT, without ids.
    append_legacy(
        &h.journal,
        "s",
        vec![EventBody::Input(Message::user("again"))],
    );
    let turn = block(h.host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(h.model.calls(), 1);
    assert!(common::all_legacy_ids(&h.host, "s"));
    // Another unfinished legacy INPUT, superseded by a new Exec.
    append_legacy(
        &h.journal,
        "s",
        vec![EventBody::Input(Message::user("more"))],
    );
    let turn = block(h.host.exec(ExecRequest::text("s", "new"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert!(block(h.host.resume("s")).unwrap().is_none());
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
            .harness("rec", Recorder(starts.clone()))
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
            .model(Slow(model.clone()))
            .harness("script", ScriptHarness::new(vec![Op::Model]))
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
