//! Streamed events: one JSON object per SSE message, with a `type` and a `sequence_number`.
//!
//! The schema's `Event` is one flat object whose fields depend on its `type`; [`Event`]
//! mirrors it (decoded in one pass, strings borrowed from the received JSON where no escape
//! forced a copy) and [`Event::kind`] gives the typed view to `match` on. The JSON text as
//! received is kept ([`Event::raw_json`]), so unknown fields and unknown event types are
//! never lost: a proxy can pass an event on unchanged.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::finding::{Finding, excerpt};
use crate::response::{Annotation, ContentPart, OutputItem, Response};
use crate::tagged::StrCow;

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
enum Text {
    Span(u32, u32),
    Owned(Box<str>),
}

impl Text {
    fn of(raw: &str, s: StrCow<'_>) -> Text {
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

    fn get<'a>(&'a self, raw: &'a str) -> &'a str {
        match self {
            Text::Span(s, e) => raw.get(*s as usize..*e as usize).unwrap_or(""),
            Text::Owned(o) => o,
        }
    }
}

/// The fields most events do not have, kept out of line so that an event stays small.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rare {
    summary_index: Option<u64>,
    annotation_index: Option<u64>,
    text: Option<Text>,
    arguments: Option<Text>,
    code: Option<Text>,
    message: Option<Text>,
    param: Option<Text>,
    annotation: Option<Annotation>,
}

/// A `sequence_number` as sent: valid only when it is an integer ≥ 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SeqField {
    #[default]
    Absent,
    Valid(u64),
    Invalid,
}

impl<'de> Deserialize<'de> for SeqField {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SeqField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SeqField, E> {
                Ok(SeqField::Valid(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SeqField, E> {
                Ok(u64::try_from(v).map_or(SeqField::Invalid, SeqField::Valid))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<SeqField, E> {
                Ok(SeqField::Invalid)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<SeqField, E> {
                Ok(SeqField::Invalid) // JSON `true` is not the integer 1
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<SeqField, E> {
                Ok(SeqField::Invalid)
            }
            fn visit_unit<E: de::Error>(self) -> Result<SeqField, E> {
                Ok(SeqField::Invalid)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<SeqField, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(SeqField::Invalid)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<SeqField, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(SeqField::Invalid)
            }
        }
        d.deserialize_any(V)
    }
}

/// The keys of the schema's `Event`, matched by length first (a derive compares every name in turn).
enum Key {
    Type,
    SequenceNumber,
    Delta,
    ItemId,
    OutputIndex,
    ContentIndex,
    SummaryIndex,
    AnnotationIndex,
    Text,
    Arguments,
    Response,
    Item,
    Part,
    Annotation,
    Code,
    Message,
    Param,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, k: &str) -> Result<Key, E> {
                Ok(match (k.len(), k) {
                    (4, "type") => Key::Type,
                    (15, "sequence_number") => Key::SequenceNumber,
                    (5, "delta") => Key::Delta,
                    (7, "item_id") => Key::ItemId,
                    (12, "output_index") => Key::OutputIndex,
                    (13, "content_index") => Key::ContentIndex,
                    (13, "summary_index") => Key::SummaryIndex,
                    (16, "annotation_index") => Key::AnnotationIndex,
                    (4, "text") => Key::Text,
                    (9, "arguments") => Key::Arguments,
                    (8, "response") => Key::Response,
                    (4, "item") => Key::Item,
                    (4, "part") => Key::Part,
                    (10, "annotation") => Key::Annotation,
                    (4, "code") => Key::Code,
                    (7, "message") => Key::Message,
                    (5, "param") => Key::Param,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Decodes an event object into a [`Fields`] in place: one pass over the JSON, strings kept
/// as spans of the input, and no large value moved around.
struct Sink<'s, 'a> {
    raw: &'a str,
    f: &'s mut Fields,
}

impl<'de: 'a, 'a> Visitor<'de> for Sink<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let raw = self.raw;
        let f = self.f;
        let text = |s: Option<StrCow<'a>>| s.map(|s| Text::of(raw, s));
        // A repeated key: the last one wins, as in most JSON readers.
        while let Some(k) = m.next_key::<Key>()? {
            match k {
                Key::Type => f.type_name = Some(Text::of(raw, m.next_value::<StrCow<'a>>()?)),
                Key::SequenceNumber => f.sequence_number = m.next_value()?,
                Key::Delta => f.delta = Some(Text::of(raw, m.next_value::<StrCow<'a>>()?)),
                Key::ItemId => f.item_id = Some(Text::of(raw, m.next_value::<StrCow<'a>>()?)),
                Key::OutputIndex => f.output_index = Some(m.next_value::<u64>()?),
                Key::ContentIndex => f.content_index = Some(m.next_value::<u64>()?),
                Key::Response => f.response = m.next_value()?,
                Key::Item => f.item = m.next_value()?,
                Key::Part => f.part = m.next_value()?,
                Key::Other => {
                    m.next_value::<IgnoredAny>()?;
                }
                rare => {
                    let r = f.rare.get_or_insert_with(Box::default);
                    match rare {
                        Key::SummaryIndex => r.summary_index = m.next_value()?,
                        Key::AnnotationIndex => r.annotation_index = m.next_value()?,
                        Key::Text => r.text = text(m.next_value()?),
                        Key::Arguments => r.arguments = text(m.next_value()?),
                        Key::Code => r.code = text(m.next_value()?),
                        Key::Message => r.message = text(m.next_value()?),
                        Key::Param => r.param = text(m.next_value()?),
                        _ => r.annotation = m.next_value()?,
                    }
                }
            }
        }
        Ok(())
    }
}

/// One streamed UHP event.
///
/// Built by [`StreamDecoder`](crate::StreamDecoder) (or [`Event::parse`]) when the data is a
/// JSON object with a string `type` whose fields have the schema's JSON types; anything else
/// is a [`Finding`]. A known type lacking the field it needs is still an event (see
/// [`Event::missing_field`]). `sequence_number` may still be absent or
/// invalid here: the [`TaskAccumulator`](crate::TaskAccumulator) reports that.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    raw: String,
    type_name: Text,
    item_id: Option<Text>,
    delta: Option<Text>,
    output_index: Option<u64>,
    content_index: Option<u64>,
    sequence_number: SeqField,
    event_type: EventType,
    response: Option<Box<Response>>,
    item: Option<Box<OutputItem>>,
    part: Option<Box<ContentPart>>,
    rare: Option<Box<Rare>>,
}

/// The typed view of an [`Event`], borrowed from it. Index fields are `Option` because the
/// schema does not require them.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum EventKind<'a> {
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
        part: &'a ContentPart,
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
        part: &'a ContentPart,
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
        part: &'a ContentPart,
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
        part: &'a ContentPart,
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
    /// A known type that lacks the field it needs ([`Event::missing_field`]).
    MissingField {
        /// The wire `type`.
        event_type: &'a str,
        /// The missing field.
        field: &'static str,
    },
    /// A type this crate does not know; see [`Event::raw_json`] for its fields.
    Unknown {
        /// The wire `type`.
        event_type: &'a str,
    },
}

impl Event {
    /// Decodes one event from the data of one SSE message.
    ///
    /// Errors are findings about this payload: not JSON, a `[DONE]` sentinel, JSON that is
    /// not an object, an object without a string `type`, or a known type with a field of the
    /// wrong JSON type (the finding carries the `sequence_number` when it could be read).
    pub fn parse(data: String) -> Result<Event, Finding> {
        let mut f = Fields::default();
        let decoded = {
            let mut de = serde_json::Deserializer::from_str(&data);
            de::Deserializer::deserialize_map(
                &mut de,
                Sink {
                    raw: &data,
                    f: &mut f,
                },
            )
            .and_then(|()| de.end())
        };
        match decoded {
            Ok(()) => f.into_event(data),
            Err(_) => Self::slow_path(data),
        }
    }

    /// The slow path: an unknown type whose fields have shapes this crate does not expect is
    /// still an event; anything else says precisely what is wrong with the payload.
    fn slow_path(data: String) -> Result<Event, Finding> {
        if data.trim() == "[DONE]" {
            return Err(Finding::DoneSentinel);
        }
        let value: serde_json::Value = match serde_json::from_str(&data) {
            Ok(v) => v,
            Err(e) => {
                return Err(Finding::NotJson {
                    error: excerpt(&e.to_string()),
                    data: excerpt(&data),
                });
            }
        };
        let Some(obj) = value.as_object() else {
            return Err(Finding::NotObject {
                data: excerpt(&data),
            });
        };
        let sequence_number = obj
            .get("sequence_number")
            .and_then(serde_json::Value::as_u64);
        let Some(ty) = obj.get("type").and_then(serde_json::Value::as_str) else {
            return Err(Finding::MissingType { sequence_number });
        };
        if EventType::from_wire(ty) == EventType::Unknown {
            let seq = match obj.get("sequence_number") {
                None => SeqField::Absent,
                Some(v) => v.as_u64().map_or(SeqField::Invalid, SeqField::Valid),
            };
            return Ok(Event {
                raw: String::new(),
                type_name: Text::Owned(ty.into()),
                item_id: None,
                delta: None,
                output_index: None,
                content_index: None,
                sequence_number: seq,
                event_type: EventType::Unknown,
                response: None,
                item: None,
                part: None,
                rare: None,
            }
            .with_raw(data));
        }
        // A lifecycle event whose response has a field of the wrong JSON type: the response
        // is read leniently (its status decides the task; one sloppy field must not cost the
        // terminal event), when the event's own fields are in order.
        let lifecycle = matches!(
            EventType::from_wire(ty),
            EventType::Created
                | EventType::InProgress
                | EventType::Completed
                | EventType::Incomplete
                | EventType::Failed
        );
        if lifecycle {
            let seq = match obj.get("sequence_number") {
                None => SeqField::Absent,
                Some(v) => v.as_u64().map_or(SeqField::Invalid, SeqField::Valid),
            };
            let response = obj
                .get("response")
                .filter(|r| !r.is_null())
                .map(|r| Response::from_value_lenient(r.clone()));
            if let Some(Ok(response)) = response {
                return Ok(Event {
                    raw: String::new(),
                    type_name: Text::Owned(ty.into()),
                    item_id: None,
                    delta: None,
                    output_index: None,
                    content_index: None,
                    sequence_number: seq,
                    event_type: EventType::from_wire(ty),
                    response: Some(Box::new(response)),
                    item: None,
                    part: None,
                    rare: None,
                }
                .with_raw(data));
            }
        }
        // A JSON object with a string type that did not decode: the error says which field.
        let mut f = Fields::default();
        let mut de = serde_json::Deserializer::from_str(&data);
        let error = de::Deserializer::deserialize_map(
            &mut de,
            Sink {
                raw: &data,
                f: &mut f,
            },
        )
        .err()
        .map(|e| excerpt(&e.to_string()))
        .unwrap_or_default();
        Err(Finding::InvalidEvent {
            event_type: excerpt(ty),
            sequence_number,
            error,
        })
    }

    fn with_raw(mut self, raw: String) -> Event {
        self.raw = raw;
        self
    }

    /// The field a known type needs and this event lacks (`response` for a lifecycle event,
    /// `item`, `part`, `delta`, `text`, `arguments`, `annotation`), if any. Such an event is
    /// still an event (its type and number count), but it carries nothing to apply.
    pub fn missing_field(&self) -> Option<&'static str> {
        use EventType as T;
        let rare = self.rare.as_deref();
        match self.event_type {
            T::Created | T::InProgress | T::Completed | T::Incomplete | T::Failed => {
                self.response.is_none().then_some("response")
            }
            T::OutputItemAdded | T::OutputItemDone => self.item.is_none().then_some("item"),
            T::ContentPartAdded
            | T::ContentPartDone
            | T::ReasoningSummaryPartAdded
            | T::ReasoningSummaryPartDone => self.part.is_none().then_some("part"),
            T::OutputTextDelta | T::ReasoningSummaryTextDelta | T::FunctionCallArgumentsDelta => {
                self.delta.is_none().then_some("delta")
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
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The wire `type`, as sent (also for unknown types).
    pub fn type_name(&self) -> &str {
        self.type_name.get(&self.raw)
    }

    /// The `sequence_number`, when it is an integer ≥ 0.
    pub fn sequence_number(&self) -> Option<u64> {
        match self.sequence_number {
            SeqField::Valid(n) => Some(n),
            _ => None,
        }
    }

    /// Whether `sequence_number` was present but not an integer ≥ 0 (`true`, `-1`, `"3"`, …).
    pub fn has_invalid_sequence_number(&self) -> bool {
        self.sequence_number == SeqField::Invalid
    }

    /// Whether this is a terminal event (`response.completed`, `.incomplete`, `.failed`).
    pub fn is_terminal(&self) -> bool {
        self.event_type.is_terminal()
    }

    /// The JSON text as received.
    pub fn raw_json(&self) -> &str {
        &self.raw
    }

    /// Takes the JSON text as received out of the event.
    pub fn into_raw_json(self) -> String {
        self.raw
    }

    /// The event as a JSON value (parses the received text again).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.raw).unwrap_or(serde_json::Value::Null)
    }

    /// `item_id`.
    pub fn item_id(&self) -> Option<&str> {
        self.item_id.as_ref().map(|t| t.get(&self.raw))
    }
    /// `output_index`.
    pub fn output_index(&self) -> Option<u64> {
        self.output_index
    }
    /// `content_index`.
    pub fn content_index(&self) -> Option<u64> {
        self.content_index
    }
    /// `summary_index`.
    pub fn summary_index(&self) -> Option<u64> {
        self.rare.as_ref()?.summary_index
    }
    /// `annotation_index`.
    pub fn annotation_index(&self) -> Option<u64> {
        self.rare.as_ref()?.annotation_index
    }
    /// `delta`.
    pub fn delta(&self) -> Option<&str> {
        self.delta.as_ref().map(|t| t.get(&self.raw))
    }
    fn rare_text(&self, f: impl Fn(&Rare) -> Option<&Text>) -> Option<&str> {
        self.rare.as_deref().and_then(f).map(|t| t.get(&self.raw))
    }
    /// `text`.
    pub fn text(&self) -> Option<&str> {
        self.rare_text(|r| r.text.as_ref())
    }
    /// `arguments`.
    pub fn arguments(&self) -> Option<&str> {
        self.rare_text(|r| r.arguments.as_ref())
    }
    /// `code` (of an `error` event).
    pub fn code(&self) -> Option<&str> {
        self.rare_text(|r| r.code.as_ref())
    }
    /// `message` (of an `error` event).
    pub fn message(&self) -> Option<&str> {
        self.rare_text(|r| r.message.as_ref())
    }
    /// `param` (of an `error` event).
    pub fn param(&self) -> Option<&str> {
        self.rare_text(|r| r.param.as_ref())
    }
    /// `response`.
    pub fn response(&self) -> Option<&Response> {
        self.response.as_deref()
    }
    /// `item`.
    pub fn item(&self) -> Option<&OutputItem> {
        self.item.as_deref()
    }
    /// `part`.
    pub fn part(&self) -> Option<&ContentPart> {
        self.part.as_deref()
    }
    /// `annotation`.
    pub fn annotation(&self) -> Option<&Annotation> {
        self.rare.as_ref()?.annotation.as_ref()
    }

    /// The typed view, to `match` on.
    pub fn kind(&self) -> EventKind<'_> {
        use EventType as T;
        let item_id = self.item_id();
        let (oi, ci, si) = (self.output_index, self.content_index, self.summary_index());
        let unknown = EventKind::MissingField {
            event_type: self.type_name(),
            field: self.missing_field().unwrap_or("?"),
        };
        match self.event_type {
            T::Created | T::InProgress | T::Completed | T::Incomplete | T::Failed => {
                let Some(r) = self.response() else {
                    return unknown;
                };
                match self.event_type {
                    T::Created => EventKind::Created(r),
                    T::InProgress => EventKind::InProgress(r),
                    T::Completed => EventKind::Completed(r),
                    T::Incomplete => EventKind::Incomplete(r),
                    _ => EventKind::Failed(r),
                }
            }
            T::OutputItemAdded | T::OutputItemDone => match self.item() {
                Some(item) if self.event_type == T::OutputItemAdded => EventKind::OutputItemAdded {
                    output_index: oi,
                    item,
                },
                Some(item) => EventKind::OutputItemDone {
                    output_index: oi,
                    item,
                },
                None => unknown,
            },
            T::ContentPartAdded | T::ContentPartDone => match self.part() {
                Some(part) if self.event_type == T::ContentPartAdded => {
                    EventKind::ContentPartAdded {
                        item_id,
                        output_index: oi,
                        content_index: ci,
                        part,
                    }
                }
                Some(part) => EventKind::ContentPartDone {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    part,
                },
                None => unknown,
            },
            T::ReasoningSummaryPartAdded | T::ReasoningSummaryPartDone => match self.part() {
                Some(part) if self.event_type == T::ReasoningSummaryPartAdded => {
                    EventKind::ReasoningSummaryPartAdded {
                        item_id,
                        output_index: oi,
                        summary_index: si,
                        part,
                    }
                }
                Some(part) => EventKind::ReasoningSummaryPartDone {
                    item_id,
                    output_index: oi,
                    summary_index: si,
                    part,
                },
                None => unknown,
            },
            T::OutputTextDelta => match self.delta() {
                Some(delta) => EventKind::OutputTextDelta {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    delta,
                },
                None => unknown,
            },
            T::ReasoningSummaryTextDelta => match self.delta() {
                Some(delta) => EventKind::ReasoningSummaryTextDelta {
                    item_id,
                    output_index: oi,
                    summary_index: si,
                    delta,
                },
                None => unknown,
            },
            T::FunctionCallArgumentsDelta => match self.delta() {
                Some(delta) => EventKind::FunctionCallArgumentsDelta {
                    item_id,
                    output_index: oi,
                    delta,
                },
                None => unknown,
            },
            T::OutputTextDone => match self.text() {
                Some(text) => EventKind::OutputTextDone {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    text,
                },
                None => unknown,
            },
            T::FunctionCallArgumentsDone => match self.arguments() {
                Some(arguments) => EventKind::FunctionCallArgumentsDone {
                    item_id,
                    output_index: oi,
                    arguments,
                },
                None => unknown,
            },
            T::OutputTextAnnotationAdded => match self.annotation() {
                Some(annotation) => EventKind::OutputTextAnnotationAdded {
                    item_id,
                    output_index: oi,
                    content_index: ci,
                    annotation_index: self.annotation_index(),
                    annotation,
                },
                None => unknown,
            },
            T::Error => EventKind::Error {
                code: self.code(),
                message: self.message(),
                param: self.param(),
            },
            T::Unknown => EventKind::Unknown {
                event_type: self.type_name(),
            },
        }
    }
}

/// The decoded fields of an event, before the raw text is moved in.
#[derive(Default)]
struct Fields {
    type_name: Option<Text>,
    sequence_number: SeqField,
    item_id: Option<Text>,
    delta: Option<Text>,
    output_index: Option<u64>,
    content_index: Option<u64>,
    response: Option<Box<Response>>,
    item: Option<Box<OutputItem>>,
    part: Option<Box<ContentPart>>,
    rare: Option<Box<Rare>>,
}

impl Fields {
    /// Checks that the type is there, then moves the raw text in.
    fn into_event(self, raw: String) -> Result<Event, Finding> {
        let seq = match self.sequence_number {
            SeqField::Valid(n) => Some(n),
            _ => None,
        };
        let Some(type_name) = self.type_name else {
            return Err(Finding::MissingType {
                sequence_number: seq,
            });
        };
        let event_type = EventType::from_wire(type_name.get(&raw));
        Ok(Event {
            raw,
            type_name,
            item_id: self.item_id,
            delta: self.delta,
            output_index: self.output_index,
            content_index: self.content_index,
            sequence_number: self.sequence_number,
            event_type,
            response: self.response,
            item: self.item,
            part: self.part,
            rare: self.rare,
        })
    }
}
