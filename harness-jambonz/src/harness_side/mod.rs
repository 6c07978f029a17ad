//! The harness side of one call, as a sans-IO state machine.
//!
//! Frames from jambonz go in through [`HarnessCall::handle_frame`]; typed events come out of
//! [`HarnessCall::poll_event`]; the app acts (start a reply, push chunks, finish it with a
//! turn record, call a tool, send a command, hang up) and the frames to send come out of
//! [`HarnessCall::poll_transmit`], in order. After any call that changes state, drain both
//! ([`harness_core::run_loop`] is the contract every machine follows).
//!
//! The spec's rules for the harness are enforced here, so an app cannot break them by
//! mistake:
//!
//! - ids (`reply_id`, `call_id`, `command_id`) are made here, unique within the call;
//! - a reply for a turn is refused before that turn's `turn:start`;
//! - nothing more is sent for a cancelled turn: its chunks are dropped and the app is told;
//!   frames made for it that still wait in `poll_transmit` when `turn:cancel` arrives are
//!   dropped too (a `tool:call` dropped that way waits for no `tool:result`);
//! - `interrupt` goes on a reply's first chunk only;
//! - a turn record over 16 KB is refused (the reply stays open for a smaller one);
//! - a `session:start` whose `protocol` is not 1 is answered by a close with code 4000 and a
//!   reason;
//! - nothing is sent after the call ends: frames still waiting in `poll_transmit` when
//!   `session:end` arrives, or when a `hangup` command succeeds, are dropped;
//! - frames before `session:start`, malformed JSON and binary frames are reported as errors
//!   and change nothing.
//!
//! The harness side has no timers: every deadline of the protocol is jambonz's, so there is
//! no `poll_timeout`. `now` is taken for symmetry with the other machines and for the
//! timing it records.
//!
//! ```
//! use std::time::Instant;
//! use harness_jambonz::harness_side::{HarnessCall, CallEvent, Transmit};
//!
//! let now = Instant::now();
//! let mut call = HarnessCall::new();
//! call.handle_frame(now, r#"{"type":"session:start","call_sid":"CA1","protocol":1,"from":"+15551234567"}"#)?;
//! call.handle_frame(now, r#"{"type":"turn:start","call_sid":"CA1","turn_id":1,"input":{"type":"greeting"}}"#)?;
//! while let Some(ev) = call.poll_event() {
//!     if let CallEvent::TurnStarted(t) = ev {
//!         let reply = call.start_reply(t.turn_id)?;
//!         call.push_chunk(&reply, "Thanks for calling Acme.")?;
//!         call.finish_reply(&reply, None)?;
//!     }
//! }
//! let Some(Transmit::Text(first)) = call.poll_transmit() else { panic!() };
//! assert_eq!(first, r#"{"type":"reply:chunk","reply_id":"r1","turn_id":1,"chunk":{"choices":[{"delta":{"content":"Thanks for calling Acme."}}]}}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod actions;
mod inbound;

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::command::CommandResultMessage;
use crate::event::{ErrorEvent, JambonzEvent, ReplyDropped, UserInterruption};
use crate::frame::{DecodeError, UnknownMessage};
use crate::lazy_map::LazyMap;
use crate::session::{SessionEnd, SessionStart};
use crate::tool::ToolResultMessage;
use crate::turn::{SpeechStart, Transcript, TurnCancel, TurnId, TurnStart};
use crate::turn_record::TurnRecordTooLarge;

/// Limits of a [`HarnessCall`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HarnessConfig {
    /// The largest text frame accepted, in bytes (default 1 MiB).
    pub max_frame_bytes: usize,
    /// The most turns remembered (default 1024). Past it the longest remembered are
    /// forgotten, with their open replies: a reply
    /// for a forgotten turn is refused as not started, so nothing is ever sent for it.
    pub max_turns: usize,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            max_frame_bytes: 1024 * 1024,
            max_turns: 1024,
        }
    }
}

/// Something to send on the socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// A JSON text frame.
    Text(String),
    /// Close the socket with this code and reason.
    Close {
        /// The close code (4000: protocol not supported).
        code: u16,
        /// Why.
        reason: String,
    },
}

/// What happened on the call, for the app.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CallEvent {
    /// `session:start` with protocol 1: the call is up.
    SessionStarted(SessionStart),
    /// `session:start` with a protocol this side cannot speak: the socket is being closed
    /// with code 4000 (the close is in `poll_transmit`).
    UnsupportedProtocol {
        /// What `protocol` said.
        protocol: Option<Value>,
    },
    /// `turn:start`: answer the turn with a reply.
    TurnStarted(TurnStart),
    /// `speech:start`: the caller started speaking.
    SpeechStarted(SpeechStart),
    /// `transcript`: recognized speech, partial or final.
    Transcript(Transcript),
    /// `turn:cancel`: nothing more will be sent for the turn (what was made for it and not
    /// yet taken from `poll_transmit` is dropped; a `tool:call` dropped that way gets no
    /// result).
    TurnCancelled(TurnCancel),
    /// `user_interruption`: the caller heard only `spoken` of the reply.
    Interrupted(UserInterruption),
    /// `tool:result` for a `tool:call` of this call.
    ToolResult {
        /// The turn the call was made for.
        turn_id: Option<TurnId>,
        /// The tool's name.
        name: String,
        /// The result.
        result: ToolResultMessage,
    },
    /// `command:result` for a command of this call.
    CommandResult {
        /// The command's name.
        name: String,
        /// The result.
        result: CommandResultMessage,
    },
    /// `reply_dropped`: a held unprompted reply was dropped.
    ReplyDropped(ReplyDropped),
    /// An error event: jambonz refused something this side sent.
    Error(ErrorEvent),
    /// Any other event (`silence`, unknown names).
    Event(JambonzEvent),
    /// `session:end`: the call is over.
    SessionEnded(SessionEnd),
    /// A message type this version does not know, kept as given.
    Unknown(UnknownMessage),
}

/// Why a frame from jambonz was not taken. The call's state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JambonzFrameError {
    /// "There are no binary frames": a binary frame arrived.
    #[error("binary frame: the protocol has no binary frames")]
    Binary,
    /// The frame is larger than the configured limit.
    #[error("frame of {len} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Not a message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message other than `session:start` before it.
    #[error("`{kind}` before session:start")]
    BeforeSessionStart {
        /// The message type.
        kind: String,
    },
    /// A second `session:start`.
    #[error("a second session:start")]
    DuplicateSessionStart,
    /// A message without the `turn_id` it needs.
    #[error("`{kind}` without a turn_id")]
    MissingTurnId {
        /// The message type.
        kind: String,
    },
    /// A `turn:start` for a turn already started or cancelled.
    #[error("turn:start for turn {0}, which was already seen")]
    DuplicateTurn(TurnId),
    /// A `turn:cancel` for a turn already cancelled.
    #[error("turn:cancel for turn {0}, which was already cancelled")]
    DuplicateCancel(TurnId),
    /// A `tool:result` for no outstanding `tool:call` of this call.
    #[error("tool:result for unknown call_id {0:?}")]
    UnknownCallId(String),
    /// A `command:result` for no outstanding command of this call.
    #[error("command:result for unknown command_id {0:?}")]
    UnknownCommandId(String),
    /// The call is over (ended or closed).
    #[error("the call is over")]
    Closed,
}

/// Why an action of the app was refused. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// Before `session:start`, after the call ended, or after this side hung up.
    #[error("the call is not active")]
    NotActive,
    /// "A reply with a turn_id … is accepted only after that turn's turn:start."
    #[error("turn {0} has not started")]
    TurnNotStarted(TurnId),
    /// The turn was cancelled: nothing more is sent for it (chunks are dropped).
    #[error("turn {0} was cancelled; dropped")]
    TurnCancelled(TurnId),
    /// No open reply with this id (never started, or already finished).
    #[error("no open reply {0:?}")]
    UnknownReply(String),
    /// `interrupt` belongs on a reply's first chunk only.
    #[error("interrupt is only allowed on a reply's first chunk")]
    InterruptNotFirst,
    /// The turn record is over 16 KB; the reply is still open.
    #[error(transparent)]
    TurnRecordTooLarge(#[from] TurnRecordTooLarge),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TurnState {
    Started,
    Cancelled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    AwaitingStart,
    Active,
    Over,
}

/// A frame waiting in `poll_transmit`, with the turn it was made for.
#[derive(Debug)]
struct Outgoing {
    turn_id: Option<TurnId>,
    /// The `call_id` of a `tool:call`.
    tool_call: Option<String>,
    /// The `command_id` of a `command`.
    command: Option<String>,
    frame: Transmit,
}

#[derive(Clone, Debug)]
struct OpenReply {
    turn_id: Option<TurnId>,
    chunks: u32,
    interrupt: bool,
}

/// The harness side of one call. See the [module docs](self).
#[derive(Debug)]
pub struct HarnessCall {
    config: HarnessConfig,
    phase: Phase,
    call_sid: Option<String>,
    turns: HashMap<TurnId, TurnState>,
    /// Turn ids in the order they were first seen, oldest first (what is forgotten first).
    turn_order: VecDeque<TurnId>,
    replies: HashMap<String, OpenReply>,
    /// Tool calls waiting for their `tool:result` (none, between turns).
    tools: LazyMap<String, (Option<TurnId>, String)>,
    /// Commands waiting for their `command:result`.
    commands: LazyMap<String, String>,
    next_reply: u64,
    next_call: u64,
    next_command: u64,
    hung_up: bool,
    events: VecDeque<CallEvent>,
    transmits: VecDeque<Outgoing>,
}

impl Default for HarnessCall {
    fn default() -> Self {
        Self::new()
    }
}

impl HarnessCall {
    /// A call waiting for `session:start`, with default limits.
    pub fn new() -> Self {
        Self::with_config(HarnessConfig::default())
    }

    /// A call waiting for `session:start`.
    pub fn with_config(config: HarnessConfig) -> Self {
        HarnessCall {
            config,
            phase: Phase::AwaitingStart,
            call_sid: None,
            turns: HashMap::new(),
            turn_order: VecDeque::new(),
            replies: HashMap::new(),
            tools: LazyMap::default(),
            commands: LazyMap::default(),
            next_reply: 0,
            next_call: 0,
            next_command: 0,
            hung_up: false,
            events: VecDeque::new(),
            transmits: VecDeque::new(),
        }
    }

    /// The call's `call_sid`, once `session:start` arrived.
    pub fn call_sid(&self) -> Option<&str> {
        self.call_sid.as_deref()
    }

    /// Whether `session:start` was accepted and the call has not ended (nor been hung up
    /// by this side: after a `hangup` command that succeeded, nothing more is sent).
    pub fn is_active(&self) -> bool {
        self.phase == Phase::Active && !self.hung_up
    }

    /// Whether the call is over (`session:end`, or closed for an unsupported protocol).
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// Whether the turn has started and was not cancelled.
    pub fn is_turn_open(&self, turn_id: TurnId) -> bool {
        self.is_active() && self.turns.get(&turn_id) == Some(&TurnState::Started)
    }

    /// Whether the turn was cancelled.
    pub fn is_turn_cancelled(&self, turn_id: TurnId) -> bool {
        self.turns.get(&turn_id) == Some(&TurnState::Cancelled)
    }

    /// The next event for the app.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CallEvent> {
        let ev = self.events.pop_front();
        if ev.is_none() && self.events.capacity() > 0 {
            // Drained: an idle call keeps no event buffer (memory per idle call).
            self.events = VecDeque::new();
        }
        ev
    }

    /// The next frame to send, in order. Frames made for a turn that `turn:cancel` reached
    /// before they were taken from here are never returned.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front();
        if t.is_none() && self.transmits.capacity() > 0 {
            self.transmits = VecDeque::new();
        }
        t.map(|o| o.frame)
    }

    /// How many frames wait in `poll_transmit`.
    pub fn pending_transmits(&self) -> usize {
        self.transmits.len()
    }

    /// Tool calls waiting for their `tool:result`.
    pub fn pending_tool_calls(&self) -> usize {
        self.tools.len()
    }
}
