//! The driver's tools: "To run one of the agent's tools, send tool:call. Tools of the
//! harness's own stay between it and its model." (spec line 49, Replies), with the tool-call rules
//! every host applies (`harness_core::tool::rules`): jambonz has no approval message, so a
//! gated call is decided by `ServeConfig::approval_policy`, deny by default.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::{JsonObject, Message, Part, Role, ToolCall, ToolResult};
use harness_core::model::ScriptedModel;
use harness_core::tool::rules::ApprovalPolicy;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start, Tools};
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::simulator::Script;
use serde_json::json;

mod common;
use common::driver::{Call, counted, runs, sent};

/// The tool result the model was last given, if any.
fn last_result(req: &harness_core::message::ModelRequest) -> Option<ToolResult> {
    let m = req.messages.last().filter(|m| m.role == Role::Tool)?;
    m.parts.iter().find_map(|p| match p {
        Part::ToolResult(r) => Some(r.clone()),
        _ => None,
    })
}

/// A model that calls `tool` when the caller says "do it", then says what became of the
/// call: `Denied: <error>`, `Failed: <error>`, or `Done.`; anything else is answered `OK.`
fn model_calling(tool: &'static str) -> ScriptedModel {
    let n = std::sync::atomic::AtomicUsize::new(0);
    ScriptedModel::new().otherwise(move |req| {
        if let Some(r) = last_result(req) {
            return Ok(Message::assistant(if r.is_denied() {
                format!("Denied: {}", r.error)
            } else if r.is_error {
                format!("Failed: {}", r.error)
            } else {
                "Done.".to_owned()
            }));
        }
        if req.last_user_text().unwrap_or_default() != "do it" {
            return Ok(Message::assistant("OK."));
        }
        let id = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Ok(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(ToolCall::new(
                format!("call_{id}"),
                tool,
                JsonObject::new(),
            ))],
        })
    })
}

/// The caller asks for the tool, then says something else: the call goes on.
fn script() -> Script {
    Script::new().say("do it").say("and then")
}

/// "Tools of the harness's own stay between it and its model" (spec line 49): an own tool
/// runs in the driver, is never sent as tool:call, and is in the turn record's `own_tools`
/// as `{ "name": "lookup_account", "ok": true, "ms": 220 }` shows (line 84: name, ok, ms).
#[test]
fn an_own_tool_runs_in_the_harness_and_is_never_sent() {
    let (own, ran) = counted("lookup_account");
    let (platform, platform_ran) = counted("lookup_account");
    let tools = Tools::new().with(own);
    let agent = ToolLoopAgent::new("own").with_tools(&tools);
    let c = Call {
        tools,
        // A platform tool of the same name: the harness's own is the one that runs.
        platform: Tools::new().with(platform),
        ..Call::default()
    }
    .run(agent, model_calling("lookup_account"), script());
    assert_eq!(runs(&ran), 1);
    assert_eq!(runs(&platform_ran), 0);
    assert!(sent(&c, "tool:call").is_empty());
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["own_tools"],
        json!([{"name": "lookup_account", "ok": true, "ms": 0}])
    );
    assert!(rec.get("steps").is_none(), "{rec}");
    assert_eq!(c.transcript.heard(), ["Done.", "OK."]);
    assert!(c.transcript.violations.is_empty());
}

/// "To run one of the agent's tools, send tool:call" (spec line 49): a tool not among the
/// harness's own is the platform's; jambonz runs it ("tool:call {call_id: "t1", turn_id: 2,
/// name: "get_hours", args: {}}" then "tool:result {call_id: "t1", result: …}", lines 23-24).
#[test]
fn a_platform_tool_goes_as_tool_call() {
    let (own, own_ran) = counted("lookup_account");
    let (platform, ran) = counted("get_hours");
    let c = Call {
        tools: Tools::new().with(own),
        platform: Tools::new().with(platform),
        ..Call::default()
    }
    .run(
        ToolLoopAgent::new("faq").with_tools(&Tools::new().with(counted("get_hours").0)),
        model_calling("get_hours"),
        script(),
    );
    assert_eq!((runs(&ran), runs(&own_ran)), (1, 0));
    let calls = sent(&c, "tool:call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "get_hours");
    assert_eq!(calls[0]["turn_id"], 1);
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["steps"][0]["detail"],
        json!({"tool": "get_hours", "ok": true})
    );
    assert!(rec.get("own_tools").is_none(), "{rec}");
    assert_eq!(c.transcript.heard(), ["Done.", "OK."]);
}

/// A tool of the harness's own registered with `requires_approval` is gated even when the
/// agent's call says only "run it" (the agent here offers it as a plain tool). jambonz has
/// no way to ask a person, and the default policy denies: the code never runs, nothing is
/// sent, the agent gets the denial and says so, and the call goes on.
#[test]
fn a_gated_own_tool_is_denied_by_default_and_the_agent_is_told() {
    let (refund, ran) = counted("refund");
    let refund = refund.requires_approval();
    let agent = ToolLoopAgent::new("shop").with_tool(refund.definition().clone());
    let c = Call {
        tools: Tools::new().with(refund),
        ..Call::default()
    }
    .run(agent, model_calling("refund"), script());
    assert_eq!(runs(&ran), 0, "a gated tool ran without an approval");
    assert!(sent(&c, "tool:call").is_empty());
    assert_eq!(
        c.transcript.heard(),
        [
            "Denied: approval denied: refund needs an approval, and this host has no one to ask",
            "OK."
        ]
    );
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["own_tools"],
        json!([{"name": "refund", "ok": false, "denied": true}])
    );
    assert_eq!(c.report.unwrap().failed, 0);
}

/// A platform tool the agent calls gated (`ToolLoopAgent::with_tools` calls a tool that
/// requires approval gated) is denied by default: no tool:call goes out, so jambonz never
/// runs it, and the agent is told.
#[test]
fn a_gated_platform_tool_is_denied_by_default_and_never_sent() {
    let (cancel, ran) = counted("cancel_order");
    let platform = Tools::new().with(cancel.requires_approval());
    let c = Call {
        platform: platform.clone(),
        ..Call::default()
    }
    .run(
        ToolLoopAgent::new("shop").with_tools(&platform),
        model_calling("cancel_order"),
        script(),
    );
    assert_eq!(runs(&ran), 0);
    assert!(sent(&c, "tool:call").is_empty());
    assert!(c.transcript.heard()[0].starts_with("Denied: approval denied"));
    assert_eq!(c.transcript.heard()[1], "OK.");
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["steps"],
        json!([{"name": "tool_call", "detail": {"tool": "cancel_order", "ok": false, "denied": true}}])
    );
}

/// `ApprovalPolicy::Approve`: a gated call runs as any other, exactly once: the harness's
/// own in the driver, the platform's through one tool:call; the turn record marks each
/// `approved`.
#[test]
fn an_approving_policy_runs_each_gated_call_exactly_once() {
    let (refund, refund_ran) = counted("refund");
    let (cancel, cancel_ran) = counted("cancel_order");
    let own = Tools::new().with(refund.requires_approval());
    let platform = Tools::new().with(cancel.requires_approval());
    let model = ScriptedModel::new()
        .tool_call("refund", json!({"order_id": 42}))
        .tool_call("cancel_order", json!({"order_id": 42}))
        .reply("Refunded and cancelled.");
    let c = Call {
        tools: own.clone(),
        platform: platform.clone(),
        cfg: ServeConfig::default().with_approval_policy(ApprovalPolicy::Approve),
        ..Call::default()
    }
    .run(
        ToolLoopAgent::new("shop")
            .with_tools(&own)
            .with_tools(&platform),
        model,
        Script::new().say("Refund and cancel order 42"),
    );
    assert_eq!((runs(&refund_ran), runs(&cancel_ran)), (1, 1));
    let calls = sent(&c, "tool:call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "cancel_order");
    assert_eq!(calls[0]["args"], json!({"order_id": 42}));
    assert_eq!(c.transcript.heard(), ["Refunded and cancelled."]);
    // Never silently: the turn record says each ran approved.
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["own_tools"],
        json!([{"name": "refund", "ok": true, "ms": 0, "approved": true}])
    );
    assert_eq!(
        rec["steps"][0]["detail"],
        json!({"tool": "cancel_order", "ok": true, "approved": true})
    );
}

/// A policy that decides each call: its reason is what the agent is told.
#[test]
fn a_deciding_policy_gives_the_agent_its_reason() {
    let (refund, ran) = counted("refund");
    let refund = refund.requires_approval();
    let policy = ApprovalPolicy::decide_with(|call| match call.args.get("order_id") {
        Some(id) if id == 7 => Ok(()),
        _ => Err("only order 7 today".into()),
    });
    let model = ScriptedModel::new()
        .tool_call("refund", json!({"order_id": 42}))
        .otherwise(|req| {
            let r = last_result(req).unwrap();
            Ok(Message::assistant(r.error))
        });
    let agent = ToolLoopAgent::new("shop").with_tools(&Tools::new().with(refund.clone()));
    let c = Call {
        tools: Tools::new().with(refund),
        cfg: ServeConfig::default().with_approval_policy(policy),
        ..Call::default()
    }
    .run(agent, model, Script::new().say("Refund order 42"));
    assert_eq!(runs(&ran), 0);
    assert_eq!(
        c.transcript.heard(),
        ["approval denied: only order 7 today"]
    );
}

/// Calls `sink.tool_call` with a call that is not host-run (as a model returns it) and says
/// what came back.
struct Unmediated {
    said: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Harness for Unmediated {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("unmediated", "1"))
    }
    async fn run(&self, _start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let r = sink
            .tool_call(ToolCall::new("x1", "get_hours", JsonObject::new()))
            .await;
        self.said.lock().unwrap().push(format!("{r:?}"));
        sink.output("Let me see.").await?;
        Ok(())
    }
}

/// `rules::check_call`, as on every host: a call that does not say the host runs it (and has
/// no idempotency key) is refused with `Rejected`, and nothing is sent.
#[test]
fn an_unmediated_tool_call_is_rejected_and_nothing_is_sent() {
    let said = Arc::new(Mutex::new(Vec::new()));
    let c = Call::default().run(
        Unmediated { said: said.clone() },
        ScriptedModel::new(),
        Script::new().say("When are you open"),
    );
    let said = said.lock().unwrap();
    assert!(
        said[0].starts_with("Err(Rejected(\"unmediated tool call"),
        "{said:?}"
    );
    assert!(sent(&c, "tool:call").is_empty());
    assert_eq!(c.transcript.heard(), ["Let me see."]);
}
