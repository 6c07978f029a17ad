//! The server half of UHP, sans-IO: HTTP requests in, responses and streamed SSE bytes out,
//! agent turns asked of the driver as events. No sockets, no clock reads, no file system.
//!
//! | module | the spec's noun |
//! | --- | --- |
//! | [`route`] | the endpoint summary (index.md): method + target → [`Route`], ids decoded, traversal refused |
//! | [`auth`] | bearer tokens and principals (architecture.md §5, security.md §1–2) |
//! | `discovery` | `GET /v1/uhp`, `UHP-Version` negotiation, models (lifecycle.md §1–2, harnesses.md §3) |
//! | [`harness`] | the harness registry: bases, configured harnesses, skills, MCP servers (harnesses.md) |
//! | `task` | tasks: create, the response object, budgets, cancel, idempotency (tasks.md, sessions.md §4) |
//! | `stream` | the event stream: SSE framing, gapless `sequence_number`, keep-alives (streaming.md) |
//! | `session` | sessions: continuation, listing, turns, cancel, share, delete (sessions.md) |
//! | [`file`](mod@file) | uploads, inline files, artifacts, download headers, the archive (files.md) |
//! | [`error`] | the error envelope and codes (errors.md) |
//! | [`store`] | what is persisted ([`StoreRecord`]) and the [`Store`] trait the driver writes to |
//! | `shared` | several hosts on one store: keys claimed in it, other hosts' objects read from it, cancel asked of the running host |
//! | [`driver`] | runs any [`Harness`](harness_core::Harness) for a task, `futures` only |
//! | `axum` (feature `axum`) | a nestable `Router`, a hyper server with header/idle timeouts, the on-disk store |
//!
//! # The run loop
//!
//! [`UhpServer`] follows [`harness_core::run_loop`]: every input takes `now` ([`Now`]: the
//! monotonic instant and the wall-clock milliseconds the host read); after each one, drain
//! [`poll_event`](UhpServer::poll_event) and do what each [`ServerEvent`] asks — start or stop a
//! turn, wake the stream or the waiting request it names, persist a record — then arm a timer
//! for [`poll_timeout`](UhpServer::poll_timeout) (budgets, keep-alives) and call
//! [`handle_timeout`](UhpServer::handle_timeout) when it fires.
//!
//! A request is answered by [`UhpServer::handle_request`] with a [`Reply`]: a whole response
//! now; or a response head now and a body to pull with [`poll_stream`](UhpServer::poll_stream)
//! (SSE: each event is queued the moment the agent makes it, never held back to the end); or,
//! for a non-streaming task, a [`WaitId`] whose response [`poll_wait`](UhpServer::poll_wait)
//! gives once the task is terminal. The agent's side comes in through the `turn_*` methods
//! ([`turn_text`](UhpServer::turn_text), [`turn_tool_call`](UhpServer::turn_tool_call),
//! [`turn_end`](UhpServer::turn_end), …), which the [`driver`] calls from its
//! [`EventSink`](harness_core::EventSink).
//!
//! # Storage
//!
//! The machine holds every object in memory, bounded ([`UhpServerConfig`]). With
//! [`UhpServerConfig::persist`] it also emits [`ServerEvent::Persist`] records — a task when it
//! is created (so that its idempotency key survives a crash) and when it ends, a session
//! when it changes, a harness, an upload, a deletion — which the driver hands to a
//! [`Store`] (an async trait, never called from inside the machine). At start the driver
//! reads the store back and feeds each record to [`UhpServer::restore`]; a task that was still
//! running at the crash is restored `failed`, never run a second time.
//!
//! # Several hosts on one store
//!
//! A store several hosts serve from at once ([`Store::shared`]: the `postgres` feature's
//! `PgStore`) sets [`UhpServerConfig::shared`], and the machine's memory becomes a cache of
//! the store, still without I/O of its own:
//! - a new task is stored before anyone is answered, in one transaction with its
//!   `Idempotency-Key` (unique per principal and key) and its session's turn slot
//!   ([`ServerEvent::Claim`], [`UhpServer::claim_resolved`]): a key repeated through any
//!   host names the first task (waited for if it runs, `422` for another body), never a
//!   second run; a busy session is `409 session_busy` on every host;
//! - before a request naming a task or a session this host does not run, the driver reads
//!   it from the store ([`UhpServer::remote_reads`], [`UhpServer::refresh`]); the store also
//!   reports what other hosts write ([`Store::watch`]), which the driver reads likewise;
//! - a task running on another host is `in_progress` here until its host stores its end;
//!   cancelling it asks that host ([`ServerEvent::CancelRemote`]) and is answered with the
//!   cancelled task ([`REMOTE_CANCEL_WAIT`] at most); a task whose host is gone reads
//!   `failed`.
//!
//! What runs on a host is never replaced from the store: the host running a task is its
//! only writer. Every read still goes through the machine's principal checks.
//!
//! ```
//! use std::time::Instant;
//! use harness_uhp::server::{Base, Now, Reply, Request, UhpServer, UhpServerConfig, ServerEvent};
//! use harness_uhp::server::auth::Principal;
//!
//! let mut cfg = UhpServerConfig::new(vec![Base { base: "echo".into(), label: "Echo".into() }],
//!     vec!["scripted".into()]);
//! cfg.implementation_name = "doc".into();
//! let mut server = UhpServer::new(cfg);
//! server.add_api_key("k", Principal::new("alice"));
//! let now = Now::new(Instant::now(), 1_786_400_000_000);
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert("authorization", "Bearer k".parse().unwrap());
//! let body = br#"{"input":"hi","background":true}"#;
//! let reply = server.handle_request(now, &Request::new("POST", "/v1/responses", &headers, body));
//! let Reply::Full(resp) = reply else { panic!("a background task answers at once") };
//! assert_eq!(resp.status(), 200);
//! assert_eq!(resp.headers()["uhp-version"], "2026-08-11");
//! // The driver is asked to run the turn.
//! let turn = loop {
//!     match server.poll_event() {
//!         Some(ServerEvent::StartTurn(t)) => break t,
//!         Some(_) => {}
//!         None => panic!("no turn"),
//!     }
//! };
//! server.turn_text(now, &turn.response_id, "Hello").unwrap();
//! server.turn_end(now, &turn.response_id, harness_uhp::server::TurnEnd::Completed);
//! let got = server.handle_request(now,
//!     &Request::new("GET", &format!("/v1/responses/{}", turn.response_id), &headers, b""));
//! let Reply::Full(resp) = got else { panic!() };
//! let v: serde_json::Value = serde_json::from_slice(resp.body()).unwrap();
//! assert_eq!(v["status"], "completed");
//! assert_eq!(v["output"][0]["content"][0]["text"], "Hello");
//! ```

pub mod auth;
mod config;
mod discovery;
pub mod driver;
pub mod error;
pub mod file;
pub mod harness;
pub mod route;
mod session;
mod shared;
pub mod store;
mod stream;
mod task;

#[cfg(feature = "axum")]
pub mod axum;
#[cfg(feature = "postgres")]
pub mod postgres;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use http::HeaderMap;
use serde_json::Value;

pub use auth::{ApiKeys, Principal};
pub use config::UhpServerConfig;
pub use driver::{ServiceBuilder, UhpService};
pub use error::ApiError;
pub use harness::{Base, HarnessObject};
pub use route::Route;
pub use shared::REMOTE_CANCEL_WAIT;
pub use store::{
    Change, Claimed, Fetched, KeyClaim, MemoryStore, OnChange, Store, StoreError, StoreRecord,
    Watch,
};

use crate::protocol::PROTOCOL_VERSION;
use harness_core::Start;

/// The time of an input: the monotonic instant (budgets, keep-alives) and the wall-clock time
/// in Unix milliseconds (the `created_at` of what is made), both read by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time.
    pub instant: Instant,
    /// Wall-clock time, Unix milliseconds.
    pub unix_ms: i64,
}

impl Now {
    /// A time.
    pub fn new(instant: Instant, unix_ms: i64) -> Self {
        Now { instant, unix_ms }
    }

    fn unix_s(&self) -> i64 {
        self.unix_ms.div_euclid(1000)
    }
}

/// One HTTP request, as the transport read it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The request target as sent: the path (still percent-encoded) and the query.
    pub target: &'a str,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The whole body (the transport enforces [`UhpServerConfig::max_request_bytes`] while reading;
    /// the machine checks the per-endpoint limits again).
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A request.
    pub fn new(method: &'a str, target: &'a str, headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        Request {
            method,
            target,
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Identifies an open event stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// Identifies a request waiting for its task's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitId(pub u64);

/// How a request is answered.
#[derive(Debug)]
#[must_use]
pub enum Reply {
    /// A whole response, now.
    Full(http::Response<Vec<u8>>),
    /// A response head now; the body is pulled with [`UhpServer::poll_stream`] until it ends.
    /// When the client goes away, call [`UhpServer::close_stream`] (the task goes on).
    Stream(http::Response<()>, StreamId),
    /// The answer comes when the task ends: [`UhpServer::poll_wait`] gives it once
    /// [`ServerEvent::Wake`] names this wait. When the client goes away, call
    /// [`UhpServer::drop_wait`] (the task goes on).
    Wait(WaitId),
}

/// What [`UhpServer::poll_stream`] has.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamPoll {
    /// Bytes to send now.
    Data(Vec<u8>),
    /// Nothing yet: wait for [`ServerEvent::Wake`] naming the stream.
    Pending,
    /// The body is complete (the terminal event was sent), or the stream is unknown.
    End,
}

/// What the server needs woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wake {
    /// The stream has bytes or ended: poll it.
    Stream(StreamId),
    /// The waiting request has its answer: poll it.
    Wait(WaitId),
}

/// A turn for the driver to run: one task, one call of a harness's `run`.
#[derive(Clone, Debug)]
pub struct UhpTurnRequest {
    /// The task (`resp_…`); every `turn_*` call names it.
    pub response_id: String,
    /// Its session (`hsess…`).
    pub session_id: String,
    /// The base whose harness runs it.
    pub base: String,
    /// The model the task runs (the task's `model`, else the harness's default).
    pub model: String,
    /// What the harness gets: inputs, the session's history, the harness's settings as
    /// `config`, the principal as identity.
    pub start: Start,
    /// Tools the configured harness withholds: the host refuses them (a hard block).
    pub disabled_tools: Vec<String>,
    /// The step budget (model calls), if any.
    pub max_step: Option<u64>,
    /// `max_output_tokens`, if the task set it.
    pub max_output_tokens: Option<u64>,
}

/// A record to persist, a turn to start or stop, something to wake.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerEvent {
    /// Run this turn.
    StartTurn(Box<UhpTurnRequest>),
    /// Stop the turn of this task now (cancelled, out of budget, its session deleted): drop
    /// its future. The task is already terminal; later `turn_*` calls return [`TurnGone`].
    StopTurn {
        /// The task.
        response_id: String,
    },
    /// Poll what is named.
    Wake(Wake),
    /// Write this record to the store (only with [`UhpServerConfig::persist`]).
    Persist(Box<StoreRecord>),
    /// Claim an `Idempotency-Key` with its new task's record in the shared store
    /// ([`Store::claim`], only with [`UhpServerConfig::shared`]), then call
    /// [`UhpServer::claim_resolved`]: the task's turn waits for it.
    Claim(Box<KeyClaim>),
    /// Ask the host running this task to cancel it ([`Store::request_cancel`], only with
    /// [`UhpServerConfig::shared`]).
    CancelRemote {
        /// The task.
        response_id: String,
    },
}

/// How a turn ended, as the driver saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnEnd {
    /// `run` returned `Ok`.
    Completed,
    /// The harness failed (`harness_error`).
    HarnessFailed,
    /// The model provider failed (`provider_error`).
    ProviderFailed,
}

/// The task is no longer running (cancelled, out of budget, deleted): stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the task is no longer running")]
pub struct TurnGone;

/// The UHP server state machine. See the [module docs](self).
#[derive(Debug)]
pub struct UhpServer {
    cfg: UhpServerConfig,
    keys: ApiKeys,
    registry: harness::Registry,
    tasks: HashMap<String, task::Task>,
    stored_order: VecDeque<String>,
    running: HashSet<String>,
    /// Running tasks per principal (an entry only while at least one runs).
    running_per: HashMap<Principal, usize>,
    sessions: HashMap<String, session::Session>,
    expired: HashSet<String>,
    expired_order: VecDeque<String>,
    containers: HashMap<String, String>,
    shares: HashMap<String, String>,
    uploads: HashMap<String, (Principal, file::StoredFile)>,
    upload_order: VecDeque<String>,
    idem: HashMap<(Principal, String), task::Idem>,
    idem_order: VecDeque<(Principal, String)>,
    streams: HashMap<StreamId, stream::Stream>,
    waits: HashMap<WaitId, task::Wait>,
    claims: HashMap<String, shared::PendingClaim>,
    events: VecDeque<ServerEvent>,
    next_handle: u64,
    next_keep_alive: Option<Instant>,
    counter: u64,
}

impl UhpServer {
    /// A server with no keys yet (every authenticated endpoint answers 401 until
    /// [`add_api_key`](Self::add_api_key)).
    pub fn new(cfg: UhpServerConfig) -> Self {
        let registry = harness::Registry::new(
            cfg.bases.clone(),
            cfg.models.first().map(String::as_str),
            cfg.max_harnesses_per_principal,
        );
        UhpServer {
            cfg,
            keys: ApiKeys::new(),
            registry,
            tasks: HashMap::new(),
            stored_order: VecDeque::new(),
            running: HashSet::new(),
            running_per: HashMap::new(),
            sessions: HashMap::new(),
            expired: HashSet::new(),
            expired_order: VecDeque::new(),
            containers: HashMap::new(),
            shares: HashMap::new(),
            uploads: HashMap::new(),
            upload_order: VecDeque::new(),
            idem: HashMap::new(),
            idem_order: VecDeque::new(),
            streams: HashMap::new(),
            waits: HashMap::new(),
            claims: HashMap::new(),
            events: VecDeque::new(),
            next_handle: 0,
            next_keep_alive: None,
            counter: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &UhpServerConfig {
        &self.cfg
    }

    /// Accepts `token` for `principal`.
    pub fn add_api_key(&mut self, token: &str, principal: Principal) {
        self.keys.add(token, principal);
    }

    /// Stops accepting `token` (from the next request on); whether it was a key.
    pub fn revoke_api_key(&mut self, token: &str) -> bool {
        self.keys.revoke(token)
    }

    /// Answers a request, authenticating its bearer token against the server's keys.
    pub fn handle_request(&mut self, now: Now, req: &Request<'_>) -> Reply {
        self.dispatch(now, req, None)
    }

    /// Answers a request whose caller the application authenticated itself (an auth hook):
    /// `None` is answered 401.
    pub fn handle_request_as(
        &mut self,
        now: Now,
        principal: Option<Principal>,
        req: &Request<'_>,
    ) -> Reply {
        self.dispatch(now, req, Some(principal))
    }

    /// The `413` to answer a request whose body the transport stopped reading at
    /// [`UhpServerConfig::max_request_bytes`].
    pub fn body_too_large(&self) -> http::Response<Vec<u8>> {
        error_response(&ApiError::too_large(self.cfg.max_request_bytes()))
    }

    fn dispatch(
        &mut self,
        now: Now,
        req: &Request<'_>,
        caller: Option<Option<Principal>>,
    ) -> Reply {
        if let Err(e) = discovery::negotiate(req.header("uhp-version"), req.headers) {
            return Reply::Full(error_response(&e));
        }
        let route = match route::route(req.method, req.target) {
            Ok(r) => Some(r),
            Err(route::RouteError::Method(allow)) => {
                return Reply::Full(error_response(&ApiError::method_not_allowed(allow)));
            }
            Err(route::RouteError::NotFound) => None,
        };
        if route == Some(Route::Discovery) {
            return Reply::Full(self.discovery());
        }
        // Every other endpoint is authenticated (security.md §1), before anything is looked up.
        let principal = match caller {
            None => self
                .keys
                .authenticate(req.headers.get("authorization").map(|v| v.as_bytes())),
            Some(Some(p)) => Ok(p),
            Some(None) => Err(ApiError::new(
                "missing_credential",
                "A valid bearer token is required.",
            )),
        };
        let p = match principal {
            Ok(p) => p,
            Err(e) => return Reply::Full(error_response(&e)),
        };
        let Some(route) = route else {
            return Reply::Full(error_response(&ApiError::not_found_route()));
        };
        let reply = self.route(now, &p, route, req);
        match reply {
            Ok(r) => r,
            Err(e) => Reply::Full(error_response(&e)),
        }
    }

    fn route(
        &mut self,
        now: Now,
        p: &Principal,
        route: Route,
        req: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let full = |r: http::Response<Vec<u8>>| Ok(Reply::Full(r));
        match route {
            Route::Discovery => full(self.discovery()),
            Route::Models => full(json_response(200, &self.models_catalog())),
            Route::HarnessModels(id) => full(json_response(200, &self.harness_models(p, &id)?)),
            Route::ListHarnesses => {
                let list: Vec<Value> = self.registry.list(p).iter().map(|h| h.shown()).collect();
                full(json_response(
                    200,
                    &serde_json::json!({ "harnesses": list }),
                ))
            }
            Route::GetHarness(id) => {
                let h = self
                    .registry
                    .get(p, &id)
                    .ok_or_else(|| ApiError::harness_not_found(&id))?;
                full(json_response(200, &h.shown()))
            }
            Route::CreateHarness => {
                let body = self.json_body(req)?;
                let id = self.new_id("chrn_");
                let h = self
                    .registry
                    .create(p, &body, id, now.unix_ms, &self.cfg.models)?
                    .clone();
                full(self.harness_saved(p, h))
            }
            Route::UpdateHarness(id) => {
                let body = self.json_body(req)?;
                let h = self
                    .registry
                    .update(p, &id, &body, &self.cfg.models)?
                    .clone();
                full(self.harness_saved(p, h))
            }
            Route::DeleteHarness(id) => {
                self.registry.delete(p, &id)?;
                self.persist(|| StoreRecord::HarnessDeleted {
                    principal: p.clone(),
                    id: id.clone(),
                });
                full(json_response(
                    200,
                    &serde_json::json!({"id": id, "object": "harness", "deleted": true}),
                ))
            }
            Route::SkillFiles(id, skill) => {
                let h = self
                    .registry
                    .get(p, &id)
                    .ok_or_else(|| ApiError::harness_not_found(&id))?;
                let s = h.skills.iter().find(|s| s.name == skill).ok_or_else(|| {
                    ApiError::with_status(404, "harnessrs_skill_not_found", "No such skill.")
                })?;
                full(json_response(
                    200,
                    &serde_json::json!({"skill": s.name, "enabled": s.enabled, "files": s.files}),
                ))
            }
            Route::CreateResponse => self.create_response(now, p, req),
            Route::GetResponse(id) => {
                let t = self.task(p, &id)?;
                full(json_response(200, &t.response))
            }
            Route::DeleteResponse(id) => full(self.delete_response(p, &id)?),
            Route::InputItems(id) => {
                let t = self.task(p, &id)?;
                full(json_response(
                    200,
                    &serde_json::json!({
                        "object": "list", "data": t.input_items,
                        "first_id": null, "last_id": null, "has_more": false,
                    }),
                ))
            }
            Route::CancelResponse(id) => self.cancel_response(now, p, &id),
            Route::ListSessions => full(self.list_sessions(p, req.target)?),
            Route::GetSession(id) => full(json_response(200, &self.session(p, &id)?.object())),
            Route::SessionTurns(id) => {
                full(json_response(200, &self.session(p, &id)?.turns_object()))
            }
            Route::CancelSession(id) => full(self.cancel_session(now, p, &id)?),
            Route::DeleteSession(id) => full(self.delete_session(now, p, &id)?),
            Route::Share(id) => full(self.share(now, p, &id)?),
            Route::GetShare(id) => full(json_response(200, &self.session(p, &id)?.share_object())),
            Route::RevokeShare(id) => full(self.revoke_share(p, &id)?),
            Route::Shared(token) => full(self.shared_view(&token)?),
            Route::SessionFiles(id) => {
                full(json_response(200, &self.session(p, &id)?.files_object()))
            }
            Route::SessionArchive(id) => full(self.archive(p, &id)?),
            Route::UploadFile => full(self.upload(now, p, req)?),
            Route::GetFile(id) => full(self.file_metadata(p, &id)?),
            Route::FileContent(cid, fid) => full(self.download(p, &cid, &fid)?),
            Route::FilePdf(cid, fid) => {
                self.artifact(p, &cid, &fid)?;
                Err(ApiError::new(
                    "preview_unavailable",
                    "This server does not render previews.",
                ))
            }
        }
    }

    /// A harness created or updated: persisted, shown.
    fn harness_saved(&mut self, p: &Principal, h: HarnessObject) -> http::Response<Vec<u8>> {
        let shown = h.shown();
        self.persist(|| StoreRecord::Harness {
            principal: p.clone(),
            harness: Box::new(h),
        });
        json_response(200, &shown)
    }

    /// The next thing the driver must do, in order.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: a task's budget or the next
    /// keep-alive of the open streams.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let budgets = self
            .running
            .iter()
            .filter(|id| !self.claims.contains_key(*id))
            .filter_map(|id| self.tasks.get(id).map(|t| t.deadline))
            .min();
        [budgets, self.next_keep_alive, self.next_wait_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Ends the tasks whose budget ran out (`incomplete`) and writes keep-alives.
    pub fn handle_timeout(&mut self, now: Now) {
        let due: Vec<(String, &'static str)> = self
            .running
            .iter()
            .filter(|id| !self.claims.contains_key(*id))
            .filter_map(|id| {
                let t = self.tasks.get(id)?;
                (t.deadline <= now.instant).then(|| (id.clone(), t.deadline_reason))
            })
            .collect();
        for (id, reason) in due {
            self.finish_task(now, &id, task::Outcome::Incomplete(reason), true);
        }
        self.expire_waits(now.instant);
        if self.next_keep_alive.is_some_and(|at| at <= now.instant) {
            self.keep_alive_tick();
            self.next_keep_alive = (!self.streams.is_empty())
                .then(|| now.instant.checked_add(self.cfg.keep_alive))
                .flatten();
        }
    }

    /// Feeds a record read back from the store at start (in the order written).
    pub fn restore(&mut self, record: StoreRecord) {
        store::restore(self, record);
    }

    /// Every live object as records, for a store to compact its log.
    pub fn snapshot(&self) -> Vec<StoreRecord> {
        store::snapshot(self)
    }

    /// Open event streams.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Tasks running now.
    pub fn running_tasks(&self) -> usize {
        self.running.len()
    }

    /// Tasks `principal` runs now.
    pub fn running_tasks_of(&self, principal: &Principal) -> usize {
        self.running_per.get(principal).copied().unwrap_or(0)
    }

    fn persist(&mut self, record: impl FnOnce() -> StoreRecord) {
        if self.cfg.persist {
            self.events
                .push_back(ServerEvent::Persist(Box::new(record())));
        }
    }

    fn new_id(&mut self, prefix: &str) -> String {
        self.counter = self.counter.wrapping_add(1);
        format!("{prefix}{}", uuid::Uuid::new_v4().simple())
    }

    fn new_handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }

    fn json_body(&self, req: &Request<'_>) -> Result<Value, ApiError> {
        if req.body.len() > self.cfg.max_body_bytes {
            return Err(ApiError::too_large(self.cfg.max_body_bytes));
        }
        serde_json::from_slice(req.body)
            .map_err(|_| ApiError::invalid_input("The body is not valid JSON."))
    }
}

/// A JSON response with the version header.
pub(crate) fn json_response(status: u16, body: &impl serde::Serialize) -> http::Response<Vec<u8>> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    bytes_response(status, "application/json", bytes)
}

pub(crate) fn bytes_response(
    status: u16,
    content_type: &str,
    body: Vec<u8>,
) -> http::Response<Vec<u8>> {
    let mut r = http::Response::new(body);
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    let h = r.headers_mut();
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    h.insert(
        crate::protocol::VERSION_HEADER,
        http::HeaderValue::from_static(PROTOCOL_VERSION),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    r
}

/// The envelope of a refused request, with its headers.
pub(crate) fn error_response(e: &ApiError) -> http::Response<Vec<u8>> {
    // What a client caused (or a limit it hit): debug level, so that a flood of bad
    // requests floods no log.
    tracing::debug!(status = e.status, code = e.code(), "uhp request refused");
    let mut r = bytes_response(e.status, "application/json", e.body());
    let h = r.headers_mut();
    if let Some(s) = e.retry_after {
        h.insert(http::header::RETRY_AFTER, http::HeaderValue::from(s));
    }
    if let Some(a) = e.allow {
        h.insert(http::header::ALLOW, http::HeaderValue::from_static(a));
    }
    if e.status == 401 {
        h.insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    r
}
