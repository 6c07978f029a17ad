//! Serving any [`Harness`] over UHP: the driver around the sans-IO [`UhpServer`], `futures`
//! only (no runtime; the application spawns [`UhpService::run`] on its own and gives it a `sleep`).
//!
//! [`UhpService`] owns the machine behind a mutex and does what its events ask:
//! - [`ServerEvent::StartTurn`]: runs the turn — the registered harness's `run` with a
//!   [`EventSink`](harness_core::EventSink) of this host — concurrently with every other turn, inside
//!   [`UhpService::run`];
//! - [`ServerEvent::StopTurn`]: drops that turn's future (cancellation really stops the
//!   agent; a sink call after it answers [`SinkError::Cancelled`](harness_core::SinkError::Cancelled));
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
//! | `sink.tool_call(call)` | [`rules::check_call`](harness_core::tool::rules::check_call), a `function_call` item, then [`rules::gate`](harness_core::tool::rules::gate): a gated tool runs only if the host's [`ApprovalPolicy`] approves (UHP has no approval channel; deny by default) and a tool the configured harness disables is refused; the result a `function_call_output` item |
//! | `sink.report(result)` | a `function_call_output` item |
//! | `sink.usage(u)` | the response's `usage`, unless the host's model calls already counted it |
//! | `ask`, `handoff`, `command`, `state`, `step` | [`SinkError::Unsupported`](harness_core::SinkError::Unsupported): UHP has no way to carry them |
//!
//! [`FileTools`] gives the host's tools a session's folder: `write_file` makes an artifact of
//! the task's container (cited on its final message, listed, downloadable), `read_file`
//! reads it back, and the harness's skills under `skills/<name>/…`.
//!
//! | module | what |
//! | --- | --- |
//! | `builder` | [`ServiceBuilder`]: a [`UhpService`] with its harnesses, model, tools and store |
//! | `run` | [`UhpService::run`]: the turns, the store writer, the timers |
//! | `turn` | one task's turn: the harness's `run` with a sink that reports to the machine |
//! | `body` | what a request gets back: a whole body, an [`EventStream`], or a wait for the task |
//! | `files` | [`FileTools`]: the session's folder, the task's artifacts (files.md §2) |

mod body;
mod builder;
mod files;
mod run;
mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use futures::channel::{mpsc, oneshot};
use futures::future::AbortHandle;
use harness_core::Harness;
use harness_core::clock::MonotonicClock;
use harness_core::model::Model;
use harness_core::tool::Tools;
use harness_core::tool::rules::ApprovalPolicy;

use self::body::WaitFor;
pub use self::body::{Body, EventStream};
pub use self::builder::ServiceBuilder;
pub use self::files::FileTools;
use super::store::{Claimed, Fetched, KeyClaim, Store, StoreError, StoreRecord, Watch};
use super::{
    Now, Principal, Reply, Request, ServerEvent, StreamId, TurnEnd, UhpServer, UhpTurnRequest,
    WaitId, Wake,
};

/// Who is calling, as the transport (or the application's auth hook) decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallerAuth {
    /// The server checks the `Authorization: Bearer` token against its keys.
    Bearer,
    /// The application authenticated the caller as this principal.
    Principal(Principal),
    /// The application found no acceptable credential: answered 401.
    Anonymous,
}

type WallMs = Arc<dyn Fn() -> i64 + Send + Sync>;
type Receivers = (
    mpsc::UnboundedReceiver<UhpTurnRequest>,
    mpsc::UnboundedReceiver<Vec<StoreRecord>>,
    mpsc::UnboundedReceiver<Remote>,
);

/// Work for a shared store, done inside [`UhpService::run`].
enum Remote {
    /// Claim a key; the request's answer goes back (or, the request gone, is resolved there).
    Claim(Box<KeyClaim>, oneshot::Sender<ClaimAnswer>),
    /// Ask the host running a task to cancel it.
    Cancel(String),
}

type ClaimAnswer = (String, Result<Claimed, StoreError>);

struct State {
    server: UhpServer,
    stream_wakers: HashMap<StreamId, Waker>,
    wait_wakers: HashMap<WaitId, Waker>,
    aborts: HashMap<String, AbortHandle>,
    stopped: HashSet<String>,
    /// Claims the last request made (taken by `UhpService::handle`).
    claims: Vec<KeyClaim>,
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
    /// The store is shared with other hosts.
    shared: bool,
    turn_tx: mpsc::UnboundedSender<UhpTurnRequest>,
    store_tx: mpsc::UnboundedSender<Vec<StoreRecord>>,
    remote_tx: mpsc::UnboundedSender<Remote>,
    receivers: Mutex<Option<Receivers>>,
    /// The store's watch of other hosts (a shared store), while `run` runs.
    watch: Mutex<Option<Box<dyn Watch>>>,
    /// This host's writes under way (a shared store).
    writes: Writes,
}

/// The objects this host is writing: a read of one of them from the store is older than
/// the machine's copy.
#[derive(Default)]
struct Writes {
    pending: Mutex<HashMap<(String, String), usize>>,
    generation: std::sync::atomic::AtomicU64,
}

impl Writes {
    fn keys(records: &[StoreRecord]) -> Vec<(String, String)> {
        records
            .iter()
            .map(|r| {
                let (k, i) = r.key();
                (k.to_owned(), i.to_owned())
            })
            .collect()
    }

    fn begin(&self, records: &[StoreRecord]) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for k in Self::keys(records) {
            *p.entry(k).or_insert(0) += 1;
        }
    }

    fn end(&self, keys: Vec<(String, String)>) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            if let Some(n) = p.get_mut(&k) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    p.remove(&k);
                }
            }
        }
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn pending(&self, kind: &str, id: &str) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&(kind.to_owned(), id.to_owned()))
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not take the server down with it: the state is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Now {
        Now::new(self.clock.now(), (self.wall_ms)())
    }

    /// Runs `f` on the machine, then does what its events ask; the claims it made.
    fn call_claiming<R>(&self, f: impl FnOnce(&mut UhpServer, Now) -> R) -> (R, Vec<KeyClaim>) {
        let now = self.now();
        let mut st = self.lock();
        let r = f(&mut st.server, now);
        self.dispatch(&mut st);
        (r, std::mem::take(&mut st.claims))
    }

    /// Reads what `req` names from the shared store into the machine (a task, then its
    /// session). A store that fails is logged: the machine answers from what it holds.
    async fn read_remote(&self, req: &Request<'_>, authenticated: Option<bool>) {
        let mut done: Vec<(&'static str, String)> = Vec::new();
        for _ in 0..2 {
            let wanted: Vec<_> = self
                .lock()
                .server
                .remote_reads(req, authenticated)
                .into_iter()
                .filter(|w| !done.contains(w))
                .collect();
            if wanted.is_empty() {
                return;
            }
            for (kind, id) in wanted {
                self.fetch(kind, &id).await;
                done.push((kind, id));
            }
        }
    }

    /// Reads one object from the store into the machine. What this host is still writing
    /// (or wrote while the read was under way) is not replaced by an older stored version:
    /// the read is retried once the write is done.
    async fn fetch(&self, kind: &str, id: &str) {
        for _ in 0..3 {
            let before = self.writes.generation();
            if self.writes.pending(kind, id) {
                return; // this host's own write is newer than anything stored
            }
            let got = self.store.fetch(kind, id).await;
            if self.writes.generation() != before {
                continue; // a write of this host's ended meanwhile: read again
            }
            match got {
                Ok(Fetched::Found(r)) => self.call(|s, now| s.refresh(now, r)),
                Ok(Fetched::Gone) => self.call(|s, now| s.refresh_gone(now, kind, id)),
                Ok(Fetched::Unchanged) => {}
                Err(e) => tracing::warn!(error = %e, kind, "uhp: reading the shared store failed"),
            }
            return;
        }
    }

    /// Runs `f` on the machine, then does what its events ask.
    fn call<R>(&self, f: impl FnOnce(&mut UhpServer, Now) -> R) -> R {
        let now = self.now();
        let mut st = self.lock();
        let r = f(&mut st.server, now);
        self.dispatch(&mut st);
        // A claim made outside a request (an admin call): `run` claims and resolves it.
        for c in std::mem::take(&mut st.claims) {
            let (tx, _) = oneshot::channel();
            let _ = self
                .remote_tx
                .unbounded_send(Remote::Claim(Box::new(c), tx));
        }
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
                ServerEvent::Claim(c) => st.claims.push(*c),
                ServerEvent::CancelRemote { response_id } => {
                    let _ = self.remote_tx.unbounded_send(Remote::Cancel(response_id));
                }
            }
        }
        if !records.is_empty() {
            if self.shared {
                self.writes.begin(&records);
            }
            let _ = self.store_tx.unbounded_send(records); // ok: no runner, nothing to keep
        }
    }
}

/// A request waiting for its claim. Dropped before the answer came (the client went away):
/// an answer already sent is resolved here, else `run` resolves it.
struct ClaimGuard {
    shared: Arc<Shared>,
    rx: oneshot::Receiver<ClaimAnswer>,
    done: bool,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(Some((rid, result))) = self.rx.try_recv() {
            self.shared.call(|s, now| {
                if let Some(r) = s.claim_resolved(now, &rid, result) {
                    run::discard(s, r);
                }
            });
        }
    }
}

/// A reply held by the request (dropping it closes its stream or wait).
enum Answer {
    Full(http::Response<Vec<u8>>),
    Stream(http::Response<()>, EventStream),
    Wait(WaitFor),
}

impl Answer {
    fn new(shared: &Arc<Shared>, reply: Reply) -> Answer {
        match reply {
            Reply::Full(r) => Answer::Full(r),
            Reply::Stream(head, id) => {
                Answer::Stream(head, EventStream::new(Arc::clone(shared), id))
            }
            Reply::Wait(id) => Answer::Wait(WaitFor::new(Arc::clone(shared), id)),
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
/// use harness_uhp::server::driver::{Body, CallerAuth, UhpService};
///
/// let wall = || SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
/// futures::executor::block_on(async {
///     let host = UhpService::builder(ScriptedModel::new().reply("We open at eight."))
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
///     let answer = host.handle(CallerAuth::Bearer, req);
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
pub struct UhpService {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for UhpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UhpService")
            .field(
                "harnesses",
                &self.shared.harnesses.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl UhpService {
    /// Answers one HTTP request. A non-streaming task's answer comes when the task ends;
    /// dropping this future (the client went away) leaves the task running.
    pub async fn handle(
        &self,
        caller: CallerAuth,
        req: http::Request<Vec<u8>>,
    ) -> http::Response<Body> {
        let (parts, body) = req.into_parts();
        let target = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let request = || Request::new(parts.method.as_str(), &target, &parts.headers, &body);
        if self.shared.shared {
            let authenticated = match &caller {
                CallerAuth::Bearer => None,
                CallerAuth::Principal(_) => Some(true),
                CallerAuth::Anonymous => Some(false),
            };
            self.shared.read_remote(&request(), authenticated).await;
        }
        let (reply, claims) = self.shared.call_claiming(|s, now| {
            let r = request();
            match caller {
                CallerAuth::Bearer => s.handle_request(now, &r),
                CallerAuth::Principal(p) => s.handle_request_as(now, Some(p), &r),
                CallerAuth::Anonymous => s.handle_request_as(now, None, &r),
            }
        });
        let mut answer = Answer::new(&self.shared, reply);
        for claim in claims {
            let (tx, rx) = oneshot::channel();
            if self
                .shared
                .remote_tx
                .unbounded_send(Remote::Claim(Box::new(claim), tx))
                .is_err()
            {
                break;
            }
            // `run` claims it; were this request dropped meanwhile, `run` (or the guard)
            // resolves it.
            let mut guard = ClaimGuard {
                shared: Arc::clone(&self.shared),
                rx,
                done: false,
            };
            let got = (&mut guard.rx).await;
            guard.done = true;
            if let Ok((rid, result)) = got {
                let other = self
                    .shared
                    .call(|s, now| s.claim_resolved(now, &rid, result));
                if let Some(other) = other {
                    answer = Answer::new(&self.shared, other); // the old one is dropped
                }
            }
        }
        match answer {
            Answer::Full(r) => r.map(Body::Full),
            Answer::Stream(head, s) => head.map(|()| Body::Stream(s)),
            Answer::Wait(w) => w.await.map(Body::Full),
        }
    }

    /// The `413` for a body the transport stopped reading at
    /// [`UhpServerConfig::max_request_bytes`](super::UhpServerConfig::max_request_bytes).
    pub fn body_too_large(&self) -> http::Response<Vec<u8>> {
        self.shared.lock().server.body_too_large()
    }

    /// The largest body a transport should read.
    pub fn max_request_bytes(&self) -> usize {
        self.shared.lock().server.config().max_request_bytes()
    }

    /// Runs `f` on the machine (admin: keys, snapshots, counts), then does what it asks.
    pub fn with_server<R>(&self, f: impl FnOnce(&mut UhpServer, Now) -> R) -> R {
        self.shared.call(f)
    }
}
