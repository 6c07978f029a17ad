//! The lent view of an event, [`StreamEventRef`], with the accessors both it and an owned
//! [`StreamEvent`](super::StreamEvent) answer, and the typed view [`StreamEventKind`] to
//! `match` on.

use super::types::{EventType, Rare, SeqField, StreamEvent, StreamEventRef, Text};
use crate::response::{Annotation, OutputContent, OutputItem, Response};

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
