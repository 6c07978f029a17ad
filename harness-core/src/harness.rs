//! The `Harness` and `EventSink` traits: an agent written once, served over every protocol.
//!
//! A [`Harness`] drives one turn at a time: it reads a [`Start`] and does everything the
//! world should see through an [`EventSink`]. The sink is the protocol adapter: on a jambonz
//! call `sink.output` becomes `reply:chunk`s, on a TanStack thread `TEXT_MESSAGE_CONTENT`
//! events, in an agentsessions journal `OUTPUT` records; on replay the sink answers
//! `sink.model` from the journal without calling a provider.
//!
//! **Cancellation.** A turn is cancelled by dropping its future. A sink method called after
//! the turn was cancelled (for example by a task the agent spawned, or in the window between
//! a cancel arriving and the future being dropped) returns [`SinkError::Cancelled`], so an
//! agent that goes on stops at its next await.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event::Event;
use crate::interaction::{
    Answer, Command, CommandResult, Feature, Handoff, Question, StateUpdate, Step,
};
use crate::message::{Message, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec, Usage};
use crate::model::ModelError;

/// How a harness can be resumed after a crash or forked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Resumability {
    /// No durable in-process state beyond the journal: resume and fork replay
    /// [`Start::history`] into a fresh harness. Runs anywhere.
    #[default]
    #[serde(rename = "STATELESS_REPLAY")]
    StatelessReplay,
    /// In-process state the journal cannot rebuild: the host restores memory snapshots, and
    /// the harness never rebuilds state from `history` (I4). Needs memory-capable compute.
    #[serde(rename = "REQUIRES_MEMORY_SNAPSHOT")]
    RequiresMemorySnapshot,
}

/// What a harness needs from the runtime; the host places it accordingly.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capabilities {
    /// How it resumes.
    #[serde(default)]
    pub resumability: Resumability,
    /// No un-replayable side effects mid-turn.
    #[serde(default)]
    pub fork_safe: bool,
    /// Needs a GPU.
    #[serde(default)]
    pub requires_gpu: bool,
    /// Streams output.
    #[serde(default)]
    pub streaming: bool,
    /// Persists opaque provider reasoning verbatim.
    #[serde(default)]
    pub reasoning_replay: bool,
}

/// A harness's static contract.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Descriptor {
    /// A stable id, e.g. `echo`.
    pub id: String,
    /// An optional, opaque replay-compatibility version: change it when deterministic
    /// execution or config interpretation changes. Recorded at every execution start.
    #[serde(default)]
    pub version: String,
    /// Supported or required model ids.
    #[serde(default)]
    pub models: Vec<String>,
    /// The tools it uses.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// What it needs from the runtime.
    #[serde(default)]
    pub capabilities: Capabilities,
}

impl Descriptor {
    /// A descriptor with an id and a version, stateless, no tools.
    pub fn new(id: impl Into<String>, version: impl Into<String>) -> Self {
        Descriptor {
            id: id.into(),
            version: version.into(),
            ..Default::default()
        }
    }
}

/// Who the turn runs for.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IdentityContext {
    /// The principal.
    #[serde(default)]
    pub principal: String,
    /// Whether the harness may mint tokens for it.
    #[serde(default)]
    pub can_mint_tokens: bool,
}

/// Everything a harness gets to run one turn.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Start {
    /// The execution (turn) id.
    #[serde(default)]
    pub execution_id: String,
    /// The session (call, thread) the turn belongs to.
    #[serde(default)]
    pub session_uid: String,
    /// Opaque per-execution config, journaled before the harness runs (never secrets).
    #[serde(default, with = "crate::proto_json::bytes")]
    pub config: Vec<u8>,
    /// The replay context on the stateless path: earlier events of the session. Empty after
    /// a memory restore; a memory-snapshot harness never reads it (I4). Dereferences to
    /// `&[Event]`; cheap to clone (the events are shared).
    #[serde(default)]
    pub history: History,
    /// This turn's inputs.
    #[serde(default)]
    pub inputs: Vec<Message>,
    /// Who the turn runs for.
    #[serde(default)]
    pub identity: IdentityContext,
    /// A harness cursor for resumption (not the journal's append cursor).
    #[serde(default)]
    pub resume_from_seq: i64,
}

impl Start {
    /// A turn with these inputs and nothing else.
    pub fn with_inputs(inputs: Vec<Message>) -> Self {
        Start {
            inputs,
            ..Default::default()
        }
    }

    /// The conversation so far, from `history`: each `INPUT` as its message and each
    /// `OUTPUT` as an assistant message, in order. What a stateless chat harness sends to
    /// its model before this turn's inputs.
    pub fn history_messages(&self) -> Vec<Message> {
        use crate::event::EventBody;
        self.history
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Input(m) | EventBody::Output(m) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }
}

/// The events a turn gets as [`Start::history`]: a shared, read-only prefix of a session's
/// events.
///
/// Every turn of a long session sees the whole session before it, so drivers hand out views
/// of one shared list instead of copying it per turn: replaying a session of T turns stays
/// linear in T. It dereferences to `&[Event]`, so `history.iter()`, `history.len()` and
/// `&history[..]` work as on a slice.
///
/// ```
/// use std::sync::Arc;
/// use harness_core::History;
/// use harness_core::event::{Event, EventBody};
/// use harness_core::message::Message;
///
/// let all = Arc::new(vec![
///     Event::new("x1", EventBody::Input(Message::user("hi"))),
///     Event::new("x1", EventBody::Output(Message::assistant("hello"))),
///     Event::new("x2", EventBody::Input(Message::user("again"))),
/// ]);
/// let before_x2 = History::prefix(Arc::clone(&all), 2); // no copy
/// assert_eq!(before_x2.len(), 2);
/// let owned: History = vec![Event::new("x1", EventBody::Input(Message::user("hi")))].into();
/// assert_eq!(owned[0], before_x2[0]);
/// ```
#[derive(Clone, Default)]
pub struct History {
    events: std::sync::Arc<Vec<Event>>,
    len: usize,
}

impl History {
    /// The first `len` events of a shared list (all of them when `len` is larger).
    pub fn prefix(events: std::sync::Arc<Vec<Event>>, len: usize) -> Self {
        let len = len.min(events.len());
        History { events, len }
    }

    /// The events, as a slice.
    pub fn as_slice(&self) -> &[Event] {
        &self.events[..self.len]
    }
}

impl std::ops::Deref for History {
    type Target = [Event];
    fn deref(&self) -> &[Event] {
        self.as_slice()
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<Event>> for History {
    fn from(events: Vec<Event>) -> Self {
        let len = events.len();
        History {
            events: std::sync::Arc::new(events),
            len,
        }
    }
}

impl FromIterator<Event> for History {
    fn from_iter<I: IntoIterator<Item = Event>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Event>::deserialize(d).map(History::from)
    }
}

/// Why a sink call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The turn was cancelled (barge-in, a `cancel` input, the caller). Stop.
    #[error("the turn was cancelled")]
    Cancelled,
    /// The call broke a rule of the host (an unmediated `tool_call`, a missing idempotency
    /// key, an unknown tool…); nothing was recorded or executed.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The model call failed.
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The tool could not be run (the result of a tool that ran and failed is a
    /// [`ToolResult`] with `is_error`, not this).
    #[error("tool: {0}")]
    Tool(String),
    /// The turn is parked waiting for an approval decision; return this error from `run`.
    /// The host resumes the turn once a decision is recorded.
    #[error("parked: waiting for approval of tool call {tool_call_id}")]
    ApprovalParked {
        /// The gated call.
        tool_call_id: String,
        /// Journal seq of the approval request.
        request_seq: i64,
    },
    /// The turn is parked waiting for a person's answer to a question
    /// ([`EventSink::ask`]); return this error from `run`. The host drives the turn again
    /// once the answer comes, and the same `ask` then returns it.
    #[error("parked: waiting for the answer to question {question_id}")]
    AwaitingAnswer {
        /// The question.
        question_id: String,
    },
    /// This host cannot do what was asked (a question on a phone call, a platform command
    /// on a chat thread): nothing was sent. See [`EventSink::supports`].
    #[error("this host does not support {0}")]
    Unsupported(Feature),
    /// Replaying a journal, the harness did something the journal did not record: it is not
    /// deterministic (agentsessions I0).
    #[error("replay diverged: {0}")]
    Diverged(String),
    /// The transport under the sink failed (the socket closed, the journal could not be
    /// written).
    #[error("transport: {0}")]
    Transport(String),
}

/// Why a turn failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// A sink call failed and the harness gave up.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The per-execution config was rejected (a fixed diagnostic, never the config itself).
    #[error("invalid config: {0}")]
    Config(String),
    /// The harness failed for its own reasons.
    #[error("{0}")]
    Failed(String),
}

impl SinkError {
    /// Whether the turn is parked (waiting for an approval or an answer) rather than failed:
    /// the host keeps it and drives it again once the decision comes.
    pub fn is_parked(&self) -> bool {
        matches!(
            self,
            SinkError::ApprovalParked { .. } | SinkError::AwaitingAnswer { .. }
        )
    }
}

impl HarnessError {
    /// A failure with a message.
    pub fn failed(msg: impl Into<String>) -> Self {
        HarnessError::Failed(msg.into())
    }

    /// Whether the turn ended because it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, HarnessError::Sink(SinkError::Cancelled))
    }

    /// Whether the turn is parked, waiting for an approval or an answer (see
    /// [`SinkError::is_parked`]).
    pub fn is_parked(&self) -> bool {
        matches!(self, HarnessError::Sink(e) if e.is_parked())
    }
}

/// An agent: drives one turn at a time, through a sink.
///
/// ```
/// use async_trait::async_trait;
/// use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
/// use harness_core::message::{Message, ModelRequest};
///
/// /// Sends the caller's words to the model; the host records and speaks the completion.
/// struct Echo;
///
/// #[async_trait]
/// impl Harness for Echo {
///     async fn describe(&self) -> Result<Descriptor, HarnessError> {
///         Ok(Descriptor::new("echo", "1"))
///     }
///     async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
///         let mut messages = start.history_messages();
///         messages.extend(start.inputs);
///         sink.model(ModelRequest::new(messages)).await?;
///         Ok(())
///     }
/// }
///
/// // Unit-test it without any protocol:
/// use harness_core::model::ScriptedModel;
/// use harness_core::testing::RecordingSink;
///
/// let mut sink = RecordingSink::new(ScriptedModel::new().reply("Hi there!"));
/// let start = Start::with_inputs(vec![Message::user("hello")]);
/// futures::executor::block_on(Echo.run(start, &mut sink)).unwrap();
/// assert_eq!(sink.model_calls(), 1);
/// assert_eq!(sink.spoken_text(), "Hi there!");
/// ```
#[async_trait]
pub trait Harness: Send + Sync {
    /// The static contract. Async because a remote harness answers it over the wire.
    async fn describe(&self) -> Result<Descriptor, HarnessError>;

    /// Drives exactly one turn. `Ok` = completed, `Err` = failed. Dropping the future
    /// cancels the turn.
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError>;
}

/// Everything a harness does that the world should see. Implemented by each protocol's
/// driver, by the journal, and by [`RecordingSink`](crate::testing::RecordingSink) for tests.
#[async_trait]
pub trait EventSink: Send {
    /// A mediated model call: the host invokes the provider (or serves the recorded
    /// completion on replay) and records the completion as the turn's output. Do not also
    /// send the completion through [`output`](Self::output).
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError>;

    /// Streams assistant text the model did not produce through [`model`](Self::model).
    async fn output(&mut self, delta: &str) -> Result<(), SinkError>;

    /// Asks the host to run a tool (controller-mediated or approval-gated) and waits for its
    /// result.
    ///
    /// The call must say who runs it and carry an idempotency key: the agentsessions host
    /// (and [`RecordingSink`](crate::testing::RecordingSink)) refuse it with
    /// [`SinkError::Rejected`] otherwise. A model's tool call part has neither:
    /// `sink.tool_call(call.controller_mediated(&start.execution_id))` sets both (see
    /// [`ToolCall::controller_mediated`]).
    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError>;

    /// Records a tool the harness ran itself.
    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError>;

    /// Records token usage.
    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError>;

    /// Whether this host offers `feature` (see [`interaction`](crate::interaction)). The
    /// methods below answer [`SinkError::Unsupported`] for a feature it does not offer.
    fn supports(&self, feature: Feature) -> bool {
        let _ = feature;
        false
    }

    /// Asks a person a question and waits for the answer.
    ///
    /// On a host that parks (TanStack), the first call returns
    /// [`SinkError::AwaitingAnswer`]: return it from `run` (the `?` does). The host drives
    /// the turn again when the answer comes, serving everything the turn did before from its
    /// record, and this call then returns the answer.
    async fn ask(&mut self, question: Question) -> Result<Answer, SinkError> {
        let _ = question;
        Err(SinkError::Unsupported(Feature::Questions))
    }

    /// Hands the conversation off to a person or another agent.
    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        let _ = handoff;
        Err(SinkError::Unsupported(Feature::Handoff))
    }

    /// Sends a platform command (jambonz `hangup`, …) and waits for its result.
    async fn command(&mut self, command: Command) -> Result<CommandResult, SinkError> {
        let _ = command;
        Err(SinkError::Unsupported(Feature::Commands))
    }

    /// Streams reasoning text, shown apart from the answer.
    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        let _ = delta;
        Err(SinkError::Unsupported(Feature::Reasoning))
    }

    /// Publishes the turn's shared state, whole or as a JSON Patch.
    async fn state(&mut self, update: StateUpdate) -> Result<(), SinkError> {
        let _ = update;
        Err(SinkError::Unsupported(Feature::State))
    }

    /// Marks a named step of the turn as started or finished.
    async fn step(&mut self, step: Step) -> Result<(), SinkError> {
        let _ = step;
        Err(SinkError::Unsupported(Feature::Steps))
    }
}

#[async_trait]
impl<H: Harness + ?Sized> Harness for std::sync::Arc<H> {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        (**self).describe().await
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        (**self).run(start, sink).await
    }
}

#[async_trait]
impl<H: Harness + ?Sized> Harness for Box<H> {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        (**self).describe().await
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        (**self).run(start, sink).await
    }
}
