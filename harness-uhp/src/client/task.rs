//! The state machine of one task: [`TaskClient`] sends the create, follows the stream,
//! recovers a lost one from the stored response, retries by the table, and cancels.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use http::HeaderMap;
use http::header::{CONTENT_TYPE, DATE, RETRY_AFTER};
use serde_json::Value;

use super::request::{CreateRequest, TaskClientConfig, requests};
use super::{ClientRequest, RequestId, RequestKind, TaskError, TaskEvent};
use crate::accumulator::TaskAccumulator;
use crate::decoder::StreamDecoder;
use crate::error::ErrorEnvelope;
use crate::finding::excerpt;
use crate::response::Response;
use crate::retry::{Decision, Failure, GiveUpReason, IdempotencyKey, RetryAfter, RetryPolicy};

/// The phase of the request in flight.
#[derive(Debug)]
enum Phase {
    /// Sent; no status yet.
    Sent,
    /// A streaming body.
    Stream,
    /// A JSON body being gathered (`status` is the answer's).
    Body {
        status: u16,
        failure: Option<Box<Failure>>,
        buf: Vec<u8>,
    },
}

#[derive(Debug)]
struct Inflight {
    id: RequestId,
    kind: RequestKind,
    phase: Phase,
}

/// The cancel request in flight (it runs beside the create or retrieve).
#[derive(Debug)]
struct CancelInflight {
    id: RequestId,
    /// The answer's status, once its head arrived.
    status: Option<u16>,
    retry_after: Option<Duration>,
    /// The start of an error answer's body (its envelope).
    buf: Vec<u8>,
}

/// The most of a cancel's error answer kept to read its envelope.
const MAX_CANCEL_ERROR_BODY: usize = 64 << 10;

/// One task, sans-IO: create (streamed), follow, recover, finish.
///
/// ```
/// use std::time::Instant;
/// use harness_uhp::builder::StreamBuilder;
/// use harness_uhp::client::{TaskClientConfig, CreateRequest, RequestKind, TaskClient, TaskEvent};
///
/// let now = Instant::now();
/// let mut task = TaskClient::new(TaskClientConfig::new("http://127.0.0.1:3000"), CreateRequest::new("hi"));
/// task.start(now);
/// let create = task.poll_transmit().unwrap();
/// assert_eq!(create.kind, RequestKind::Create);
/// assert!(create.request.headers().contains_key("Idempotency-Key"));
///
/// // The server streams part of the task, then the connection drops.
/// let mut server = StreamBuilder::new("resp_1");
/// server.created().message(&["Hel", "lo"], &[]).completed();
/// let sse = server.to_sse();
/// let mut head = http::HeaderMap::new();
/// head.insert("content-type", "text/event-stream".parse().unwrap());
/// task.handle_head(now, create.id, 200, &head);
/// task.handle_data(now, create.id, &sse[..sse.len() / 2]);
/// task.handle_transport_error(now, create.id);
///
/// // The client fetches the stored response instead of running the task again.
/// let fetch = task.poll_transmit().unwrap();
/// assert_eq!(fetch.kind, RequestKind::Retrieve);
/// assert_eq!(fetch.request.uri().path(), "/v1/responses/resp_1");
/// let stored = serde_json::to_vec(server.response()).unwrap();
/// let mut json = http::HeaderMap::new();
/// json.insert("content-type", "application/json".parse().unwrap());
/// task.handle_head(now, fetch.id, 200, &json);
/// task.handle_data(now, fetch.id, &stored);
/// task.handle_end(now, fetch.id);
/// assert!(task.is_finished());
/// assert_eq!(task.accumulator().text(), "Hello");
/// assert!(task.poll_transmit().is_none()); // nothing was sent twice
/// ```
#[derive(Debug)]
pub struct TaskClient {
    cfg: TaskClientConfig,
    body: CreateRequest,
    policy: RetryPolicy,
    acc: TaskAccumulator,
    decoder: StreamDecoder,
    next_id: u64,
    inflight: Option<Inflight>,
    cancel_inflight: Option<CancelInflight>,
    cancel_wanted: bool,
    /// Retries of the cancel request (its own budget; the key is not used).
    cancel_policy: RetryPolicy,
    /// When to send the cancel again after a failure.
    cancel_timer: Option<Instant>,
    transmits: VecDeque<ClientRequest>,
    events: VecDeque<TaskEvent>,
    /// When to send `retry` (a retry after a failure, or the next poll of the stored response).
    timer: Option<(Instant, RequestKind)>,
    /// When the stream is considered stalled.
    inactivity: Option<Instant>,
    finished: bool,
    failed: bool,
    creates_sent: u32,
    /// Its span (`uhp.task`, `side = "client"`), closed when the client is dropped.
    span: tracing::Span,
}

impl TaskClient {
    /// A task to create with this body, a fresh idempotency key and the default policy.
    pub fn new(cfg: TaskClientConfig, body: CreateRequest) -> Self {
        Self::with_policy(cfg, body, RetryPolicy::new())
    }

    /// A task with this retry policy (and so this idempotency key).
    pub fn with_policy(cfg: TaskClientConfig, body: CreateRequest, policy: RetryPolicy) -> Self {
        let decoder = StreamDecoder::with_config(cfg.sse);
        TaskClient {
            cfg,
            body,
            policy,
            acc: TaskAccumulator::new(),
            decoder,
            next_id: 0,
            inflight: None,
            cancel_inflight: None,
            cancel_wanted: false,
            cancel_policy: RetryPolicy::new(),
            cancel_timer: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            timer: None,
            inactivity: None,
            finished: false,
            failed: false,
            creates_sent: 0,
            span: tracing::info_span!(
                parent: None,
                "uhp.task",
                side = "client",
                response_id = tracing::field::Empty,
                creates = tracing::field::Empty,
                outcome = tracing::field::Empty,
            ),
        }
    }

    /// Starts the task: queues the streaming create request. Only the first call does
    /// anything: retries are the client's own (see [`TaskEvent::Retrying`]).
    pub fn start(&mut self, now: Instant) {
        let _ = now; // part of every input method's shape; nothing is timed before the answer
        if self.creates_sent == 0 && self.inflight.is_none() && !self.finished && !self.failed {
            self.send(now, RequestKind::Create);
        }
    }

    /// Asks the server to stop the task (`POST /v1/responses/{id}/cancel`). Sent as soon as
    /// the response id is known; sent again after a dropped connection or a retryable
    /// answer (the endpoint is idempotent), and [`TaskEvent::CancelFailed`] when it cannot
    /// be delivered. The stream then ends with the task `cancelled`.
    pub fn cancel(&mut self, now: Instant) {
        self.cancel_wanted = true;
        self.maybe_send_cancel(now);
    }

    fn maybe_send_cancel(&mut self, _now: Instant) {
        if !self.cancel_wanted
            || self.cancel_inflight.is_some()
            || self.cancel_timer.is_some()
            || self.finished
            || self.failed
        {
            return;
        }
        let Some(id) = self.acc.response_id().map(str::to_owned) else {
            return;
        };
        self.cancel_wanted = false;
        match requests::cancel(&self.cfg, &id) {
            Ok(request) => {
                let rid = self.new_id();
                self.cancel_inflight = Some(CancelInflight {
                    id: rid,
                    status: None,
                    retry_after: None,
                    buf: Vec::new(),
                });
                self.transmits.push_back(ClientRequest {
                    id: rid,
                    kind: RequestKind::Cancel,
                    request,
                });
            }
            Err(e) => self.fail(TaskError::Request(e)),
        }
    }

    fn new_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId(self.next_id)
    }

    /// Queues a request; its answer is awaited for at most the inactivity timeout.
    fn send(&mut self, now: Instant, kind: RequestKind) {
        // Once the task's id is known it exists on the server: it is read back, never
        // created again.
        let kind = match kind {
            RequestKind::Create if self.acc.response_id().is_some() => RequestKind::Retrieve,
            k => k,
        };
        let built = match kind {
            RequestKind::Create => {
                self.creates_sent = self.creates_sent.saturating_add(1);
                requests::stream(&self.cfg, &self.body, self.policy.idempotency_key())
            }
            RequestKind::Retrieve => {
                let Some(id) = self.acc.response_id().map(str::to_owned) else {
                    // No id to read back: the create again, with the same key, returns the
                    // first request's task.
                    return self.send(now, RequestKind::Create);
                };
                requests::retrieve(&self.cfg, &id)
            }
            // The cancel runs beside the other requests, with its own timer.
            RequestKind::Cancel => {
                self.cancel_wanted = true;
                return;
            }
        };
        match built {
            Ok(request) => {
                let id = self.new_id();
                self.inflight = Some(Inflight {
                    id,
                    kind,
                    phase: Phase::Sent,
                });
                self.transmits
                    .push_back(ClientRequest { id, kind, request });
                // A repeated key's answer may wait for the first request ("if first still
                // running server MUST wait and return its result"): no head timeout then.
                self.inactivity = if kind == RequestKind::Create && self.creates_sent > 1 {
                    None
                } else {
                    now.checked_add(self.cfg.inactivity_timeout)
                };
            }
            Err(e) => self.fail(TaskError::Request(e)),
        }
    }

    fn fail(&mut self, e: TaskError) {
        if !self.finished && !self.failed {
            self.failed = true;
            self.inflight = None;
            self.timer = None;
            self.cancel_timer = None;
            self.inactivity = None;
            tracing::debug!(parent: &self.span, error = %e, "the task failed");
            self.close_span("failed");
            self.events.push_back(TaskEvent::Failed(e));
        }
    }

    /// Records the task's end on its span, and counts it.
    fn close_span(&self, outcome: &'static str) {
        if let Some(id) = self.acc.response_id() {
            self.span.record("response_id", id);
        }
        self.span.record("creates", self.creates_sent);
        self.span.record("outcome", outcome);
        crate::telemetry::client_task(outcome);
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.inflight = None;
            self.timer = None;
            self.cancel_timer = None;
            self.inactivity = None;
            self.close_span("finished");
            self.events.push_back(TaskEvent::Finished);
        }
    }

    fn current(&mut self, id: RequestId) -> Option<&mut Inflight> {
        self.inflight.as_mut().filter(|i| i.id == id)
    }

    fn current_cancel(&mut self, id: RequestId) -> Option<&mut CancelInflight> {
        self.cancel_inflight.as_mut().filter(|c| c.id == id)
    }

    /// The cancel request failed: send it again later, or tell the application.
    fn on_cancel_failure(&mut self, now: Instant, failure: Failure) {
        if self.finished || self.failed {
            return; // nothing left to cancel
        }
        match self.cancel_policy.on_failure(now, &failure) {
            Decision::RetryAt(at) => {
                self.cancel_wanted = true;
                self.cancel_timer = Some(at);
                self.events.push_back(TaskEvent::Retrying {
                    kind: RequestKind::Cancel,
                    at,
                    failures: self.cancel_policy.failures(),
                });
            }
            Decision::GiveUp(reason) => {
                self.events
                    .push_back(TaskEvent::CancelFailed(match failure {
                        Failure::Http { status, error, .. } => TaskError::Http {
                            status,
                            error,
                            reason,
                        },
                        Failure::Transport => TaskError::Transport { reason },
                    }));
            }
        }
    }

    /// The status and headers of the answer to request `id` arrived.
    pub fn handle_head(&mut self, now: Instant, id: RequestId, status: u16, headers: &HeaderMap) {
        if let Some(c) = self.current_cancel(id) {
            c.status = Some(status);
            c.retry_after = retry_after(headers);
            return;
        }
        let max = self.cfg.max_body_bytes;
        let inactivity = self.cfg.inactivity_timeout;
        let Some(inflight) = self.current(id).filter(|i| matches!(i.phase, Phase::Sent)) else {
            return; // not ours, or a second head for one answer
        };
        let is_stream = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim_start().get(..17))
            .is_some_and(|v| v.eq_ignore_ascii_case("text/event-stream")); // RFC 9110 §8.3.1
        let failure = (!(200..300).contains(&status)).then(|| {
            Box::new(Failure::Http {
                status,
                error: None,
                retry_after: retry_after(headers),
            })
        });
        if failure.is_none() && is_stream && inflight.kind == RequestKind::Create {
            inflight.phase = Phase::Stream;
        } else {
            inflight.phase = Phase::Body {
                status,
                failure,
                buf: Vec::with_capacity(max.min(64 << 10)),
            };
        }
        self.inactivity = now.checked_add(inactivity);
    }

    /// Body bytes of the answer to request `id`.
    pub fn handle_data(&mut self, now: Instant, id: RequestId, bytes: &[u8]) {
        if let Some(c) = self.current_cancel(id) {
            // A success's body is not needed (the outcome arrives on the stream, or in the
            // stored response); an error's start is kept for its envelope.
            if c.status.is_some_and(|s| !(200..300).contains(&s)) {
                let room = MAX_CANCEL_ERROR_BODY.saturating_sub(c.buf.len());
                c.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            return;
        }
        let max = self.cfg.max_body_bytes;
        let inactivity = self.cfg.inactivity_timeout;
        let Some(inflight) = self.current(id) else {
            return;
        };
        match &mut inflight.phase {
            Phase::Stream => {
                self.inactivity = now.checked_add(inactivity);
                self.feed_stream(now, bytes);
            }
            Phase::Body { buf, .. } => {
                if buf.len() + bytes.len() > max {
                    self.fail(TaskError::BadBody(format!("body larger than {max} bytes")));
                } else {
                    buf.extend_from_slice(bytes);
                    self.inactivity = now.checked_add(inactivity);
                }
            }
            Phase::Sent => {}
        }
    }

    /// Decodes body bytes in place (only an incomplete event is copied into the decoder)
    /// into the task and the events the application polls, then drains as
    /// [`drain_stream`](Self::drain_stream) does (which ends the task on a terminal event).
    fn feed_stream(&mut self, now: Instant, bytes: &[u8]) {
        for ev in self.decoder.feed(bytes) {
            match ev {
                Ok(ev) => {
                    self.acc.add(&ev);
                    self.events.push_back(TaskEvent::Event(ev));
                }
                Err(f) => {
                    self.acc.add_finding(&f);
                    self.events.push_back(TaskEvent::Finding(f));
                }
            }
        }
        self.drain_stream(now);
    }

    fn drain_stream(&mut self, now: Instant) {
        loop {
            match self.decoder.poll_event() {
                Ok(Some(ev)) => {
                    self.acc.add(&ev);
                    self.events.push_back(TaskEvent::Event(ev));
                }
                Ok(None) => break,
                Err(f) => {
                    // What the server sent: debug level (a bad stream floods no log).
                    tracing::debug!(parent: &self.span, finding = ?f, "stream finding");
                    self.acc.add_finding(&f);
                    self.events.push_back(TaskEvent::Finding(f));
                }
            }
        }
        if self.acc.is_terminal() {
            self.finish();
        }
        self.maybe_send_cancel(now); // not for a task that just ended
    }

    /// The answer to request `id` ended normally.
    pub fn handle_end(&mut self, now: Instant, id: RequestId) {
        if let Some(c) = self.cancel_inflight.take_if(|c| c.id == id) {
            match c.status {
                Some(200..=299) => {}
                Some(status) => self.on_cancel_failure(
                    now,
                    Failure::Http {
                        status,
                        error: ErrorEnvelope::parse(&c.buf).map(|e| e.error),
                        retry_after: c.retry_after,
                    },
                ),
                None => self.on_cancel_failure(now, Failure::Transport),
            }
            return;
        }
        let Some(inflight) = self.inflight.take_if(|i| i.id == id) else {
            return;
        };
        self.inactivity = None; // the answer is complete; a request sent next sets its own
        match inflight.phase {
            Phase::Sent => self.on_failure(now, inflight.kind, Failure::Transport),
            Phase::Stream => {
                let end = self.decoder.finish().err();
                self.drain_stream(now);
                if let Some(f) = end {
                    self.acc.add_finding(&f);
                    self.events.push_back(TaskEvent::Finding(f));
                }
                self.stream_lost(now);
            }
            Phase::Body {
                status,
                failure: Some(failure),
                buf,
            } => {
                let failure = match *failure {
                    Failure::Http { retry_after, .. } => Failure::Http {
                        status,
                        error: ErrorEnvelope::parse(&buf).map(|e| e.error),
                        retry_after,
                    },
                    f => f,
                };
                self.on_failure(now, inflight.kind, failure);
            }
            Phase::Body { buf, .. } => {
                match serde_json::from_slice::<Value>(&buf).and_then(Response::from_value_lenient) {
                    Ok(r)
                        if self
                            .acc
                            .response_id()
                            .is_some_and(|id| !r.id.is_empty() && r.id != id) =>
                    {
                        // Another task's response: the server (or a cache) answers for the wrong
                        // task, and reading again would not help.
                        let msg = format!(
                            "the stored response is `{}`, not this task's `{}`",
                            excerpt(&r.id),
                            excerpt(self.acc.response_id().unwrap_or_default()),
                        );
                        self.fail(TaskError::BadBody(msg));
                    }
                    Ok(r) => {
                        self.policy.on_success();
                        self.acc.apply_response(&r);
                        if self.acc.is_terminal() {
                            self.finish();
                        } else {
                            self.maybe_send_cancel(now);
                            // Still running: read it again later (never re-create it), unless
                            // that read would start after the deadline.
                            let next = now.checked_add(self.cfg.poll_interval);
                            match (next, self.policy.deadline()) {
                                (Some(at), Some(d)) if at <= d => {
                                    self.timer = Some((at, RequestKind::Retrieve));
                                }
                                (Some(at), None) => self.timer = Some((at, RequestKind::Retrieve)),
                                (_, deadline) => {
                                    let reason = if deadline.is_some() {
                                        GiveUpReason::DeadlinePassed
                                    } else {
                                        GiveUpReason::DelayTooLong
                                    };
                                    let response_id =
                                        self.acc.response_id().unwrap_or_default().to_owned();
                                    self.fail(TaskError::StillInProgress {
                                        response_id,
                                        reason,
                                    });
                                }
                            }
                        }
                    }
                    Err(e) => self.fail(TaskError::BadBody(e.to_string())),
                }
            }
        }
    }

    /// The connection of request `id` failed (refused, reset, timed out, dropped mid-body).
    pub fn handle_transport_error(&mut self, now: Instant, id: RequestId) {
        if self.cancel_inflight.take_if(|c| c.id == id).is_some() {
            self.on_cancel_failure(now, Failure::Transport);
            return;
        }
        let Some(inflight) = self.inflight.take_if(|i| i.id == id) else {
            return;
        };
        self.inactivity = None;
        match inflight.phase {
            Phase::Stream => {
                let _ = self.decoder.finish(); // the partial event is gone with the connection
                self.drain_stream(now);
                self.stream_lost(now);
            }
            _ => self.on_failure(now, inflight.kind, Failure::Transport),
        }
    }

    /// The stream is gone without its terminal event: fetch the stored response.
    fn stream_lost(&mut self, now: Instant) {
        self.inactivity = None;
        if self.finished || self.failed {
            return;
        }
        match self.acc.response_id().map(str::to_owned) {
            Some(response_id) => {
                self.events.push_back(TaskEvent::StreamLost { response_id });
                self.send(now, RequestKind::Retrieve);
            }
            // No `response.created` seen: the create is retried with the same key, and the
            // server answers with the first request's task instead of running a second one.
            None => self.on_failure(now, RequestKind::Create, Failure::Transport),
        }
    }

    fn on_failure(&mut self, now: Instant, kind: RequestKind, failure: Failure) {
        match self.policy.on_failure(now, &failure) {
            Decision::RetryAt(at) => {
                self.timer = Some((at, kind));
                self.events.push_back(TaskEvent::Retrying {
                    kind,
                    at,
                    failures: self.policy.failures(),
                });
            }
            Decision::GiveUp(reason) => self.fail(match failure {
                Failure::Http { status, error, .. } => TaskError::Http {
                    status,
                    error,
                    reason,
                },
                Failure::Transport => TaskError::Transport { reason },
            }),
        }
    }

    /// Time passed: sends a scheduled retry or poll, or gives up on a silent connection — a
    /// stream (the stored response is fetched), or a request whose answer does not come (a
    /// transport failure: retried by the table, the create with the same key). Drop the
    /// abandoned connection; its late bytes are ignored.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.inactivity.is_some_and(|at| now >= at) {
            self.inactivity = None;
            if let Some(i) = self.inflight.take() {
                match i.phase {
                    Phase::Stream => {
                        let _ = self.decoder.finish();
                        self.drain_stream(now);
                        self.stream_lost(now);
                    }
                    Phase::Sent | Phase::Body { .. } => {
                        self.on_failure(now, i.kind, Failure::Transport);
                    }
                }
            }
        }
        if let Some((at, kind)) = self.timer {
            if now >= at && self.inflight.is_none() {
                self.timer = None;
                self.send(now, kind);
            }
        }
        if self.cancel_timer.is_some_and(|at| now >= at) {
            self.cancel_timer = None;
            self.maybe_send_cancel(now);
        }
    }

    /// The next request to send.
    #[must_use = "a polled request is gone from the queue: send it"]
    pub fn poll_transmit(&mut self) -> Option<ClientRequest> {
        self.transmits.pop_front()
    }

    /// The next event for the application.
    #[must_use = "a polled event is gone from the queue"]
    pub fn poll_event(&mut self) -> Option<TaskEvent> {
        self.events.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout).
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.timer.map(|t| t.0), self.inactivity, self.cancel_timer]
            .into_iter()
            .flatten()
            .min()
    }

    /// The task as accumulated so far.
    pub fn accumulator(&self) -> &TaskAccumulator {
        &self.acc
    }

    /// The idempotency key every create attempt carries.
    pub fn idempotency_key(&self) -> &IdempotencyKey {
        self.policy.idempotency_key()
    }

    /// How many create requests were sent (all with the same key).
    pub fn creates_sent(&self) -> u32 {
        self.creates_sent
    }

    /// Whether the answer to request `id` is still awaited. A driver drops the connection of
    /// an answer no longer awaited (the machine gave up on it, for instance a stalled stream
    /// after [`handle_timeout`](Self::handle_timeout)); its late bytes would be ignored.
    pub fn is_awaiting(&self, id: RequestId) -> bool {
        self.inflight.as_ref().is_some_and(|i| i.id == id)
            || self.cancel_inflight.as_ref().is_some_and(|c| c.id == id)
    }

    /// The task as accumulated, taken out of the finished (or failed) machine.
    pub fn into_accumulator(self) -> TaskAccumulator {
        self.acc
    }

    /// Whether the task reached a terminal state.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the task could not be finished.
    pub fn is_failed(&self) -> bool {
        self.failed
    }
}

/// The `Retry-After` of an answer, as a delay: an HTTP-date is measured from the answer's
/// own `Date` header (the server's clock, immune to client skew); without one it is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let ra = RetryAfter::parse(headers.get(RETRY_AFTER)?.to_str().ok()?)?;
    match ra {
        RetryAfter::Delay(d) => Some(d),
        RetryAfter::Date(_) => {
            let date = httpdate::parse_http_date(headers.get(DATE)?.to_str().ok()?).ok()?;
            Some(ra.delay_from(date))
        }
    }
}
