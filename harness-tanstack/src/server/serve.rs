//! [`serve`]: an axum app on a TCP listener over HTTP/1.1, bounded against hostile clients.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

/// How [`serve`] accepts and keeps connections. Every field has a default fit for
/// production; the `with_*` methods change one.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TanstackServeConfig {
    /// How long a client may take to send a request's head, from the accept (or from the
    /// end of the previous answer on a kept-alive connection): past it the connection is
    /// closed (default 10 s). A client that trickles its headers a byte at a time holds its
    /// connection no longer than this.
    pub header_timeout: Duration,
    /// The most connections open at once, streams and WebSockets included (default
    /// 16,384). One past it is answered `503` with `Retry-After` and closed, before
    /// anything is read.
    pub max_connections: usize,
    /// How long the accept loop pauses when accepting fails for want of descriptors or
    /// memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`), instead of spinning a core on an
    /// error that repeats until a descriptor is free (default 100 ms).
    pub accept_pause: Duration,
    /// How long connections in progress may go on after shutdown begins (default 10 s):
    /// requests in progress finish, WebSockets are sent the close `1001` (going away);
    /// whatever is still open then (streams, WebSockets whose client does not take the
    /// close) is closed.
    pub shutdown_grace: Duration,
    /// How long a write to a connection may stay blocked (the client does not read) before
    /// the connection is closed (default 60 s, twice the spec's default `slowConsumerMs`;
    /// `None`: no limit). The host gives a slow consumer up on its own after
    /// `slowConsumerMs` and queues `slow_consumer` and the close for when the client reads
    /// again, but the bytes already handed to the connection (the socket's buffers) hold
    /// it, and its descriptor, for as long as the client does not read: this drops it.
    /// Keep it well above `slowConsumerMs`, so that a client that reads again late still
    /// gets the spec's `slow_consumer` rather than a cut connection.
    pub write_timeout: Option<Duration>,
}

/// The default [`TanstackServeConfig::write_timeout`]: twice the spec's default
/// `slowConsumerMs` (30 s).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for TanstackServeConfig {
    fn default() -> Self {
        TanstackServeConfig {
            header_timeout: Duration::from_secs(10),
            max_connections: 16_384,
            accept_pause: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(10),
            write_timeout: Some(DEFAULT_WRITE_TIMEOUT),
        }
    }
}

impl TanstackServeConfig {
    /// Sets [`header_timeout`](Self::header_timeout).
    #[must_use]
    pub fn with_header_timeout(mut self, t: Duration) -> Self {
        self.header_timeout = t;
        self
    }

    /// Sets [`max_connections`](Self::max_connections).
    #[must_use]
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Sets [`write_timeout`](Self::write_timeout).
    #[must_use]
    pub fn with_write_timeout(mut self, t: Duration) -> Self {
        self.write_timeout = Some(t);
        self
    }

    /// No [`write_timeout`](Self::write_timeout): a client that does not read holds its
    /// connection until it reads again or goes away.
    #[must_use]
    pub fn without_write_timeout(mut self) -> Self {
        self.write_timeout = None;
        self
    }

    /// Sets [`shutdown_grace`](Self::shutdown_grace).
    #[must_use]
    pub fn with_shutdown_grace(mut self, t: Duration) -> Self {
        self.shutdown_grace = t;
        self
    }
}

/// What [`serve`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections answered `503` at once: [`TanstackServeConfig::max_connections`] were open.
    pub refused_busy: u64,
    /// Times the accept loop paused for want of descriptors or memory.
    pub accept_pauses: u64,
    /// Connections closed because a write stayed blocked for
    /// [`TanstackServeConfig::write_timeout`] (a client that stopped reading).
    pub write_timeouts: u64,
    /// Connections open when the shutdown began, upgraded WebSockets and streams included.
    pub open_at_shutdown: u64,
    /// Connections still open at the end of the grace period, closed by the shutdown
    /// (streams, and WebSockets that did not take their close in time).
    pub ended_by_shutdown: u64,
}

/// The answer to a connection past the cap.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
retry-after: 1\r\ncontent-length: 18\r\nconnection: close\r\n\r\n{\"error\":\"busy\"}\n";

/// How long a busy answer may take, with the client's request drained meanwhile.
const BUSY_LINGER: Duration = Duration::from_millis(500);

/// A count of open connections and a wake-up when one closes.
#[derive(Default)]
struct Open {
    n: AtomicUsize,
    closed: Notify,
}

impl Open {
    fn len(&self) -> usize {
        self.n.load(Ordering::Acquire)
    }

    /// Waits until no connection is open.
    async fn all_closed(&self) {
        loop {
            let closed = self.closed.notified();
            let mut closed = std::pin::pin!(closed);
            closed.as_mut().enable();
            if self.len() == 0 {
                return;
            }
            closed.await;
        }
    }
}

/// One open connection, given back when dropped: it travels with the connection's I/O, so
/// an upgraded WebSocket keeps counting until it ends.
struct Slot(Arc<Open>);

impl Slot {
    fn take(open: &Arc<Open>, max: usize) -> Option<Slot> {
        open.n
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(open)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.n.fetch_sub(1, Ordering::AcqRel);
        self.0.closed.notify_waiters();
    }
}

/// Where the server is: serving, draining (shutdown began), or closing what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    Draining,
    Closing,
}

/// The server's shutdown as a handler sees it (a request extension set by [`serve`]): the
/// WebSocket route sends its close `1001` when the shutdown begins.
#[derive(Clone, Debug)]
pub(super) struct Shutdown(watch::Receiver<Phase>);

impl Shutdown {
    /// Completes when the shutdown begins (or the server is gone).
    pub(super) async fn begun(&mut self) {
        let _ = self.0.wait_for(|p| *p >= Phase::Draining).await;
    }
}

/// A TCP stream holding its [`Slot`], whose writes fail once blocked for `write_timeout`
/// and whose reads and writes fail once the shutdown's grace is over (so that an upgraded
/// WebSocket, which runs on a task of its own, ends too).
struct Counted {
    tcp: TcpStream,
    _slot: Slot,
    write_timeout: Option<Duration>,
    /// Since a write was first refused (the socket's buffer full): the deadline.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Counts the connections the write timeout closed.
    timeouts: Arc<AtomicU64>,
    /// Completes when the server closes what is left (or is gone).
    closing: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Counted {
    fn new(
        tcp: TcpStream,
        slot: Slot,
        write_timeout: Option<Duration>,
        timeouts: Arc<AtomicU64>,
        mut phase: watch::Receiver<Phase>,
    ) -> Counted {
        let closing = Box::pin(async move {
            let _ = phase.wait_for(|p| *p >= Phase::Closing).await;
        });
        Counted {
            tcp,
            _slot: slot,
            write_timeout,
            stalled: None,
            timeouts,
            closing,
        }
    }

    /// An error once the server closes what is left; the waker is kept meanwhile.
    fn closed(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.closing
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::ConnectionAborted, "the server shut down"))
    }

    /// After the inner write: a write that went through clears the stall; one that is
    /// refused starts (or checks) the deadline, and past it fails with `TimedOut`.
    fn stall<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let Some(t) = self.write_timeout else {
            return r;
        };
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                // Once: a later write (hyper may try again) starts a new deadline.
                self.stalled = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read for the write timeout",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.closed(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.closed(cx) {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.stall(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.closed(cx) {
            return Poll::Ready(Err(e));
        }
        let r = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.stall(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Serves `app` on `listener` over HTTP/1.1 (keep-alive, chunked streams, WebSocket
/// upgrades) until `shutdown` completes, then ends gracefully and reports.
///
/// - **Accept.** Past [`TanstackServeConfig::max_connections`] open connections a new one is
///   answered `503` (`Retry-After: 1`, `{"error":"busy"}`) and closed. When accepting fails
///   for want of resources (`EMFILE`, …) the loop pauses [`TanstackServeConfig::accept_pause`];
///   the listener's backlog holds new connections meanwhile.
/// - **Heads.** A request's head must arrive within [`TanstackServeConfig::header_timeout`]; a
///   client that trickles it (or sends nothing) is dropped then. (The router bounds bodies:
///   [`TanstackRouterConfig::body_timeout`](super::TanstackRouterConfig::body_timeout).)
/// - **Writes.** A write blocked for [`TanstackServeConfig::write_timeout`] (a client that
///   does not read) closes the connection, WebSockets included.
/// - **Shutdown.** When `shutdown` completes the listener is closed; connections finish the
///   request in progress and close (kept-alive ones at once), and WebSockets are sent the
///   close `1001` (going away); whatever is still open after
///   [`TanstackServeConfig::shutdown_grace`] (streams, WebSockets whose client did not take
///   the close) is closed, and counted in [`ServeReport::ended_by_shutdown`]. `serve`
///   returns when every connection it accepted, upgraded ones included, is closed.
pub async fn serve<F>(
    listener: TcpListener,
    app: axum::Router,
    cfg: TanstackServeConfig,
    shutdown: F,
) -> ServeReport
where
    F: Future<Output = ()>,
{
    let open = Arc::new(Open::default());
    let busy_answers = Arc::new(Open::default());
    let timeouts = Arc::new(AtomicU64::new(0));
    let mut report = ServeReport::default();
    let (phase, phase_rx) = watch::channel(Phase::Serving);
    // The WebSocket route reads the shutdown from its request (the close 1001).
    let app = app.layer(axum::Extension(Shutdown(phase_rx.clone())));
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => {
                    report.accepted += 1;
                    let Some(slot) = Slot::take(&open, cfg.max_connections) else {
                        report.refused_busy += 1;
                        // The answers to busy connections are bounded too: past as many
                        // again, the connection is only closed.
                        if let Some(b) = Slot::take(&busy_answers, cfg.max_connections.max(64)) {
                            tokio::spawn(answer_busy(tcp, b));
                        }
                        continue;
                    };
                    let _ = tcp.set_nodelay(true); // ok: a latency hint, not required
                    let io = Counted::new(tcp, slot, cfg.write_timeout, Arc::clone(&timeouts), phase_rx.clone());
                    tasks.spawn(connection(io, app.clone(), cfg.header_timeout, phase_rx.clone()));
                }
                Err(e) if is_per_connection(&e) => {}
                Err(_) => {
                    report.accept_pauses += 1;
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(cfg.accept_pause) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    report.open_at_shutdown = open.len() as u64;
    let _ = phase.send(Phase::Draining);
    let all_done = async {
        while tasks.join_next().await.is_some() {}
        open.all_closed().await; // upgraded WebSockets run on tasks of their own
    };
    if tokio::time::timeout(cfg.shutdown_grace, all_done)
        .await
        .is_err()
    {
        report.ended_by_shutdown = open.len() as u64;
        let _ = phase.send(Phase::Closing);
        tasks.shutdown().await;
        // Each upgraded connection's next read or write fails now, and its task ends; one
        // whose task is stuck elsewhere is not waited for past the grace again.
        let _ = tokio::time::timeout(cfg.shutdown_grace, open.all_closed()).await;
    }
    report.write_timeouts = timeouts.load(Ordering::Relaxed);
    report
}

async fn connection(
    io: Counted,
    app: axum::Router,
    header_timeout: Duration,
    mut phase: watch::Receiver<Phase>,
) {
    let service = TowerToHyperService::new(app);
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = b
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = phase.wait_for(|p| *p >= Phase::Draining) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// `503` to a connection past the cap: written, then the request (if any) drained for a
/// moment so that the close does not reset the answer away.
async fn answer_busy(mut tcp: TcpStream, _slot: Slot) {
    let _ = tokio::time::timeout(BUSY_LINGER, async {
        tcp.write_all(BUSY).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
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
