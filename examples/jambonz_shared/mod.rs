//! Shared by the jambonz examples and the tour chapter: the demo agents (the tour's FAQ agent,
//! `harness_core::agent::faq`, the one every host serves; and the spec's minimal harness) and
//! the demo call. Serving them is `harness_jambonz::server::JambonzServer`; calling them,
//! `harness_jambonz::client::Caller`.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
use harness_core::event::EventBody;
use harness_core::message::{Message, ModelRequest, ModelResponse, Usage};
use harness_core::model::{Model, ModelEvent, ModelStream, word_deltas};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start, Tools};
use harness_jambonz::simulator::{Script, SimConfig, Simulator};

/// The FAQ tools a phone call's harness runs itself: `refund`, gated. On a phone call no one
/// can approve it (jambonz has no approval message), so the driver's policy decides (deny
/// by default: the code never runs, and the agent says the refund was not done).
pub fn own_tools(refunds: &Refunds) -> Tools {
    faq_tools(refunds)
        .iter()
        .filter(|t| t.name() != "get_hours")
        .cloned()
        .collect()
}

/// The FAQ tools the platform runs on `tool:call` (the simulator plays them): `get_hours`.
pub fn platform_tools() -> Tools {
    faq_tools(&Refunds::default())
        .iter()
        .filter(|t| t.name() == "get_hours")
        .cloned()
        .collect()
}

/// The FAQ agent, its model and its own tools, as `jambonz_server` serves them.
pub fn faq() -> (Arc<dyn Harness>, Arc<dyn Model>, Tools) {
    (
        Arc::new(FaqAgent::new()),
        Arc::new(faq_model()),
        own_tools(&Refunds::default()),
    )
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

/// The model of `scripts/interop/jambonz/minimal_harness.mjs`, in Rust: it answers from the
/// caller's last words ("Thanks for calling Acme." to the greeting, the hours to a question
/// about them, else "Goodbye."), streamed a word a delta. Like the JavaScript one it reads
/// only the last message; `ScriptedModel` would also count tokens over the whole history
/// (its `usage`), which the load test would then measure instead of the server.
pub struct MinimalModel;

impl Model for MinimalModel {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let said = req.last_user_text().unwrap_or_default().to_lowercase();
        let text = if said == "(call connected)" {
            "Thanks for calling Acme."
        } else if said.contains("open") || said.contains("hours") {
            "We're open eight to six on weekdays."
        } else {
            "Goodbye."
        };
        let done = ModelResponse {
            message: Message::assistant(text),
            usage: Usage {
                model: "scripted".into(),
                output_tokens: text.len().div_ceil(4) as u64,
                ..Usage::default()
            },
        };
        let deltas = word_deltas(text).into_iter().map(ModelEvent::TextDelta);
        futures::stream::iter(deltas.chain([ModelEvent::Completed(done)]).map(Ok)).boxed()
    }
}

/// [`Minimal`], its model, and no tools of its own.
pub fn minimal() -> (Arc<dyn Harness>, Arc<dyn Model>, Tools) {
    (Arc::new(Minimal), Arc::new(MinimalModel), Tools::new())
}
