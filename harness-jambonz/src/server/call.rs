//! One connection: the handshake (TLS, the upgrade check, the call cap) within its deadline,
//! then the driver over the WebSocket, with the `session:start` deadline and the shutdown.
//!
//! Memory per idle call is what a call holds while it waits for its next frame: the task
//! (kept small: the handshake, the driver and the close are boxed, so that the task is not
//! sized for the largest phase of a call, and nothing is held across an await that the call
//! no longer needs), the socket in it (one lock, not two split halves), the driver's state
//! (its `Env` shared by every call of the server). The socket keeps no buffer while idle:
//! tungstenite does the upgrade, then it is dropped and the frames are read and written by
//! [`frame`](super::frame), which reads into a buffer on the stack and keeps only the bytes of
//! a frame not yet whole.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::Stream;
use futures::{Sink, SinkExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Sleep;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::frame::{Event, Fault, Reader, encode_close, encode_pong, encode_text};
use super::{CallEnd, CallError, DRAINING, ENDING, Shared, Slot};
use crate::driver::{CallReport, Incoming, serve_env};
use crate::frame::peek_type;
use crate::harness_side::Transmit;
use crate::upgrade::check_upgrade;

/// How long the server waits to send a close frame (the peer may not be reading).
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// An accepted connection, as its task starts with it (boxed: the task's future keeps what
/// it starts with for its whole life, and this is needed only until the upgrade).
pub(super) struct Accepted {
    pub(super) tcp: TcpStream,
    pub(super) peer: SocketAddr,
    pub(super) handshake: Slot,
    pub(super) shared: Arc<Shared>,
    pub(super) stage: watch::Receiver<u8>,
}

/// Serves one accepted connection and says how it ended.
pub(super) async fn connection(accepted: Box<Accepted>) {
    let Accepted {
        tcp,
        peer,
        handshake,
        shared,
        mut stage,
    } = {
        // Moved out in a block of its own: the box is freed here, not at the end of the call.
        let accepted = accepted;
        *accepted
    };
    // The upgraded socket comes boxed and is moved out at once: what a task's future holds
    // across an await (a `match` on the result, say) it holds for the life of the call.
    let socket = match Box::pin(upgrade(tcp, handshake, &shared, &mut stage)).await {
        Ok(socket) => socket,
        Err(e) => return ended(&shared, peer, Err(e)),
    };
    // Out of its box, and the box freed now (a box moved out of is freed at the end of its
    // scope: here, the end of the call).
    let (ws, slot) = {
        let socket = socket;
        *socket
    };
    let ws = Mutex::new(ws);
    let outcome = call(&ws, &shared, &mut stage).await;
    drop(slot);
    ended(&shared, peer, outcome);
}

/// Counts how a connection ended, and tells `on_call_end`.
fn ended(shared: &Shared, peer: SocketAddr, outcome: Result<CallReport, CallError>) {
    shared.stats.count(&outcome);
    if let Err(e) = &outcome {
        // A refused upgrade, a failed handshake, a call that broke: at debug level (what a
        // peer causes cannot flood a log at info).
        tracing::debug!(%peer, error = %e, "jambonz connection ended in error");
    }
    if let Some(f) = &shared.on_call_end {
        f(&CallEnd { peer, outcome });
    }
}

/// The connection, plain or TLS, with the batch of frames written and not yet flushed.
///
/// tungstenite writes each frame through at once (its own write buffer is off: it keeps
/// its capacity for the life of the call); the frames are gathered here, up to
/// [`JambonzServerConfig::write_buffer_bytes`](super::JambonzServerConfig::write_buffer_bytes), and go
/// out in one write when the driver flushes, after which the batch is freed: an idle call
/// holds no write buffer.
struct Conn {
    io: Io,
    out: Vec<u8>,
    /// How much of `out` is written.
    written: usize,
    limit: usize,
    /// The size of the last batch: the next one is allocated at it (one allocation a
    /// batch, not one for every doubling).
    last_batch: usize,
}

enum Io {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// The most bytes read at once (the stack buffer of a read).
const MAX_READ: usize = 16 * 1024;

/// The socket of a call, once upgraded. The driver reads it through [`Frames`] and writes
/// it through [`Out`], one at a time (never both at once: the lock is never contended); a
/// lock, not two split halves, which would add a shared allocation to every call.
struct Socket {
    conn: Conn,
    reader: Reader,
    /// Bytes read and not yet taken: a frame not yet whole (empty, unallocated, between
    /// frames).
    pending: Vec<u8>,
    read_chunk: usize,
    /// A close frame is sent (or queued): nothing more may be (RFC 6455 §5.5.1).
    close_sent: bool,
    /// Nothing more to read: the peer's close, the end of the connection, or a fault.
    done: bool,
}

/// The handshake, within its deadline: TLS (when the server has it), then the upgrade.
async fn upgrade(
    tcp: TcpStream,
    handshake: Slot,
    shared: &Shared,
    stage: &mut watch::Receiver<u8>,
) -> Result<Box<(Socket, Slot)>, CallError> {
    let _ = tcp.set_nodelay(true);
    let deadline = tokio::time::Instant::now() + shared.config.handshake_timeout;
    #[cfg(feature = "tls")]
    let conn = match &shared.tls {
        Some(tls) => {
            let accept = tls.acceptor().accept(tcp);
            let stream = in_handshake(deadline, stage, accept)
                .await?
                .map_err(|e| CallError::Handshake(format!("TLS: {e}")))?;
            Io::Tls(Box::new(stream))
        }
        None => Io::Plain(tcp),
    };
    #[cfg(not(feature = "tls"))]
    let conn = Io::Plain(tcp);
    let conn = Conn {
        io: conn,
        out: Vec::new(),
        written: 0,
        limit: shared.config.write_buffer_bytes.max(1),
        last_batch: 0,
    };

    let config = &shared.config;
    let mut refused: Option<(u16, &'static str)> = None;
    let mut call_slot: Option<Slot> = None;
    // The callback's type is tungstenite's (its error is a whole HTTP response).
    #[allow(clippy::result_large_err)]
    let check = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes()));
        let refusal = match check_upgrade(headers, config.secret.as_deref()) {
            Ok(accept) => match Slot::take(&shared.stats, |s| &s.active_calls, config.max_calls) {
                Some(slot) => {
                    call_slot = Some(slot);
                    resp.headers_mut().insert(
                        "sec-websocket-protocol",
                        HeaderValue::from_static(accept.subprotocol),
                    );
                    return Ok(resp);
                }
                None => (503, "too many calls in progress"),
            },
            Err(r) => (r.status, r.reason),
        };
        refused = Some(refusal);
        let mut e = ErrorResponse::new(Some(refusal.1.to_owned()));
        *e.status_mut() = StatusCode::from_u16(refusal.0).unwrap_or(StatusCode::BAD_REQUEST);
        if refusal.0 == 503 {
            e.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
        }
        Err(e)
    };
    // tungstenite's socket lives only until the upgrade is done: its buffers small.
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(64)
        .write_buffer_size(0);
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(conn, check, Some(ws_config));
    let ws = match in_handshake(deadline, stage, upgrade).await? {
        Ok(ws) => ws,
        Err(e) => {
            return Err(match refused {
                Some((status, reason)) => CallError::Refused {
                    status,
                    reason: reason.to_owned(),
                },
                None => CallError::Handshake(e.to_string()),
            });
        }
    };
    let Some(call_slot) = call_slot else {
        // Unreachable: an upgrade completes only through the check, which took a slot.
        return Err(CallError::Handshake("upgrade without a check".into()));
    };
    // Nothing read and not taken: tungstenite refuses bytes after the request (RFC 6455
    // §4.1: the client "MUST wait for a response from the server before sending any
    // further data").
    let conn = ws.into_inner();
    drop(handshake);
    shared
        .stats
        .calls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = Socket {
        conn,
        reader: Reader::new(config.max_message_bytes),
        pending: Vec::new(),
        read_chunk: config.read_buffer_bytes.clamp(1, MAX_READ),
        close_sent: false,
        done: false,
    };
    Ok(Box::new((socket, call_slot)))
}

/// Runs a step of the handshake until the deadline or the shutdown.
async fn in_handshake<T>(
    deadline: tokio::time::Instant,
    stage: &mut watch::Receiver<u8>,
    step: impl Future<Output = T>,
) -> Result<T, CallError> {
    tokio::select! {
        r = step => Ok(r),
        () = tokio::time::sleep_until(deadline) => Err(CallError::HandshakeTimeout),
        () = reached(stage, DRAINING) => Err(CallError::ShutDown),
    }
}

/// Completes when the server's stage is `at` or later (never, if the server is gone: its
/// tasks are then aborted).
async fn reached(stage: &mut watch::Receiver<u8>, at: u8) {
    loop {
        if *stage.borrow_and_update() >= at {
            return;
        }
        if stage.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// The call, once upgraded: the driver until the call ends (or the shutdown ends it), then
/// the close.
async fn call(
    ws: &Mutex<Socket>,
    shared: &Shared,
    stage: &mut watch::Receiver<u8>,
) -> Result<CallReport, CallError> {
    let mut incoming = Frames {
        ws,
        session_deadline: Some(Box::pin(tokio::time::sleep(
            shared.config.session_start_timeout,
        ))),
        close: None,
    };
    let incoming = &mut incoming;
    let outgoing = &mut Out(ws);
    let served = {
        // Boxed: the driver's state is most of a call's memory, allocated at its size.
        let serve = Box::pin(serve_env(
            Arc::clone(&shared.env),
            &mut *incoming,
            &mut *outgoing,
        ));
        tokio::select! {
            // The report boxed: it is kept across the close below.
            r = serve => Some(r.map(Box::new)),
            () = reached(stage, ENDING) => None,
        }
    };
    let (close, outcome) = match served {
        // 1001: going away.
        None => (
            Some((1001, "the server is shutting down")),
            Err(CallError::ShutDown),
        ),
        Some(r) => match (incoming.close, r) {
            // 1008: policy violation.
            (Some(Ending::NoSessionStart), _) => (
                Some((1008, "no session:start in time")),
                Err(CallError::NoSessionStart),
            ),
            // 1009: message too big.
            (Some(Ending::TooBig), r) => {
                (Some((1009, "message too big")), r.map_err(CallError::from))
            }
            // `session:end`, or the peer went away without a close: 1000. (A close the
            // driver sent, or the peer's, is already answered.)
            (None, Ok(report)) if report.closed.is_none() => {
                (Some((1000, "call ended")), Ok(report))
            }
            (None, r) => (None, r.map_err(CallError::from)),
        },
    };
    // Best effort: the peer may be gone, or not reading. Boxed: the future of a call is
    // sized for its largest phase, and this one runs once, at the end.
    let _ = Box::pin(tokio::time::timeout(CLOSE_TIMEOUT, async {
        if let Some((code, reason)) = close {
            let close = Transmit::Close {
                code,
                reason: reason.to_owned(),
            };
            let _ = outgoing.send(close).await;
        }
        let _ = outgoing.close().await;
    }))
    .await;
    outcome.map(|r| *r)
}

/// Why the adapter ended the call itself (the close it sends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// `session:start` did not come in time: 1008.
    NoSessionStart,
    /// A message over the limit: 1009.
    TooBig,
}

/// The socket's messages as the driver's frames, with the `session:start` deadline.
struct Frames<'a> {
    ws: &'a Mutex<Socket>,
    /// Armed until a `session:start` arrives (then dropped: an idle call keeps no timer).
    session_deadline: Option<Pin<Box<Sleep>>>,
    close: Option<Ending>,
}

impl Stream for Frames<'_> {
    type Item = Incoming;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Incoming>> {
        let this = &mut *self;
        if this.close.is_some() {
            return Poll::Ready(None);
        }
        if let Some(d) = &mut this.session_deadline {
            if d.as_mut().poll(cx).is_ready() {
                this.session_deadline = None;
                this.close = Some(Ending::NoSessionStart);
                return Poll::Ready(None);
            }
        }
        let next = match lock(this.ws).poll_message(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(next) => next,
        };
        Poll::Ready(next.map(|m| match m {
            Ok(Incoming::Text(t)) => {
                if this.session_deadline.is_some()
                    && peek_type(&t).is_ok_and(|k| k == "session:start")
                {
                    this.session_deadline = None;
                }
                Incoming::Text(t)
            }
            Ok(other) => other,
            Err(fault) => {
                if matches!(fault, Fault::TooBig { .. }) {
                    this.close = Some(Ending::TooBig);
                }
                Incoming::Close {
                    code: None,
                    reason: fault.to_string(),
                }
            }
        }))
    }
}

impl Socket {
    /// The next message: a text, a binary or a close; pings answered, pongs dropped. A
    /// fault is answered with its close (1002, 1007), except 1009, which the call sends
    /// (`Ending::TooBig`); after it, or the peer's close, or the end of the connection,
    /// `None`.
    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Incoming, Fault>>> {
        // A pong or close queued and not yet written goes first. A peer that pings and does
        // not read is not read either once a batch of pongs waits (the pongs stay bounded).
        if !self.conn.out.is_empty() {
            match self.conn.poll_drain(cx) {
                Poll::Ready(Err(e)) => {
                    self.done = true;
                    return Poll::Ready(Some(Ok(broken(&e))));
                }
                Poll::Pending if self.conn.out.len() >= self.conn.limit => return Poll::Pending,
                _ => {}
            }
        }
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if !self.pending.is_empty() {
                match self.reader.next(&self.pending) {
                    Ok(Some((n, event))) => {
                        if n == self.pending.len() {
                            // Freed: an idle call keeps no bytes.
                            self.pending = Vec::new();
                        } else {
                            self.pending.drain(..n);
                        }
                        if let Some(m) = event.and_then(|e| self.on_event(e, cx)) {
                            return Poll::Ready(Some(Ok(m)));
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(fault) => return Poll::Ready(Some(Err(self.fail(fault, cx)))),
                }
            }
            // Read what the socket has, on the stack: only a frame not yet whole is kept.
            // Not zeroed first (16 KiB a poll): `ReadBuf` tracks what the read filled.
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); MAX_READ];
            let mut buf = ReadBuf::uninit(&mut chunk[..self.read_chunk]);
            match self.conn.io.pin().poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    self.done = true;
                    return Poll::Ready(Some(Ok(broken(&e))));
                }
                Poll::Ready(Ok(())) => {}
            }
            let read = buf.filled();
            if read.is_empty() {
                // The peer went away without a close.
                self.done = true;
                return Poll::Ready(None);
            }
            if !self.pending.is_empty() {
                self.pending.extend_from_slice(read);
                continue;
            }
            // Whole frames straight from the chunk; the rest kept.
            let mut at = 0;
            while at < read.len() {
                match self.reader.next(&read[at..]) {
                    Ok(Some((n, event))) => {
                        at += n;
                        if let Some(m) = event.and_then(|e| self.on_event(e, cx)) {
                            self.pending.extend_from_slice(&read[at..]);
                            return Poll::Ready(Some(Ok(m)));
                        }
                    }
                    Ok(None) => break,
                    Err(fault) => return Poll::Ready(Some(Err(self.fail(fault, cx)))),
                }
            }
            self.pending.extend_from_slice(&read[at..]);
        }
    }

    /// What a message means to the driver; a ping is answered here.
    fn on_event(&mut self, event: Event, cx: &mut Context<'_>) -> Option<Incoming> {
        match event {
            Event::Text(t) => Some(Incoming::Text(t)),
            Event::Binary => Some(Incoming::Binary),
            Event::Ping(payload) => {
                // RFC 6455 §5.5.2: "Upon receipt of a Ping frame, an endpoint MUST send a
                // Pong frame in response" (unless it already sent a close).
                if !self.close_sent {
                    encode_pong(&mut self.conn.out, &payload);
                    let _ = self.conn.poll_drain(cx);
                }
                None
            }
            Event::Close(body) => {
                // §5.5.1: the endpoint that receives a close, having sent none, "MUST send a
                // Close frame in response"; it echoes the code.
                self.done = true;
                if !self.close_sent {
                    self.close_sent = true;
                    encode_close(&mut self.conn.out, body.as_ref().map(|(c, _)| (*c, "")));
                    let _ = self.conn.poll_drain(cx);
                }
                let (code, reason) = match body {
                    Some((code, reason)) => (Some(code), reason),
                    None => (None, String::new()),
                };
                Some(Incoming::Close { code, reason })
            }
        }
    }

    /// Fails the connection (RFC 6455 §7.1.7): its close sent, unless the call sends it.
    fn fail(&mut self, fault: Fault, cx: &mut Context<'_>) -> Fault {
        self.done = true;
        self.pending = Vec::new();
        if !self.close_sent && !matches!(fault, Fault::TooBig { .. }) {
            self.close_sent = true;
            encode_close(&mut self.conn.out, Some((fault.code(), "")));
            let _ = self.conn.poll_drain(cx);
        }
        fault
    }

    /// Queues a frame from the driver in the batch.
    fn send(&mut self, t: Transmit) -> io::Result<()> {
        if self.close_sent {
            return match t {
                // At most one close (§5.5.1): a second is dropped.
                Transmit::Close { .. } => Ok(()),
                Transmit::Text(_) => Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the WebSocket is closing",
                )),
            };
        }
        let conn = &mut self.conn;
        if conn.out.capacity() == 0 {
            let hint = conn.last_batch.clamp(512, conn.limit.max(512));
            conn.out.reserve_exact(hint);
        }
        match t {
            Transmit::Text(text) => encode_text(&mut conn.out, &text),
            Transmit::Close { code, reason } => {
                self.close_sent = true;
                encode_close(&mut conn.out, Some((code, &reason)));
            }
        }
        Ok(())
    }
}

/// The connection broke: a close without a code.
fn broken(e: &io::Error) -> Incoming {
    Incoming::Close {
        code: None,
        reason: e.to_string(),
    }
}

/// What the driver sends, onto the socket.
struct Out<'a>(&'a Mutex<Socket>);

impl Sink<Transmit> for Out<'_> {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut ws = lock(self.0);
        if ws.conn.out.len() >= ws.conn.limit {
            // The batch is full: out with it first (back-pressure when the peer is slow).
            return ws.conn.poll_drain(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, t: Transmit) -> io::Result<()> {
        lock(self.0).send(t)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(self.0).conn).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(self.0).conn).poll_shutdown(cx)
    }
}

fn lock(ws: &Mutex<Socket>) -> MutexGuard<'_, Socket> {
    // Poisoned only by a panic while polling the socket: the call is then over anyway, and
    // the socket's state is consistent between polls.
    ws.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Io {
    fn pin(&mut self) -> Pin<&mut (dyn AsyncReadWrite + Send)> {
        match self {
            Io::Plain(s) => Pin::new(s),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()),
        }
    }
}

/// What a connection is.
trait AsyncReadWrite: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncReadWrite for T {}

impl Conn {
    /// Writes the batch out; frees it once all is written.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let rest = &self.out[self.written..];
            match self.io.pin().poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.last_batch = self.out.len();
        self.out = Vec::new();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().io.pin().poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.out.len() + buf.len() > this.limit && !this.out.is_empty() {
            // The batch is full: out with it first (back-pressure when the peer is slow).
            match this.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map(|r| r.map(|()| 0)),
            }
        }
        if this.out.is_empty() && buf.len() >= this.limit {
            return this.io.pin().poll_write(cx, buf);
        }
        if this.out.capacity() == 0 {
            let hint = this.last_batch.clamp(512, this.limit.max(512));
            this.out.reserve_exact(hint.max(buf.len()));
        }
        this.out.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => this.io.pin().poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => this.io.pin().poll_shutdown(cx),
            other => other,
        }
    }
}
