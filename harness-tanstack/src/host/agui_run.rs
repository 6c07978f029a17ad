//! The AG-UI run endpoint: `POST run` and `GET run`, the plain AG-UI events of one run.
//!
//! **A run for a thread another host owns** (a log several hosts share) goes to the owner as
//! a `POST control` input does ([`Host::run_routed`]): the owner starts it with no stream
//! attached ([`Host::handle_forwarded`]), its events going to the log as any turn's, and
//! answers `{runId, after}`; the host that got the request streams the run from the log
//! after that cursor to its `RUN_FINISHED` or `RUN_ERROR` ([`Host::follow_forwarded_run`],
//! the `joinRun` path), as the answer of the `POST`.

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
use crate::log::{EventLog, Forward, ForwardKind};

/// What [`Host::run_routed`] did with a `POST run`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RunRouted {
    /// This host runs it (or a run of that id already, see [`Host::run_agui`]): the
    /// connection of its stream.
    Stream(ConnId),
    /// This host refused it (the answer of [`Host::run_agui`]).
    Refused(HttpAnswer),
    /// Another host owns the thread: the run went to it, under this id. Its answer comes
    /// back through the log ([`EventLog::forwarded_answer`]): give it to
    /// [`Host::follow_forwarded_run`]. See
    /// [`Service::run_forwarding`](crate::driver::Service::run_forwarding).
    Forwarded(u64),
}

/// A run started (or found) by [`Host::start_run`].
struct Started {
    /// Its stream, when one was asked for.
    conn: Option<ConnId>,
    /// Its id.
    run_id: String,
    /// The thread's cursor its events come after.
    after: u64,
}

/// The owner's answer to a forwarded run: `{runId, after}`.
#[derive(serde::Serialize, serde::Deserialize)]
struct RunAnswer {
    #[serde(rename = "runId")]
    run_id: String,
    after: u64,
}

/// The body of `POST run`, read: a body that is no `RunAgentInput` is `400 {error}`.
fn read_run(body: &[u8], request_id: &str) -> Result<agui::RunAgentInput, HttpAnswer> {
    serde_json::from_slice(body).map_err(|e| HttpAnswer::error(400, &e.to_string(), request_id))
}

impl<L: EventLog> Host<L> {
    /// `POST run` (and `GET run`): the standard AG-UI run for `useChat`. The last user
    /// message of the input runs as a turn of the thread `input.threadId`; the stream carries
    /// the plain AG-UI events of that run ("with no `harness.*` frames around them") and
    /// ends after its `RUN_FINISHED` or `RUN_ERROR`. Past a limit of the host the answer is
    /// `413 {error:'too_large'}` or `429 {error:'thread_limit'}`.
    ///
    /// The run takes the client's `runId`. A `runId` the thread has already (the same
    /// request sent again: a retry, or a client that lost the answer) starts nothing: the
    /// stream is that run's, from its start ("must not start a new run").
    ///
    /// A run that ended waiting for a person ends with `RUN_FINISHED` `outcome: {type:
    /// "interrupt", interrupts}`; `@tanstack/ai-client` answers with a new `POST run` whose
    /// `resume` decides them (`[{interruptId, status, payload}]`, `parentRunId` the
    /// interrupted run): the turn is driven again as this run, as by a `resolve` input. A
    /// `resume` that names no open wait, or leaves one of the turn's open, is
    /// `409 {error:'not_waiting'}`; a run with no `resume` while a turn waits is
    /// `409 {error:'conflict'}`. On a log several hosts share, a thread whose lease another
    /// host holds is `409 {error:'not_owner'}` ([`run_routed`](Self::run_routed) sends the
    /// run to that host instead).
    pub fn run_agui(
        &mut self,
        now: Instant,
        input: &agui::RunAgentInput,
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
    ) -> Result<ConnId, HttpAnswer> {
        let s = self.start_run(now, input, user, request_id, traceparent, true)?;
        s.conn
            .ok_or_else(|| HttpAnswer::error(500, "internal", request_id))
    }

    /// [`run_agui`](Self::run_agui) on the body of the `POST` (`400 {error}` when it is no
    /// `RunAgentInput`).
    pub fn run_body(
        &mut self,
        now: Instant,
        body: &[u8],
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
    ) -> Result<ConnId, HttpAnswer> {
        let input = read_run(body, request_id)?;
        self.run_agui(now, &input, user, request_id, traceparent)
    }

    /// `POST run` as [`run_body`](Self::run_body), except that a run for a thread whose
    /// lease another host holds goes to that host (when the log forwards: a `PgLog`), its
    /// `traceparent` with it, instead of `409 {error:'not_owner'}`.
    pub fn run_routed(
        &mut self,
        now: Instant,
        body: &[u8],
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
    ) -> RunRouted {
        let input = match read_run(body, request_id) {
            Ok(i) => i,
            Err(a) => return RunRouted::Refused(a),
        };
        let f = Forward::new("", request_id, user, body, traceparent).with_kind(ForwardKind::Run);
        self.forwarding = Some(f);
        self.forwarded = None;
        let r = self.run_agui(now, &input, user, request_id, traceparent);
        self.forwarding = None;
        match (self.forwarded.take(), r) {
            (Some((id, _)), _) => RunRouted::Forwarded(id),
            (None, Ok(c)) => RunRouted::Stream(c),
            (None, Err(a)) => RunRouted::Refused(a),
        }
    }

    /// Runs a `POST run` another host forwarded to this one (see
    /// [`handle_forwarded`](Self::handle_forwarded)): as a local one (the same checks and
    /// refusals, the same `runId` idempotency), except that no stream is attached: the run's
    /// events go to the log, and the answer is `200 {runId, after}`, the run's id and the
    /// cursor its events come after, for the sender to stream it from the log.
    pub(super) fn run_forwarded(&mut self, now: Instant, f: &Forward) -> HttpAnswer {
        let rid = f.request_id.as_str();
        let input = match read_run(f.body.as_bytes(), rid) {
            Ok(i) => i,
            Err(a) => return a,
        };
        let user = f.user.as_deref();
        match self.start_run(now, &input, user, rid, f.traceparent.as_deref(), false) {
            Ok(s) => {
                let a = RunAnswer {
                    run_id: s.run_id,
                    after: s.after,
                };
                HttpAnswer::ok(serde_json::to_string(&a).unwrap_or_default(), rid)
            }
            Err(a) => a,
        }
    }

    /// The owner answered a run this host forwarded ([`RunRouted::Forwarded`]): `body` is
    /// the `POST run` body as this host got it, `status` and `answer` the owner's answer.
    /// A `200` opens the run's stream here, from the log, after the cursor the owner named
    /// (the `joinRun` path: the run's plain AG-UI events, to its `RUN_FINISHED` or
    /// `RUN_ERROR`); any other answer is the owner's refusal, as it gave it.
    #[allow(clippy::too_many_arguments)]
    pub fn follow_forwarded_run(
        &mut self,
        now: Instant,
        body: &[u8],
        user: Option<&str>,
        request_id: &str,
        status: u16,
        answer: &str,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        let refusal = || HttpAnswer {
            status,
            body: answer.to_owned(),
            request_id: request_id.to_owned(),
        };
        if status != 200 {
            return Err(refusal());
        }
        let input = read_run(body, request_id)?;
        let Ok(a) = serde_json::from_str::<RunAnswer>(answer) else {
            return Err(HttpAnswer::error(502, "bad_owner_answer", request_id));
        };
        let key = self.thread_key(user, &input.thread_id);
        // `joinRun` by id alone finds it here too.
        let scope = super::resume::index_scope(&self.cfg.access, user);
        self.runs.insert(scope, user, &a.run_id, &key);
        let id = self.stream_run(now, &key, &a.run_id, a.after, user, request_id);
        self.wake(id);
        Ok(id)
    }

    /// A plain AG-UI stream of the run `run_id` of the thread stored under `key`: its
    /// events after the cursor `after`, to its `RUN_FINISHED` or `RUN_ERROR`.
    pub(super) fn stream_run(
        &mut self,
        now: Instant,
        key: &str,
        run_id: &str,
        after: u64,
        user: Option<&str>,
        request_id: &str,
    ) -> ConnId {
        let id = self.new_conn(
            now,
            Transport::Sse,
            user.map(str::to_owned),
            request_id,
            ConnState::Run {
                thread: key.to_owned(),
                operation_id: run_id.to_owned(),
                pos: after,
            },
        );
        self.watch(key, id);
        id
    }

    /// `POST run`, here or with no stream (`attach`: a run forwarded by another host).
    fn start_run(
        &mut self,
        now: Instant,
        input: &agui::RunAgentInput,
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
        attach: bool,
    ) -> Result<Started, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        if let Some(e) = self.thread_id_error(&input.thread_id) {
            return Err(HttpAnswer::error(400, &e, request_id));
        }
        // The run's id names every event of the run, in the log and on every stream: bound
        // it as a thread id is.
        if input.run_id.len() > self.cfg.max_thread_id_bytes {
            let e = format!(
                "runId is longer than {} bytes",
                self.cfg.max_thread_id_bytes
            );
            return Err(HttpAnswer::error(400, &e, request_id));
        }
        if input.run_id.contains('\0') {
            return Err(HttpAnswer::error(
                400,
                "runId holds a NUL character",
                request_id,
            ));
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
        // The thread's lease (see `lease`): another host's live one is `409 not_owner`, or
        // the run goes there (`run_routed`).
        let writes = self.threads.contains_key(&key)
            || self.log.contains(&key)
            || !self.at_thread_limit(user);
        if writes {
            match self.claim(now, &key, wire) {
                Ok(super::lease::Claim::Mine) => {}
                Ok(super::lease::Claim::Elsewhere(holder)) => {
                    tracing::debug!(
                        threadId = wire,
                        holder,
                        "run for a thread another host owns"
                    );
                    if let Some(mut f) = self
                        .forwarding
                        .take()
                        .filter(|f| f.kind == ForwardKind::Run)
                    {
                        f.key = key.clone();
                        match self.log.forward(&holder, &f) {
                            Ok(Some(id)) => self.forwarded = Some((id, f)),
                            Ok(None) => {}
                            Err(_) => return Err(HttpAnswer::error(500, "internal", request_id)),
                        }
                    }
                    return Err(HttpAnswer::error(409, "not_owner", request_id));
                }
                Err(_) => return Err(HttpAnswer::error(500, "internal", request_id)),
            }
        }
        let r = self.run_owned(
            now,
            input,
            user,
            request_id,
            traceparent,
            &key,
            wire,
            attach,
        );
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
        attach: bool,
    ) -> Result<Started, HttpAnswer> {
        let key = key.to_owned();
        let text = input.last_user_text().unwrap_or_default();
        // The client's runId, unless it has none (or it is the `session` operation of the
        // thread's own events).
        let own_id = !input.run_id.is_empty() && input.run_id != "session";
        if self.ensure(&key, Some(wire)) {
            if let Some(t) = self.threads.get(&key) {
                if !may_read(&self.cfg.access, t, user) {
                    return Err(HttpAnswer::error(403, "forbidden", request_id));
                }
                // The same run again: its stream from its start, nothing run again.
                if own_id && t.knows_run(&input.run_id) {
                    let after = self.log.first_seq(&key).saturating_sub(1);
                    let conn = attach.then(|| {
                        let c = self.stream_run(now, &key, &input.run_id, after, user, request_id);
                        self.wake(c);
                        c
                    });
                    return Ok(Started {
                        conn,
                        run_id: input.run_id.clone(),
                        after,
                    });
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
        let op = if own_id {
            input.run_id.clone()
        } else {
            self.new_op_id(&key)
        };
        let input_id = self.new_input_id(&key);
        let pos = self.log.head_seq(&key);
        let conn = attach.then(|| self.stream_run(now, &key, &op, pos, user, request_id));
        let started = Started {
            conn,
            run_id: op.clone(),
            after: pos,
        };
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
                Resolved::Driven(_) => Ok(started),
                _ => {
                    if let Some(c) = started.conn {
                        self.disconnect(c);
                    }
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
        Ok(started)
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
        let id = self.stream_run(now, &key, run_id, pos, user, request_id);
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
