//! The host side, sans-IO: threads and their event logs, the subscribe handshake, inputs
//! and receipts, `inputId` idempotency, resume from a cursor, gaps, heartbeats and
//! back-pressure, with time passed in.
//!
//! The run loop (after quinn-proto and str0m): feed what happens in (`open_sse`,
//! `connect`, `handle_frame`, `control`, `sent`, `emit`, `finish_turn`, `handle_timeout`),
//! then drain [`Host::poll_event`] (which connections to wake, which ones to close, which
//! turns to start or cancel) and, for each woken connection, [`Host::poll_transmit`] until it
//! returns `None`. Call [`Host::handle_timeout`] at [`Host::poll_timeout`]. The contract
//! every machine follows is [`harness_core::run_loop`].
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

mod agui_run;
mod connection;
mod input;
mod read;
mod subscribe;
mod thread;
mod transmit;
mod turn;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use harness_core::message::Message as CoreMessage;

use crate::catalog::OperationKind;
use crate::frame;
use crate::http::StreamConfig;
use crate::log::{EventLog, LogError, MemoryLog};

use connection::{Conn, IdHash, WakeQueue};
use thread::Thread;

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
        let max_receipts = cfg.max_receipts.max(1);
        for id in log.threads() {
            let t = thread::restore(&mut log, &id, max_receipts, &mut next_op, &mut next_input);
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

    fn clock(&mut self, now: Instant) {
        if self.last_now.is_none_or(|t| now > t) {
            self.last_now = Some(now);
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
}

/// Why an input got no receipt at all: the user may not use the thread, or the log failed.
enum Refusal {
    Forbidden,
    Internal(String),
}

/// Whether a user may read (and write) a thread under the access policy.
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
