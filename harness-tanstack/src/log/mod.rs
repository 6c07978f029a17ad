//! The event log of each thread, behind one trait: [`MemoryLog`] (bounded, evicts the oldest
//! events: a client behind them gets `harness.gap` with reason `evicted`) and [`FileLog`]
//! (durable, the embedded default: cursors survive a restart, and a truncate yields reason
//! `truncated`).
//!
//! A record is stored already rendered: the `harness.event` frame is serialized once, at
//! append, into one buffer that holds its SSE form (`id: N\ndata: {…}\n\n`); the WebSocket
//! text and the NDJSON line are slices of it. Fan-out to any number of subscribers clones a
//! [`Bytes`] handle.
//!
//! Cursors are the decimal sequence number of the record in its thread (`1`, `2`, …). They
//! are the host's own format: clients never parse them (spec: "A cursor is an opaque
//! string. Store the last one, and do not parse it.").
//!
//! The file log does file I/O (it is the storage), and nothing else: no clock, no thread.
//!
//! **Waits for a person are kept beside the log, not in it.** A turn that waits for an
//! approval, an answer or a person leaves the host a *waits record* for its thread: its open
//! waits and what the driver needs to drive the turn again (its inputs and history, and the
//! tape of what it did so far, see [`harness_core::tape`]). A client must never see it (the
//! tape holds model completions, tool results and answers, a secret one included), and it is
//! replaced as waits settle, so it is not an event: it is one record per thread, kept by
//! [`EventLog::set_waits`] and read back by [`EventLog::waits`] — beside the owner, in a
//! file of the thread's name ending `.harness-waits` in a [`FileLog`] (written whole to a
//! temporary file and renamed over the old one, so a crash leaves the old record or the new
//! one; removed when no wait is open), in memory in a [`MemoryLog`] (within its own byte
//! budget). Nothing of it takes a sequence number, so cursors stay gapless and every reader
//! of the log is unchanged; the events a client sees of a wait (`harness.wait.opened`,
//! `harness.question`, `harness.wait.settled`, the interrupts of `RUN_FINISHED`) are
//! ordinary records. The host bounds a record in bytes
//! ([`max_parked_bytes`](crate::host::HostConfig::max_parked_bytes)); the file log reads
//! none larger than 64 MiB, and opens the file of a record only to read or write it (no
//! file stays open, so the pool of open files and its bound are unchanged).

mod file;
mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use harness_core::Cursor;

use crate::agui::AguiEvent;
use crate::catalog::{GapReason, OwnershipReason};

pub use file::{FileLog, FileLogConfig};
pub use memory::MemoryLog;
#[cfg(feature = "postgres")]
pub use postgres::PgLog;

/// One event of a thread's log, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// Its sequence number in the thread (from 1).
    pub seq: u64,
    /// The run that made it.
    pub operation_id: Arc<str>,
    sse: Bytes,
    json: Range<usize>,
    event: Range<usize>,
}

impl LogRecord {
    /// Renders a record: the `harness.event` frame, once.
    pub fn render(thread_id: &str, seq: u64, operation_id: &str, event: &AguiEvent) -> LogRecord {
        Self::render_after(None, thread_id, seq, operation_id, event)
    }

    /// [`render`](Self::render) of the record after `prev` (the thread's last), which shares
    /// `prev`'s operation id when it is the same run's (a run's events are consecutive).
    pub(crate) fn render_after(
        prev: Option<&LogRecord>,
        thread_id: &str,
        seq: u64,
        operation_id: &str,
        event: &AguiEvent,
    ) -> LogRecord {
        let op = match prev {
            Some(p) if &*p.operation_id == operation_id => Arc::clone(&p.operation_id),
            _ => Arc::from(operation_id),
        };
        // The event is written where it stays, in the record's buffer (no string of its own).
        Self::render_with(thread_id, seq, op, 128, |out| event.write_json(out))
    }

    pub(crate) fn render_raw(
        thread_id: &str,
        seq: u64,
        operation_id: &str,
        event_json: &str,
    ) -> LogRecord {
        Self::render_with(
            thread_id,
            seq,
            Arc::from(operation_id),
            event_json.len(),
            |out| out.extend_from_slice(event_json.as_bytes()),
        )
    }

    /// The record of the event `write_event` appends (about `event_len` bytes).
    fn render_with(
        thread_id: &str,
        seq: u64,
        operation_id: Arc<str>,
        event_len: usize,
        write_event: impl FnOnce(&mut Vec<u8>),
    ) -> LogRecord {
        let mut digits = itoa::Buffer::new();
        let cursor = digits.format(seq).as_bytes();
        let mut out = Vec::with_capacity(event_len + thread_id.len() + operation_id.len() + 96);
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(cursor);
        out.extend_from_slice(b"\ndata: ");
        let start = out.len();
        out.extend_from_slice(b"{\"type\":\"harness.event\",\"cursor\":\"");
        out.extend_from_slice(cursor);
        out.extend_from_slice(b"\",\"threadId\":");
        json_string(&mut out, thread_id);
        out.extend_from_slice(b",\"operationId\":");
        json_string(&mut out, &operation_id);
        out.extend_from_slice(b",\"event\":");
        let ev_start = out.len();
        write_event(&mut out);
        let ev_end = out.len();
        out.push(b'}');
        let end = out.len();
        out.extend_from_slice(b"\n\n");
        LogRecord {
            seq,
            operation_id,
            sse: Bytes::from(out),
            json: start..end,
            event: ev_start..ev_end,
        }
    }

    /// Its cursor.
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.seq.to_string())
    }

    /// The SSE event: `id: <cursor>\ndata: <frame>\n\n`.
    pub fn sse(&self) -> Bytes {
        self.sse.clone()
    }

    /// The frame JSON (a WebSocket text frame).
    pub fn json(&self) -> Bytes {
        self.sse.slice(self.json.clone())
    }

    /// The frame JSON and a LF (an NDJSON line).
    pub fn ndjson(&self) -> Bytes {
        self.sse.slice(self.json.start..self.json.end + 1)
    }

    /// The AG-UI event JSON alone (what `POST run` streams, without a frame around it).
    pub fn event_json(&self) -> Bytes {
        self.sse.slice(self.event.clone())
    }

    /// The frame JSON as text.
    pub fn json_str(&self) -> &str {
        std::str::from_utf8(&self.sse[self.json.clone()]).unwrap_or("")
    }

    /// The thread id its frame names (`None` when the frame does not read).
    pub fn thread_id(&self) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(rename = "threadId")]
            thread_id: String,
        }
        serde_json::from_str::<Head>(self.json_str())
            .ok()
            .map(|h| h.thread_id)
    }

    /// The AG-UI event, parsed back.
    pub fn event(&self) -> Result<AguiEvent, LogError> {
        match crate::frame::HostFrame::from_json(self.json_str()) {
            Ok(crate::frame::HostFrame::Event(f)) => Ok(f.event),
            Ok(_) => Err(LogError::Corrupt("not an event frame".into())),
            Err(e) => Err(LogError::Corrupt(e.message)),
        }
    }
}

/// The keys of a log: those with records, and those with an owner only (a thread made, its
/// first record not written yet).
fn thread_keys<T>(
    threads: &std::collections::HashMap<String, T>,
    owners: &std::collections::HashMap<String, String>,
) -> Vec<String> {
    let owned_only = owners.keys().filter(|k| !threads.contains_key(*k));
    threads.keys().chain(owned_only).cloned().collect()
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // ok: serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Why the log failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// File I/O failed.
    #[error("event log I/O: {0}")]
    Io(String),
    /// A stored record does not read.
    #[error("event log record is corrupt: {0}")]
    Corrupt(String),
    /// The append was refused: this host does not hold the thread's lease (another host
    /// took it over, or it was never taken; see [`EventLog::lease`]).
    #[error("this host does not own the thread: another host took it over")]
    Fenced,
}

/// What a forwarded request is: which route of the owner runs its body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardKind {
    /// `POST control` (`{threadId, input}`): the owner answers with the input's receipt.
    #[default]
    Control,
    /// `POST run` (an AG-UI `RunAgentInput`): the owner starts the run with no stream
    /// attached and answers `{runId, after}` (the run's id, and the cursor its events come
    /// after); the receiving host streams the run from the log.
    Run,
}

impl ForwardKind {
    /// Its name in a store (`control`, `run`).
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardKind::Control => "control",
            ForwardKind::Run => "run",
        }
    }

    /// The kind a store names (an unknown name reads as `None`).
    pub fn parse(s: &str) -> Option<ForwardKind> {
        match s {
            "control" => Some(ForwardKind::Control),
            "run" => Some(ForwardKind::Run),
            _ => None,
        }
    }
}

/// An input (the body of `POST control`, or of `POST run`) that reached a host that does not
/// own its thread, forwarded to the owner ([`EventLog::forward`]), which runs it as a local
/// input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Forward {
    /// Which route of the owner runs it.
    pub kind: ForwardKind,
    /// The thread's key.
    pub key: String,
    /// The request id of the HTTP request that brought it.
    pub request_id: String,
    /// The user `getUser` returned on the receiving host.
    pub user: Option<String>,
    /// The body, as received.
    pub body: String,
    /// The `traceparent` header, as received ("When another server owns the thread, the
    /// value goes to that server with the input").
    pub traceparent: Option<String>,
}

impl Forward {
    /// A forwarded input.
    pub fn new(
        key: &str,
        request_id: &str,
        user: Option<&str>,
        body: &[u8],
        traceparent: Option<&str>,
    ) -> Forward {
        Forward {
            kind: ForwardKind::Control,
            key: key.to_owned(),
            request_id: request_id.to_owned(),
            user: user.map(str::to_owned),
            body: String::from_utf8_lossy(body).into_owned(),
            traceparent: traceparent.map(str::to_owned),
        }
    }

    /// The same request, of `kind`.
    #[must_use]
    pub fn with_kind(mut self, kind: ForwardKind) -> Forward {
        self.kind = kind;
        self
    }
}

/// Who may write a thread of a log that several hosts share (see [`EventLog::lease`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lease {
    /// This host holds the thread's lease, and held it already: what it keeps of the
    /// thread in memory is current (a log of one process always answers this).
    Held,
    /// This host just took the lease, under a new `epoch`: the thread's newest record is
    /// `harness.ownership.changed {epoch, reason}`. Another host may have written the
    /// thread since this one last read it, and a run of the old holder may be open: read
    /// the thread again from the log.
    Acquired {
        /// The new epoch.
        epoch: u64,
        /// `taken_over` (the old holder's lease expired with no release) or `acquired`.
        reason: OwnershipReason,
    },
    /// Another host holds a live lease: it runs the thread's turns, and an input for the
    /// thread goes to it.
    HeldBy {
        /// The holder's id.
        holder: String,
    },
}

impl From<std::io::Error> for LogError {
    fn from(e: std::io::Error) -> Self {
        LogError::Io(e.to_string())
    }
}

/// The event logs of every thread.
///
/// A thread is stored under a key: the thread id itself, or, when the host keeps each
/// user's threads apart (`membersOnly()`), a key made of the user and the thread id (see
/// [`Host::thread_key`](crate::host::Host::thread_key)). Its records name the thread by the
/// id its client uses ([`append_as`](Self::append_as)).
pub trait EventLog: Send {
    /// Appends an event to the thread stored under `key` (creating the thread), its frame
    /// naming the thread `thread_id`, and returns its record.
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError>;

    /// Appends an event to a thread whose key is its id (creating the thread) and returns
    /// its record.
    fn append(
        &mut self,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        self.append_as(thread_id, thread_id, operation_id, event)
    }

    /// Whether the log has the thread (records, or an owner).
    fn contains(&self, thread_id: &str) -> bool {
        self.head_seq(thread_id) > 0 || self.owner(thread_id).is_some()
    }

    /// The record with this sequence number, when the log still has it.
    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError>;

    /// The sequence number of the last record of the thread (0: none yet).
    fn head_seq(&self, thread_id: &str) -> u64;

    /// The sequence number of the first record the log still has (`head_seq + 1` when it
    /// has none). Records before it were dropped.
    fn first_seq(&self, thread_id: &str) -> u64;

    /// Why records before [`first_seq`](Self::first_seq) are gone.
    fn gap_reason(&self) -> GapReason;

    /// The threads that have a log.
    fn threads(&self) -> Vec<String>;

    /// Whether cursors survive a restart of the host.
    fn is_durable(&self) -> bool;

    /// Keeps the user who owns a thread (`membersOnly()`: the user whose input made it), so
    /// that a durable log keeps access rules over a restart. The default keeps nothing.
    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        let _ = (thread_id, owner);
        Ok(())
    }

    /// The owner [`set_owner`](Self::set_owner) kept, if any.
    fn owner(&self, thread_id: &str) -> Option<String> {
        let _ = thread_id;
        None
    }

    /// Keeps the waits record of a thread (see the [module docs](self)): replaces the one
    /// kept before, or, with `None`, drops it. It is never sent to a client and takes no
    /// sequence number. The default keeps nothing and fails for a record, so a turn on a log
    /// that cannot keep one fails instead of waiting for a decision it would lose.
    fn set_waits(&mut self, thread_id: &str, record: Option<&str>) -> Result<(), LogError> {
        let _ = thread_id;
        match record {
            None => Ok(()),
            Some(_) => Err(LogError::Io("this event log keeps no waits".into())),
        }
    }

    /// The waits record [`set_waits`](Self::set_waits) kept, if any.
    fn waits(&mut self, thread_id: &str) -> Result<Option<String>, LogError> {
        let _ = thread_id;
        Ok(None)
    }

    /// Takes (or keeps) the lease of the thread stored under `key` before a write: on a log
    /// that several hosts share, one host at a time runs a thread's turns, and an append of
    /// any other host is [`LogError::Fenced`]. `thread_id` is the id the thread's records
    /// name (for the `harness.ownership.changed` record of a new epoch). A log of one
    /// process (memory, file) has no other writer: the default is always [`Lease::Held`].
    fn lease(&mut self, key: &str, thread_id: &str) -> Result<Lease, LogError> {
        let _ = (key, thread_id);
        Ok(Lease::Held)
    }

    /// Lets the lease of a thread go (the thread is idle here): the next host to write it
    /// takes it with reason `acquired`. The default does nothing.
    fn release(&mut self, key: &str) -> Result<(), LogError> {
        let _ = key;
        Ok(())
    }

    /// Lets every lease of this host go (a graceful shutdown): the next host to write each
    /// thread takes it at once (`acquired`), not after the lease's TTL (`taken_over`). The
    /// default does nothing.
    fn release_all(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    /// Sends an input to `holder`, the host that owns its thread: its id, to wait for the
    /// answer ([`forwarded_answer`](Self::forwarded_answer)). `None`: the log forwards
    /// nothing (the default).
    fn forward(&mut self, holder: &str, input: &Forward) -> Result<Option<u64>, LogError> {
        let _ = (holder, input);
        Ok(None)
    }

    /// The inputs other hosts forwarded to this one, not taken yet (each is given once).
    fn take_forwarded(&mut self) -> Result<Vec<(u64, Forward)>, LogError> {
        Ok(Vec::new())
    }

    /// The answer to a forwarded input (the HTTP status and body of `POST control`).
    fn answer_forwarded(&mut self, id: u64, status: u16, body: &str) -> Result<(), LogError> {
        let _ = (id, status, body);
        Ok(())
    }

    /// The owner's answer to an input this host forwarded, once there is one (then
    /// forgotten).
    fn forwarded_answer(&mut self, id: u64) -> Result<Option<(u16, String)>, LogError> {
        let _ = id;
        Ok(None)
    }

    /// Takes back a forwarded input the owner has not taken yet: whether it was (then the
    /// owner never runs it).
    fn withdraw_forwarded(&mut self, id: u64) -> Result<bool, LogError> {
        let _ = id;
        Ok(false)
    }
}

impl<L: EventLog + ?Sized> EventLog for Box<L> {
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        (**self).append_as(key, thread_id, operation_id, event)
    }
    fn contains(&self, thread_id: &str) -> bool {
        (**self).contains(thread_id)
    }
    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        (**self).get(thread_id, seq)
    }
    fn head_seq(&self, thread_id: &str) -> u64 {
        (**self).head_seq(thread_id)
    }
    fn first_seq(&self, thread_id: &str) -> u64 {
        (**self).first_seq(thread_id)
    }
    fn gap_reason(&self) -> GapReason {
        (**self).gap_reason()
    }
    fn threads(&self) -> Vec<String> {
        (**self).threads()
    }
    fn is_durable(&self) -> bool {
        (**self).is_durable()
    }
    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        (**self).set_owner(thread_id, owner)
    }
    fn owner(&self, thread_id: &str) -> Option<String> {
        (**self).owner(thread_id)
    }
    fn set_waits(&mut self, thread_id: &str, record: Option<&str>) -> Result<(), LogError> {
        (**self).set_waits(thread_id, record)
    }
    fn waits(&mut self, thread_id: &str) -> Result<Option<String>, LogError> {
        (**self).waits(thread_id)
    }
    fn lease(&mut self, key: &str, thread_id: &str) -> Result<Lease, LogError> {
        (**self).lease(key, thread_id)
    }
    fn release(&mut self, key: &str) -> Result<(), LogError> {
        (**self).release(key)
    }
    fn release_all(&mut self) -> Result<(), LogError> {
        (**self).release_all()
    }
    fn forward(&mut self, holder: &str, input: &Forward) -> Result<Option<u64>, LogError> {
        (**self).forward(holder, input)
    }
    fn take_forwarded(&mut self) -> Result<Vec<(u64, Forward)>, LogError> {
        (**self).take_forwarded()
    }
    fn answer_forwarded(&mut self, id: u64, status: u16, body: &str) -> Result<(), LogError> {
        (**self).answer_forwarded(id, status, body)
    }
    fn forwarded_answer(&mut self, id: u64) -> Result<Option<(u16, String)>, LogError> {
        (**self).forwarded_answer(id)
    }
    fn withdraw_forwarded(&mut self, id: u64) -> Result<bool, LogError> {
        (**self).withdraw_forwarded(id)
    }
}
