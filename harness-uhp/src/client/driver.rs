//! The HTTP driver of [`TaskClient`] (feature `client-hyper`): hyper 1 on tokio, TLS by
//! rustls with the `ring` provider and Mozilla's roots (the stack of harness-core's `openai`
//! feature). It only performs the machine's effects and passes it `now`: every retry, the
//! recovery of a dropped stream from the stored response and the polling of a task still
//! running are the sans-IO [`TaskClient`]'s decisions.
//!
//! Bounds: the connect timeout and the response-head timeout are this driver's
//! ([`HttpClientConfig`]); silence on a connection (a stream between its bytes, an answer's
//! head or body) is bounded by [`TaskClientConfig::inactivity_timeout`], which the machine
//! enforces ([`HttpTaskClient::idle_timeout`] sets it); bodies by
//! [`TaskClientConfig::max_body_bytes`] and the stream decoder's limits.
//!
//! ```no_run
//! use futures::StreamExt;
//! use harness_uhp::client::{CreateRequest, HttpTaskClient, TaskClientConfig, TaskEvent};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = HttpTaskClient::new(TaskClientConfig::new("http://127.0.0.1:8080").with_token("KEY"))?;
//!
//! // Stream a task's events as they come (the deltas, and the driver's notices)…
//! let mut run = client.run(CreateRequest::new("What are your hours?"));
//! while let Some(ev) = run.next().await {
//!     match ev {
//!         TaskEvent::Event(e) => println!("{}", e.to_value()),
//!         TaskEvent::StreamLost { response_id } => eprintln!("stream lost: reading {response_id} back"),
//!         _ => {}
//!     }
//! }
//! let task = run.finish().await?; // …then the finished task
//! println!("{:?}: {}", task.status(), task.text());
//!
//! // Or just the finished task.
//! let task = client.run_to_end(CreateRequest::new("And on Sunday?")).await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::Stream;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{ClientRequest, CreateRequest, RequestId, TaskClient, TaskClientConfig};
use super::{RequestKind, TaskError, TaskEvent};
use crate::accumulator::TaskAccumulator;
use crate::retry::RetryPolicy;

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The driver's own timeouts. Silence on an open connection is
/// [`TaskClientConfig::inactivity_timeout`]'s (the machine's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpClientConfig {
    /// The longest a TCP connect may take (default 10 s); past it the attempt is a transport
    /// failure, which the machine retries by its table.
    pub connect_timeout: Duration,
    /// The longest from sending a request to its answer's status line, TLS handshake
    /// included (default 5 min). It also bounds a repeated create, which the server may hold
    /// until the first request's task has a result and which the machine lets wait.
    pub head_timeout: Duration,
    /// How long an idle pooled connection is kept for the next request (default 60 s).
    pub pool_idle_timeout: Duration,
}

impl Default for HttpClientConfig {
    fn default() -> Self {
        HttpClientConfig {
            connect_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(300),
            pool_idle_timeout: Duration::from_secs(60),
        }
    }
}

/// The client could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpClientError {
    /// rustls refused the configuration.
    #[error("TLS setup: {0}")]
    Tls(String),
}

/// Runs UHP tasks over HTTP(S): each [`run`](Self::run) is one [`TaskClient`] driven to its
/// end. Cheap to clone (the connection pool is shared). Needs a tokio runtime with time and
/// I/O enabled.
#[derive(Clone)]
pub struct HttpTaskClient {
    cfg: TaskClientConfig,
    http: HttpClient,
    head_timeout: Duration,
}

impl fmt::Debug for HttpTaskClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTaskClient")
            .field("base_url", &self.cfg.base_url)
            .field("head_timeout", &self.head_timeout)
            .finish_non_exhaustive()
    }
}

impl HttpTaskClient {
    /// A client of the server `cfg` names, with the default timeouts. Opens nothing.
    pub fn new(cfg: TaskClientConfig) -> Result<Self, HttpClientError> {
        Self::with_config(cfg, HttpClientConfig::default())
    }

    /// A client with these timeouts.
    pub fn with_config(
        cfg: TaskClientConfig,
        http_cfg: HttpClientConfig,
    ) -> Result<Self, HttpClientError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(http_cfg.connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| HttpClientError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let http = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(http_cfg.pool_idle_timeout)
            .build(https);
        Ok(HttpTaskClient {
            cfg,
            http,
            head_timeout: http_cfg.head_timeout,
        })
    }

    /// Sets how long a connection may stay silent before the machine considers it lost
    /// ([`TaskClientConfig::inactivity_timeout`]).
    #[must_use]
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.cfg.inactivity_timeout = d;
        self
    }

    /// The task configuration every run uses.
    pub fn config(&self) -> &TaskClientConfig {
        &self.cfg
    }

    /// Starts a task (a fresh idempotency key, the default retry policy). Nothing is sent
    /// until the returned [`TaskRun`] is polled.
    pub fn run(&self, body: CreateRequest) -> TaskRun {
        self.run_with_policy(body, RetryPolicy::new())
    }

    /// Starts a task with this retry policy (and so its idempotency key: one persisted
    /// before a crash makes the server answer with the task it already runs).
    pub fn run_with_policy(&self, body: CreateRequest, policy: RetryPolicy) -> TaskRun {
        let mut task = TaskClient::with_policy(self.cfg.clone(), body, policy);
        task.start(Instant::now());
        TaskRun {
            driver: Some(Box::new(Driver {
                task,
                http: self.http.clone(),
                head_timeout: self.head_timeout,
                idle: self.cfg.inactivity_timeout,
                body: None,
                failure: None,
            })),
            pending: None,
            cancel_wanted: false,
        }
    }

    /// Runs a task to its end: the finished task, or why it could not be finished.
    pub async fn run_to_end(&self, body: CreateRequest) -> Result<TaskAccumulator, TaskError> {
        self.run(body).finish().await
    }
}

type Step = Pin<Box<dyn Future<Output = (Box<Driver>, Option<TaskEvent>)> + Send>>;

/// One task in progress: a [`Stream`] of its [`TaskEvent`]s — each streamed event
/// ([`TaskEvent::Event`]), and the machine's notices (a lost stream read back, a retry) —
/// ending after [`TaskEvent::Finished`] or [`TaskEvent::Failed`]. [`finish`](Self::finish)
/// drives it to its end and returns the task.
///
/// Dropping it closes its connection; the task goes on on the server (UHP tasks outlive
/// their streams).
pub struct TaskRun {
    driver: Option<Box<Driver>>,
    pending: Option<Step>,
    /// [`cancel`](Self::cancel) was called while an event was being awaited.
    cancel_wanted: bool,
}

impl fmt::Debug for TaskRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRun")
            .field("polling", &self.pending.is_some())
            .finish_non_exhaustive()
    }
}

impl TaskRun {
    /// Drives the task to its end (the events not read yet are dropped, already applied to
    /// the task): the finished task, or why it could not be finished.
    pub async fn finish(mut self) -> Result<TaskAccumulator, TaskError> {
        while futures::StreamExt::next(&mut self).await.is_some() {}
        match self.driver.take() {
            Some(d) if d.task.is_finished() => Ok(d.task.into_accumulator()),
            Some(d) => Err(d.failure.unwrap_or(TaskError::Stalled)),
            None => Err(TaskError::Stalled), // unreachable: the stream gives its driver back
        }
    }

    /// Asks the server to stop the task (`POST /v1/responses/{id}/cancel`, sent as soon as
    /// the task's id is known, again after a failure; [`TaskEvent::CancelFailed`] when it
    /// cannot be delivered). Keep reading the events: the task then ends `cancelled`.
    /// Dropping the run instead leaves the task running on the server ("A client that gives
    /// up MUST NOT assume the task stopped. It has not. Cancel it explicitly.").
    pub fn cancel(&mut self) {
        match self.driver.as_mut() {
            Some(d) => d.task.cancel(Instant::now()),
            // An event is being awaited (its future was dropped, as in a `select!`): the
            // cancel is asked for when that event arrives.
            None => self.cancel_wanted = true,
        }
    }

    /// The task as accumulated so far, between two events (`None` while an event is being
    /// awaited).
    pub fn accumulator(&self) -> Option<&TaskAccumulator> {
        self.driver.as_ref().map(|d| d.task.accumulator())
    }
}

impl Stream for TaskRun {
    type Item = TaskEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TaskEvent>> {
        let this = &mut *self;
        if this.pending.is_none() {
            let Some(mut d) = this.driver.take() else {
                return Poll::Ready(None);
            };
            if std::mem::take(&mut this.cancel_wanted) {
                d.task.cancel(Instant::now());
            }
            this.pending = Some(Box::pin(async move {
                let ev = d.next_event().await;
                (d, ev)
            }));
        }
        let Some(step) = this.pending.as_mut() else {
            return Poll::Ready(None);
        };
        match step.as_mut().poll(cx) {
            Poll::Ready((d, ev)) => {
                this.pending = None;
                this.driver = Some(d);
                Poll::Ready(ev)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The machine, the connection pool, and the answer being read.
struct Driver {
    task: TaskClient,
    http: HttpClient,
    head_timeout: Duration,
    /// The bound on a body read when the machine has no deadline of its own.
    idle: Duration,
    /// The answer whose body is being read (the create's stream, or a JSON body).
    body: Option<(RequestId, Incoming)>,
    /// The error of [`TaskEvent::Failed`], once it passed.
    failure: Option<TaskError>,
}

impl Driver {
    /// The next event for the application; `None` once the task ended and every event went.
    async fn next_event(&mut self) -> Option<TaskEvent> {
        loop {
            if let Some(ev) = self.task.poll_event() {
                if let TaskEvent::Failed(e) = &ev {
                    self.failure = Some(e.clone());
                }
                return Some(ev);
            }
            if self.task.is_finished() || self.task.is_failed() {
                self.body = None; // the rest of a body does not matter any more
                return None;
            }
            if self
                .body
                .as_ref()
                .is_some_and(|(id, _)| !self.task.is_awaiting(*id))
            {
                self.body = None; // given up on (a stalled stream): drop its connection
            }
            if let Some(req) = self.task.poll_transmit() {
                self.send(req).await;
            } else if self.body.is_some() {
                self.read_body().await;
            } else if let Some(at) = self.task.poll_timeout() {
                tokio::time::sleep_until(tokio::time::Instant::from_std(at.max(soonest()))).await;
                self.task.handle_timeout(Instant::now());
            } else {
                // Nothing to send, read or wait for, and no end: report it rather than hang.
                self.failure = Some(TaskError::Stalled);
                return None;
            }
        }
    }

    /// Sends a request and reads its answer's head; the body is read next (inline for a
    /// cancel's short answer).
    async fn send(&mut self, req: ClientRequest) {
        let ClientRequest { id, kind, request } = req;
        let (parts, body) = request.into_parts();
        let request = hyper::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let head_deadline = Instant::now() + self.head_timeout;
        let mut answer = self.http.request(request);
        let resp = loop {
            let until = self
                .task
                .poll_timeout()
                .map_or(head_deadline, |at| at.min(head_deadline))
                .max(soonest());
            match tokio::time::timeout_at(tokio::time::Instant::from_std(until), &mut answer).await
            {
                Ok(Ok(resp)) => break resp,
                Ok(Err(_)) => return self.task.handle_transport_error(Instant::now(), id),
                Err(_) => {
                    let now = Instant::now();
                    if now >= head_deadline {
                        return self.task.handle_transport_error(now, id);
                    }
                    // The machine's deadline: a retry timer, or it gives up on this request.
                    self.task.handle_timeout(now);
                    if !self.task.is_awaiting(id) {
                        return;
                    }
                }
            }
        };
        let (parts, body) = resp.into_parts();
        self.task
            .handle_head(Instant::now(), id, parts.status.as_u16(), &parts.headers);
        if kind == RequestKind::Cancel {
            // A short answer, read beside the stream (whose bytes wait in the socket).
            let mut body = Some((id, body));
            while body.is_some() && self.task.is_awaiting(id) {
                self.read(&mut body).await;
            }
        } else {
            self.body = Some((id, body));
        }
    }

    /// Reads the next piece of the body in progress.
    async fn read_body(&mut self) {
        let mut body = self.body.take();
        self.read(&mut body).await;
        if self.body.is_none() {
            self.body = body;
        }
    }

    /// Reads one piece of `body` into the machine, bounded by the machine's next deadline
    /// (or the idle bound); clears `body` at its end or on its error.
    async fn read(&mut self, body: &mut Option<(RequestId, Incoming)>) {
        let Some((id, incoming)) = body.as_mut() else {
            return;
        };
        let id = *id;
        let until = self
            .task
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + self.idle)
            .max(soonest());
        let frame =
            tokio::time::timeout_at(tokio::time::Instant::from_std(until), incoming.frame()).await;
        let now = Instant::now();
        match frame {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.task.handle_data(now, id, data);
                }
            }
            Ok(Some(Err(_))) => {
                *body = None;
                self.task.handle_transport_error(now, id);
            }
            Ok(None) => {
                *body = None;
                self.task.handle_end(now, id);
            }
            Err(_) => {
                self.task.handle_timeout(now);
                if self.task.poll_timeout().is_none() && self.task.is_awaiting(id) {
                    // No deadline of the machine's, and silent past the idle bound.
                    *body = None;
                    self.task.handle_transport_error(now, id);
                }
            }
        }
    }
}

/// The earliest a wait ends: a deadline already past (one the machine keeps) is waited for a
/// millisecond, never spun on.
fn soonest() -> Instant {
    Instant::now() + Duration::from_millis(1)
}
