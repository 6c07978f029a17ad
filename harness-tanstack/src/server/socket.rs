//! `GET socket`: the WebSocket transport. Frames in go to the host; what the host sends
//! goes out as text frames; a client that does not read is closed 4408; when [`serve`]
//! shuts down, the close 1001 (going away).
//!
//! Every close the server starts is a close frame first (RFC 6455 7.1.7: "the endpoint
//! SHOULD send a Close frame with an appropriate status code (Section 7.4) before
//! proceeding to _Close the WebSocket Connection_"), sent within `slowConsumerMs`, then the
//! TCP connection's write half is shut down (the server closes TCP first, RFC 6455 7.1.1)
//! and what the client still sends is read and dropped for at most
//! [`TanstackRouterConfig::socket_close_linger`], so that the kernel does not answer
//! unread bytes with a reset that could destroy the close frame in flight. The codes:
//!
//! | Why | Code |
//! | --- | --- |
//! | a frame the WebSocket protocol does not allow (reserved bits, bad opcode, a bad fragment, …) | `1002` |
//! | a text message that is not UTF-8 | `1007` |
//! | a message or frame over [`TanstackRouterConfig::max_body_bytes`] | `1009` |
//! | the host refused the user, or the user lost access | `4401` / `4403` (the spec's codes) |
//! | the host could not serve the connection | `1011` |
//! | the server shuts down | `1001` |
//!
//! A message that is UTF-8 but not a valid frame (not JSON, unknown `type`, …) is the
//! host's `invalid_frame` error and the socket stays open (spec "Errors": `invalid_frame`,
//! "Does the stream close? No."); so is a binary message that is not UTF-8.
//!
//! [`serve`]: super::serve
//! [`TanstackRouterConfig::socket_close_linger`]: super::TanstackRouterConfig::socket_close_linger
//! [`TanstackRouterConfig::max_body_bytes`]: super::TanstackRouterConfig::max_body_bytes

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use super::RouterState;
use super::routes::rid;
use super::serve::Shutdown;
use crate::host::Transport;
use crate::log::EventLog;

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// The most bytes read and dropped while waiting for the client's end after a close.
const MAX_LINGER_BYTES: usize = 1 << 20;

/// The upgrade: the user is read from the upgrade request (header, or `?token=` with the
/// built-in bearer check); a refused user gets the socket and then the close 4401/4403.
pub(super) async fn socket<L: EventLog + 'static>(
    State(st): State<Arc<RouterState<L>>>,
    req: Request,
) -> Response {
    let (mut parts, _) = req.into_parts();
    let rid = rid(&parts.headers);
    let shutdown = parts.extensions.get::<Shutdown>().cloned();
    let user = match &st.cfg.auth {
        None => Ok(None),
        Some(hook) => hook(&parts).map(|u| Some(u.as_str().to_owned())),
    };
    // axum's extractor checks the upgrade request (and answers a bad one); the upgraded
    // stream is taken here, so that the close can shut the TCP connection down and drain it.
    let on_upgrade = parts.extensions.get::<OnUpgrade>().cloned();
    if let Err(e) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        return e.into_response();
    }
    let (Some(on_upgrade), Some(key)) = (on_upgrade, parts.headers.get(header::SEC_WEBSOCKET_KEY))
    else {
        return StatusCode::UPGRADE_REQUIRED.into_response();
    };
    let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let max = st.cfg.max_body_bytes;
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .read_buffer_size(st.cfg.socket_read_buffer_bytes)
        .write_buffer_size(0);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        match user {
            Ok(user) => serve_socket(st, socket, user, rid, shutdown).await,
            Err(r) => {
                let mut socket = socket;
                close(&st, &mut socket, r.close_code(), r.error()).await;
            }
        }
    });
    let mut res = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = res.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    res
}

/// The close for a read that failed: `None` when the client is gone (or closed the TCP
/// connection without a close), else the code and reason of RFC 6455 7.4.1.
fn failure_close(e: &WsError) -> Option<(u16, &'static str)> {
    match e {
        WsError::ConnectionClosed
        | WsError::AlreadyClosed
        | WsError::Io(_)
        | WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        // 1009: "a message that is too big for it to process".
        WsError::Capacity(_) => Some((1009, "message too big")),
        // 1007: "data within a message that was not consistent with the type of the
        // message (e.g., non-UTF-8 [RFC3629] data within a text message)"; RFC 6455 8.1.
        WsError::Utf8(_) => Some((1007, "invalid utf-8")),
        // 1002: "terminating the connection due to a protocol error".
        WsError::Protocol(_) => Some((1002, "protocol error")),
        // 1011: "an unexpected condition that prevented it from fulfilling the request".
        _ => Some((1011, "internal")),
    }
}

/// Sends the close `code` (within `slowConsumerMs`), then shuts the write half down and
/// drops what the client still sends until it closes too, for at most
/// `socket_close_linger`. Never processes the client's data (RFC 6455 7.1.7).
async fn close<L: EventLog>(st: &RouterState<L>, socket: &mut Socket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code: code.into(),
        reason: reason.into(),
    };
    let sent = tokio::time::timeout(st.slow_consumer, socket.send(WsMessage::Close(Some(frame))))
        .await
        .is_ok_and(|r| r.is_ok() || matches!(r, Err(WsError::ConnectionClosed)));
    if sent {
        linger(socket.get_mut(), st.cfg.socket_close_linger).await;
    }
}

/// Shuts the write half down, then reads and drops until the client's end, an error,
/// [`MAX_LINGER_BYTES`] or `within`.
async fn linger(io: &mut TokioIo<hyper::upgrade::Upgraded>, within: Duration) {
    let end = tokio::time::Instant::now() + within;
    if tokio::time::timeout_at(end, io.shutdown()).await.is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    let mut dropped = 0usize;
    while dropped < MAX_LINGER_BYTES {
        match tokio::time::timeout_at(end, io.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => dropped += n,
            _ => return,
        }
    }
}

async fn serve_socket<L: EventLog + 'static>(
    st: Arc<RouterState<L>>,
    mut socket: Socket,
    user: Option<String>,
    rid: String,
    shutdown: Option<Shutdown>,
) {
    let conn = st.svc.connect(Transport::WebSocket, user.as_deref(), &rid);
    let Ok(mut out) = conn.stream() else {
        // A new connection's first stream: the host could not serve it.
        close(&st, &mut socket, 1011, "internal").await;
        return;
    };
    let slow = st.slow_consumer;
    // Without `serve` (another server runs the router), no shutdown to watch.
    let shutting_down = async move {
        match shutdown {
            Some(mut s) => s.begun().await,
            None => std::future::pending().await,
        }
    };
    let mut shutting_down = std::pin::pin!(shutting_down);
    // The close to send when the loop ends (`None`: the client is gone).
    let ending: Option<(u16, String)> = loop {
        tokio::select! {
            () = &mut shutting_down => {
                // RFC 6455 7.4.1: 1001 "indicates that an endpoint is "going away", such
                // as a server going down". The client reconnects (elsewhere) with `from`.
                break Some((1001, "going away".into()));
            }
            msg = socket.next() => match msg {
                Some(Ok(WsMessage::Text(t))) => conn.handle_text(t.as_str()),
                // Not UTF-8, so not JSON: the host answers `invalid_frame` (no close).
                Some(Ok(WsMessage::Binary(b))) => {
                    conn.handle_text(std::str::from_utf8(&b).unwrap_or(""));
                }
                Some(Ok(WsMessage::Close(_))) => {
                    // The close from the client gets its close back (RFC 6455 5.5.1: "the
                    // endpoint MUST send a Close frame in response"), queued by the read
                    // and sent by this flush (dropping the socket leaves the client with
                    // 1006); then the TCP connection is closed.
                    let flushed = tokio::time::timeout(slow, socket.flush()).await;
                    if flushed.is_ok_and(|r| r.is_ok() || matches!(r, Err(WsError::ConnectionClosed))) {
                        linger(socket.get_mut(), st.cfg.socket_close_linger).await;
                    }
                    break None;
                }
                Some(Err(e)) => break failure_close(&e).map(|(c, r)| (c, r.to_owned())),
                None => break None,
                Some(Ok(_)) => {}
            },
            item = out.next() => match item {
                Some(b) => {
                    let text = String::from_utf8_lossy(&b).into_owned();
                    // A client that does not read: the write does not complete, the stream
                    // is not polled, and the host gives the connection up (4408). Queue the
                    // close behind what waits; drop a client that does not take it either.
                    match tokio::time::timeout(slow, socket.send(WsMessage::Text(text.into()))).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break None,
                        Err(_) => break Some((4408, "slow_consumer".into())),
                    }
                }
                None => break Some((out.close_code().unwrap_or(1000), String::new())),
            },
        }
    };
    if let Some((code, reason)) = ending {
        close(&st, &mut socket, code, &reason).await;
    }
}

#[cfg(test)]
mod tests {
    use tokio_tungstenite::tungstenite::error::CapacityError;

    use super::*;

    /// Each failed read maps to the close RFC 6455 7.4.1 names for it (the table in the
    /// module docs), and a client that is gone gets none. The 1011 row cannot be reached
    /// from a socket test (the upgraded connection has no TLS, URL or HTTP stage to fail).
    #[test]
    fn a_failed_read_gets_the_close_rfc_6455_names() {
        let code = |e: WsError| failure_close(&e).map(|(c, _)| c);
        assert_eq!(code(WsError::ConnectionClosed), None);
        assert_eq!(code(WsError::AlreadyClosed), None);
        assert_eq!(
            code(WsError::Io(std::io::ErrorKind::BrokenPipe.into())),
            None
        );
        assert_eq!(
            code(WsError::Protocol(
                ProtocolError::ResetWithoutClosingHandshake
            )),
            None
        );
        let too_big = CapacityError::MessageTooLong {
            size: 2,
            max_size: 1,
        };
        assert_eq!(code(WsError::Capacity(too_big)), Some(1009));
        assert_eq!(
            code(WsError::Protocol(ProtocolError::NonZeroReservedBits)),
            Some(1002)
        );
        let not_utf8 = std::str::from_utf8(&[0xff][..]).map(|_| ()).unwrap_err();
        assert_eq!(code(WsError::Utf8(not_utf8.to_string())), Some(1007));
        assert_eq!(code(WsError::AttackAttempt), Some(1011));
    }
}
