//! Socket inputs that went to the thread's owner: a `harness.input` frame (WebSocket or
//! stdio) for a thread whose lease another host holds goes to that host with its
//! `traceparent`, as a `POST control` does (spec: "When another server owns the thread, the
//! value goes to that server with the input"), and the connection gets the owner's receipt
//! when it comes.
//!
//! Sans-IO: the host writes the input to the log's inbox ([`EventLog::forward`]) and keeps
//! which connection waits for it, until [`HostConfig::forward_wait`](super::HostConfig::forward_wait)
//! has passed (a deadline in [`Host::poll_timeout`]). The driver tells it when the owner
//! answered ([`Host::handle_forward_answer`]); at the deadline the host takes the input back
//! ([`EventLog::withdraw_forwarded`]) and runs it itself when the owner never took it (its
//! lease expired: a takeover), or else sends the answer the owner left by then, or an
//! `internal` error `owner_timeout`.

use std::collections::HashMap;
use std::time::Instant;

use super::{ConnId, Host};
use crate::frame::{ErrorCode, HostFrame, Receipt, ReceiptFrame};
use crate::log::{EventLog, Forward};

/// A socket input waiting for its owner's answer.
#[derive(Debug)]
pub(super) struct Pending {
    conn: ConnId,
    /// The input as it went to the owner (what this host runs if it takes it back).
    input: Forward,
    deadline: Instant,
}

/// The socket inputs this host forwarded, by forward id (bounded by
/// [`HostConfig::max_forwarded`](super::HostConfig::max_forwarded)).
pub(super) type Pendings = HashMap<u64, Pending>;

impl<L: EventLog> Host<L> {
    /// Whether another socket input may be forwarded now (else it is refused with the
    /// `rejected` receipt with reason `not_owner`, as on a log that does not forward).
    pub(super) fn may_forward(&self) -> bool {
        self.socket_forwards.len() < self.cfg.max_forwarded
    }

    /// Arms forwarding for one socket input: [`apply_input`](Self::apply_input) forwards it
    /// (its body is the `POST control` body `{threadId, input}`, made from the parsed input)
    /// if another host owns the thread.
    pub(super) fn arm_forward(
        &mut self,
        request_id: &str,
        user: Option<&str>,
        traceparent: Option<&str>,
    ) {
        self.forwarding = Some(Forward::new("", request_id, user, b"", traceparent));
        self.forwarded = None;
    }

    /// After [`apply_input`](Self::apply_input): whether the input went to the owner (then
    /// the connection waits for its answer, and gets no receipt now).
    pub(super) fn took_forward(&mut self, now: Instant, conn: ConnId) -> bool {
        self.forwarding = None;
        let Some((id, f)) = self.forwarded.take() else {
            return false;
        };
        self.socket_forwards.insert(
            id,
            Pending {
                conn,
                input: f,
                deadline: now.checked_add(self.cfg.forward_wait).unwrap_or(now),
            },
        );
        true
    }

    /// The owner answered the input this host forwarded under `id` (a forwarding listener
    /// heard it: `PgLog::listen_forwards`): when a connection waits for it, the connection
    /// gets the owner's receipt (or its refusal, as a `harness.error`). Whether a
    /// connection waited for it. An answer nobody waits for any more (its socket input
    /// expired, or the request of
    /// [`Service::control_forwarding`](crate::driver::Service::control_forwarding) went
    /// away) is read off the log now, not left there.
    pub fn handle_forward_answer(&mut self, now: Instant, id: u64) -> bool {
        self.clock(now);
        if !self.socket_forwards.contains_key(&id) {
            if let Err(e) = self.log.forwarded_answer(id) {
                tracing::warn!(error = %e, "dropping a forwarded answer failed");
            }
            return false;
        }
        match self.log.forwarded_answer(id) {
            Ok(Some((status, body))) => {
                if let Some(p) = self.socket_forwards.remove(&id) {
                    self.answer_socket(&p, status, &body);
                }
                true
            }
            Ok(None) => true,
            Err(e) => {
                tracing::warn!(error = %e, "reading a forwarded answer failed");
                true
            }
        }
    }

    /// The earliest deadline of a socket input waiting for its owner.
    pub(super) fn forward_deadline(&self) -> Option<Instant> {
        self.socket_forwards.values().map(|p| p.deadline).min()
    }

    /// Socket inputs whose owner did not answer in time (see the module docs).
    pub(super) fn expire_forwards(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .socket_forwards
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some(p) = self.socket_forwards.remove(&id) else {
                continue;
            };
            match self.log.withdraw_forwarded(id) {
                // The owner never took it: run it here (a takeover, when its lease expired).
                // Not forwarded again: `forwarding` is not armed.
                Ok(true) => {
                    let f = &p.input;
                    let a = self.control(
                        now,
                        f.user.as_deref(),
                        f.body.as_bytes(),
                        &f.request_id,
                        f.traceparent.as_deref(),
                    );
                    self.answer_socket(&p, a.status, &a.body);
                }
                _ => match self.log.forwarded_answer(id) {
                    Ok(Some((status, body))) => self.answer_socket(&p, status, &body),
                    _ => self.error(
                        p.conn,
                        ErrorCode::Internal,
                        "owner_timeout",
                        &p.input.request_id,
                    ),
                },
            }
        }
    }

    /// Sends a `POST control` answer (the owner's, or this host's) to the connection as the
    /// socket says it: a `200` receipt is `harness.receipt`, a refusal `harness.error`.
    fn answer_socket(&mut self, p: &Pending, status: u16, body: &str) {
        if status == 200 {
            if let Ok(r) = serde_json::from_str::<Receipt>(body) {
                let frame = HostFrame::Receipt(ReceiptFrame {
                    request_id: p.input.request_id.clone(),
                    status: r.status,
                    input_id: Some(r.input_id),
                    operation_id: r.operation_id,
                    reason: r.reason,
                    ..ReceiptFrame::default()
                });
                self.queue(p.conn, &frame);
                return;
            }
        }
        let message = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| format!("the owner answered {status}"));
        let code = match status {
            401 => ErrorCode::Unauthorized,
            403 => ErrorCode::Forbidden,
            400 | 413 => ErrorCode::InvalidFrame,
            _ => ErrorCode::Internal,
        };
        self.error(p.conn, code, &message, &p.input.request_id);
    }
}

/// The `POST control` body of a socket input (what the owner runs).
pub(super) fn control_body(thread_id: &str, input: &impl serde::Serialize) -> String {
    serde_json::json!({ "threadId": thread_id, "input": input }).to_string()
}
