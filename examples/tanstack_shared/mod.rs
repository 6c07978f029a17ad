//! Shared by the `tanstack_host` example and its test (`tests/tanstack_demo.rs`): the tour's
//! FAQ agent as a TanStack host serves it, with the deterministic model behind it (no
//! network, no key).
//!
//! - "What are your hours on Saturday?" answers at once through `get_hours`.
//! - "What are your hours?" (no day named) asks "Which day?" (`harness.question`); the
//!   `answer` input drives the turn on.
//! - "Please refund order 42" calls `refund(order_id)`, gated: the run ends waiting for an
//!   approval (`harness.wait.opened` kind `approval`), and the tool runs once after a
//!   `resolve` that approves it, never after one that does not.
//! - "... a person ..." hands the conversation to a person (`harness.handoff`, a wait of kind
//!   `human`); "bye" tries the platform's `hangup` command, which a chat host does not have.
//! - Anything else: "Hi! You said: ...".
//!
//! Around a look-up it marks a step, reasons and publishes the day it looked up as state,
//! where the host offers them (`sink.supports`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Command, Feature, Handoff, Question, StateUpdate, Step};
use harness_core::message::{Message, Part, Role, ToolCall};
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start, Tool, Tools};
use serde_json::{Value, json};

/// The opening hours on a day.
fn hours_on(day: &str) -> &'static str {
    match day.to_lowercase().as_str() {
        "saturday" => "9am to 1pm",
        "sunday" => "closed",
        _ => "8am to 6pm",
    }
}

/// The agent's tools, one registry for the agent and the host: `get_hours(day)`, and
/// `refund(order_id)`, gated (`requires_approval`): a person approves each refund.
/// `refunds_run` counts the times the refund's code ran.
pub fn faq_tools(refunds_run: Arc<AtomicUsize>) -> Tools {
    Tools::new()
        .with(Tool::json(
            "get_hours",
            "Acme's opening hours on a day",
            |args| {
                let day = args.get("day").and_then(Value::as_str).unwrap_or("today");
                Ok(json!({"day": day, "hours": hours_on(day)}))
            },
        ))
        .with(
            Tool::json("refund", "Refund an order", move |args| {
                refunds_run.fetch_add(1, Ordering::SeqCst);
                let order = args.get("order_id").cloned().unwrap_or(Value::Null);
                Ok(json!({"result": format!("refunded order {order}")}))
            })
            .requires_approval(),
        )
}

/// The weekday a text names, if any, capitalized.
fn day_named(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
    .into_iter()
    .find(|d| lower.contains(&d.to_lowercase()))
    .map(str::to_owned)
}

/// What the agent says where the host cannot hand the conversation to a person.
pub const NO_PERSON: &str = "I can't put you through to a person here.";

/// What the agent says where the host cannot hang up.
pub const GOODBYE: &str = "Goodbye!";

/// The FAQ agent: harness-core's model-and-tools loop over [`faq_tools`], with a question,
/// a hand-off and a hang-up in front of it. Make it with [`faq_agent`].
pub struct FaqAgent(ToolLoopAgent);

/// The FAQ agent offering `tools` as registered (it calls `refund` gated).
pub fn faq_agent(tools: &Tools) -> FaqAgent {
    let inner = ToolLoopAgent::new("acme-faq").with_system_prompt("You help Acme's customers.");
    FaqAgent(inner.with_tools(tools))
}

/// Calls a feature the host may not offer: `Unsupported` is no error.
fn offered(r: Result<(), SinkError>) -> Result<(), SinkError> {
    match r {
        Err(SinkError::Unsupported(_)) => Ok(()),
        other => other,
    }
}

#[async_trait]
impl Harness for FaqAgent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.0.describe().await
    }

    async fn run(&self, mut start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let said: String = start.inputs.iter().map(Message::text).collect();
        let lower = said.to_lowercase();
        if lower.contains("a person") {
            return match sink.handoff(Handoff::to_human().with_note(said)).await {
                Err(SinkError::Unsupported(_)) => Ok(sink.output(NO_PERSON).await?),
                other => Ok(other?),
            };
        }
        if lower.contains("bye") {
            return match sink
                .command(Command::hangup("the caller said goodbye"))
                .await
            {
                Err(SinkError::Unsupported(_)) => Ok(sink.output(GOODBYE).await?),
                other => other.map(|_| ()).map_err(Into::into),
            };
        }
        if !lower.contains("hours") && !lower.contains("open") {
            return self.0.run(start, sink).await;
        }
        let day = match day_named(&said) {
            Some(d) => d,
            None if sink.supports(Feature::Questions) => {
                let answer = sink.ask(Question::new("Which day?")).await?;
                answer.text().unwrap_or("today").to_owned()
            }
            None => "today".to_owned(),
        };
        let step = "look up the hours".to_owned();
        offered(sink.step(Step::Started(step.clone())).await)?;
        offered(sink.reasoning(&format!("They ask about {day}; ")).await)?;
        offered(sink.reasoning("get_hours knows.").await)?;
        offered(sink.state(StateUpdate::Snapshot(json!({"day": day}))).await)?;
        start
            .inputs
            .push(Message::user(format!("(the day: {day})")));
        self.0.run(start, sink).await?;
        let answered = json!({"op": "add", "path": "/answered", "value": true});
        offered(sink.state(StateUpdate::Delta(vec![answered])).await)?;
        offered(sink.step(Step::Finished(step)).await)?;
        Ok(())
    }
}

/// An assistant message calling the tool `name`, its id `call_<at>`.
fn tool_call_at(at: usize, name: &str, args: Value) -> Message {
    let args = args.as_object().cloned().unwrap_or_default();
    let call = ToolCall::new(format!("call_{at}"), name, args);
    Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(call)],
    }
}

/// The built-in deterministic model behind the FAQ agent: a function of the request only
/// (a turn driven again, or a host restarted, gets the same answers). It calls `refund` for
/// "refund … N", `get_hours` for the day it was given or that was named, and says what a
/// tool's result says (a denial included).
pub fn faq_model() -> ScriptedModel {
    ScriptedModel::new()
        .with_id("scripted-faq")
        .otherwise(|req| {
            // The call id is the call's place in the conversation: the same on every run.
            let call = |name: &str, args: Value| tool_call_at(req.messages.len(), name, args);
            let result = req.messages.last().and_then(|m| {
                m.parts.iter().find_map(|p| match p {
                    Part::ToolResult(r) => Some(r.clone()),
                    _ => None,
                })
            });
            if let Some(r) = result {
                let out = r.output.clone().unwrap_or_default();
                return Ok(Message::assistant(if r.is_denied() {
                    format!("I can't refund that: {}.", r.error)
                } else if r.is_error {
                    format!("Sorry: {}.", r.error)
                } else if let Some(done) = out.get("result").and_then(Value::as_str) {
                    format!("Done: {done}.")
                } else {
                    format!(
                        "On {} we're open {}.",
                        out.get("day").and_then(Value::as_str).unwrap_or("?"),
                        out.get("hours").and_then(Value::as_str).unwrap_or("?")
                    )
                }));
            }
            let text = req.last_user_text().unwrap_or_default();
            if text.to_lowercase().contains("refund") {
                let order = text
                    .split(|c: char| !c.is_ascii_digit())
                    .find_map(|d| d.parse::<u64>().ok());
                return Ok(call("refund", json!({"order_id": order})));
            }
            let given = text
                .strip_prefix("(the day: ")
                .and_then(|d| d.strip_suffix(')'))
                .map(str::to_owned);
            if let Some(day) = given.or_else(|| day_named(&text)) {
                return Ok(call("get_hours", json!({"day": day})));
            }
            Ok(Message::assistant(format!("Hi! You said: {text}")))
        })
}
