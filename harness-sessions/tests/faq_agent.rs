//! The tour's FAQ agent on the agentsessions host (`common::faq`), what only this host shows:
//! the journal of a gated `refund` (gated by the agent's call, or only by the host's
//! registry), exactly once when approved across a crash at every cut of the approval path,
//! and the journal of a question this host cannot ask. The expectations every host shares
//! (denial, hand-off, the question where one can be asked) are the root crate's
//! `tests/faq_every_host/`. Each test quotes the words it checks
//! (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::approval_rig::recover_at_every_cut_on_the_approval_path;
use common::faq::{faq_host, faq_rig};
use common::*;
use harness_core::event::EventBody;
use harness_core::message::Mediation;
use harness_sessions::Error;
use harness_sessions::controller::{ExecRequest, TurnStatus};

const REFUND: &str = "Please refund order 42";

/// The recorded tool calls of session `s`.
fn tool_calls(h: &common::faq::FaqHost) -> Vec<harness_core::message::ToolCall> {
    h.host
        .records("s")
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event.body {
            EventBody::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// "Approval-gated calls ... Never run the gated effect inside the harness. The stateless host
/// owns TOOL_CALL, APPROVAL_REQUEST, the later APPROVAL_RESULT, and the receipt"; "An
/// unresolved call returns a typed *api.ApprovalParkedError: stop Run and propagate it, with
/// no END". The refund parks the turn, and resuming it before a decision runs nothing.
#[test]
fn the_gated_refund_never_runs_without_an_approval() {
    for ungated in [false, true] {
        let h = faq_host(ungated);
        let turn = block(h.host.exec(ExecRequest::text("s", REFUND))).unwrap();
        assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
        assert_eq!(
            kind_names(&h.host, "s"),
            "EXECUTION_START INPUT MODEL_CALL OUTPUT TOOL_CALL APPROVAL_REQUEST LIFECYCLE"
        );
        // Gated by the agent's call, or (ungated) by the host's registry: journaled the same.
        assert_eq!(tool_calls(&h)[0].mediation, Mediation::RequiresApproval);
        let err = block(h.host.resume("s")).unwrap_err();
        assert!(matches!(err, Error::ApprovalPending { .. }), "{err}");
        assert_eq!(h.payments.count(), 0, "ungated={ungated}");
    }
}

/// "On decided Resume, rebuild the same call from the original inputs/config and keep its
/// identity/key ... An approved call can return success"; "For any side-effecting tool, the
/// harness chooses ToolCall.IdempotencyKey, unique only within its session": the refund runs
/// once, with the call's key, and the agent says it is done. Replay runs nothing.
#[test]
fn an_approved_refund_runs_exactly_once_with_its_key() {
    for ungated in [false, true] {
        let h = faq_host(ungated);
        block(h.host.exec(ExecRequest::text("s", REFUND))).unwrap();
        let pending = h.host.pending_approval("s").unwrap().unwrap();
        assert_eq!(pending.call.tool, "refund");
        h.host.approve("s", &pending.call.id, true, "ok").unwrap();
        let turn = block(h.host.resume("s")).unwrap().unwrap();
        assert_eq!(turn.status, TurnStatus::Completed);
        assert_eq!(turn.output, "Done: refunded order 42.");
        let key = &tool_calls(&h)[0].idempotency_key;
        let paid = h.payments.paid();
        assert_eq!(paid.len(), 1, "ungated={ungated}");
        assert_eq!(
            (
                paid[0].session_uid.as_str(),
                &paid[0].idempotency_key,
                paid[0].order_id
            ),
            ("s", key, 42),
            "ungated={ungated}"
        );
        let calls = h.model.calls();
        let rep = block(h.host.replay("s")).unwrap();
        assert_eq!((rep.executions, rep.provider_calls), (1, 0));
        assert_eq!((h.model.calls(), h.payments.count()), (calls, 1));
    }
}

/// I3: "A crash between an effect's intent and its result is re-driven at most once.
/// Host-executed tools carry an idempotency key so the re-drive dedups": the FAQ turn cut
/// after each record, before the park or in the resume after the approval, and recovered:
/// the refund ran exactly once, after its decision (gated by the agent's call, or by the
/// host's registry).
#[test]
fn an_approved_refund_runs_exactly_once_across_a_crash_and_resume() {
    for ungated in [false, true] {
        recover_at_every_cut_on_the_approval_path(&|| faq_rig(ungated), REFUND);
    }
}

/// The spec's EventSink has no question: this host does not offer `Feature::Questions`, so
/// the agent asks no "Which day?" and gives the week's hours; nothing about a question is
/// journaled. Its reasoning around the look-up is (two OUTPUT records of reasoning parts,
/// before the model call).
#[test]
fn which_day_is_not_asked_here_and_the_agent_gives_the_week() {
    let h = faq_host(false);
    let turn = block(h.host.exec(ExecRequest::text("s", "When are you open?"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.output, "We're open 8am to 6pm on weekdays.");
    assert!(tool_calls(&h)[0].args.get("day").is_none());
    assert_eq!(
        kind_names(&h.host, "s"),
        "EXECUTION_START INPUT OUTPUT OUTPUT MODEL_CALL OUTPUT TOOL_CALL TOOL_RESULT MODEL_CALL OUTPUT END"
    );
    let reasoning: Vec<_> = h
        .host
        .records("s")
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.event.body {
            EventBody::Output(m) => m.parts.into_iter().find_map(|p| match p {
                harness_core::message::Part::Reasoning(t) => Some(t),
                _ => None,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning.len(), 2, "{reasoning:?}");
    assert_eq!(block(h.host.replay("s")).unwrap().provider_calls, 0);
}
