//! The three transports: SSE (`GET events`, `GET host-events`), WebSocket text frames, and the
//! stdio worker's NDJSON. Bytes ↔ frames only; the sockets are yours.
//!
//! SSE, as the spec shows it: the hello frame has no `id:` line, each `harness.event` has
//! `id: <cursor>`, and the heartbeat is a `: ping` comment.
//!
//! ```
//! use harness_tanstack::frame::{Hello, HostFrame};
//! use harness_tanstack::transport::{SseFrameDecoder, sse_encode};
//!
//! let mut wire = Vec::new();
//! sse_encode(&mut wire, &HostFrame::Hello(Hello { v: Some(2), thread_id: Some("thread-1".into()), ..Hello::default() }));
//! sse_encode(&mut wire, &HostFrame::Ping(Default::default()));
//! assert_eq!(wire, b"data: {\"type\":\"harness.hello\",\"v\":2,\"threadId\":\"thread-1\"}\n\n: ping\n\n");
//!
//! let mut dec = SseFrameDecoder::new();
//! dec.push(&wire);
//! assert!(matches!(dec.poll_frame().unwrap(), Some(HostFrame::Hello(_))));
//! assert_eq!(dec.poll_frame().unwrap(), None); // a comment is no frame
//! ```

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder, NdjsonError};
use harness_core::sse::{SseConfig, SseDecoder, SseEncoder, SseError};

use crate::frame::{ClientFrame, FrameError, HostFrame};

/// Why bytes did not give a frame. Each error concerns one frame; the decoder goes on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The SSE framing failed for one event (too large).
    #[error(transparent)]
    Sse(#[from] SseError),
    /// The NDJSON framing failed for one line (too long).
    #[error(transparent)]
    Ndjson(NdjsonError),
    /// The frame is not a valid frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Appends one host frame as SSE: `harness.event` gets `id: <cursor>`, `harness.ping` is
/// the `: ping` comment, every other frame is a `data:` line without `id:`.
pub fn sse_encode(out: &mut Vec<u8>, frame: &HostFrame) {
    match frame {
        HostFrame::Ping(_) => SseEncoder::comment(out, "ping"),
        HostFrame::Event(ev) => {
            let json = frame.to_json();
            sse_encode_raw(out, Some(ev.cursor.as_str()), &json);
        }
        _ => {
            let json = frame.to_json();
            sse_encode_raw(out, None, &json);
        }
    }
}

/// Appends one `data:` event of already serialized frame JSON, with an `id:` when given.
///
/// Compact JSON has no line breaks, so this is one `data:` line. A cursor with a line break
/// or NUL (a cursor is opaque, but those cannot travel as an SSE id) is sent without `id:`.
pub fn sse_encode_raw(out: &mut Vec<u8>, id: Option<&str>, json: &str) {
    if SseEncoder::parts(out, None, id, json).is_err() {
        // ok: with no id and no event type, `parts` cannot fail.
        let _ = SseEncoder::parts(out, None, None, json);
    }
}

/// Appends the SSE heartbeat, `: ping`.
pub fn sse_ping(out: &mut Vec<u8>) {
    SseEncoder::comment(out, "ping");
}

/// Reads host frames from SSE bytes (`GET events`, `GET host-events`).
#[derive(Debug, Default)]
pub struct SseFrameDecoder {
    sse: SseDecoder,
}

impl SseFrameDecoder {
    /// A decoder with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with these SSE limits.
    pub fn with_config(cfg: SseConfig) -> Self {
        SseFrameDecoder {
            sse: SseDecoder::with_config(cfg),
        }
    }

    /// Appends bytes. Never fails, never parses.
    pub fn push(&mut self, bytes: &[u8]) {
        self.sse.push(bytes);
    }

    /// Reads the frames `bytes` complete, in place: each event's data is borrowed from
    /// `bytes` (or from the decoder, for an event that began in an earlier push) and read
    /// straight into its frame; only an incomplete event is copied into the decoder.
    /// `visit` gets each frame, or the error that concerns one frame, in stream order.
    /// Frames pushed with [`push`](Self::push) and not yet polled come first.
    pub fn feed_frames(
        &mut self,
        bytes: &[u8],
        mut visit: impl FnMut(Result<HostFrame, TransportError>),
    ) {
        let mut feed = self.sse.feed(bytes);
        while let Some(ev) = feed.next_ref() {
            match ev {
                Ok(ev) => match read_host_frame(ev.data()) {
                    Ok(Some(f)) => visit(Ok(f)),
                    Ok(None) => {}
                    Err(e) => visit(Err(e)),
                },
                Err(e) => visit(Err(e.into())),
            }
        }
    }

    /// The next frame. `Ok(None)`: more bytes are needed. An error concerns one frame.
    pub fn poll_frame(&mut self) -> Result<Option<HostFrame>, TransportError> {
        match self.sse.poll_event()? {
            None => Ok(None),
            Some(ev) => read_host_frame(ev.data()),
        }
    }

    /// End of the stream: reports an event that was cut off.
    pub fn finish(&mut self) -> Result<(), TransportError> {
        Ok(self.sse.finish()?)
    }

    /// The last SSE id: what to send as `Last-Event-ID` on reconnect.
    pub fn last_event_id(&self) -> Option<&str> {
        self.sse.last_event_id()
    }
}

/// Reads frames from NDJSON (the stdio worker: client frames on stdin, host frames on
/// stdout).
#[derive(Debug, Default)]
pub struct NdjsonFrameDecoder {
    nd: NdjsonDecoder,
}

impl NdjsonFrameDecoder {
    /// A decoder with the default limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with this line limit.
    pub fn with_config(cfg: NdjsonConfig) -> Self {
        NdjsonFrameDecoder {
            nd: NdjsonDecoder::with_config(cfg),
        }
    }

    /// Appends bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.nd.push(bytes);
    }

    /// End of input: an unterminated last line counts.
    pub fn finish(&mut self) {
        self.nd.finish();
    }

    /// The next line as text, not parsed (so a host can answer a bad one with
    /// `invalid_frame` itself). A line that is not UTF-8 is a frame error.
    pub fn poll_line(&mut self) -> Result<Option<String>, TransportError> {
        match self.nd.poll_line() {
            Ok(None) => Ok(None),
            Ok(Some(line)) => match std::str::from_utf8(line) {
                Ok(s) => Ok(Some(s.to_owned())),
                Err(e) => Err(TransportError::Frame(FrameError {
                    message: e.to_string(),
                    request_id: None,
                })),
            },
            Err(e) => Err(TransportError::Ndjson(e)),
        }
    }

    /// The next client frame (the worker's side).
    pub fn poll_client_frame(&mut self) -> Result<Option<ClientFrame>, TransportError> {
        match self.poll_line()? {
            None => Ok(None),
            Some(l) => Ok(Some(ClientFrame::from_json(&l)?)),
        }
    }

    /// The next host frame (the side that started the worker).
    pub fn poll_host_frame(&mut self) -> Result<Option<HostFrame>, TransportError> {
        match self.poll_line()? {
            None => Ok(None),
            Some(l) => read_host_frame(&l),
        }
    }
}

/// Reads a host frame into the answer itself: a frame is large (hundreds of bytes), and is
/// not moved again on the way out.
fn read_host_frame(text: &str) -> Result<Option<HostFrame>, TransportError> {
    let mut out = Ok(Some(HostFrame::placeholder()));
    if let Ok(Some(frame)) = &mut out {
        if let Err(e) = frame.read_json(text) {
            out = Err(e.into());
        }
    }
    out
}

/// Appends one frame as an NDJSON line.
pub fn ndjson_encode<T: serde::Serialize>(out: &mut Vec<u8>, frame: &T) {
    // ok: our frames always serialize.
    let _ = harness_core::ndjson::NdjsonEncoder::encode(out, frame);
}

/// One WebSocket text frame of a frame.
pub fn ws_encode<T: serde::Serialize>(frame: &T) -> String {
    serde_json::to_string(frame).unwrap_or_default()
}
