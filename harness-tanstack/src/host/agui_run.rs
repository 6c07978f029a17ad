//! The AG-UI run endpoint: `POST run` and `GET run`, the plain AG-UI events of one run.

use std::time::Instant;

use bytes::Bytes;
use harness_core::message::Message;

use super::connection::ConnState;
use super::wait::{Entry, Resolved};
use super::{AccessPolicy, ConnId, Host, Transport, may_read};
use crate::Json;
use crate::agui;
use crate::catalog::{self, HarnessEvent, OperationKind};
use crate::http::HttpAnswer;
use crate::log::EventLog;

impl<L: EventLog> Host<L> {
    /// `POST run` (and `GET run`): the standard AG-UI run for `useChat`. The last user
    /// message of the input runs as a turn of the thread `input.threadId`; the stream carries
    /// the plain AG-UI events of that run ("with no `harness.*` frames around them") and
    /// ends after its `RUN_FINISHED` or `RUN_ERROR`. Past a limit of the host the answer is
    /// `413 {error:'too_large'}` or `429 {error:'thread_limit'}`.
    ///
    /// A run that ended waiting for a person ends with `RUN_FINISHED` `outcome: {type:
    /// "interrupt", interrupts}`; `@tanstack/ai-client` answers with a new `POST run` whose
    /// `resume` decides them (`[{interruptId, status, payload}]`, `parentRunId` the
    /// interrupted run): the turn is driven again as this run, as by a `resolve` input. A
    /// `resume` that names no open wait, or leaves one of the turn's open, is
    /// `409 {error:'not_waiting'}`; a run with no `resume` while a turn waits is
    /// `409 {error:'conflict'}`.
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
        let wire = input.thread_id.as_str();
        let key = self.thread_key(user, wire);
        let text = input.last_user_text().unwrap_or_default();
        // Past a limit of the host: plain AG-UI has no receipt, so the HTTP status says it
        // (the spec gives `POST run` no statuses of its own): `413` for a message over
        // `max_input_bytes`, `429` past the threads a user or the host may have.
        let resume_bytes: usize = input
            .resume
            .iter()
            .flatten()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|j| j.len())
            .sum();
        if text.len() > self.cfg.max_input_bytes || resume_bytes > self.cfg.max_input_bytes {
            return Err(HttpAnswer::error(413, "too_large", request_id));
        }
        // The thread's lease (see `lease`): another host's live one is `409 not_owner`.
        let writes = self.threads.contains_key(&key)
            || self.log.contains(&key)
            || !self.at_thread_limit(user);
        if writes {
            match self.claim(now, &key, wire) {
                Ok(super::lease::Claim::Mine) => {}
                Ok(super::lease::Claim::Elsewhere(_)) => {
                    return Err(HttpAnswer::error(409, "not_owner", request_id));
                }
                Err(_) => return Err(HttpAnswer::error(500, "internal", request_id)),
            }
        }
        let r = self.run_owned(now, input, user, request_id, traceparent, &key, wire);
        if writes {
            self.release_if_idle(&key);
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn run_owned(
        &mut self,
        now: Instant,
        input: &agui::RunAgentInput,
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
        key: &str,
        wire: &str,
    ) -> Result<ConnId, HttpAnswer> {
        let key = key.to_owned();
        let text = input.last_user_text().unwrap_or_default();
        if self.ensure(&key, Some(wire)) {
            if let Some(t) = self.threads.get(&key) {
                if !may_read(&self.cfg.access, t, user) {
                    return Err(HttpAnswer::error(403, "forbidden", request_id));
                }
                // A turn runs, or inputs wait for their turn: this run would cut in.
                if t.is_busy() {
                    return Err(HttpAnswer::error(409, "conflict", request_id));
                }
                let resumes = input.resume.as_ref().is_some_and(|r| !r.is_empty());
                if t.blocks_inputs() && !resumes {
                    return Err(HttpAnswer::error(409, "conflict", request_id));
                }
            }
        } else if input.resume.as_ref().is_some_and(|r| !r.is_empty()) {
            return Err(HttpAnswer::error(409, "not_waiting", request_id));
        } else {
            if self.at_thread_limit(user) {
                return Err(HttpAnswer::error(429, "thread_limit", request_id));
            }
            self.make_thread(&key, wire, user)
                .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        }
        // The client's runId, unless the thread has a run by that id already (or it is the
        // `session` operation of the thread's own events).
        let taken = input.run_id.is_empty()
            || input.run_id == "session"
            || self
                .threads
                .get(&key)
                .is_some_and(|t| t.knows_run(&input.run_id));
        let op = if taken {
            self.new_op_id(&key)
        } else {
            input.run_id.clone()
        };
        let input_id = self.new_input_id(&key);
        let pos = self.log.head_seq(&key);
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::Run {
                thread: key.clone(),
                operation_id: op.clone(),
                pos,
            },
        );
        self.watch(&key, id);
        if let Some(resume) = input.resume.as_ref().filter(|r| !r.is_empty()) {
            // Only a resume that drives the parked turn again has a run to stream.
            let drives = self.threads.get(&key).is_some_and(|t| {
                t.parked.as_ref().is_some_and(|p| {
                    p.blocks()
                        && p.open.len() == resume.len()
                        && p.open
                            .iter()
                            .all(|w| resume.iter().any(|e| e.interrupt_id == w.wait_id))
                })
            });
            let resolved = if drives {
                self.resolve_waits(
                    now,
                    &key,
                    &input_id,
                    "resolve",
                    Entry::resolve(resume),
                    Some(op),
                )
                .map_err(|_| HttpAnswer::error(500, "internal", request_id))?
            } else {
                Resolved::NotWaiting
            };
            return match resolved {
                Resolved::Driven(_) => Ok(id),
                _ => {
                    self.disconnect(id);
                    Err(HttpAnswer::error(409, "not_waiting", request_id))
                }
            };
        }
        let tp = crate::http::traceparent(traceparent);
        let accepted = HarnessEvent::InputAccepted(catalog::InputAccepted {
            input_id: input_id.clone(),
            op: "prompt".into(),
            message: Some(Json::string(&text)),
            // "It stores the value on the `harness.input` record of the log."
            traceparent: tp.clone(),
            ..catalog::InputAccepted::default()
        });
        self.log_harness(now, &key, "session", accepted)
            .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        // A new turn: a hand-off to a person that waits ends.
        self.drop_waits(now, &key)
            .map_err(|_| HttpAnswer::error(500, "internal", request_id))?;
        self.begin_run(
            now,
            &key,
            &op,
            &input_id,
            OperationKind::Chat,
            None,
            Message::user(text),
            tp,
            None,
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
        let key = self.thread_key(user, thread_id);
        if !self.ensure(&key, Some(thread_id)) {
            return Err(HttpAnswer::error(404, "not_found", request_id));
        }
        match self.threads.get(&key) {
            Some(t) if !may_read(&self.cfg.access, t, user) => {
                return Err(HttpAnswer::error(403, "forbidden", request_id));
            }
            // A run the thread never had: no stream that waits for it forever.
            Some(t) if !t.knows_run(run_id) => {
                return Err(HttpAnswer::error(404, "not_found", request_id));
            }
            _ => {}
        }
        let pos = self.log.first_seq(&key).saturating_sub(1);
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::Run {
                thread: key.clone(),
                operation_id: run_id.to_owned(),
                pos,
            },
        );
        self.watch(&key, id);
        self.wake(id);
        Ok(id)
    }
}

/// One plain AG-UI SSE event (`POST run` / `GET run`): `data: <event>\n\n`, no `id:`.
pub(super) fn plain_sse(event_json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(event_json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(event_json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}
