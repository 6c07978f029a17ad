//! Shared by the jambonz examples and the tour chapter: the demo agents (the FAQ agent, and
//! the spec's minimal harness) and the demo call. Serving them is
//! `harness_jambonz::server::JambonzServer`; calling them, `harness_jambonz::client::Caller`.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::event::EventBody;
use harness_core::message::{Message, ModelRequest, Part, Role, ToolCall, ToolDefinition};
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start, Tool, Tools};
use harness_jambonz::simulator::{Script, SimConfig, Simulator};

/// The harness's own tools: `refund(order_id)`, gated (`requires_approval`): a person must
/// approve a refund. On a phone call no one can (jambonz has no approval message), so the
/// driver's policy denies it and the code never runs; `refunds_run` counts the times it did.
pub fn faq_tools(refunds_run: Arc<AtomicUsize>) -> Tools {
    Tools::new().with(
        Tool::json("refund", "Refund an order", move |args| {
            refunds_run.fetch_add(1, Ordering::SeqCst);
            Ok(serde_json::json!({"refunded": args.get("order_id")}))
        })
        .requires_approval(),
    )
}

/// The platform's tools, which jambonz runs on `tool:call` (the simulator plays them).
pub fn platform_tools() -> Tools {
    Tools::new().with(Tool::json("get_hours", "Acme's opening hours", |_| {
        Ok(serde_json::json!({"weekdays": "8am to 6pm"}))
    }))
}

/// The demo agent: answers calls for Acme, looks up opening hours with the platform's
/// `get_hours` tool (run by jambonz), offers its own gated `refund` tool (refused on the
/// phone), and hangs up with the `hangup` command when the caller says goodbye.
pub fn faq_agent() -> ToolLoopAgent {
    ToolLoopAgent::new("acme-faq")
        .with_system_prompt("You answer calls for Acme.")
        .with_tools(&platform_tools())
        .with_tools(&faq_tools(Arc::default()))
        .with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup")
}

/// The FAQ agent, its model and its own tools, as `jambonz_server` serves them.
pub fn faq() -> (Arc<dyn Harness>, ScriptedModel, Tools) {
    (
        Arc::new(faq_agent()),
        faq_model(),
        faq_tools(Arc::default()),
    )
}

/// What the model says when the refund was denied: the words come from seeing the
/// denial as the tool's result.
pub const REFUND_REFUSED: &str =
    "Sorry, I can't make refunds on the phone. Please ask at acme.example/refunds.";

/// The built-in deterministic model behind the demo agent (no network, no key).
pub fn faq_model() -> ScriptedModel {
    let ids = AtomicUsize::new(0);
    ScriptedModel::new()
        .with_id("scripted-faq")
        .otherwise(move |req| {
            let call = |name: &str, args: serde_json::Value| {
                let n = ids.fetch_add(1, Ordering::SeqCst) + 1;
                let args = args.as_object().cloned().unwrap_or_default();
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall::new(
                        format!("call_{n}"),
                        name,
                        args,
                    ))],
                }
            };
            let last = req.messages.last();
            if let Some(m) = last.filter(|m| m.role == Role::Tool) {
                let result = m.parts.iter().find_map(|p| match p {
                    Part::ToolResult(r) => Some(r),
                    _ => None,
                });
                if result.is_some_and(|r| r.is_denied()) {
                    return Ok(Message::assistant(REFUND_REFUSED));
                }
                let output = result.and_then(|r| r.output.as_ref());
                if let Some(order) = output.and_then(|o| o.get("refunded")) {
                    return Ok(Message::assistant(format!("Order {order} is refunded.")));
                }
                let hours = output
                    .and_then(|o| o.get("weekdays"))
                    .and_then(|h| h.as_str());
                return Ok(Message::assistant(match hours {
                    Some(h) if h.contains("8am to 6pm") => {
                        "We're open eight to six on weekdays.".to_owned()
                    }
                    Some(h) => format!("We're open {h} on weekdays."),
                    None => "Sorry, I could not look that up.".to_owned(),
                }));
            }
            let said = req.last_user_text().unwrap_or_default().to_lowercase();
            Ok(if said.contains("(call connected)") {
                Message::assistant("Thanks for calling Acme.")
            } else if said.contains("bye") {
                call("hangup", serde_json::json!({"reason": "resolved"}))
            } else if said.contains("refund") {
                let order = said
                    .split(|c: char| !c.is_ascii_digit())
                    .find_map(|d| d.parse::<u64>().ok());
                call("refund", serde_json::json!({"order_id": order}))
            } else if said.contains("open") || said.contains("hours") {
                call("get_hours", serde_json::json!({}))
            } else {
                Message::assistant("I can tell you when we're open.")
            })
        })
}

/// The spec's "A whole call" (greeting, "When are you open", a barge-in with "Thanks, bye"),
/// with a refund request before the question.
pub fn whole_call_script() -> Script {
    Script::new()
        .greeting()
        .say("Please refund order 42")
        .say("When are you open")
        .barge_in(Duration::from_millis(1100), "Thanks, bye")
}

/// A simulator for the whole call, with the platform's `get_hours` tool.
pub fn whole_call_simulator(now: Instant) -> Simulator {
    Simulator::new(now, SimConfig::default(), whole_call_script()).with_tools(platform_tools())
}

/// The spec's "A minimal harness without the SDK", in Rust: a system prompt, the call's
/// history and the caller's words to the model, its completion spoken as it streams (the
/// driver keeps the history as the caller heard it). Its model answers as
/// `scripts/interop/jambonz/minimal_harness.mjs`'s does (the load test runs both).
pub struct Minimal;

#[async_trait]
impl Harness for Minimal {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("acme-minimal", "1"))
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let mut messages = Vec::with_capacity(start.history.len() + 2);
        messages.push(Message::system("You answer calls for Acme."));
        for e in start.history.iter() {
            if let EventBody::Input(m) | EventBody::Output(m) = &e.body {
                messages.push(m.clone());
            }
        }
        messages.extend(start.inputs);
        sink.model(ModelRequest::new(messages)).await?;
        Ok(())
    }
}

/// [`Minimal`], its scripted model, and no tools of its own.
pub fn minimal() -> (Arc<dyn Harness>, ScriptedModel, Tools) {
    let model = ScriptedModel::new().with_id("scripted").otherwise(|req| {
        let said = req.last_user_text().unwrap_or_default().to_lowercase();
        Ok(Message::assistant(if said == "(call connected)" {
            "Thanks for calling Acme."
        } else if said.contains("open") || said.contains("hours") {
            "We're open eight to six on weekdays."
        } else {
            "Goodbye."
        }))
    });
    (Arc::new(Minimal), model, Tools::new())
}
