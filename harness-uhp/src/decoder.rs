//! The stream decoder: bytes of a `text/event-stream` body in, typed [`Event`]s out.
//!
//! Framing is harness-core's WHATWG [`SseDecoder`] (CRLF, CR and LF line ends, a BOM, UTF-8
//! split across reads, an unterminated final event not dispatched); this layer turns each
//! message's data into an [`Event`], or into a [`Finding`] for that one message, after which
//! the stream goes on.

use harness_core::sse::{SseConfig, SseDecoder, SseError};

use crate::accumulator::TaskAccumulator;
use crate::event::Event;

/// Something wrong with one message of the stream. The decoder stays usable: keep polling.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Finding {
    /// The SSE layer: an over-long line or event (skipped), or a final event that the stream
    /// ended inside, which is never dispatched.
    #[error(transparent)]
    Sse(#[from] SseError),
    /// The data is not JSON. A UHP event is one JSON object.
    #[error("event data is not JSON ({error}): {data}")]
    NotJson {
        /// The JSON parser's message.
        error: String,
        /// The start of the data.
        data: String,
    },
    /// The data is `[DONE]`: the OpenAI-style end sentinel, not a UHP event. UHP ends a
    /// stream with its terminal event; the sentinel is ignored.
    #[error("`[DONE]` sentinel, not a UHP event")]
    DoneSentinel,
    /// The data is JSON but not an object (`[1, 2]`, `42`, `"x"`).
    #[error("event data is JSON but not an object: {data}")]
    NotObject {
        /// The start of the data.
        data: String,
    },
    /// The object has no string `type`.
    #[error("event object has no string `type` (sequence_number {sequence_number:?})")]
    MissingType {
        /// Its `sequence_number`, when it had a valid one.
        sequence_number: Option<u64>,
    },
    /// A known event type whose fields do not match the schema (a field missing or of the
    /// wrong JSON type).
    #[error("`{event_type}` event does not match the schema: {error}")]
    InvalidEvent {
        /// The event's `type`.
        event_type: String,
        /// Its `sequence_number`, when it had a valid one.
        sequence_number: Option<u64>,
        /// What is wrong.
        error: String,
    },
}

impl Finding {
    /// The `sequence_number` of the message the finding is about, when it could be read: the
    /// event arrived, even if it could not be used, so it is not counted as missing.
    pub fn sequence_number(&self) -> Option<u64> {
        match self {
            Finding::MissingType { sequence_number }
            | Finding::InvalidEvent {
                sequence_number, ..
            } => *sequence_number,
            _ => None,
        }
    }
}

/// A sans-IO decoder of a UHP event stream.
///
/// ```
/// use harness_uhp::{EventKind, StreamDecoder};
///
/// let mut dec = StreamDecoder::new();
/// dec.push(b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"Hi\"}\r\n\r\n");
/// dec.push(b"data: [DONE]\n\n");
/// let ev = dec.poll_event()?.expect("one event");
/// assert!(matches!(ev.kind(), EventKind::OutputTextDelta { delta: "Hi", .. }));
/// assert_eq!(ev.sequence_number(), Some(4));
/// assert!(dec.poll_event().is_err()); // the sentinel is a finding, and the stream goes on
/// assert_eq!(dec.poll_event()?, None);
/// dec.finish()?;
/// # Ok::<(), harness_uhp::Finding>(())
/// ```
#[derive(Debug, Default)]
pub struct StreamDecoder {
    sse: SseDecoder,
}

impl StreamDecoder {
    /// A decoder with harness-core's default SSE limits (16 MiB per line and per event).
    pub fn new() -> Self {
        Self::with_config(SseConfig::DEFAULT)
    }

    /// A decoder with the given SSE limits; a line or event past a limit is a finding for
    /// that event, and the decoder goes on with the next.
    pub fn with_config(cfg: SseConfig) -> Self {
        StreamDecoder {
            sse: SseDecoder::with_config(cfg),
        }
    }

    /// Appends body bytes. Never fails and never parses.
    pub fn push(&mut self, bytes: &[u8]) {
        self.sse.push(bytes);
    }

    /// The next event. `Ok(None)`: more bytes are needed. `Err`: a finding about one
    /// message; keep polling.
    pub fn poll_event(&mut self) -> Result<Option<Event>, Finding> {
        match self.sse.poll_event()? {
            None => Ok(None),
            Some(ev) => Event::parse(ev.into_data()).map(Some),
        }
    }

    /// Ends the stream. Complete events still buffered stay available to
    /// [`poll_event`](Self::poll_event) (poll after calling this); an event the stream ended
    /// inside is discarded and reported. The decoder is then ready for a reconnection.
    pub fn finish(&mut self) -> Result<(), Finding> {
        self.sse.finish().map_err(Finding::from)
    }

    /// Feeds every complete event (and finding) to `task`: the whole run loop when the
    /// events themselves are not needed.
    pub fn drain_into(&mut self, task: &mut TaskAccumulator) {
        loop {
            match self.poll_event() {
                Ok(Some(ev)) => task.add(&ev),
                Ok(None) => return,
                Err(finding) => task.add_finding(&finding),
            }
        }
    }

    /// Ends the stream into `task`: [`finish`](Self::finish), then every event still
    /// complete in the buffer (the end of the body can complete one, e.g. after a held-back
    /// CR), then the finding for an event the end cut short, if any. The end-of-stream half
    /// of the run loop whose other half is [`drain_into`](Self::drain_into).
    ///
    /// ```
    /// use harness_uhp::{ProtocolFinding, StreamDecoder, TaskAccumulator};
    ///
    /// let mut dec = StreamDecoder::new();
    /// let mut task = TaskAccumulator::new();
    /// dec.push(b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":0,\"delta\":\"Hi\"}\r");
    /// dec.drain_into(&mut task);
    /// assert_eq!(task.text(), "");          // the CR may be the first half of a CRLF
    /// dec.push(b"\rdata: {\"type\":\"response.in_progress\"");
    /// dec.finish_into(&mut task);           // the body ends: the held-back event completes,
    /// assert_eq!(task.text(), "Hi");        // and the cut-off one is a finding
    /// assert!(task.findings().iter().any(|f| matches!(f, ProtocolFinding::Decode(_))));
    /// ```
    pub fn finish_into(&mut self, task: &mut TaskAccumulator) {
        let end = self.finish();
        self.drain_into(task);
        if let Err(cut) = end {
            task.add_finding(&cut);
        }
    }

    /// The SSE last event ID: what to send as `Last-Event-ID` when reconnecting.
    pub fn last_event_id(&self) -> Option<&str> {
        self.sse.last_event_id()
    }

    /// Bytes pushed and not yet parsed.
    pub fn buffered_bytes(&self) -> usize {
        self.sse.buffered_bytes()
    }
}
