//! Serving any [`Harness`] over UHP: the driver around the sans-IO [`Server`], `futures`
//! only (no runtime; the application spawns [`Host::run`] on its own and gives it a `sleep`).
//!
//! [`Host`] owns the machine behind a mutex and does what its events ask:
//! - [`ServerEvent::StartTurn`]: runs the turn — the registered harness's `run` with a
//!   [`EventSink`] of this host — concurrently with every other turn, inside
//!   [`Host::run`];
//! - [`ServerEvent::StopTurn`]: drops that turn's future (cancellation really stops the
//!   agent; a sink call after it answers [`SinkError::Cancelled`]);
//! - [`ServerEvent::Wake`]: wakes the HTTP body or the waiting request it names;
//! - [`ServerEvent::Persist`]: hands the record to the [`Store`], in order.
//!
//! What the agent does, in UHP's words:
//!
//! | the agent | the task |
//! | --- | --- |
//! | `sink.model(req)` | the host's [`Model`], with the task's model id; each delta a `response.output_text.delta`; its usage the response's `usage`; one step of `max_step` |
//! | `sink.output(delta)` | `response.output_text.delta` |
//! | `sink.reasoning(delta)` | a `reasoning` item, `response.reasoning_summary_text.delta` |
//! | `sink.tool_call(call)` | [`rules::check_call`], a `function_call` item, then [`rules::gate`]: a gated tool runs only if the host's [`ApprovalPolicy`] approves (UHP has no approval channel; deny by default) and a tool the configured harness disables is refused; the result a `function_call_output` item |
//! | `sink.report(result)` | a `function_call_output` item |
//! | `sink.usage(u)` | the response's `usage`, unless the host's model calls already counted it |
//! | `ask`, `handoff`, `command`, `state`, `step` | [`SinkError::Unsupported`]: UHP has no way to carry them |
//!
//! [`FileTools`] gives the host's tools a session's folder: `write_file` makes an artifact of
//! the task's container (cited on its final message, listed, downloadable), `read_file`
//! reads it back, and the harness's skills under `skills/<name>/…`.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use futures::channel::mpsc;
use futures::future::AbortHandle;
use futures::{Future, FutureExt, Stream, StreamExt};
use harness_core::clock::MonotonicClock;
use harness_core::interaction::Feature;
use harness_core::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::tool::rules::{self, ApprovalPolicy, Gate};
use harness_core::tool::{Tool, ToolContext, Tools};
use harness_core::{EventSink, Harness, HarnessError, SinkError};
use serde_json::{Value, json};

use super::store::{MemoryStore, Record, Store, StoreError};
use super::{
    Base, Now, Principal, Reply, Request, Server, ServerConfig, ServerEvent, StreamId, StreamPoll,
    TurnEnd, TurnStart, WaitId, Wake,
};

/// Who is calling, as the transport (or the application's auth hook) decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The server checks the `Authorization: Bearer` token against its keys.
    Bearer,
    /// The application authenticated the caller as this principal.
    Principal(Principal),
    /// The application found no acceptable credential: answered 401.
    Anonymous,
}

/// A response body.
#[derive(Debug)]
pub enum Body {
    /// The whole body.
    Full(Vec<u8>),
    /// An event stream: each item is sent as it comes.
    Stream(EventStream),
}

type WallMs = Arc<dyn Fn() -> i64 + Send + Sync>;
type Receivers = (
    mpsc::UnboundedReceiver<TurnStart>,
    mpsc::UnboundedReceiver<Vec<Record>>,
);
type Configure = Box<dyn FnOnce(&mut ServerConfig) + Send>;

struct State {
    server: Server,
    stream_wakers: HashMap<StreamId, Waker>,
    wait_wakers: HashMap<WaitId, Waker>,
    aborts: HashMap<String, AbortHandle>,
    stopped: HashSet<String>,
}

struct Shared {
    state: Mutex<State>,
    harnesses: HashMap<String, Arc<dyn Harness>>,
    model: Arc<dyn Model>,
    tools: Tools,
    policy: ApprovalPolicy,
    clock: Arc<dyn MonotonicClock>,
    wall_ms: WallMs,
    store: Arc<dyn Store>,
    turn_tx: mpsc::UnboundedSender<TurnStart>,
    store_tx: mpsc::UnboundedSender<Vec<Record>>,
    receivers: Mutex<Option<Receivers>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not take the server down with it: the state is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Now {
        Now::new(self.clock.now(), (self.wall_ms)())
    }

    /// Runs `f` on the machine, then does what its events ask.
    fn call<R>(&self, f: impl FnOnce(&mut Server, Now) -> R) -> R {
        let now = self.now();
        let mut st = self.lock();
        let r = f(&mut st.server, now);
        self.dispatch(&mut st);
        r
    }

    fn dispatch(&self, st: &mut State) {
        let mut records = Vec::new();
        while let Some(ev) = st.server.poll_event() {
            match ev {
                ServerEvent::Wake(Wake::Stream(id)) => {
                    if let Some(w) = st.stream_wakers.remove(&id) {
                        w.wake();
                    }
                }
                ServerEvent::Wake(Wake::Wait(id)) => {
                    if let Some(w) = st.wait_wakers.remove(&id) {
                        w.wake();
                    }
                }
                ServerEvent::StartTurn(t) => {
                    let rid = t.response_id.clone();
                    if self.turn_tx.unbounded_send(*t).is_err() {
                        // No runner: the task cannot run; it fails rather than hangs.
                        st.server.turn_end(self.now(), &rid, TurnEnd::HarnessFailed);
                    }
                }
                ServerEvent::StopTurn { response_id } => match st.aborts.remove(&response_id) {
                    Some(h) => h.abort(),
                    None => {
                        st.stopped.insert(response_id);
                    }
                },
                ServerEvent::Persist(r) => records.push(*r),
            }
        }
        if !records.is_empty() {
            let _ = self.store_tx.unbounded_send(records); // ok: no runner, nothing to keep
        }
    }
}

/// A UHP server serving registered [`Harness`]es: the machine, its turns, its store. Cheap
/// to clone.
///
/// ```
/// use std::time::{Instant, SystemTime, UNIX_EPOCH};
/// use harness_core::agent::ToolLoopAgent;
/// use harness_core::model::ScriptedModel;
/// use harness_uhp::server::driver::{Body, Caller, Host};
///
/// let wall = || SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
/// futures::executor::block_on(async {
///     let host = Host::builder(ScriptedModel::new().reply("We open at eight."))
///         .harness("faq", "FAQ", ToolLoopAgent::new("faq"))
///         .models(["scripted"])
///         .api_key("k", "alice")
///         .build(Instant::now, wall)
///         .await
///         .unwrap();
///     let runner = host.run(|_d| futures::future::pending::<()>());
///     let req = http::Request::post("/v1/responses")
///         .header("authorization", "Bearer k")
///         .body(br#"{"input":"When do you open?"}"#.to_vec())
///         .unwrap();
///     let answer = host.handle(Caller::Bearer, req);
///     // The turn runs inside `run`; the non-streaming answer comes when it is done.
///     let resp = futures::future::select(Box::pin(answer), Box::pin(runner)).await;
///     let futures::future::Either::Left((resp, _)) = resp else { unreachable!() };
///     let Body::Full(bytes) = resp.into_body() else { unreachable!() };
///     let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
///     assert_eq!(v["status"], "completed");
///     assert_eq!(v["output"][0]["content"][0]["text"], "We open at eight.");
/// });
/// ```
#[derive(Clone)]
pub struct Host {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field(
                "harnesses",
                &self.shared.harnesses.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Builds a [`Host`].
pub struct HostBuilder {
    model: Arc<dyn Model>,
    harnesses: Vec<(Base, Arc<dyn Harness>)>,
    models: Vec<String>,
    tools: Tools,
    file_tools: Option<FileTools>,
    policy: ApprovalPolicy,
    keys: Vec<(String, Principal)>,
    store: Arc<dyn Store>,
    configure: Vec<Configure>,
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host whose agents' `sink.model` calls go to `model`.
    pub fn builder(model: impl Model + 'static) -> HostBuilder {
        HostBuilder {
            model: Arc::new(model),
            harnesses: Vec::new(),
            models: vec!["default".into()],
            tools: Tools::new(),
            file_tools: None,
            policy: ApprovalPolicy::default(),
            keys: Vec::new(),
            store: Arc::new(MemoryStore),
            configure: Vec::new(),
        }
    }

    /// Answers one HTTP request. A non-streaming task's answer comes when the task ends;
    /// dropping this future (the client went away) leaves the task running.
    pub async fn handle(
        &self,
        caller: Caller,
        req: http::Request<Vec<u8>>,
    ) -> http::Response<Body> {
        let (parts, body) = req.into_parts();
        let target = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let reply = self.shared.call(|s, now| {
            let r = Request::new(parts.method.as_str(), &target, &parts.headers, &body);
            match caller {
                Caller::Bearer => s.handle_request(now, &r),
                Caller::Principal(p) => s.handle_request_as(now, Some(p), &r),
                Caller::Anonymous => s.handle_request_as(now, None, &r),
            }
        });
        match reply {
            Reply::Full(r) => r.map(Body::Full),
            Reply::Stream(head, id) => head.map(|()| {
                Body::Stream(EventStream {
                    shared: Arc::clone(&self.shared),
                    id,
                    done: false,
                })
            }),
            Reply::Wait(id) => WaitFor {
                shared: Arc::clone(&self.shared),
                id,
                done: false,
            }
            .await
            .map(Body::Full),
        }
    }

    /// The `413` for a body the transport stopped reading at
    /// [`ServerConfig::max_request_bytes`].
    pub fn body_too_large(&self) -> http::Response<Vec<u8>> {
        self.shared.lock().server.body_too_large()
    }

    /// The largest body a transport should read.
    pub fn max_request_bytes(&self) -> usize {
        self.shared.lock().server.config().max_request_bytes()
    }

    /// Runs `f` on the machine (admin: keys, snapshots, counts), then does what it asks.
    pub fn with_server<R>(&self, f: impl FnOnce(&mut Server, Now) -> R) -> R {
        self.shared.call(f)
    }

    /// Runs the turns, the store writer and the timers; spawn it once. `sleep(d)` waits `d`
    /// on the application's runtime. Only the first call does anything; it ends when every
    /// [`Host`] is dropped… except for its timer loop, so spawn it detached.
    pub fn run<S, F>(&self, sleep: S) -> impl Future<Output = ()> + Send + 'static
    where
        S: Fn(Duration) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let receivers = shared
            .receivers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        async move {
            let Some((turns, records)) = receivers else {
                return;
            };
            let weak = Arc::downgrade(&shared);
            let store = Arc::clone(&shared.store);
            drop(shared);
            let turns_weak = weak.clone();
            let run_turns = async move {
                let mut turns = turns;
                let mut running = futures::stream::FuturesUnordered::new();
                loop {
                    futures::select! {
                        t = turns.next() => match t {
                            Some(t) => {
                                if let Some(s) = turns_weak.upgrade() {
                                    running.push(run_turn(s, t).boxed());
                                }
                            }
                            None => break,
                        },
                        () = running.select_next_some() => {},
                    }
                }
                while running.next().await.is_some() {}
            };
            let write = async move {
                let mut records = records;
                while let Some(batch) = records.next().await {
                    // A failed write is not retried here: the machine keeps serving from
                    // memory, and the next compaction rewrites everything.
                    let _ = store.append(batch).await;
                }
            };
            let timers = async move {
                loop {
                    let wait = match weak.upgrade() {
                        None => break,
                        Some(s) => {
                            let next = s.lock().server.poll_timeout();
                            let now = s.clock.now();
                            next.map_or(Duration::from_secs(1), |at| {
                                at.saturating_duration_since(now)
                                    .min(Duration::from_secs(1))
                            })
                        }
                    };
                    sleep(wait).await;
                    match weak.upgrade() {
                        None => break,
                        Some(s) => s.call(|srv, now| srv.handle_timeout(now)),
                    }
                }
            };
            futures::join!(run_turns, write, timers);
        }
    }
}

impl HostBuilder {
    /// Registers a harness under `base` (its built-in configured harness is listed; the
    /// first registered is the default).
    #[must_use]
    pub fn harness(mut self, base: &str, label: &str, harness: impl Harness + 'static) -> Self {
        self.harnesses.push((
            Base {
                base: base.to_owned(),
                label: label.to_owned(),
            },
            Arc::new(harness),
        ));
        self
    }

    /// The model ids the model serves (the first is the default).
    #[must_use]
    pub fn models<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.models = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The tools the host runs for `sink.tool_call`.
    #[must_use]
    pub fn tools(mut self, tools: Tools) -> Self {
        self.tools = tools;
        self
    }

    /// Binds [`FileTools`] (whose tools should also be in [`tools`](Self::tools)) to this host.
    #[must_use]
    pub fn file_tools(mut self, files: &FileTools) -> Self {
        self.file_tools = Some(files.clone());
        self
    }

    /// How gated tool calls are decided (default: denied; UHP has no way to ask a person).
    #[must_use]
    pub fn approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Accepts a bearer token for a principal.
    #[must_use]
    pub fn api_key(mut self, token: &str, principal: &str) -> Self {
        self.keys
            .push((token.to_owned(), Principal::new(principal)));
        self
    }

    /// Where records go (default [`MemoryStore`]).
    #[must_use]
    pub fn store(mut self, store: impl Store + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Changes the server's configuration (bounds, names).
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut ServerConfig) + Send + 'static) -> Self {
        self.configure.push(Box::new(f));
        self
    }

    /// The host, its store read back. `clock` gives monotonic time, `wall_ms` the Unix time
    /// in milliseconds: the host reads them, the library never does.
    pub async fn build(
        self,
        clock: impl MonotonicClock + 'static,
        wall_ms: impl Fn() -> i64 + Send + Sync + 'static,
    ) -> Result<Host, StoreError> {
        let bases = self.harnesses.iter().map(|(b, _)| b.clone()).collect();
        let mut cfg = ServerConfig::new(bases, self.models);
        cfg.persist = self.store.durable();
        for f in self.configure {
            f(&mut cfg);
        }
        let mut server = Server::new(cfg);
        for (k, p) in self.keys {
            server.add_api_key(&k, p);
        }
        for r in self.store.load().await? {
            server.restore(r);
        }
        let (turn_tx, turn_rx) = mpsc::unbounded();
        let (store_tx, store_rx) = mpsc::unbounded();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                server,
                stream_wakers: HashMap::new(),
                wait_wakers: HashMap::new(),
                aborts: HashMap::new(),
                stopped: HashSet::new(),
            }),
            harnesses: self
                .harnesses
                .into_iter()
                .map(|(b, h)| (b.base, h))
                .collect(),
            model: self.model,
            tools: self.tools,
            policy: self.policy,
            clock: Arc::new(clock),
            wall_ms: Arc::new(wall_ms),
            store: self.store,
            turn_tx,
            store_tx,
            receivers: Mutex::new(Some((turn_rx, store_rx))),
        });
        if let Some(f) = self.file_tools {
            let _ = f.host.set(Arc::downgrade(&shared)); // ok: bound to its first host only
        }
        Ok(Host { shared })
    }
}

async fn run_turn(shared: Arc<Shared>, turn: TurnStart) {
    let rid = turn.response_id.clone();
    let Some(harness) = shared.harnesses.get(&turn.base).cloned() else {
        shared.call(|s, now| s.turn_end(now, &rid, TurnEnd::HarnessFailed));
        return;
    };
    let mut sink = TurnSink {
        shared: Arc::clone(&shared),
        rid: rid.clone(),
        session_id: turn.session_id.clone(),
        model: turn.model.clone(),
        disabled: turn.disabled_tools.clone(),
        max_output_tokens: turn.max_output_tokens,
        model_usage: false,
    };
    let start = turn.start;
    // A harness (or a tool) that panics fails its task, not the host.
    let (fut, handle) = futures::future::abortable(
        std::panic::AssertUnwindSafe(async move {
            let r = harness.run(start, &mut sink).await;
            drop(sink);
            r
        })
        .catch_unwind(),
    );
    {
        let mut st = shared.lock();
        if st.stopped.remove(&rid) || !st.server.running.contains(&rid) {
            return; // stopped before it started
        }
        st.aborts.insert(rid.clone(), handle);
    }
    let result = fut.await;
    {
        // A stop that raced the turn's own end finds nothing left to abort.
        let mut st = shared.lock();
        st.aborts.remove(&rid);
        st.stopped.remove(&rid);
    }
    let end = match result {
        Err(_aborted) => return, // the machine already ended the task
        Ok(Ok(Ok(()))) => TurnEnd::Completed,
        Ok(Ok(Err(HarnessError::Sink(SinkError::Model(_))))) => TurnEnd::ProviderFailed,
        Ok(Ok(Err(_))) | Ok(Err(_)) => TurnEnd::HarnessFailed, // failed, or panicked
    };
    shared.call(|s, now| s.turn_end(now, &rid, end));
}

/// The sink of one task's turn.
struct TurnSink {
    shared: Arc<Shared>,
    rid: String,
    session_id: String,
    model: String,
    disabled: Vec<String>,
    max_output_tokens: Option<u64>,
    model_usage: bool,
}

impl TurnSink {
    fn text(&self, delta: &str) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_text(now, &self.rid, delta))
            .map_err(|_| SinkError::Cancelled)
    }
}

#[async_trait]
impl EventSink for TurnSink {
    async fn model(&mut self, mut req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.shared
            .call(|s, now| s.turn_step(now, &self.rid))
            .map_err(|_| SinkError::Cancelled)?;
        // The task decides the model; a disabled tool is not even offered (a hard block).
        req.model.clone_from(&self.model);
        req.tools.retain(|t| !self.disabled.contains(&t.name));
        if let Some(n) = self.max_output_tokens {
            req.params.insert("max_output_tokens".into(), n.to_string());
        }
        let model = Arc::clone(&self.shared.model);
        let mut stream = model.stream(&req);
        let mut streamed = false;
        while let Some(ev) = stream.next().await {
            match ev.map_err(SinkError::Model)? {
                ModelEvent::TextDelta(d) => {
                    streamed = true;
                    self.text(&d)?;
                }
                ModelEvent::Completed(resp) => {
                    if !streamed {
                        let text = resp.message.text();
                        if !text.is_empty() {
                            self.text(&text)?;
                        }
                    }
                    if resp.usage != Usage::default() {
                        self.model_usage = true;
                        self.shared
                            .call(|s, _| s.turn_usage(&self.rid, &resp.usage))
                            .map_err(|_| SinkError::Cancelled)?;
                    }
                    return Ok(resp);
                }
                _ => {}
            }
        }
        Err(SinkError::Model(ModelError::Incomplete))
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.text(delta)
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        rules::check_call(&call)?;
        self.shared
            .call(|s, now| s.turn_tool_call(now, &self.rid, &call))
            .map_err(|_| SinkError::Cancelled)?;
        let cx = ToolContext::new(self.session_id.clone(), self.rid.clone());
        let result = if self.disabled.contains(&call.tool) {
            ToolResult::denied(
                &call.id,
                &format!("{} is disabled by this harness's configuration", call.tool),
            )
        } else {
            match rules::gate(call, &self.shared.tools) {
                Gate::Run(c) => self.shared.tools.call(c, cx).await,
                Gate::NeedsApproval(c) => match self.shared.policy.decide(&c) {
                    Ok(()) => self.shared.tools.call(c, cx).await,
                    Err(reason) => ToolResult::denied(&c.id, &reason),
                },
            }
        };
        self.shared
            .call(|s, now| s.turn_tool_result(now, &self.rid, &result))
            .map_err(|_| SinkError::Cancelled)?;
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_tool_result(now, &self.rid, &result))
            .map_err(|_| SinkError::Cancelled)
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        if self.model_usage {
            return Ok(()); // already counted from the host's own model calls
        }
        self.shared
            .call(|s, _| s.turn_usage(&self.rid, &usage))
            .map_err(|_| SinkError::Cancelled)
    }

    fn supports(&self, feature: Feature) -> bool {
        feature == Feature::Reasoning
    }

    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_reasoning(now, &self.rid, delta))
            .map_err(|_| SinkError::Cancelled)
    }
}

/// An event stream's body: each chunk as the machine queues it. Dropping it (the client
/// went away) closes the stream; the task goes on.
pub struct EventStream {
    shared: Arc<Shared>,
    id: StreamId,
    done: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("id", &self.id).finish()
    }
}

impl Stream for EventStream {
    type Item = Vec<u8>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let id = self.id;
        let mut st = self.shared.lock();
        match st.server.poll_stream(id) {
            StreamPoll::Data(b) => Poll::Ready(Some(b)),
            StreamPoll::End => {
                drop(st);
                self.done = true;
                Poll::Ready(None)
            }
            StreamPoll::Pending => {
                st.stream_wakers.insert(id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.stream_wakers.remove(&self.id);
        if !self.done {
            st.server.close_stream(self.id);
        }
    }
}

/// A request waiting for its task.
struct WaitFor {
    shared: Arc<Shared>,
    id: WaitId,
    done: bool,
}

impl Future for WaitFor {
    type Output = http::Response<Vec<u8>>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        let mut st = self.shared.lock();
        match st.server.poll_wait(id) {
            Some(r) => {
                drop(st);
                self.done = true;
                Poll::Ready(r)
            }
            None => {
                st.wait_wakers.insert(id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for WaitFor {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.wait_wakers.remove(&self.id);
        if !self.done {
            st.server.drop_wait(self.id);
        }
    }
}

/// `write_file` and `read_file`: host tools over the task's session folder (see the
/// [module docs](self)). Put [`tools`](Self::tools) in the agent's and the host's registry,
/// and bind the handle with [`HostBuilder::file_tools`].
#[derive(Clone, Default)]
pub struct FileTools {
    host: Arc<OnceLock<Weak<Shared>>>,
}

impl std::fmt::Debug for FileTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTools")
            .field("bound", &self.host.get().is_some())
            .finish()
    }
}

impl FileTools {
    /// Unbound tools (bound by [`HostBuilder::file_tools`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The two tools.
    pub fn tools(&self) -> Tools {
        let write = host_tool(
            &self.host,
            "write_file",
            "Write a file in the session's folder; it becomes an artifact the user can download.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative path in the session's folder"},
                    "content": {"type": "string", "description": "Text content"},
                    "content_b64": {"type": "string", "description": "Binary content, base64"}
                },
                "required": ["path"]
            }),
            write_file,
        );
        let read = host_tool(
            &self.host,
            "read_file",
            "Read a file of the session's folder, or skills/<skill>/<path> of the harness's skills.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
            read_file,
        );
        Tools::new().with(write).with(read)
    }
}

type HostToolFn = fn(&Shared, &ToolCall, &ToolContext, &str) -> ToolResult;

/// A tool whose code runs on the host it is bound to, with the call's `path`.
fn host_tool(
    host: &Arc<OnceLock<Weak<Shared>>>,
    name: &'static str,
    description: &str,
    input_schema: Value,
    run: HostToolFn,
) -> Tool {
    let h = Arc::clone(host);
    Tool::new(name, description, move |call: ToolCall, cx: ToolContext| {
        let host = h.get().and_then(Weak::upgrade);
        async move {
            let Some(host) = host else {
                return ToolResult::error(&call.id, format!("{name} runs only inside a UHP host"));
            };
            let path = call.args.get("path").and_then(Value::as_str).unwrap_or("");
            run(&host, &call, &cx, path)
        }
    })
    .with_input_schema(schema(input_schema))
}

fn write_file(host: &Shared, call: &ToolCall, cx: &ToolContext, path: &str) -> ToolResult {
    let bytes = match (call.args.get("content"), call.args.get("content_b64")) {
        (Some(Value::String(t)), _) => t.as_bytes().to_vec(),
        (_, Some(Value::String(b))) => match base64::engine::general_purpose::STANDARD.decode(b) {
            Ok(b) => b,
            Err(_) => return ToolResult::error(&call.id, "content_b64 is not base64"),
        },
        _ => return ToolResult::error(&call.id, "write_file needs `path` and `content`"),
    };
    match host.call(|s, now| s.turn_write_file(now, &cx.execution_id, path, bytes)) {
        Ok(file) => ToolResult::ok_json(&call.id, file),
        Err(e) => ToolResult::error(&call.id, e.to_string()),
    }
}

fn read_file(host: &Shared, call: &ToolCall, cx: &ToolContext, path: &str) -> ToolResult {
    match host.call(|s, _| s.turn_read_file(&cx.execution_id, path)) {
        Some(b) => match String::from_utf8(b) {
            Ok(t) => ToolResult::ok_json(&call.id, json!({"path": path, "content": t})),
            Err(e) => ToolResult::ok_json(
                &call.id,
                json!({"path": path, "content_b64":
                    base64::engine::general_purpose::STANDARD.encode(e.into_bytes())}),
            ),
        },
        None => ToolResult::error(&call.id, format!("no such file: {path}")),
    }
}

fn schema(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}
