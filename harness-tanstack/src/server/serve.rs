//! [`serve`]: an axum app on a TCP listener over HTTP/1.1, bounded against hostile clients.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
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
    /// How long connections in progress may go on after shutdown begins (default 10 s).
    pub shutdown_grace: Duration,
    /// How long a write to a connection may stay blocked (the client does not read) before
    /// the connection is closed; `None` (the default): no limit. The host gives a slow
    /// consumer up on its own after `slowConsumerMs` and queues `slow_consumer` and the
    /// close for when the client reads again, but the bytes already handed to the
    /// connection hold it, and its descriptor, for as long as the client does not read:
    /// this drops it. Keep it well above `slowConsumerMs`, so that a client that reads
    /// again late still gets the spec's `slow_consumer` rather than a cut connection.
    pub write_timeout: Option<Duration>,
}

impl Default for TanstackServeConfig {
    fn default() -> Self {
        TanstackServeConfig {
            header_timeout: Duration::from_secs(10),
            max_connections: 16_384,
            accept_pause: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(10),
            write_timeout: None,
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
    /// Connections still open at the end of the grace period, closed by the shutdown.
    pub ended_by_shutdown: u64,
}

/// The answer to a connection past the cap.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
retry-after: 1\r\ncontent-length: 18\r\nconnection: close\r\n\r\n{\"error\":\"busy\"}\n";

/// How long a busy answer may take, with the client's request drained meanwhile.
const BUSY_LINGER: Duration = Duration::from_millis(500);

/// One open connection, given back when dropped: it travels with the connection's I/O, so
/// an upgraded WebSocket keeps counting until it ends.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(count)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A TCP stream holding its [`Slot`], whose writes fail once blocked for `write_timeout`.
struct Counted {
    tcp: TcpStream,
    _slot: Slot,
    write_timeout: Option<Duration>,
    /// Since a write was first refused (the socket's buffer full): the deadline.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Counted {
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
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read for the write timeout",
            ))),
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
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
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
/// - **Writes.** With [`TanstackServeConfig::write_timeout`], a write blocked that long (a client
///   that does not read) closes the connection, WebSockets included.
/// - **Shutdown.** When `shutdown` completes the listener is closed; connections finish the
///   request in progress and close (kept-alive ones at once); those still open after
///   [`TanstackServeConfig::shutdown_grace`] (streams) are closed. Upgraded WebSockets run on their
///   own tasks and end with the runtime.
pub async fn serve<F>(
    listener: TcpListener,
    app: axum::Router,
    cfg: TanstackServeConfig,
    shutdown: F,
) -> ServeReport
where
    F: Future<Output = ()>,
{
    let open = Arc::new(AtomicUsize::new(0));
    let busy_answers = Arc::new(AtomicUsize::new(0));
    let mut report = ServeReport::default();
    let (stop, stop_rx) = watch::channel(false);
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
                    let io = Counted { tcp, _slot: slot, write_timeout: cfg.write_timeout, stalled: None };
                    tasks.spawn(connection(io, app.clone(), cfg.header_timeout, stop_rx.clone()));
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
    let _ = stop.send(true);
    let all_done = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(cfg.shutdown_grace, all_done)
        .await
        .is_err()
    {
        report.ended_by_shutdown = tasks.len() as u64;
        tasks.shutdown().await;
    }
    report
}

async fn connection(
    io: Counted,
    app: axum::Router,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(app);
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let conn = b
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    if *stop.borrow() {
        conn.as_mut().graceful_shutdown();
    }
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.changed() => {}
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
