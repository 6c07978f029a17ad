//! Serving a [`Harness`] as a TanStack host, runtime-agnostic (futures only).
//!
//! [`Service`] is the sans-IO [`Host`] behind a mutex, with the wakers of its connections:
//! HTTP handlers and socket loops call it, and read each connection as a
//! [`Stream`] of bytes ([`ConnStream`]), whose polling is the
//! back-pressure signal (bytes count as sent when the stream is polled again). [`run_turns`]
//! is the future that runs the turns the host asks for, with any harness:
//!
//! | the harness does | on the thread |
//! | --- | --- |
//! | `sink.model(req)` | the model streams: `TEXT_MESSAGE_START` / `CONTENT` / `END`, then `harness.usage` |
//! | `sink.output(delta)` | `TEXT_MESSAGE_CONTENT` (a message opened for it) |
//! | `sink.tool_call(call)` | `TOOL_CALL_START` / `ARGS` / `END`, the host's tool runs, `TOOL_CALL_RESULT` |
//! | `sink.report(result)` | `TOOL_CALL_RESULT` |
//! | `sink.usage(u)` | `harness.usage` |
//! | a `cancel` input | the turn's future is dropped; `RUN_FINISHED` with `outcome: {type:'cancelled'}` |
//!
//! Time: the service reads it from the clock function you give it (`Instant::now` in an
//! application, a virtual clock in a test); nothing here sleeps. Call [`Service::tick`] at
//! the instant [`Service::next_timeout`] returns (heartbeats, slow consumers).
//!
//! A harness served, and read by the [`Client`](crate::client::Client) over a connection
//! that is two function calls (no network, no runtime: `futures`' local executor; in an
//! application, `tokio::spawn(run_turns(…))` and the socket's read and write loops):
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use futures::StreamExt;
//! use futures::task::LocalSpawnExt;
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::{ToolDefinition, ToolResult};
//! use harness_core::model::ScriptedModel;
//! use harness_tanstack::agui::Event;
//! use harness_tanstack::client::{Client, ClientConfig, ClientEvent};
//! use harness_tanstack::driver::{Service, Tools, run_turns};
//! use harness_tanstack::frame::Input;
//! use harness_tanstack::host::{Host, HostConfig, Transport};
//! use harness_tanstack::log::MemoryLog;
//! use serde_json::json;
//!
//! let agent = ToolLoopAgent::new("weather")
//!     .with_tool(ToolDefinition::new("get_weather", "Current weather in a city"));
//! let model = ScriptedModel::new()
//!     .tool_call("get_weather", json!({"city": "Paris"}))
//!     .reply("Sunny in Paris.");
//! let tools = Tools::new()
//!     .with("get_weather", |call| ToolResult::ok_json(&call.id, json!({"celsius": 21})));
//! let service = Service::new(
//!     Host::new(HostConfig::default(), MemoryLog::default()),
//!     Arc::new(Instant::now),
//! );
//! let mut pool = futures::executor::LocalPool::new();
//! pool.spawner()
//!     .spawn_local(run_turns(service.clone(), Arc::new(agent), Arc::new(model), tools))
//!     .unwrap();
//!
//! let conn = service.connect(Transport::WebSocket, None, "upgrade-1");
//! let mut client = Client::new(ClientConfig::new("thread-1"));
//! client.connect(Instant::now());
//! client.send_input(Input::prompt("Weather in Paris?"));
//! while let Some(frame) = client.poll_transmit() {
//!     conn.handle_text(&frame); // client → host
//! }
//! let mut events = Vec::new();
//! pool.run_until(async {
//!     let mut to_client = conn.stream(); // host → client
//!     while let Some(bytes) = to_client.next().await {
//!         client.handle_frame(Instant::now(), std::str::from_utf8(&bytes).unwrap());
//!         while let Some(ev) = client.poll_event() {
//!             if let ClientEvent::Event(d) = ev {
//!                 let done = d.ends_run(); // RUN_FINISHED or RUN_ERROR
//!                 events.push(d.event);
//!                 if done {
//!                     return;
//!                 }
//!             }
//!         }
//!     }
//! });
//! let text: String = events
//!     .iter()
//!     .filter_map(|e| match e {
//!         Event::TextMessageContent(c) => Some(c.delta.as_str()),
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(text, "Sunny in Paris.");
//! assert!(events.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
//! ```

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::{AbortHandle, Abortable};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream, StreamExt};
use harness_core::event::{Event as CoreEvent, EventBody};
use harness_core::message::{ModelRequest, ModelResponse, Role, ToolCall, ToolResult, Usage};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::{EventSink, Harness, SinkError, Start};

use crate::Json;
use crate::agui::{
    self, Content, Event, TextMessageEnd, TextMessageStart, ToolCallArgs, ToolCallEnd,
    ToolCallResult, ToolCallStart,
};
use crate::catalog::{HarnessEvent, UsageEvent};
use crate::host::{ConnId, Host, HostEvent, Transport, TurnOutcome, TurnRequest};
use crate::http::HttpAnswer;
use crate::log::EventLog;

/// A tool the host runs for the harness (`sink.tool_call`).
pub type ToolFn = Arc<dyn Fn(&ToolCall) -> ToolResult + Send + Sync>;

/// The clock the service reads.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

struct Inner<L: EventLog> {
    host: Host<L>,
    wakers: HashMap<ConnId, Waker>,
    turns: VecDeque<HostEvent>,
    turn_waker: Option<Waker>,
    totals: HashMap<String, Usage>,
}

impl<L: EventLog> Inner<L> {
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
    /// A service over a host, reading time from `clock`.
    pub fn new(host: Host<L>, clock: Clock) -> Self {
        Service {
            inner: Arc::new(Mutex::new(Inner {
                host,
                wakers: HashMap::new(),
                turns: VecDeque::new(),
                turn_waker: None,
                totals: HashMap::new(),
            })),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<L>> {
        // A panic while holding the lock poisons it; the host's state is still consistent
        // (every method leaves it so), so go on with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Instant {
        (self.clock)()
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

    /// Heartbeats and slow consumers: call at [`next_timeout`](Self::next_timeout).
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

    fn emit(&self, thread: &str, op: &str, ev: Event) -> Result<(), SinkError> {
        let now = self.now();
        let mut g = self.lock();
        let r = g.host.emit(now, thread, op, ev);
        g.pump();
        r.map(|_| ())
            .map_err(|e| SinkError::Transport(e.to_string()))
    }

    fn finish(&self, thread: &str, op: &str, outcome: TurnOutcome) {
        let now = self.now();
        let mut g = self.lock();
        // ok: a log failure here cannot be reported to anyone but the log's own readers.
        let _ = g.host.finish_turn(now, thread, op, outcome);
        g.pump();
    }

    fn add_usage(&self, thread: &str, u: &Usage) -> Usage {
        let mut g = self.lock();
        let t = g.totals.entry(thread.to_owned()).or_default();
        t.add(u);
        t.clone()
    }

    fn next_turn_event(&self) -> impl std::future::Future<Output = HostEvent> + '_ {
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
    pub fn stream(&self) -> ConnStream<L> {
        self.service.stream(self.id)
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
            None if g.host.close_code(id).is_some() => {
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

/// The tools the host runs for `sink.tool_call`, by name.
#[derive(Clone, Default)]
pub struct Tools(HashMap<String, ToolFn>);

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Tools {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool.
    #[must_use]
    pub fn with(
        mut self,
        name: impl Into<String>,
        f: impl Fn(&ToolCall) -> ToolResult + Send + Sync + 'static,
    ) -> Self {
        self.0.insert(name.into(), Arc::new(f));
        self
    }
}

/// Runs the turns the host asks for, with `harness` (it never returns on its own: spawn it).
///
/// Run one per [`Service`]: the turns to start are a single queue with a single waiter, so
/// a second loop on the same service would take turns from the first (or never wake).
pub async fn run_turns<L, H>(
    service: Service<L>,
    harness: Arc<H>,
    model: Arc<dyn Model>,
    tools: Tools,
) where
    L: EventLog + 'static,
    H: Harness + ?Sized + 'static,
{
    let mut running = FuturesUnordered::new();
    let mut aborts: HashMap<String, AbortHandle> = HashMap::new();
    loop {
        futures::select_biased! {
            ev = service.next_turn_event().fuse() => match ev {
                HostEvent::StartTurn(t) => {
                    let (handle, reg) = AbortHandle::new_pair();
                    aborts.insert(t.operation_id.clone(), handle);
                    let svc = service.clone();
                    let harness = Arc::clone(&harness);
                    let model = Arc::clone(&model);
                    let tools = tools.clone();
                    let thread = t.thread_id.clone();
                    let op = t.operation_id.clone();
                    let fut = Abortable::new(run_one(svc, harness, model, tools, t), reg);
                    running.push(async move { (thread, op, fut.await) });
                }
                HostEvent::CancelTurn { operation_id, .. } => {
                    if let Some(h) = aborts.get(&operation_id) {
                        // Drops the turn's future at its next poll.
                        h.abort();
                    }
                }
                _ => {}
            },
            done = running.select_next_some() => {
                let (thread, op, result) = done;
                aborts.remove(&op);
                let outcome = match result {
                    Err(_aborted) => TurnOutcome::Cancelled,
                    Ok(o) => o,
                };
                service.finish(&thread, &op, outcome);
            }
        }
    }
}

async fn run_one<L: EventLog + 'static, H: Harness + ?Sized>(
    service: Service<L>,
    harness: Arc<H>,
    model: Arc<dyn Model>,
    tools: Tools,
    t: TurnRequest,
) -> TurnOutcome {
    let history = t
        .history
        .iter()
        .map(|m| {
            let body = if m.role == Role::Assistant {
                EventBody::Output(m.clone())
            } else {
                EventBody::Input(m.clone())
            };
            CoreEvent::new(t.operation_id.clone(), body)
        })
        .collect();
    let start = Start {
        execution_id: t.operation_id.clone(),
        session_uid: t.thread_id.clone(),
        history,
        inputs: vec![t.message.clone()],
        ..Start::default()
    };
    let mut sink = TanStackSink {
        service,
        thread: t.thread_id.clone(),
        op: t.operation_id.clone(),
        model,
        tools,
        open: None,
        next_message: 0,
    };
    let result = harness.run(start, &mut sink).await;
    sink.close_message();
    match result {
        Ok(()) => TurnOutcome::Completed,
        Err(e) if e.is_cancelled() => TurnOutcome::Cancelled,
        Err(e) => TurnOutcome::Failed {
            message: e.to_string(),
            code: None,
        },
    }
}

/// The [`EventSink`] of a turn on a TanStack thread.
struct TanStackSink<L: EventLog> {
    service: Service<L>,
    thread: String,
    op: String,
    model: Arc<dyn Model>,
    tools: Tools,
    open: Option<String>,
    next_message: u64,
}

impl<L: EventLog + 'static> TanStackSink<L> {
    fn emit(&self, ev: Event) -> Result<(), SinkError> {
        self.service.emit(&self.thread, &self.op, ev)
    }

    fn new_id(&mut self, kind: &str) -> String {
        self.next_message += 1;
        format!("{}-{kind}-{}", self.op, self.next_message)
    }

    fn open_message(&mut self) -> Result<String, SinkError> {
        if let Some(m) = &self.open {
            return Ok(m.clone());
        }
        let id = self.new_id("msg");
        self.emit(Event::TextMessageStart(TextMessageStart {
            message_id: id.clone(),
            role: Some(agui::TextMessageRole::Assistant),
            ..TextMessageStart::default()
        }))?;
        self.open = Some(id.clone());
        Ok(id)
    }

    fn close_message(&mut self) {
        if let Some(m) = self.open.take() {
            let _ = self.emit(Event::TextMessageEnd(TextMessageEnd {
                message_id: m,
                ..TextMessageEnd::default()
            }));
        }
    }

    fn usage_event(&self, u: &Usage, source: Option<&str>) -> Result<(), SinkError> {
        let total = self.service.add_usage(&self.thread, u);
        let as_json = |u: &Usage| {
            Json::from_value(&serde_json::json!({
                "inputTokens": u.input_tokens,
                "outputTokens": u.output_tokens,
                "totalTokens": u.input_tokens.saturating_add(u.output_tokens),
                "reasoningTokens": u.reasoning_tokens,
            }))
        };
        let ev = HarnessEvent::Usage(UsageEvent {
            model: u.model.clone(),
            source: source.map(str::to_owned),
            usage: as_json(u),
            total: as_json(&total),
            ..UsageEvent::default()
        });
        self.emit(ev.to_event())
    }

    fn result_event(&mut self, r: &ToolResult) -> Result<(), SinkError> {
        let content = if r.is_error {
            format!("error: {}", r.error)
        } else {
            serde_json::to_string(&r.output).unwrap_or_default()
        };
        let id = self.new_id("tool");
        self.emit(Event::ToolCallResult(ToolCallResult {
            message_id: id,
            tool_call_id: r.id.clone(),
            content: Content::Text(content),
            role: Some(agui::ToolRole::Tool),
            ..ToolCallResult::default()
        }))
    }
}

#[async_trait]
impl<L: EventLog + 'static> EventSink for TanStackSink<L> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        let model = Arc::clone(&self.model);
        let mut stream = model.stream(&req);
        let mut response = Err(SinkError::Model(ModelError::Incomplete));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ModelEvent::TextDelta(d)) => {
                    let id = self.open_message()?;
                    self.emit(Event::text_content(id, d))?;
                }
                Ok(ModelEvent::Completed(r)) => {
                    response = Ok(r);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    response = Err(SinkError::Model(e));
                    break;
                }
            }
        }
        drop(stream);
        self.close_message();
        let r = response?;
        if r.usage != Usage::default() {
            self.usage_event(&r.usage, None)?;
        }
        Ok(r)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        let id = self.open_message()?;
        self.emit(Event::text_content(id, delta))
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.close_message();
        self.emit(Event::ToolCallStart(ToolCallStart {
            tool_call_id: call.id.clone(),
            tool_call_name: call.tool.clone(),
            ..ToolCallStart::default()
        }))?;
        self.emit(Event::ToolCallArgs(ToolCallArgs {
            tool_call_id: call.id.clone(),
            delta: serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into()),
            ..ToolCallArgs::default()
        }))?;
        self.emit(Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: call.id.clone(),
            ..ToolCallEnd::default()
        }))?;
        let mut result = match self.tools.0.get(&call.tool) {
            Some(f) => f(&call),
            None => ToolResult::error(&call.id, format!("unknown tool: {}", call.tool)),
        };
        if result.id.is_empty() {
            result.id.clone_from(&call.id);
        }
        self.result_event(&result)?;
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.close_message();
        self.result_event(&result)
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.usage_event(&usage, None)
    }
}
