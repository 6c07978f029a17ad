//! Opening streams: `GET events`, `GET host-events`, and a socket's `harness.subscribe` and frames.

use std::time::Instant;

use harness_core::Cursor;

use super::connection::{Conn, ConnState};
use super::input::lone_surrogate;
use super::{AccessPolicy, ConnId, Host, Refusal, Transport, may_read};
use crate::Json;
use crate::frame::{ClientFrame, ErrorCode, Hello, HostFrame, ReceiptFrame, close};
use crate::http::HttpAnswer;
use crate::log::EventLog;

impl<L: EventLog> Host<L> {
    /// `GET events?threadId=&v=&from=` (and `Last-Event-ID`): opens the session stream.
    ///
    /// `Err` is the HTTP answer to send instead of a stream (`400` no `threadId` or one
    /// over [`max_thread_id_bytes`](super::HostConfig::max_thread_id_bytes), `401` no user, `403`
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
        let key = self.thread_key(user, thread);
        if !self.ensure(&key, Some(thread)) && self.cfg.access == AccessPolicy::MembersOnly {
            return Err(HttpAnswer::error(404, "not_found", request_id));
        }
        if let Some(t) = self.threads.get(&key) {
            if !may_read(&self.cfg.access, t, user) {
                return Err(HttpAnswer::error(403, "forbidden", request_id));
            }
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
        self.subscribe(
            now,
            id,
            &key,
            thread,
            cursor.map(Cursor::new),
            None,
            request_id,
        );
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
        // The reader's own stream under `membersOnly()`: "the status changes and session
        // list changes that the user may read".
        let key = self.host_events_key(user);
        let head = self.host_log.head_seq(&key);
        let (pos, force_gap) = match last_event_id.or(from).filter(|c| !c.is_empty()) {
            None => (head, None),
            Some(c) => match c.parse::<u64>() {
                // Behind what the log still keeps: the gap comes from `transmit`.
                Ok(n) if n <= head => (n, None),
                // A cursor this host never handed out (a restart: the log is in memory).
                _ => (
                    self.host_log.first_seq(&key).saturating_sub(1),
                    Some(Cursor::new(c)),
                ),
            },
        };
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::HostEvents {
                key: key.clone(),
                pos,
                force_gap,
            },
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
        self.watch(&key, id);
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

    #[allow(clippy::too_many_arguments)]
    fn subscribe(
        &mut self,
        _now: Instant,
        id: ConnId,
        thread: &str,
        thread_id: &str,
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
            c.span.record("threadId", thread_id);
            c.state = ConnState::Thread {
                thread: thread.to_owned(),
                thread_id: thread_id.to_owned(),
                pos,
                force_gap,
            };
        }
        let hello = HostFrame::Hello(Hello {
            v: Some(self.cfg.version),
            thread_id: Some(thread_id.to_owned()),
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
                let key = self.thread_key(user.as_deref(), &s.thread_id);
                self.ensure(&key, Some(&s.thread_id));
                if let Some(t) = self.threads.get(&key) {
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
                self.subscribe(now, id, &key, &s.thread_id, s.from, s.v, &upgrade_id);
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
                if let Some(e) = lone_surrogate(text.as_bytes()) {
                    // "…has … a bad `input`" — invalid_frame, no close.
                    self.error(id, ErrorCode::InvalidFrame, &e, &rid);
                    return;
                }
                let (key, thread, user) = match self.conns.get(&id) {
                    Some(Conn {
                        state:
                            ConnState::Thread {
                                thread, thread_id, ..
                            },
                        user,
                        ..
                    }) => (thread.clone(), thread_id.clone(), user.clone()),
                    _ => return,
                };
                let tp = if f.input.is_message() {
                    crate::http::traceparent(f.traceparent.as_deref())
                } else {
                    None
                };
                // An input for a thread another host owns goes to it (see `forward`).
                if self.may_forward() {
                    self.arm_forward(&rid, user.as_deref(), tp.as_deref());
                }
                let applied = self.apply_input(now, &key, &thread, user.as_deref(), f.input, tp);
                if self.took_forward(now, id) {
                    return;
                }
                match applied {
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
                    Err(Refusal::Internal(m)) => {
                        // The log's own words are the operator's, not the client's.
                        tracing::warn!(error = %m, "an input failed");
                        self.error(id, ErrorCode::Internal, "internal", &rid);
                    }
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
}
