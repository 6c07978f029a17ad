//! The host side, sans-IO: threads and their event logs, the subscribe handshake, inputs
//! and receipts, `inputId` idempotency, resume from a cursor, gaps, heartbeats and
//! back-pressure, with time passed in.
//!
//! The run loop (after quinn-proto and str0m): feed what happens in (`open_sse`,
//! `connect`, `handle_frame`, `control`, `sent`, `emit`, `finish_turn`, `handle_timeout`),
//! then drain [`Host::poll_event`] (which connections to wake, which ones to close, which
//! turns to start or cancel) and, for each woken connection, [`Host::poll_transmit`] until it
//! returns `None`. Call [`Host::handle_timeout`] at [`Host::poll_timeout`].
//!
//! ```
//! use std::time::Instant;
//! use harness_tanstack::host::{Host, HostConfig, HostEvent, Transport};
//! use harness_tanstack::log::MemoryLog;
//!
//! let now = Instant::now();
//! let mut host = Host::new(HostConfig::default(), MemoryLog::default());
//!
//! // POST control: the first prompt makes the thread and starts a turn.
//! let answer = host.control(now, None, br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#, "req-1", None);
//! assert_eq!(answer.status, 200);
//! assert!(answer.body.contains(r#""status":"accepted""#));
//! let Some(HostEvent::StartTurn(turn)) = std::iter::from_fn(|| host.poll_event())
//!     .find(|e| matches!(e, HostEvent::StartTurn(_))) else { panic!() };
//!
//! // The driver streams the turn's events; the host logs them and fans them out.
//! host.emit(now, "thread-1", &turn.operation_id, harness_tanstack::agui::Event::text_content("m-1", "Hi")).unwrap();
//!
//! // GET events: hello, then every event of the thread from the first one.
//! let conn = host.open_sse(now, Some("thread-1"), Some("2"), None, None, None, "req-2").unwrap();
//! let first = host.poll_transmit(now, conn).unwrap();
//! assert_eq!(&first[..], b"data: {\"type\":\"harness.hello\",\"v\":2,\"threadId\":\"thread-1\"}\n\n");
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use harness_core::Cursor;
use harness_core::message::{Message as CoreMessage, Role};

use crate::Json;
use crate::agui::{
    self, Content, Custom, Event, RunError, RunFinished, RunFinishedOutcome, RunStarted,
    TextMessageEnd,
};
use crate::catalog::{self, Delivery, HarnessEvent, InputOutcome, OperationKind};
use crate::frame::{
    self, ActiveOperation, ClientFrame, ControlRequest, ErrorCode, Hello, HostFrame, Input,
    Receipt, ReceiptFrame, ReceiptStatus, SessionSnapshot, SnapshotFrame, WaitingInput, close,
};
use crate::http::{HttpAnswer, StreamConfig};
use crate::log::{EventLog, LogError, LogRecord, MemoryLog};
use crate::transport::sse_encode;

/// Who may do what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AccessPolicy {
    /// No login (the stdio worker: "Every input runs with no user").
    #[default]
    Open,
    /// A user is required (`getUser` returning no user is `401` / close 4401), and a thread
    /// belongs to the user who made it (`membersOnly()`): anyone else gets `403` / 4403.
    MembersOnly,
}

/// How a host behaves.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The stream values.
    pub stream: StreamConfig,
    /// Who may do what.
    pub access: AccessPolicy,
    /// Agents an `agent` input may run (any other: rejected `unknown_agent`).
    pub agents: Vec<String>,
    /// The protocol version the host speaks (2).
    pub version: i64,
    /// Receipts kept per thread for `inputId` idempotency (the oldest are forgotten).
    /// Default 10,000.
    pub max_receipts: usize,
    /// Frames (receipts, errors, pings) that may wait for a client that does not read;
    /// past this the client is a slow consumer. Default 1,024.
    pub max_queued_frames: usize,
    /// Bytes those frames may hold (a frame that comes to an empty queue always fits);
    /// past this the client is a slow consumer. Default 16 MiB.
    pub max_queued_bytes: usize,
    /// Inputs that may wait behind the running turn of one thread; past this an input gets
    /// a `rejected` receipt with reason `queue_full`. Default 1,000.
    pub max_waiting_inputs: usize,
    /// Status events `GET host-events` keeps for its readers (a reader behind them gets
    /// `harness.gap` with reason `evicted`). Default 10,000.
    pub max_host_events: usize,
    /// The longest thread id, in bytes, that a client may send. The spec sets no length;
    /// every record of a thread repeats its id, so the host bounds it. A longer one is
    /// refused like a missing one: `400 {error}` on `POST control`, `GET events` and
    /// `POST run` (and by [`Host::input`]), `invalid_frame` (no close) for a
    /// `harness.subscribe`. Default 1,024.
    pub max_thread_id_bytes: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            stream: StreamConfig::default(),
            access: AccessPolicy::Open,
            agents: Vec::new(),
            version: frame::PROTOCOL_VERSION,
            max_receipts: 10_000,
            max_queued_frames: 1024,
            max_queued_bytes: 16 << 20,
            max_waiting_inputs: 1000,
            max_host_events: 10_000,
            max_thread_id_bytes: 1024,
        }
    }
}

/// A connection of the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// What a host holds, for metrics and to check that nothing grows without bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostStats {
    /// Threads with a session.
    pub threads: usize,
    /// Open connections (until [`Host::disconnect`]).
    pub connections: usize,
    /// Thread ids (and `host-events`) that at least one connection streams.
    pub watched_threads: usize,
    /// Inputs waiting behind a running turn, on every thread.
    pub waiting_inputs: usize,
    /// Frames (receipts, errors, pings) queued for connections, on every connection.
    pub queued_frames: usize,
    /// The bytes of those frames.
    pub queued_bytes: usize,
}

/// How a connection carries frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `GET events` / `GET host-events`: SSE.
    Sse,
    /// The WebSocket: text frames.
    WebSocket,
    /// The stdio worker: NDJSON lines, no heartbeat, no limits.
    Stdio,
}

/// A turn to run: the driver runs the harness and feeds its events back with
/// [`Host::emit`], then calls [`Host::finish_turn`].
#[derive(Clone, Debug, PartialEq)]
pub struct TurnRequest {
    /// The thread.
    pub thread_id: String,
    /// The run (`operationId`, the AG-UI `runId`).
    pub operation_id: String,
    /// The input that started it.
    pub input_id: String,
    /// `chat` or `agent`.
    pub kind: OperationKind,
    /// The agent of an `agent` input.
    pub agent: Option<String>,
    /// The new user message.
    pub message: CoreMessage,
    /// The conversation before it.
    pub history: Vec<CoreMessage>,
    /// The `traceparent` of the input, when valid.
    pub traceparent: Option<String>,
}

/// Something the application must act on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostEvent {
    /// A connection has frames to send: drain [`Host::poll_transmit`].
    Wake(ConnId),
    /// Close a connection (after sending what `poll_transmit` still gives). `code` is the
    /// WebSocket close code; an SSE or stdio stream just ends.
    Close {
        /// The connection.
        conn: ConnId,
        /// The WebSocket close code.
        code: u16,
        /// Why.
        reason: String,
    },
    /// Run a turn.
    StartTurn(TurnRequest),
    /// Cancel a running turn: drop its future, then call [`Host::finish_turn`] with
    /// [`TurnOutcome::Cancelled`].
    CancelTurn {
        /// The thread.
        thread_id: String,
        /// The run.
        operation_id: String,
    },
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnOutcome {
    /// It completed.
    Completed,
    /// It failed.
    Failed {
        /// For people.
        message: String,
        /// For code (e.g. `timeout`).
        code: Option<String>,
    },
    /// It was cancelled.
    Cancelled,
}

/// Why a host call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The event log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// No such connection.
    #[error("unknown connection {0:?}")]
    UnknownConnection(ConnId),
}

#[derive(Clone, Debug)]
struct Waiting {
    input_id: String,
    delivery: Delivery,
    input: Input,
    traceparent: Option<String>,
}

#[derive(Clone, Debug)]
struct Running {
    operation_id: String,
    input_id: String,
    kind: OperationKind,
    /// The text message the run has open (a cancel closes it).
    open_message: Option<String>,
}

#[derive(Debug, Default)]
struct Thread {
    owner: Option<String>,
    running: Option<Running>,
    waiting: VecDeque<Waiting>,
    /// Receipts of idempotent inputs, by `inputId`.
    receipts: HashMap<String, Receipt>,
    /// The order the receipts came in (to forget the oldest).
    receipt_order: VecDeque<String>,
    transcript: Vec<agui::Message>,
    history: Vec<CoreMessage>,
    /// The user message of each accepted input, until it is applied.
    pending: HashMap<String, String>,
    /// The text of assistant messages being streamed, by message id.
    streaming: HashMap<String, String>,
    /// Runs whose `RUN_STARTED` had a `parentRunId`: the run tree.
    parents: HashMap<String, Option<String>>,
    /// Tool calls whose arguments still stream: where they are in the transcript (the
    /// message, and the call in its `toolCalls`), by `toolCallId`.
    open_calls: HashMap<String, (usize, usize)>,
}

#[derive(Debug)]
enum ConnState {
    /// A socket before its `harness.subscribe`.
    AwaitSubscribe,
    /// Streaming a thread: `pos` is the last sequence number sent.
    Thread {
        thread: String,
        pos: u64,
        /// A cursor the log cannot place: send a gap before anything else.
        force_gap: Option<Cursor>,
    },
    /// `GET host-events`: `pos` is the last sequence number sent.
    HostEvents {
        pos: u64,
        /// A cursor the host's log cannot place: send a gap before anything else.
        force_gap: Option<Cursor>,
    },
    /// `POST run` / `GET run`: the plain AG-UI events of one run.
    Run {
        thread: String,
        operation_id: String,
        pos: u64,
    },
    /// Closed: nothing more is sent.
    Closed,
}

#[derive(Debug)]
struct Conn {
    transport: Transport,
    user: Option<String>,
    request_id: String,
    state: ConnState,
    /// Frames that go before the log (hello, receipts, errors, pings).
    out: VecDeque<Bytes>,
    /// The bytes in `out`.
    out_bytes: usize,
    /// Bytes handed out and not yet reported sent.
    in_flight: usize,
    /// Over the buffer limit: nothing is handed out until [`Host::sent`] brings it under.
    blocked: bool,
    /// Since when bytes handed out wait to be taken with no progress ([`Host::sent`] of
    /// some bytes starts the count again): the client does not read.
    stalled_since: Option<Instant>,
    last_write: Instant,
    /// Close after `out` is drained.
    close_after: Option<(u16, String)>,
    /// The close code, once the host closed it (until [`Host::disconnect`]).
    closed_code: Option<u16>,
    /// When the host first woke it with no [`Host::poll_transmit`] since: a transport that
    /// takes no bytes at all (a write that never completes) does not read either.
    unpolled_since: Option<Instant>,
    /// The key of [`Host::watchers`] it is in.
    watching: Option<String>,
    next_request: u64,
    /// `harness.snapshot` frames the client asked for and has not had yet: each is taken
    /// and sent once the connection has every event the log has, so that it sits in the
    /// stream at its cursor. A count, not frames: what waits is bounded like the queue.
    snapshots_wanted: usize,
}

impl Conn {
    fn push_out(&mut self, b: Bytes) {
        self.out_bytes += b.len();
        self.out.push_back(b);
    }

    fn pop_out(&mut self) -> Option<Bytes> {
        let b = self.out.pop_front()?;
        self.out_bytes = self.out_bytes.saturating_sub(b.len());
        Some(b)
    }

    /// A client that sends and never reads: `slow_consumer`, then the close 4408.
    fn slow_consumer(&mut self) {
        let f = HostFrame::error(
            ErrorCode::SlowConsumer,
            "The client read too slowly.",
            self.request_id.clone(),
        );
        self.push_out(render(self.transport, &f));
        self.close_after = Some((close::SLOW_CONSUMER, "slow_consumer".into()));
    }

    /// Hands bytes out to the transport.
    fn hand_out(&mut self, b: &Bytes, now: Instant) {
        if self.in_flight == 0 {
            self.stalled_since = Some(now);
        }
        self.in_flight += b.len();
        self.last_write = now;
    }

    /// Notes that the host has something for it (a wake) at `now`.
    fn woken(&mut self, now: Option<Instant>) {
        if self.unpolled_since.is_none() {
            self.unpolled_since = now;
        }
    }
}

/// The thread id under which `GET host-events` keeps its own log.
const HOST_EVENTS: &str = "";

/// The sans-IO host. See the [module docs](self) for the run loop.
pub struct Host<L: EventLog> {
    cfg: HostConfig,
    log: L,
    host_log: MemoryLog,
    threads: HashMap<String, Thread>,
    conns: HashMap<ConnId, Conn, IdHash>,
    /// Connections by the thread they stream (for fan-out wakes).
    watchers: HashMap<String, HashSet<ConnId, IdHash>>,
    events: VecDeque<HostEvent>,
    woken: WakeQueue,
    next_conn: u64,
    next_op: u64,
    next_input: u64,
    /// The latest `now` the application gave (time is passed in, never read).
    last_now: Option<Instant>,
}

impl<L: EventLog> std::fmt::Debug for Host<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("threads", &self.threads.len())
            .field("conns", &self.conns.len())
            .finish_non_exhaustive()
    }
}

impl<L: EventLog> Host<L> {
    /// A host over a log. Threads the log already has (a durable log after a restart) are
    /// rebuilt from their records: their transcript, the run tree, the receipts of
    /// idempotent inputs (so a retry after the restart runs nothing twice), and ids that do
    /// not collide. What the restart cut off is closed in the log: a run that never ended
    /// gets `RUN_ERROR` / `harness.operation.finished` / `harness.input.settled` with
    /// `interrupted`, and an input that waited behind a turn gets `harness.input.settled`
    /// with outcome `interrupted`.
    pub fn new(cfg: HostConfig, mut log: L) -> Self {
        let mut threads = HashMap::new();
        let mut next_op = 0u64;
        let mut next_input = 0u64;
        let num =
            |s: &str, prefix: &str| s.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
        let max_receipts = cfg.max_receipts.max(1);
        for id in log.threads() {
            let mut t = Thread {
                owner: log.owner(&id),
                ..Thread::default()
            };
            // Runs that started and never ended: the host stopped during them.
            let mut open: Vec<(String, Option<String>)> = Vec::new();
            // Inputs accepted and neither applied nor settled: they waited behind a turn.
            let mut unapplied: Vec<String> = Vec::new();
            let mut queued: HashSet<String> = HashSet::new();
            let (first, head) = (log.first_seq(&id), log.head_seq(&id));
            for seq in first..=head {
                let Ok(Some(rec)) = log.get(&id, seq) else {
                    continue;
                };
                next_op = next_op.max(num(&rec.operation_id, "op-").unwrap_or(0));
                let Ok(ev) = rec.event() else { continue };
                match &ev {
                    Event::RunStarted(r) => open.push((r.run_id.clone(), None)),
                    Event::RunFinished(_) | Event::RunError(_) => {
                        open.retain(|(op, _)| *op != *rec.operation_id)
                    }
                    Event::Custom(c) => match HarnessEvent::from_custom(&c.name, &c.value) {
                        Ok(HarnessEvent::InputAccepted(a)) => {
                            next_input = next_input.max(num(&a.input_id, "in-").unwrap_or(0));
                            // Accepted again (sent again after it never ran): what it was
                            // the first time no longer counts.
                            queued.remove(&a.input_id);
                            let idempotent =
                                matches!(a.op.as_str(), "prompt" | "command" | "agent" | "append");
                            if idempotent {
                                t.remember_receipt(
                                    Receipt {
                                        input_id: a.input_id.clone(),
                                        status: ReceiptStatus::Accepted,
                                        ..Receipt::default()
                                    },
                                    max_receipts,
                                );
                            }
                            if a.op != "append" {
                                unapplied.push(a.input_id);
                            }
                        }
                        Ok(HarnessEvent::InputQueued(q)) => {
                            if let Some(r) = t.receipts.get_mut(&q.input_id) {
                                r.status = ReceiptStatus::Queued;
                            }
                            queued.insert(q.input_id);
                        }
                        Ok(HarnessEvent::InputApplied(a)) => {
                            if let Some(o) = open.iter_mut().find(|(op, _)| *op == a.operation_id) {
                                o.1 = Some(a.input_id.clone());
                            }
                            if let Some(r) = t.receipts.get_mut(&a.input_id) {
                                // The receipt said what happened then: accepted with its
                                // run, or queued (a queued input's receipt has no run).
                                if !queued.contains(&a.input_id) {
                                    r.operation_id = Some(a.operation_id.clone());
                                }
                            }
                            unapplied.retain(|i| *i != a.input_id);
                        }
                        Ok(HarnessEvent::InputSettled(a)) => {
                            unapplied.retain(|i| *i != a.input_id);
                        }
                        _ => {}
                    },
                    _ => {}
                }
                t.observe(&ev);
            }
            let mut closing: Vec<(String, Event)> = Vec::new();
            for (op, input_id) in open {
                closing.extend(
                    interrupted(&op, input_id)
                        .into_iter()
                        .map(|e| (op.clone(), e)),
                );
            }
            for input_id in unapplied {
                // It never ran: its receipt goes, so that the same input sent again (the
                // same `inputId`, after a lost answer) runs, once, instead of getting back
                // `queued` for an input that no longer waits.
                t.forget_receipt(&input_id);
                let ev = HarnessEvent::InputSettled(catalog::InputSettled {
                    input_id,
                    outcome: InputOutcome::Interrupted,
                    ..catalog::InputSettled::default()
                });
                closing.push(("session".to_owned(), ev.to_event()));
            }
            for (op, ev) in closing {
                if log.append(&id, &op, &ev).is_ok() {
                    t.observe(&ev);
                }
            }
            threads.insert(id, t);
        }
        Host {
            host_log: MemoryLog::new(cfg.max_host_events, 16 << 20),
            cfg,
            log,
            threads,
            conns: HashMap::default(),
            watchers: HashMap::new(),
            events: VecDeque::new(),
            woken: WakeQueue::default(),
            next_conn: 0,
            next_op,
            next_input,
            last_now: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// The log.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// The log, mutably (to truncate a durable log, for example).
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// Whether a turn runs, or an input waits, on any thread.
    pub fn is_busy(&self) -> bool {
        self.threads
            .values()
            .any(|t| t.running.is_some() || !t.waiting.is_empty())
    }

    /// Whether the thread has a session.
    pub fn has_thread(&self, thread_id: &str) -> bool {
        self.threads.contains_key(thread_id)
    }

    /// The next thing the application must do.
    #[must_use = "a dropped event is a turn never run or a connection never woken"]
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        self.woken.pop().map(HostEvent::Wake)
    }

    // ---- connections -----------------------------------------------------------------

    fn new_conn(
        &mut self,
        now: Instant,
        transport: Transport,
        user: Option<String>,
        request_id: &str,
        state: ConnState,
    ) -> ConnId {
        self.next_conn += 1;
        let id = ConnId(self.next_conn);
        self.conns.insert(
            id,
            Conn {
                transport,
                user,
                request_id: request_id.to_owned(),
                state,
                out: VecDeque::new(),
                out_bytes: 0,
                in_flight: 0,
                blocked: false,
                stalled_since: None,
                last_write: now,
                close_after: None,
                closed_code: None,
                unpolled_since: None,
                watching: None,
                next_request: 0,
                snapshots_wanted: 0,
            },
        );
        id
    }

    fn clock(&mut self, now: Instant) {
        if self.last_now.is_none_or(|t| now > t) {
            self.last_now = Some(now);
        }
    }

    fn watch(&mut self, thread: &str, id: ConnId) {
        self.unwatch(id);
        self.watchers
            .entry(thread.to_owned())
            .or_default()
            .insert(id);
        if let Some(c) = self.conns.get_mut(&id) {
            c.watching = Some(thread.to_owned());
        }
    }

    /// Takes a connection out of the fan-out; a thread id no connection streams is forgotten.
    fn unwatch(&mut self, id: ConnId) {
        let Some(key) = self.conns.get_mut(&id).and_then(|c| c.watching.take()) else {
            return;
        };
        if let Some(w) = self.watchers.get_mut(&key) {
            w.remove(&id);
            if w.is_empty() {
                self.watchers.remove(&key);
            }
        }
    }

    fn wake(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.woken(self.last_now);
            self.woken.insert(id);
        }
    }

    fn wake_thread(&mut self, thread: &str) {
        if let Some(w) = self.watchers.get(thread) {
            for id in w {
                if let Some(c) = self.conns.get_mut(id) {
                    c.woken(self.last_now);
                    self.woken.insert(*id);
                }
            }
        }
    }

    fn queue(&mut self, id: ConnId, frame: &HostFrame) {
        let max = self.cfg.max_queued_frames.max(1);
        let max_bytes = self.cfg.max_queued_bytes;
        if let Some(c) = self.conns.get_mut(&id) {
            if c.close_after.is_some() && !matches!(frame, HostFrame::Error(_)) {
                return;
            }
            let bytes = render(c.transport, frame);
            let full = c.out.len() >= max
                || (!c.out.is_empty() && c.out_bytes.saturating_add(bytes.len()) > max_bytes);
            if full && c.close_after.is_none() {
                // A client that sends and never reads: a slow consumer.
                c.slow_consumer();
                c.woken(self.last_now);
                self.woken.insert(id);
                return;
            }
            c.push_out(bytes);
            c.woken(self.last_now);
            self.woken.insert(id);
        }
    }

    fn close_conn(&mut self, id: ConnId, code: u16, reason: &str) {
        if let Some(c) = self.conns.get_mut(&id) {
            if c.close_after.is_none() && !matches!(c.state, ConnState::Closed) {
                c.close_after = Some((code, reason.to_owned()));
                c.woken(self.last_now);
                self.woken.insert(id);
            }
        }
    }

    /// What is wrong with a thread id a client sent, if anything: none ("`400`: `{ error }`.
    /// … or `threadId` is missing"), or one longer than
    /// [`max_thread_id_bytes`](HostConfig::max_thread_id_bytes).
    fn thread_id_error(&self, thread_id: &str) -> Option<String> {
        if thread_id.is_empty() {
            Some("threadId is required".to_owned())
        } else if thread_id.len() > self.cfg.max_thread_id_bytes {
            Some(format!(
                "threadId is longer than {} bytes",
                self.cfg.max_thread_id_bytes
            ))
        } else {
            None
        }
    }

    fn error(&mut self, id: ConnId, code: ErrorCode, message: &str, request_id: &str) {
        self.queue(id, &HostFrame::error(code, message, request_id));
    }

    /// `GET events?threadId=&v=&from=` (and `Last-Event-ID`): opens the session stream.
    ///
    /// `Err` is the HTTP answer to send instead of a stream (`400` no `threadId` or one
    /// over [`max_thread_id_bytes`](HostConfig::max_thread_id_bytes), `401` no user, `403`
    /// forbidden, `404` a thread with no session on a host with access).
    #[allow(clippy::too_many_arguments)]
    pub fn open_sse(
        &mut self,
        now: Instant,
        thread_id: Option<&str>,
        v: Option<&str>,
        from: Option<&str>,
        last_event_id: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        let thread = thread_id.unwrap_or_default();
        if let Some(e) = self.thread_id_error(thread) {
            return Err(HttpAnswer::error(400, &e, request_id));
        }
        match self.threads.get(thread) {
            None if self.cfg.access == AccessPolicy::MembersOnly => {
                return Err(HttpAnswer::error(404, "not_found", request_id));
            }
            Some(t) if !may_read(&self.cfg.access, t, user) => {
                return Err(HttpAnswer::error(403, "forbidden", request_id));
            }
            _ => {}
        }
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::AwaitSubscribe,
        );
        // "On SSE, send it as the `Last-Event-ID` header, or as `?from=`. When you send both, the header wins."
        let cursor = last_event_id.or(from).filter(|c| !c.is_empty());
        if !self.speaks(v) {
            self.unsupported(id, v.unwrap_or_default().trim(), request_id);
            return Ok(id);
        }
        self.subscribe(now, id, thread, cursor.map(Cursor::new), None, request_id);
        Ok(id)
    }

    /// Whether the `v` of a query string is the host's version ("With no `v`, the server
    /// uses its current version").
    fn speaks(&self, v: Option<&str>) -> bool {
        v.is_none_or(|v| v.trim().parse::<i64>().ok() == Some(self.cfg.version))
    }

    /// `GET host-events?v=`: status changes and session list changes, as SSE. Each has its
    /// cursor as the SSE `id`, and a reader that comes back with it (`Last-Event-ID`, or
    /// `from`; "When you send both, the header wins") gets "the first event after that
    /// cursor" (a gap first when the host no longer has it, or never handed it out). With
    /// no cursor the stream starts with the next status change.
    pub fn open_host_events(
        &mut self,
        now: Instant,
        v: Option<&str>,
        from: Option<&str>,
        last_event_id: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        let head = self.host_log.head_seq(HOST_EVENTS);
        let (pos, force_gap) = match last_event_id.or(from).filter(|c| !c.is_empty()) {
            None => (head, None),
            Some(c) => match c.parse::<u64>() {
                // Behind what the log still keeps: the gap comes from `transmit`.
                Ok(n) if n <= head => (n, None),
                // A cursor this host never handed out (a restart: the log is in memory).
                _ => (
                    self.host_log.first_seq(HOST_EVENTS).saturating_sub(1),
                    Some(Cursor::new(c)),
                ),
            },
        };
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::HostEvents { pos, force_gap },
        );
        if !self.speaks(v) {
            self.unsupported(id, v.unwrap_or_default().trim(), request_id);
            return Ok(id);
        }
        // "Its `harness.hello` frame has no `threadId`."
        let hello = HostFrame::Hello(Hello {
            v: Some(self.cfg.version),
            ..Hello::default()
        });
        self.queue(id, &hello);
        self.watch(HOST_EVENTS, id);
        Ok(id)
    }

    /// A WebSocket or stdio connection. The user comes from the upgrade request (none on
    /// stdio). The first frame must then be `harness.subscribe`.
    pub fn connect(
        &mut self,
        now: Instant,
        transport: Transport,
        user: Option<&str>,
        request_id: &str,
    ) -> ConnId {
        self.clock(now);
        let id = self.new_conn(
            now,
            transport,
            user.map(str::to_owned),
            request_id,
            ConnState::AwaitSubscribe,
        );
        if transport == Transport::WebSocket
            && self.cfg.access == AccessPolicy::MembersOnly
            && user.is_none()
        {
            // "`4401` | `getUser` refused the user."
            self.error(
                id,
                ErrorCode::Unauthorized,
                "Sign in to read this thread.",
                request_id,
            );
            self.close_conn(id, close::UNAUTHORIZED, "unauthorized");
        }
        id
    }

    fn unsupported(&mut self, id: ConnId, v: impl std::fmt::Display, request_id: &str) {
        let msg = format!(
            "Protocol version {v} is not supported. This host speaks version {}.",
            self.cfg.version
        );
        self.error(id, ErrorCode::UnsupportedVersion, &msg, request_id);
        self.close_conn(id, close::UNSUPPORTED_VERSION, "unsupported_version");
    }

    fn subscribe(
        &mut self,
        _now: Instant,
        id: ConnId,
        thread: &str,
        from: Option<Cursor>,
        v: Option<i64>,
        request_id: &str,
    ) {
        if let Some(v) = v {
            if v != self.cfg.version {
                self.unsupported(id, v, request_id);
                return;
            }
        }
        let (first, head) = (self.log.first_seq(thread), self.log.head_seq(thread));
        let (pos, force_gap) = match &from {
            // "With no cursor, the stream starts at the first event of the thread."
            None => (first.saturating_sub(1), None),
            Some(c) => match c.as_str().parse::<u64>() {
                Ok(n) if n <= head || (n == 0) => (n, None),
                // A cursor this log never handed out (another server, or a memory host that
                // restarted): the events after it cannot be placed.
                _ => (first.saturating_sub(1), Some(c.clone())),
            },
        };
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = ConnState::Thread {
                thread: thread.to_owned(),
                pos,
                force_gap,
            };
        }
        let hello = HostFrame::Hello(Hello {
            v: Some(self.cfg.version),
            thread_id: Some(thread.to_owned()),
            ..Hello::default()
        });
        self.queue(id, &hello);
        self.watch(thread, id);
    }

    /// A frame from a socket or the stdio worker's stdin, in the order it came.
    pub fn handle_frame(&mut self, now: Instant, id: ConnId, text: &str) {
        self.clock(now);
        let Some(c) = self.conns.get(&id) else { return };
        if matches!(c.state, ConnState::Closed) || c.close_after.is_some() {
            return;
        }
        let transport = c.transport;
        let upgrade_id = c.request_id.clone();
        let awaiting = matches!(c.state, ConnState::AwaitSubscribe);
        let frame = match ClientFrame::from_json(text) {
            Ok(f) => f,
            Err(e) => {
                let rid = e
                    .request_id
                    .clone()
                    .unwrap_or_else(|| self.server_request_id(id));
                self.error(id, ErrorCode::InvalidFrame, &e.message, &rid);
                return;
            }
        };
        match frame {
            ClientFrame::Subscribe(s) => {
                if !awaiting {
                    // "…or is a second `harness.subscribe`." — invalid_frame, no close.
                    let rid = self.server_request_id(id);
                    self.error(id, ErrorCode::InvalidFrame, "already subscribed", &rid);
                    return;
                }
                if let Some(e) = self.thread_id_error(&s.thread_id) {
                    // No thread to read ("threadId is missing"), or an id longer than the
                    // host takes: a bad frame, no close.
                    let rid = self.server_request_id(id);
                    self.error(id, ErrorCode::InvalidFrame, &e, &rid);
                    return;
                }
                let user = self.conns.get(&id).and_then(|c| c.user.clone());
                if let Some(t) = self.threads.get(&s.thread_id) {
                    if !may_read(&self.cfg.access, t, user.as_deref()) {
                        // "`4403` | The user cannot read the thread, or lost access."
                        self.error(
                            id,
                            ErrorCode::Forbidden,
                            "You cannot read this thread.",
                            &upgrade_id,
                        );
                        self.close_conn(id, close::FORBIDDEN, "forbidden");
                        return;
                    }
                }
                self.subscribe(now, id, &s.thread_id, s.from, s.v, &upgrade_id);
            }
            other if awaiting => {
                // "…comes before `harness.subscribe`…" — invalid_frame, no close. "it is the
                // `requestId` of the frame that failed" when the frame has one.
                let own = match &other {
                    ClientFrame::Input(f) => f.request_id.clone(),
                    ClientFrame::Unknown(u) => u.fields.get("requestId").and_then(Json::as_string),
                    _ => None,
                };
                let rid = own.unwrap_or_else(|| self.server_request_id(id));
                self.error(
                    id,
                    ErrorCode::InvalidFrame,
                    "the first frame must be harness.subscribe",
                    &rid,
                );
            }
            ClientFrame::Input(f) => {
                let rid = f.request_id.clone().unwrap_or_else(|| {
                    if transport == Transport::WebSocket {
                        upgrade_id.clone()
                    } else {
                        self.server_request_id(id)
                    }
                });
                let (thread, user) = match self.conns.get(&id) {
                    Some(Conn {
                        state: ConnState::Thread { thread, .. },
                        user,
                        ..
                    }) => (thread.clone(), user.clone()),
                    _ => return,
                };
                let tp = if f.input.is_message() {
                    crate::http::traceparent(f.traceparent.as_deref())
                } else {
                    None
                };
                match self.apply_input(now, &thread, user.as_deref(), f.input, tp) {
                    Ok(r) => {
                        let frame = HostFrame::Receipt(ReceiptFrame {
                            request_id: rid,
                            status: r.status,
                            input_id: Some(r.input_id),
                            operation_id: r.operation_id,
                            reason: r.reason,
                            ..ReceiptFrame::default()
                        });
                        self.queue(id, &frame);
                    }
                    Err(Refusal::Forbidden) => {
                        // "On the socket, also when the host refuses one input." — no close.
                        self.error(id, ErrorCode::Forbidden, "forbidden", &rid);
                    }
                    Err(Refusal::Internal(m)) => self.error(id, ErrorCode::Internal, &m, &rid),
                }
            }
            ClientFrame::Snapshot(_) => {
                // The snapshot says the state after the event at its cursor: it goes out
                // when the connection has sent every event up to that cursor (not ahead of
                // them with the receipts), so that the events after it on the stream are
                // exactly the events after its cursor.
                let max = self.cfg.max_queued_frames.max(1);
                if let Some(c) = self.conns.get_mut(&id) {
                    if matches!(c.state, ConnState::Thread { .. }) {
                        if c.snapshots_wanted.saturating_add(c.out.len()) >= max {
                            // A client that asks and never reads: a slow consumer.
                            c.slow_consumer();
                        } else {
                            c.snapshots_wanted += 1;
                        }
                        self.wake(id);
                    }
                }
            }
            ClientFrame::Unknown(u) => {
                // "…has an unknown `type`…" — invalid_frame, no close.
                let rid = u
                    .fields
                    .get("requestId")
                    .and_then(Json::as_string)
                    .unwrap_or_else(|| self.server_request_id(id));
                self.error(
                    id,
                    ErrorCode::InvalidFrame,
                    &format!("unknown frame type {:?}", u.tag),
                    &rid,
                );
            }
        }
    }

    fn server_request_id(&mut self, id: ConnId) -> String {
        match self.conns.get_mut(&id) {
            Some(c) if c.transport == Transport::WebSocket => c.request_id.clone(),
            Some(c) => {
                c.next_request += 1;
                format!("{}-{}", c.request_id, c.next_request)
            }
            None => String::new(),
        }
    }

    /// The connection went away (the socket closed, the HTTP body was dropped).
    pub fn disconnect(&mut self, id: ConnId) {
        self.unwatch(id);
        self.conns.remove(&id);
        self.woken.remove(&id);
    }

    /// The WebSocket close code of a connection the host closed (after
    /// [`HostEvent::Close`]), until [`disconnect`](Self::disconnect).
    pub fn close_code(&self, id: ConnId) -> Option<u16> {
        self.conns.get(&id).and_then(|c| c.closed_code)
    }

    /// What the host holds right now.
    pub fn stats(&self) -> HostStats {
        HostStats {
            threads: self.threads.len(),
            connections: self.conns.len(),
            watched_threads: self.watchers.len(),
            waiting_inputs: self.threads.values().map(|t| t.waiting.len()).sum(),
            queued_frames: self.conns.values().map(|c| c.out.len()).sum(),
            queued_bytes: self.conns.values().map(|c| c.out_bytes).sum(),
        }
    }

    /// Reports bytes that left for the client (written to the socket, or taken by the HTTP
    /// body). This is the back-pressure signal: unreported bytes count against
    /// `sseQueueBytes` / `socketBufferBytes`.
    pub fn sent(&mut self, now: Instant, id: ConnId, n: usize) {
        self.clock(now);
        if let Some(c) = self.conns.get_mut(&id) {
            c.in_flight = c.in_flight.saturating_sub(n);
            if c.in_flight == 0 {
                c.stalled_since = None;
            } else if n > 0 {
                // Progress: the client reads, slowly or not.
                c.stalled_since = Some(now);
            }
            if c.blocked && c.in_flight < limit(&self.cfg.stream, c.transport) {
                c.blocked = false;
                c.woken(Some(now));
                self.woken.insert(id);
            }
        }
    }

    /// Bytes handed out to a connection and not yet reported [`sent`](Self::sent).
    pub fn in_flight(&self, id: ConnId) -> usize {
        self.conns.get(&id).map(|c| c.in_flight).unwrap_or(0)
    }

    /// The next bytes to send on a connection: a whole SSE event, WebSocket text frame or
    /// NDJSON line. `None`: nothing now (wait for a [`HostEvent::Wake`]).
    #[must_use = "the bytes are the connection's: dropped, the client never gets them"]
    pub fn poll_transmit(&mut self, now: Instant, id: ConnId) -> Option<Bytes> {
        self.clock(now);
        let next = self.transmit(now, id);
        if next.is_none() && self.conns.get(&id).is_some_and(|c| c.closed_code.is_some()) {
            // It sends nothing more: out of the fan-out.
            self.unwatch(id);
        }
        next
    }

    fn transmit(&mut self, now: Instant, id: ConnId) -> Option<Bytes> {
        let c = self.conns.get_mut(&id)?;
        // The application asks for bytes: the transport takes them.
        c.unpolled_since = None;
        let lim = limit(&self.cfg.stream, c.transport);
        // "Above this bufferedAmount, the server stops sending." (A closing connection
        // still gets its last frames: the error that says why.)
        if c.in_flight >= lim && c.close_after.is_none() {
            c.blocked = true;
            return None;
        }
        if let Some(b) = c.pop_out() {
            c.hand_out(&b, now);
            return Some(b);
        }
        if let Some((code, reason)) = c.close_after.take() {
            c.state = ConnState::Closed;
            c.closed_code = Some(code);
            self.events.push_back(HostEvent::Close {
                conn: id,
                code,
                reason,
            });
            return None;
        }
        let transport = c.transport;
        let next = match &mut c.state {
            ConnState::Thread {
                thread,
                pos,
                force_gap,
            } => {
                let thread = thread.as_str();
                if let Some(rec) = gap_if_behind(&self.log, thread, pos, force_gap) {
                    Some(record_bytes(transport, &rec))
                } else {
                    match self.log.get(thread, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            Some(record_bytes(transport, &rec))
                        }
                        Ok(None) if c.snapshots_wanted > 0 => {
                            // Caught up with the log: the snapshot is at this cursor.
                            c.snapshots_wanted -= 1;
                            let head = self.log.head_seq(thread);
                            let snap = snapshot_of(self.threads.get(thread), head, thread);
                            let frame = HostFrame::Snapshot(SnapshotFrame {
                                snapshot: Json::new(&snap).unwrap_or_default(),
                                ..SnapshotFrame::default()
                            });
                            Some(render(transport, &frame))
                        }
                        Ok(None) => None,
                        Err(LogError::Corrupt(_)) => {
                            // A record that no longer reads is an event the log no longer
                            // has, for good: reading it again never succeeds, so closing
                            // would send the reader back to it for ever. "the stream sends
                            // one `CUSTOM` event with the name `harness.gap`, and continues
                            // from the first event that it has": the gap takes its cursor.
                            let from = Cursor::new(pos.to_string());
                            *pos += 1;
                            let rec = gap_record(thread, from, *pos, self.log.gap_reason());
                            Some(record_bytes(transport, &rec))
                        }
                        Err(e) => {
                            // "`internal` … The server failed to read the events" — closes.
                            let f = HostFrame::error(
                                ErrorCode::Internal,
                                e.to_string(),
                                c.request_id.clone(),
                            );
                            c.push_out(render(transport, &f));
                            c.close_after = Some((close::FEED_ENDED, "internal".into()));
                            c.woken(Some(now));
                            self.woken.insert(id);
                            None
                        }
                    }
                }
            }
            ConnState::HostEvents { pos, force_gap } => {
                // A reader behind what the host still keeps, or with a cursor it never
                // handed out: the same gap as on a thread stream.
                if let Some(rec) = gap_if_behind(&self.host_log, HOST_EVENTS, pos, force_gap) {
                    Some(record_bytes(transport, &rec))
                } else {
                    match self.host_log.get(HOST_EVENTS, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            Some(record_bytes(transport, &rec))
                        }
                        _ => None,
                    }
                }
            }
            ConnState::Run {
                thread,
                operation_id,
                pos,
            } => {
                let first = self.log.first_seq(thread);
                let mut found = None;
                // Plain AG-UI has no gap event: when the log no longer has events of the
                // run that this reader did not get, or fails to read, the run's stream ends
                // with RUN_ERROR rather than wait for events that will never come.
                let mut lost =
                    (*pos + 1 < first).then(|| self.log.gap_reason().as_str().to_owned());
                while lost.is_none() {
                    match self.log.get(thread, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            if &*rec.operation_id == operation_id.as_str() {
                                found = Some(rec);
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => lost = Some("internal".to_owned()),
                    }
                }
                if let Some(code) = lost {
                    let ev = Event::RunError(RunError {
                        message: "The host no longer has the events of this run.".into(),
                        code: Some(code),
                        ..RunError::default()
                    });
                    c.close_after = Some((close::FEED_ENDED, "events lost".into()));
                    c.woken(Some(now));
                    self.woken.insert(id);
                    Some(plain_sse(ev.to_json().as_bytes()))
                } else if let Some(rec) = found {
                    let ev = rec.event_json();
                    // The run ends with its RUN_FINISHED or RUN_ERROR: then the stream does.
                    let terminal = ev.starts_with(b"{\"type\":\"RUN_FINISHED\"")
                        || ev.starts_with(b"{\"type\":\"RUN_ERROR\"");
                    if terminal {
                        c.close_after = Some((1000, "run finished".into()));
                        c.woken(Some(now));
                        self.woken.insert(id);
                    }
                    Some(plain_sse(&ev))
                } else {
                    None
                }
            }
            ConnState::AwaitSubscribe | ConnState::Closed => None,
        };
        if let Some(b) = &next {
            c.hand_out(b, now);
        }
        next
    }

    /// Heartbeats and slow consumers. Call at [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock(now);
        let cfg = self.cfg.stream;
        let mut pings = Vec::new();
        let mut slow = Vec::new();
        for (id, c) in &self.conns {
            if matches!(c.state, ConnState::Closed | ConnState::AwaitSubscribe)
                || c.close_after.is_some()
            {
                continue;
            }
            // "If the client does not read for this long": bytes handed out and not taken
            // (with no progress), or woken and not asked for bytes at all. "The stdio
            // worker … does not use these values."
            let stuck = [c.stalled_since, c.unpolled_since];
            if c.transport != Transport::Stdio
                && stuck
                    .into_iter()
                    .flatten()
                    .any(|since| now.saturating_duration_since(since) >= cfg.slow_consumer)
            {
                slow.push(*id);
                continue;
            }
            // "The stdio worker has no heartbeat"
            if c.transport != Transport::Stdio
                && now.saturating_duration_since(c.last_write) >= cfg.heartbeat
            {
                pings.push(*id);
            }
        }
        for id in pings {
            self.queue(id, &HostFrame::Ping(frame::Ping::default()));
            if let Some(c) = self.conns.get_mut(&id) {
                c.last_write = now;
            }
        }
        for id in slow {
            // "If the client does not read for this long, the server sends `slow_consumer` and closes."
            let rid = self
                .conns
                .get(&id)
                .map(|c| c.request_id.clone())
                .unwrap_or_default();
            self.error(
                id,
                ErrorCode::SlowConsumer,
                "The client read too slowly.",
                &rid,
            );
            if let Some(c) = self.conns.get_mut(&id) {
                c.stalled_since = None;
                c.unpolled_since = None;
            }
            self.close_conn(id, close::SLOW_CONSUMER, "slow_consumer");
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let cfg = self.cfg.stream;
        self.conns
            .values()
            .filter(|c| {
                !matches!(c.state, ConnState::Closed | ConnState::AwaitSubscribe)
                    && c.close_after.is_none()
            })
            .filter_map(|c| {
                let socket = c.transport != Transport::Stdio;
                let ping = socket
                    .then(|| c.last_write.checked_add(cfg.heartbeat))
                    .flatten();
                let slow = [c.stalled_since, c.unpolled_since]
                    .into_iter()
                    .flatten()
                    .filter(|_| socket)
                    .filter_map(|s| s.checked_add(cfg.slow_consumer))
                    .min();
                [ping, slow].into_iter().flatten().min()
            })
            .min()
    }

    // ---- inputs ------------------------------------------------------------------------

    /// `POST control`: the body `{ threadId, input }`, the user `getUser` returned, the
    /// request id (see [`http::request_id`](crate::http::request_id)) and the `traceparent`
    /// header. The answer: `200` receipt, `400 {error}`, `401`, `403 {error:'forbidden'}`.
    pub fn control(
        &mut self,
        now: Instant,
        user: Option<&str>,
        body: &[u8],
        request_id: &str,
        traceparent: Option<&str>,
    ) -> HttpAnswer {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return HttpAnswer::error(401, "unauthorized", request_id);
        }
        let req: ControlRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            // "`400`: `{ error }`. The input has a bad shape, or `threadId` is missing."
            Err(e) => return HttpAnswer::error(400, &e.to_string(), request_id),
        };
        if let Some(e) = self.thread_id_error(&req.thread_id) {
            return HttpAnswer::error(400, &e, request_id);
        }
        if let Some(e) = req.input.shape_error() {
            return HttpAnswer::error(400, &e, request_id);
        }
        let tp = if req.input.is_message() {
            crate::http::traceparent(traceparent)
        } else {
            None
        };
        match self.apply_input(now, &req.thread_id, user, req.input, tp) {
            Ok(r) => HttpAnswer::ok(serde_json::to_string(&r).unwrap_or_default(), request_id),
            Err(Refusal::Forbidden) => HttpAnswer::error(403, "forbidden", request_id),
            Err(Refusal::Internal(m)) => HttpAnswer::error(500, &m, request_id),
        }
    }

    /// Applies one input to a thread and returns its receipt.
    pub fn input(
        &mut self,
        now: Instant,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<&str>,
    ) -> Result<Receipt, HttpAnswer> {
        self.clock(now);
        if let Some(e) = self.thread_id_error(thread_id) {
            return Err(HttpAnswer::error(400, &e, ""));
        }
        if let Some(e) = input.shape_error() {
            return Err(HttpAnswer::error(400, &e, ""));
        }
        let tp = if input.is_message() {
            crate::http::traceparent(traceparent)
        } else {
            None
        };
        self.apply_input(now, thread_id, user, input, tp)
            .map_err(|r| match r {
                Refusal::Forbidden => HttpAnswer::error(403, "forbidden", ""),
                Refusal::Internal(m) => HttpAnswer::error(500, &m, ""),
            })
    }

    fn apply_input(
        &mut self,
        now: Instant,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<String>,
    ) -> Result<Receipt, Refusal> {
        if let Some(t) = self.threads.get(thread_id) {
            if !may_read(&self.cfg.access, t, user) {
                return Err(Refusal::Forbidden);
            }
        }
        // Idempotency: "A `prompt`, `command`, `agent`, or `append` input with the same
        // `inputId` runs once. The `inputId` of its receipt is the id that you sent."
        if input.is_idempotent() {
            if let Some(id) = input.input_id() {
                if let Some(r) = self.threads.get(thread_id).and_then(|t| t.receipts.get(id)) {
                    return Ok(r.clone());
                }
            }
        }
        let idempotent = input.is_idempotent();
        let input_id = match input.input_id() {
            Some(id) => id.to_owned(),
            None => self.new_input_id(thread_id),
        };
        let creates = matches!(
            input,
            Input::Prompt(_)
                | Input::FollowUp(_)
                | Input::Steer(_)
                | Input::Append(_)
                | Input::Agent(_)
        );
        if !self.threads.contains_key(thread_id) {
            if !creates {
                return Ok(rejected(&input_id, reason_for_missing(&input)));
            }
            // "The first prompt also makes the thread."
            self.make_thread(thread_id, user)
                .map_err(|e| Refusal::Internal(e.to_string()))?;
        }
        let receipt = match input {
            Input::Prompt(_) | Input::FollowUp(_) | Input::Steer(_) | Input::Agent(_) => {
                if let Input::Agent(a) = &input {
                    if !self.cfg.agents.contains(&a.agent) {
                        let r = rejected(&input_id, "unknown_agent");
                        return self.finish_input(now, thread_id, r, idempotent);
                    }
                }
                let full = self.threads.get(thread_id).is_some_and(|t| {
                    (t.running.is_some() || !t.waiting.is_empty())
                        && t.waiting.len() >= self.cfg.max_waiting_inputs.max(1)
                });
                if full {
                    // No room to wait: a transient refusal, so its receipt is not kept for
                    // idempotency (the same inputId may be sent again later).
                    let r = rejected(&input_id, "queue_full");
                    return self.finish_input(now, thread_id, r, false);
                }
                let message = input_message(&input);
                self.log_harness(
                    now,
                    thread_id,
                    "session",
                    HarnessEvent::InputAccepted(catalog::InputAccepted {
                        input_id: input_id.clone(),
                        op: input.op().to_owned(),
                        message: Some(message_json(&message)),
                        ..catalog::InputAccepted::default()
                    }),
                )?;
                let delivery = if matches!(input, Input::Steer(_)) {
                    Delivery::Steer
                } else {
                    Delivery::Queue
                };
                let busy = self
                    .threads
                    .get(thread_id)
                    .map(|t| t.running.is_some() || !t.waiting.is_empty())
                    .unwrap_or(false);
                if busy {
                    if let Some(t) = self.threads.get_mut(thread_id) {
                        t.waiting.push_back(Waiting {
                            input_id: input_id.clone(),
                            delivery: delivery.clone(),
                            input,
                            traceparent,
                        });
                    }
                    // "The owner of the log stored the input, and it waits behind the running turn"
                    self.log_harness(
                        now,
                        thread_id,
                        "session",
                        HarnessEvent::InputQueued(catalog::InputQueued {
                            input_id: input_id.clone(),
                            delivery,
                            ..catalog::InputQueued::default()
                        }),
                    )?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Queued,
                        ..Receipt::default()
                    }
                } else {
                    let op = self.start_turn(now, thread_id, &input_id, &input, traceparent)?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: Some(op),
                        ..Receipt::default()
                    }
                }
            }
            Input::Append(_) => {
                let message = input_message(&input);
                self.log_harness(
                    now,
                    thread_id,
                    "session",
                    HarnessEvent::InputAccepted(catalog::InputAccepted {
                        input_id: input_id.clone(),
                        op: "append".into(),
                        message: Some(message_json(&message)),
                        ..catalog::InputAccepted::default()
                    }),
                )?;
                Receipt {
                    input_id,
                    status: ReceiptStatus::Accepted,
                    ..Receipt::default()
                }
            }
            Input::Cancel(c) => {
                let running = self
                    .threads
                    .get(thread_id)
                    .and_then(|t| t.running.as_ref())
                    .map(|r| r.operation_id.clone());
                if running.as_deref() == Some(c.operation_id.as_str()) {
                    self.events.push_back(HostEvent::CancelTurn {
                        thread_id: thread_id.to_owned(),
                        operation_id: c.operation_id.clone(),
                    });
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: Some(c.operation_id),
                        ..Receipt::default()
                    }
                } else {
                    rejected(&input_id, "not_running")
                }
            }
            Input::CancelInput(_) | Input::SetDelivery(_) => {
                let pos = self
                    .threads
                    .get(thread_id)
                    .and_then(|t| t.waiting.iter().position(|w| w.input_id == input_id));
                match (pos, input) {
                    (Some(i), Input::CancelInput(_)) => {
                        if let Some(t) = self.threads.get_mut(thread_id) {
                            t.waiting.remove(i);
                        }
                        self.log_harness(
                            now,
                            thread_id,
                            "session",
                            HarnessEvent::InputSettled(catalog::InputSettled {
                                input_id: input_id.clone(),
                                outcome: InputOutcome::Aborted,
                                ..catalog::InputSettled::default()
                            }),
                        )?;
                        Receipt {
                            input_id,
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        }
                    }
                    (Some(i), Input::SetDelivery(s)) => {
                        if let Some(w) = self
                            .threads
                            .get_mut(thread_id)
                            .and_then(|t| t.waiting.get_mut(i))
                        {
                            w.delivery = s.delivery.clone();
                        }
                        self.log_harness(
                            now,
                            thread_id,
                            "session",
                            HarnessEvent::InputDelivery(catalog::InputDelivery {
                                input_id: input_id.clone(),
                                delivery: s.delivery,
                                ..catalog::InputDelivery::default()
                            }),
                        )?;
                        Receipt {
                            input_id,
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        }
                    }
                    _ => rejected(&input_id, "not_waiting"),
                }
            }
            Input::Continue(_) => {
                let idle = self
                    .threads
                    .get(thread_id)
                    .map(|t| t.running.is_none() && !t.waiting.is_empty())
                    .unwrap_or(false);
                if idle {
                    let op = self.start_next(now, thread_id)?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: op,
                        ..Receipt::default()
                    }
                } else {
                    rejected(&input_id, "nothing_to_continue")
                }
            }
            Input::Reset(r) => {
                if let Some(t) = self.threads.get_mut(thread_id) {
                    t.history.clear();
                }
                self.log_harness(
                    now,
                    thread_id,
                    "session",
                    HarnessEvent::Reset(catalog::Reset {
                        input_id: input_id.clone(),
                        note: r.note,
                        ..catalog::Reset::default()
                    }),
                )?;
                Receipt {
                    input_id,
                    status: ReceiptStatus::Accepted,
                    ..Receipt::default()
                }
            }
            Input::Answer(_) | Input::Resolve(_) => rejected(&input_id, "not_waiting"),
            _ => rejected(&input_id, "not_exposed"),
        };
        self.finish_input(now, thread_id, receipt, idempotent)
    }

    fn finish_input(
        &mut self,
        now: Instant,
        thread_id: &str,
        r: Receipt,
        idempotent: bool,
    ) -> Result<Receipt, Refusal> {
        if r.status == ReceiptStatus::Rejected {
            self.log_harness(
                now,
                thread_id,
                "session",
                HarnessEvent::InputRejected(catalog::InputRejected {
                    input_id: r.input_id.clone(),
                    reason: r.reason.clone().unwrap_or_default(),
                    ..catalog::InputRejected::default()
                }),
            )?;
        }
        if idempotent {
            let max = self.cfg.max_receipts.max(1);
            if let Some(t) = self.threads.get_mut(thread_id) {
                t.remember_receipt(r.clone(), max);
            }
        }
        Ok(r)
    }

    fn log_harness(
        &mut self,
        now: Instant,
        thread: &str,
        op: &str,
        h: HarnessEvent,
    ) -> Result<(), Refusal> {
        self.emit(now, thread, op, h.to_event())
            .map(|_| ())
            .map_err(|e| Refusal::Internal(e.to_string()))
    }

    /// A new thread, owned by the user whose input made it (kept in the log, so that a
    /// durable host keeps it over a restart). A socket that subscribed to the thread id
    /// before, as another user, "cannot read the thread": 4403.
    fn make_thread(&mut self, thread_id: &str, user: Option<&str>) -> Result<(), LogError> {
        if let Some(u) = user {
            self.log.set_owner(thread_id, u)?;
        }
        let t = Thread {
            owner: user.map(str::to_owned),
            ..Thread::default()
        };
        let refused: Vec<ConnId> = self
            .watchers
            .get(thread_id)
            .map(|w| {
                w.iter()
                    .copied()
                    .filter(|id| {
                        self.conns
                            .get(id)
                            .is_some_and(|c| !may_read(&self.cfg.access, &t, c.user.as_deref()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.threads.insert(thread_id.to_owned(), t);
        for id in refused {
            let rid = self
                .conns
                .get(&id)
                .map(|c| c.request_id.clone())
                .unwrap_or_default();
            self.error(
                id,
                ErrorCode::Forbidden,
                "You cannot read this thread.",
                &rid,
            );
            self.close_conn(id, close::FORBIDDEN, "forbidden");
            // It reads nothing more of this thread.
            self.unwatch(id);
        }
        self.host_status(thread_id, "idle");
        Ok(())
    }

    /// A host-made input id (`in-N`) that no input of the thread has.
    fn new_input_id(&mut self, thread_id: &str) -> String {
        loop {
            self.next_input = self.next_input.wrapping_add(1);
            let id = format!("in-{}", self.next_input);
            if !self
                .threads
                .get(thread_id)
                .is_some_and(|t| t.knows_input(&id))
            {
                return id;
            }
        }
    }

    /// A host-made run id (`op-N`) that no run of the thread has.
    fn new_op_id(&mut self, thread_id: &str) -> String {
        loop {
            self.next_op = self.next_op.wrapping_add(1);
            let id = format!("op-{}", self.next_op);
            if !self
                .threads
                .get(thread_id)
                .is_some_and(|t| t.knows_run(&id))
            {
                return id;
            }
        }
    }

    fn start_turn(
        &mut self,
        now: Instant,
        thread_id: &str,
        input_id: &str,
        input: &Input,
        traceparent: Option<String>,
    ) -> Result<String, Refusal> {
        let op = self.new_op_id(thread_id);
        let (kind, agent) = match input {
            Input::Agent(a) => (OperationKind::Agent, Some(a.agent.clone())),
            _ => (OperationKind::Chat, None),
        };
        self.begin_run(
            now,
            thread_id,
            &op,
            input_id,
            kind,
            agent,
            input_message(input),
            traceparent,
        )?;
        Ok(op)
    }

    #[allow(clippy::too_many_arguments)]
    fn begin_run(
        &mut self,
        now: Instant,
        thread_id: &str,
        op: &str,
        input_id: &str,
        kind: OperationKind,
        agent: Option<String>,
        message: CoreMessage,
        traceparent: Option<String>,
    ) -> Result<(), Refusal> {
        let history = match self.threads.get_mut(thread_id) {
            Some(t) => {
                t.running = Some(Running {
                    operation_id: op.to_owned(),
                    input_id: input_id.to_owned(),
                    kind: kind.clone(),
                    open_message: None,
                });
                t.history.clone()
            }
            None => return Err(Refusal::Internal("no thread".into())),
        };
        self.host_status(thread_id, "running");
        let started = Event::RunStarted(RunStarted {
            thread_id: thread_id.to_owned(),
            run_id: op.to_owned(),
            protocol_version: Some(agui::PROTOCOL_VERSION.to_owned()),
            ..RunStarted::default()
        });
        self.emit(now, thread_id, op, started)
            .map_err(|e| Refusal::Internal(e.to_string()))?;
        self.log_harness(
            now,
            thread_id,
            op,
            HarnessEvent::OperationStarted(catalog::OperationStarted {
                operation_id: op.to_owned(),
                kind: kind.clone(),
                agent: agent.clone(),
                ..catalog::OperationStarted::default()
            }),
        )?;
        self.log_harness(
            now,
            thread_id,
            op,
            HarnessEvent::InputApplied(catalog::InputApplied {
                input_id: input_id.to_owned(),
                operation_id: op.to_owned(),
                ..catalog::InputApplied::default()
            }),
        )?;
        self.events.push_back(HostEvent::StartTurn(TurnRequest {
            thread_id: thread_id.to_owned(),
            operation_id: op.to_owned(),
            input_id: input_id.to_owned(),
            kind,
            agent,
            message,
            history,
            traceparent,
        }));
        Ok(())
    }

    fn start_next(&mut self, now: Instant, thread_id: &str) -> Result<Option<String>, Refusal> {
        let next = self.threads.get_mut(thread_id).and_then(|t| {
            // A steering input goes first.
            let i = t
                .waiting
                .iter()
                .position(|w| w.delivery == Delivery::Steer)
                .unwrap_or(0);
            t.waiting.remove(i)
        });
        match next {
            Some(w) => self
                .start_turn(now, thread_id, &w.input_id, &w.input, w.traceparent)
                .map(Some),
            None => Ok(None),
        }
    }

    /// `POST run` (and `GET run`): the standard AG-UI run for `useChat`. The last user
    /// message of the input runs as a turn of the thread `input.threadId`; the stream carries
    /// the plain AG-UI events of that run ("with no `harness.*` frames around them") and
    /// ends after its `RUN_FINISHED` or `RUN_ERROR`.
    pub fn run_agui(
        &mut self,
        now: Instant,
        input: &agui::RunAgentInput,
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        if let Some(e) = self.thread_id_error(&input.thread_id) {
            return Err(HttpAnswer::error(400, &e, request_id));
        }
        if let Some(t) = self.threads.get(&input.thread_id) {
            if !may_read(&self.cfg.access, t, user) {
                return Err(HttpAnswer::error(403, "forbidden", request_id));
            }
            // A turn runs, or inputs wait for their turn: this run would cut in.
            if t.running.is_some() || !t.waiting.is_empty() {
                return Err(HttpAnswer::error(409, "conflict", request_id));
            }
        } else {
            self.make_thread(&input.thread_id, user)
                .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        }
        let text = input.last_user_text().unwrap_or_default();
        // The client's runId, unless the thread has a run by that id already (or it is the
        // `session` operation of the thread's own events).
        let taken = input.run_id.is_empty()
            || input.run_id == "session"
            || self
                .threads
                .get(&input.thread_id)
                .is_some_and(|t| t.knows_run(&input.run_id));
        let op = if taken {
            self.new_op_id(&input.thread_id)
        } else {
            input.run_id.clone()
        };
        let input_id = self.new_input_id(&input.thread_id);
        let pos = self.log.head_seq(&input.thread_id);
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::Run {
                thread: input.thread_id.clone(),
                operation_id: op.clone(),
                pos,
            },
        );
        self.watch(&input.thread_id, id);
        let tp = crate::http::traceparent(traceparent);
        let accepted = HarnessEvent::InputAccepted(catalog::InputAccepted {
            input_id: input_id.clone(),
            op: "prompt".into(),
            message: Some(Json::string(&text)),
            ..catalog::InputAccepted::default()
        });
        self.log_harness(now, &input.thread_id, "session", accepted)
            .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        self.begin_run(
            now,
            &input.thread_id,
            &op,
            &input_id,
            OperationKind::Chat,
            None,
            CoreMessage::user(text),
            tp,
        )
        .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        Ok(id)
    }

    /// `GET run?threadId=&runId=`: the plain AG-UI events of a run, from its start.
    pub fn open_run(
        &mut self,
        now: Instant,
        thread_id: &str,
        run_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        match self.threads.get(thread_id) {
            None => return Err(HttpAnswer::error(404, "not_found", request_id)),
            Some(t) if !may_read(&self.cfg.access, t, user) => {
                return Err(HttpAnswer::error(403, "forbidden", request_id));
            }
            // A run the thread never had: no stream that waits for it forever.
            Some(t) if !t.knows_run(run_id) => {
                return Err(HttpAnswer::error(404, "not_found", request_id));
            }
            _ => {}
        }
        let pos = self.log.first_seq(thread_id).saturating_sub(1);
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::Run {
                thread: thread_id.to_owned(),
                operation_id: run_id.to_owned(),
                pos,
            },
        );
        self.watch(thread_id, id);
        self.wake(id);
        Ok(id)
    }

    // ---- turn output -------------------------------------------------------------------

    /// Appends an event of a run to the thread's log and wakes its subscribers. Returns the
    /// event's cursor.
    pub fn emit(
        &mut self,
        now: Instant,
        thread_id: &str,
        operation_id: &str,
        event: Event,
    ) -> Result<Cursor, HostError> {
        self.clock(now);
        let rec = self.log.append(thread_id, operation_id, &event)?;
        {
            let t = self.threads.entry(thread_id.to_owned()).or_default();
            t.observe(&event);
            if let Some(r) = t
                .running
                .as_mut()
                .filter(|r| r.operation_id == operation_id)
            {
                match &event {
                    Event::TextMessageStart(s) => r.open_message = Some(s.message_id.clone()),
                    Event::TextMessageEnd(_) => r.open_message = None,
                    _ => {}
                }
            }
        }
        self.wake_thread(thread_id);
        Ok(rec.cursor())
    }

    /// Ends a turn: closes its open text message, sends `RUN_FINISHED` (with
    /// `outcome: {type:'cancelled'}` when cancelled) or `RUN_ERROR`, then
    /// `harness.operation.finished` and `harness.input.settled`, and starts the next waiting
    /// input.
    pub fn finish_turn(
        &mut self,
        now: Instant,
        thread_id: &str,
        operation_id: &str,
        outcome: TurnOutcome,
    ) -> Result<(), HostError> {
        self.clock(now);
        let running = match self.threads.get_mut(thread_id) {
            Some(t)
                if t.running.as_ref().map(|r| r.operation_id.as_str()) == Some(operation_id) =>
            {
                t.running.take()
            }
            _ => None,
        };
        let Some(running) = running else {
            return Ok(());
        };
        // "Before it, a cancelled turn ends its open text message and sends `RUN_FINISHED`
        // with `outcome: { type: 'cancelled' }`."
        if let Some(m) = &running.open_message {
            self.emit(
                now,
                thread_id,
                operation_id,
                Event::TextMessageEnd(TextMessageEnd {
                    message_id: m.clone(),
                    ..TextMessageEnd::default()
                }),
            )?;
        }
        let (status, settled, error) = match &outcome {
            TurnOutcome::Completed => (
                catalog::OperationStatus::Completed,
                InputOutcome::Completed,
                None,
            ),
            TurnOutcome::Cancelled => (
                catalog::OperationStatus::Cancelled,
                InputOutcome::Aborted,
                None,
            ),
            TurnOutcome::Failed { message, code } => (
                catalog::OperationStatus::Failed,
                InputOutcome::Failed,
                Some(catalog::InputError {
                    message: message.clone(),
                    code: code.clone(),
                    ..catalog::InputError::default()
                }),
            ),
        };
        let end = match &outcome {
            TurnOutcome::Failed { message, code } => Event::RunError(RunError {
                message: message.clone(),
                code: code.clone(),
                ..RunError::default()
            }),
            TurnOutcome::Cancelled => Event::RunFinished(RunFinished {
                thread_id: thread_id.to_owned(),
                run_id: operation_id.to_owned(),
                outcome: Some(RunFinishedOutcome::cancelled()),
                ..RunFinished::default()
            }),
            TurnOutcome::Completed => Event::RunFinished(RunFinished {
                thread_id: thread_id.to_owned(),
                run_id: operation_id.to_owned(),
                ..RunFinished::default()
            }),
        };
        self.emit(now, thread_id, operation_id, end)?;
        let fin = HarnessEvent::OperationFinished(catalog::OperationFinished {
            operation_id: operation_id.to_owned(),
            status,
            ..catalog::OperationFinished::default()
        });
        self.emit(now, thread_id, operation_id, fin.to_event())?;
        let settle = HarnessEvent::InputSettled(catalog::InputSettled {
            input_id: running.input_id.clone(),
            operation_id: Some(operation_id.to_owned()),
            outcome: settled,
            error,
            ..catalog::InputSettled::default()
        });
        self.emit(now, thread_id, operation_id, settle.to_event())?;
        let _ = running.kind;
        self.host_status(thread_id, "idle");
        self.start_next(now, thread_id).map_err(|r| match r {
            Refusal::Internal(m) => HostError::Log(LogError::Io(m)),
            Refusal::Forbidden => HostError::Log(LogError::Io("forbidden".into())),
        })?;
        Ok(())
    }

    fn host_status(&mut self, thread_id: &str, status: &str) {
        let ev = Event::Custom(Custom {
            name: "harness.session.status".into(),
            value: Json::from_value(
                &serde_json::json!({ "threadId": thread_id, "status": status }),
            ),
            ..Custom::default()
        });
        if self.host_log.append(HOST_EVENTS, "host", &ev).is_ok() {
            self.wake_thread(HOST_EVENTS);
        }
    }

    // ---- reads -------------------------------------------------------------------------

    /// `GET snapshot?threadId=`: the state of the thread.
    pub fn snapshot(&self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        match self.read_check(thread_id, user, request_id) {
            Err(a) => a,
            Ok(()) => HttpAnswer::ok(
                serde_json::to_string(&snapshot_of(
                    self.threads.get(thread_id),
                    self.log.head_seq(thread_id),
                    thread_id,
                ))
                .unwrap_or_default(),
                request_id,
            ),
        }
    }

    /// `GET transcript?threadId=`: the saved messages of the thread (AG-UI messages).
    pub fn transcript(&self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        match self.read_check(thread_id, user, request_id) {
            Err(a) => a,
            Ok(()) => {
                let msgs = self
                    .threads
                    .get(thread_id)
                    .map(|t| t.transcript.clone())
                    .unwrap_or_default();
                HttpAnswer::ok(
                    serde_json::json!({ "threadId": thread_id, "messages": msgs }).to_string(),
                    request_id,
                )
            }
        }
    }

    /// The transcript of a thread.
    pub fn messages(&self, thread_id: &str) -> Vec<agui::Message> {
        self.threads
            .get(thread_id)
            .map(|t| t.transcript.clone())
            .unwrap_or_default()
    }

    /// The parent of each run of a thread (from the `parentRunId` of its `RUN_STARTED`).
    pub fn run_tree(&self, thread_id: &str) -> HashMap<String, Option<String>> {
        self.threads
            .get(thread_id)
            .map(|t| t.parents.clone())
            .unwrap_or_default()
    }

    fn read_check(
        &self,
        thread_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<(), HttpAnswer> {
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        match self.threads.get(thread_id) {
            None => Err(HttpAnswer::error(404, "not_found", request_id)),
            Some(t) if !may_read(&self.cfg.access, t, user) => {
                Err(HttpAnswer::error(403, "forbidden", request_id))
            }
            Some(_) => Ok(()),
        }
    }

    /// `GET capabilities`: the AG-UI capabilities; `custom.tanstack.protocol` is the
    /// protocol version of the server.
    pub fn capabilities(&self, name: &str, request_id: &str) -> HttpAnswer {
        let body = serde_json::json!({
            "identity": { "name": name, "type": "harness" },
            "transport": { "streaming": true, "websocket": true, "resumable": true },
            "custom": { "tanstack": { "protocol": self.cfg.version, "agents": self.cfg.agents } },
        });
        HttpAnswer::ok(body.to_string(), request_id)
    }
}

enum Refusal {
    Forbidden,
    Internal(String),
}

/// The snapshot of a thread whose log ends at `head`.
fn snapshot_of(t: Option<&Thread>, head: u64, thread_id: &str) -> SessionSnapshot {
    SessionSnapshot {
        thread_id: thread_id.to_owned(),
        status: if t.and_then(|t| t.running.as_ref()).is_some() {
            "running".into()
        } else {
            "idle".into()
        },
        active_operations: t
            .and_then(|t| t.running.as_ref())
            .map(|r| {
                vec![ActiveOperation {
                    id: r.operation_id.clone(),
                    kind: r.kind.as_str().to_owned(),
                    ..ActiveOperation::default()
                }]
            })
            .unwrap_or_default(),
        waiting_inputs: t
            .map(|t| {
                t.waiting
                    .iter()
                    .map(|w| WaitingInput {
                        input_id: w.input_id.clone(),
                        delivery: w.delivery.clone(),
                        message: Some(message_json(&input_message(&w.input))),
                        ..WaitingInput::default()
                    })
                    .collect()
            })
            .unwrap_or_default(),
        cursor: (head > 0).then(|| Cursor::new(head.to_string())),
        ..SessionSnapshot::default()
    }
}

fn may_read(access: &AccessPolicy, t: &Thread, user: Option<&str>) -> bool {
    match access {
        AccessPolicy::Open => true,
        AccessPolicy::MembersOnly => match (&t.owner, user) {
            (Some(o), Some(u)) => o == u,
            (None, _) => true,
            (Some(_), None) => false,
        },
    }
}

fn rejected(input_id: &str, reason: &str) -> Receipt {
    Receipt {
        input_id: input_id.to_owned(),
        status: ReceiptStatus::Rejected,
        reason: Some(reason.to_owned()),
        ..Receipt::default()
    }
}

fn reason_for_missing(input: &Input) -> &'static str {
    match input {
        Input::Cancel(_) => "not_running",
        Input::CancelInput(_) | Input::SetDelivery(_) | Input::Answer(_) | Input::Resolve(_) => {
            "not_waiting"
        }
        Input::Continue(_) => "nothing_to_continue",
        _ => "not_exposed",
    }
}

fn input_message(input: &Input) -> CoreMessage {
    let text = input.message_text().unwrap_or_else(|| match input {
        Input::Agent(a) => a
            .input
            .as_ref()
            .map(|j| match j.as_string() {
                Some(s) => s,
                None => j.get().to_owned(),
            })
            .unwrap_or_default(),
        _ => String::new(),
    });
    CoreMessage::with_text(Role::User, text)
}

fn message_json(m: &CoreMessage) -> Json {
    Json::string(&m.text())
}

fn limit(cfg: &StreamConfig, t: Transport) -> usize {
    match t {
        Transport::Sse => cfg.sse_queue_bytes,
        Transport::WebSocket => cfg.socket_buffer_bytes,
        Transport::Stdio => usize::MAX,
    }
}

fn render(t: Transport, frame: &HostFrame) -> Bytes {
    match t {
        Transport::Sse => {
            let mut out = Vec::new();
            sse_encode(&mut out, frame);
            Bytes::from(out)
        }
        Transport::WebSocket => Bytes::from(frame.to_json()),
        Transport::Stdio => {
            let mut s = frame.to_json().into_bytes();
            s.push(b'\n');
            Bytes::from(s)
        }
    }
}

/// One plain AG-UI SSE event (`POST run` / `GET run`): `data: <event>\n\n`, no `id:`.
fn plain_sse(event_json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(event_json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(event_json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The `harness.gap` record a reader behind the log gets: "`from` is the cursor that you
/// sent. `resumeAt` is the cursor of this event. The stream continues after it."
/// The gap a reader at `pos` of `stream` gets when the first record `log` keeps is past its
/// next one, or when it was marked for one (`force_gap`, e.g. a cursor never handed out):
/// "the stream sends one `CUSTOM` event with the name `harness.gap`, and continues from the
/// first event that it has". Moves `pos` to the gap's cursor, just before that event.
fn gap_if_behind<L: EventLog + ?Sized>(
    log: &L,
    stream: &str,
    pos: &mut u64,
    force_gap: &mut Option<Cursor>,
) -> Option<LogRecord> {
    let first = log.first_seq(stream);
    let from = force_gap
        .take()
        .or_else(|| (*pos + 1 < first).then(|| Cursor::new(pos.to_string())))?;
    let resume = first.saturating_sub(1);
    *pos = resume;
    Some(gap_record(stream, from, resume, log.gap_reason()))
}

fn gap_record(thread: &str, from: Cursor, resume: u64, reason: catalog::GapReason) -> LogRecord {
    let gap = HarnessEvent::Gap(catalog::Gap {
        from,
        resume_at: Cursor::new(resume.to_string()),
        reason,
        ..catalog::Gap::default()
    });
    LogRecord::render(thread, resume, "session", &gap.to_event())
}

fn record_bytes(t: Transport, rec: &LogRecord) -> Bytes {
    match t {
        Transport::Sse => rec.sse(),
        Transport::WebSocket => rec.json(),
        Transport::Stdio => rec.ndjson(),
    }
}

impl Thread {
    /// Keeps the receipt of an idempotent input; past `max`, the oldest is forgotten.
    fn remember_receipt(&mut self, r: Receipt, max: usize) {
        if !self.receipts.contains_key(&r.input_id) {
            self.receipt_order.push_back(r.input_id.clone());
        }
        self.receipts.insert(r.input_id.clone(), r);
        while self.receipt_order.len() > max {
            if let Some(old) = self.receipt_order.pop_front() {
                self.receipts.remove(&old);
            }
        }
    }

    /// Forgets the receipt of an input that never ran.
    fn forget_receipt(&mut self, input_id: &str) {
        if self.receipts.remove(input_id).is_some() {
            self.receipt_order.retain(|i| i != input_id);
        }
    }

    /// Whether an input id names an input of this thread the host still knows.
    fn knows_input(&self, id: &str) -> bool {
        self.receipts.contains_key(id)
            || self.pending.contains_key(id)
            || self.waiting.iter().any(|w| w.input_id == id)
            || self.running.as_ref().is_some_and(|r| r.input_id == id)
    }

    /// Whether a run id is taken in this thread.
    fn knows_run(&self, id: &str) -> bool {
        self.parents.contains_key(id) || self.running.as_ref().is_some_and(|r| r.operation_id == id)
    }

    /// Keeps the transcript and the run tree up to date with an event of the thread.
    fn observe(&mut self, ev: &Event) {
        match ev {
            Event::RunStarted(r) => {
                self.parents
                    .insert(r.run_id.clone(), r.parent_run_id.clone());
            }
            Event::TextMessageStart(s) => {
                self.streaming.insert(s.message_id.clone(), String::new());
            }
            Event::TextMessageContent(c) => {
                if let Some(t) = self.streaming.get_mut(&c.message_id) {
                    t.push_str(&c.delta);
                }
            }
            Event::TextMessageEnd(e) => {
                if let Some(text) = self.streaming.remove(&e.message_id) {
                    self.history.push(CoreMessage::assistant(text.clone()));
                    self.transcript
                        .push(agui::Message::assistant(e.message_id.clone(), text));
                }
            }
            Event::ToolCallStart(s) => {
                // As AG-UI's client applies it: the call goes on the assistant message
                // `parentMessageId` when there is one, else on a new assistant message with
                // the id `parentMessageId` (or `toolCallId`, with no parent or when that id
                // is a message of another role).
                if self.open_calls.contains_key(&s.tool_call_id) {
                    return;
                }
                let call = agui::ToolCall {
                    id: s.tool_call_id.clone(),
                    function: agui::FunctionCall {
                        name: s.tool_call_name.clone(),
                        arguments: String::new(),
                        ..agui::FunctionCall::default()
                    },
                    ..agui::ToolCall::default()
                };
                let parent = s.parent_message_id.as_deref();
                let found = parent.and_then(|p| self.transcript.iter().rposition(|m| m.id() == p));
                let place = match found.map(|i| (i, &mut self.transcript[i])) {
                    Some((i, agui::Message::Assistant(m))) => {
                        let calls = m.tool_calls.get_or_insert_with(Vec::new);
                        calls.push(call);
                        (i, calls.len() - 1)
                    }
                    other => {
                        let id = match (other, parent) {
                            (None, Some(p)) => p,
                            _ => &s.tool_call_id,
                        };
                        self.transcript
                            .push(agui::Message::Assistant(agui::AssistantMessage {
                                id: id.to_owned(),
                                tool_calls: Some(vec![call]),
                                ..agui::AssistantMessage::default()
                            }));
                        (self.transcript.len() - 1, 0)
                    }
                };
                self.open_calls.insert(s.tool_call_id.clone(), place);
            }
            Event::ToolCallArgs(a) => {
                if let Some(&(i, j)) = self.open_calls.get(&a.tool_call_id) {
                    if let Some(agui::Message::Assistant(m)) = self.transcript.get_mut(i) {
                        if let Some(c) = m.tool_calls.as_mut().and_then(|c| c.get_mut(j)) {
                            c.function.arguments.push_str(&a.delta);
                        }
                    }
                }
            }
            Event::ToolCallEnd(e) => {
                self.open_calls.remove(&e.tool_call_id);
            }
            Event::ToolCallResult(r) => {
                self.transcript.push(agui::Message::Tool(agui::ToolMessage {
                    id: r.message_id.clone(),
                    content: r.content.clone(),
                    tool_call_id: r.tool_call_id.clone(),
                    ..agui::ToolMessage::default()
                }));
            }
            Event::Custom(c) if c.name == "harness.input.accepted" => {
                if let Ok(a) = c.value.parse::<catalog::InputAccepted>() {
                    let text = a.message.and_then(|m| m.as_string()).unwrap_or_default();
                    if a.op == "append" {
                        self.user_message(&a.input_id, text);
                    } else {
                        self.pending.insert(a.input_id, text);
                    }
                }
            }
            Event::Custom(c) if c.name == "harness.input.applied" => {
                if let Ok(a) = c.value.parse::<catalog::InputApplied>() {
                    if let Some(text) = self.pending.remove(&a.input_id) {
                        self.user_message(&a.input_id, text);
                    }
                }
            }
            Event::Custom(c) if c.name == "harness.input.settled" => {
                if let Ok(a) = c.value.parse::<catalog::InputSettled>() {
                    self.pending.remove(&a.input_id);
                }
            }
            _ => {}
        }
    }

    fn user_message(&mut self, input_id: &str, text: String) {
        self.history.push(CoreMessage::user(text.clone()));
        self.transcript.push(agui::Message::User(agui::UserMessage {
            id: format!("{input_id}-msg"),
            content: Content::Text(text),
            ..agui::UserMessage::default()
        }));
    }
}

/// Hashes a [`ConnId`] by its number: ids are sequential, so they spread well as they are.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // Spread the sequential ids over the high bits too (Fibonacci hashing).
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// Connections to wake, in order, each once.
#[derive(Debug, Default)]
struct WakeQueue {
    queue: VecDeque<ConnId>,
    set: HashSet<ConnId, IdHash>,
}

impl WakeQueue {
    fn insert(&mut self, id: ConnId) {
        if self.set.insert(id) {
            self.queue.push_back(id);
        }
    }

    fn remove(&mut self, id: &ConnId) {
        if self.set.remove(id) {
            self.queue.retain(|x| x != id);
        }
    }

    fn pop(&mut self) -> Option<ConnId> {
        let id = self.queue.pop_front()?;
        self.set.remove(&id);
        Some(id)
    }
}

/// What closes a run the host was running when it stopped: `RUN_ERROR` with code
/// `interrupted`, `harness.operation.finished` with status `interrupted`, and
/// `harness.input.settled` with outcome `interrupted`.
fn interrupted(op: &str, input_id: Option<String>) -> Vec<Event> {
    let mut v = vec![
        Event::RunError(RunError {
            message: "The host stopped during this run.".into(),
            code: Some("interrupted".into()),
            ..RunError::default()
        }),
        HarnessEvent::OperationFinished(catalog::OperationFinished {
            operation_id: op.to_owned(),
            status: catalog::OperationStatus::Interrupted,
            ..catalog::OperationFinished::default()
        })
        .to_event(),
    ];
    if let Some(input_id) = input_id {
        v.push(
            HarnessEvent::InputSettled(catalog::InputSettled {
                input_id,
                operation_id: Some(op.to_owned()),
                outcome: InputOutcome::Interrupted,
                ..catalog::InputSettled::default()
            })
            .to_event(),
        );
    }
    v
}
