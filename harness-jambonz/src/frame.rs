//! Frames: every message is a JSON text frame with a `type`. [`JambonzMessage`] is what
//! jambonz sends, [`HarnessMessage`] what a harness sends; each decodes any text frame
//! (an unknown `type` to `Unknown`, unknown fields kept) and encodes back.
//!
//! Decoding peeks the `type` (the first key, in every frame we have seen: a scan of a few
//! bytes; otherwise a quick serde pass) and then parses the frame straight into that
//! message's flat struct, instead of serde's internally tagged enums, which buffer every
//! object first and run several times slower.

use std::borrow::Cow;

use harness_core::wire::{Key, WireObject};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::command::{CommandMessage, CommandResultMessage};
use crate::event::JambonzEvent;
use crate::reply::{ReplyChunk, ReplyDone};
use crate::session::{SessionEnd, SessionStart};
use crate::tool::{ToolCallMessage, ToolResultMessage};
use crate::turn::{SpeechStart, Transcript, TurnCancel, TurnStart};

/// Message type names, exact.
pub mod kind {
    /// jambonz → harness.
    pub const SESSION_START: &str = "session:start";
    /// jambonz → harness.
    pub const TURN_START: &str = "turn:start";
    /// jambonz → harness.
    pub const SPEECH_START: &str = "speech:start";
    /// jambonz → harness.
    pub const TRANSCRIPT: &str = "transcript";
    /// jambonz → harness.
    pub const TOOL_RESULT: &str = "tool:result";
    /// jambonz → harness.
    pub const EVENT: &str = "event";
    /// jambonz → harness.
    pub const TURN_CANCEL: &str = "turn:cancel";
    /// jambonz → harness.
    pub const COMMAND_RESULT: &str = "command:result";
    /// jambonz → harness.
    pub const SESSION_END: &str = "session:end";
    /// harness → jambonz.
    pub const REPLY_CHUNK: &str = "reply:chunk";
    /// harness → jambonz.
    pub const REPLY_DONE: &str = "reply:done";
    /// harness → jambonz.
    pub const TOOL_CALL: &str = "tool:call";
    /// harness → jambonz.
    pub const COMMAND: &str = "command";
}

/// Why a text frame is not a message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not JSON, or not a JSON object.
    #[error("not a JSON object: {0}")]
    NotAnObject(String),
    /// An object without a string `type`.
    #[error("message without a string `type`")]
    MissingType,
    /// A known type whose fields do not have the spec's shape.
    #[error("malformed `{kind}` message: {error}")]
    Malformed {
        /// The message type.
        kind: String,
        /// What serde said.
        error: String,
    },
}

/// A message of a type this side does not know, kept as given.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct UnknownMessage {
    /// Its `type`.
    pub kind: String,
    /// Its other fields.
    pub fields: Map<String, Value>,
}

impl UnknownMessage {
    fn write_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        for (k, v) in &self.fields {
            if k != "type" {
                map.serialize_entry(k, v)?;
            }
        }
        Ok(())
    }
}

/// A message from jambonz to the harness.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum JambonzMessage {
    /// `session:start`.
    SessionStart(SessionStart),
    /// `turn:start`.
    TurnStart(TurnStart),
    /// `speech:start`.
    SpeechStart(SpeechStart),
    /// `transcript`.
    Transcript(Transcript),
    /// `tool:result`.
    ToolResult(ToolResultMessage),
    /// `event`.
    Event(JambonzEvent),
    /// `turn:cancel`.
    TurnCancel(TurnCancel),
    /// `command:result`.
    CommandResult(CommandResultMessage),
    /// `session:end`.
    SessionEnd(SessionEnd),
    /// Any other type, kept as given.
    Unknown(UnknownMessage),
}

/// A message from the harness to jambonz.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HarnessMessage {
    /// `reply:chunk`.
    ReplyChunk(ReplyChunk),
    /// `reply:done`.
    ReplyDone(ReplyDone),
    /// `tool:call`.
    ToolCall(ToolCallMessage),
    /// `command`.
    Command(CommandMessage),
    /// Any other type, kept as given.
    Unknown(UnknownMessage),
}

/// The `type` of a frame: from its first key when that is a plain `"type"` string (a scan
/// of a few bytes), else from a serde pass over the frame. When `type` is repeated, the
/// first one decides (both ways agree); when it is not a string, there is no type.
pub fn peek_type(text: &str) -> Result<Cow<'_, str>, DecodeError> {
    if let Some(t) = fast_peek(text.as_bytes()) {
        // ok: fast_peek returns byte offsets at ASCII quotes of valid UTF-8 text.
        if let Some(s) = text.get(t.0..t.1) {
            return Ok(Cow::Borrowed(s));
        }
    }
    match serde_json::from_str::<TypeOf<'_>>(text) {
        Ok(TypeOf::Object(Some(k))) => Ok(k),
        Ok(TypeOf::Object(None)) => Err(DecodeError::MissingType),
        Ok(TypeOf::NotObject | TypeOf::Str(_)) => {
            Err(DecodeError::NotAnObject("not an object".into()))
        }
        Err(e) => Err(DecodeError::NotAnObject(e.to_string())),
    }
}

/// A whole frame read for its `type` only: the first `type` key's value when it is a
/// string, every other value skipped.
enum TypeOf<'de> {
    /// An object, with the first `type` when that is a string.
    Object(Option<Cow<'de, str>>),
    /// A string value (only asked for inside the object).
    Str(Cow<'de, str>),
    /// Any other value.
    NotObject,
}

/// A value that is a string (borrowed when it has no escapes) or anything else (skipped).
struct StrOrSkip<'de>(Option<Cow<'de, str>>);

impl<'de> serde::Deserialize<'de> for StrOrSkip<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TypeVisitor(false)).map(|t| match t {
            TypeOf::Str(s) => StrOrSkip(Some(s)),
            TypeOf::Object(_) | TypeOf::NotObject => StrOrSkip(None),
        })
    }
}

impl<'de> serde::Deserialize<'de> for TypeOf<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TypeVisitor(true))
    }
}

/// `top`: the frame itself (an object is searched for `type`); else a value (a string is
/// kept, anything else skipped).
struct TypeVisitor(bool);

impl<'de> serde::de::Visitor<'de> for TypeVisitor {
    type Value = TypeOf<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(self.string(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(TypeOf::NotObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(TypeOf::NotObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(TypeOf::NotObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(TypeOf::NotObject)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(TypeOf::NotObject)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(TypeOf::NotObject)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        if !self.0 {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            return Ok(TypeOf::NotObject);
        }
        let mut kind: Option<Option<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if &*key.0 == "type" && kind.is_none() {
                kind = Some(map.next_value::<StrOrSkip<'de>>()?.0);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(TypeOf::Object(kind.flatten()))
    }
}

impl TypeVisitor {
    fn string(self, s: Cow<'_, str>) -> TypeOf<'_> {
        if self.0 {
            TypeOf::NotObject
        } else {
            TypeOf::Str(s)
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `{ "type" : "<no escapes>"` at the start: the byte range of the value.
fn fast_peek(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if !b.get(i..)?.starts_with(b"\"type\"") {
        return None;
    }
    i = skip_ws(b, i + 6);
    if b.get(i) != Some(&b':') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let end = start + memchr::memchr2(b'"', b'\\', b.get(start..)?)?;
    if b[end] != b'"' {
        return None;
    }
    Some((start, end))
}

fn parse<'a, T: serde::Deserialize<'a>>(kind: &str, text: &'a str) -> Result<T, DecodeError> {
    serde_json::from_str(text).map_err(|e| DecodeError::Malformed {
        kind: kind.to_owned(),
        error: e.to_string(),
    })
}

/// A strict message jambonz sends: parsed straight into its struct; when a field has
/// another shape, read again field by field, the odd ones kept as given ("Ignore … fields
/// you do not recognize"), so that a `turn:cancel` or `turn:start` is never lost for a
/// field it does not need.
fn parse_or_keep<'a, T: serde::Deserialize<'a>>(
    kind: &str,
    text: &'a str,
    lenient: impl FnOnce(Map<String, Value>) -> T,
) -> Result<T, DecodeError> {
    match parse(kind, text) {
        Ok(t) => Ok(t),
        Err(e) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(lenient(m)),
            _ => Err(e),
        },
    }
}

fn parse_object(text: &str) -> Result<Map<String, Value>, DecodeError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(DecodeError::NotAnObject("not an object".into())),
        Err(e) => Err(DecodeError::NotAnObject(e.to_string())),
    }
}

fn unknown(kind: &str, text: &str) -> Result<UnknownMessage, DecodeError> {
    let mut fields = parse_object(text)?;
    fields.remove("type");
    Ok(UnknownMessage {
        kind: kind.to_owned(),
        fields,
    })
}

impl JambonzMessage {
    /// Decodes a text frame. Unknown types and fields are kept, never an error; so is a
    /// known field whose value has another shape (kept in the message's `extra`, the typed
    /// field left unset). Only a frame that is not a JSON object with a string `type`, or
    /// an `event` without a string `name`, is an error.
    ///
    /// ```
    /// use harness_jambonz::frame::JambonzMessage;
    ///
    /// let m = JambonzMessage::decode(r#"{"type":"turn:start","turn_id":1,"input":{"type":"greeting"}}"#)?;
    /// let JambonzMessage::TurnStart(t) = m else { panic!() };
    /// assert_eq!(t.turn_id, Some(1));
    ///
    /// let m = JambonzMessage::decode(r#"{"type":"dtmf","digit":"5"}"#)?;
    /// assert!(matches!(m, JambonzMessage::Unknown(u) if u.kind == "dtmf" && u.fields["digit"] == "5"));
    /// # Ok::<(), harness_jambonz::frame::DecodeError>(())
    /// ```
    pub fn decode(text: &str) -> Result<Self, DecodeError> {
        let kind = peek_type(text)?;
        Ok(match &*kind {
            kind::TRANSCRIPT => JambonzMessage::Transcript(parse_or_keep(
                &kind,
                text,
                Transcript::from_fields_lenient,
            )?),
            kind::TURN_START => JambonzMessage::TurnStart(parse_or_keep(
                &kind,
                text,
                TurnStart::from_fields_lenient_with_input,
            )?),
            kind::SPEECH_START => JambonzMessage::SpeechStart(parse_or_keep(
                &kind,
                text,
                SpeechStart::from_fields_lenient,
            )?),
            kind::TURN_CANCEL => JambonzMessage::TurnCancel(parse_or_keep(
                &kind,
                text,
                TurnCancel::from_fields_lenient,
            )?),
            kind::TOOL_RESULT => JambonzMessage::ToolResult(parse(&kind, text)?),
            kind::COMMAND_RESULT => JambonzMessage::CommandResult(parse(&kind, text)?),
            kind::SESSION_START => JambonzMessage::SessionStart(parse(&kind, text)?),
            kind::SESSION_END => JambonzMessage::SessionEnd(parse(&kind, text)?),
            kind::EVENT => {
                JambonzMessage::Event(JambonzEvent::from_fields(parse_object(text)?).map_err(
                    |error| DecodeError::Malformed {
                        kind: kind::EVENT.into(),
                        error,
                    },
                )?)
            }
            other => JambonzMessage::Unknown(unknown(other, text)?),
        })
    }

    /// The `type`.
    pub fn kind(&self) -> &str {
        match self {
            JambonzMessage::SessionStart(_) => kind::SESSION_START,
            JambonzMessage::TurnStart(_) => kind::TURN_START,
            JambonzMessage::SpeechStart(_) => kind::SPEECH_START,
            JambonzMessage::Transcript(_) => kind::TRANSCRIPT,
            JambonzMessage::ToolResult(_) => kind::TOOL_RESULT,
            JambonzMessage::Event(_) => kind::EVENT,
            JambonzMessage::TurnCancel(_) => kind::TURN_CANCEL,
            JambonzMessage::CommandResult(_) => kind::COMMAND_RESULT,
            JambonzMessage::SessionEnd(_) => kind::SESSION_END,
            JambonzMessage::Unknown(u) => &u.kind,
        }
    }

    /// The JSON text frame.
    pub fn encode(&self) -> String {
        encode_string(self)
    }

    /// Appends the JSON text frame to `buf`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        // ok to ignore: writing JSON of maps/values into a Vec cannot fail.
        let _ = serde_json::to_writer(buf, self);
    }
}

impl Serialize for JambonzMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", self.kind())?;
        match self {
            JambonzMessage::SessionStart(m) => m.write_fields(&mut map)?,
            JambonzMessage::TurnStart(m) => m.write_fields(&mut map)?,
            JambonzMessage::SpeechStart(m) => m.write_fields(&mut map)?,
            JambonzMessage::Transcript(m) => m.write_fields(&mut map)?,
            JambonzMessage::ToolResult(m) => m.write_fields(&mut map)?,
            JambonzMessage::Event(m) => m.write_fields(&mut map)?,
            JambonzMessage::TurnCancel(m) => m.write_fields(&mut map)?,
            JambonzMessage::CommandResult(m) => m.write_fields(&mut map)?,
            JambonzMessage::SessionEnd(m) => m.write_fields(&mut map)?,
            JambonzMessage::Unknown(m) => m.write_fields(&mut map)?,
        }
        map.end()
    }
}

impl HarnessMessage {
    /// Decodes a text frame. Unknown types and fields are kept, never an error.
    ///
    /// ```
    /// use harness_jambonz::frame::HarnessMessage;
    ///
    /// let m = HarnessMessage::decode(
    ///     r#"{"type":"reply:chunk","reply_id":"r1","turn_id":1,"chunk":{"choices":[{"delta":{"content":"Hi"}}]}}"#,
    /// )?;
    /// let HarnessMessage::ReplyChunk(c) = m else { panic!() };
    /// assert_eq!(c.chunk.content(), "Hi");
    /// # Ok::<(), harness_jambonz::frame::DecodeError>(())
    /// ```
    pub fn decode(text: &str) -> Result<Self, DecodeError> {
        let kind = peek_type(text)?;
        Ok(match &*kind {
            kind::REPLY_CHUNK => HarnessMessage::ReplyChunk(parse(&kind, text)?),
            kind::REPLY_DONE => HarnessMessage::ReplyDone(parse(&kind, text)?),
            kind::TOOL_CALL => HarnessMessage::ToolCall(parse(&kind, text)?),
            kind::COMMAND => HarnessMessage::Command(parse(&kind, text)?),
            other => HarnessMessage::Unknown(unknown(other, text)?),
        })
    }

    /// The `type`.
    pub fn kind(&self) -> &str {
        match self {
            HarnessMessage::ReplyChunk(_) => kind::REPLY_CHUNK,
            HarnessMessage::ReplyDone(_) => kind::REPLY_DONE,
            HarnessMessage::ToolCall(_) => kind::TOOL_CALL,
            HarnessMessage::Command(_) => kind::COMMAND,
            HarnessMessage::Unknown(u) => &u.kind,
        }
    }

    /// The JSON text frame.
    pub fn encode(&self) -> String {
        encode_string(self)
    }

    /// Appends the JSON text frame to `buf`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        // ok to ignore: writing JSON of maps/values into a Vec cannot fail.
        let _ = serde_json::to_writer(buf, self);
    }
}

impl Serialize for HarnessMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", self.kind())?;
        match self {
            HarnessMessage::ReplyChunk(m) => m.write_fields(&mut map)?,
            HarnessMessage::ReplyDone(m) => m.write_fields(&mut map)?,
            HarnessMessage::ToolCall(m) => m.write_fields(&mut map)?,
            HarnessMessage::Command(m) => m.write_fields(&mut map)?,
            HarnessMessage::Unknown(m) => m.write_fields(&mut map)?,
        }
        map.end()
    }
}

fn encode_string<T: Serialize>(m: &T) -> String {
    let mut buf = Vec::with_capacity(128);
    // ok to ignore: writing JSON of maps/values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut buf, m);
    // serde_json writes valid UTF-8.
    String::from_utf8(buf).unwrap_or_default()
}
