//! The stream decoder: bytes of a `text/event-stream` body in, typed [`StreamEvent`]s out.
//!
//! Framing is harness-core's WHATWG [`SseDecoder`] (CRLF, CR and LF line ends, a BOM, UTF-8
//! split across reads, an unterminated final event not dispatched); this layer turns each
//! message's data into a [`StreamEvent`], or into a [`Finding`] for that one message, after which
//! the stream goes on. It is driven like every codec here: `push`, drain `poll_event`,
//! `finish` at the end ([`harness_core::run_loop`]).

use harness_core::sse::{SseConfig, SseDecoder, SseFeed};

use crate::event::{LentSlot, StreamEvent, StreamEventRef};

/// What [`StreamDecoder::poll_event`] reports about a message that is not an event (it lives
/// in its own module: the event codec reports it too).
pub use crate::finding::Finding;

/// A sans-IO decoder of a UHP event stream.
///
/// ```
/// use harness_uhp::{StreamEventKind, StreamDecoder};
///
/// let mut dec = StreamDecoder::new();
/// dec.push(b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"Hi\"}\r\n\r\n");
/// dec.push(b"data: [DONE]\n\n");
/// let ev = dec.poll_event()?.expect("one event");
/// assert!(matches!(ev.kind(), StreamEventKind::OutputTextDelta { delta: "Hi", .. }));
/// assert_eq!(ev.sequence_number(), Some(4));
/// assert!(dec.poll_event().is_err()); // the sentinel is a finding, and the stream goes on
/// assert_eq!(dec.poll_event()?, None);
/// dec.finish()?;
/// # Ok::<(), harness_uhp::Finding>(())
/// ```
#[derive(Debug, Default)]
pub struct StreamDecoder {
    sse: SseDecoder,
    /// What [`StreamFeed::next_ref`] lends from.
    lent: LentSlot,
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
            lent: LentSlot::default(),
        }
    }

    /// Appends body bytes. Never fails and never parses.
    pub fn push(&mut self, bytes: &[u8]) {
        self.sse.push(bytes);
    }

    /// Decodes `bytes` in place (harness-core's [`SseDecoder::feed`]): the returned
    /// [`StreamFeed`] yields the events they complete, owned (it is an iterator) or lent
    /// ([`StreamFeed::next_ref`]: a [`StreamEventRef`] whose text is the fed bytes). Only an
    /// incomplete event is copied into the decoder. Events pushed with [`push`](Self::push)
    /// and not yet polled come first.
    ///
    /// ```
    /// use harness_uhp::StreamDecoder;
    ///
    /// let mut dec = StreamDecoder::new();
    /// let body = b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"Hi\"}\n\ndata: [DONE]\n\n";
    /// let mut feed = dec.feed(body);
    /// assert_eq!(feed.next_ref().unwrap()?.delta(), Some("Hi"));
    /// assert!(feed.next_ref().unwrap().is_err()); // the sentinel is a finding
    /// assert!(feed.next_ref().is_none());
    /// # Ok::<(), harness_uhp::Finding>(())
    /// ```
    pub fn feed<'d, 's>(&'d mut self, bytes: &'s [u8]) -> StreamFeed<'d, 's> {
        StreamFeed {
            sse: self.sse.feed(bytes),
            lent: &mut self.lent,
        }
    }

    /// The next event. `Ok(None)`: more bytes are needed. `Err`: a finding about one
    /// message; keep polling.
    pub fn poll_event(&mut self) -> Result<Option<StreamEvent>, Finding> {
        match self.sse.poll_event()? {
            None => Ok(None),
            Some(ev) => StreamEvent::parse(ev.into_data()).map(Some),
        }
    }

    /// Ends the stream. Complete events still buffered stay available to
    /// [`poll_event`](Self::poll_event) (poll after calling this); an event the stream ended
    /// inside is discarded and reported. The decoder is then ready for a reconnection.
    /// [`TaskAccumulator::finish_decoder`](crate::TaskAccumulator::finish_decoder) does all
    /// of this into a task.
    pub fn finish(&mut self) -> Result<(), Finding> {
        self.sse.finish().map_err(Finding::from)
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

/// The events of one [`StreamDecoder::feed`], decoded in place from the fed bytes. As an
/// [`Iterator`] it yields owned events; [`next_ref`](Self::next_ref) lends them. Dropping it
/// keeps the bytes it has not decoded in the decoder, for the next call.
#[derive(Debug)]
pub struct StreamFeed<'d, 's> {
    sse: SseFeed<'d, 's>,
    lent: &'d mut LentSlot,
}

impl StreamFeed<'_, '_> {
    /// The next event, lent until the next call as a [`StreamEventRef`]: an event of flat
    /// fields (every delta) borrows its text from the fed bytes where they lie, with no copy
    /// and no allocation (escaped strings aside); so does one with nested objects (they are
    /// built, as for an owned event). Only a payload the slow path reads (an unknown type with
    /// unexpected shapes, a lenient lifecycle event) is copied. `None`: the fed bytes are used
    /// up. `Err`: a finding about one message; keep calling.
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<StreamEventRef<'_>, Finding>> {
        let data = match self.sse.next_ref()? {
            Ok(ev) => ev.data(),
            Err(e) => return Some(Err(e.into())),
        };
        Some(StreamEvent::parse_lent(data, self.lent))
    }
}

impl Iterator for StreamFeed<'_, '_> {
    type Item = Result<StreamEvent, Finding>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.sse.next_ref()? {
            Ok(ev) => StreamEvent::parse(ev.data().to_owned()),
            Err(e) => Err(e.into()),
        })
    }
}
