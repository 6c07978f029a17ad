//! The dispatched event and the decoder's errors.

use std::sync::Arc;

/// The event type a dispatched event has when the stream set none (WHATWG: `message`).
pub const DEFAULT_EVENT_TYPE: &str = "message";

/// One dispatched server-sent event: its type, its data and the last event ID at dispatch.
///
/// Events are owned: they outlive the decoder's buffer and can be sent across tasks. The
/// event type and the id are shared (`Arc<str>`) between consecutive events that repeat them,
/// so a stream that tags every event with the same `event:` line or never changes its `id:`
/// costs one allocation per event (the data) and no more.
///
/// ```
/// use harness_core::sse::SseEvent;
///
/// let ev = SseEvent::new("hello\nworld").with_event_type("greeting").with_id("7");
/// assert_eq!(ev.event_type(), "greeting");
/// assert_eq!(ev.data(), "hello\nworld");
/// assert_eq!(ev.id(), Some("7"));
/// assert_eq!(SseEvent::new("x").event_type(), "message");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SseEvent {
    pub(crate) event_type: Option<Arc<str>>,
    pub(crate) data: String,
    pub(crate) id: Option<Arc<str>>,
}

impl SseEvent {
    /// A dispatched event with a copy of `data` (one allocation, made out of line so that
    /// the decoder's hot loop stays small).
    #[inline(never)]
    pub(crate) fn dispatched(
        event_type: Option<Arc<str>>,
        data: &str,
        id: Option<Arc<str>>,
    ) -> Self {
        SseEvent {
            event_type,
            data: data.to_owned(),
            id,
        }
    }

    /// An event of type `message` with the given data and no id.
    pub fn new(data: impl Into<String>) -> Self {
        SseEvent {
            event_type: None,
            data: data.into(),
            id: None,
        }
    }

    /// Sets the event type. An empty type means the default, `message`.
    #[must_use]
    pub fn with_event_type(mut self, event_type: impl AsRef<str>) -> Self {
        let t = event_type.as_ref();
        self.event_type = if t.is_empty() { None } else { Some(t.into()) };
        self
    }

    /// Sets the id (the last event ID this event carries). An empty id means none.
    #[must_use]
    pub fn with_id(mut self, id: impl AsRef<str>) -> Self {
        let id = id.as_ref();
        self.id = if id.is_empty() { None } else { Some(id.into()) };
        self
    }

    /// The event type: the value of the last `event:` field of the event, or `message`.
    pub fn event_type(&self) -> &str {
        self.event_type.as_deref().unwrap_or(DEFAULT_EVENT_TYPE)
    }

    /// Whether the stream set an explicit, non-empty event type.
    pub fn has_explicit_type(&self) -> bool {
        self.event_type.is_some()
    }

    /// The data: every `data:` line of the event joined with `\n`.
    pub fn data(&self) -> &str {
        &self.data
    }

    /// The last-event-ID buffer at dispatch (`None` when it is empty). This is what a client
    /// sends back as `Last-Event-ID` when it reconnects after this event.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Takes the data out of the event without copying it.
    pub fn into_data(self) -> String {
        self.data
    }
}

/// One dispatched event borrowed from an [`SseFeed`](super::SseFeed) (from the fed bytes or
/// the decoder's buffers) until its next call: reading it allocates nothing. The same
/// accessors as [`SseEvent`]; [`to_event`](Self::to_event) makes it owned.
///
/// ```
/// use harness_core::sse::{SseEvent, SseEventRef};
///
/// let owned = SseEvent::new("hi").with_id("3");
/// let ev = SseEventRef::from(&owned);
/// assert_eq!((ev.event_type(), ev.data(), ev.id()), ("message", "hi", Some("3")));
/// assert_eq!(ev.to_event(), owned);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SseEventRef<'a> {
    pub(crate) event_type: Option<&'a str>,
    pub(crate) data: &'a str,
    pub(crate) id: Option<&'a str>,
}

impl<'a> SseEventRef<'a> {
    /// The event type: the value of the last `event:` field of the event, or `message`.
    pub fn event_type(&self) -> &'a str {
        self.event_type.unwrap_or(DEFAULT_EVENT_TYPE)
    }

    /// Whether the stream set an explicit, non-empty event type.
    pub fn has_explicit_type(&self) -> bool {
        self.event_type.is_some()
    }

    /// The data: every `data:` line of the event joined with `\n`.
    pub fn data(&self) -> &'a str {
        self.data
    }

    /// The last-event-ID buffer at dispatch (`None` when it is empty).
    pub fn id(&self) -> Option<&'a str> {
        self.id
    }

    /// The event, owned (the data copied).
    pub fn to_event(&self) -> SseEvent {
        SseEvent {
            event_type: self.event_type.map(Arc::from),
            data: self.data.to_owned(),
            id: self.id.map(Arc::from),
        }
    }
}

impl<'a> From<&'a SseEvent> for SseEventRef<'a> {
    fn from(ev: &'a SseEvent) -> Self {
        SseEventRef {
            event_type: ev.event_type.as_deref(),
            data: &ev.data,
            id: ev.id.as_deref(),
        }
    }
}

/// An error reported by [`SseDecoder`](super::SseDecoder) for one event.
///
/// Every error concerns one event; the decoder stays usable and goes on with the next one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line (of any field, or a comment) was longer than the configured limit. The event it
    /// belongs to was discarded, up to and including its terminating blank line.
    #[error("SSE line longer than {limit} bytes; the event was skipped")]
    LineTooLong {
        /// The configured `max_line_bytes`.
        limit: usize,
    },
    /// The data of an event grew past the configured limit. The event was discarded, up to and
    /// including its terminating blank line.
    #[error("SSE event data longer than {limit} bytes; the event was skipped")]
    EventTooLarge {
        /// The configured `max_event_bytes`.
        limit: usize,
    },
    /// The stream ended inside an event that was never terminated by a blank line. WHATWG
    /// says such an event is not dispatched; this error says it was there.
    #[error("SSE stream ended inside an undispatched event ({data_bytes} bytes of data)")]
    IncompleteEvent {
        /// Bytes of data the undispatched event had gathered (its unterminated last line included).
        data_bytes: usize,
    },
}
