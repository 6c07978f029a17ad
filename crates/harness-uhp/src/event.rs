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

use crate::decoder::Finding;
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
    Span(usize, usize),
    Owned(Box<str>),
}

impl Text {
    fn of(raw: &str, s: StrCow<'_>) -> Text {
        match s.0 {
            Cow::Borrowed(b) => {
                let start = (b.as_ptr() as usize).wrapping_sub(raw.as_ptr() as usize);
                let end = start.wrapping_add(b.len());
                if start <= end && raw.get(start..end).is_some() {
                    Text::Span(start, end)
                } else {
                    Text::Owned(b.into())
                }
            }
            Cow::Owned(o) => Text::Owned(o.into_boxed_str()),
        }
    }

    fn get<'a>(&'a self, raw: &'a str) -> &'a str {
        match self {
            Text::Span(s, e) => raw.get(*s..*e).unwrap_or(""),
            Text::Owned(o) => o,
        }
    }
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

/// The schema's flat `Event`, decoded in one pass with strings borrowed from the input.
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    event_type: Option<StrCow<'a>>,
    #[serde(default)]
    sequence_number: SeqField,
    #[serde(borrow, default)]
    delta: Option<StrCow<'a>>,
    #[serde(borrow, default)]
    item_id: Option<StrCow<'a>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    annotation_index: Option<u64>,
    #[serde(borrow, default)]
    text: Option<StrCow<'a>>,
    #[serde(borrow, default)]
    arguments: Option<StrCow<'a>>,
    #[serde(default)]
    response: Option<Box<Response>>,
    #[serde(default)]
    item: Option<Box<OutputItem>>,
    #[serde(default)]
    part: Option<Box<ContentPart>>,
    #[serde(default)]
    annotation: Option<Box<Annotation>>,
    #[serde(borrow, default)]
    code: Option<StrCow<'a>>,
    #[serde(borrow, default)]
    message: Option<StrCow<'a>>,
    #[serde(borrow, default)]
    param: Option<StrCow<'a>>,
}

/// One streamed UHP event.
///
/// Built by [`StreamDecoder`](crate::StreamDecoder) (or [`Event::parse`]) only when its
/// `type` is a string and, for a known type, the fields that type needs are there with the
/// right JSON types; anything else is a [`Finding`]. `sequence_number` may still be absent or
/// invalid here: the [`TaskAccumulator`](crate::TaskAccumulator) reports that.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    raw: String,
    event_type: EventType,
    type_name: Text,
    sequence_number: SeqField,
    item_id: Option<Text>,
    output_index: Option<u64>,
    content_index: Option<u64>,
    summary_index: Option<u64>,
    annotation_index: Option<u64>,
    delta: Option<Text>,
    text: Option<Text>,
    arguments: Option<Text>,
    code: Option<Text>,
    message: Option<Text>,
    param: Option<Text>,
    response: Option<Box<Response>>,
    item: Option<Box<OutputItem>>,
    part: Option<Box<ContentPart>>,
    annotation: Option<Box<Annotation>>,
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
    /// A type this crate does not know; see [`Event::raw_json`] for its fields.
    Unknown {
        /// The wire `type`.
        event_type: &'a str,
    },
}

/// The longest excerpt of a bad payload a [`Finding`] keeps.
const EXCERPT: usize = 256;

pub(crate) fn excerpt(data: &str) -> String {
    if data.len() <= EXCERPT {
        return data.to_owned();
    }
    let mut end = EXCERPT;
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &data[..end])
}

impl Event {
    /// Decodes one event from the data of one SSE message.
    ///
    /// Errors are findings about this payload: not JSON, a `[DONE]` sentinel, JSON that is
    /// not an object, an object without a string `type`, or a known type whose fields do not
    /// match the schema (the finding carries the `sequence_number` when it could be read).
    pub fn parse(data: String) -> Result<Event, Finding> {
        let first = data.bytes().find(|b| !b.is_ascii_whitespace());
        if first == Some(b'{') {
            if let Ok(w) = serde_json::from_str::<WireEvent<'_>>(&data) {
                return Self::from_wire(&data, w).and_then(|e| e.validated(data));
            }
        }
        Self::slow_path(data)
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
                    error: e.to_string(),
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
            return Ok(Event::unknown(ty, seq, data));
        }
        // A JSON object with a string type that did not decode: the error says which field.
        let error = serde_json::from_str::<WireEvent<'_>>(&data)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        Err(Finding::InvalidEvent {
            event_type: ty.to_owned(),
            sequence_number,
            error,
        })
    }

    fn unknown(ty: &str, sequence_number: SeqField, raw: String) -> Event {
        Event {
            raw,
            event_type: EventType::Unknown,
            type_name: Text::Owned(ty.into()),
            sequence_number,
            item_id: None,
            output_index: None,
            content_index: None,
            summary_index: None,
            annotation_index: None,
            delta: None,
            text: None,
            arguments: None,
            code: None,
            message: None,
            param: None,
            response: None,
            item: None,
            part: None,
            annotation: None,
        }
    }

    fn from_wire(raw: &str, w: WireEvent<'_>) -> Result<Event, Finding> {
        let t = |s: Option<StrCow<'_>>| s.map(|s| Text::of(raw, s));
        let Some(ty) = w.event_type else {
            let sequence_number = match w.sequence_number {
                SeqField::Valid(n) => Some(n),
                _ => None,
            };
            return Err(Finding::MissingType { sequence_number });
        };
        let event_type = EventType::from_wire(&ty.0);
        Ok(Event {
            raw: String::new(),
            event_type,
            type_name: Text::of(raw, ty),
            sequence_number: w.sequence_number,
            item_id: t(w.item_id),
            output_index: w.output_index,
            content_index: w.content_index,
            summary_index: w.summary_index,
            annotation_index: w.annotation_index,
            delta: t(w.delta),
            text: t(w.text),
            arguments: t(w.arguments),
            code: t(w.code),
            message: t(w.message),
            param: t(w.param),
            response: w.response,
            item: w.item,
            part: w.part,
            annotation: w.annotation,
        })
    }

    /// Checks that a known type has the fields it needs, and attaches the raw text.
    fn validated(mut self, raw: String) -> Result<Event, Finding> {
        use EventType as T;
        self.raw = raw;
        let missing = match self.event_type {
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
            T::OutputTextDone => self.text.is_none().then_some("text"),
            T::FunctionCallArgumentsDone => self.arguments.is_none().then_some("arguments"),
            T::OutputTextAnnotationAdded => self.annotation.is_none().then_some("annotation"),
            T::Error | T::Unknown => None,
        };
        match missing {
            None => Ok(self),
            Some(field) => Err(Finding::InvalidEvent {
                event_type: self.type_name().to_owned(),
                sequence_number: self.sequence_number(),
                error: format!("missing field `{field}`"),
            }),
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
        self.summary_index
    }
    /// `annotation_index`.
    pub fn annotation_index(&self) -> Option<u64> {
        self.annotation_index
    }
    /// `delta`.
    pub fn delta(&self) -> Option<&str> {
        self.delta.as_ref().map(|t| t.get(&self.raw))
    }
    /// `text`.
    pub fn text(&self) -> Option<&str> {
        self.text.as_ref().map(|t| t.get(&self.raw))
    }
    /// `arguments`.
    pub fn arguments(&self) -> Option<&str> {
        self.arguments.as_ref().map(|t| t.get(&self.raw))
    }
    /// `code` (of an `error` event).
    pub fn code(&self) -> Option<&str> {
        self.code.as_ref().map(|t| t.get(&self.raw))
    }
    /// `message` (of an `error` event).
    pub fn message(&self) -> Option<&str> {
        self.message.as_ref().map(|t| t.get(&self.raw))
    }
    /// `param` (of an `error` event).
    pub fn param(&self) -> Option<&str> {
        self.param.as_ref().map(|t| t.get(&self.raw))
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
        self.annotation.as_deref()
    }

    /// The typed view, to `match` on.
    pub fn kind(&self) -> EventKind<'_> {
        use EventType as T;
        let item_id = self.item_id();
        let (oi, ci, si) = (self.output_index, self.content_index, self.summary_index);
        let unknown = EventKind::Unknown {
            event_type: self.type_name(),
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
                    annotation_index: self.annotation_index,
                    annotation,
                },
                None => unknown,
            },
            T::Error => EventKind::Error {
                code: self.code(),
                message: self.message(),
                param: self.param(),
            },
            T::Unknown => unknown,
        }
    }
}
