//! The typed event: [`StreamEvent`] (the schema's flat event, its strings kept as spans of the
//! received JSON), its typed view [`StreamEventKind`] and its type [`EventType`].

use std::borrow::Cow;

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

/// The typed view of a [`StreamEvent`], borrowed from it. Index fields are `Option` because the
/// schema does not require them.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum StreamEventKind<'a> {
    /// `response.created`.
    Created(&'a Response),
    /// `response.in_progress`.
    InProgress(&'a Response),
    /// `response.completed`.
    Completed(&'a Response),
    /// `response.incomplete`.
    Incomplete(&'a Response),
    /// `response.failed` (the response's status may be `cancelled`: it wins over the name).
    Failed(&'a Response),
    /// `response.output_item.added`.
    OutputItemAdded {
        /// Position in `output`.
        output_index: Option<u64>,
        /// The item's shell (status `in_progress`).
        item: &'a OutputItem,
    },
    /// `response.output_item.done`.
    OutputItemDone {
        /// Position in `output`.
        output_index: Option<u64>,
        /// The complete item.
        item: &'a OutputItem,
    },
    /// `response.content_part.added`.
    ContentPartAdded {
        /// The message item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `content`.
        content_index: Option<u64>,
        /// The empty part.
        part: &'a OutputContent,
    },
    /// `response.content_part.done`.
    ContentPartDone {
        /// The message item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `content`.
        content_index: Option<u64>,
        /// The complete part.
        part: &'a OutputContent,
    },
    /// `response.output_text.delta`.
    OutputTextDelta {
        /// The message item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `content`.
        content_index: Option<u64>,
        /// The text fragment.
        delta: &'a str,
    },
    /// `response.output_text.done`.
    OutputTextDone {
        /// The message item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `content`.
        content_index: Option<u64>,
        /// The part's whole text.
        text: &'a str,
    },
    /// `response.output_text.annotation.added`.
    OutputTextAnnotationAdded {
        /// The message item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `content`.
        content_index: Option<u64>,
        /// Position in the part's `annotations`.
        annotation_index: Option<u64>,
        /// The annotation.
        annotation: &'a Annotation,
    },
    /// `response.reasoning_summary_part.added`.
    ReasoningSummaryPartAdded {
        /// The reasoning item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `summary`.
        summary_index: Option<u64>,
        /// The empty part.
        part: &'a OutputContent,
    },
    /// `response.reasoning_summary_text.delta`.
    ReasoningSummaryTextDelta {
        /// The reasoning item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `summary`.
        summary_index: Option<u64>,
        /// The text fragment.
        delta: &'a str,
    },
    /// `response.reasoning_summary_part.done`.
    ReasoningSummaryPartDone {
        /// The reasoning item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// Position in the item's `summary`.
        summary_index: Option<u64>,
        /// The complete part.
        part: &'a OutputContent,
    },
    /// `response.function_call_arguments.delta`.
    FunctionCallArgumentsDelta {
        /// The function_call item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// A fragment of the arguments' JSON text.
        delta: &'a str,
    },
    /// `response.function_call_arguments.done`.
    FunctionCallArgumentsDone {
        /// The function_call item.
        item_id: Option<&'a str>,
        /// Position in `output`.
        output_index: Option<u64>,
        /// The whole arguments' JSON text.
        arguments: &'a str,
    },
    /// `error`.
    Error {
        /// The error code.
        code: Option<&'a str>,
        /// The message.
        message: Option<&'a str>,
        /// The offending field.
        param: Option<&'a str>,
    },
    /// A known type that lacks the field it needs ([`StreamEvent::missing_field`]).
    MissingField {
        /// The wire `type`.
        event_type: &'a str,
        /// The missing field.
        field: &'static str,
    },
    /// A type this crate does not know; see [`StreamEvent::raw_json`] for its fields.
    Unknown {
        /// The wire `type`.
        event_type: &'a str,
    },
}

impl<'a> StreamEventRef<'a> {
    /// The field a known type needs and this event lacks (`response` for a lifecycle event,
    /// `item`, `part`, `delta`, `text`, `arguments`, `annotation`), if any. Such an event is
    /// still an event (its type and number count), but it carries nothing to apply.
    pub fn missing_field(self) -> Option<&'static str> {
        use EventType as T;
        let rare = self.body.rare.as_deref();
        match self.body.event_type {
            T::Created | T::InProgress | T::Completed | T::Incomplete | T::Failed => {
                self.body.response.is_none().then_some("response")
            }
            T::OutputItemAdded | T::OutputItemDone => self.body.item.is_none().then_some("item"),
            T::ContentPartAdded
            | T::ContentPartDone
            | T::ReasoningSummaryPartAdded
            | T::ReasoningSummaryPartDone => self.body.part.is_none().then_some("part"),
            T::OutputTextDelta | T::ReasoningSummaryTextDelta | T::FunctionCallArgumentsDelta => {
                self.body.delta.is_none().then_some("delta")
            }
            T::OutputTextDone => rare
                .and_then(|r| r.text.as_ref())
                .is_none()
                .then_some("text"),
            T::FunctionCallArgumentsDone => rare
                .and_then(|r| r.arguments.as_ref())
                .is_none()
                .then_some("arguments"),
            T::OutputTextAnnotationAdded => rare
                .and_then(|r| r.annotation.as_ref())
                .is_none()
                .then_some("annotation"),
            T::Error | T::Unknown => None,
        }
    }

    /// The event's type.
    pub fn event_type(self) -> EventType {
        self.body.event_type
    }

    /// The wire `type`, as sent (also for unknown types).
    pub fn type_name(self) -> &'a str {
        self.body.type_name.get(self.raw)
    }

    /// The `sequence_number`, when it is an integer ≥ 0.
    pub fn sequence_number(self) -> Option<u64> {
        match self.body.sequence_number {
            SeqField::Valid(n) => Some(n),
            _ => None,
        }
    }

    /// Whether `sequence_number` was present but not an integer ≥ 0 (`true`, `-1`, `"3"`, …).
    pub fn has_invalid_sequence_number(self) -> bool {
        self.body.sequence_number == SeqField::Invalid
    }

    /// Whether this is a terminal event (`response.completed`, `.incomplete`, `.failed`).
    pub fn is_terminal(self) -> bool {
        self.body.event_type.is_terminal()
    }

    /// The JSON text as received.
    pub fn raw_json(self) -> &'a str {
        self.raw
    }

    /// An owned copy of the event.
    pub fn to_event(self) -> StreamEvent {
        StreamEvent {
            raw: self.raw.to_owned(),
            body: self.body.clone(),
        }
    }

    /// The event as a JSON value (parses the received text again).
    pub fn to_value(self) -> serde_json::Value {
        serde_json::from_str(self.raw).unwrap_or(serde_json::Value::Null)
    }

    /// `item_id`.
    pub fn item_id(self) -> Option<&'a str> {
        self.body.item_id.as_ref().map(|t| t.get(self.raw))
    }
    /// `output_index`.
    pub fn output_index(self) -> Option<u64> {
        self.body.output_index
    }
    /// `content_index`.
    pub fn content_index(self) -> Option<u64> {
        self.body.content_index
    }
    /// `summary_index`.
    pub fn summary_index(self) -> Option<u64> {
        self.body.rare.as_ref()?.summary_index
    }
    /// `annotation_index`.
    pub fn annotation_index(self) -> Option<u64> {
        self.body.rare.as_ref()?.annotation_index
    }
    /// `delta`.
    pub fn delta(self) -> Option<&'a str> {
        self.body.delta.as_ref().map(|t| t.get(self.raw))
    }
    fn rare_text(self, f: impl Fn(&'a Rare) -> Option<&'a Text>) -> Option<&'a str> {
        self.body
            .rare
            .as_deref()
            .and_then(f)
            .map(|t| t.get(self.raw))
    }
    /// `text`.
    pub fn text(self) -> Option<&'a str> {
        self.rare_text(|r| r.text.as_ref())
    }
    /// `arguments`.
    pub fn arguments(self) -> Option<&'a str> {
        self.rare_text(|r| r.arguments.as_ref())
    }
    /// `code` (of an `error` event).
    pub fn code(self) -> Option<&'a str> {
        self.rare_text(|r| r.code.as_ref())
    }
    /// `message` (of an `error` event).
    pub fn message(self) -> Option<&'a str> {
        self.rare_text(|r| r.message.as_ref())
    }
    /// `param` (of an `error` event).
    pub fn param(self) -> Option<&'a str> {
        self.rare_text(|r| r.param.as_ref())
    }
    /// `response`.
    pub fn response(self) -> Option<&'a Response> {
        self.body.response.as_deref()
    }
    /// `item`.
    pub fn item(self) -> Option<&'a OutputItem> {
        self.body.item.as_deref()
    }
    /// `part`.
    pub fn part(self) -> Option<&'a OutputContent> {
        self.body.part.as_deref()
    }
    /// `annotation`.
    pub fn annotation(self) -> Option<&'a Annotation> {
        self.body.rare.as_ref()?.annotation.as_ref()
    }

    /// The typed view, to `match` on.
    pub fn kind(self) -> StreamEventKind<'a> {
        use EventType as T;
        let item_id = self.item_id();
        let (oi, ci, si) = (
            self.body.output_index,
            self.body.content_index,
            self.summary_index(),
        );
        let unknown = StreamEventKind::MissingField {
            event_type: self.type_name(),
            field: self.missing_field().unwrap_or("?"),
        };
        match self.body.event_type {
            T::Created | T::InProgress | T::Completed | T::Incomplete | T::Failed => {
                let Some(r) = self.response() else {
                    return unknown;
                };
                match self.body.event_type {
                    T::Created => StreamEventKind::Created(r),
                    T::InProgress => StreamEventKind::InProgress(r),
                    T::Completed => StreamEventKind::Completed(r),
                    T::Incomplete => StreamEventKind::Incomplete(r),
                    _ => StreamEventKind::Failed(r),
                }
            }
            T::OutputItemAdded | T::OutputItemDone => match self.item() {
                Some(item) if self.body.event_type == T::OutputItemAdded => {
                    StreamEventKind::OutputItemAdded {
                        output_index: oi,
                        item,
                    }
                }
                Some(item) => StreamEventKind::OutputItemDone {
                    output_index: oi,
                    item,
                },
                None => unknown,
            },
            T::ContentPartAdded | T::ContentPartDone => match self.part() {
                Some(part) if self.body.event_type == T::ContentPartAdded => {
                    StreamEventKind::ContentPartAdded {
                        item_id,
                        output_index: oi,
                        content_index: ci,
                        part,
                    }
                }
                Some(part) => StreamEventKind::ContentPartDone {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    part,
                },
                None => unknown,
            },
            T::ReasoningSummaryPartAdded | T::ReasoningSummaryPartDone => match self.part() {
                Some(part) if self.body.event_type == T::ReasoningSummaryPartAdded => {
                    StreamEventKind::ReasoningSummaryPartAdded {
                        item_id,
                        output_index: oi,
                        summary_index: si,
                        part,
                    }
                }
                Some(part) => StreamEventKind::ReasoningSummaryPartDone {
                    item_id,
                    output_index: oi,
                    summary_index: si,
                    part,
                },
                None => unknown,
            },
            T::OutputTextDelta => match self.delta() {
                Some(delta) => StreamEventKind::OutputTextDelta {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    delta,
                },
                None => unknown,
            },
            T::ReasoningSummaryTextDelta => match self.delta() {
                Some(delta) => StreamEventKind::ReasoningSummaryTextDelta {
                    item_id,
                    output_index: oi,
                    summary_index: si,
                    delta,
                },
                None => unknown,
            },
            T::FunctionCallArgumentsDelta => match self.delta() {
                Some(delta) => StreamEventKind::FunctionCallArgumentsDelta {
                    item_id,
                    output_index: oi,
                    delta,
                },
                None => unknown,
            },
            T::OutputTextDone => match self.text() {
                Some(text) => StreamEventKind::OutputTextDone {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    text,
                },
                None => unknown,
            },
            T::FunctionCallArgumentsDone => match self.arguments() {
                Some(arguments) => StreamEventKind::FunctionCallArgumentsDone {
                    item_id,
                    output_index: oi,
                    arguments,
                },
                None => unknown,
            },
            T::OutputTextAnnotationAdded => match self.annotation() {
                Some(annotation) => StreamEventKind::OutputTextAnnotationAdded {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    annotation_index: self.annotation_index(),
                    annotation,
                },
                None => unknown,
            },
            T::Error => StreamEventKind::Error {
                code: self.code(),
                message: self.message(),
                param: self.param(),
            },
            T::Unknown => StreamEventKind::Unknown {
                event_type: self.type_name(),
            },
        }
    }
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
