//! The FAQ agent of the tour, written once for the examples and the tests: it answers when
//! Acme is open (`get_hours(day)`), refunds an order with a gated tool (`refund(order_id)`,
//! `requires_approval`), asks "Which day?" where the host can ask a person
//! (`sink.supports(Feature::Questions)`) and otherwise assumes today, and hands the
//! conversation to a person where the host can (`sink.handoff`) and otherwise says it cannot.
//! The tools are one core `Tools` registry: the agent offers it to its model
//! (`ToolLoopAgent::with_tools`) and the host runs it. [`faq_model`] is a scripted model
//! that plays its provider.
//!
//! ```
//! use std::sync::Arc;
//! use harness_sessions::harnesses::{FaqAgent, faq_model, faq_tools};
//! use harness_sessions::{Controller, ExecRequest, MemoryJournal};
//!
//! let tools = faq_tools(|_, _, _| {});
//! let host = Controller::builder(MemoryJournal::new())
//!     .model(faq_model())
//!     .tools(tools.clone())
//!     .harness("faq", FaqAgent::new(&tools))
//!     .build();
//! futures::executor::block_on(async {
//!     host.create_session("s", None)?;
//!     let turn = host.exec(ExecRequest::text("s", "Are you open on monday?")).await?;
//!     assert_eq!(turn.output, "On monday we're open 8am to 6pm.");
//!     Ok::<(), harness_sessions::Error>(())
//! }).unwrap();
//! ```

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Feature, Handoff, Question};
use harness_core::message::{Message, Part, Role, ToolCall, ToolResult};
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, ToolContext, Tools};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use serde_json::{Value, json};

/// The day the agent assumes where it cannot ask which one.
pub const DEFAULT_DAY: &str = "today";

/// What the agent says where the host cannot hand the conversation off.
pub const NO_HANDOFF: &str =
    "I can't put you through to a person here. I can tell you when we're open, or refund an order.";

/// The agent's tools: `get_hours(day)`, and `refund(order_id)`, gated
/// ([`requires_approval`](harness_core::tool::Tool::requires_approval)), which calls
/// `refund(context, call, order)` — the payment service; pass it `call.idempotency_key`
/// so that a re-driven refund is not paid twice.
pub fn faq_tools(refund: impl Fn(&ToolContext, &ToolCall, u64) + Send + Sync + 'static) -> Tools {
    let refund = std::sync::Arc::new(refund);
    let refund_tool = Tool::new(
        "refund",
        "Refund an order",
        move |call: ToolCall, cx: ToolContext| {
            let order = call
                .args
                .get("order_id")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            refund(&cx, &call, order);
            let result = ToolResult::ok_json(&call.id, json!({"refunded": order}));
            async move { result }
        },
    )
    .requires_approval();
    Tools::new()
        .with(Tool::json(
            "get_hours",
            "Acme's opening hours on a day",
            |args| {
                let day = args
                    .get("day")
                    .and_then(Value::as_str)
                    .unwrap_or(DEFAULT_DAY);
                Ok(json!({"day": day, "hours": "8am to 6pm"}))
            },
        ))
        .with(refund_tool)
}

/// The FAQ agent: the model-and-tools loop of harness-core, with a question and a hand-off
/// in front of it.
#[derive(Debug)]
pub struct FaqAgent {
    inner: ToolLoopAgent,
}

impl FaqAgent {
    /// The agent offering `tools` as registered: it calls `refund` gated.
    pub fn new(tools: &Tools) -> Self {
        FaqAgent {
            inner: ToolLoopAgent::new("acme-faq")
                .with_system_prompt("You answer questions for Acme.")
                .with_tools(tools),
        }
    }

    /// The agent offering every tool as plain controller-mediated: its `refund` call does not
    /// say it needs an approval, and the host's registry gates it.
    pub fn ungated(tools: &Tools) -> Self {
        let inner = tools.iter().fold(
            ToolLoopAgent::new("acme-faq").with_system_prompt("You answer questions for Acme."),
            |agent, tool| agent.with_tool(tool.definition().clone()),
        );
        FaqAgent { inner }
    }
}

/// The weekday named in `said`, if any.
fn named_day(said: &str) -> Option<&'static str> {
    [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
    .into_iter()
    .find(|d| said.contains(d))
}

#[async_trait]
impl Harness for FaqAgent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.inner.describe().await
    }

    async fn run(&self, mut start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let said = start
            .inputs
            .iter()
            .map(Message::text)
            .collect::<String>()
            .to_lowercase();
        if said.contains("a person") {
            return match sink.handoff(Handoff::to_human().with_note(said)).await {
                Ok(()) => Ok(()),
                Err(SinkError::Unsupported(_)) => Ok(sink.output(NO_HANDOFF).await?),
                Err(e) => Err(e.into()),
            };
        }
        if (said.contains("open") || said.contains("hours")) && named_day(&said).is_none() {
            let day = if sink.supports(Feature::Questions) {
                let answer = sink.ask(Question::new("Which day?")).await?;
                answer.text().unwrap_or(DEFAULT_DAY).to_owned()
            } else {
                DEFAULT_DAY.to_owned()
            };
            start
                .inputs
                .push(Message::user(format!("(the day: {day})")));
        }
        self.inner.run(start, sink).await
    }
}

/// The model behind the FAQ agent: calls `refund` for "refund … N", `get_hours` for a day or
/// a question about hours; says what a tool's result says (a denial included).
pub fn faq_model() -> ScriptedModel {
    ScriptedModel::new()
        .with_id("scripted-faq")
        .otherwise(|req| {
            // The call id is the position in the conversation: the same on every run of a turn.
            let call = |name: &str, args: Value| Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall::new(
                    format!("call_{}", req.messages.len()),
                    name,
                    args.as_object().cloned().unwrap_or_default(),
                ))],
            };
            if let Some(m) = req.messages.last().filter(|m| m.role == Role::Tool) {
                let result = m.parts.iter().find_map(|p| match p {
                    Part::ToolResult(r) => Some(r),
                    _ => None,
                });
                let output = result.and_then(|r| r.output.as_ref());
                return Ok(Message::assistant(match (result, output) {
                    (Some(r), _) if r.is_denied() => format!("I can't refund that: {}.", r.error),
                    (Some(r), _) if r.is_error => format!("Sorry: {}.", r.error),
                    (_, Some(o)) if o.contains_key("refunded") => {
                        format!("Order {} is refunded.", o["refunded"])
                    }
                    (_, Some(o)) => format!(
                        "On {} we're open {}.",
                        o.get("day").and_then(Value::as_str).unwrap_or("?"),
                        o.get("hours").and_then(Value::as_str).unwrap_or("?")
                    ),
                    _ => "Sorry, I could not look that up.".to_owned(),
                }));
            }
            let text = req.last_user_text().unwrap_or_default();
            let said = text.to_lowercase();
            Ok(if said.contains("refund") {
                let order = said
                    .split(|c: char| !c.is_ascii_digit())
                    .find_map(|d| d.parse::<u64>().ok());
                call("refund", json!({"order_id": order}))
            } else if let Some(day) = text
                .strip_prefix("(the day: ")
                .and_then(|d| d.strip_suffix(')'))
            {
                call("get_hours", json!({"day": day}))
            } else if let Some(day) = named_day(&said) {
                call("get_hours", json!({"day": day}))
            } else {
                Message::assistant("I can tell you when we're open, or refund an order.")
            })
        })
}
