//! The demo FAQ agent of the jambonz examples (`jambonz_server`, `jambonz_call`, the tour) on
//! the simulator: its own `refund` tool is gated, and on a phone call no one can approve it,
//! so the driver's policy denies it: the code never runs, and the caller hears the agent say
//! so (the model's words come from the denial it was given as the tool's result).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../examples/jambonz_shared/mod.rs"]
mod jambonz_shared;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use harness_core::tool::rules::ApprovalPolicy;
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::testing::{Direction, SimulatedCall, simulate_call};
use jambonz_shared::{REFUND_REFUSED, faq_agent, faq_model, faq_tools, whole_call_simulator};
use serde_json::{Value, json};

fn whole_call(cfg: ServeConfig, refunds_run: &Arc<AtomicUsize>) -> SimulatedCall {
    let start = Instant::now();
    simulate_call(
        faq_agent(),
        faq_model(),
        faq_tools(refunds_run.clone()),
        whole_call_simulator(start),
        start,
        cfg,
    )
}

fn sent(c: &SimulatedCall) -> Vec<Value> {
    c.texts(Direction::ToJambonz)
        .into_iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

#[test]
fn the_faq_agent_refuses_a_refund_on_the_phone() {
    let refunds_run = Arc::new(AtomicUsize::new(0));
    let c = whole_call(ServeConfig::default(), &refunds_run);
    assert_eq!(refunds_run.load(Ordering::SeqCst), 0, "the refund ran");
    let t = &c.transcript;
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert_eq!(
        t.heard(),
        [
            "Thanks for calling Acme.",
            REFUND_REFUSED,
            "We're open eight"
        ]
    );
    let sent = sent(&c);
    // Only the platform's tool goes to jambonz; the refund stayed in the harness.
    let tool_calls: Vec<_> = sent.iter().filter(|v| v["type"] == "tool:call").collect();
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0]["name"], "get_hours");
    let refund_turn = sent
        .iter()
        .find(|v| v["type"] == "reply:done" && v["turn_id"] == 2)
        .unwrap();
    assert_eq!(
        refund_turn["turn_record"]["own_tools"],
        json!([{"name": "refund", "ok": false, "denied": true}])
    );
    // Goodbye is the hangup command.
    let hangup = sent.iter().find(|v| v["type"] == "command").unwrap();
    assert_eq!(hangup["name"], "hangup");
    assert_eq!(t.ended.as_ref().unwrap().0, "harness_hangup");
}

/// The same agent where a policy approves: the refund runs exactly once, and the agent
/// speaks from its result.
#[test]
fn with_an_approving_policy_the_refund_runs_once() {
    let refunds_run = Arc::new(AtomicUsize::new(0));
    let cfg = ServeConfig::default().with_approval_policy(ApprovalPolicy::Approve);
    let c = whole_call(cfg, &refunds_run);
    assert_eq!(refunds_run.load(Ordering::SeqCst), 1);
    assert_eq!(c.transcript.heard()[1], "Order 42 is refunded.");
}
