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
//! host.emit(now, "thread-1", &turn.operation_id, harness_tanstack::agui::AguiEvent::text_content("m-1", "Hi")).unwrap();
//!
//! // GET events: hello, then every event of the thread from the first one.
//! let conn = host.open_sse(now, Some("thread-1"), Some("2"), None, None, None, "req-2").unwrap();
//! let first = host.poll_transmit(now, conn).unwrap();
//! assert_eq!(&first[..], b"data: {\"type\":\"harness.hello\",\"v\":2,\"threadId\":\"thread-1\"}\n\n");
//! ```

mod agui_run;
mod connection;
mod forward;
mod input;
mod lease;
mod read;
mod registry;
mod resume;
mod subscribe;
mod thread;
mod transmit;
mod turn;
mod wait;

pub use agui_run::RunRouted;
pub use lease::Routed;
pub use wait::{Interrupted, Resolution, Resume, Wait, WaitFor};

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use harness_core::message::Message;

use crate::catalog::OperationKind;
use crate::frame;
use crate::http::StreamConfig;
use crate::log::{EventLog, LogError, MemoryLog};
use crate::lru::Lru;

use connection::{Conn, IdHash, WakeQueue};
use thread::Thread;

/// Who may do what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AccessPolicy {
    /// No login (the stdio worker: "Every input runs with no user").
    #[default]
    Open,
    /// A user is required (`getUser` returning no user is `401` / close 4401), and a thread
    /// belongs to the user who made it (`membersOnly()`). Each user's thread ids are their
    /// own: the same id from another user names that user's own thread (see
    /// [`Host::thread_key`]), so no user can take another's id first. A thread whose owner
    /// in the log is another user gets `403` / 4403.
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
    /// Status events `GET host-events` keeps for its readers, per stream (one per user under
    /// [`MembersOnly`](AccessPolicy::MembersOnly); 16 MiB each, 64 MiB all together). A
    /// reader behind them gets `harness.gap` with reason `evicted`. Default 10,000.
    pub max_host_events: usize,
    /// The longest thread id, in bytes, that a client may send. The spec sets no length;
    /// every record of a thread repeats its id, so the host bounds it. A longer one is
    /// refused like a missing one: `400 {error}` on `POST control`, `GET events` and
    /// `POST run` (and by [`Host::input`]), `invalid_frame` (no close) for a
    /// `harness.subscribe`. Also the most bytes of a `POST run`'s `runId`, which names every
    /// event of its run (`400 {error}` past it). Default 1,024.
    pub max_thread_id_bytes: usize,
    /// Threads the host keeps, all users together (the threads of its log included). An
    /// input that would make one more gets a `rejected` receipt with reason
    /// `thread_limit` (`POST run`: `429`). Default 10,000.
    pub max_threads: usize,
    /// Threads one user may make (the user [`AccessPolicy`] names; inputs with no user count
    /// against [`max_threads`](Self::max_threads) only). Past it: a `rejected` receipt with
    /// reason `thread_limit` (`POST run`: `429`). Default 1,000.
    pub max_threads_per_user: usize,
    /// The longest message one input may carry, in bytes of its text (the JSON of its
    /// `message`). A longer one gets a `rejected` receipt with reason `too_large` (`POST
    /// run`: `413`). Default 1 MiB.
    pub max_input_bytes: usize,
    /// Bytes of the messages that may wait behind the running turn of one thread; past this
    /// an input gets a `rejected` receipt with reason `queue_full`, as past
    /// [`max_waiting_inputs`](Self::max_waiting_inputs). Default 4 MiB.
    pub max_waiting_bytes: usize,
    /// Bytes of the conversation a thread keeps to give the next turn
    /// ([`TurnRequest::history`]): past it the oldest messages are dropped (the newest one
    /// always stays). Default 1 MiB.
    pub max_history_bytes: usize,
    /// Bytes of the saved messages a thread keeps for `GET transcript`: past it the oldest
    /// messages are dropped (the newest one always stays). Default 4 MiB.
    pub max_transcript_bytes: usize,
    /// Bytes of the receipts (and of the run tree) a thread keeps, with
    /// [`max_receipts`](Self::max_receipts): past either the oldest are forgotten.
    /// Default 1 MiB.
    pub max_receipt_bytes: usize,
    /// Idle threads (no turn running, no input waiting) whose state stays in memory; past
    /// this the least recently used one is dropped from memory and read back from the log
    /// when it is next used. Default 1,024.
    pub max_resident_threads: usize,
    /// Bytes the states of idle threads in memory may hold, all together (an estimate:
    /// transcript, history, receipts); past this the least recently used one is dropped
    /// from memory as past [`max_resident_threads`](Self::max_resident_threads).
    /// Default 256 MiB.
    pub max_resident_bytes: usize,
    /// Bytes of the waits record a thread keeps while a turn waits for a person (its open
    /// waits, and what the driver needs to drive the turn again: its inputs, its history
    /// and what it did so far). It is stored with the thread in the log
    /// ([`EventLog::set_waits`]), never sent to a client; a turn whose record would be
    /// larger cannot wait, and fails with `RUN_ERROR` code `too_large`. Default 4 MiB.
    pub max_parked_bytes: usize,
    /// How long an input forwarded to the thread's owner (a log that several hosts share:
    /// `PgLog`) waits for the owner's answer, on `POST control`
    /// ([`Service::control_forwarding`](crate::driver::Service::control_forwarding)), on
    /// `POST run` ([`Service::run_forwarding`](crate::driver::Service::run_forwarding)) and
    /// on a socket (a `harness.input` frame). Past it the input is taken back and run here
    /// when the owner never took it (its lease expired), else it is answered
    /// `owner_timeout`. Default 5 s.
    pub forward_wait: std::time::Duration,
    /// Socket inputs that may wait for their owner's answer at once; past this an input for
    /// a thread another host owns gets the `rejected` receipt with reason `not_owner`
    /// (transient: the client may send it again). Default 1,000.
    pub max_forwarded: usize,
    /// Runs that `joinRun` finds by their id alone (`GET run?runId=`, no thread): the
    /// host indexes the newest this many, all users together (each entry holds the run id
    /// and its thread's key, at most 256 bytes of id). An older run is still found with
    /// its `threadId`. Default 16,384.
    pub max_indexed_runs: usize,
    /// Of [`max_indexed_runs`](Self::max_indexed_runs), the most one user's runs (the
    /// owner of the run's thread) may hold: a user who starts many runs pushes out their
    /// own oldest, never another user's. Default 1,024.
    pub max_indexed_runs_per_user: usize,
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
            max_threads: 10_000,
            max_threads_per_user: 1_000,
            max_input_bytes: 1 << 20,
            max_waiting_bytes: 4 << 20,
            max_history_bytes: 1 << 20,
            max_transcript_bytes: 4 << 20,
            max_receipt_bytes: 1 << 20,
            max_resident_threads: 1_024,
            max_resident_bytes: 256 << 20,
            max_parked_bytes: 4 << 20,
            forward_wait: std::time::Duration::from_secs(5),
            max_forwarded: 1_000,
            max_indexed_runs: 16_384,
            max_indexed_runs_per_user: 1_024,
        }
    }
}

impl HostConfig {
    /// The defaults with [`AccessPolicy::MembersOnly`]: a user is required, and each
    /// thread is its user's.
    pub fn members_only() -> Self {
        HostConfig {
            access: AccessPolicy::MembersOnly,
            ..HostConfig::default()
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
    /// Threads with a session (in memory or in the log only).
    pub threads: usize,
    /// Threads whose state is in memory.
    pub resident_threads: usize,
    /// The bytes those states hold (an estimate: transcript, history, receipts, waiting
    /// inputs).
    pub resident_bytes: usize,
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
    /// The thread: its key (the id its client sent, or under
    /// [`MembersOnly`](AccessPolicy::MembersOnly) a key of that user's own, see
    /// [`Host::thread_key`]), which [`Host::emit`] and [`Host::finish_turn`] take back.
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
    pub message: Message,
    /// The conversation before it.
    pub history: Vec<Message>,
    /// The `traceparent` of the input, when valid.
    pub traceparent: Option<String>,
    /// When set, this run drives again a turn that waited for a person (its
    /// `RUN_STARTED` has `parentRunId` [`Resume::parent_run_id`]), with the decisions of the
    /// `resolve` or `answer` input ([`input_id`](Self::input_id)); `message` and `history`
    /// are then empty: the turn's own are in [`Resume::state`], as the driver kept them.
    pub resume: Option<Box<Resume>>,
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
        /// The thread (its key, as in [`TurnRequest::thread_id`]).
        thread_id: String,
        /// The run.
        operation_id: String,
    },
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
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
    /// It waits for a person (an approval, an answer, a hand-off to a person): the run ends
    /// with `RUN_FINISHED` `outcome: {type: "interrupt", interrupts}` after a
    /// `harness.wait.opened` for each wait, and a parked turn is driven again as a new run
    /// once its waits are decided (see [`Interrupted`]).
    Interrupted(Interrupted),
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

/// The thread id under which `GET host-events` keeps its own log (the stream every reader
/// reads under [`AccessPolicy::Open`]; under `MembersOnly` each user has one of their own),
/// and the `threadId` its records name.
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
    /// The threads in memory, by when they were last used (idle ones leave in that order).
    resident: Lru,
    /// The threads the host has (in memory or in the log only), and each user's.
    thread_count: usize,
    user_threads: HashMap<String, usize>,
    /// Bytes and events out, not yet handed to the metrics recorder.
    outflow: crate::telemetry::Outflow,
    /// Runs by id, for `joinRun` (which names no thread).
    runs: resume::RunIndex,
    /// The input [`control_routed`](Host::control_routed) (or the run
    /// [`run_routed`](Host::run_routed)) may forward to the thread's owner, and the id it was
    /// forwarded under.
    forwarding: Option<crate::log::Forward>,
    forwarded: Option<(u64, crate::log::Forward)>,
    /// Socket inputs forwarded to their thread's owner, waiting for its answer.
    socket_forwards: forward::Pendings,
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
    /// A host over a log. It reads no thread of the log yet: a thread the log already has
    /// (a durable log after a restart) is rebuilt from its records when it is first used
    /// (an input, a stream, a read): its transcript and history, the run tree, the
    /// receipts of idempotent inputs (so a retry after the restart runs nothing twice), and
    /// ids that do not collide. What the restart cut off is closed in the log then: a run
    /// that never ended gets `RUN_ERROR` / `harness.operation.finished` /
    /// `harness.input.settled` with `interrupted`, and an input that waited behind a turn
    /// gets `harness.input.settled` with outcome `interrupted`. So the host starts in the
    /// memory of an empty one, however big its log (it counts the log's threads and their
    /// owners, for [`max_threads`](HostConfig::max_threads) and
    /// [`max_threads_per_user`](HostConfig::max_threads_per_user), and indexes the newest
    /// runs, so that `joinRun` finds them by id alone: at most 65,536 records read).
    pub fn new(cfg: HostConfig, mut log: L) -> Self {
        let mut user_threads: HashMap<String, usize> = HashMap::new();
        let keys = log.threads();
        let runs = resume::RunIndex::rebuild(
            &mut log,
            &keys,
            &cfg.access,
            cfg.max_indexed_runs,
            cfg.max_indexed_runs_per_user,
        );
        for key in &keys {
            if let Some(owner) = log.owner(key) {
                *user_threads.entry(owner).or_default() += 1;
            }
        }
        Host {
            outflow: crate::telemetry::Outflow::default(),
            host_log: MemoryLog::new(cfg.max_host_events, 16 << 20).with_max_total_bytes(64 << 20),
            cfg,
            log,
            threads: HashMap::new(),
            conns: HashMap::default(),
            watchers: HashMap::new(),
            events: VecDeque::new(),
            woken: WakeQueue::default(),
            next_conn: 0,
            next_op: 0,
            next_input: 0,
            last_now: None,
            resident: Lru::default(),
            thread_count: keys.len(),
            user_threads,
            runs,
            forwarding: None,
            forwarded: None,
            socket_forwards: forward::Pendings::default(),
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
        self.threads.values().any(Thread::is_busy)
    }

    /// Whether the thread stored under this key has a session (in memory, or in the log
    /// only). The key of a thread is [`thread_key`](Self::thread_key).
    pub fn has_thread(&self, key: &str) -> bool {
        self.threads.contains_key(key) || self.log.contains(key)
    }

    /// Records were appended to the thread stored under `key` by another host on a shared
    /// log (a `PgLog`'s NOTIFY, say): wakes the thread's connections, which read them from the
    /// log as they read this host's own. A thread with no connection here costs nothing.
    /// What this host kept of the thread in memory is stale then: when no turn of it runs
    /// here, it is dropped, and read again from the log when next used (a snapshot, a
    /// transcript).
    pub fn handle_appended(&mut self, now: Instant, key: &str) {
        self.clock(now);
        self.wake_thread(key);
        if self.threads.get(key).is_some_and(|t| !t.is_busy()) {
            self.forget_thread(key);
        }
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
            threads: self.thread_count,
            resident_threads: self.threads.len(),
            resident_bytes: self.threads.values().map(Thread::bytes).sum(),
            connections: self.conns.len(),
            watched_threads: self.watchers.len(),
            waiting_inputs: self.threads.values().map(|t| t.waiting().len()).sum(),
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
        } else if thread_id.contains('\0') {
            // No store keeps it as text (PostgreSQL's `text` has no NUL).
            Some("threadId holds a NUL character".to_owned())
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
