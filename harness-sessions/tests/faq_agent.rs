//! The tour's FAQ agent on the agentsessions host (`common::faq`): a gated `refund` never runs
//! without its approval, runs exactly once when approved (also across a crash and resume),
//! never runs when denied (the agent says the denial); "Which day?" is not asked here (no
//! questions on this host: the agent gives the week's hours), and a hand-off is `Unsupported` (the
//! agent says so). Each test quotes the words it checks
//! (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::approval_rig::recover_at_every_cut_on_the_approval_path;
use common::faq::{FaqAgent, NO_PERSON, Payments, faq_host, faq_model, faq_rig, faq_tools};
use common::*;
use harness_core::event::EventBody;
use harness_core::interaction::Feature;
use harness_core::message::{Mediation, Message};
use harness_core::testing::RecordingSink;
use harness_core::{EventSink, Harness, Start};
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

/// "A denial supplies APPROVAL_DENIED with IsError=true and never invokes the executor ...
/// Feed that receipt back as the tool result the model saw": the refund never runs, and the
/// agent's answer says the denial.
#[test]
fn a_denied_refund_never_runs_and_the_agent_says_the_denial() {
    let h = faq_host(false);
    block(h.host.exec(ExecRequest::text("s", REFUND))).unwrap();
    let pending = h.host.pending_approval("s").unwrap().unwrap();
    h.host
        .approve("s", &pending.call.id, false, "refunds need a receipt")
        .unwrap();
    let turn = block(h.host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(
        turn.output,
        "The refund was not done: approval denied: refunds need a receipt."
    );
    assert_eq!(h.payments.count(), 0);
}

/// The spec's EventSink has no question: this host does not offer `Feature::Questions`, so
/// the agent asks no "Which day?" and gives the week's hours; nothing about a question is
/// journaled. Its reasoning around the look-up is (two OUTPUT records of reasoning parts,
/// before the model call).
/// The same agent on a host that asks (`RecordingSink`, as TanStack) parks on the question.
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

    // Where a person can answer, the agent asks, and goes on with the answer.
    let tools = faq_tools(&Payments::default());
    let agent = FaqAgent::new();
    let mut sink = RecordingSink::new(faq_model()).with_tools(tools);
    assert!(sink.supports(Feature::Questions));
    let start = Start::with_inputs(vec![Message::user("When are you open?")]);
    assert!(
        block(sink.drive(&agent, start.clone()))
            .unwrap_err()
            .is_parked()
    );
    let q = sink.pending_questions()[0].clone();
    assert_eq!(q.message, "Which day?");
    sink.answer(&q.id, "Saturday");
    block(sink.drive(&agent, start)).unwrap();
    assert_eq!(sink.spoken_text(), "On Saturday we're open 9am to 1pm.");
}

/// No hand-off on this host either: `sink.handoff` is `Unsupported`, journals nothing, and
/// the agent says it cannot put the caller through.
#[test]
fn a_hand_off_is_unsupported_here_and_the_agent_says_so() {
    let h = faq_host(false);
    let turn = block(
        h.host
            .exec(ExecRequest::text("s", "Let me talk to a person")),
    )
    .unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.output, NO_PERSON);
    assert_eq!(kind_names(&h.host, "s"), "EXECUTION_START INPUT OUTPUT END");
    // The agent itself is not in the way: where a host can hand off, it does.
    let mut sink = RecordingSink::new(faq_model());
    let start = Start::with_inputs(vec![Message::user("Let me talk to a person")]);
    block(FaqAgent::new().run(start, &mut sink)).unwrap();
    assert!(sink.spoken_text().is_empty());
    assert!(matches!(
        sink.calls()[0],
        harness_core::testing::SinkCall::Handoff(_)
    ));
}
