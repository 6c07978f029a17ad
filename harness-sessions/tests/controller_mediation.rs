//! Tool mediation (Rule 4: "pick a tool mediation tier, and set idempotency keys"; "Host
//! composition for controller-mediated tools"): rejection before intent, failing closed, the
//! re-driven intent and its receipt. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use EventKind::*;
use common::*;
use harness_core::event::EventKind;
use harness_core::message::Mediation;
use harness_sessions::Error;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;

/// Rule 4: "sink.ToolCall with UNSPECIFIED or IN_HARNESS_REPORTED → ErrUnmediatedToolCall,
/// rejected before anything is recorded"; "Every such call requires a nonempty idempotency
/// key, rejected before intent if absent".
#[test]
fn unmediated_calls_and_missing_keys_are_rejected_before_intent() {
    let journal = Arc::new(MemoryJournal::new());
    let effects = Arc::new(Effects::default());
    let host = Controller::builder(journal.clone())
        .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
        .harness("bad", BadCalls)
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
        .harness("script", ScriptHarness::new(vec![Op::Tool]))
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
            .harness("script", script.clone())
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
            .harness("script", script.clone())
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
