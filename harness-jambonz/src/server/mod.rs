//! The runtime half (feature `tokio`): an agent served to jambonz on a TCP listener, one
//! WebSocket (subprotocol `harness.jambonz.org`) and one task per call, the
//! [`driver`](crate::driver) on each.
//!
//! ```no_run
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::Message;
//! use harness_core::model::ScriptedModel;
//! use harness_core::Tools;
//! use harness_jambonz::server::{JambonzServer, JambonzServerConfig};
//!
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let agent = ToolLoopAgent::new("acme").with_system_prompt("You answer calls for Acme.");
//! let model = ScriptedModel::new().otherwise(|_| Ok(Message::assistant("Thanks for calling Acme.")));
//! let config = JambonzServerConfig::default().with_secret("s3cret"); // Bearer secret, else 401
//! let stop = async { /* tokio::signal::ctrl_c().await */ };
//! let report = JambonzServer::new(config).serve(listener, agent, model, Tools::new(), stop).await;
//! println!("{} calls served", report.calls);
//! # Ok(())
//! # }
//! ```
//!
//! What it does for every connection, in order:
//!
//! 1. **Accept.** A connection past [`JambonzServerConfig::max_handshakes`] (connections not yet
//!    upgraded) is closed at once. When accepting fails for want of resources (`EMFILE`,
//!    `ENFILE`, `ENOBUFS`, `ENOMEM`: the process or the system is out of descriptors or
//!    memory) the loop pauses [`JambonzServerConfig::accept_pause`] and retries, instead of
//!    spinning a core on an error that repeats until a descriptor is free; the listener's
//!    backlog holds new connections meanwhile.
//! 2. **Handshake**, within [`JambonzServerConfig::handshake_timeout`] from the accept: TLS when
//!    the server has it (feature `tls`, [`JambonzServer::with_tls`]), then the HTTP upgrade. A
//!    client that trickles its request is dropped at the deadline. The upgrade check is
//!    [`check_upgrade`](crate::upgrade::check_upgrade): a missing or wrong `Authorization:
//!    Bearer` secret gets **401**, a client that does not offer the subprotocol **400**;
//!    past [`JambonzServerConfig::max_calls`] calls in progress, **503** (with `Retry-After`).
//! 3. **The call.** The WebSocket reads frames of at most
//!    [`JambonzServerConfig::max_message_bytes`], at most
//!    [`JambonzServerConfig::read_buffer_bytes`] at a time (an idle call holds no buffer); a
//!    larger message closes the socket with 1009, a frame RFC 6455 does not allow with 1002,
//!    text that is not UTF-8 with 1007. `session:start` must arrive within
//!    [`JambonzServerConfig::session_start_timeout`] of the upgrade, else the socket is closed
//!    with 1008. Then [`driver::serve`](crate::driver::serve) runs the call with
//!    [`JambonzServerConfig::serve`] until `session:end`, a close, or the end of the connection,
//!    and the socket is closed.
//! 4. **Shutdown.** When the `shutdown` future given to [`JambonzServer::serve`] completes, the
//!    listener is closed and handshakes in progress are dropped; calls in progress go on
//!    for up to [`JambonzServerConfig::shutdown_grace`], and those still running then are closed
//!    with 1001 ("going away"). `serve` returns when every call has ended, with a
//!    [`ServerReport`].
//!
//! Dropping the future of [`JambonzServer::serve`] instead ends every call at once, without a
//! close frame.

mod call;
mod frame;
#[cfg(feature = "tls")]
pub mod tls;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harness_core::Harness;
use harness_core::model::Model;
use harness_core::tool::Tools;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::driver::{CallReport, Env, ServeConfig, ServeError};

/// How a [`JambonzServer`] accepts and serves calls. Every field has a default fit for production;
/// the `with_*` methods change one.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct JambonzServerConfig {
    /// The Bearer secret an upgrade request must carry (`Authorization: Bearer <secret>`),
    /// or `None` (the default) for no check. See
    /// [`check_upgrade`](crate::upgrade::check_upgrade): `Some("")` refuses every request.
    pub secret: Option<String>,
    /// From the accept to the end of the upgrade (TLS included): past it the connection is
    /// dropped (default 5 s).
    pub handshake_timeout: Duration,
    /// From the upgrade to `session:start`: past it the socket is closed with 1008
    /// (default 10 s).
    pub session_start_timeout: Duration,
    /// The most calls in progress; an upgrade past it is refused with 503 (default 10,000).
    pub max_calls: usize,
    /// The most connections accepted and not yet upgraded; one past it is closed at once
    /// (default 1,024).
    pub max_handshakes: usize,
    /// The largest WebSocket message (and frame) read, in bytes; a larger one closes the
    /// socket with 1009 (default 1 MiB, the driver's own limit).
    pub max_message_bytes: usize,
    /// The most bytes read from a socket at once (default 4 KiB, at most 16 KiB), into a
    /// buffer on the stack of the read: none is kept between reads, so an idle call holds no
    /// read buffer. Only the bytes of a frame not yet whole are kept, until it is.
    pub read_buffer_bytes: usize,
    /// Frames written are gathered up to this many bytes before a write; the driver
    /// flushes after each batch of frames (a reply's chunks queued together go out in one
    /// write), and the buffer is freed once written: an idle call holds none (default
    /// 16 KiB).
    pub write_buffer_bytes: usize,
    /// How long the accept loop pauses when accepting fails for want of descriptors or
    /// memory (default 100 ms).
    pub accept_pause: Duration,
    /// How long calls in progress may go on after shutdown begins (default 10 s).
    pub shutdown_grace: Duration,
    /// How each call is served.
    pub serve: ServeConfig,
}

impl Default for JambonzServerConfig {
    fn default() -> Self {
        JambonzServerConfig {
            secret: None,
            handshake_timeout: Duration::from_secs(5),
            session_start_timeout: Duration::from_secs(10),
            max_calls: 10_000,
            max_handshakes: 1_024,
            max_message_bytes: 1024 * 1024,
            read_buffer_bytes: 4 * 1024,
            write_buffer_bytes: 16 * 1024,
            accept_pause: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(10),
            serve: ServeConfig::default(),
        }
    }
}

impl JambonzServerConfig {
    /// Requires `Authorization: Bearer <secret>` on every upgrade (else 401).
    #[must_use]
    pub fn with_secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// Sets [`max_calls`](Self::max_calls).
    #[must_use]
    pub fn with_max_calls(mut self, n: usize) -> Self {
        self.max_calls = n;
        self
    }

    /// Sets [`handshake_timeout`](Self::handshake_timeout).
    #[must_use]
    pub fn with_handshake_timeout(mut self, t: Duration) -> Self {
        self.handshake_timeout = t;
        self
    }

    /// Sets [`session_start_timeout`](Self::session_start_timeout).
    #[must_use]
    pub fn with_session_start_timeout(mut self, t: Duration) -> Self {
        self.session_start_timeout = t;
        self
    }

    /// Sets [`shutdown_grace`](Self::shutdown_grace).
    #[must_use]
    pub fn with_shutdown_grace(mut self, t: Duration) -> Self {
        self.shutdown_grace = t;
        self
    }

    /// Sets [`max_message_bytes`](Self::max_message_bytes).
    #[must_use]
    pub fn with_max_message_bytes(mut self, n: usize) -> Self {
        self.max_message_bytes = n;
        self
    }

    /// Sets [`read_buffer_bytes`](Self::read_buffer_bytes) and
    /// [`write_buffer_bytes`](Self::write_buffer_bytes).
    #[must_use]
    pub fn with_buffers(mut self, read: usize, write: usize) -> Self {
        self.read_buffer_bytes = read;
        self.write_buffer_bytes = write;
        self
    }

    /// Sets [`serve`](Self::serve), how each call is served.
    #[must_use]
    pub fn with_serve(mut self, serve: ServeConfig) -> Self {
        self.serve = serve;
        self
    }
}

/// Why a connection did not make a whole call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The handshake (TLS and the HTTP upgrade) did not end within
    /// [`JambonzServerConfig::handshake_timeout`].
    #[error("no WebSocket upgrade within the handshake timeout")]
    HandshakeTimeout,
    /// The TLS handshake or the upgrade failed (not a WebSocket request, a broken
    /// connection, …).
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The upgrade was refused with this HTTP status: 401 (secret), 400 (subprotocol), 503
    /// (too many calls).
    #[error("upgrade refused ({status}): {reason}")]
    Refused {
        /// The HTTP status sent.
        status: u16,
        /// Why.
        reason: String,
    },
    /// No `session:start` within [`JambonzServerConfig::session_start_timeout`]; the socket was
    /// closed with 1008.
    #[error("no session:start in time")]
    NoSessionStart,
    /// The server shut down: the connection was still in its handshake, or the call went on
    /// past the grace period (closed with 1001).
    #[error("the server shut down")]
    ShutDown,
    /// The driver stopped: the socket could not be written.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// How a connection ended, for [`JambonzServer::on_call_end`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CallEnd {
    /// The peer's address.
    pub peer: SocketAddr,
    /// What the driver reported for a call (it may have ended with a close of its own, see
    /// [`CallReport::closed`]), or why there was no whole call.
    pub outcome: Result<CallReport, CallError>,
}

impl fmt::Display for CallEnd {
    /// One line: the call's sid, peer, turns and how it ended, or why there was no call.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Ok(r) => {
                let sid = r.session.as_ref().and_then(|s| s.call_sid.as_deref());
                write!(
                    f,
                    "call {} from {}: {} turns, {} cancelled, {} failed, {} bad frames, ",
                    sid.unwrap_or("(no call_sid)"),
                    self.peer,
                    r.turns,
                    r.cancelled,
                    r.failed,
                    r.frame_errors.len(),
                )?;
                match (&r.end, &r.closed) {
                    (Some(end), _) => {
                        write!(f, "session:end {}", end.reason.as_deref().unwrap_or("-"))
                    }
                    (None, Some((code, reason))) => write!(f, "closed {code} {reason}"),
                    (None, None) => f.write_str("connection ended"),
                }
            }
            Err(e) => write!(f, "connection from {}: {e}", self.peer),
        }
    }
}

/// What a server did, from [`JambonzServer::serve`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections closed at once: [`JambonzServerConfig::max_handshakes`] were in progress.
    pub dropped_busy: u64,
    /// Upgrades completed: calls.
    pub calls: u64,
    /// Upgrades refused with 401.
    pub refused_unauthorized: u64,
    /// Upgrades refused with 400.
    pub refused_bad_request: u64,
    /// Upgrades refused with 503: [`JambonzServerConfig::max_calls`] were in progress.
    pub refused_busy: u64,
    /// Connections dropped at the handshake timeout.
    pub handshake_timeouts: u64,
    /// Handshakes that failed otherwise.
    pub handshake_failures: u64,
    /// Calls closed for want of `session:start`.
    pub no_session_start: u64,
    /// Calls (or handshakes) ended by the shutdown.
    pub ended_by_shutdown: u64,
    /// Times the accept loop paused for want of descriptors or memory.
    pub accept_pauses: u64,
}

/// Counters shared by the accept loop and the call tasks.
#[derive(Default)]
struct Stats {
    accepted: AtomicU64,
    dropped_busy: AtomicU64,
    calls: AtomicU64,
    refused_unauthorized: AtomicU64,
    refused_bad_request: AtomicU64,
    refused_busy: AtomicU64,
    handshake_timeouts: AtomicU64,
    handshake_failures: AtomicU64,
    no_session_start: AtomicU64,
    ended_by_shutdown: AtomicU64,
    accept_pauses: AtomicU64,
    /// Calls in progress (upgraded, not ended).
    active_calls: AtomicUsize,
    /// Connections accepted and not yet upgraded.
    handshaking: AtomicUsize,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    fn report(&self) -> ServerReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerReport {
            accepted: get(&self.accepted),
            dropped_busy: get(&self.dropped_busy),
            calls: get(&self.calls),
            refused_unauthorized: get(&self.refused_unauthorized),
            refused_bad_request: get(&self.refused_bad_request),
            refused_busy: get(&self.refused_busy),
            handshake_timeouts: get(&self.handshake_timeouts),
            handshake_failures: get(&self.handshake_failures),
            no_session_start: get(&self.no_session_start),
            ended_by_shutdown: get(&self.ended_by_shutdown),
            accept_pauses: get(&self.accept_pauses),
        }
    }

    fn count(&self, outcome: &Result<CallReport, CallError>) {
        let counter = match outcome {
            Ok(_) | Err(CallError::Serve(_)) => return,
            Err(CallError::HandshakeTimeout) => &self.handshake_timeouts,
            Err(CallError::Handshake(_)) => &self.handshake_failures,
            Err(CallError::Refused { status: 401, .. }) => &self.refused_unauthorized,
            Err(CallError::Refused { status: 503, .. }) => &self.refused_busy,
            Err(CallError::Refused { .. }) => &self.refused_bad_request,
            Err(CallError::NoSessionStart) => &self.no_session_start,
            Err(CallError::ShutDown) => &self.ended_by_shutdown,
        };
        bump(counter);
    }
}

/// One unit of a bounded count ([`Stats::active_calls`], [`Stats::handshaking`]), given
/// back when dropped.
struct Slot(Arc<Stats>, fn(&Stats) -> &AtomicUsize);

impl Slot {
    fn take(stats: &Arc<Stats>, which: fn(&Stats) -> &AtomicUsize, max: usize) -> Option<Slot> {
        which(stats)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(stats), which))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::AcqRel);
    }
}

type OnCallEnd = dyn Fn(&CallEnd) + Send + Sync;

/// Where the server is in its life, for the call tasks (a `watch` value).
const RUNNING: u8 = 0;
/// Shutdown began: handshakes in progress are dropped, calls go on.
const DRAINING: u8 = 1;
/// The grace period is over: calls still running are closed with 1001.
const ENDING: u8 = 2;

/// What every call task shares.
struct Shared {
    config: JambonzServerConfig,
    /// The agent, its model, its tools, the clock and how calls are served: one for all
    /// calls.
    env: Arc<Env>,
    stats: Arc<Stats>,
    on_call_end: Option<Arc<OnCallEnd>>,
    #[cfg(feature = "tls")]
    tls: Option<tls::TlsConfig>,
}

/// A jambonz harness server: see the [module docs](self).
pub struct JambonzServer {
    config: JambonzServerConfig,
    on_call_end: Option<Arc<OnCallEnd>>,
    #[cfg(feature = "tls")]
    tls: Option<tls::TlsConfig>,
}

impl fmt::Debug for JambonzServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JambonzServer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl JambonzServer {
    /// A server with this configuration.
    pub fn new(config: JambonzServerConfig) -> Self {
        JambonzServer {
            config,
            on_call_end: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Serves `wss://`: every connection starts with a TLS handshake (within the handshake
    /// timeout).
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn with_tls(mut self, tls: tls::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Calls `f` when a connection ends, with how it ended (for a log line, metrics).
    /// It runs on the call's task: keep it short.
    #[must_use]
    pub fn on_call_end(mut self, f: impl Fn(&CallEnd) + Send + Sync + 'static) -> Self {
        self.on_call_end = Some(Arc::new(f));
        self
    }

    /// Serves `harness` on `listener` until `shutdown` completes, then ends gracefully
    /// (see the [module docs](self)) and reports.
    ///
    /// `model` answers the agent's `sink.model`; `tools` are the harness's own tools (see
    /// [`driver::serve`](crate::driver::serve)). One of each serves every call.
    pub async fn serve<F>(
        self,
        listener: TcpListener,
        harness: impl Harness + 'static,
        model: impl Model + 'static,
        tools: Tools,
        shutdown: F,
    ) -> ServerReport
    where
        F: Future<Output = ()>,
    {
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            env: Arc::new(Env::new(
                Arc::new(harness),
                Arc::new(model),
                tools,
                Arc::new(Instant::now),
                self.config.serve.clone(),
            )),
            config: self.config,
            stats: Arc::clone(&stats),
            on_call_end: self.on_call_end,
            #[cfg(feature = "tls")]
            tls: self.tls,
        });
        let (stage, stage_rx) = watch::channel(RUNNING);
        let mut tasks = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let config = &shared.config;

        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                accepted = listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        bump(&stats.accepted);
                        let Some(slot) =
                            Slot::take(&stats, |s| &s.handshaking, config.max_handshakes)
                        else {
                            bump(&stats.dropped_busy);
                            drop(tcp);
                            continue;
                        };
                        let accepted = call::Accepted {
                            tcp,
                            peer,
                            handshake: slot,
                            shared: Arc::clone(&shared),
                            stage: stage_rx.clone(),
                        };
                        tasks.spawn(call::connection(Box::new(accepted)));
                    }
                    Err(e) if is_per_connection(&e) => {}
                    Err(_) => {
                        // Out of descriptors or memory: the error repeats until some are
                        // free, so wait instead of spinning.
                        bump(&stats.accept_pauses);
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(config.accept_pause) => {}
                        }
                    }
                },
            }
        }

        // Shutdown: no new connections; handshakes in progress end now; calls go on for the
        // grace period, then are closed.
        drop(listener);
        let _ = stage.send(DRAINING);
        let all_done = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(config.shutdown_grace, all_done)
            .await
            .is_err()
        {
            let _ = stage.send(ENDING);
            // Each call sends its close within `call::CLOSE_TIMEOUT`; then it is dropped.
            let ended = async { while tasks.join_next().await.is_some() {} };
            if tokio::time::timeout(call::CLOSE_TIMEOUT * 2, ended)
                .await
                .is_err()
            {
                tasks.shutdown().await;
            }
        }
        stats.report()
    }
}

/// Whether an accept error is about one connection (it went away before it was accepted):
/// the next accept may well succeed. Anything else (`EMFILE`, `ENFILE`, `ENOBUFS`,
/// `ENOMEM`, …) repeats until resources are freed.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}
