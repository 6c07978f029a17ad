//! Events: `{type: "event", name, …}`.
//!
//! The spec names `user_interruption` (with its fields), `reply_dropped` (reason `replaced`),
//! `silence` and an "error event" for a reply sent before its turn's `turn:start`; only the
//! first is detailed. The others are typed with the fields that are known and keep every
//! field in `extra`; any other name is [`JambonzEvent::Other`], kept as given.

use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::turn::TurnId;
use harness_core::wire::WireObject;
use harness_core::wire_struct;

/// Known event names.
pub mod name {
    /// The caller spoke over a reply.
    pub const USER_INTERRUPTION: &str = "user_interruption";
    /// The caller has been silent.
    pub const SILENCE: &str = "silence";
    /// A held unprompted reply was dropped.
    pub const REPLY_DROPPED: &str = "reply_dropped";
    /// jambonz refused something the harness sent.
    pub const ERROR: &str = "error";
}

/// Known `reply_dropped` reasons.
pub mod drop_reason {
    /// A newer unprompted reply replaced the held one.
    pub const REPLACED: &str = "replaced";
}

wire_struct! {
    /// `user_interruption`: `{turn_id, reply_id, spoken, unspoken}`: the caller spoke over
    /// a reply; `spoken` is what they heard. Keep only that in the conversation.
    pub struct UserInterruption [as_given] [skip "type", "name"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
        /// The turn the reply answered (none for an unprompted reply).
        lenient turn_id: Option<TurnId> = "turn_id",
        /// The reply that was cut off.
        lenient reply_id: Option<String> = "reply_id",
        /// What the caller heard.
        lenient spoken: String = "spoken",
        /// What they did not.
        lenient unspoken: String = "unspoken",
    }
}

wire_struct! {
    /// `silence`: the caller has been silent. Its fields are not given by the spec.
    pub struct Silence [as_given] [skip "type", "name"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
    }
}

wire_struct! {
    /// `reply_dropped`: a held unprompted reply was dropped, e.g. reason `replaced`.
    pub struct ReplyDropped [as_given] [skip "type", "name"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
        /// The dropped reply.
        lenient reply_id: Option<String> = "reply_id",
        /// Why, e.g. [`drop_reason::REPLACED`].
        lenient reason: Option<String> = "reason",
    }
}

wire_struct! {
    /// `error`: jambonz refused something the harness sent (a reply before its turn's
    /// `turn:start`). The spec gives no fields; these are the simulator's.
    pub struct ErrorEvent [as_given] [skip "type", "name"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
        /// The refused reply.
        lenient reply_id: Option<String> = "reply_id",
        /// Its turn.
        lenient turn_id: Option<TurnId> = "turn_id",
        /// What was wrong.
        lenient message: Option<String> = "message",
    }
}

/// An event from jambonz.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum JambonzEvent {
    /// `user_interruption`.
    UserInterruption(UserInterruption),
    /// `silence`.
    Silence(Silence),
    /// `reply_dropped`.
    ReplyDropped(ReplyDropped),
    /// `error`.
    Error(ErrorEvent),
    /// Any other event, kept as given.
    Other {
        /// Its name.
        name: String,
        /// Its other fields.
        fields: Map<String, Value>,
    },
}

impl JambonzEvent {
    /// The event's name.
    pub fn name(&self) -> &str {
        match self {
            JambonzEvent::UserInterruption(_) => name::USER_INTERRUPTION,
            JambonzEvent::Silence(_) => name::SILENCE,
            JambonzEvent::ReplyDropped(_) => name::REPLY_DROPPED,
            JambonzEvent::Error(_) => name::ERROR,
            JambonzEvent::Other { name, .. } => name,
        }
    }

    /// Reads an event from its fields (those of the whole message). Typed events are
    /// lenient: a field of another shape is kept in `extra`, so this fails only when `name`
    /// is missing or not a string.
    pub(crate) fn from_fields(mut fields: Map<String, Value>) -> Result<Self, String> {
        fields.remove("type");
        let name = match fields.remove("name") {
            Some(Value::String(s)) => s,
            Some(_) => return Err("event `name` is not a string".into()),
            None => return Err("event without a `name`".into()),
        };
        let obj = Value::Object(fields);
        let typed = |e: serde_json::Error| e.to_string();
        Ok(match name.as_str() {
            name::USER_INTERRUPTION => {
                JambonzEvent::UserInterruption(serde_json::from_value(obj).map_err(typed)?)
            }
            name::SILENCE => JambonzEvent::Silence(serde_json::from_value(obj).map_err(typed)?),
            name::REPLY_DROPPED => {
                JambonzEvent::ReplyDropped(serde_json::from_value(obj).map_err(typed)?)
            }
            name::ERROR => JambonzEvent::Error(serde_json::from_value(obj).map_err(typed)?),
            _ => match obj {
                Value::Object(fields) => JambonzEvent::Other { name, fields },
                _ => JambonzEvent::Other {
                    name,
                    fields: Map::new(),
                },
            },
        })
    }

    pub(crate) fn write_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        map.serialize_entry("name", self.name())?;
        match self {
            JambonzEvent::UserInterruption(e) => e.write_fields(map),
            JambonzEvent::Silence(e) => e.write_fields(map),
            JambonzEvent::ReplyDropped(e) => e.write_fields(map),
            JambonzEvent::Error(e) => e.write_fields(map),
            JambonzEvent::Other { fields, .. } => {
                for (k, v) in fields {
                    if k != "type" && k != "name" {
                        map.serialize_entry(k, v)?;
                    }
                }
                Ok(())
            }
        }
    }
}
