//! Writing `text/event-stream` bytes that [`SseDecoder`](super::SseDecoder) reads back
//! identically.

use std::time::Duration;

use super::event::SseEvent;

/// Why an event cannot be written as SSE without changing its meaning.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseEncodeError {
    /// The event type contains CR or LF, which would end the `event:` line early.
    #[error("SSE event type contains a line break")]
    EventTypeHasLineBreak,
    /// The id contains CR or LF, which would end the `id:` line early.
    #[error("SSE id contains a line break")]
    IdHasLineBreak,
    /// The id contains NUL: a WHATWG decoder ignores such an `id:` field.
    #[error("SSE id contains NUL, which decoders ignore")]
    IdHasNul,
}

/// Writes server-sent events into a caller-owned buffer.
///
/// Stateless: every method appends complete lines to `out`, so one encoder (or none: the
/// methods are associated functions) serves any number of streams.
///
/// ```
/// use harness_core::sse::{SseDecoder, SseEncoder, SseEvent};
///
/// let mut out = Vec::new();
/// let ev = SseEvent::new("line one\nline two").with_id("4");
/// SseEncoder::event(&mut out, &ev)?;
/// SseEncoder::comment(&mut out, "ping");
/// assert_eq!(out, b"id: 4\ndata: line one\ndata: line two\n\n: ping\n\n");
///
/// let mut dec = SseDecoder::new();
/// dec.push(&out);
/// assert_eq!(dec.poll_event().unwrap(), Some(ev));
/// # Ok::<(), harness_core::sse::SseEncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SseEncoder;

impl SseEncoder {
    /// Appends one event: `id:` (when set), `event:` (when not `message`), one `data:` line
    /// per line of the data (CRLF, CR and LF all split lines, as the decoder does), and the
    /// blank line that dispatches it.
    pub fn event(out: &mut Vec<u8>, ev: &SseEvent) -> Result<(), SseEncodeError> {
        Self::parts(out, ev.event_type.as_deref(), ev.id(), ev.data())
    }

    /// Appends one event from its parts; see [`event`](Self::event). `None` or an empty
    /// `event_type` means `message`.
    pub fn parts(
        out: &mut Vec<u8>,
        event_type: Option<&str>,
        id: Option<&str>,
        data: &str,
    ) -> Result<(), SseEncodeError> {
        if let Some(id) = id {
            if has_line_break(id) {
                return Err(SseEncodeError::IdHasLineBreak);
            }
            if id.as_bytes().contains(&0) {
                return Err(SseEncodeError::IdHasNul);
            }
        }
        if let Some(t) = event_type {
            if has_line_break(t) {
                return Err(SseEncodeError::EventTypeHasLineBreak);
            }
        }
        out.reserve(data.len() + 16);
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id.as_bytes());
            out.push(b'\n');
        }
        if let Some(t) = event_type.filter(|t| !t.is_empty()) {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(t.as_bytes());
            out.push(b'\n');
        }
        write_lines(out, b"data: ", data);
        out.push(b'\n');
        Ok(())
    }

    /// Appends a comment (one `:` line per line of `text`) and a blank line. A comment
    /// dispatches nothing; servers send one as a heartbeat (`: ping`).
    pub fn comment(out: &mut Vec<u8>, text: &str) {
        write_lines(out, b": ", text);
        out.push(b'\n');
    }

    /// Appends a `retry:` field (the reconnection time, in whole milliseconds) and a blank
    /// line.
    pub fn retry(out: &mut Vec<u8>, time: Duration) {
        let ms = u64::try_from(time.as_millis()).unwrap_or(u64::MAX);
        out.extend_from_slice(b"retry: ");
        out.extend_from_slice(ms.to_string().as_bytes());
        out.extend_from_slice(b"\n\n");
    }
}

fn has_line_break(s: &str) -> bool {
    memchr::memchr2(b'\n', b'\r', s.as_bytes()).is_some()
}

/// Writes `prefix` + line + LF for each line of `text` (an empty text is one empty line).
fn write_lines(out: &mut Vec<u8>, prefix: &[u8], text: &str) {
    let mut rest = text.as_bytes();
    loop {
        out.extend_from_slice(prefix);
        match memchr::memchr2(b'\n', b'\r', rest) {
            None => {
                out.extend_from_slice(rest);
                out.push(b'\n');
                return;
            }
            Some(i) => {
                out.extend_from_slice(&rest[..i]);
                out.push(b'\n');
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = &rest[i + skip..];
            }
        }
    }
}
