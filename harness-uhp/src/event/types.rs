//! The typed event: [`StreamEvent`] (the schema's flat event, its strings kept as spans of the
//! received JSON), lent as a [`StreamEventRef`] (whose accessors and typed view
//! [`StreamEventKind`] are in `view.rs`), and its type [`EventType`].

use std::borrow::Cow;

use super::view::StreamEventKind;
use crate::response::{Annotation, OutputContent, OutputItem, Response};
use harness_core::wire::Key;

/// The event types of the protocol's streaming vocabulary (schema `Event.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// `response.created`: the first event of a stream.
    Created,
    /// `response.in_progress`.
    InProgress,
    /// `response.completed` (terminal).
    Completed,
    /// `response.incomplete` (terminal).
    Incomplete,
    /// `response.failed` (terminal; also how a cancelled task ends, with status `cancelled`).
    Failed,
    /// `response.output_item.added`.
    OutputItemAdded,
    /// `response.output_item.done`.
    OutputItemDone,
    /// `response.content_part.added`.
    ContentPartAdded,
    /// `response.content_part.done`.
    ContentPartDone,
    /// `response.output_text.delta`.
    OutputTextDelta,
    /// `response.output_text.done`.
    OutputTextDone,
    /// `response.output_text.annotation.added`.
    OutputTextAnnotationAdded,
    /// `response.reasoning_summary_part.added`.
    ReasoningSummaryPartAdded,
    /// `response.reasoning_summary_text.delta`.
    ReasoningSummaryTextDelta,
    /// `response.reasoning_summary_part.done`.
    ReasoningSummaryPartDone,
    /// `response.function_call_arguments.delta`.
    FunctionCallArgumentsDelta,
    /// `response.function_call_arguments.done`.
    FunctionCallArgumentsDone,
    /// `error`: an error that did not itself end the task (a terminal event follows).
    Error,
    /// A type this crate does not know. Clients MUST tolerate these.
    Unknown,
}

impl EventType {
    /// Every known type with its wire name.
    pub const ALL: &'static [(EventType, &'static str)] = &[
        (EventType::Created, "response.created"),
        (EventType::InProgress, "response.in_progress"),
        (EventType::Completed, "response.completed"),
        (EventType::Incomplete, "response.incomplete"),
        (EventType::Failed, "response.failed"),
        (EventType::OutputItemAdded, "response.output_item.added"),
        (EventType::OutputItemDone, "response.output_item.done"),
        (EventType::ContentPartAdded, "response.content_part.added"),
        (EventType::ContentPartDone, "response.content_part.done"),
        (EventType::OutputTextDelta, "response.output_text.delta"),
        (EventType::OutputTextDone, "response.output_text.done"),
        (
            EventType::OutputTextAnnotationAdded,
            "response.output_text.annotation.added",
        ),
        (
            EventType::ReasoningSummaryPartAdded,
            "response.reasoning_summary_part.added",
        ),
        (
            EventType::ReasoningSummaryTextDelta,
            "response.reasoning_summary_text.delta",
        ),
        (
            EventType::ReasoningSummaryPartDone,
            "response.reasoning_summary_part.done",
        ),
        (
            EventType::FunctionCallArgumentsDelta,
            "response.function_call_arguments.delta",
        ),
        (
            EventType::FunctionCallArgumentsDone,
            "response.function_call_arguments.done",
        ),
        (EventType::Error, "error"),
    ];

    /// The type for a wire name ([`EventType::Unknown`] for names the protocol does not define).
    pub fn from_wire(name: &str) -> EventType {
        match name {
            "response.output_text.delta" => EventType::OutputTextDelta,
            "response.created" => EventType::Created,
            "response.in_progress" => EventType::InProgress,
            "response.completed" => EventType::Completed,
            "response.incomplete" => EventType::Incomplete,
            "response.failed" => EventType::Failed,
            "response.output_item.added" => EventType::OutputItemAdded,
            "response.output_item.done" => EventType::OutputItemDone,
            "response.content_part.added" => EventType::ContentPartAdded,
            "response.content_part.done" => EventType::ContentPartDone,
            "response.output_text.done" => EventType::OutputTextDone,
            "response.output_text.annotation.added" => EventType::OutputTextAnnotationAdded,
            "response.reasoning_summary_part.added" => EventType::ReasoningSummaryPartAdded,
            "response.reasoning_summary_text.delta" => EventType::ReasoningSummaryTextDelta,
            "response.reasoning_summary_part.done" => EventType::ReasoningSummaryPartDone,
            "response.function_call_arguments.delta" => EventType::FunctionCallArgumentsDelta,
            "response.function_call_arguments.done" => EventType::FunctionCallArgumentsDone,
            "error" => EventType::Error,
            _ => EventType::Unknown,
        }
    }

    /// The wire name (`None` for [`EventType::Unknown`]; the event has its own name).
    pub fn wire_name(self) -> Option<&'static str> {
        Self::ALL.iter().find(|(t, _)| *t == self).map(|(_, n)| *n)
    }

    /// Whether this is one of the three terminal events (`response.completed`,
    /// `response.incomplete`, `response.failed`): exactly one ends a stream, and it is last.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            EventType::Completed | EventType::Incomplete | EventType::Failed
        )
    }
}

/// A string field of an event: a span of the received JSON, or a copy when it had escapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Text {
    Span(u32, u32),
    Owned(Box<str>),
}

impl Text {
    pub(super) fn of(raw: &str, s: Key<'_>) -> Text {
        match s.0 {
            Cow::Borrowed(b) => {
                // `b` borrows from `raw` (the deserializer reads `raw`), so its offset is a
                // span of `raw`; the bounds are checked anyway, and `get` checks boundaries.
                let start = (b.as_ptr() as usize).wrapping_sub(raw.as_ptr() as usize);
                let end = start.wrapping_add(b.len());
                match (u32::try_from(start), u32::try_from(end)) {
                    (Ok(s32), Ok(e32)) if start <= end && end <= raw.len() => Text::Span(s32, e32),
                    _ => Text::Owned(b.into()),
                }
            }
            Cow::Owned(o) => Text::Owned(o.into_boxed_str()),
        }
    }

    pub(super) fn get<'a>(&'a self, raw: &'a str) -> &'a str {
        match self {
            Text::Span(s, e) => raw.get(*s as usize..*e as usize).unwrap_or(""),
            Text::Owned(o) => o,
        }
    }
}

/// The fields most events do not have, kept out of line so that an event stays small.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Rare {
    pub(super) summary_index: Option<u64>,
    pub(super) annotation_index: Option<u64>,
    pub(super) text: Option<Text>,
    pub(super) arguments: Option<Text>,
    pub(super) code: Option<Text>,
    pub(super) message: Option<Text>,
    pub(super) param: Option<Text>,
    pub(super) annotation: Option<Annotation>,
}

/// A `sequence_number` as sent: valid only when it is an integer ≥ 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SeqField {
    #[default]
    Absent,
    Valid(u64),
    Invalid,
}

/// One streamed UHP event (schema `Event`).
///
/// Built by [`StreamDecoder`](crate::StreamDecoder) (or [`StreamEvent::parse`]) when the data is a
/// JSON object with a string `type` whose fields have the schema's JSON types; anything else
/// is a [`Finding`](crate::Finding). A known type lacking the field it needs is still an
/// event (see [`StreamEvent::missing_field`]). `sequence_number` may still be absent or
/// invalid here: the [`TaskAccumulator`](crate::TaskAccumulator) reports that.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEvent {
    pub(super) raw: String,
    pub(super) body: Body,
}

/// A [`StreamEvent`] lent by [`StreamFeed::next_ref`](crate::StreamFeed::next_ref): the same
/// accessors, its text borrowed from the decoded bytes where they lie (no copy into an
/// event's own buffer). [`to_event`](Self::to_event) makes an owned one; a `StreamEvent`
/// lends one with [`view`](StreamEvent::view).
///
/// ```
/// use harness_uhp::{StreamDecoder, StreamEvent};
///
/// let mut dec = StreamDecoder::new();
/// let mut feed = dec.feed(b"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"Hi\"}\n\n");
/// let ev = feed.next_ref().unwrap()?;
/// assert_eq!((ev.delta(), ev.sequence_number()), (Some("Hi"), Some(4)));
/// let owned: StreamEvent = ev.to_event();
/// assert_eq!(owned.view(), ev);
/// # Ok::<(), harness_uhp::Finding>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamEventRef<'a> {
    pub(super) raw: &'a str,
    pub(super) body: &'a Body,
}

/// An event's decoded fields: everything but its text (spans point into it).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Body {
    pub(super) type_name: Text,
    pub(super) item_id: Option<Text>,
    pub(super) delta: Option<Text>,
    pub(super) output_index: Option<u64>,
    pub(super) content_index: Option<u64>,
    pub(super) sequence_number: SeqField,
    pub(super) event_type: EventType,
    pub(super) response: Option<Box<Response>>,
    pub(super) item: Option<Box<OutputItem>>,
    pub(super) part: Option<Box<OutputContent>>,
    pub(super) rare: Option<Box<Rare>>,
}

/// The owned event's accessors are its view's ([`StreamEventRef`]).
impl StreamEvent {
    /// The event lent as a view (what [`StreamFeed::next_ref`](crate::StreamFeed::next_ref)
    /// gives), with the same accessors.
    #[inline]
    pub fn view(&self) -> StreamEventRef<'_> {
        StreamEventRef {
            raw: &self.raw,
            body: &self.body,
        }
    }

    /// Takes the JSON text as received out of the event.
    pub fn into_raw_json(self) -> String {
        self.raw
    }

    /// The field a known type needs and this event lacks (`response` for a lifecycle event,
    /// `item`, `part`, `delta`, `text`, `arguments`, `annotation`), if any. Such an event is
    /// still an event (its type and number count), but it carries nothing to apply.
    #[inline]
    pub fn missing_field(&self) -> Option<&'static str> {
        self.view().missing_field()
    }

    /// The event's type.
    #[inline]
    pub fn event_type(&self) -> EventType {
        self.view().event_type()
    }

    /// The wire `type`, as sent (also for unknown types).
    #[inline]
    pub fn type_name(&self) -> &str {
        self.view().type_name()
    }

    /// The `sequence_number`, when it is an integer ≥ 0.
    #[inline]
    pub fn sequence_number(&self) -> Option<u64> {
        self.view().sequence_number()
    }

    /// Whether `sequence_number` was present but not an integer ≥ 0 (`true`, `-1`, `"3"`, …).
    #[inline]
    pub fn has_invalid_sequence_number(&self) -> bool {
        self.view().has_invalid_sequence_number()
    }

    /// Whether this is one of the three terminal events (`response.completed`,
    /// `response.incomplete`, `response.failed`): exactly one ends a stream, and it is last.
    #[inline]
    pub fn is_terminal(&self) -> bool {
        self.view().is_terminal()
    }

    /// The JSON text as received.
    #[inline]
    pub fn raw_json(&self) -> &str {
        self.view().raw_json()
    }

    /// The event as a JSON value (parses the received text again).
    #[inline]
    pub fn to_value(&self) -> serde_json::Value {
        self.view().to_value()
    }

    /// `item_id`.
    #[inline]
    pub fn item_id(&self) -> Option<&str> {
        self.view().item_id()
    }

    /// `output_index`.
    #[inline]
    pub fn output_index(&self) -> Option<u64> {
        self.view().output_index()
    }

    /// `content_index`.
    #[inline]
    pub fn content_index(&self) -> Option<u64> {
        self.view().content_index()
    }

    /// `summary_index`.
    #[inline]
    pub fn summary_index(&self) -> Option<u64> {
        self.view().summary_index()
    }

    /// `annotation_index`.
    #[inline]
    pub fn annotation_index(&self) -> Option<u64> {
        self.view().annotation_index()
    }

    /// `delta`.
    #[inline]
    pub fn delta(&self) -> Option<&str> {
        self.view().delta()
    }

    /// `text`.
    #[inline]
    pub fn text(&self) -> Option<&str> {
        self.view().text()
    }

    /// `arguments`.
    #[inline]
    pub fn arguments(&self) -> Option<&str> {
        self.view().arguments()
    }

    /// `code` (of an `error` event).
    #[inline]
    pub fn code(&self) -> Option<&str> {
        self.view().code()
    }

    /// `message` (of an `error` event).
    #[inline]
    pub fn message(&self) -> Option<&str> {
        self.view().message()
    }

    /// `param` (of an `error` event).
    #[inline]
    pub fn param(&self) -> Option<&str> {
        self.view().param()
    }

    /// `response`.
    #[inline]
    pub fn response(&self) -> Option<&Response> {
        self.view().response()
    }

    /// `item`.
    #[inline]
    pub fn item(&self) -> Option<&OutputItem> {
        self.view().item()
    }

    /// `part`.
    #[inline]
    pub fn part(&self) -> Option<&OutputContent> {
        self.view().part()
    }

    /// `annotation`.
    #[inline]
    pub fn annotation(&self) -> Option<&Annotation> {
        self.view().annotation()
    }

    /// The typed view, to `match` on.
    #[inline]
    pub fn kind(&self) -> StreamEventKind<'_> {
        self.view().kind()
    }
}
