//! `GET socket`: the WebSocket transport. Frames in go to the host; what the host sends
//! goes out as text frames; a client that does not read is closed 4408; when [`serve`]
//! shuts down, the close 1001 (going away).
//!
//! [`serve`]: super::serve

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};

use super::RouterState;
use super::auth::Rejection;
use super::routes::rid;
use super::serve::Shutdown;
use crate::host::Transport;
use crate::log::EventLog;

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
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    let max = st.cfg.max_body_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .read_buffer_size(st.cfg.socket_read_buffer_bytes)
        .write_buffer_size(0)
        .on_upgrade(move |socket| async move {
            match user {
                Ok(user) => serve_socket(st, socket, user, rid, shutdown).await,
                Err(r) => refuse(st, socket, r).await,
            }
        })
}

async fn refuse<L: EventLog>(st: Arc<RouterState<L>>, mut socket: WebSocket, r: Rejection) {
    let close = CloseFrame {
        code: r.close_code(),
        reason: r.error().into(),
    };
    let _ =
        tokio::time::timeout(st.slow_consumer, socket.send(WsMessage::Close(Some(close)))).await;
}

async fn serve_socket<L: EventLog + 'static>(
    st: Arc<RouterState<L>>,
    mut socket: WebSocket,
    user: Option<String>,
    rid: String,
    shutdown: Option<Shutdown>,
) {
    let conn = st.svc.connect(Transport::WebSocket, user.as_deref(), &rid);
    let Ok(mut out) = conn.stream() else {
        return; // a new connection's first stream
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
    loop {
        tokio::select! {
            () = &mut shutting_down => {
                // RFC 6455 7.4.1: 1001 "indicates that an endpoint is "going away", such
                // as a server going down". The client reconnects (elsewhere) with `from`.
                let close = CloseFrame { code: 1001, reason: "going away".into() };
                let _ = tokio::time::timeout(slow, socket.send(WsMessage::Close(Some(close)))).await;
                break;
            }
            msg = socket.recv() => match msg {
                Some(Ok(WsMessage::Text(t))) => conn.handle_text(t.as_str()),
                Some(Ok(WsMessage::Binary(b))) => conn.handle_text(&String::from_utf8_lossy(&b)),
                Some(Ok(WsMessage::Close(_))) => {
                    // The close from the client gets its close back (RFC 6455 5.5.1: "the
                    // endpoint MUST send a Close frame in response"); it goes out on the
                    // flush of `close` (dropping the socket leaves the client with 1006).
                    let _ = tokio::time::timeout(slow, SinkExt::close(&mut socket)).await;
                    break;
                }
                None | Some(Err(_)) => break,
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
                        Ok(Err(_)) => break,
                        Err(_) => {
                            let close = CloseFrame { code: 4408, reason: "slow_consumer".into() };
                            let _ = tokio::time::timeout(slow, socket.send(WsMessage::Close(Some(close)))).await;
                            break;
                        }
                    }
                }
                None => {
                    let code = out.close_code().unwrap_or(1000);
                    let close = CloseFrame { code, reason: "".into() };
                    let _ = tokio::time::timeout(slow, socket.send(WsMessage::Close(Some(close)))).await;
                    break;
                }
            },
        }
    }
}
