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
//! - `tool:call` is answered from the tools registered with [`Simulator::with_tool`] (an
//!   unknown tool gets an error result);
//! - `hangup` gets `command:result` ok, then `session:end` reason `harness_hangup`; `play`
//!   and `listen` get `ok: false`; `session:end` carries `duration_ms`;
//! - deadlines (first chunk after `turn:start`, `reply:done`, tool result) whose expiry is
//!   recorded the way jambonz does, as `completion_reason: "harness_failure"` with a
//!   `harness_error`.
//!
//! It keeps a [`Transcript`] of what the caller heard, with each turn's first-chunk latency,
//! and of every rule the harness broke.
//!
//! The run loop is the harness side's: feed frames with [`Simulator::handle_frame`], call
//! [`Simulator::handle_timeout`] at [`Simulator::poll_timeout`], and drain
//! [`Simulator::poll_transmit`] and [`Simulator::poll_event`] after each call.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use harness_jambonz::harness_side::{HarnessCall, HarnessEvent, Transmit};
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
//!         if let HarnessEvent::TurnStarted(t) = ev {
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

mod script;
mod transcript;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub use script::{Action, DEFAULT_PAUSE, Script, Step, When};
pub use transcript::{
    Line, Transcript, TurnSummary, Violation, ViolationKind, completion, harness_error,
};

use crate::command::{Command, CommandResult};
use crate::event::{ErrorEvent, Event, ReplyDropped, Silence, UserInterruption, drop_reason};
use crate::frame::{HarnessMessage, JambonzMessage};
use crate::harness_side::Transmit;
use crate::reply::{ReplyChunk, ReplyDone};
use crate::session::{SessionEnd, SessionStart, end_reason};
use crate::tool::{ToolCallMessage, ToolResultMessage};
use crate::turn::{
    SpeechStart, Transcript as TranscriptMsg, TurnCancel, TurnId, TurnInput, TurnStart,
    cancel_reason,
};
use crate::turn_record::TurnRecord;

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

/// The most violations kept in [`Transcript::violations`]; later ones are only counted
/// ([`Transcript::violations_dropped`]) and reported as [`SimEvent::Violation`].
pub const MAX_VIOLATIONS: usize = 1000;

type ToolFn = Box<dyn Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync>;

struct SimTool {
    latency: Duration,
    run: ToolFn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Active,
    Ended,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TurnStatus {
    Open,
    Answered,
    Cancelled,
    Failed,
    Ended,
}

#[derive(Debug)]
struct SimTurn {
    started: Instant,
    status: TurnStatus,
    first_chunk: Option<Instant>,
    summary: usize,
    /// Tool calls of the turn that jambonz is running, and since when one has been.
    tools_running: usize,
    tools_since: Instant,
    /// Time jambonz spent running the turn's tools: not counted by the first-chunk deadline.
    tool_time: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyState {
    /// Refused (before its turn's start): later frames are ignored.
    Refused,
    /// Dropped (replaced while held, its turn closed): later frames are ignored.
    Dead,
    /// Cut off while playing (by the caller, an interrupting reply, a failure): later chunks
    /// are not played, but its `reply:done` still answers its turn if that is open.
    CutOff,
    Queued,
    Held,
    PendingInterrupt,
    Playing,
}

#[derive(Debug)]
struct SimReply {
    turn_id: Option<TurnId>,
    text: String,
    chars: usize,
    done: bool,
    /// Text past `max_reply_bytes` was cut (and reported once).
    truncated: bool,
    state: ReplyState,
    started: Option<Instant>,
    /// Its first chunk.
    since: Instant,
}

#[derive(Debug)]
struct Playback {
    reply_id: String,
    pos: f64,
    last: Instant,
}

#[derive(Debug)]
enum CallerEv {
    Partial(String),
    Final,
    TurnStart,
}

#[derive(Debug)]
struct Caller {
    turn_id: TurnId,
    text: String,
    events: VecDeque<(Instant, CallerEv)>,
}

#[derive(Debug)]
struct ToolRun {
    due: Instant,
    deadline: Option<Instant>,
    call_id: String,
    turn_id: Option<TurnId>,
    result: Result<Value, String>,
}

#[derive(Clone, Copy, Debug)]
enum Timer {
    PlaybackEnd,
    Caller,
    Tool(usize),
    FirstChunk(TurnId),
    ReplyDone(TurnId),
    UnpromptedDone,
    Step,
    IdleHangup,
    MaxCall,
}

/// The jambonz side of one call. See the [module docs](self).
pub struct Simulator {
    cfg: SimConfig,
    script: VecDeque<Step>,
    tools: HashMap<String, SimTool>,
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
    transcript: Transcript,
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

fn is_ws(c: char) -> bool {
    c.is_whitespace()
}

/// Splits `text` after `chars` characters were spoken, at the end of the last whole word:
/// `("We're open eight to six", 16)` → `("We're open eight", " to six")`.
pub fn split_spoken(text: &str, chars: usize) -> (&str, &str) {
    let mut b = text
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(i, _)| i);
    if b < text.len() {
        let at = text[b..].chars().next().unwrap_or(' ');
        if !is_ws(at) {
            while let Some(c) = text[..b].chars().next_back() {
                if is_ws(c) {
                    break;
                }
                b -= c.len_utf8();
            }
        }
        while let Some(c) = text[..b].chars().next_back() {
            if !is_ws(c) {
                break;
            }
            b -= c.len_utf8();
        }
    }
    text.split_at(b)
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
            tools: HashMap::new(),
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
            transcript: Transcript::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }
}

impl Simulator {
    /// Registers a tool jambonz runs on `tool:call`, answering at once. Its definition is
    /// added to `session:start`'s `tools` unless one of that name is configured.
    #[must_use]
    pub fn with_tool(
        self,
        name: impl Into<String>,
        run: impl Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.with_slow_tool(name, Duration::ZERO, run)
    }

    /// Registers a tool that takes `latency` to answer.
    #[must_use]
    pub fn with_slow_tool(
        mut self,
        name: impl Into<String>,
        latency: Duration,
        run: impl Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        let declared = self.cfg.tools.iter().any(|t| {
            t.get("name").and_then(Value::as_str) == Some(name.as_str())
                || t.pointer("/function/name").and_then(Value::as_str) == Some(name.as_str())
        });
        if !declared {
            self.cfg.tools.push(serde_json::json!({
                "name": name,
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            }));
        }
        self.tools.insert(
            name,
            SimTool {
                latency,
                run: Box::new(run),
            },
        );
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
    pub fn transcript(&self) -> &Transcript {
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

    fn caller_speaking(&self) -> bool {
        self.caller.is_some()
    }

    fn any_open_turn(&self) -> bool {
        self.turns.values().any(|t| t.status == TurnStatus::Open)
    }

    /// "The floor is free (nothing playing, no turn open, the caller not speaking)".
    fn floor_free(&self) -> bool {
        self.playing.is_none()
            && self.queue.is_empty()
            && self.pending_interrupt.is_none()
            && !self.caller_speaking()
            && !self.any_open_turn()
    }

    fn quiet(&self) -> bool {
        self.phase == Phase::Active
            && self.floor_free()
            && self.held.is_none()
            && self.tool_runs.is_empty()
    }

    fn sync_playback(&mut self, t: Instant) {
        let rate = self.cfg.speaking_rate;
        if let Some(p) = &mut self.playing {
            let avail = self.replies.get(&p.reply_id).map_or(0, |r| r.chars) as f64;
            if t > p.last {
                let step = t.duration_since(p.last).as_secs_f64() * rate;
                p.pos = (p.pos + step).min(avail);
                p.last = t;
            }
        }
    }

    fn next_timer(&self) -> Option<(Instant, Timer)> {
        if self.phase != Phase::Active {
            return None;
        }
        let mut best: Option<(Instant, Timer)> = None;
        let mut consider = |t: Instant, k: Timer| {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, k));
            }
        };
        if let Some(p) = &self.playing {
            if let Some(r) = self.replies.get(&p.reply_id) {
                if r.done {
                    let left = (r.chars as f64 - p.pos).max(0.0);
                    consider(
                        later(p.last, secs(left, self.cfg.speaking_rate)),
                        Timer::PlaybackEnd,
                    );
                }
            }
        }
        if let Some(c) = &self.caller {
            if let Some((t, _)) = c.events.front() {
                consider(*t, Timer::Caller);
            }
        }
        for (i, run) in self.tool_runs.iter().enumerate() {
            let t = match run.deadline {
                Some(d) if d < run.due => d,
                _ => run.due,
            };
            consider(t, Timer::Tool(i));
        }
        for (id, turn) in &self.turns {
            if turn.status != TurnStatus::Open {
                continue;
            }
            if let (None, Some(d), 0) = (
                turn.first_chunk,
                self.cfg.deadlines.first_chunk,
                turn.tools_running,
            ) {
                // Paused while jambonz runs one of the turn's tools.
                consider(
                    later(later(turn.started, turn.tool_time), d),
                    Timer::FirstChunk(*id),
                );
            }
            if let Some(d) = self.cfg.deadlines.reply_done {
                consider(later(turn.started, d), Timer::ReplyDone(*id));
            }
        }
        if let Some(d) = self.cfg.deadlines.reply_done {
            for r in self.replies.values() {
                if r.turn_id.is_none() && !r.done && r.unprompted_live() {
                    consider(later(r.since, d), Timer::UnpromptedDone);
                }
            }
        }
        match self.script.front() {
            Some(step) => {
                let blocked = matches!(step.action, Action::Say { .. }) && self.caller_speaking();
                if !blocked {
                    let due = match step.when {
                        When::Now => Some(self.step_since),
                        When::Quiet(p) => {
                            self.quiet_since.map(|q| later(q.max(self.step_since), p))
                        }
                        // No reply to speak over: once the call is quiet, the caller
                        // speaks after the usual pause (a silent harness must not hold the
                        // call until max_call).
                        When::DuringReply(a) => {
                            self.barge_anchor.map(|b| later(b, a)).or_else(|| {
                                self.quiet_since
                                    .map(|q| later(q.max(self.step_since), DEFAULT_PAUSE))
                            })
                        }
                    };
                    if let Some(t) = due {
                        consider(t, Timer::Step);
                    }
                }
            }
            None => {
                if let Some(q) = self.quiet_since {
                    consider(
                        later(q.max(self.step_since), self.cfg.idle_hangup),
                        Timer::IdleHangup,
                    );
                }
            }
        }
        consider(later(self.t0, self.cfg.max_call), Timer::MaxCall);
        best
    }

    fn advance(&mut self, now: Instant) {
        // Each timer consumes itself when fired; the bound is a guard, not a rule.
        for _ in 0..100_000 {
            let Some((due, timer)) = self.next_timer() else {
                break;
            };
            if due > now {
                break;
            }
            let t = due.max(self.clock);
            self.sync_playback(t);
            self.clock = t;
            self.fire(timer);
            self.after_change();
        }
        if now > self.clock {
            self.sync_playback(now);
            self.clock = now;
        }
    }

    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::PlaybackEnd => self.finish_playback(),
            Timer::Caller => self.caller_event(),
            Timer::Tool(i) => {
                if i < self.tool_runs.len() {
                    let run = self.tool_runs.remove(i);
                    self.tool_answer(run);
                }
            }
            Timer::FirstChunk(id) => self.fail_turn(id, harness_error::FIRST_CHUNK_TIMEOUT, true),
            Timer::ReplyDone(id) => self.fail_turn(id, harness_error::REPLY_DONE_TIMEOUT, true),
            Timer::UnpromptedDone => self.expire_unprompted(),
            Timer::Step => self.run_step(),
            Timer::IdleHangup | Timer::MaxCall => self.end_call(end_reason::CALLER_HANGUP),
        }
    }

    /// After any change: start what can play, and note when the call went quiet.
    fn after_change(&mut self) {
        if self.phase != Phase::Active {
            return;
        }
        if self.playing.is_none() && !self.caller_speaking() {
            let next = if let Some(id) = self.pending_interrupt.take() {
                Some(id)
            } else if let Some(id) = self.queue.pop_front() {
                Some(id)
            } else if !self.any_open_turn() {
                self.held.take()
            } else {
                None
            };
            if let Some(id) = next {
                self.start_playing(id);
            }
        }
        if self.quiet() {
            if self.quiet_since.is_none() {
                self.quiet_since = Some(self.clock);
            }
        } else {
            self.quiet_since = None;
        }
        if let (Some(step), Some(p)) = (self.script.front(), &self.playing) {
            if matches!(step.when, When::DuringReply(_)) && self.barge_anchor.is_none() {
                let started = self
                    .replies
                    .get(&p.reply_id)
                    .and_then(|r| r.started)
                    .unwrap_or(self.clock);
                self.barge_anchor = Some(started.max(self.step_since));
            }
        }
    }

    fn start_playing(&mut self, id: String) {
        let t = self.clock;
        if let Some(r) = self.replies.get_mut(&id) {
            r.state = ReplyState::Playing;
            r.started = Some(t);
            self.playing = Some(Playback {
                reply_id: id,
                pos: 0.0,
                last: t,
            });
        }
    }

    fn finish_playback(&mut self) {
        let Some(p) = self.playing.take() else { return };
        let Some(r) = self.replies.remove(&p.reply_id) else {
            return;
        };
        if self.replies.is_empty() {
            self.replies = HashMap::new();
        }
        let at_ms = self.at_ms(r.started.unwrap_or(self.clock));
        self.line(Line::Agent {
            reply_id: p.reply_id,
            turn_id: r.turn_id,
            heard: r.text,
            unheard: String::new(),
            cut_off: false,
            at_ms,
        });
    }

    /// Cuts off what plays; returns (reply_id, turn_id, spoken, unspoken).
    fn cut_playback(&mut self) -> Option<(String, Option<TurnId>, String, String)> {
        self.sync_playback(self.clock);
        let p = self.playing.take()?;
        let t0 = self.t0;
        let clock = self.clock;
        let r = self.replies.get_mut(&p.reply_id)?;
        // ok: pos is within 0..=chars by construction; the cast floors it.
        let (spoken, unspoken) = split_spoken(&r.text, p.pos as usize);
        let (spoken, unspoken) = (spoken.to_owned(), unspoken.to_owned());
        r.state = ReplyState::CutOff;
        r.text = String::new();
        let turn_id = r.turn_id;
        let at_ms = ms(r.started.unwrap_or(clock).saturating_duration_since(t0));
        self.line(Line::Agent {
            reply_id: p.reply_id.clone(),
            turn_id,
            heard: spoken.clone(),
            unheard: unspoken.clone(),
            cut_off: true,
            at_ms,
        });
        Some((p.reply_id, turn_id, spoken, unspoken))
    }

    /// Cuts off the unprompted replies whose reply deadline passed without their
    /// `reply:done`.
    fn expire_unprompted(&mut self) {
        let Some(d) = self.cfg.deadlines.reply_done else {
            return;
        };
        let now = self.clock;
        let mut due: Vec<String> = self
            .replies
            .iter()
            .filter(|(_, r)| {
                r.turn_id.is_none() && !r.done && r.unprompted_live() && later(r.since, d) <= now
            })
            .map(|(k, _)| k.clone())
            .collect();
        due.sort();
        for id in due {
            self.violation(
                ViolationKind::ReplyDoneTimeout,
                format!("unprompted reply {id} without reply:done: cut off"),
            );
            if self.playing.as_ref().is_some_and(|p| p.reply_id == id) {
                self.cut_playback();
                continue;
            }
            self.queue.retain(|q| *q != id);
            if self.held.as_deref() == Some(id.as_str()) {
                self.held = None;
            }
            if self.pending_interrupt.as_deref() == Some(id.as_str()) {
                self.pending_interrupt = None;
            }
            self.kill_reply(&id);
        }
    }

    fn kill_reply(&mut self, id: &str) {
        if let Some(r) = self.replies.get_mut(id) {
            r.state = ReplyState::Dead;
            r.text = String::new();
        }
    }

    fn set_completion(&mut self, turn_id: TurnId, reason: &str, error: Option<&str>) {
        if let Some(t) = self.turns.get(&turn_id) {
            if let Some(s) = self.transcript.turns.get_mut(t.summary) {
                s.completion_reason = reason.to_owned();
                s.harness_error = error.map(str::to_owned);
            }
        }
    }

    fn cancel_turn(&mut self, turn_id: TurnId) {
        if let Some(t) = self.turns.get_mut(&turn_id) {
            t.status = TurnStatus::Cancelled;
        }
        self.set_completion(turn_id, completion::BARGE_IN, None);
        let cid = self.sid();
        self.send(JambonzMessage::TurnCancel(TurnCancel {
            call_sid: cid,
            turn_id: Some(turn_id),
            reason: Some(cancel_reason::BARGE_IN.into()),
            extra: Map::new(),
        }));
        self.drop_turn_replies(turn_id);
    }

    fn drop_turn_replies(&mut self, turn_id: TurnId) {
        let ids: Vec<String> = self
            .replies
            .iter()
            .filter(|(_, r)| r.turn_id == Some(turn_id) && r.state != ReplyState::Playing)
            .map(|(k, _)| k.clone())
            .collect();
        for id in ids {
            self.queue.retain(|q| *q != id);
            if self.pending_interrupt.as_deref() == Some(id.as_str()) {
                self.pending_interrupt = None;
            }
            self.kill_reply(&id);
        }
    }

    fn fail_turn(&mut self, turn_id: TurnId, error: &str, cut: bool) {
        let Some(t) = self.turns.get_mut(&turn_id) else {
            return;
        };
        if !matches!(t.status, TurnStatus::Open | TurnStatus::Answered) {
            return;
        }
        t.status = TurnStatus::Failed;
        self.set_completion(turn_id, completion::HARNESS_FAILURE, Some(error));
        if cut {
            let playing_this = self
                .playing
                .as_ref()
                .and_then(|p| self.replies.get(&p.reply_id))
                .is_some_and(|r| r.turn_id == Some(turn_id));
            if playing_this {
                self.cut_playback();
            }
        }
        self.drop_turn_replies(turn_id);
        self.event(SimEvent::TurnFailed {
            turn_id,
            harness_error: error.to_owned(),
        });
    }

    fn open_turn(&mut self, input: TurnInput, label: String) {
        let turn_id = self.next_turn;
        self.next_turn += 1;
        self.open_turn_with(turn_id, input, label);
    }

    fn open_turn_with(&mut self, turn_id: TurnId, input: TurnInput, label: String) {
        let summary = self.transcript.turns.len();
        self.transcript.turns.push(TurnSummary {
            turn_id,
            input: label,
            first_chunk_ms: None,
            completion_reason: completion::CALL_ENDED.into(),
            harness_error: None,
            turn_record: None,
        });
        self.turns.insert(
            turn_id,
            SimTurn {
                started: self.clock,
                status: TurnStatus::Open,
                first_chunk: None,
                tools_running: 0,
                tools_since: self.clock,
                tool_time: Duration::ZERO,
                summary,
            },
        );
        let cid = self.sid();
        self.send(JambonzMessage::TurnStart(TurnStart {
            call_sid: cid,
            turn_id: Some(turn_id),
            input,
            extra: Map::new(),
        }));
    }

    fn run_step(&mut self) {
        let Some(step) = self.script.pop_front() else {
            return;
        };
        self.step_since = self.clock;
        self.barge_anchor = None;
        match step.action {
            Action::Greeting => self.open_turn(TurnInput::greeting(), "(greeting)".into()),
            Action::Say { text, partials } => self.caller_starts(text, partials),
            Action::Silence => {
                let cid = self.sid();
                self.send(JambonzMessage::Event(Event::Silence(Silence {
                    call_sid: cid,
                    extra: Map::new(),
                })));
            }
            Action::HangUp => self.end_call(end_reason::CALLER_HANGUP),
            Action::Raw(frame) => self.transmits.push_back(Transmit::Text(frame)),
        }
    }

    fn caller_starts(&mut self, text: String, partials: bool) {
        let t = self.clock;
        let turn_id = self.next_turn;
        self.next_turn += 1;
        // Barge-in: the caller speaks over what plays.
        if let Some((reply_id, reply_turn, spoken, unspoken)) = self.cut_playback() {
            let cid = self.sid();
            self.send(JambonzMessage::Event(Event::UserInterruption(
                UserInterruption {
                    call_sid: cid,
                    turn_id: reply_turn,
                    reply_id: Some(reply_id),
                    spoken,
                    unspoken,
                    extra: Map::new(),
                },
            )));
            if let Some(rt) = reply_turn {
                // The turn ends with its reply cut off, whether or not its reply:done came.
                if matches!(
                    self.turns.get(&rt).map(|x| x.status),
                    Some(TurnStatus::Open | TurnStatus::Answered)
                ) {
                    self.cancel_turn(rt);
                }
            }
        }
        // Any other open turn is superseded by the new speech.
        let open: Vec<TurnId> = self
            .turns
            .iter()
            .filter(|(_, x)| x.status == TurnStatus::Open)
            .map(|(id, _)| *id)
            .collect();
        for id in open {
            self.cancel_turn(id);
        }
        // Queued replies are not played over the new speech. A turn whose reply is dropped
        // unheard ends like the one that was playing (even if its reply:done came): the
        // harness must learn that the caller never heard it.
        let mut unheard = Vec::new();
        for id in std::mem::take(&mut self.queue) {
            if let Some(tid) = self.replies.get(&id).and_then(|r| r.turn_id) {
                unheard.push(tid);
            }
            self.kill_reply(&id);
        }
        for tid in unheard {
            if self.turns.get(&tid).map(|x| x.status) == Some(TurnStatus::Answered) {
                self.cancel_turn(tid);
            }
        }
        self.line(Line::Caller {
            turn_id,
            text: text.clone(),
            at_ms: self.at_ms(t),
        });
        let cid = self.sid();
        self.send(JambonzMessage::SpeechStart(SpeechStart {
            call_sid: cid,
            turn_id: Some(turn_id),
            extra: Map::new(),
        }));
        let rate = self.cfg.caller_rate;
        let total = text.chars().count();
        let mut events = VecDeque::new();
        if partials {
            let mut chars = 0usize;
            let words: Vec<&str> = text.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                chars += w.chars().count() + usize::from(i > 0);
                if i + 1 < words.len() {
                    let prefix = words[..=i].join(" ");
                    events.push_back((
                        later(t, secs(chars as f64, rate)),
                        CallerEv::Partial(prefix),
                    ));
                }
            }
        }
        let end = later(t, secs(total as f64, rate));
        events.push_back((end, CallerEv::Final));
        events.push_back((later(end, self.cfg.endpointing), CallerEv::TurnStart));
        self.caller = Some(Caller {
            turn_id,
            text,
            events,
        });
    }

    fn caller_event(&mut self) {
        let cid = self.sid();
        let Some(c) = &mut self.caller else { return };
        let Some((_, ev)) = c.events.pop_front() else {
            return;
        };
        let turn_id = c.turn_id;
        match ev {
            CallerEv::Partial(text) => self.send(JambonzMessage::Transcript(TranscriptMsg {
                call_sid: cid,
                turn_id: Some(turn_id),
                text,
                is_final: false,
                extra: Map::new(),
            })),
            CallerEv::Final => {
                let text = c.text.clone();
                self.send(JambonzMessage::Transcript(TranscriptMsg {
                    call_sid: cid,
                    turn_id: Some(turn_id),
                    text,
                    is_final: true,
                    extra: Map::new(),
                }))
            }
            CallerEv::TurnStart => {
                let text = c.text.clone();
                self.caller = None;
                let input = TurnInput::speech(text.clone(), Some(self.cfg.language.clone()));
                self.open_turn_with(turn_id, input, text);
            }
        }
    }

    /// A tool of the turn starts (`true`) or ends running.
    fn tool_running(&mut self, turn_id: Option<TurnId>, running: bool) {
        let now = self.clock;
        let Some(t) = turn_id.and_then(|id| self.turns.get_mut(&id)) else {
            return;
        };
        if running {
            if t.tools_running == 0 {
                t.tools_since = now;
            }
            t.tools_running += 1;
        } else if t.tools_running > 0 {
            t.tools_running -= 1;
            if t.tools_running == 0 {
                t.tool_time = t
                    .tool_time
                    .saturating_add(now.saturating_duration_since(t.tools_since));
            }
        }
    }

    fn tool_answer(&mut self, run: ToolRun) {
        self.tool_running(run.turn_id, false);
        let timed_out = run.deadline.is_some_and(|d| d < run.due);
        let msg = if timed_out {
            ToolResultMessage::error(&run.call_id, "tool timed out")
        } else {
            match run.result {
                Ok(v) => ToolResultMessage::ok(&run.call_id, v),
                Err(e) => ToolResultMessage::error(&run.call_id, e),
            }
        };
        let mut msg = msg;
        msg.call_sid = self.sid();
        self.send(JambonzMessage::ToolResult(msg));
        if timed_out {
            if let Some(t) = run.turn_id {
                self.fail_turn(t, harness_error::TOOL_RESULT_TIMEOUT, true);
            }
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

    /// Checks the turn of a reply or tool call: `Ok(())` when it may be used.
    fn turn_usable(&self, turn_id: TurnId) -> Result<(), (ViolationKind, bool)> {
        match self.turns.get(&turn_id).map(|t| t.status) {
            None => Err((ViolationKind::ReplyBeforeTurnStart, true)),
            Some(TurnStatus::Open | TurnStatus::Answered) => Ok(()),
            Some(_) => Err((ViolationKind::ClosedTurn, false)),
        }
    }

    fn refuse_early(&mut self, reply_id: &str, turn_id: TurnId) {
        let message = format!("reply {reply_id} for turn {turn_id} before its turn:start");
        self.violation(ViolationKind::ReplyBeforeTurnStart, message.clone());
        let cid = self.sid();
        self.send(JambonzMessage::Event(Event::Error(ErrorEvent {
            call_sid: cid,
            reply_id: Some(reply_id.to_owned()),
            turn_id: Some(turn_id),
            message: Some(message),
            extra: Map::new(),
        })));
    }

    fn mark_first_chunk(&mut self, turn_id: Option<TurnId>) {
        let Some(tid) = turn_id else { return };
        let now = self.clock;
        if let Some(t) = self.turns.get_mut(&tid) {
            if t.first_chunk.is_none() {
                t.first_chunk = Some(now);
                let latency = ms(now.saturating_duration_since(t.started));
                if let Some(s) = self.transcript.turns.get_mut(t.summary) {
                    s.first_chunk_ms = Some(latency);
                }
            }
        }
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

    fn on_chunk(&mut self, c: ReplyChunk) {
        if self.id_too_long("reply_id", &c.reply_id) {
            return;
        }
        if c.chunk.has_tool_calls() {
            self.violation(
                ViolationKind::ToolCallsInChunk,
                format!("delta.tool_calls in reply {} ignored", c.reply_id),
            );
        }
        let content = c.chunk.content().to_owned();
        let interrupt = c.interrupt == Some(true);
        if let Some(r) = self.replies.get_mut(&c.reply_id) {
            match r.state {
                ReplyState::Refused | ReplyState::Dead => return,
                _ => {}
            }
            if r.done {
                self.violation(
                    ViolationKind::DeadReply,
                    format!("chunk after reply:done of {}", c.reply_id),
                );
                return;
            }
            if r.state == ReplyState::CutOff {
                // In flight when it was cut off: not played, not a fault.
                return;
            }
            let cut = append_bounded(r, &content, self.cfg.max_reply_bytes);
            if cut {
                let detail = format!(
                    "reply {} over {} bytes: the rest is not spoken",
                    c.reply_id, self.cfg.max_reply_bytes
                );
                self.violation(ViolationKind::ReplyTooLong, detail);
            }
            if interrupt {
                self.violation(
                    ViolationKind::InterruptNotFirst,
                    format!("interrupt on a later chunk of {}", c.reply_id),
                );
            }
            return;
        }
        if !self.id_room() {
            return;
        }
        if c.reply_id.is_empty() || !self.reply_ids.insert(c.reply_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("reply_id {:?} reused or empty", c.reply_id),
            );
            return;
        }
        if let Some(tid) = c.turn_id {
            match self.turn_usable(tid) {
                Ok(()) => {}
                Err((_, true)) => {
                    self.refuse_early(&c.reply_id, tid);
                    self.insert_reply(&c.reply_id, c.turn_id, ReplyState::Refused, String::new());
                    return;
                }
                Err((kind, false)) => {
                    self.violation(kind, format!("reply {} for closed turn {tid}", c.reply_id));
                    self.insert_reply(&c.reply_id, c.turn_id, ReplyState::Dead, String::new());
                    return;
                }
            }
        }
        self.mark_first_chunk(c.turn_id);
        let id = c.reply_id;
        if interrupt {
            if self.caller_speaking() {
                // "A caller in mid-utterance is still never talked over."
                if let Some(old) = self.pending_interrupt.take() {
                    self.queue.push_front(old);
                }
                self.insert_reply(&id, c.turn_id, ReplyState::PendingInterrupt, content);
                self.pending_interrupt = Some(id);
            } else {
                self.cut_playback();
                self.insert_reply(&id, c.turn_id, ReplyState::Queued, content);
                self.start_playing(id);
            }
            return;
        }
        if c.turn_id.is_some() {
            self.insert_reply(&id, c.turn_id, ReplyState::Queued, content);
            self.queue.push_back(id);
        } else if self.floor_free() {
            self.insert_reply(&id, None, ReplyState::Queued, content);
            self.start_playing(id);
        } else {
            if let Some(old) = self.held.take() {
                self.kill_reply(&old);
                let cid = self.sid();
                self.send(JambonzMessage::Event(Event::ReplyDropped(ReplyDropped {
                    call_sid: cid,
                    reply_id: Some(old),
                    reason: Some(drop_reason::REPLACED.into()),
                    extra: Map::new(),
                })));
            }
            self.insert_reply(&id, None, ReplyState::Held, content);
            self.held = Some(id);
        }
    }

    fn insert_reply(&mut self, id: &str, turn_id: Option<TurnId>, state: ReplyState, text: String) {
        let mut r = SimReply {
            turn_id,
            text: String::new(),
            chars: 0,
            done: false,
            truncated: false,
            state,
            started: None,
            since: self.clock,
        };
        let cut = append_bounded(&mut r, &text, self.cfg.max_reply_bytes);
        self.replies.insert(id.to_owned(), r);
        if cut {
            let detail = format!(
                "reply {id} over {} bytes: the rest is not spoken",
                self.cfg.max_reply_bytes
            );
            self.violation(ViolationKind::ReplyTooLong, detail);
        }
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

    fn answered(&mut self, turn_id: Option<TurnId>, record: Option<TurnRecord>) {
        let Some(tid) = turn_id else { return };
        let Some(t) = self.turns.get_mut(&tid) else {
            return;
        };
        if !matches!(t.status, TurnStatus::Open | TurnStatus::Answered) {
            // Cancelled, failed or ended: a reply:done in flight changes nothing.
            return;
        }
        if t.status == TurnStatus::Open {
            t.status = TurnStatus::Answered;
            let summary = t.summary;
            if let Some(s) = self.transcript.turns.get_mut(summary) {
                s.completion_reason = completion::COMPLETED.into();
            }
        }
        if let Some(s) = self.transcript.turns.get_mut(t.summary) {
            if let Some(r) = record {
                s.turn_record = Some(Box::new(r));
            }
        }
    }

    fn on_done(&mut self, d: ReplyDone) {
        if self.id_too_long("reply_id", &d.reply_id) {
            return;
        }
        if let Some(r) = &d.turn_record {
            if let Err(e) = r.check_size() {
                self.violation(ViolationKind::TurnRecordTooLarge, e.to_string());
            }
        }
        if let Some(r) = self.replies.get_mut(&d.reply_id) {
            match r.state {
                ReplyState::Refused | ReplyState::Dead => return,
                _ => {}
            }
            if r.done {
                self.violation(
                    ViolationKind::DeadReply,
                    format!("second reply:done for {}", d.reply_id),
                );
                return;
            }
            r.done = true;
            let turn_id = r.turn_id;
            self.answered(turn_id, d.turn_record);
            return;
        }
        // A reply:done without chunks: an empty reply.
        if !self.id_room() {
            return;
        }
        if d.reply_id.is_empty() || !self.reply_ids.insert(d.reply_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("reply_id {:?} reused or empty", d.reply_id),
            );
            return;
        }
        if let Some(tid) = d.turn_id {
            match self.turn_usable(tid) {
                Ok(()) => {}
                Err((_, true)) => {
                    self.refuse_early(&d.reply_id, tid);
                    return;
                }
                Err((kind, false)) => {
                    self.violation(
                        kind,
                        format!("reply:done {} for closed turn {tid}", d.reply_id),
                    );
                    return;
                }
            }
        }
        self.answered(d.turn_id, d.turn_record);
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

    /// `malformed`: the frame was malformed (its call_id readable): answered with an error.
    fn on_tool_call(&mut self, c: ToolCallMessage, malformed: Option<String>) {
        if self.id_too_long("call_id", &c.call_id) {
            return;
        }
        let t = self.clock;
        if !self.id_room() {
            return;
        }
        if c.call_id.is_empty() || !self.call_ids.insert(c.call_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("call_id {:?} reused or empty", c.call_id),
            );
        }
        let usable = match c.turn_id {
            Some(tid) => self.turn_usable(tid),
            None => Err((ViolationKind::ClosedTurn, false)),
        };
        let result = if let Some(why) = malformed {
            Err(why)
        } else if let Err((kind, _)) = usable {
            self.violation(
                kind,
                format!(
                    "tool:call {} for turn {:?}, which is not open",
                    c.call_id, c.turn_id
                ),
            );
            Err(format!("turn {:?} is not open", c.turn_id))
        } else {
            match self.tools.get(&c.name) {
                None => Err(format!("unknown tool: {}", c.name)),
                Some(tool) => {
                    let due = later(t, tool.latency);
                    let result = (tool.run)(&c.args);
                    self.tool_running(c.turn_id, true);
                    self.tool_runs.push(ToolRun {
                        due,
                        deadline: self.cfg.deadlines.tool_result.map(|d| later(t, d)),
                        call_id: c.call_id,
                        turn_id: c.turn_id,
                        result,
                    });
                    return;
                }
            }
        };
        // Answered in order with the other tool calls.
        self.tool_runs.push(ToolRun {
            due: t,
            deadline: None,
            call_id: c.call_id,
            turn_id: c.turn_id,
            result,
        });
    }

    /// `malformed`: the frame was malformed (its command_id readable): `ok: false`.
    fn on_command(&mut self, c: crate::command::CommandMessage, malformed: bool) {
        if self.id_too_long("command_id", &c.command_id) {
            return;
        }
        if !self.id_room() {
            return;
        }
        if c.command_id.is_empty() || !self.command_ids.insert(c.command_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("command_id {:?} reused or empty", c.command_id),
            );
        }
        let ok = !malformed && matches!(c.command(), Command::Hangup { .. });
        let cid = self.sid();
        self.send(JambonzMessage::CommandResult(CommandResult {
            call_sid: cid,
            command_id: c.command_id,
            ok,
            extra: Map::new(),
        }));
        if ok {
            self.end_call(end_reason::HARNESS_HANGUP);
        }
    }
}

impl SimReply {
    /// Whether it may still be spoken (queued, held, waiting to interrupt or playing).
    fn unprompted_live(&self) -> bool {
        matches!(
            self.state,
            ReplyState::Queued
                | ReplyState::Held
                | ReplyState::PendingInterrupt
                | ReplyState::Playing
        )
    }
}

/// Appends `text` to a reply, keeping at most `max` bytes of text (cut at a character
/// boundary). Returns whether text was cut for the first time.
fn append_bounded(r: &mut SimReply, text: &str, max: usize) -> bool {
    let room = max.saturating_sub(r.text.len());
    let mut take = text.len().min(room);
    while !text.is_char_boundary(take) {
        take -= 1;
    }
    let kept = &text[..take];
    r.text.push_str(kept);
    r.chars += kept.chars().count();
    let first_cut = take < text.len() && !r.truncated;
    if take < text.len() {
        r.truncated = true;
    }
    first_cut
}

fn truncate(text: &str) -> String {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
