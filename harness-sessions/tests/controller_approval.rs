//! Approval-gated calls ("REQUIRES_APPROVAL parks the turn, a decision is recorded, resume
//! delivers it"): parking, approval, denial, the host-owned gate and inherited requests. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use EventKind::*;
use common::*;
use harness_core::Resumability;
use harness_core::event::{EventBody, EventKind};
use harness_core::message::{Mediation, ModelRequest, ToolResultCode};
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::{Code, Error};

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
            .harness("gate", Gate(case))
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

/// The same rules on every host (harness_core::tool::rules::gate): a call of a tool the host
/// registered `requires_approval` is gated even when the call says CONTROLLER_MEDIATED, and is
/// journaled as the spec's approval gate ("Set MediationRequiresApproval and a nonempty call
/// ID/idempotency key before sink.ToolCall. Never run the gated effect inside the harness. The
/// stateless host owns TOOL_CALL, APPROVAL_REQUEST, the later APPROVAL_RESULT, and the
/// receipt."). Replay re-gates the call the harness re-emits, so it matches what was recorded.
#[test]
fn a_tool_registered_requires_approval_is_gated_whatever_the_call_says() {
    let effects = Arc::new(Effects::default());
    let host = Controller::builder(MemoryJournal::new())
        .model(counting_model())
        .tools(harness_core::Tools::new().with(effects.tool().requires_approval()))
        .receipts(MemoryReceipts::default())
        .harness("script", ScriptHarness::new(vec![Op::Tool, Op::Model]))
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", "go"))).unwrap();
    assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
    assert_eq!(effects.count(), 0, "the gated tool did not run");
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, ToolCall, ApprovalRequest, Lifecycle]
    );
    let recs = host.records("s").unwrap();
    let EventBody::ToolCall(intent) = &recs[2].event.body else {
        panic!()
    };
    assert_eq!(intent.mediation, Mediation::RequiresApproval);
    let pending = host.pending_approval("s").unwrap().unwrap();
    host.approve("s", &pending.call.id, true, "").unwrap();
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(effects.count(), 1);
    let rep = block(host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.executor_calls), (1, 0));
    assert_eq!(effects.count(), 1);
}

/// A denied call never runs, and the harness gets the denial every host gives
/// (`ToolResult::denied`): "A denial supplies APPROVAL_DENIED with IsError=true and never
/// invokes the executor."
#[test]
fn a_denial_is_the_words_every_host_uses() {
    let h = host(vec![Op::Gated]);
    block(h.host.exec(ExecRequest::text("s", "delete it"))).unwrap();
    h.host.approve("s", "call-0", false, "").unwrap();
    block(h.host.resume("s")).unwrap().unwrap();
    let recs = h.host.records("s").unwrap();
    let EventBody::ToolResult(r) = &recs[recs.len() - 2].event.body else {
        panic!()
    };
    let mut expected = harness_core::message::ToolResult::denied("call-0", "");
    expected.approval_request_seq = r.approval_request_seq;
    expected.approval_decision_seq = r.approval_decision_seq;
    assert_eq!(*r, expected);
    assert_eq!(h.effects.count(), 0);
}
