//! Unit-testing agents without any protocol: a sink that records what a harness did.
//!
//! ```
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::{Message, ToolResult};
//! use harness_core::model::ScriptedModel;
//! use harness_core::testing::{RecordingSink, SinkCall};
//! use harness_core::{Harness, Start};
//! use serde_json::json;
//!
//! let model = ScriptedModel::new()
//!     .tool_call("get_hours", json!({}))
//!     .reply("We're open eight to six on weekdays.");
//! let mut sink = RecordingSink::new(model).with_tool("get_hours", |call| {
//!     ToolResult::ok_json(&call.id, json!({"weekdays": "8am to 6pm"}))
//! });
//! let agent = ToolLoopAgent::new("faq");
//! let start = Start::with_inputs(vec![Message::user("When are you open?")]);
//! futures::executor::block_on(agent.run(start, &mut sink)).unwrap();
//!
//! assert_eq!(sink.model_calls(), 2);
//! assert_eq!(sink.tool_calls()[0].tool, "get_hours");
//! assert_eq!(sink.spoken_text(), "We're open eight to six on weekdays.");
//! assert!(matches!(sink.calls()[1], SinkCall::ToolCall { .. }));
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use crate::harness::{EventSink, SinkError};
use crate::message::{Mediation, ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use crate::model::{Model, ModelError, ModelEvent};

/// One thing a harness did through the sink, in order.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SinkCall {
    /// `sink.model`: the request, the streamed deltas and the response (or the error).
    Model {
        /// What the harness asked.
        request: ModelRequest,
        /// The deltas the model streamed.
        deltas: Vec<String>,
        /// What it got.
        response: Result<ModelResponse, ModelError>,
    },
    /// `sink.output`.
    Output(String),
    /// `sink.tool_call` and the result it got.
    ToolCall {
        /// The call.
        call: ToolCall,
        /// The result handed back.
        result: ToolResult,
    },
    /// `sink.report`.
    Report(ToolResult),
    /// `sink.usage`.
    Usage(Usage),
}

type ToolFn = Box<dyn Fn(&ToolCall) -> ToolResult + Send + Sync>;

/// An [`EventSink`] that answers model calls from a [`Model`], tool calls from registered
/// functions, and records everything.
///
/// An unregistered tool gets an error result (`is_error`, "unknown tool"). After
/// [`cancel`](Self::cancel), every call returns [`SinkError::Cancelled`].
///
/// `sink.tool_call` is held to the strictest host's rules, those of the agentsessions
/// controller, so that an agent that passes here runs on every host: a call that is not
/// [`ControllerMediated`](crate::message::Mediation::ControllerMediated) or
/// [`RequiresApproval`](crate::message::Mediation::RequiresApproval), or has no idempotency
/// key, or is approval-gated with no call id, is refused with [`SinkError::Rejected`] and not
/// recorded (set both with
/// [`ToolCall::controller_mediated`]). [`lenient_tools`](Self::lenient_tools) turns the check
/// off for an agent that will only be served where the host does not check (jambonz,
/// TanStack).
///
/// ```
/// use harness_core::message::{JsonObject, ToolCall};
/// use harness_core::model::ScriptedModel;
/// use harness_core::testing::RecordingSink;
/// use harness_core::{EventSink, SinkError};
///
/// let mut sink = RecordingSink::new(ScriptedModel::new());
/// let call = ToolCall::new("call_1", "get_weather", JsonObject::new());
/// let refused = futures::executor::block_on(sink.tool_call(call.clone()));
/// assert!(matches!(refused, Err(SinkError::Rejected(_))));
/// let ran = futures::executor::block_on(sink.tool_call(call.controller_mediated("x1")));
/// assert!(ran.unwrap().is_error); // ran: no function registered for it ("unknown tool")
/// ```
pub struct RecordingSink {
    model: Arc<dyn Model>,
    tools: HashMap<String, ToolFn>,
    calls: Vec<SinkCall>,
    cancelled: bool,
    lenient_tools: bool,
}

impl fmt::Debug for RecordingSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingSink")
            .field("calls", &self.calls)
            .field("cancelled", &self.cancelled)
            .finish_non_exhaustive()
    }
}

impl RecordingSink {
    /// A sink whose model calls go to `model`.
    pub fn new(model: impl Model + 'static) -> Self {
        Self::with_model(Arc::new(model))
    }

    /// A sink whose model calls go to a shared model (keep a clone to read its counters).
    pub fn with_model(model: Arc<dyn Model>) -> Self {
        RecordingSink {
            model,
            tools: HashMap::new(),
            calls: Vec::new(),
            cancelled: false,
            lenient_tools: false,
        }
    }

    /// Accepts `sink.tool_call` without a host-executed mediation or an idempotency key
    /// (the jambonz and TanStack drivers do; the agentsessions controller does not).
    #[must_use]
    pub fn lenient_tools(mut self) -> Self {
        self.lenient_tools = true;
        self
    }

    /// Answers calls of the tool `name` with `f`.
    #[must_use]
    pub fn with_tool(
        mut self,
        name: impl Into<String>,
        f: impl Fn(&ToolCall) -> ToolResult + Send + Sync + 'static,
    ) -> Self {
        self.tools.insert(name.into(), Box::new(f));
        self
    }

    /// Cancels the turn: every later sink call fails with [`SinkError::Cancelled`].
    pub fn cancel(&mut self) {
        self.cancelled = true;
    }

    /// Everything recorded, in order.
    pub fn calls(&self) -> &[SinkCall] {
        &self.calls
    }

    /// How many times the harness called `sink.model`.
    pub fn model_calls(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| matches!(c, SinkCall::Model { .. }))
            .count()
    }

    /// The tool calls the harness asked the host to run.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                SinkCall::ToolCall { call, .. } => Some(call),
                _ => None,
            })
            .collect()
    }

    /// The tools the harness reported running itself.
    pub fn reports(&self) -> Vec<&ToolResult> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                SinkCall::Report(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// Everything the turn said, in order: the text of each model completion and each
    /// `sink.output` delta. On a phone call, this is what the caller would hear.
    pub fn spoken_text(&self) -> String {
        let mut out = String::new();
        for c in &self.calls {
            match c {
                SinkCall::Model {
                    response: Ok(r), ..
                } => out.push_str(&r.message.text()),
                SinkCall::Output(d) => out.push_str(d),
                _ => {}
            }
        }
        out
    }

    /// What a streaming host would have sent, piece by piece: each text delta the model
    /// streamed during `sink.model` and each `sink.output` delta, in order. Joined, they
    /// are [`spoken_text`](Self::spoken_text).
    pub fn deltas(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for c in &self.calls {
            match c {
                SinkCall::Model { deltas, .. } => out.extend(deltas.iter().map(String::as_str)),
                SinkCall::Output(d) => out.push(d.as_str()),
                _ => {}
            }
        }
        out
    }

    /// The sum of the usage the harness reported with `sink.usage`.
    pub fn reported_usage(&self) -> Usage {
        let mut total = Usage::default();
        for c in &self.calls {
            if let SinkCall::Usage(u) = c {
                total.add(u);
            }
        }
        total
    }

    fn check(&self) -> Result<(), SinkError> {
        if self.cancelled {
            Err(SinkError::Cancelled)
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl EventSink for RecordingSink {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.check()?;
        let mut deltas = Vec::new();
        let mut response = Err(ModelError::Incomplete);
        {
            let mut s = self.model.stream(&req);
            while let Some(ev) = s.next().await {
                match ev {
                    Ok(ModelEvent::TextDelta(d)) => deltas.push(d),
                    Ok(ModelEvent::Completed(r)) => {
                        response = Ok(r);
                        break;
                    }
                    Err(e) => {
                        response = Err(e);
                        break;
                    }
                }
            }
        }
        self.calls.push(SinkCall::Model {
            request: req,
            deltas,
            response: response.clone(),
        });
        Ok(response?)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.check()?;
        self.calls.push(SinkCall::Output(delta.to_owned()));
        Ok(())
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.check()?;
        if !self.lenient_tools {
            // The agentsessions controller's rules, with its words.
            if !call.mediation.is_host_executed() {
                return Err(SinkError::Rejected(
                    "unmediated tool call: sink.tool_call needs CONTROLLER_MEDIATED or REQUIRES_APPROVAL (run it yourself and sink.report it)".into(),
                ));
            }
            if call.idempotency_key.is_empty() {
                return Err(SinkError::Rejected("missing idempotency key".into()));
            }
            // The approval gate names the call it parks: it needs the call's id.
            if call.mediation == Mediation::RequiresApproval && call.id.is_empty() {
                return Err(SinkError::Rejected(
                    "an approval-gated call needs a call id".into(),
                ));
            }
        }
        let mut result = match self.tools.get(&call.tool) {
            Some(f) => f(&call),
            None => ToolResult::error(&call.id, format!("unknown tool: {}", call.tool)),
        };
        if result.id.is_empty() {
            result.id.clone_from(&call.id);
        }
        self.calls.push(SinkCall::ToolCall {
            call,
            result: result.clone(),
        });
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.check()?;
        self.calls.push(SinkCall::Report(result));
        Ok(())
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.check()?;
        self.calls.push(SinkCall::Usage(usage));
        Ok(())
    }
}
