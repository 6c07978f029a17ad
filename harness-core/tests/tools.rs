//! The one tool model and the tool-call rules every host enforces (`harness_core::tool`),
//! and approval gating as `RecordingSink` applies it with the sessions controller's semantics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::executor::block_on;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::{
    JsonObject, Mediation, Message, Role, ToolCall, ToolResult, ToolResultCode,
};
use harness_core::model::ScriptedModel;
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::tool::rules::{self, ApprovalPolicy, Gate};
use harness_core::tool::{Tool, ToolContext, Tools};
use harness_core::{EventSink, Feature, Harness, SinkError, Start};
use serde_json::json;

/// A `refund` tool that counts how many times its effect ran.
fn refund_tools(effects: &Arc<AtomicUsize>) -> Tools {
    let effects = Arc::clone(effects);
    Tools::new()
        .with(Tool::json("get_hours", "Opening hours", |_| {
            Ok(json!("8am to 6pm"))
        }))
        .with(
            Tool::json("refund", "Refund an order", move |args| {
                effects.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"refunded": format!("order {}", args["order_id"])}))
            })
            .requires_approval(),
        )
}

fn refund_turn() -> (ScriptedModel, Start) {
    let model = ScriptedModel::new()
        .tool_call("refund", json!({"order_id": 42}))
        .otherwise(|req| {
            // The model speaks about the tool's result, whatever it is.
            let last = req.messages.last().map(Message::text).unwrap_or_default();
            let result = req
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Tool)
                .map(|m| format!("{m:?}"))
                .unwrap_or(last);
            Ok(Message::assistant(format!("Result: {result}")))
        });
    let mut start = Start::with_inputs(vec![Message::user("Please refund order 42")]);
    start.execution_id = "x1".into();
    (model, start)
}

#[test]
fn a_tool_is_its_definition_and_its_code_under_one_name() {
    let tools = refund_tools(&Arc::new(AtomicUsize::new(0)));
    let names: Vec<_> = tools.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["get_hours", "refund"]);
    let specs = tools.specs();
    assert_eq!(specs[1].mediation, Mediation::RequiresApproval);
    assert_eq!(specs[0].mediation, Mediation::ControllerMediated);
    // The agent offers exactly what the host runs.
    let agent = ToolLoopAgent::new("shop").with_tools(&tools);
    let d = block_on(agent.describe()).unwrap();
    assert_eq!(d.tools, specs);
}

#[test]
fn an_unknown_tool_is_an_error_result_never_a_panic() {
    let call = ToolCall::new("c1", "nope", JsonObject::new());
    let r = block_on(Tools::new().call(call, ToolContext::default()));
    assert!(r.is_error);
    assert_eq!(r.id, "c1");
    assert_eq!(r.error, "unknown tool: nope");
}

#[test]
fn the_tool_gets_the_idempotency_key_and_the_hosts_context() {
    let tools = Tools::new().with(Tool::new(
        "pay",
        "Pay",
        |call: ToolCall, cx: ToolContext| async move {
            ToolResult::ok_json(
                "",
                json!({"key": call.idempotency_key, "session": cx.session_uid}),
            )
        },
    ));
    let call = ToolCall::new("c7", "pay", JsonObject::new()).controller_mediated("exec-1");
    let r = block_on(tools.call(call, ToolContext::new("s-9", "exec-1")));
    assert_eq!(r.id, "c7", "an empty result id is the call's");
    let out = r.output.unwrap();
    assert_eq!(out["key"], "exec-1:c7");
    assert_eq!(out["session"], "s-9");
}

/// `Tools::call_ref` (what a host that records the call uses) runs the same code with the
/// same answer as `Tools::call`, async or sync: the key and context reach the tool, an empty
/// result id is the call's, and an unknown tool is the same error result.
#[test]
fn call_ref_answers_as_call_does() {
    let tools = Tools::new()
        .with(Tool::new(
            "pay",
            "Pay",
            |call: ToolCall, cx: ToolContext| async move {
                ToolResult::ok_json(
                    "",
                    json!({"key": call.idempotency_key, "session": cx.session_uid}),
                )
            },
        ))
        .with(Tool::sync("echo", "Echo", |c| {
            ToolResult::ok_json("", json!({"key": c.idempotency_key}))
        }));
    let cx = ToolContext::new("s-9", "exec-1");
    for name in ["pay", "echo", "nope"] {
        let call = ToolCall::new("c7", name, JsonObject::new()).controller_mediated("exec-1");
        let by_ref = block_on(tools.call_ref(&call, &cx));
        let owned = block_on(tools.call(call, cx.clone()));
        assert_eq!(by_ref, owned, "{name}");
        assert_eq!(by_ref.id, "c7", "{name}: an empty result id is the call's");
    }
}

/// One tool per name, kept by name whatever the order of registration; a clone is the same
/// registry, and adding to it leaves the original as it was.
#[test]
fn the_registry_is_by_name_and_a_clone_is_independent() {
    let hours = |h: &'static str| Tool::json("get_hours", "Hours", move |_| Ok(json!(h)));
    let a = Tools::new()
        .with(Tool::json("refund", "Refund", |_| Ok(json!("ok"))))
        .with(hours("8 to 6"));
    let b = a
        .clone()
        .with(hours("9 to 5"))
        .with(Tool::json("a_tool", "A", |_| Ok(json!(1))));
    let names = |t: &Tools| t.iter().map(|t| t.name().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(&a), ["get_hours", "refund"]);
    assert_eq!(names(&b), ["a_tool", "get_hours", "refund"]);
    let call = ToolCall::new("c1", "get_hours", JsonObject::new());
    let run = |t: &Tools| {
        block_on(t.call_ref(&call, &ToolContext::default()))
            .output
            .unwrap()
    };
    assert_eq!(run(&a)["result"], "8 to 6");
    assert_eq!(
        run(&b)["result"],
        "9 to 5",
        "the same name replaces the tool"
    );
    assert!(a.get("a_tool").is_none() && b.get("a_tool").is_some());
}

/// Lookup finds exactly the registered names, whether the registry is small (scanned) or
/// large (searched): a prefix, an extension or an empty name is not a tool, and a name
/// registered again replaces its tool in either size.
#[test]
fn lookup_is_exact_in_a_small_and_a_large_registry() {
    for n in [1usize, 2, 8, 9, 40] {
        let names: Vec<String> = (0..n).rev().map(|i| format!("tool_{i}")).collect();
        let mut tools: Tools = names
            .iter()
            .map(|name| Tool::json(name.clone(), "t", |_| Ok(json!("first"))))
            .collect();
        assert_eq!(tools.len(), n);
        for name in &names {
            assert_eq!(
                tools.get(name).map(Tool::name),
                Some(name.as_str()),
                "{n} tools"
            );
        }
        for absent in ["", "tool_", "tool_00", &format!("tool_{n}"), "tool_0x"] {
            assert!(tools.get(absent).is_none(), "{absent:?} in {n} tools");
        }
        tools.insert(Tool::json("tool_0", "t", |_| Ok(json!("second"))));
        assert_eq!(tools.len(), n, "a name registered again is replaced");
        let call = ToolCall::new("c1", "tool_0", JsonObject::new());
        let out = block_on(tools.call_ref(&call, &ToolContext::default())).output;
        assert_eq!(out.unwrap()["result"], "second", "{n} tools");
    }
}

/// agentsessions (Rule 4, mediation): sink.tool_call is for CONTROLLER_MEDIATED and
/// REQUIRES_APPROVAL calls with an idempotency key; the words are the controller's.
#[test]
fn check_call_is_agentsessions_rule_with_its_words() {
    let plain = ToolCall::new("c1", "t", JsonObject::new());
    let e = rules::check_call(&plain).unwrap_err();
    assert!(matches!(e, SinkError::Rejected(ref m) if m.starts_with("unmediated tool call")));
    let no_key = plain.clone().with_mediation(Mediation::ControllerMediated);
    assert_eq!(
        rules::check_call(&no_key),
        Err(SinkError::Rejected("missing idempotency key".into()))
    );
    let gated_no_id = ToolCall::new("", "t", JsonObject::new())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    assert_eq!(
        rules::check_call(&gated_no_id),
        Err(SinkError::Rejected(
            "an approval-gated call needs a call id".into()
        ))
    );
    assert_eq!(rules::check_call(&plain.controller_mediated("x")), Ok(()));
}

/// "A gated tool never runs silently on any host": the tool's own gate wins over a call that
/// says only CONTROLLER_MEDIATED.
#[test]
fn a_gated_tool_is_gated_whatever_the_call_says() {
    let tools = refund_tools(&Arc::new(AtomicUsize::new(0)));
    let call = ToolCall::new("c1", "refund", JsonObject::new()).controller_mediated("x");
    match rules::gate(call, &tools) {
        Gate::NeedsApproval(c) => assert_eq!(c.mediation, Mediation::RequiresApproval),
        Gate::Run(_) => panic!("ran a gated tool"),
    }
    let call = ToolCall::new("c2", "get_hours", JsonObject::new()).controller_mediated("x");
    assert!(matches!(rules::gate(call, &tools), Gate::Run(_)));
    // A call that asks for approval is gated even for a tool that does not.
    let call = ToolCall::new("c3", "get_hours", JsonObject::new())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("k");
    assert!(matches!(rules::gate(call, &tools), Gate::NeedsApproval(_)));
}

#[test]
fn the_approval_policy_denies_by_default() {
    let call = ToolCall::new("c1", "refund", JsonObject::new());
    assert!(ApprovalPolicy::default().decide(&call).is_err());
    assert_eq!(ApprovalPolicy::Approve.decide(&call), Ok(()));
    let p = ApprovalPolicy::decide_with(|c| {
        if c.tool == "refund" {
            Err("refunds need a person".into())
        } else {
            Ok(())
        }
    });
    assert_eq!(p.decide(&call), Err("refunds need a person".into()));
    let d = ToolResult::denied("c1", "refunds need a person");
    assert_eq!(d.code, ToolResultCode::ApprovalDenied);
    assert!(d.is_error && d.is_denied() && d.output.is_none());
}

/// The sessions controller's semantics, in a unit test: a gated call parks the turn; approved,
/// the turn is driven again and the tool runs exactly once; the first completion is served
/// from the turn's record (no second provider call for it).
#[test]
fn approved_the_gated_tool_runs_exactly_once() {
    let effects = Arc::new(AtomicUsize::new(0));
    let tools = refund_tools(&effects);
    let (model, start) = refund_turn();
    let agent = ToolLoopAgent::new("shop").with_tools(&tools);
    let mut sink = RecordingSink::new(model).with_tools(tools);

    let err = block_on(sink.drive(&agent, start.clone())).unwrap_err();
    assert!(err.is_parked(), "{err}");
    assert_eq!(effects.load(Ordering::SeqCst), 0, "ran before approval");
    let pending = sink.pending_approvals().to_vec();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "refund");
    assert_eq!(pending[0].mediation, Mediation::RequiresApproval);
    assert_eq!(pending[0].idempotency_key, "x1:call_1");

    sink.approve(&pending[0].id);
    block_on(sink.drive(&agent, start)).unwrap();
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    assert_eq!(
        sink.model_calls(),
        2,
        "the first completion came from the tape"
    );
    assert!(
        sink.spoken_text().contains("refunded"),
        "{}",
        sink.spoken_text()
    );
    assert!(sink.pending_approvals().is_empty());
}

#[test]
fn denied_the_gated_tool_never_runs_and_the_agent_hears_why() {
    let effects = Arc::new(AtomicUsize::new(0));
    let tools = refund_tools(&effects);
    let (model, start) = refund_turn();
    let agent = ToolLoopAgent::new("shop").with_tools(&tools);
    let mut sink = RecordingSink::new(model).with_tools(tools);

    assert!(
        block_on(sink.drive(&agent, start.clone()))
            .unwrap_err()
            .is_parked()
    );
    let id = sink.pending_approvals()[0].id.clone();
    sink.deny(&id, "not today");
    block_on(sink.drive(&agent, start)).unwrap();
    assert_eq!(effects.load(Ordering::SeqCst), 0);
    let denied: Vec<_> = sink
        .calls()
        .iter()
        .filter_map(|c| match c {
            SinkCall::ToolCall { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(denied.len(), 1);
    assert!(denied[0].is_denied());
    assert_eq!(denied[0].error, "approval denied: not today");
    assert!(denied[0].output.is_none(), "a denial carries no output");
    // The model got the denial as the tool's result, and spoke about it.
    assert!(
        sink.spoken_text().contains("approval denied"),
        "{}",
        sink.spoken_text()
    );
}

/// jambonz has no approval channel: the host's policy decides at once, deny by default, and
/// the turn goes on.
#[test]
fn without_approvals_the_policy_decides_and_the_turn_goes_on() {
    let effects = Arc::new(AtomicUsize::new(0));
    let tools = refund_tools(&effects);
    let (model, start) = refund_turn();
    let agent = ToolLoopAgent::new("shop").with_tools(&tools);
    let mut sink = RecordingSink::new(model)
        .with_tools(tools.clone())
        .without(Feature::Approvals);
    block_on(sink.drive(&agent, start.clone())).unwrap();
    assert_eq!(effects.load(Ordering::SeqCst), 0);
    assert!(sink.spoken_text().contains("approval denied"));

    let (model, _) = refund_turn();
    let mut approving = RecordingSink::new(model)
        .with_tools(tools)
        .without(Feature::Approvals)
        .with_approval_policy(ApprovalPolicy::Approve);
    block_on(approving.drive(&agent, start)).unwrap();
    assert_eq!(effects.load(Ordering::SeqCst), 1);
}

#[test]
fn a_turn_that_does_something_else_when_driven_again_is_told_it_diverged() {
    use harness_core::message::ModelRequest;

    struct Fickle(AtomicUsize);
    #[async_trait::async_trait]
    impl Harness for Fickle {
        async fn describe(&self) -> Result<harness_core::Descriptor, harness_core::HarnessError> {
            Ok(harness_core::Descriptor::new("fickle", "1"))
        }
        async fn run(
            &self,
            _start: Start,
            sink: &mut dyn EventSink,
        ) -> Result<(), harness_core::HarnessError> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                sink.model(ModelRequest::new(vec![Message::user("a")]))
                    .await?;
            } else {
                sink.output("something else").await?;
            }
            let call = ToolCall::new("c1", "refund", JsonObject::new()).controller_mediated("x");
            sink.tool_call(call).await?;
            Ok(())
        }
    }
    let tools = refund_tools(&Arc::new(AtomicUsize::new(0)));
    let mut sink = RecordingSink::new(ScriptedModel::new().reply("ok")).with_tools(tools);
    let agent = Fickle(AtomicUsize::new(0));
    assert!(
        block_on(sink.drive(&agent, Start::default()))
            .unwrap_err()
            .is_parked()
    );
    sink.approve("c1");
    let err = block_on(sink.drive(&agent, Start::default())).unwrap_err();
    assert!(
        matches!(err, harness_core::HarnessError::Sink(SinkError::Diverged(ref m)) if m.contains("sink.model")),
        "{err:?}"
    );
    assert!(
        !sink.spoken_text().contains("something else"),
        "a diverged turn showed nothing"
    );
}

/// A call the registry gates is held to a gated call's rules (agentsessions: "Set
/// MediationRequiresApproval and a nonempty call ID/idempotency key before sink.ToolCall"),
/// as the sessions controller refuses it: an agent that passes here is not refused there.
#[test]
fn a_call_the_registry_gates_needs_a_call_id() {
    let tools = refund_tools(&Arc::new(AtomicUsize::new(0)));
    let mut sink = RecordingSink::new(ScriptedModel::new()).with_tools(tools);
    let call = ToolCall::new("", "refund", JsonObject::new())
        .with_mediation(Mediation::ControllerMediated)
        .with_idempotency_key("x1:k");
    assert_eq!(
        block_on(sink.tool_call(call)),
        Err(SinkError::Rejected(
            "an approval-gated call needs a call id".into()
        ))
    );
    assert!(sink.calls().is_empty());
}
