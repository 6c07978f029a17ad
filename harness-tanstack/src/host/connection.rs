//! Per-connection state, fan-out to a thread's readers, back-pressure, heartbeats, slow consumers.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use harness_core::Cursor;

use super::{ConnId, Host, Transport};
use crate::frame::{self, ErrorCode, HostFrame, close};
use crate::http::StreamConfig;
use crate::log::EventLog;
use crate::transport::sse_encode;

/// What a connection streams.
#[derive(Debug)]
pub(super) enum ConnState {
    /// A socket before its `harness.subscribe`.
    AwaitSubscribe,
    /// Streaming a thread: `pos` is the last sequence number sent.
    Thread {
        /// The thread's key.
        thread: String,
        /// The id its client uses.
        thread_id: String,
        pos: u64,
        /// A cursor the log cannot place: send a gap before anything else.
        force_gap: Option<Cursor>,
    },
    /// `GET host-events`: `pos` is the last sequence number sent of the stream `key` (the
    /// reader's own, under `membersOnly()`).
    HostEvents {
        key: String,
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

/// One connection of the host.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) transport: Transport,
    pub(super) user: Option<String>,
    pub(super) request_id: String,
    pub(super) state: ConnState,
    /// Frames that go before the log (hello, receipts, errors, pings).
    pub(super) out: VecDeque<Bytes>,
    /// The bytes in `out`.
    pub(super) out_bytes: usize,
    /// Bytes handed out and not yet reported sent.
    pub(super) in_flight: usize,
    /// Over the buffer limit: nothing is handed out until [`Host::sent`] brings it under.
    pub(super) blocked: bool,
    /// Since when bytes handed out wait to be taken with no progress ([`Host::sent`] of
    /// some bytes starts the count again): the client does not read.
    stalled_since: Option<Instant>,
    last_write: Instant,
    /// Close after `out` is drained.
    pub(super) close_after: Option<(u16, String)>,
    /// The close code, once the host closed it (until [`Host::disconnect`]).
    pub(super) closed_code: Option<u16>,
    /// When the host first woke it with no [`Host::poll_transmit`] since: a transport that
    /// takes no bytes at all (a write that never completes) does not read either.
    pub(super) unpolled_since: Option<Instant>,
    /// The key of [`Host::watchers`] it is in.
    watching: Option<String>,
    next_request: u64,
    /// `harness.snapshot` frames the client asked for and has not had yet: each is taken
    /// and sent once the connection has every event the log has, so that it sits in the
    /// stream at its cursor. A count, not frames: what waits is bounded like the queue.
    pub(super) snapshots_wanted: usize,
    /// Its span (`harness.connection`), closed when the connection goes away.
    pub(super) span: tracing::Span,
}

impl Conn {
    pub(super) fn push_out(&mut self, b: Bytes) {
        self.out_bytes += b.len();
        self.out.push_back(b);
    }

    pub(super) fn pop_out(&mut self) -> Option<Bytes> {
        let b = self.out.pop_front()?;
        self.out_bytes = self.out_bytes.saturating_sub(b.len());
        Some(b)
    }

    /// A client that sends and never reads: `slow_consumer`, then the close 4408.
    pub(super) fn slow_consumer(&mut self) {
        let f = HostFrame::error(
            ErrorCode::SlowConsumer,
            "The client read too slowly.",
            self.request_id.clone(),
        );
        self.push_out(render(self.transport, &f));
        self.close_after = Some((close::SLOW_CONSUMER, "slow_consumer".into()));
        tracing::debug!(parent: &self.span, "slow consumer: its queue of frames is full");
        crate::telemetry::slow_consumer();
    }

    /// Hands bytes out to the transport.
    pub(super) fn hand_out(&mut self, b: &Bytes, now: Instant) {
        if self.in_flight == 0 {
            self.stalled_since = Some(now);
        }
        self.in_flight += b.len();
        self.last_write = now;
    }

    /// Notes that the host has something for it (a wake) at `now`.
    pub(super) fn woken(&mut self, now: Option<Instant>) {
        if self.unpolled_since.is_none() {
            self.unpolled_since = now;
        }
    }
}

impl<L: EventLog> Host<L> {
    pub(super) fn new_conn(
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
                span: crate::telemetry::connection_span(transport, request_id),
            },
        );
        crate::telemetry::connections(transport, 1.0);
        id
    }

    pub(super) fn watch(&mut self, thread: &str, id: ConnId) {
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
    pub(super) fn unwatch(&mut self, id: ConnId) {
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

    pub(super) fn wake(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.woken(self.last_now);
            self.woken.insert(id);
        }
    }

    pub(super) fn wake_thread(&mut self, thread: &str) {
        if let Some(w) = self.watchers.get(thread) {
            for id in w {
                if let Some(c) = self.conns.get_mut(id) {
                    c.woken(self.last_now);
                    self.woken.insert(*id);
                }
            }
        }
    }

    pub(super) fn queue(&mut self, id: ConnId, frame: &HostFrame) {
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

    pub(super) fn close_conn(&mut self, id: ConnId, code: u16, reason: &str) {
        if let Some(c) = self.conns.get_mut(&id) {
            if c.close_after.is_none() && !matches!(c.state, ConnState::Closed) {
                c.close_after = Some((code, reason.to_owned()));
                c.woken(self.last_now);
                self.woken.insert(id);
            }
        }
    }

    pub(super) fn error(&mut self, id: ConnId, code: ErrorCode, message: &str, request_id: &str) {
        // What a peer caused: at debug level, so that a flood of bad frames floods no log.
        if let Some(c) = self.conns.get(&id) {
            tracing::debug!(parent: &c.span, code = %code, request_id, message, "harness.error");
        }
        self.queue(id, &HostFrame::error(code, message, request_id));
    }

    pub(super) fn server_request_id(&mut self, id: ConnId) -> String {
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
        if let Some(c) = self.conns.remove(&id) {
            crate::telemetry::connections(c.transport, -1.0);
            if let Some(code) = c.closed_code {
                c.span.record("close_code", code);
            }
        }
        self.outflow.flush();
        self.woken.remove(&id);
    }

    /// Whether `id` is a connection of the host (until [`disconnect`](Self::disconnect)).
    pub fn has_connection(&self, id: ConnId) -> bool {
        self.conns.contains_key(&id)
    }

    /// The WebSocket close code of a connection the host closed (after
    /// [`HostEvent::Close`](super::HostEvent::Close)), until [`disconnect`](Self::disconnect).
    pub fn close_code(&self, id: ConnId) -> Option<u16> {
        self.conns.get(&id).and_then(|c| c.closed_code)
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

    /// Heartbeats, slow consumers, and socket inputs whose thread's owner did not answer
    /// within [`forward_wait`](super::HostConfig::forward_wait). Call at
    /// [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.outflow.flush();
        self.clock(now);
        self.expire_forwards(now);
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
            if let Some(c) = self.conns.get(&id) {
                tracing::debug!(parent: &c.span, "slow consumer: it did not read in time");
            }
            crate::telemetry::slow_consumer();
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
            .chain(self.forward_deadline())
            .min()
    }
}

pub(super) fn limit(cfg: &StreamConfig, t: Transport) -> usize {
    match t {
        Transport::Sse => cfg.sse_queue_bytes,
        Transport::WebSocket => cfg.socket_buffer_bytes,
        Transport::Stdio => usize::MAX,
    }
}

pub(super) fn render(t: Transport, frame: &HostFrame) -> Bytes {
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

/// Hashes a [`ConnId`] by its number: ids are sequential, so they spread well as they are.
#[derive(Default)]
pub(super) struct IdHasher(u64);

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

pub(super) type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// Connections to wake, in order, each once.
#[derive(Debug, Default)]
pub(super) struct WakeQueue {
    queue: VecDeque<ConnId>,
    set: HashSet<ConnId, IdHash>,
}

impl WakeQueue {
    pub(super) fn insert(&mut self, id: ConnId) {
        if self.set.insert(id) {
            self.queue.push_back(id);
        }
    }

    fn remove(&mut self, id: &ConnId) {
        if self.set.remove(id) {
            self.queue.retain(|x| x != id);
        }
    }

    pub(super) fn pop(&mut self) -> Option<ConnId> {
        let id = self.queue.pop_front()?;
        self.set.remove(&id);
        Some(id)
    }
}
