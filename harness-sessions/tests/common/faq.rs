//! The tour's FAQ agent, written once the way every host's tests use it: it answers when Acme
//! is open (`get_hours(day)`), refunds an order with a gated tool (`refund(order_id)`,
//! `requires_approval`), asks "Which day?" where the host can ask a person
//! (`sink.supports(Feature::Questions)`) and otherwise assumes today, and hands the
//! conversation to a person where the host can (`sink.handoff`) and otherwise says it cannot.
//! The tools are one core `Tools` registry: the agent offers it to its model
//! (`ToolLoopAgent::with_tools`) and the host runs it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Feature, Handoff, Question};
use harness_core::message::{Message, Part, Role, ToolCall, ToolResult};
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, ToolContext, Tools};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use harness_sessions::controller::Controller;
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use serde_json::{Value, json};

use super::approval_rig::GatedRig;

/// The day the agent assumes where it cannot ask which one.
pub const DEFAULT_DAY: &str = "today";

/// What the agent says where the host cannot hand the conversation off.
pub const NO_HANDOFF: &str =
    "I can't put you through to a person here. I can tell you when we're open, or refund an order.";

/// The payment service behind `refund`: every refund it paid, with the session and the
/// idempotency key the tool passed it.
#[derive(Debug, Default)]
pub struct Payments(Mutex<Vec<(String, String, u64)>>);

impl Payments {
    /// The refunds paid: (session, idempotency key, order).
    pub fn paid(&self) -> Vec<(String, String, u64)> {
        self.0.lock().unwrap().clone()
    }
}

/// The agent's tools: `get_hours(day)`, and `refund(order_id)`, gated, which pays through
/// `payments`.
pub fn faq_tools(payments: &Arc<Payments>) -> Tools {
    let service = Arc::clone(payments);
    let refund = Tool::new(
        "refund",
        "Refund an order",
        move |call: ToolCall, cx: ToolContext| {
            let order = call
                .args
                .get("order_id")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            service.0.lock().unwrap().push((
                cx.session_uid.clone(),
                call.idempotency_key.clone(),
                order,
            ));
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
        .with(refund)
}

/// The FAQ agent: the model-and-tools loop of harness-core, with a question and a hand-off
/// in front of it.
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

/// The FAQ agent on this host: a memory journal with session `s`, the agent's tools run by the
/// controller with receipts, the scripted model.
pub struct FaqHost {
    pub host: Controller,
    pub journal: Arc<MemoryJournal>,
    pub model: Arc<ScriptedModel>,
    pub payments: Arc<Payments>,
}

/// The controller for the FAQ agent over `journal`: its tools (`receipts` kept across
/// controllers), `model`, and the agent (`ungated`: offering `refund` without its gate).
pub fn faq_controller(
    journal: impl Journal + 'static,
    model: &Arc<ScriptedModel>,
    payments: &Arc<Payments>,
    receipts: &Arc<MemoryReceipts>,
    ungated: bool,
) -> Controller {
    let tools = faq_tools(payments);
    let agent = if ungated {
        FaqAgent::ungated(&tools)
    } else {
        FaqAgent::new(&tools)
    };
    Controller::builder(journal)
        .model(Arc::clone(model))
        .tools(tools)
        .receipts(Arc::clone(receipts))
        .harness("faq", agent)
        .build()
}

/// [`faq_controller`] over a new memory journal, with an empty session `s`.
pub fn faq_host(ungated: bool) -> FaqHost {
    let journal = Arc::new(MemoryJournal::new());
    let model = Arc::new(faq_model());
    let payments = Arc::new(Payments::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let host = faq_controller(journal.clone(), &model, &payments, &receipts, ungated);
    host.create_session("s", None).unwrap();
    FaqHost {
        host,
        journal,
        model,
        payments,
    }
}

/// The FAQ agent in the crash rig of the approval path.
pub fn faq_rig(ungated: bool) -> GatedRig {
    let model = Arc::new(faq_model());
    let payments = Arc::new(Payments::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let (m, p) = (Arc::clone(&model), Arc::clone(&payments));
    GatedRig {
        build: Box::new(move |journal| faq_controller(journal, &m, &p, &receipts, ungated)),
        effects: Box::new(move || payments.paid().len()),
        provider_calls: Box::new(move || model.calls()),
    }
}
