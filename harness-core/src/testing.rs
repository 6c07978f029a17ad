//! Unit-testing agents without any protocol: a sink that records what a harness did.
//!
//! ```
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::{Message, ToolResult};
//! use harness_core::model::ScriptedModel;
//! use harness_core::testing::{RecordingSink, SinkCall};
//! use harness_core::tool::{Tool, Tools};
//! use harness_core::{Harness, Start};
//! use serde_json::json;
//!
//! let tools = Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
//!     Ok(json!({"weekdays": "8am to 6pm"}))
//! }));
//! let model = ScriptedModel::new()
//!     .tool_call("get_hours", json!({}))
//!     .reply("We're open eight to six on weekdays.");
//! let agent = ToolLoopAgent::new("faq").with_tools(&tools); // offers what the host runs
//! let mut sink = RecordingSink::new(model).with_tools(tools);
//! let start = Start::with_inputs(vec![Message::user("When are you open?")]);
//! futures::executor::block_on(agent.run(start, &mut sink)).unwrap();
//!
//! assert_eq!(sink.model_calls(), 2);
//! assert_eq!(sink.tool_calls()[0].tool, "get_hours");
//! assert_eq!(sink.spoken_text(), "We're open eight to six on weekdays.");
//! assert!(matches!(sink.calls()[1], SinkCall::ToolCall { .. }));
//! ```
//!
//! Approvals and questions park the turn, as on the agentsessions and TanStack hosts:
//! [`RecordingSink::drive`] runs the turn, [`approve`](RecordingSink::approve),
//! [`deny`](RecordingSink::deny) or [`answer`](RecordingSink::answer) records the
//! decision, and driving the same turn again serves what it did before from its
//! [`Tape`] and goes on from the decision.
//!
//! ```
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::{Message, ToolResult};
//! use harness_core::model::ScriptedModel;
//! use harness_core::testing::RecordingSink;
//! use harness_core::tool::{Tool, Tools};
//! use harness_core::Start;
//! use serde_json::json;
//!
//! let tools = Tools::new().with(
//!     Tool::json("refund", "Refund an order", |args| Ok(json!({"refunded": args["order_id"]})))
//!         .requires_approval(),
//! );
//! let model = ScriptedModel::new()
//!     .tool_call("refund", json!({"order_id": 42}))
//!     .reply("Your refund is on its way.");
//! let agent = ToolLoopAgent::new("shop").with_tools(&tools);
//! let mut sink = RecordingSink::new(model).with_tools(tools);
//! let start = Start::with_inputs(vec![Message::user("Refund order 42")]);
//!
//! let parked = futures::executor::block_on(sink.drive(&agent, start.clone())).unwrap_err();
//! assert!(parked.is_parked());
//! assert!(sink.tool_results().is_empty()); // the refund has not run
//! let call_id = sink.pending_approvals()[0].id.clone();
//! sink.approve(&call_id);
//! futures::executor::block_on(sink.drive(&agent, start)).unwrap();
//! assert_eq!(sink.tool_results().len(), 1); // ran exactly once
//! assert_eq!(sink.model_calls(), 2); // the first completion was served from the tape
//! assert_eq!(sink.spoken_text(), "Your refund is on its way.");
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

use crate::harness::{EventSink, Harness, HarnessError, SinkError, Start};
use crate::interaction::{
    Answer, Command, CommandResult, Feature, Handoff, Question, StateUpdate, Step,
};
use crate::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use crate::model::{Model, ModelError, ModelEvent};
use crate::tape::{Tape, Taped};
use crate::tool::rules::{self, ApprovalPolicy, Gate};
use crate::tool::{Tool, ToolContext, Tools};

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
    /// `sink.tool_call` and the result it got (a denial included).
    ToolCall {
        /// The call.
        call: ToolCall,
        /// The result handed back.
        result: ToolResult,
    },
    /// `sink.tool_call` of a gated call with no decision yet: the turn parked.
    ApprovalRequested(ToolCall),
    /// `sink.report`.
    Report(ToolResult),
    /// `sink.usage`.
    Usage(Usage),
    /// `sink.ask` of a question with no answer yet: the turn parked.
    Asked(Question),
    /// `sink.ask` and the answer it got.
    Answered(Answer),
    /// `sink.handoff`.
    Handoff(Handoff),
    /// `sink.command` and its result.
    Command {
        /// The command.
        command: Command,
        /// What the platform answered.
        result: CommandResult,
    },
    /// `sink.reasoning`.
    Reasoning(String),
    /// `sink.state`.
    State(StateUpdate),
    /// `sink.step`.
    Step(Step),
}

/// The future of a sink call, as `#[async_trait]` writes it.
type SinkFuture<'f, T> = Pin<Box<dyn Future<Output = Result<T, SinkError>> + Send + 'f>>;

type Answerer = Box<dyn Fn(&Question) -> Option<Value> + Send + Sync>;
type CommandFn = Box<dyn Fn(&Command) -> CommandResult + Send + Sync>;

/// An [`EventSink`] that answers model calls from a [`Model`], runs tool calls with a
/// [`Tools`] registry, and records everything.
///
/// It is held to the strictest host's rules, so that an agent that passes here runs on
/// every host:
///
/// - `sink.tool_call` applies [`rules::check_call`] (agentsessions' rules, with its words):
///   an unmediated call, one without an idempotency key, or an approval-gated one without a
///   call id is refused with [`SinkError::Rejected`] and not recorded.
///   [`lenient_tools`](Self::lenient_tools) turns that check off, never the gate.
/// - A gated call (the call or its tool requires approval, [`rules::gate`]) parks the turn
///   with [`SinkError::ApprovalParked`] until [`approve`](Self::approve) or
///   [`deny`](Self::deny); a denied call never runs and the agent gets
///   [`ToolResult::denied`]. Without [`Feature::Approvals`]
///   ([`without`](Self::without)), the [`ApprovalPolicy`] decides at once (deny by default),
///   as on jambonz.
/// - `sink.ask` parks the turn with [`SinkError::AwaitingAnswer`] until
///   [`answer`](Self::answer) (or [`answering`](Self::answering) answers at once).
/// - Every [`Feature`] is offered until [`without`](Self::without) takes it away; a method
///   of a feature taken away answers [`SinkError::Unsupported`].
/// - An unregistered tool gets an error result (`unknown tool`). After
///   [`cancel`](Self::cancel), every call returns [`SinkError::Cancelled`].
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
/// assert!(ran.unwrap().is_error); // ran: no tool registered by that name ("unknown tool")
/// ```
pub struct RecordingSink {
    live: Live,
    tape: Tape,
}

/// Everything but the tape: what [`Taped`] drives live.
struct Live {
    model: Arc<dyn Model>,
    tools: Tools,
    context: ToolContext,
    calls: Vec<SinkCall>,
    cancelled: bool,
    lenient_tools: bool,
    offered: Offered,
    policy: ApprovalPolicy,
    decisions: HashMap<String, Result<(), String>>,
    answers: HashMap<String, Value>,
    answerer: Option<Answerer>,
    on_command: Option<CommandFn>,
    pending_approvals: Vec<ToolCall>,
    pending_questions: Vec<Question>,
}

impl fmt::Debug for RecordingSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingSink")
            .field("calls", &self.live.calls)
            .field("cancelled", &self.live.cancelled)
            .field("tools", &self.live.tools)
            .field("offered", &self.live.offered)
            .finish_non_exhaustive()
    }
}

impl RecordingSink {
    /// A sink whose model calls go to `model` (pass an `Arc` of it to keep a handle and
    /// read its counters).
    pub fn new(model: impl Model + 'static) -> Self {
        RecordingSink {
            live: Live {
                model: Arc::new(model),
                tools: Tools::new(),
                context: ToolContext::default(),
                calls: Vec::new(),
                cancelled: false,
                lenient_tools: false,
                offered: Offered::ALL,
                policy: ApprovalPolicy::default(),
                decisions: HashMap::new(),
                answers: HashMap::new(),
                answerer: None,
                on_command: None,
                pending_approvals: Vec::new(),
                pending_questions: Vec::new(),
            },
            tape: Tape::new(),
        }
    }

    /// Runs `sink.tool_call` with these tools (replacing any registered before).
    #[must_use]
    pub fn with_tools(mut self, tools: Tools) -> Self {
        self.live.tools = tools;
        self
    }

    /// Adds one tool.
    #[must_use]
    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.live.tools.insert(tool);
        self
    }

    /// The session and execution the tools see in their [`ToolContext`].
    #[must_use]
    pub fn with_context(mut self, context: ToolContext) -> Self {
        self.live.context = context;
        self
    }

    /// Accepts `sink.tool_call` without a host-executed mediation, an idempotency key or
    /// a call id ([`rules::check_call`] off). A gated call is still gated.
    #[must_use]
    pub fn lenient_tools(mut self) -> Self {
        self.live.lenient_tools = true;
        self
    }

    /// Takes a feature away, to test an agent as a host without it sees it (jambonz has no
    /// questions; TanStack no commands). Without [`Feature::Approvals`], gated calls are
    /// decided by the [`ApprovalPolicy`].
    #[must_use]
    pub fn without(mut self, feature: Feature) -> Self {
        self.live.offered.remove(feature);
        self
    }

    /// How gated calls are decided when [`Feature::Approvals`] is taken away (deny by
    /// default).
    #[must_use]
    pub fn with_approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.live.policy = policy;
        self
    }

    /// Answers questions at once with `f` (`None`: no answer, the turn parks).
    #[must_use]
    pub fn answering(
        mut self,
        f: impl Fn(&Question) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        self.live.answerer = Some(Box::new(f));
        self
    }

    /// Answers platform commands with `f` (by default every command succeeds).
    #[must_use]
    pub fn on_command(
        mut self,
        f: impl Fn(&Command) -> CommandResult + Send + Sync + 'static,
    ) -> Self {
        self.live.on_command = Some(Box::new(f));
        self
    }

    /// Runs one turn of `harness` through this sink, serving what the turn already did
    /// when it is driven again after a park.
    ///
    /// A turn that parks (an approval, a question) keeps its tape: record the decision
    /// ([`approve`](Self::approve), [`deny`](Self::deny), [`answer`](Self::answer)) and
    /// drive it again with the same `start`. A turn that ends (done, failed or cancelled)
    /// drops its tape; the next `drive` is a new turn.
    pub async fn drive(
        &mut self,
        harness: &(impl Harness + ?Sized),
        start: Start,
    ) -> Result<(), HarnessError> {
        self.live.pending_approvals.clear();
        self.live.pending_questions.clear();
        let result = {
            let mut taped = Taped::new(&mut self.live, &mut self.tape);
            harness.run(start, &mut taped).await
        };
        if !matches!(&result, Err(e) if e.is_parked()) {
            self.tape.clear();
        }
        result
    }

    /// Approves the gated call `call_id`: driven again, the turn runs it.
    pub fn approve(&mut self, call_id: &str) {
        self.live.decisions.insert(call_id.to_owned(), Ok(()));
    }

    /// Denies the gated call `call_id`: driven again, the turn gets
    /// [`ToolResult::denied`] with `reason`, and the tool never runs.
    pub fn deny(&mut self, call_id: &str, reason: &str) {
        self.live
            .decisions
            .insert(call_id.to_owned(), Err(reason.to_owned()));
    }

    /// Answers the question `question_id`: driven again, the turn gets `value`.
    pub fn answer(&mut self, question_id: &str, value: impl Into<Value>) {
        self.live
            .answers
            .insert(question_id.to_owned(), value.into());
    }

    /// The gated calls the last [`drive`](Self::drive) parked on.
    pub fn pending_approvals(&self) -> &[ToolCall] {
        &self.live.pending_approvals
    }

    /// The questions the last [`drive`](Self::drive) parked on (with their ids).
    pub fn pending_questions(&self) -> &[Question] {
        &self.live.pending_questions
    }

    /// Cancels the turn: every later sink call fails with [`SinkError::Cancelled`].
    pub fn cancel(&mut self) {
        self.live.cancelled = true;
    }

    /// Everything recorded, in order.
    pub fn calls(&self) -> &[SinkCall] {
        &self.live.calls
    }

    /// How many times the model was called (a completion served from the tape of a parked
    /// turn is not a call).
    pub fn model_calls(&self) -> usize {
        self.live
            .calls
            .iter()
            .filter(|c| matches!(c, SinkCall::Model { .. }))
            .count()
    }

    /// The tool calls the host answered (run, or denied), in order.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.live
            .calls
            .iter()
            .filter_map(|c| match c {
                SinkCall::ToolCall { call, .. } => Some(call),
                _ => None,
            })
            .collect()
    }

    /// The results the host handed back for tool calls (denials included), in order.
    pub fn tool_results(&self) -> Vec<&ToolResult> {
        self.live
            .calls
            .iter()
            .filter_map(|c| match c {
                SinkCall::ToolCall { result, .. } if !result.is_denied() => Some(result),
                _ => None,
            })
            .collect()
    }

    /// The tools the harness reported running itself.
    pub fn reports(&self) -> Vec<&ToolResult> {
        self.live
            .calls
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
        for c in &self.live.calls {
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
        for c in &self.live.calls {
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
        for c in &self.live.calls {
            if let SinkCall::Usage(u) = c {
                total.add(u);
            }
        }
        total
    }
}

/// The features a [`RecordingSink`] offers: a set of [`Feature`]s, one bit each.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Offered(u32);

// One bit per feature.
const _: () = assert!(Feature::ALL.len() <= 32);

impl Offered {
    /// Every feature.
    const ALL: Offered = Offered(u32::MAX);

    fn bit(feature: Feature) -> u32 {
        1 << (feature as u32)
    }

    fn contains(self, feature: Feature) -> bool {
        self.0 & Self::bit(feature) != 0
    }

    fn remove(&mut self, feature: Feature) {
        self.0 &= !Self::bit(feature);
    }
}

impl fmt::Debug for Offered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(Feature::ALL.into_iter().filter(|&x| self.contains(x)))
            .finish()
    }
}

impl Live {
    fn check(&self) -> Result<(), SinkError> {
        if self.cancelled {
            Err(SinkError::Cancelled)
        } else {
            Ok(())
        }
    }

    fn offer(&self, feature: Feature) -> Result<(), SinkError> {
        self.check()?;
        if self.offered.contains(feature) {
            Ok(())
        } else {
            Err(SinkError::Unsupported(feature))
        }
    }

    /// The decision for a gated call: `Some(Ok)` run it, `Some(Err)` deny it, `None` park.
    fn decision(&self, call: &ToolCall) -> Option<Result<(), String>> {
        if !self.offered.contains(Feature::Approvals) {
            return Some(self.policy.decide(call));
        }
        self.decisions.get(&call.id).cloned()
    }
}

#[async_trait]
impl EventSink for Live {
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
                    Ok(_) => {} // reasoning: not what the agent says
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
            rules::check_call(&call)?;
        }
        let call = match rules::gate(call, &self.tools) {
            Gate::Run(call) => call,
            // A call the registry gated is held to the gated call's rules too (its id names
            // it in the approval), as the sessions controller does.
            Gate::NeedsApproval(call) if !self.lenient_tools && call.id.is_empty() => {
                rules::check_call(&call)?;
                call
            }
            Gate::NeedsApproval(call) => match self.decision(&call) {
                Some(Ok(())) => call,
                Some(Err(reason)) => {
                    let result = ToolResult::denied(&call.id, &reason);
                    self.calls.push(SinkCall::ToolCall {
                        call,
                        result: result.clone(),
                    });
                    return Ok(result);
                }
                None => {
                    let parked = SinkError::ApprovalParked {
                        tool_call_id: call.id.clone(),
                        request_seq: 0,
                    };
                    self.calls.push(SinkCall::ApprovalRequested(call.clone()));
                    self.pending_approvals.push(call);
                    return Err(parked);
                }
            },
        };
        let result = self.tools.call_ref(&call, &self.context).await;
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

    fn supports(&self, feature: Feature) -> bool {
        self.offered.contains(feature)
    }

    async fn ask(&mut self, mut question: Question) -> Result<Answer, SinkError> {
        self.offer(Feature::Questions)?;
        if question.id.is_empty() {
            question.id = format!("q{}", self.calls.len());
        }
        let value = self
            .answers
            .get(&question.id)
            .cloned()
            .or_else(|| self.answerer.as_ref().and_then(|f| f(&question)));
        match value {
            Some(value) => {
                let answer = Answer::new(question.id, value);
                self.calls.push(SinkCall::Answered(answer.clone()));
                Ok(answer)
            }
            None => {
                let parked = SinkError::AwaitingAnswer {
                    question_id: question.id.clone(),
                };
                self.calls.push(SinkCall::Asked(question.clone()));
                self.pending_questions.push(question);
                Err(parked)
            }
        }
    }

    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        self.offer(Feature::Handoff)?;
        self.calls.push(SinkCall::Handoff(handoff));
        Ok(())
    }

    async fn command(&mut self, command: Command) -> Result<CommandResult, SinkError> {
        self.offer(Feature::Commands)?;
        let result = match &self.on_command {
            Some(f) => f(&command),
            None => CommandResult {
                ok: true,
                ..CommandResult::default()
            },
        };
        self.calls.push(SinkCall::Command {
            command,
            result: result.clone(),
        });
        Ok(result)
    }

    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.offer(Feature::Reasoning)?;
        self.calls.push(SinkCall::Reasoning(delta.to_owned()));
        Ok(())
    }

    async fn state(&mut self, update: StateUpdate) -> Result<(), SinkError> {
        self.offer(Feature::State)?;
        self.calls.push(SinkCall::State(update));
        Ok(())
    }

    async fn step(&mut self, step: Step) -> Result<(), SinkError> {
        self.offer(Feature::Steps)?;
        self.calls.push(SinkCall::Step(step));
        Ok(())
    }
}

/// Used directly (`agent.run(start, &mut sink)`), the sink is live: nothing is served from a
/// tape, and a parked turn stays parked. Use [`RecordingSink::drive`] to resume one.
#[async_trait]
impl EventSink for RecordingSink {
    // The calls of every turn hand back the live sink's own future: one box per call, not a
    // box around a box.
    fn model<'s, 'f>(&'s mut self, req: ModelRequest) -> SinkFuture<'f, ModelResponse>
    where
        's: 'f,
    {
        self.live.model(req)
    }
    fn output<'s, 'd, 'f>(&'s mut self, delta: &'d str) -> SinkFuture<'f, ()>
    where
        's: 'f,
        'd: 'f,
    {
        self.live.output(delta)
    }
    fn tool_call<'s, 'f>(&'s mut self, call: ToolCall) -> SinkFuture<'f, ToolResult>
    where
        's: 'f,
    {
        self.live.tool_call(call)
    }
    fn report<'s, 'f>(&'s mut self, result: ToolResult) -> SinkFuture<'f, ()>
    where
        's: 'f,
    {
        self.live.report(result)
    }
    fn usage<'s, 'f>(&'s mut self, usage: Usage) -> SinkFuture<'f, ()>
    where
        's: 'f,
    {
        self.live.usage(usage)
    }
    fn supports(&self, feature: Feature) -> bool {
        self.live.supports(feature)
    }
    async fn ask(&mut self, question: Question) -> Result<Answer, SinkError> {
        self.live.ask(question).await
    }
    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        self.live.handoff(handoff).await
    }
    async fn command(&mut self, command: Command) -> Result<CommandResult, SinkError> {
        self.live.command(command).await
    }
    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.live.reasoning(delta).await
    }
    async fn state(&mut self, update: StateUpdate) -> Result<(), SinkError> {
        self.live.state(update).await
    }
    async fn step(&mut self, step: Step) -> Result<(), SinkError> {
        self.live.step(step).await
    }
}
