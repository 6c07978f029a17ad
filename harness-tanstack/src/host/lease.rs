//! Thread ownership on a log that several hosts share: the host takes a thread's lease
//! before it writes an input's records, lets it go when the thread is idle, and reads the
//! thread again from the log when it took the lease from another host.
//!
//! **A takeover settles the old holder's work.** When this host takes a thread whose last
//! holder stopped (its lease expired with no release), the log's newest record is
//! `harness.ownership.changed {epoch, reason: "taken_over"}`, and what this host kept of the
//! thread in memory is dropped: the thread is rebuilt from the log, as after a restart
//! ([`Host::new`](super::Host::new)), and what the old holder left open is closed under the
//! new epoch — its open text message ends (`TEXT_MESSAGE_END`, as a cancelled turn's does),
//! its run ends with `RUN_ERROR` code `interrupted` (the document gives an interrupted turn
//! no AG-UI ending of its own; a `RUN_FINISHED` would say the run completed),
//! `harness.operation.finished` with status `interrupted` and `harness.input.settled` with
//! outcome `interrupted` for its input, and each input that waited behind it (accepted or
//! `queued`, never applied) gets `harness.input.settled` with outcome `interrupted` (its
//! receipt is forgotten, so the same `inputId` sent again runs, once). Then the new input
//! runs on this host.
//!
//! A host that still runs a turn of a thread another host took over (it was paused past its
//! lease) gets [`LogError::Fenced`] on its next append: the turn is cancelled here and the
//! thread dropped from memory; nothing it does reaches the log.

use std::time::Instant;

use super::{Host, HostEvent};
use crate::http::HttpAnswer;
use crate::log::{EventLog, Forward, ForwardKind, Lease, LogError};

/// What [`Host::control_routed`] did with a `POST control`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Routed {
    /// This host answered it.
    Answer(HttpAnswer),
    /// Another host owns the thread: the input went to it, under this id. Its answer comes
    /// back through the log ([`EventLog::forwarded_answer`]); see
    /// [`Service::control_forwarding`](crate::driver::Service::control_forwarding).
    Forwarded(u64),
}

/// Whose a thread is, for an input.
pub(super) enum Claim {
    /// This host's: run the input here.
    Mine,
    /// Another host's live lease (its id): the input goes there.
    Elsewhere(String),
}

impl<L: EventLog> Host<L> {
    /// `POST control` as [`control`](Self::control), except that an input for a thread whose
    /// lease another host holds is forwarded to that host (when the log forwards: a
    /// `PgLog`), its `traceparent` with it (spec: "When another server owns the thread, the
    /// value goes to that server with the input"), instead of the `rejected` receipt with
    /// reason `not_owner`.
    pub fn control_routed(
        &mut self,
        now: Instant,
        user: Option<&str>,
        body: &[u8],
        request_id: &str,
        traceparent: Option<&str>,
    ) -> Routed {
        self.forwarding = Some(Forward::new("", request_id, user, body, traceparent));
        self.forwarded = None;
        let answer = self.control(now, user, body, request_id, traceparent);
        self.forwarding = None;
        match self.forwarded.take() {
            Some((id, _)) => Routed::Forwarded(id),
            None => Routed::Answer(answer),
        }
    }

    /// Runs the inputs other hosts forwarded to this one, each exactly as a local
    /// `POST control` (the same validation, idempotency by `inputId`, receipts and
    /// refusals) or a local `POST run` with no stream attached (the same checks and
    /// refusals, idempotency by `runId`; the answer `{runId, after}`: see
    /// [`follow_forwarded_run`](Self::follow_forwarded_run)), and writes each answer back
    /// for its sender. How many it ran.
    pub fn handle_forwarded(&mut self, now: Instant) -> usize {
        let taken = match self.log.take_forwarded() {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "reading forwarded inputs failed");
                return 0;
            }
        };
        let n = taken.len();
        for (id, f) in taken {
            let a = match f.kind {
                ForwardKind::Run => self.run_forwarded(now, &f),
                _ => self.control(
                    now,
                    f.user.as_deref(),
                    f.body.as_bytes(),
                    &f.request_id,
                    f.traceparent.as_deref(),
                ),
            };
            if let Err(e) = self.log.answer_forwarded(id, a.status, &a.body) {
                tracing::warn!(error = %e, "answering a forwarded input failed");
            }
        }
        n
    }

    /// Takes (or keeps) the lease of the thread stored under `key` before writing to it.
    pub(super) fn claim(
        &mut self,
        now: Instant,
        key: &str,
        thread_id: &str,
    ) -> Result<Claim, LogError> {
        self.clock(now);
        match self.log.lease(key, thread_id)? {
            Lease::Held => Ok(Claim::Mine),
            Lease::Acquired { epoch, reason } => {
                tracing::info!(
                    threadId = thread_id,
                    epoch,
                    reason = reason.as_str(),
                    "thread taken"
                );
                // Another host may have written the thread since: read it again (a run it
                // left open is closed then, under this epoch).
                self.forget_thread(key);
                self.wake_thread(key);
                Ok(Claim::Mine)
            }
            Lease::HeldBy { holder } => Ok(Claim::Elsewhere(holder)),
        }
    }

    /// Drops what the host keeps of a thread in memory (it is read again from the log when
    /// next used); a turn it still runs here is cancelled (its future dropped).
    pub(super) fn forget_thread(&mut self, key: &str) {
        if let Some(t) = self.threads.remove(key) {
            self.resident.remove(key);
            if let Some(r) = t.running {
                self.events.push_back(HostEvent::CancelTurn {
                    thread_id: key.to_owned(),
                    operation_id: r.operation_id,
                });
            }
            crate::telemetry::threads_open(self.threads.len());
        }
    }

    /// Lets the lease of an idle thread go (no turn runs, no input waits): the next host
    /// that gets an input for it takes it at once (`acquired`).
    pub(super) fn release_if_idle(&mut self, key: &str) {
        let busy = self.threads.get(key).is_some_and(|t| t.is_busy());
        if !busy {
            if let Err(e) = self.log.release(key) {
                tracing::warn!(error = %e, "releasing a thread lease failed");
            }
        }
    }
}
