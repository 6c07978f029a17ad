//! The FAQ agent: the one demo agent of harness-rs, written once and served unchanged by every
//! host (the tour, the examples, the conformance test `tests/faq_every_host/`).
//!
//! Acme's assistant answers when the shop is open and refunds orders:
//!
//! - `get_hours(day)` answers from the [`HOURS`] table ("What are your hours on Saturday?"
//!   answers at once). Without a day, the agent asks "Which day?" where the host can ask a
//!   person ([`Feature::Questions`]) and goes on with the answer; elsewhere the tool gives
//!   the whole week.
//! - `refund(order_id)` is gated ([`Tool::requires_approval`]): it runs only after a person
//!   (or the host's policy) approves the call, at most once, and its code hands the call's
//!   idempotency key to the payment service ([`Refunds`]). Its result reads
//!   `refunded order 42`; denied, it never runs, and the agent says the refund was not done.
//! - "… a person …" hands the conversation off ([`EventSink::handoff`]); "bye" hangs up
//!   ([`EventSink::command`], jambonz `hangup`). Around a look-up it marks a step, streams
//!   reasoning and publishes the day as state. Each only where the host offers it
//!   ([`EventSink::supports`]); where not, the host answers [`SinkError::Unsupported`] and
//!   the agent says it cannot ([`NO_PERSON`]) or goes without ([`GOODBYE`]).
//!
//! [`faq_model`] plays its provider: a [`ScriptedModel`] whose answers, tool-call ids
//! included, are a function of the request only, so a turn driven again, another session
//! or another process gets the same ones.
//!
//! ```
//! use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
//! use harness_core::message::Message;
//! use harness_core::testing::RecordingSink;
//! use harness_core::Start;
//!
//! let refunds = Refunds::default(); // the payment service: every refund it was asked for
//! let mut sink = RecordingSink::new(faq_model()).with_tools(faq_tools(&refunds));
//! let start = Start::with_inputs(vec![Message::user("Please refund order 42")]);
//! futures::executor::block_on(async {
//!     // The refund is gated: the turn parks, and nothing ran.
//!     assert!(sink.drive(&FaqAgent::new(), start.clone()).await.unwrap_err().is_parked());
//!     assert_eq!(refunds.count(), 0);
//!     let call_id = sink.pending_approvals()[0].id.clone();
//!     sink.approve(&call_id);
//!     sink.drive(&FaqAgent::new(), start).await.unwrap();
//! });
//! assert_eq!(refunds.count(), 1); // exactly once, with the call's idempotency key
//! assert_eq!(refunds.paid()[0].idempotency_key, sink.tool_calls()[0].idempotency_key);
//! assert_eq!(sink.spoken_text(), "Done: refunded order 42.");
//! ```

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::ToolLoopAgent;
use crate::harness::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use crate::interaction::{Command, Feature, Handoff, Question, StateUpdate, Step};
use crate::message::{Message, ModelRequest, Part, Role, ToolCall, ToolResult};
use crate::model::ScriptedModel;
use crate::tool::{Tool, ToolContext, Tools};

/// Acme's opening hours, by day.
pub const HOURS: [(&str, &str); 7] = [
    ("Monday", "8am to 6pm"),
    ("Tuesday", "8am to 6pm"),
    ("Wednesday", "8am to 6pm"),
    ("Thursday", "8am to 6pm"),
    ("Friday", "8am to 6pm"),
    ("Saturday", "9am to 1pm"),
    ("Sunday", "closed"),
];

/// What the agent asks where the customer named no day.
pub const WHICH_DAY: &str = "Which day?";

/// What the agent says where the host cannot hand the conversation to a person.
pub const NO_PERSON: &str = "I can't put you through to a person here.";

/// What the agent says on "bye" where the host cannot hang up.
pub const GOODBYE: &str = "Goodbye!";

/// The system prompt the agent sends its model.
pub const SYSTEM_PROMPT: &str = "You answer questions for Acme: opening hours and refunds.";

/// The hours on `day` (any case), if it is a day of the week.
pub fn hours_on(day: &str) -> Option<&'static str> {
    HOURS
        .iter()
        .find(|(d, _)| d.eq_ignore_ascii_case(day.trim()))
        .map(|(_, h)| *h)
}

/// The day of the week a text names, if any, capitalized.
pub fn day_named(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    HOURS
        .iter()
        .map(|(d, _)| *d)
        .find(|d| lower.contains(&d.to_lowercase()))
}

/// One refund the payment service was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refund {
    /// The session (call, thread) the refund was made in.
    pub session_uid: String,
    /// The call's idempotency key: a real payment service refunds once per key.
    pub idempotency_key: String,
    /// The order refunded.
    pub order_id: u64,
}

/// The payment service behind `refund`, as a ledger: every time the tool's code ran, what it
/// was asked to pay and with which key. It does not deduplicate (a real one would, on the
/// key): a test reads from it how many times the host ran the code. Cheap to clone; clones
/// share the ledger.
#[derive(Clone, Debug, Default)]
pub struct Refunds(Arc<Mutex<Vec<Refund>>>);

impl Refunds {
    /// Every refund asked for, in order.
    pub fn paid(&self) -> Vec<Refund> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// How many times the refund's code ran.
    pub fn count(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or(0)
    }

    fn pay(&self, refund: Refund) {
        if let Ok(mut v) = self.0.lock() {
            v.push(refund);
        }
    }
}

/// The agent's tools, one registry for the agent (what its model is offered) and the host
/// (what it runs): `get_hours(day)` and the gated `refund(order_id)`, paying through
/// `refunds` with the call's idempotency key.
pub fn faq_tools(refunds: &Refunds) -> Tools {
    let refunds = refunds.clone();
    let day_schema = json!({
        "type": "object",
        "properties": {"day": {"type": "string", "description": "A day of the week; none: the whole week"}},
    });
    let order_schema = json!({
        "type": "object",
        "properties": {"order_id": {"type": "integer"}},
        "required": ["order_id"],
    });
    let get_hours = Tool::json("get_hours", "Acme's opening hours on a day", |args| {
        Ok(match args.get("day").and_then(Value::as_str) {
            Some(day) => match hours_on(day) {
                Some(hours) => json!({"day": day, "hours": hours}),
                None => return Err(format!("{day} is not a day of the week")),
            },
            None => Value::Object(
                HOURS
                    .iter()
                    .map(|(d, h)| (d.to_lowercase(), Value::from(*h)))
                    .collect(),
            ),
        })
    });
    let refund = Tool::new(
        "refund",
        "Refund an order",
        move |call: ToolCall, cx: ToolContext| {
            let result = match call.args.get("order_id").and_then(Value::as_u64) {
                Some(order_id) => {
                    // The effect takes the key: a host that re-drives the call (it could not
                    // record the result) must not pay twice.
                    refunds.pay(Refund {
                        session_uid: cx.session_uid,
                        idempotency_key: call.idempotency_key.clone(),
                        order_id,
                    });
                    ToolResult::ok_json(
                        &call.id,
                        json!({"result": format!("refunded order {order_id}")}),
                    )
                }
                None => ToolResult::error(&call.id, "which order? order_id is missing"),
            };
            async move { result }
        },
    )
    .requires_approval();
    Tools::new()
        .with(get_hours.with_input_schema(object(day_schema)))
        .with(refund.with_input_schema(object(order_schema)))
}

fn object(v: Value) -> crate::message::JsonObject {
    match v {
        Value::Object(m) => m,
        _ => crate::message::JsonObject::new(),
    }
}

/// The FAQ agent: harness-core's model-and-tools loop over [`faq_tools`], with a question, a
/// hand-off, a hang-up, steps, reasoning and state in front of it, each where the host
/// offers it. Stateless: the conversation comes from [`Start::history`].
#[derive(Clone, Debug)]
pub struct FaqAgent {
    inner: ToolLoopAgent,
}

impl Default for FaqAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl FaqAgent {
    /// The agent offering [`faq_tools`] as registered: it calls `refund` gated.
    pub fn new() -> Self {
        let tools = faq_tools(&Refunds::default());
        FaqAgent {
            inner: ToolLoopAgent::new("acme-faq")
                .with_system_prompt(SYSTEM_PROMPT)
                .with_tools(&tools),
        }
    }

    /// Offers the model `tools` too, beside the FAQ tools (a host's own, such as UHP's file
    /// tools), each with its own mediation.
    #[must_use]
    pub fn with_tools(mut self, tools: &Tools) -> Self {
        self.inner = self.inner.with_tools(tools);
        self
    }

    /// The agent offering every tool as plain controller-mediated: its `refund` call does not
    /// say it needs an approval, and the host's registry must gate it (every host does: see
    /// [`rules::gate`](crate::tool::rules::gate)).
    pub fn ungated() -> Self {
        let tools = faq_tools(&Refunds::default());
        let inner = tools.iter().fold(
            ToolLoopAgent::new("acme-faq").with_system_prompt(SYSTEM_PROMPT),
            |agent, tool| agent.with_tool(tool.definition().clone()),
        );
        FaqAgent { inner }
    }
}

/// Whether the customer asks about opening hours.
fn asks_hours(lower: &str) -> bool {
    lower.contains("hours") || lower.contains("you open")
}

/// Whether the customer says goodbye ("bye", "Thanks, bye", "goodbye!").
fn says_bye(lower: &str) -> bool {
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.len() <= 3 && matches!(words.last(), Some(&"bye") | Some(&"goodbye"))
}

#[async_trait]
impl Harness for FaqAgent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        self.inner.describe().await
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
        if says_bye(&lower) {
            return match sink.command(Command::hangup("resolved")).await {
                Err(SinkError::Unsupported(_)) => Ok(sink.output(GOODBYE).await?),
                other => other.map(|_| ()).map_err(Into::into),
            };
        }
        if !asks_hours(&lower) {
            return self.inner.run(start, sink).await;
        }
        let day = match day_named(&said) {
            Some(d) => Some(d.to_owned()),
            None if sink.supports(Feature::Questions) => {
                let answer = sink.ask(Question::new(WHICH_DAY)).await?;
                answer.text().map(str::to_owned)
            }
            None => None,
        };
        // Around the look-up: a step, reasoning and the day as shared state, where offered.
        let step = "look up the hours".to_owned();
        if sink.supports(Feature::Steps) {
            sink.step(Step::Started(step.clone())).await?;
        }
        if sink.supports(Feature::Reasoning) {
            let about = day.as_deref().unwrap_or("the whole week");
            sink.reasoning(&format!("They ask about {about}; ")).await?;
            sink.reasoning("get_hours knows.").await?;
        }
        if sink.supports(Feature::State) {
            sink.state(StateUpdate::Snapshot(json!({"day": day})))
                .await?;
        }
        if let Some(day) = &day {
            start
                .inputs
                .push(Message::user(format!("(the day: {day})")));
        }
        self.inner.run(start, sink).await?;
        if sink.supports(Feature::State) {
            let answered = json!({"op": "add", "path": "/answered", "value": true});
            sink.state(StateUpdate::Delta(vec![answered])).await?;
        }
        if sink.supports(Feature::Steps) {
            sink.step(Step::Finished(step)).await?;
        }
        Ok(())
    }
}

/// The model behind the FAQ agent (no network, no key): [`faq_answer`] as a
/// [`ScriptedModel`], with the id `scripted-faq`.
pub fn faq_model() -> ScriptedModel {
    ScriptedModel::new()
        .with_id("scripted-faq")
        .otherwise(|req| Ok(faq_answer(req)))
}

/// What the FAQ agent's model answers to `req`, a function of the request only: calls
/// `refund` for "refund … N", `get_hours` for the day given (`(the day: D)`) or named, or
/// for the week on "hours" / "open"; after a tool, says what its result says (a denial
/// included); greets a new call; otherwise `You said: …`.
///
/// A tool call's id is its place in the conversation (`call_<n>`, n the number of messages
/// before it): the same every time the same turn is driven, and different for each call of
/// a turn, whatever else the model served before (no counter shared between sessions).
pub fn faq_answer(req: &ModelRequest) -> Message {
    let call = |name: &str, args: Value| {
        let call = ToolCall::new(format!("call_{}", req.messages.len()), name, object(args));
        Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call)],
        }
    };
    let result = req
        .messages
        .last()
        .filter(|m| m.role == Role::Tool)
        .and_then(|m| {
            m.parts.iter().find_map(|p| match p {
                Part::ToolResult(r) => Some(r),
                _ => None,
            })
        });
    if let Some(r) = result {
        return Message::assistant(say_result(r));
    }
    let text = req.last_user_text().unwrap_or_default();
    let lower = text.to_lowercase();
    if lower.contains("refund") {
        let order = text
            .split(|c: char| !c.is_ascii_digit())
            .find_map(|d| d.parse::<u64>().ok());
        return call("refund", json!({"order_id": order}));
    }
    let given = text
        .strip_prefix("(the day: ")
        .and_then(|d| d.strip_suffix(')'));
    if let Some(day) = given.or_else(|| day_named(&text)) {
        return call("get_hours", json!({"day": day}));
    }
    if asks_hours(&lower) {
        return call("get_hours", json!({}));
    }
    if lower == "(call connected)" {
        return Message::assistant("Thanks for calling Acme.");
    }
    Message::assistant(format!("You said: {text}"))
}

/// What the model says after a tool's result.
fn say_result(r: &ToolResult) -> String {
    if r.is_denied() {
        return format!("The refund was not done: {}.", r.error);
    }
    if r.is_error {
        return format!("Sorry: {}.", r.error);
    }
    let out = r.output.clone().unwrap_or_default();
    let s = |k: &str| out.get(k).and_then(Value::as_str);
    if let Some(done) = s("result") {
        return format!("Done: {done}.");
    }
    match (s("day"), s("hours")) {
        (Some(day), Some("closed")) => format!("On {day} we're closed."),
        (Some(day), Some(hours)) => format!("On {day} we're open {hours}."),
        _ => match s("monday").or(s("weekdays")) {
            Some(h) => format!("We're open {h} on weekdays."),
            None => "Sorry, I could not look that up.".to_owned(),
        },
    }
}
