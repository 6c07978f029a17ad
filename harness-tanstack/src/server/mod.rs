//! The runtime half (feature `axum`): a nestable axum [`Router`](axum::Router) carrying
//! every route of the spec over a [`Service`], and [`serve`], a hyper server bounded
//! against hostile clients.
//!
//! A complete host: the agent, its model and tools, the routes under `/api/harness`, and
//! a server with a header timeout, a connection cap and a graceful shutdown.
//!
//! ```no_run
//! use std::time::Instant;
//! use harness_core::{Tools, agent::ToolLoopAgent, model::ScriptedModel};
//! use harness_tanstack::{Host, HostConfig, MemoryLog, Service};
//! use harness_tanstack::server::{BearerTokens, TanstackRouterConfig, TanstackServeConfig, drive, router, serve};
//!
//! # async fn run() -> std::io::Result<()> {
//! let svc = Service::new(Host::new(HostConfig::members_only(), MemoryLog::default()), Instant::now);
//! let agent = ToolLoopAgent::new("acme/assistant");
//! tokio::spawn(drive(svc.clone(), agent, ScriptedModel::echo(), Tools::new()));
//! let auth = BearerTokens::new([("my-token", "user-1")]);
//! let app = axum::Router::new()
//!     .nest("/api/harness", router(svc, TanstackRouterConfig::new("acme/assistant").with_bearer(auth)));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! serve(listener, app, TanstackServeConfig::default(), std::future::pending()).await;
//! # Ok(())
//! # }
//! ```
//!
//! Routes (relative to where the router is nested):
//!
//! | Route | What |
//! | --- | --- |
//! | `GET events?threadId=&v=&from=` | the session stream (SSE; `Last-Event-ID` first, then `from`) |
//! | `POST control` | `{threadId, input}` → the receipt |
//! | `GET snapshot?threadId=`, `GET transcript?threadId=` | the thread's state and messages |
//! | `GET capabilities` | the AG-UI capabilities |
//! | `GET host-events?v=` | status and session-list changes the user may read (SSE) |
//! | `POST run` | standard AG-UI: a run's plain events (SSE) |
//! | `GET run?runId=&offset=` | `joinRun`: a run's events from its start (SSE), live until its end |
//! | `GET run?threadId=` | `hydrate`: `{messages, activeRun, interrupts}` (JSON) |
//! | `GET socket` | the WebSocket (`harness.*` frames both ways) |
//!
//! Every answer carries `X-Request-Id` (the client's when it is a short safe id) and every
//! error a JSON `{error}`. The user is read by [`TanstackRouterConfig::auth`] (the spec's
//! `getUser`): a refusal is `401 {error:"unauthorized"}`, and on the WebSocket the close
//! 4401 after the upgrade. A body is read up to [`TanstackRouterConfig::max_body_bytes`] (else
//! `413`), each read within [`TanstackRouterConfig::body_timeout`] (else `408`); a WebSocket
//! message over the same limit closes the socket with the close `1009` (a frame the
//! WebSocket protocol does not allow: `1002`; a text message that is not UTF-8: `1007`;
//! each close is sent first, then the TCP connection is closed). Slow consumers are the
//! host's to decide (`sseQueueBytes`, `slowConsumerMs`): an SSE body is polled only as the socket takes it,
//! and a WebSocket write that does not complete within `slowConsumerMs` closes it 4408.

mod auth;
mod routes;
mod serve;
mod socket;

use std::sync::Arc;
use std::time::Duration;

use axum::middleware;
use axum::routing::get;
use harness_core::Harness;
use harness_core::model::Model;
use harness_core::tool::Tools;

pub use auth::{BearerTokens, Rejection, TanstackAuthHook, UserId, bearer_credentials};
pub use serve::{DEFAULT_WRITE_TIMEOUT, ServeReport, TanstackServeConfig, serve};

use crate::driver::{Service, run_turns};
use crate::log::EventLog;

/// The router's settings.
#[derive(Clone)]
#[non_exhaustive]
pub struct TanstackRouterConfig {
    /// The harness's name, in `GET capabilities` (`identity.name`).
    pub name: String,
    /// Maps a request to its user (`getUser`); `None`: no login, every request runs with
    /// no user (an `Open` host).
    pub auth: Option<TanstackAuthHook>,
    /// The largest request body and WebSocket message taken, in bytes (default 2 MiB: the
    /// host's default input limit, 1 MiB, and the frame around it).
    pub max_body_bytes: usize,
    /// How long a request body may stall between two reads (default 30 s): then `408`.
    pub body_timeout: Duration,
    /// The read buffer of each WebSocket (default 4 KiB: an idle socket holds little; a
    /// larger message is read in as many reads as it takes).
    pub socket_read_buffer_bytes: usize,
    /// After the server sends a WebSocket close, how long it waits for the client's end of
    /// the TCP connection, dropping what it sends meanwhile (default 1 s).
    pub socket_close_linger: Duration,
}

impl std::fmt::Debug for TanstackRouterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TanstackRouterConfig")
            .field("name", &self.name)
            .field("auth", &self.auth.is_some())
            .field("max_body_bytes", &self.max_body_bytes)
            .field("body_timeout", &self.body_timeout)
            .field("socket_read_buffer_bytes", &self.socket_read_buffer_bytes)
            .field("socket_close_linger", &self.socket_close_linger)
            .finish()
    }
}

impl Default for TanstackRouterConfig {
    fn default() -> Self {
        TanstackRouterConfig::new("harness")
    }
}

impl TanstackRouterConfig {
    /// The defaults, for the harness `name`.
    pub fn new(name: impl Into<String>) -> Self {
        TanstackRouterConfig {
            name: name.into(),
            auth: None,
            max_body_bytes: 2 << 20,
            body_timeout: Duration::from_secs(30),
            socket_read_buffer_bytes: 4 << 10,
            socket_close_linger: Duration::from_secs(1),
        }
    }

    /// With an auth hook (`getUser`): a request's head → its user, or a refusal.
    #[must_use]
    pub fn with_auth(
        mut self,
        hook: impl Fn(&http::request::Parts) -> Result<UserId, Rejection> + Send + Sync + 'static,
    ) -> Self {
        self.auth = Some(Arc::new(hook));
        self
    }

    /// With the built-in bearer check.
    #[must_use]
    pub fn with_bearer(mut self, tokens: BearerTokens) -> Self {
        self.auth = Some(tokens.into_hook());
        self
    }

    /// Sets [`max_body_bytes`](Self::max_body_bytes).
    #[must_use]
    pub fn with_max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Sets [`socket_close_linger`](Self::socket_close_linger).
    #[must_use]
    pub fn with_socket_close_linger(mut self, t: Duration) -> Self {
        self.socket_close_linger = t;
        self
    }

    /// Sets [`body_timeout`](Self::body_timeout).
    #[must_use]
    pub fn with_body_timeout(mut self, t: Duration) -> Self {
        self.body_timeout = t;
        self
    }
}

struct RouterState<L: EventLog> {
    svc: Service<L>,
    cfg: TanstackRouterConfig,
    /// The host's `slowConsumerMs`.
    slow_consumer: Duration,
}

/// A router answering every route of the spec for `svc`; nest it where you like
/// (`axum::Router::new().nest("/api/harness", router(…))`). Run the host's turns and
/// timers with [`drive`].
pub fn router<L: EventLog + 'static>(svc: Service<L>, cfg: TanstackRouterConfig) -> axum::Router {
    let slow_consumer = svc.with_host(|h, _| h.config().stream.slow_consumer);
    let st = Arc::new(RouterState {
        svc,
        cfg,
        slow_consumer,
    });
    axum::Router::new()
        .route("/events", get(routes::events::<L>))
        .route("/host-events", get(routes::host_events::<L>))
        .route("/control", axum::routing::post(routes::control::<L>))
        .route("/snapshot", get(routes::snapshot::<L>))
        .route("/transcript", get(routes::transcript::<L>))
        .route("/capabilities", get(routes::capabilities::<L>))
        .route(
            "/run",
            axum::routing::post(routes::run_post::<L>).get(routes::run_get::<L>),
        )
        .route("/socket", get(socket::socket::<L>))
        .fallback(routes::not_found)
        .with_state(st)
        .layer(middleware::from_fn(routes::with_request_id))
}

/// Runs the host: its turns ([`run_turns`]: `harness` on `model`, with `tools`) and its
/// timers (heartbeats, slow consumers: [`Service::tick`] when due, checked every 100 ms).
/// Spawn it once per service; it runs for ever.
pub async fn drive<L: EventLog + 'static>(
    svc: Service<L>,
    harness: impl Harness + 'static,
    model: impl Model + 'static,
    tools: Tools,
) {
    let ticker = svc.clone();
    let ticks = async move {
        let mut every = tokio::time::interval(Duration::from_millis(100));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            ticker.tick();
        }
    };
    futures::future::join(run_turns(svc, harness, model, tools), ticks).await;
}
