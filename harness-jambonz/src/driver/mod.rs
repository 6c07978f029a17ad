//! A driver that serves any [`Harness`] over one call: runtime-agnostic (`futures` only),
//! over a `Stream` of incoming frames and a `Sink` of [`Transmit`]s that the app connects
//! to its WebSocket.
//!
//! - `turn:start` runs the agent ([`Harness::run`]) with the call's history (trimmed to what
//!   the caller heard after each `user_interruption`) and the turn's words as input;
//! - `sink.output` text and the model's streamed deltas (from `sink.model`, served by the
//!   [`Model`] given here) become `reply:chunk`s as they arrive, with back-pressure;
//! - `sink.tool_call` applies the tool-call rules every host applies
//!   ([`rules::check_call`](harness_core::tool::rules::check_call), then
//!   [`rules::gate`](harness_core::tool::rules::gate)). A tool of the harness's own (in the
//!   [`Tools`] given here) runs here and is never sent: "Tools of the harness's own stay
//!   between it and its model" (it is recorded in the turn record's `own_tools` with its
//!   name, `ok` and `ms`). Any other tool is the platform's: "To run one of the agent's
//!   tools, send tool:call", and the result is its `tool:result`;
//! - jambonz has no approval channel, so a gated call (the call, or the registered tool,
//!   requires approval) is decided by [`ServeConfig::approval_policy`] (deny by default): a
//!   denied call is neither run nor sent, and the agent gets
//!   [`ToolResult::denied`](harness_core::message::ToolResult::denied), which it can speak
//!   about; the call goes on. An approved call runs as any other;
//! - `sink.command` sends a `command` and waits for its `command:result` ("each gets a
//!   command:result"); hanging up is `sink.command(Command::hangup(reason))`, after which
//!   every sink call fails with [`SinkError::Cancelled`](harness_core::SinkError::Cancelled).
//!   `sink.handoff` is a command where [`ServeConfig::handoff`] maps it to one (jambonz has no
//!   hand-off message), else [`SinkError::Unsupported`](harness_core::SinkError::Unsupported).
//!   Questions, reasoning, state and steps have no message in the protocol: `Unsupported`;
//! - `sink.model`, `sink.report` and `sink.usage` fill the turn record (`model_calls` with
//!   `first_token_ms` and `ms`, `own_tools`, `steps`), sent on `reply:done`; an `own_tools`
//!   entry the harness reports itself is named after the tool of the model's call whose id
//!   the reported result carries (the result's id when no model call of the turn had it);
//! - `turn:cancel` drops the turn's future; a sink call made after it fails with
//!   [`SinkError::Cancelled`](harness_core::SinkError::Cancelled).
//!
//! Time comes from a [`MonotonicClock`] (any `Fn() -> Instant`): the examples pass
//! `Instant::now`, tests a virtual clock. The driver spawns nothing and never sleeps.

mod turn;

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use futures::channel::oneshot;
use futures::future::{AbortHandle, Abortable, Aborted, BoxFuture};
use futures::stream::FuturesUnordered;
use futures::{Sink, SinkExt, Stream, StreamExt};
use harness_core::Harness;
use harness_core::clock::MonotonicClock;
use harness_core::interaction::{Command, Handoff};
use harness_core::model::Model;
use harness_core::tool::Tools;
use harness_core::tool::rules::ApprovalPolicy;

use self::turn::{TurnOutcome, greet, run_turn};
use crate::command::CommandResultMessage;
use crate::harness_side::{CallEvent, HarnessCall, HarnessConfig, JambonzFrameError, Transmit};
use crate::history::CallHistory;
use crate::lazy_map::LazyMap;
use crate::session::{SessionEnd, SessionStart};
use crate::tool::ToolResultMessage;
use crate::turn::{InputKind, TurnId};

/// A frame from the socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A text frame.
    Text(String),
    /// A binary frame (a protocol error; the call goes on).
    Binary,
    /// The peer closed the socket.
    Close {
        /// The close code, if any.
        code: Option<u16>,
        /// The reason.
        reason: String,
    },
}

/// How a hand-off is carried out on a call: the platform command for it, or `None` when
/// this hand-off cannot be done (`sink.handoff` then answers
/// [`SinkError::Unsupported`](harness_core::SinkError::Unsupported)). See
/// [`ServeConfig::handoff`].
#[derive(Clone)]
pub struct HandoffCommand(Arc<HandoffFn>);

type HandoffFn = dyn Fn(&Handoff) -> Option<Command> + Send + Sync;

impl HandoffCommand {
    /// A mapping from hand-offs to commands.
    pub fn new(f: impl Fn(&Handoff) -> Option<Command> + Send + Sync + 'static) -> Self {
        HandoffCommand(Arc::new(f))
    }

    /// The command that carries out `handoff`, if any.
    pub fn command_for(&self, handoff: &Handoff) -> Option<Command> {
        (self.0)(handoff)
    }
}

impl fmt::Debug for HandoffCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandoffCommand(..)")
    }
}

/// How the driver serves the call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Spoken for the greeting turn without running the agent (the SDK's `greeting`);
    /// `None` runs the agent with the input `(call connected)`.
    pub greeting: Option<String>,
    /// Spoken when a turn fails (the SDK's `errorReply`); `None` says nothing.
    pub error_reply: Option<String>,
    /// `route` of every turn record.
    pub route: Option<String>,
    /// Frames waiting to be sent before `sink.output` waits (back-pressure).
    pub max_pending_frames: usize,
    /// The most history entries kept per call: past it the oldest half goes at once (see
    /// [`CallHistory`]). Each turn gets the entries before it as a
    /// shared view, not a copy.
    pub max_history: usize,
    /// The most turns whose agent runs at once (default 4). A turn started past it drops the
    /// future of the turn running longest (the caller has moved on); nothing more is sent
    /// for it.
    pub max_concurrent_turns: usize,
    /// How a gated tool call is decided (the call, or the harness's registered tool,
    /// requires approval): jambonz has no message to ask a person, so this policy decides.
    /// [`ApprovalPolicy::Deny`] by default: the tool is neither run nor sent, and the agent
    /// gets the denial as the tool's result.
    pub approval_policy: ApprovalPolicy,
    /// How `sink.handoff` is carried out, `None` by default (then it answers
    /// [`SinkError::Unsupported`](harness_core::SinkError::Unsupported)). The spec has no
    /// hand-off message; jambonz "transfers, hangs up …" with commands, but the `transfer`
    /// command's arguments are not documented (the Commands table of the spec was lost), so
    /// the driver does not guess them: an app that knows its platform's transfer maps a
    /// [`Handoff`] to it here ([`with_handoff`](Self::with_handoff)).
    pub handoff: Option<HandoffCommand>,
    /// Limits of the harness side.
    pub harness: HarnessConfig,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            greeting: None,
            error_reply: Some("Sorry, something went wrong.".into()),
            route: None,
            max_pending_frames: 64,
            max_history: 200,
            max_concurrent_turns: 4,
            approval_policy: ApprovalPolicy::Deny,
            handoff: None,
            harness: HarnessConfig::default(),
        }
    }
}

impl ServeConfig {
    /// Decides gated tool calls with `policy` (see [`approval_policy`](Self::approval_policy)).
    #[must_use]
    pub fn with_approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.approval_policy = policy;
        self
    }

    /// Carries out `sink.handoff` as the platform command `f` returns (`None`: this
    /// hand-off cannot be done). See [`handoff`](Self::handoff).
    ///
    /// ```
    /// use harness_core::interaction::{Command, HandoffTarget};
    /// use harness_jambonz::driver::ServeConfig;
    ///
    /// // A platform whose transfer takes a SIP URI (an assumption of this app, not the spec's).
    /// let cfg = ServeConfig::default().with_handoff(|h| match &h.to {
    ///     HandoffTarget::Human => Some(Command::new("transfer").with_arg("target", "sip:desk@acme.example")),
    ///     _ => None,
    /// });
    /// assert!(cfg.handoff.is_some());
    /// ```
    #[must_use]
    pub fn with_handoff(
        mut self,
        f: impl Fn(&Handoff) -> Option<Command> + Send + Sync + 'static,
    ) -> Self {
        self.handoff = Some(HandoffCommand::new(f));
        self
    }
}

/// What happened on a served call.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CallReport {
    /// `session:start`, once received.
    pub session: Option<SessionStart>,
    /// Turns the agent ran (or the greeting answered).
    pub turns: u32,
    /// Turns cancelled by jambonz.
    pub cancelled: u32,
    /// Turns whose agent failed.
    pub failed: u32,
    /// Frames that were not taken (the first 100).
    pub frame_errors: Vec<JambonzFrameError>,
    /// `session:end`, if the call ended that way.
    pub end: Option<SessionEnd>,
    /// The close this side sent (protocol not supported), or the peer's close.
    pub closed: Option<(u16, String)>,
}

/// Why serving stopped early.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Sending on the socket failed.
    #[error("transport: {0}")]
    Transport(String),
}

/// Who waits for an answer from jambonz, by `call_id` or `command_id`.
enum Waiter {
    /// A `tool:call` waits for its `tool:result`.
    Tool(oneshot::Sender<ToolResultMessage>),
    /// A `command` waits for its `command:result`.
    Command(oneshot::Sender<CommandResultMessage>),
}

/// The call's state, shared by the serve loop and the sinks of its running turns.
struct Shared {
    call: HarnessCall,
    history: CallHistory,
    call_sid: String,
    waiters: LazyMap<String, (TurnId, Waiter)>,
    space: Vec<Waker>,
    max_pending: usize,
}

/// What every turn of the call runs with: the agent, its model, its own tools, the clock,
/// and the parts of the config a turn reads. A server builds one for all its calls.
pub(crate) struct Env {
    harness: Arc<dyn Harness>,
    model: Arc<dyn Model>,
    tools: Tools,
    clock: Arc<dyn MonotonicClock>,
    /// The config, kept here once (not also in the serve loop's state: memory per call).
    config: ServeConfig,
}

impl Env {
    /// What every call of a server shares.
    #[cfg(feature = "tokio")]
    pub(crate) fn new(
        harness: Arc<dyn Harness>,
        model: Arc<dyn Model>,
        tools: Tools,
        clock: Arc<dyn MonotonicClock>,
        config: ServeConfig,
    ) -> Self {
        Env {
            harness,
            model,
            tools,
            clock,
            config,
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A poisoned lock means a panic elsewhere already; the state is still consistent
    // (every critical section is a few plain calls), so keep going.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

enum Next {
    Frame(Option<Incoming>),
    Turn(Result<(TurnId, TurnOutcome), Aborted>),
    Flush,
}

type TurnFuture = Abortable<BoxFuture<'static, (TurnId, TurnOutcome)>>;

/// Serves one call: runs `harness` for every turn jambonz starts, until `session:end`, a
/// close, or the end of `incoming`.
///
/// `model` answers the agent's `sink.model`; `tools` are the harness's own tools, run here
/// (every other tool the agent calls is the platform's, sent as `tool:call`); `clock` is
/// read for the turn record's timings. Pass an `Arc` of the harness, the model or the clock
/// to share one between calls.
///
/// `incoming` yields the socket's frames; `outgoing` takes what to send (text frames and
/// at most one close). The driver does not close the socket after `session:end`; the app
/// does, or jambonz does.
///
/// ```
/// use std::time::Instant;
/// use futures::{SinkExt, StreamExt};
/// use harness_core::model::ScriptedModel;
/// use harness_core::agent::ToolLoopAgent;
/// use harness_core::Tools;
/// use harness_jambonz::driver::{serve, Incoming, ServeConfig};
/// use harness_jambonz::harness_side::Transmit;
///
/// let agent = ToolLoopAgent::new("faq");
/// let model = ScriptedModel::new().reply("Thanks for calling Acme.");
/// let frames = [
///     r#"{"type":"session:start","call_sid":"CA1","protocol":1}"#,
///     r#"{"type":"turn:start","call_sid":"CA1","turn_id":1,"input":{"type":"greeting"}}"#,
///     r#"{"type":"session:end","call_sid":"CA1","reason":"caller_hangup","duration_ms":900}"#,
/// ];
/// let incoming = futures::stream::iter(frames.map(|f| Incoming::Text(f.into())));
/// let (tx, rx) = futures::channel::mpsc::unbounded::<Transmit>();
/// let report = futures::executor::block_on(serve(
///     agent, model, Tools::new(), Instant::now, incoming, tx.sink_map_err(|e| e.to_string()),
///     ServeConfig::default(),
/// ))?;
/// assert_eq!(report.turns, 1);
/// let sent: Vec<Transmit> = futures::executor::block_on(rx.collect());
/// assert!(matches!(&sent[0], Transmit::Text(t) if t.contains(r#""content":"Thanks ""#)));
/// # Ok::<(), harness_jambonz::driver::ServeError>(())
/// ```
pub fn serve<I, O>(
    harness: impl Harness + 'static,
    model: impl Model + 'static,
    tools: Tools,
    clock: impl MonotonicClock + 'static,
    incoming: I,
    outgoing: O,
    config: ServeConfig,
) -> impl Future<Output = Result<CallReport, ServeError>>
where
    I: Stream<Item = Incoming> + Unpin,
    O: Sink<Transmit> + Unpin,
    O::Error: fmt::Display,
{
    let env = Arc::new(Env {
        harness: Arc::new(harness),
        model: Arc::new(model),
        tools,
        clock: Arc::new(clock),
        config,
    });
    serve_env(env, incoming, outgoing)
}

/// [`serve`] with what every call of a server shares, built once for all its calls (not
/// once a call: memory per idle call).
pub(crate) fn serve_env<I, O>(
    env: Arc<Env>,
    incoming: I,
    outgoing: O,
) -> impl Future<Output = Result<CallReport, ServeError>>
where
    I: Stream<Item = Incoming> + Unpin,
    O: Sink<Transmit> + Unpin,
    O::Error: fmt::Display,
{
    // Set up here, not in the future: an async fn keeps its arguments for its whole life,
    // and the future is what every call holds while it waits (memory per idle call).
    let config = &env.config;
    let shared = Arc::new(Mutex::new(Shared {
        call: HarnessCall::with_config(config.harness.clone()),
        history: CallHistory::with_max_entries(config.max_history),
        call_sid: String::new(),
        waiters: LazyMap::default(),
        space: Vec::new(),
        max_pending: config.max_pending_frames.max(1),
    }));
    let span = tracing::info_span!(
        "jambonz.call",
        call_sid = tracing::field::Empty,
        turns = tracing::field::Empty,
        close_code = tracing::field::Empty,
    );
    let open = crate::telemetry::OpenCall::new();
    tracing::Instrument::instrument(
        async move {
            let _open = open;
            let report = run(shared, env, incoming, outgoing).await;
            if let Ok(r) = &report {
                let span = tracing::Span::current();
                span.record("turns", r.turns);
                if let Some((code, _)) = &r.closed {
                    span.record("close_code", code);
                }
            }
            report
        },
        span,
    )
}

/// The serve loop of [`serve`].
async fn run<I, O>(
    shared: Arc<Mutex<Shared>>,
    env: Arc<Env>,
    incoming: I,
    mut outgoing: O,
) -> Result<CallReport, ServeError>
where
    I: Stream<Item = Incoming> + Unpin,
    O: Sink<Transmit> + Unpin,
    O::Error: fmt::Display,
{
    let config = &env.config;
    let mut incoming = incoming.fuse();
    // Made for the first turn, dropped when no turn runs (memory per idle call).
    let mut turns: Option<FuturesUnordered<TurnFuture>> = None;
    // Running turns: the order they started in (to drop the longest running first) and
    // the handle that drops their future.
    let mut aborts: HashMap<TurnId, (u64, AbortHandle)> = HashMap::new();
    let mut turns_started = 0u64;
    let mut report = Tally::default();
    let mut over = false;

    loop {
        // 1. Send what is queued, in order: every frame fed, then one flush (frames queued
        //    together, a reply's chunks, go out in one write).
        let mut fed = false;
        let (mut bytes_out, mut frames_out) = (0u64, 0u64);
        loop {
            let next = lock(&shared).call.poll_transmit();
            let Some(t) = next else { break };
            let close = match &t {
                Transmit::Close { code, reason } => Some((*code, reason.clone())),
                Transmit::Text(text) => {
                    bytes_out += text.len() as u64;
                    frames_out += 1;
                    None
                }
            };
            outgoing.feed(t).await.map_err(transport)?;
            fed = true;
            if let Some(c) = close {
                report.closed = Some(c);
                over = true;
            }
        }
        if fed {
            outgoing.flush().await.map_err(transport)?;
            crate::telemetry::sent(bytes_out, frames_out);
        }
        for w in std::mem::take(&mut lock(&shared).space) {
            w.wake();
        }
        if over {
            for (_, (_, h)) in aborts.drain() {
                h.abort();
            }
            lock(&shared).waiters.clear();
            return Ok(report.into_report());
        }

        // 2. Wait for a frame, a turn to finish, or frames to send.
        let next = futures::future::poll_fn(|cx| {
            if let Some(t) = &mut turns {
                if let Poll::Ready(Some(r)) = t.poll_next_unpin(cx) {
                    return Poll::Ready(Next::Turn(r));
                }
            }
            if lock(&shared).call.pending_transmits() > 0 {
                return Poll::Ready(Next::Flush);
            }
            if let Poll::Ready(f) = Pin::new(&mut incoming).poll_next(cx) {
                return Poll::Ready(Next::Frame(f));
            }
            Poll::Pending
        })
        .await;

        if turns.as_ref().is_some_and(FuturesUnordered::is_empty) {
            turns = None;
        }
        match next {
            Next::Flush => {}
            Next::Turn(Ok((turn_id, outcome))) => {
                aborts.remove(&turn_id);
                if aborts.is_empty() {
                    // An idle call keeps no table (memory per idle call).
                    aborts = HashMap::new();
                }
                if outcome == TurnOutcome::Failed {
                    report.failed = report.failed.saturating_add(1);
                }
            }
            Next::Turn(Err(Aborted)) => {}
            Next::Frame(None) => over = true,
            Next::Frame(Some(Incoming::Close { code, reason })) => {
                report.closed = Some((code.unwrap_or(1005), reason));
                over = true;
            }
            Next::Frame(Some(Incoming::Binary)) => {
                let now = env.clock.now();
                if let Err(e) = lock(&shared).call.handle_binary(now) {
                    push_error(&mut report, e);
                }
            }
            Next::Frame(Some(Incoming::Text(text))) => {
                let now = env.clock.now();
                let events = {
                    let mut s = lock(&shared);
                    if let Err(e) = s.call.handle_frame(now, &text) {
                        push_error(&mut report, e);
                    }
                    let mut evs = Vec::new();
                    while let Some(ev) = s.call.poll_event() {
                        evs.push(ev);
                    }
                    evs
                };
                for ev in events {
                    match ev {
                        CallEvent::SessionStarted(s) => {
                            lock(&shared).call_sid = s.call_sid.clone().unwrap_or_default();
                            if let Some(sid) = &s.call_sid {
                                tracing::Span::current().record("call_sid", sid.as_str());
                            }
                            report.session = Some(Box::new(s));
                        }
                        CallEvent::TurnStarted(t) => {
                            let Some(turn_id) = t.turn_id else { continue };
                            report.turns = report.turns.saturating_add(1);
                            if let (InputKind::Greeting, Some(greeting)) =
                                (t.input.kind(), &config.greeting)
                            {
                                greet(&shared, turn_id, greeting, config.route.as_deref());
                                continue;
                            }
                            while aborts.len() >= config.max_concurrent_turns.max(1) {
                                let Some(oldest) = aborts
                                    .iter()
                                    .min_by_key(|(_, (seq, _))| *seq)
                                    .map(|(id, _)| *id)
                                else {
                                    break;
                                };
                                if let Some((_, h)) = aborts.remove(&oldest) {
                                    h.abort();
                                }
                                lock(&shared).waiters.retain(|_, (t, _)| *t != oldest);
                            }
                            let (handle, reg) = AbortHandle::new_pair();
                            turns_started += 1;
                            aborts.insert(turn_id, (turns_started, handle));
                            let fut = run_turn(env.clone(), shared.clone(), t, turn_id);
                            turns
                                .get_or_insert_with(FuturesUnordered::new)
                                .push(Abortable::new(fut, reg));
                        }
                        CallEvent::TurnCancelled(c) => {
                            if let Some(id) = c.turn_id {
                                report.cancelled = report.cancelled.saturating_add(1);
                                if let Some((_, h)) = aborts.remove(&id) {
                                    h.abort();
                                }
                                if aborts.is_empty() {
                                    aborts = HashMap::new();
                                }
                                lock(&shared).waiters.retain(|_, (t, _)| *t != id);
                            }
                        }
                        CallEvent::Interrupted(u) => {
                            lock(&shared).history.interrupted(&u);
                        }
                        CallEvent::ToolResult { result, .. } => {
                            let waiter = lock(&shared).waiters.remove(&result.call_id);
                            if let Some((_, Waiter::Tool(tx))) = waiter {
                                // The turn may be gone: nobody waits any more.
                                let _ = tx.send(result);
                            }
                        }
                        CallEvent::CommandResult { result, .. } => {
                            let waiter = lock(&shared).waiters.remove(&result.command_id);
                            if let Some((_, Waiter::Command(tx))) = waiter {
                                let _ = tx.send(result);
                            }
                        }
                        CallEvent::SessionEnded(e) => {
                            report.end = Some(Box::new(e));
                            over = true;
                        }
                        _ => {}
                    }
                }
            }
        }
        if over {
            for (_, (_, h)) in aborts.drain() {
                h.abort();
            }
            lock(&shared).waiters.clear();
            // Flush anything queued (a close) before returning.
            loop {
                let next = lock(&shared).call.poll_transmit();
                let Some(t) = next else { break };
                if let Transmit::Close { code, reason } = &t {
                    report.closed = Some((*code, reason.clone()));
                }
                outgoing.feed(t).await.map_err(transport)?;
            }
            outgoing.flush().await.map_err(transport)?;
            return Ok(report.into_report());
        }
    }
}

/// What the serve loop keeps for the [`CallReport`] while the call runs: the large parts
/// boxed, set once (the loop's state is what an idle call holds).
#[derive(Default)]
struct Tally {
    session: Option<Box<SessionStart>>,
    turns: u32,
    cancelled: u32,
    failed: u32,
    frame_errors: Vec<JambonzFrameError>,
    end: Option<Box<SessionEnd>>,
    closed: Option<(u16, String)>,
}

impl Tally {
    fn into_report(self) -> CallReport {
        CallReport {
            session: self.session.map(|s| *s),
            turns: self.turns,
            cancelled: self.cancelled,
            failed: self.failed,
            frame_errors: self.frame_errors,
            end: self.end.map(|e| *e),
            closed: self.closed,
        }
    }
}

fn transport(e: impl fmt::Display) -> ServeError {
    ServeError::Transport(e.to_string())
}

fn push_error(report: &mut Tally, e: JambonzFrameError) {
    // What the peer sent: at debug level, so that a flood of bad frames floods no log.
    tracing::debug!(error = %e, "jambonz frame not taken");
    if report.frame_errors.len() < 100 {
        report.frame_errors.push(e);
    }
}
