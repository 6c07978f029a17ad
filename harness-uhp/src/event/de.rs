//! The hand-written deserializer: an event object decoded in one pass into place
//! ([`StreamEvent::parse`]), and the slow path that says what is wrong with one that is not an event.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::types::{Body, EventType, Rare, SeqField, StreamEvent, StreamEventRef, Text};
use crate::finding::{Finding, excerpt};
use crate::response::{OutputContent, OutputItem, Response};
use harness_core::wire;

/// An event of type `ty` read leniently from its object on the slow path (an unknown type,
/// or a lifecycle event whose response was read leniently): its type, its
/// `sequence_number` and that response; no raw text yet.
fn lenient(
    ty: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
    response: Option<Response>,
) -> StreamEvent {
    let sequence_number = match obj.get("sequence_number") {
        None => SeqField::Absent,
        Some(v) => v.as_u64().map_or(SeqField::Invalid, SeqField::Valid),
    };
    StreamEvent {
        raw: String::new(),
        body: Body {
            type_name: Text::Owned(ty.into()),
            item_id: None,
            delta: None,
            output_index: None,
            content_index: None,
            sequence_number,
            event_type: EventType::from_wire(ty),
            response: response.map(Box::new),
            item: None,
            part: None,
            rare: None,
        },
    }
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
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
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
                Ok(Key::of(k))
            }
        }
        d.deserialize_identifier(V)
    }
}

impl Key {
    /// The key named `k` (unescaped).
    #[inline]
    pub(super) fn of(k: &str) -> Key {
        match (k.len(), k) {
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
        }
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
        let text = |s: Option<wire::Key<'a>>| s.map(|s| Text::of(raw, s));
        // A repeated key: the last one wins, as in most JSON readers.
        while let Some(k) = m.next_key::<Key>()? {
            match k {
                Key::Type => f.type_name = Some(Text::of(raw, m.next_value::<wire::Key<'a>>()?)),
                Key::SequenceNumber => f.sequence_number = m.next_value()?,
                Key::Delta => f.delta = Some(Text::of(raw, m.next_value::<wire::Key<'a>>()?)),
                Key::ItemId => f.item_id = Some(Text::of(raw, m.next_value::<wire::Key<'a>>()?)),
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

/// What [`StreamEvent::parse_lent`] lends from: the fields of the last event (spans into
/// the data it was lent with), or the last event that only the slow path could read.
#[derive(Debug, Default)]
pub(crate) struct LentSlot {
    body: Option<Body>,
    owned: Option<StreamEvent>,
}

impl StreamEvent {
    /// [`parse`](Self::parse) of `data` lent as a view borrowing its text from `data` itself
    /// (no copy); only a payload the slow path must read (a finding, or a shape this crate
    /// does not expect) is copied, into an owned event kept in `slot`.
    #[inline]
    pub(crate) fn parse_lent<'a>(
        data: &'a str,
        slot: &'a mut LentSlot,
    ) -> Result<StreamEventRef<'a>, Finding> {
        let mut f = Fields::default();
        if super::flat::read(data, &mut f).is_some() {
            let body = f.into_body(data)?;
            return Ok(StreamEventRef {
                raw: data,
                body: slot.body.insert(body),
            });
        }
        Self::parse_lent_serde(data, slot)
    }

    /// [`parse_lent`](Self::parse_lent) the serde way.
    #[inline(never)]
    fn parse_lent_serde<'a>(
        data: &'a str,
        slot: &'a mut LentSlot,
    ) -> Result<StreamEventRef<'a>, Finding> {
        if let Some(f) = Self::fields_serde(data) {
            let body = f.into_body(data)?;
            return Ok(StreamEventRef {
                raw: data,
                body: slot.body.insert(body),
            });
        }
        let ev = Self::slow_path(data.to_owned())?;
        Ok(slot.owned.insert(ev).view())
    }

    /// Decodes one event from the data of one SSE message.
    ///
    /// Errors are findings about this payload: not JSON, a `[DONE]` sentinel, JSON that is
    /// not an object, an object without a string `type`, or a known type with a field of the
    /// wrong JSON type (the finding carries the `sequence_number` when it could be read).
    pub fn parse(data: String) -> Result<StreamEvent, Finding> {
        // Most events are flat objects of strings and integers: read those directly.
        let mut f = Fields::default();
        if super::flat::read(&data, &mut f).is_some() {
            return f.into_event(data);
        }
        Self::parse_serde(data)
    }

    /// [`parse`](Self::parse) through serde_json only, for any payload (the flat fast path
    /// must agree with it on every payload it accepts).
    pub(super) fn parse_serde(data: String) -> Result<StreamEvent, Finding> {
        match Self::fields_serde(&data) {
            Some(f) => f.into_event(data),
            None => Self::slow_path(data),
        }
    }

    /// The fields of `data` through serde_json (its strings spans of `data`); `None`: the
    /// slow path's turn.
    fn fields_serde(data: &str) -> Option<Fields> {
        let mut f = Fields::default();
        let mut de = serde_json::Deserializer::from_str(data);
        de::Deserializer::deserialize_map(
            &mut de,
            Sink {
                raw: data,
                f: &mut f,
            },
        )
        .and_then(|()| de.end())
        .ok()
        .map(|()| f)
    }

    /// The slow path: an unknown type whose fields have shapes this crate does not expect is
    /// still an event; anything else says precisely what is wrong with the payload.
    fn slow_path(data: String) -> Result<StreamEvent, Finding> {
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
            return Ok(lenient(ty, obj, None).with_raw(data));
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
            let response = obj
                .get("response")
                .filter(|r| !r.is_null())
                .map(|r| Response::from_value_lenient(r.clone()));
            if let Some(Ok(response)) = response {
                return Ok(lenient(ty, obj, Some(response)).with_raw(data));
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

    fn with_raw(mut self, raw: String) -> StreamEvent {
        self.raw = raw;
        self
    }
}

/// The decoded fields of an event, before the raw text is moved in.
#[derive(Default)]
pub(super) struct Fields {
    pub(super) type_name: Option<Text>,
    pub(super) sequence_number: SeqField,
    pub(super) item_id: Option<Text>,
    pub(super) delta: Option<Text>,
    pub(super) output_index: Option<u64>,
    pub(super) content_index: Option<u64>,
    response: Option<Box<Response>>,
    item: Option<Box<OutputItem>>,
    part: Option<Box<OutputContent>>,
    pub(super) rare: Option<Box<Rare>>,
}

impl Fields {
    /// Checks that the type is there, then moves the raw text in.
    pub(super) fn into_event(self, raw: String) -> Result<StreamEvent, Finding> {
        let body = self.into_body(&raw)?;
        Ok(StreamEvent { raw, body })
    }

    /// Checks that the type is there: the event's fields, spans into `raw`.
    #[inline]
    pub(super) fn into_body(self, raw: &str) -> Result<Body, Finding> {
        let Some(type_name) = self.type_name else {
            let sequence_number = match self.sequence_number {
                SeqField::Valid(n) => Some(n),
                _ => None,
            };
            return Err(Finding::MissingType { sequence_number });
        };
        let event_type = EventType::from_wire(type_name.get(raw));
        Ok(Body {
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
