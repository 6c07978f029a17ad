//! The jambonz side of a call, as a sans-IO simulator with explicit time, so a harness can
//! be tested without jambonz.
//!
//! It plays a [`Script`] (the greeting, the caller's speech with `speech:start` and partial
//! and final transcripts, barge-ins, the hang-up) and enforces the spec's rules for jambonz:
//!
//! - a reply with a `turn_id` before that turn's `turn:start` is refused with an error event;
//! - one reply is spoken at a time; a reply that starts while another plays is queued;
//! - an unprompted reply is spoken at once when the floor is free (nothing playing, no turn
//!   open, the caller not speaking), else held; one is held at a time, a newer one replaces
//!   it (`reply_dropped`, reason `replaced`);
//! - `interrupt: true` on a first chunk cuts off what plays, but a caller mid-utterance is
//!   never talked over (the reply waits for them to finish);
//! - caller speech during playback gives `user_interruption` (`spoken`/`unspoken` from the
//!   speaking rate and the clock, split at a word boundary) and `turn:cancel` reason
//!   `barge_in`;
//! - `delta.tool_calls` in chunks are ignored;
//! - `tool:call` is answered by the platform's tools, a [`Tools`] registry given with
//!   [`Simulator::with_tools`] or [`Simulator::with_tool`] (an unknown tool gets an error
//!   result). The simulator is jambonz: it runs what the harness sends, and the approval
//!   gate is the harness's (the [`driver`](crate::driver) applies it before anything is
//!   sent);
//! - `hangup` gets `command:result` ok, then `session:end` reason `harness_hangup`; `play`
//!   and `listen` get `ok: false`; `session:end` carries `duration_ms`;
//! - deadlines (first chunk after `turn:start`, `reply:done`, tool result) whose expiry is
//!   recorded the way jambonz does, as `completion_reason: "harness_failure"` with a
//!   `harness_error`.
//!
//! It keeps a [`CallTranscript`] of what the caller heard, with each turn's first-chunk latency,
//! and of every rule the harness broke.
//!
//! The run loop is the harness side's: feed frames with [`Simulator::handle_frame`], call
//! [`Simulator::handle_timeout`] at [`Simulator::poll_timeout`], and drain
//! [`Simulator::poll_transmit`] and [`Simulator::poll_event`] after each call, as
//! [`harness_core::run_loop`] states for every machine.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use harness_jambonz::harness_side::{HarnessCall, CallEvent, Transmit};
//! use harness_jambonz::simulator::{Script, SimConfig, Simulator};
//!
//! let mut now = Instant::now();
//! let mut sim = Simulator::new(now, SimConfig::default(), Script::new().greeting());
//! let mut harness = HarnessCall::new();
//! sim.start(now);
//! while !sim.is_ended() {
//!     while let Some(Transmit::Text(f)) = sim.poll_transmit() {
//!         harness.handle_frame(now, &f)?;
//!     }
//!     while let Some(ev) = harness.poll_event() {
//!         if let CallEvent::TurnStarted(t) = ev {
//!             let r = harness.start_reply(t.turn_id)?;
//!             harness.push_chunk(&r, "Thanks for calling Acme.")?;
//!             harness.finish_reply(&r, None)?;
//!         }
//!     }
//!     while let Some(Transmit::Text(f)) = harness.poll_transmit() {
//!         sim.handle_frame(now, &f);
//!     }
//!     if let Some(t) = sim.poll_timeout() {
//!         now = now.max(t);
//!         sim.handle_timeout(now);
//!     }
//! }
//! assert_eq!(sim.transcript().heard(), ["Thanks for calling Acme."]);
//! assert_eq!(sim.transcript().turn(1).unwrap().first_chunk_ms, Some(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Each concern adds its methods to `Simulator` in its own `impl` block. Between siblings,
// imports run one way: `floor` → `reply` → `caller`, `timer` → `caller`, and every one may
// use `script`, `transcript` and this module's helpers.
mod caller;
mod floor;
mod reply;
mod script;
mod timer;
mod tools;
mod transcript;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use harness_core::tool::{Tool, Tools};
use serde_json::{Map, Value};

pub use floor::split_spoken;
pub use script::{DEFAULT_PAUSE, Script, ScriptAction, ScriptStep, When};
pub use transcript::{
    CallTranscript, Line, TurnSummary, Violation, ViolationKind, completion, harness_error,
};

use caller::{Caller, SimTurn, TurnStatus};
use floor::Playback;
use reply::SimReply;
use tools::ToolRun;

use crate::frame::{HarnessMessage, JambonzMessage};
use crate::harness_side::Transmit;
use crate::reply::ReplyDone;
use crate::session::{SessionEnd, SessionStart, end_reason};
use crate::tool::ToolCallMessage;
use crate::turn::TurnId;

/// How long jambonz waits for the harness. `None` = no deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlines {
    /// From `turn:start` to the turn's first `reply:chunk` (default 5 s), not counting the
    /// time jambonz spends running the turn's tools (`tool:call` to `tool:result`).
    pub first_chunk: Option<Duration>,
    /// From `turn:start` to the turn's `reply:done` (default 30 s); for an unprompted reply,
    /// from its first chunk (one past it is cut off, a
    /// [`ViolationKind::ReplyDoneTimeout`]).
    pub reply_done: Option<Duration>,
    /// From `tool:call` to its result: a tool slower than this is answered with an error
    /// (default 10 s).
    pub tool_result: Option<Duration>,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            first_chunk: Some(Duration::from_secs(5)),
            reply_done: Some(Duration::from_secs(30)),
            tool_result: Some(Duration::from_secs(10)),
        }
    }
}

/// The simulated call's parameters.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SimConfig {
    /// `call_sid`, on every message.
    pub call_sid: String,
    /// The caller.
    pub from: String,
    /// The called number.
    pub to: String,
    /// `inbound` or `outbound`.
    pub direction: String,
    /// The call's language.
    pub language: String,
    /// The agent's metadata.
    pub metadata: Value,
    /// The agent's tools, as sent in `session:start`.
    pub tools: Vec<Value>,
    /// `protocol` in `session:start` (1).
    pub protocol: Value,
    /// How fast replies are spoken, in characters per second (default 15).
    pub speaking_rate: f64,
    /// How fast the caller speaks, in characters per second (default 15).
    pub caller_rate: f64,
    /// From the end of the caller's speech to `turn:start` (default 0).
    pub endpointing: Duration,
    /// Deadlines for the harness.
    pub deadlines: Deadlines,
    /// After the script, the caller hangs up once the call is quiet this long (default 1 s).
    pub idle_hangup: Duration,
    /// The caller hangs up after this long in any case (default 10 minutes).
    pub max_call: Duration,
    /// The largest frame taken from the harness (default 1 MiB).
    pub max_frame_bytes: usize,
    /// The most ids (`reply_id`, `call_id`, `command_id`) the harness may use in one call
    /// (default 10,000), since each is remembered to check that it is unique. Past it the
    /// caller hangs up (`session:end` reason `caller_hangup`) and the flood is a
    /// [`ViolationKind::TooManyIds`].
    pub max_ids: usize,
    /// The most text kept of one reply, in bytes (default 16 KiB: at 15 characters a
    /// second, longer than the default `max_call` can speak).
    /// Text past it is neither kept nor spoken, a [`ViolationKind::ReplyTooLong`].
    pub max_reply_bytes: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            call_sid: "CA00000000000000000000000000000001".into(),
            from: "+15551230000".into(),
            to: "+15559870000".into(),
            direction: "inbound".into(),
            language: "en-US".into(),
            metadata: Value::Object(Map::new()),
            tools: Vec::new(),
            protocol: Value::from(1),
            speaking_rate: 15.0,
            caller_rate: 15.0,
            endpointing: Duration::ZERO,
            deadlines: Deadlines::default(),
            idle_hangup: Duration::from_secs(1),
            max_call: Duration::from_secs(600),
            max_frame_bytes: 1024 * 1024,
            max_ids: 10_000,
            max_reply_bytes: 16 * 1024,
        }
    }
}

/// What happened, for the app driving the simulator.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SimEvent {
    /// Something was said (a caller utterance started, a reply finished or was cut).
    Line(Line),
    /// The harness broke a rule (or sent something jambonz ignores).
    Violation(Violation),
    /// A deadline expired: the turn failed.
    TurnFailed {
        /// The turn.
        turn_id: TurnId,
        /// Why.
        harness_error: String,
    },
    /// The call ended.
    Ended {
        /// `session:end`'s reason (or `harness_closed`).
        reason: String,
        /// Its duration.
        duration_ms: u64,
    },
}

/// The most events held for [`Simulator::poll_event`]; older ones are dropped.
pub const MAX_EVENTS: usize = 4096;

/// The longest id (`reply_id`, `call_id`, `command_id`) taken from the harness, in bytes:
/// a frame with a longer one is a [`ViolationKind::Malformed`] and is ignored (ids are
/// remembered for the whole call).
pub const MAX_ID_BYTES: usize = 256;

/// The most bytes of a violation's detail kept (it may quote the harness's frame).
pub const MAX_DETAIL_BYTES: usize = 256;

/// The most violations kept in [`CallTranscript::violations`]; later ones are only counted
/// ([`CallTranscript::violations_dropped`]) and reported as [`SimEvent::Violation`].
pub const MAX_VIOLATIONS: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Active,
    Ended,
}

/// The jambonz side of one call. See the [module docs](self).
pub struct Simulator {
    cfg: SimConfig,
    script: VecDeque<ScriptStep>,
    tools: Tools,
    /// How long a tool takes to answer, by name (none: at once).
    latencies: HashMap<String, Duration>,
    phase: Phase,
    t0: Instant,
    clock: Instant,
    next_turn: TurnId,
    turns: BTreeMap<TurnId, SimTurn>,
    replies: HashMap<String, SimReply>,
    reply_ids: HashSet<String>,
    call_ids: HashSet<String>,
    command_ids: HashSet<String>,
    playing: Option<Playback>,
    queue: VecDeque<String>,
    held: Option<String>,
    pending_interrupt: Option<String>,
    caller: Option<Caller>,
    tool_runs: Vec<ToolRun>,
    quiet_since: Option<Instant>,
    step_since: Instant,
    barge_anchor: Option<Instant>,
    transcript: CallTranscript,
    transmits: VecDeque<Transmit>,
    events: VecDeque<SimEvent>,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("phase", &self.phase)
            .field("turns", &self.turns)
            .field("playing", &self.playing)
            .field("transcript", &self.transcript)
            .finish_non_exhaustive()
    }
}

/// `t + d`, saturating far in the future instead of overflowing (a configured duration may
/// be absurd; it never panics).
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(1 << 32)))
        .or_else(|| t.checked_add(Duration::from_secs(1 << 20)))
        .unwrap_or(t)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn secs(chars: f64, rate: f64) -> Duration {
    let rate = if rate.is_finite() && rate > 0.0 {
        rate
    } else {
        15.0
    };
    Duration::try_from_secs_f64((chars / rate).max(0.0)).unwrap_or(Duration::MAX)
}

impl Simulator {
    /// A call that will play `script` once [`start`](Self::start)ed. `now` is only a
    /// starting value for the clock; the call begins at `start`.
    pub fn new(now: Instant, config: SimConfig, script: Script) -> Self {
        let t = now;
        Simulator {
            cfg: config,
            script: script.steps,
            tools: Tools::new(),
            latencies: HashMap::new(),
            phase: Phase::Idle,
            t0: t,
            clock: t,
            next_turn: 1,
            turns: BTreeMap::new(),
            replies: HashMap::new(),
            reply_ids: HashSet::new(),
            call_ids: HashSet::new(),
            command_ids: HashSet::new(),
            playing: None,
            queue: VecDeque::new(),
            held: None,
            pending_interrupt: None,
            caller: None,
            tool_runs: Vec::new(),
            quiet_since: None,
            step_since: t,
            barge_anchor: None,
            transcript: CallTranscript::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }
}

impl Simulator {
    /// Registers the platform's tools, which jambonz runs on `tool:call`, each answering at
    /// once: the same [`Tools`] an agent offers its model
    /// ([`ToolLoopAgent::with_tools`](harness_core::agent::ToolLoopAgent::with_tools)). Each
    /// definition is added to `session:start`'s `tools` (`{name, description, parameters}`)
    /// unless one of that name is configured.
    ///
    /// The simulator runs on virtual time: a tool's code must finish when polled (as
    /// [`Tool::sync`], [`Tool::json`] and an async body that does not wait on real I/O do).
    /// One still pending when its answer is due is answered with an error.
    #[must_use]
    pub fn with_tools(mut self, tools: Tools) -> Self {
        for tool in tools.iter() {
            self = self.with_tool(tool.clone());
        }
        self
    }

    /// Registers one of the platform's tools (see [`with_tools`](Self::with_tools)),
    /// replacing one of the same name.
    #[must_use]
    pub fn with_tool(self, tool: Tool) -> Self {
        self.with_slow_tool(tool, Duration::ZERO)
    }

    /// Registers one of the platform's tools that takes `latency` to answer.
    #[must_use]
    pub fn with_slow_tool(mut self, tool: Tool, latency: Duration) -> Self {
        let name = tool.name().to_owned();
        let declared = self.cfg.tools.iter().any(|t| {
            t.get("name").and_then(Value::as_str) == Some(name.as_str())
                || t.pointer("/function/name").and_then(Value::as_str) == Some(name.as_str())
        });
        if !declared {
            let def = tool.definition();
            let parameters = match &def.input_schema {
                Some(schema) => Value::Object(schema.clone()),
                None => serde_json::json!({"type": "object", "properties": {}}),
            };
            self.cfg.tools.push(serde_json::json!({
                "name": name,
                "description": def.description,
                "parameters": parameters,
            }));
        }
        if latency.is_zero() {
            self.latencies.remove(&name);
        } else {
            self.latencies.insert(name, latency);
        }
        self.tools.insert(tool);
        self
    }

    /// Starts the call: `session:start`, then the script.
    pub fn start(&mut self, now: Instant) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Active;
        self.t0 = now;
        self.clock = now;
        self.step_since = now;
        let start = SessionStart {
            call_sid: Some(self.cfg.call_sid.clone()),
            protocol: Some(self.cfg.protocol.clone()),
            from: Some(self.cfg.from.clone()),
            to: Some(self.cfg.to.clone()),
            direction: Some(self.cfg.direction.clone()),
            language: Some(self.cfg.language.clone()),
            // Only sent once: not kept (memory per idle call).
            metadata: Some(std::mem::take(&mut self.cfg.metadata)),
            tools: Some(std::mem::take(&mut self.cfg.tools)),
            extra: Map::new(),
        };
        self.send(JambonzMessage::SessionStart(start));
        self.after_change();
        self.advance(now);
    }

    /// Whether the call ended.
    pub fn is_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// The record of the call so far.
    pub fn transcript(&self) -> &CallTranscript {
        &self.transcript
    }

    /// The next frame to send to the harness.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front();
        if t.is_none() && self.transmits.capacity() > 0 {
            // Drained: an idle call keeps no buffer.
            self.transmits = VecDeque::new();
        }
        t
    }

    /// The next event for the app.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<SimEvent> {
        let e = self.events.pop_front();
        if e.is_none() && self.events.capacity() > 0 {
            self.events = VecDeque::new();
        }
        e
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timer().map(|(t, _)| t)
    }

    /// Advances the clock: speech, playback, tools, deadlines and script steps due by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// A binary frame from the harness: a violation ("There are no binary frames").
    pub fn handle_binary(&mut self, now: Instant) {
        self.advance(now);
        self.violation(ViolationKind::Binary, "binary frame".into());
    }

    /// The harness closed the socket.
    pub fn handle_close(&mut self, now: Instant, code: u16, reason: &str) {
        self.advance(now);
        if self.phase != Phase::Active {
            return;
        }
        self.transcript.closed_by_harness = Some((code, reason.to_owned()));
        let open: Vec<TurnId> = self
            .turns
            .iter()
            .filter(|(_, t)| t.status == TurnStatus::Open)
            .map(|(id, _)| *id)
            .collect();
        for id in open {
            self.fail_turn(id, harness_error::CONNECTION_CLOSED, false);
        }
        self.stop_everything();
        self.phase = Phase::Ended;
        let duration_ms = self.at_ms(self.clock);
        self.transcript.ended = Some(("harness_closed".into(), duration_ms));
        self.event(SimEvent::Ended {
            reason: "harness_closed".into(),
            duration_ms,
        });
    }

    /// A text frame from the harness.
    pub fn handle_frame(&mut self, now: Instant, text: &str) {
        self.advance(now);
        if self.phase != Phase::Active {
            self.violation(ViolationKind::AfterEnd, truncate(text));
            return;
        }
        if text.len() > self.cfg.max_frame_bytes {
            self.violation(
                ViolationKind::Malformed,
                format!("frame of {} bytes over the limit", text.len()),
            );
            return;
        }
        match HarnessMessage::decode(text) {
            Err(e) => {
                self.violation(ViolationKind::Malformed, e.to_string());
                self.salvage(text);
            }
            Ok(HarnessMessage::ReplyChunk(c)) => self.on_chunk(c),
            Ok(HarnessMessage::ReplyDone(d)) => self.on_done(d),
            Ok(HarnessMessage::ToolCall(c)) => self.on_tool_call(c, None),
            Ok(HarnessMessage::Command(c)) => self.on_command(c, false),
            Ok(HarnessMessage::Unknown(u)) => {
                self.violation(ViolationKind::UnknownType, format!("ignored `{}`", u.kind))
            }
        }
        self.after_change();
        // What is due at once (a tool's answer) goes out now.
        self.advance(now);
    }

    // ---- internals ----------------------------------------------------------------

    fn at_ms(&self, t: Instant) -> u64 {
        ms(t.saturating_duration_since(self.t0))
    }

    fn send(&mut self, m: JambonzMessage) {
        self.transmits.push_back(Transmit::Text(m.encode()));
    }

    fn sid(&self) -> Option<String> {
        Some(self.cfg.call_sid.clone())
    }

    fn event(&mut self, e: SimEvent) {
        // Bounded: an app that never drains events loses the oldest (the transcript has
        // everything).
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn violation(&mut self, kind: ViolationKind, mut detail: String) {
        if detail.len() > MAX_DETAIL_BYTES {
            let mut end = MAX_DETAIL_BYTES;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
            detail.push('…');
        }
        let v = Violation {
            at_ms: self.at_ms(self.clock),
            kind,
            detail,
        };
        if self.transcript.violations.len() < MAX_VIOLATIONS {
            self.transcript.violations.push(v.clone());
        } else {
            self.transcript.violations_dropped += 1;
        }
        self.event(SimEvent::Violation(v));
    }

    fn line(&mut self, l: Line) {
        self.transcript.lines.push(l.clone());
        self.event(SimEvent::Line(l));
    }

    /// Whether an id is over [`MAX_ID_BYTES`] (then the frame is a violation, ignored).
    fn id_too_long(&mut self, what: &str, id: &str) -> bool {
        if id.len() <= MAX_ID_BYTES {
            return false;
        }
        self.violation(
            ViolationKind::Malformed,
            format!(
                "{what} of {} bytes, over the {MAX_ID_BYTES}-byte limit: ignored",
                id.len()
            ),
        );
        true
    }

    /// Whether the harness may use one more id (one is about to be remembered). Past
    /// `max_ids` the caller hangs up: nothing more is remembered.
    fn id_room(&mut self) -> bool {
        let used = self.reply_ids.len() + self.call_ids.len() + self.command_ids.len();
        if used < self.cfg.max_ids {
            return true;
        }
        self.violation(
            ViolationKind::TooManyIds,
            format!("more than {} ids in one call: hung up", self.cfg.max_ids),
        );
        self.end_call(end_reason::CALLER_HANGUP);
        false
    }

    /// A malformed frame (already a violation) whose id is readable: a `tool:call` gets an
    /// error result and a `command` `ok: false` ("each gets a command:result"), so the
    /// harness is not left waiting; a `reply:done` whose only fault is its (optional)
    /// `turn_record` still ends its reply, without the record.
    fn salvage(&mut self, text: &str) {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            crate::frame::kind::TOOL_CALL => {
                let c = ToolCallMessage::from_fields_lenient(fields);
                if !c.call_id.is_empty() && !c.extra.contains_key("call_id") {
                    self.on_tool_call(c, Some("malformed tool:call".into()));
                }
            }
            crate::frame::kind::COMMAND => {
                let c = crate::command::CommandMessage::from_fields_lenient(fields);
                if !c.command_id.is_empty() && !c.extra.contains_key("command_id") {
                    self.on_command(c, true);
                }
            }
            crate::frame::kind::REPLY_DONE => {
                let mut d = ReplyDone::from_fields_lenient(fields);
                let readable = !d.reply_id.is_empty()
                    && !d.extra.contains_key("reply_id")
                    && !d.extra.contains_key("turn_id");
                if readable && d.extra.contains_key("turn_record") {
                    d.turn_record = None;
                    self.on_done(d);
                }
            }
            _ => {}
        }
    }

    fn end_call(&mut self, reason: &str) {
        if self.phase != Phase::Active {
            return;
        }
        let duration_ms = self.at_ms(self.clock);
        self.stop_everything();
        let cid = self.sid();
        self.send(JambonzMessage::SessionEnd(SessionEnd {
            call_sid: cid,
            reason: Some(reason.to_owned()),
            duration_ms: Some(duration_ms),
            extra: Map::new(),
        }));
        self.transmits.push_back(Transmit::Close {
            code: 1000,
            reason: "call ended".into(),
        });
        self.phase = Phase::Ended;
        self.transcript.ended = Some((reason.to_owned(), duration_ms));
        self.event(SimEvent::Ended {
            reason: reason.to_owned(),
            duration_ms,
        });
    }

    fn stop_everything(&mut self) {
        if self.playing.is_some() {
            self.cut_playback();
        }
        for t in self.turns.values_mut() {
            if matches!(t.status, TurnStatus::Open | TurnStatus::Answered) {
                t.status = TurnStatus::Ended;
            }
        }
        self.queue.clear();
        self.held = None;
        self.pending_interrupt = None;
        self.caller = None;
        self.tool_runs.clear();
        self.quiet_since = None;
    }
}

fn truncate(text: &str) -> String {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
