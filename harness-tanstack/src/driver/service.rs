//! The [`Service`]: the host behind a mutex, with the wakers of its connections and their streams.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use futures::Stream;
use harness_core::SinkError;
use harness_core::clock::MonotonicClock;
use harness_core::message::Usage;

use crate::agui::{self, AguiEvent};
use crate::host::{ConnId, Host, HostEvent, Routed, RunRouted, Transport, TurnOutcome};
use crate::http::HttpAnswer;
use crate::log::EventLog;

/// The clock a service reads, as it keeps it (pass any [`MonotonicClock`] to
/// [`Service::new`]).
pub type Clock = Arc<dyn MonotonicClock>;

struct Inner<L: EventLog> {
    host: Host<L>,
    wakers: HashMap<ConnId, Waker>,
    turns: VecDeque<HostEvent>,
    turn_waker: Option<Waker>,
    totals: HashMap<String, Usage>,
    /// Inputs this host forwarded to a thread's owner, by id: the owner's answer once it
    /// came, and the request that waits for it (one entry per waiting request: bounded by
    /// them).
    forwards: HashMap<u64, Forwarded>,
}

#[derive(Default)]
struct Forwarded {
    answer: Option<(u16, String)>,
    waker: Option<Waker>,
}

impl<L: EventLog> Inner<L> {
    /// The owner's answer to the request forwarded under `id` that came after its deadline:
    /// the one a forwarding listener already read, else the log's.
    fn late_answer(&mut self, id: u64) -> Option<(u16, String)> {
        self.forwards
            .get_mut(&id)
            .and_then(|f| f.answer.take())
            .or_else(|| self.host.log_mut().forwarded_answer(id).ok().flatten())
    }

    /// Drains the host's events (the str0m rule: after every mutation).
    fn pump(&mut self) {
        while let Some(ev) = self.host.poll_event() {
            match ev {
                HostEvent::Wake(c) => {
                    if let Some(w) = self.wakers.remove(&c) {
                        w.wake();
                    }
                }
                // The host keeps the close code until the stream is dropped.
                HostEvent::Close { conn, .. } => {
                    if let Some(w) = self.wakers.remove(&conn) {
                        w.wake();
                    }
                }
                other => {
                    self.turns.push_back(other);
                    if let Some(w) = self.turn_waker.take() {
                        w.wake();
                    }
                }
            }
        }
    }
}

/// Forgets a forwarded request's entry in `forwards` when its wait ends or is dropped.
struct Unregister<'a, L: EventLog>(&'a Service<L>, u64);

impl<L: EventLog> Drop for Unregister<'_, L> {
    fn drop(&mut self) {
        let mut g = self.0.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.forwards.remove(&self.1);
    }
}

/// A host shared by the tasks of an application. Cheap to clone.
pub struct Service<L: EventLog> {
    inner: Arc<Mutex<Inner<L>>>,
    clock: Clock,
}

impl<L: EventLog> Clone for Service<L> {
    fn clone(&self) -> Self {
        Service {
            inner: Arc::clone(&self.inner),
            clock: Arc::clone(&self.clock),
        }
    }
}

impl<L: EventLog> std::fmt::Debug for Service<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

impl<L: EventLog + 'static> Service<L> {
    /// A service over a host, reading time from `clock` (`Instant::now` in an application,
    /// a virtual clock in a test; pass an `Arc` of it to share one).
    pub fn new(host: Host<L>, clock: impl MonotonicClock + 'static) -> Self {
        Service {
            inner: Arc::new(Mutex::new(Inner {
                host,
                wakers: HashMap::new(),
                turns: VecDeque::new(),
                turn_waker: None,
                totals: HashMap::new(),
                forwards: HashMap::new(),
            })),
            clock: Arc::new(clock),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<L>> {
        // A panic while holding the lock poisons it; the host's state is still consistent
        // (every method leaves it so), so go on with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Runs `f` on the host, then pumps its events.
    pub fn with_host<R>(&self, f: impl FnOnce(&mut Host<L>, Instant) -> R) -> R {
        let now = self.now();
        let mut g = self.lock();
        let r = f(&mut g.host, now);
        g.pump();
        r
    }

    /// `POST control`.
    pub fn control(
        &self,
        user: Option<&str>,
        body: &[u8],
        request_id: &str,
        traceparent: Option<&str>,
    ) -> HttpAnswer {
        self.with_host(|h, now| h.control(now, user, body, request_id, traceparent))
    }

    /// `POST control` on a host that shares its log with others: an input for a thread
    /// that another host owns goes to that host, which runs it as a local input, and the
    /// answer is the owner's ([`Host::control_routed`]). It waits for that answer until
    /// `deadline` completes (the adapter's timer: the service reads no clock and never
    /// sleeps); then an input the owner has not taken yet is taken back and run here,
    /// where it takes the thread over if the owner's lease expired meanwhile (else it gets
    /// the `rejected` receipt with reason `not_owner`), and one the owner took but has not
    /// answered is `504 {error: "owner_timeout"}`. On a log of one process this is
    /// [`control`](Self::control).
    pub async fn control_forwarding(
        &self,
        user: Option<&str>,
        body: &[u8],
        request_id: &str,
        traceparent: Option<&str>,
        deadline: impl std::future::Future<Output = ()>,
    ) -> HttpAnswer {
        let routed = {
            let now = self.now();
            let mut g = self.lock();
            let r = g
                .host
                .control_routed(now, user, body, request_id, traceparent);
            if let Routed::Forwarded(id) = &r {
                g.forwards.insert(*id, Forwarded::default());
            }
            g.pump();
            r
        };
        let id = match routed {
            Routed::Forwarded(id) => id,
            Routed::Answer(a) => return a,
        };
        // The entry goes when this request does, answered or not: a request dropped while
        // it waits (its client went away) leaves nothing behind.
        let _unregister = Unregister(self, id);
        let got = self.owner_answer(id, deadline).await;
        let answer = |(status, body): (u16, String)| HttpAnswer {
            status,
            body,
            request_id: request_id.to_owned(),
        };
        if let Some(a) = got {
            return answer(a);
        }
        // No answer in time.
        let now = self.now();
        let mut g = self.lock();
        let withdrawn = g.host.log_mut().withdraw_forwarded(id);
        let r = match withdrawn {
            // The owner never took it: run it here (a takeover, when its lease expired).
            Ok(true) => g.host.control(now, user, body, request_id, traceparent),
            _ => match g.late_answer(id) {
                Some(a) => answer(a),
                None => HttpAnswer::error(504, "owner_timeout", request_id),
            },
        };
        g.pump();
        r
    }

    /// `POST run` on a host that shares its log with others, as
    /// [`control_forwarding`](Self::control_forwarding) is for `POST control`: a run for a
    /// thread that another host owns goes to that host ([`Host::run_routed`]), which starts
    /// it with no stream attached; its answer (`{runId, after}`) opens the run's stream here,
    /// read from the shared log to the run's `RUN_FINISHED` or `RUN_ERROR`
    /// ([`Host::follow_forwarded_run`]), and a refusal of the owner (`409 conflict`, `403`…)
    /// is the answer. Until `deadline` completes (the adapter's timer) it waits for the
    /// owner; then a run the owner has not taken yet is taken back and run here, where it
    /// takes the thread over if the owner's lease expired meanwhile (else
    /// `409 {error:"not_owner"}`), and one the owner took but has not answered is
    /// `504 {error:"owner_timeout"}`. On a log of one process this is
    /// [`Host::run_body`].
    pub async fn run_forwarding(
        &self,
        body: &[u8],
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
        deadline: impl std::future::Future<Output = ()>,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let routed = {
            let now = self.now();
            let mut g = self.lock();
            let r = g.host.run_routed(now, body, user, request_id, traceparent);
            if let RunRouted::Forwarded(id) = &r {
                g.forwards.insert(*id, Forwarded::default());
            }
            g.pump();
            r
        };
        let id = match routed {
            RunRouted::Forwarded(id) => id,
            RunRouted::Stream(c) => return Ok(self.stream(c)),
            RunRouted::Refused(a) => return Err(a),
        };
        let _unregister = Unregister(self, id);
        let got = self.owner_answer(id, deadline).await;
        let now = self.now();
        let mut g = self.lock();
        let r = match got {
            Some((status, answer)) => g
                .host
                .follow_forwarded_run(now, body, user, request_id, status, &answer),
            None => match g.host.log_mut().withdraw_forwarded(id) {
                // The owner never took it: run it here (a takeover, when its lease expired).
                Ok(true) => g.host.run_body(now, body, user, request_id, traceparent),
                _ => match g.late_answer(id) {
                    Some((status, answer)) => g
                        .host
                        .follow_forwarded_run(now, body, user, request_id, status, &answer),
                    None => Err(HttpAnswer::error(504, "owner_timeout", request_id)),
                },
            },
        };
        g.pump();
        drop(g);
        r.map(|c| self.stream(c))
    }

    /// The owner's answer to the request forwarded under `id` (registered in `forwards`,
    /// gone once answered), or `None` when `deadline` came first.
    async fn owner_answer(
        &self,
        id: u64,
        deadline: impl std::future::Future<Output = ()>,
    ) -> Option<(u16, String)> {
        let answered = futures::future::poll_fn(|cx| {
            let mut g = self.lock();
            match g.forwards.get_mut(&id) {
                Some(f) => match f.answer.take() {
                    Some(a) => {
                        g.forwards.remove(&id);
                        Poll::Ready(Some(a))
                    }
                    None => {
                        f.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
                None => Poll::Ready(None),
            }
        });
        let answered = std::pin::pin!(answered);
        let deadline = std::pin::pin!(deadline);
        match futures::future::select(answered, deadline).await {
            futures::future::Either::Left((a, _)) => a,
            futures::future::Either::Right(((), _)) => None,
        }
    }

    /// How many requests (`POST control`, `POST run`) wait for the answer of the thread's
    /// owner they were forwarded to: at most one per request in flight.
    pub fn waiting_forwards(&self) -> usize {
        self.lock().forwards.len()
    }

    /// How long an input forwarded to its thread's owner waits for the answer
    /// ([`HostConfig::forward_wait`](crate::host::HostConfig::forward_wait)): the deadline
    /// to give [`control_forwarding`](Self::control_forwarding) and
    /// [`run_forwarding`](Self::run_forwarding).
    pub fn forward_wait(&self) -> std::time::Duration {
        self.lock().host.config().forward_wait
    }

    /// Inputs other hosts forwarded to this one: runs them (see
    /// [`Host::handle_forwarded`]). Call it from a forwarding listener
    /// (`PgLog::listen_forwards`).
    pub fn handle_forwarded(&self) {
        self.with_host(|h, now| h.handle_forwarded(now));
    }

    /// The owner answered an input this host forwarded: the request that waits for it gets
    /// the answer. Call it from a forwarding listener (`PgLog::listen_forwards`).
    pub fn handle_forward_answer(&self, id: u64) {
        let now = self.now();
        let mut g = self.lock();
        if !g.forwards.contains_key(&id) {
            // A socket input's: the connection gets the owner's receipt.
            g.host.handle_forward_answer(now, id);
            g.pump();
            return;
        }
        if let Ok(Some(a)) = g.host.log_mut().forwarded_answer(id) {
            if let Some(f) = g.forwards.get_mut(&id) {
                f.answer = Some(a);
                if let Some(w) = f.waker.take() {
                    w.wake();
                }
            }
        }
    }

    /// `GET events`.
    #[allow(clippy::too_many_arguments)]
    pub fn open_sse(
        &self,
        thread_id: Option<&str>,
        v: Option<&str>,
        from: Option<&str>,
        last_event_id: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let id = self.with_host(|h, now| {
            h.open_sse(now, thread_id, v, from, last_event_id, user, request_id)
        })?;
        Ok(self.stream(id))
    }

    /// `GET host-events`.
    pub fn open_host_events(
        &self,
        v: Option<&str>,
        from: Option<&str>,
        last_event_id: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let id = self.with_host(|h, now| {
            h.open_host_events(now, v, from, last_event_id, user, request_id)
        })?;
        Ok(self.stream(id))
    }

    /// `POST run`.
    pub fn run_agui(
        &self,
        input: &agui::RunAgentInput,
        user: Option<&str>,
        request_id: &str,
        traceparent: Option<&str>,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let id = self.with_host(|h, now| h.run_agui(now, input, user, request_id, traceparent))?;
        Ok(self.stream(id))
    }

    /// `GET run`.
    pub fn open_run(
        &self,
        thread_id: &str,
        run_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let id = self.with_host(|h, now| h.open_run(now, thread_id, run_id, user, request_id))?;
        Ok(self.stream(id))
    }

    /// `GET run?runId=&offset=` (`joinRun`): see [`Host::join_run`].
    pub fn join_run(
        &self,
        thread_id: Option<&str>,
        run_id: &str,
        offset: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnStream<L>, HttpAnswer> {
        let id =
            self.with_host(|h, now| h.join_run(now, thread_id, run_id, offset, user, request_id))?;
        Ok(self.stream(id))
    }

    /// `GET run?threadId=` (`hydrate`): see [`Host::hydrate`].
    pub fn hydrate(&self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        self.with_host(|h, _| h.hydrate(thread_id, user, request_id))
    }

    /// A WebSocket or stdio connection: feed its frames with [`Connection::handle_text`],
    /// send what [`Connection::stream`] yields.
    pub fn connect(
        &self,
        transport: Transport,
        user: Option<&str>,
        request_id: &str,
    ) -> Connection<L> {
        let id = self.with_host(|h, now| h.connect(now, transport, user, request_id));
        Connection {
            service: self.clone(),
            id,
            streamed: AtomicBool::new(false),
        }
    }

    /// `GET snapshot`.
    pub fn snapshot(&self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        self.with_host(|h, _| h.snapshot(thread_id, user, request_id))
    }

    /// `GET transcript`.
    pub fn transcript(&self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        self.with_host(|h, _| h.transcript(thread_id, user, request_id))
    }

    /// `GET capabilities`.
    pub fn capabilities(&self, name: &str, request_id: &str) -> HttpAnswer {
        self.with_host(|h, _| h.capabilities(name, request_id))
    }

    /// Another host appended to the thread stored under `key` on a shared log: this host's
    /// streams of the thread read the new records ([`Host::handle_appended`]). Call it from a
    /// log listener (`PgLog::listen`), for example.
    pub fn handle_appended(&self, key: &str) {
        self.with_host(|h, now| h.handle_appended(now, key));
    }

    /// Heartbeats, slow consumers, and forwarded socket inputs past their wait: call at
    /// [`next_timeout`](Self::next_timeout).
    pub fn tick(&self) {
        let now = self.now();
        let mut g = self.lock();
        if g.host.poll_timeout().is_some_and(|t| t <= now) {
            g.host.handle_timeout(now);
        }
        g.pump();
    }

    /// When to call [`tick`](Self::tick) next.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.lock().host.poll_timeout()
    }

    fn stream(&self, id: ConnId) -> ConnStream<L> {
        ConnStream {
            service: self.clone(),
            id,
            unacked: 0,
            done: false,
        }
    }

    pub(super) fn emit(&self, thread: &str, op: &str, ev: AguiEvent) -> Result<(), SinkError> {
        let now = self.now();
        let mut g = self.lock();
        let r = g.host.emit_seq(now, thread, op, ev);
        g.pump();
        r.map(|_| ())
            .map_err(|e| SinkError::Transport(e.to_string()))
    }

    pub(super) fn finish(&self, thread: &str, op: &str, outcome: TurnOutcome) {
        let now = self.now();
        let mut g = self.lock();
        // ok: a log failure here cannot be reported to anyone but the log's own readers.
        let _ = g.host.finish_turn(now, thread, op, outcome);
        g.pump();
    }

    pub(super) fn add_usage(&self, thread: &str, u: &Usage) -> Usage {
        let mut g = self.lock();
        let t = g.totals.entry(thread.to_owned()).or_default();
        t.add(u);
        t.clone()
    }

    pub(super) fn next_turn_event(&self) -> impl std::future::Future<Output = HostEvent> + '_ {
        futures::future::poll_fn(move |cx| {
            let mut g = self.lock();
            match g.turns.pop_front() {
                Some(e) => Poll::Ready(e),
                None => {
                    g.turn_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

/// A WebSocket or stdio connection of a [`Service`].
#[derive(Debug)]
pub struct Connection<L: EventLog> {
    service: Service<L>,
    id: ConnId,
    /// Whether [`stream`](Self::stream) gave the connection's stream already.
    streamed: AtomicBool,
}

/// Why [`Connection::stream`] gave no stream: a connection has one stream, and dropping it
/// disconnects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The connection's stream was taken and is still read: a second one would take its
    /// bytes.
    #[error("this connection already has its stream")]
    Taken,
    /// The connection's stream was dropped, and with it the connection: connect again.
    #[error("this connection's stream was dropped, and the connection with it")]
    Disconnected,
}

impl<L: EventLog + 'static> Connection<L> {
    /// The connection's id.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// A frame from the client (a text frame, an NDJSON line).
    pub fn handle_text(&self, text: &str) {
        self.service
            .with_host(|h, now| h.handle_frame(now, self.id, text));
    }

    /// The bytes to send, as a stream. Ends when the host closes the connection
    /// (see [`ConnStream::close_code`]).
    ///
    /// A connection has one stream: a second call is [`StreamError::Taken`] while the first
    /// stream lives, and [`StreamError::Disconnected`] once it was dropped (dropping it
    /// disconnects), never a stream that waits for ever.
    pub fn stream(&self) -> Result<ConnStream<L>, StreamError> {
        if self.streamed.swap(true, Ordering::SeqCst) {
            let known = self.service.lock().host.has_connection(self.id);
            return Err(if known {
                StreamError::Taken
            } else {
                StreamError::Disconnected
            });
        }
        Ok(self.service.stream(self.id))
    }
}

/// The bytes a connection sends: SSE events, WebSocket text frames, or NDJSON lines.
/// Polling it again acknowledges what it yielded before (back-pressure); dropping it
/// disconnects.
pub struct ConnStream<L: EventLog> {
    service: Service<L>,
    id: ConnId,
    unacked: usize,
    done: bool,
}

impl<L: EventLog> std::fmt::Debug for ConnStream<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<L: EventLog + 'static> ConnStream<L> {
    /// The connection's id.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// The WebSocket close code, once the stream ended because the host closed it.
    pub fn close_code(&self) -> Option<u16> {
        self.service.lock().host.close_code(self.id)
    }
}

impl<L: EventLog + 'static> Stream for ConnStream<L> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if self.done {
            return Poll::Ready(None);
        }
        let now = self.service.now();
        let id = self.id;
        let unacked = std::mem::take(&mut self.unacked);
        let mut g = self.service.lock();
        if unacked > 0 {
            g.host.sent(now, id, unacked);
        }
        let next = g.host.poll_transmit(now, id);
        g.pump();
        match next {
            Some(b) => {
                drop(g);
                self.unacked = b.len();
                Poll::Ready(Some(b))
            }
            // Closed by the host, or no longer a connection of it (disconnected): the end,
            // never a wait for bytes that cannot come.
            None if g.host.close_code(id).is_some() || !g.host.has_connection(id) => {
                drop(g);
                self.done = true;
                Poll::Ready(None)
            }
            None => {
                g.wakers.insert(id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<L: EventLog> Drop for ConnStream<L> {
    fn drop(&mut self) {
        let mut g = self.inner_lock();
        g.host.disconnect(self.id);
        g.wakers.remove(&self.id);
    }
}

impl<L: EventLog> ConnStream<L> {
    fn inner_lock(&self) -> MutexGuard<'_, Inner<L>> {
        self.service.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}
