//! What the server and the client share: frames to tungstenite messages.

use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::harness_side::Transmit;

/// A frame to send, as a WebSocket message.
pub(crate) fn to_ws(t: Transmit) -> Message {
    match t {
        Transmit::Text(s) => Message::text(s),
        Transmit::Close { code, reason } => Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: reason.into(),
        })),
    }
}
