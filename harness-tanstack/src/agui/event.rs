//! The 31 AG-UI 1.0 events, and [`AguiEvent`], their union keyed on `type`.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use harness_core::wire::{
    DeserializeInto, UnknownObject, fill_variant, seek_tag, serialize_object,
};
use harness_core::wire_struct;

use super::types::*;
use crate::{Extra, Json};

macro_rules! event_struct {
    ($(#[$m:meta])* $name:ident = $lit:literal { $($body:tt)* }) => {
        wire_struct! {
            $(#[$m])*
            ///
            /// Base fields: `timestamp`, `rawEvent`, `metadata`.
            pub struct $name [tag "type" = $lit @ 0] {
                /// When it happened (ms since the epoch, by convention).
                opt(crate::wire::int) timestamp: i64 = "timestamp",
                /// The event it was made from, as the source wrote it (never `null`).
                opt_nn raw_event: Json = "rawEvent",
                /// Extra information (an object; the key `ag-ui` is reserved).
                opt_obj metadata: Json = "metadata",
                $($body)*
            }
        }
    };
}

event_struct!(
    /// Opens a streamed text message.
    TextMessageStart = "TEXT_MESSAGE_START" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
        /// Who speaks (absent: assistant).
        opt role: TextMessageRole = "role",
        /// A name.
        opt name: String = "name",
    }
);
event_struct!(
    /// Appends a fragment to a streamed text message.
    TextMessageContent = "TEXT_MESSAGE_CONTENT" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
        /// The fragment (may be empty).
        req delta: String = "delta",
    }
);
event_struct!(
    /// Closes a streamed text message.
    TextMessageEnd = "TEXT_MESSAGE_END" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
    }
);
event_struct!(
    /// Start, content and end in one shorthand.
    TextMessageChunk = "TEXT_MESSAGE_CHUNK" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        opt message_id: String = "messageId",
        /// Who speaks.
        opt role: TextMessageRole = "role",
        /// The fragment.
        opt delta: String = "delta",
        /// A name.
        opt name: String = "name",
    }
);
event_struct!(
    /// Opens a tool call.
    ToolCallStart = "TOOL_CALL_START" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The call.
        req tool_call_id: String = "toolCallId",
        /// The tool.
        req tool_call_name: String = "toolCallName",
        /// The assistant message it belongs to.
        opt parent_message_id: String = "parentMessageId",
    }
);
event_struct!(
    /// Appends a fragment of a tool call's arguments.
    ToolCallArgs = "TOOL_CALL_ARGS" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The call.
        req tool_call_id: String = "toolCallId",
        /// The fragment of JSON text.
        req delta: String = "delta",
    }
);
event_struct!(
    /// Closes a tool call: its arguments are complete.
    ToolCallEnd = "TOOL_CALL_END" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The call.
        req tool_call_id: String = "toolCallId",
    }
);
event_struct!(
    /// Start, args and end of a tool call in one shorthand.
    ToolCallChunk = "TOOL_CALL_CHUNK" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The call.
        opt tool_call_id: String = "toolCallId",
        /// The tool.
        opt tool_call_name: String = "toolCallName",
        /// The assistant message it belongs to.
        opt parent_message_id: String = "parentMessageId",
        /// The fragment.
        opt delta: String = "delta",
    }
);
event_struct!(
    /// What a tool returned (a new tool message).
    ToolCallResult = "TOOL_CALL_RESULT" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The tool message.
        req message_id: String = "messageId",
        /// The call it answers.
        req tool_call_id: String = "toolCallId",
        /// The result.
        req content: Content = "content",
        /// Always `tool`.
        opt role: ToolRole = "role",
    }
);
event_struct!(
    /// Replaces the agent state.
    StateSnapshot = "STATE_SNAPSHOT" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The state (any JSON, `null` included).
        req snapshot: Json = "snapshot",
    }
);
event_struct!(
    /// Changes the agent state with a JSON Patch.
    StateDelta = "STATE_DELTA" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The patch.
        req delta: Vec<PatchOp> = "delta",
    }
);
event_struct!(
    /// Replaces the transcript.
    MessagesSnapshot = "MESSAGES_SNAPSHOT" {
        /// The messages.
        req messages: Vec<AguiMessage> = "messages",
    }
);
event_struct!(
    /// Replaces an activity.
    ActivitySnapshot = "ACTIVITY_SNAPSHOT" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The activity message.
        req message_id: String = "messageId",
        /// Its kind.
        req activity_type: String = "activityType",
        /// Its content (an object).
        req_obj content: Json = "content",
        /// Whether it replaces an existing one.
        opt replace: bool = "replace",
    }
);
event_struct!(
    /// Changes an activity with a JSON Patch.
    ActivityDelta = "ACTIVITY_DELTA" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The activity message.
        req message_id: String = "messageId",
        /// Its kind.
        req activity_type: String = "activityType",
        /// The patch.
        req patch: Vec<PatchOp> = "patch",
    }
);
event_struct!(
    /// An event of another system, passed through.
    Raw = "RAW" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The event (any JSON).
        req event: Json = "event",
        /// Where it came from.
        opt source: String = "source",
    }
);
event_struct!(
    /// An application event: `name` and `value`. The `harness.*` catalog travels in these.
    Custom = "CUSTOM" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The event name.
        req name: String = "name",
        /// The value (any JSON, `null` included).
        req value: Json = "value",
    }
);
event_struct!(
    /// A run started.
    RunStarted = "RUN_STARTED" {
        /// The thread.
        req thread_id: String = "threadId",
        /// The run.
        req run_id: String = "runId",
        /// The AG-UI version.
        opt protocol_version: String = "protocolVersion",
        /// The run that started it (a child run has one; a top-level run has none).
        opt parent_run_id: String = "parentRunId",
        /// What the run was asked.
        opt input: Box<RunAgentInput> = "input",
    }
);
event_struct!(
    /// A run finished.
    RunFinished = "RUN_FINISHED" {
        /// The thread.
        req thread_id: String = "threadId",
        /// The run.
        req run_id: String = "runId",
        /// Its result (never `null`).
        opt_nn result: Json = "result",
        /// How it ended (absent: success).
        opt outcome: RunFinishedOutcome = "outcome",
        /// What it cost.
        opt usage: Vec<TokenUsage> = "usage",
    }
);
event_struct!(
    /// A run failed.
    RunError = "RUN_ERROR" {
        /// For people.
        req message: String = "message",
        /// For code (an open set, e.g. `timeout`).
        opt code: String = "code",
        /// What it cost.
        opt usage: Vec<TokenUsage> = "usage",
    }
);
event_struct!(
    /// A step started.
    StepStarted = "STEP_STARTED" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The step.
        req step_name: String = "stepName",
    }
);
event_struct!(
    /// A step finished.
    StepFinished = "STEP_FINISHED" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The step.
        req step_name: String = "stepName",
    }
);
event_struct!(
    /// Reasoning started.
    ReasoningStart = "REASONING_START" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The reasoning.
        req message_id: String = "messageId",
    }
);
event_struct!(
    /// A reasoning message opens.
    ReasoningMessageStart = "REASONING_MESSAGE_START" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
        /// Always `reasoning` (required).
        req role: ReasoningRole = "role",
    }
);
event_struct!(
    /// Appends to a reasoning message.
    ReasoningMessageContent = "REASONING_MESSAGE_CONTENT" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
        /// The fragment.
        req delta: String = "delta",
    }
);
event_struct!(
    /// A reasoning message closes.
    ReasoningMessageEnd = "REASONING_MESSAGE_END" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        req message_id: String = "messageId",
    }
);
event_struct!(
    /// A reasoning message in one shorthand.
    ReasoningMessageChunk = "REASONING_MESSAGE_CHUNK" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message.
        opt message_id: String = "messageId",
        /// The fragment.
        opt delta: String = "delta",
    }
);
event_struct!(
    /// Reasoning ended.
    ReasoningEnd = "REASONING_END" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The reasoning.
        req message_id: String = "messageId",
    }
);
event_struct!(
    /// Provider-encrypted reasoning attached to a message or a tool call.
    ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE" {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// What it is attached to.
        req subtype: EncryptedValueSubtype = "subtype",
        /// The message or call id.
        req entity_id: String = "entityId",
        /// The opaque value.
        req encrypted_value: String = "encryptedValue",
    }
);
event_struct!(
    /// A subagent run started.
    SubagentStarted = "SUBAGENT_STARTED" {
        /// The subagent run (required here).
        req subagent_run_id: String = "subagentRunId",
        /// The subagent.
        req name: String = "name",
        /// What it does.
        opt description: String = "description",
        /// The subagent run that started it.
        opt parent_subagent_run_id: String = "parentSubagentRunId",
        /// The tool call that started it.
        opt parent_tool_call_id: String = "parentToolCallId",
        /// The message that started it.
        opt parent_message_id: String = "parentMessageId",
    }
);
event_struct!(
    /// A subagent run finished.
    SubagentFinished = "SUBAGENT_FINISHED" {
        /// The subagent run (required here).
        req subagent_run_id: String = "subagentRunId",
        /// Its result (never `null`).
        opt_nn result: Json = "result",
        /// How it ended.
        opt outcome: SubagentFinishedOutcome = "outcome",
    }
);
event_struct!(
    /// A subagent run failed.
    SubagentError = "SUBAGENT_ERROR" {
        /// The subagent run (required here).
        req subagent_run_id: String = "subagentRunId",
        /// For people.
        req message: String = "message",
        /// For code.
        opt code: String = "code",
    }
);

/// An event whose `type` this version does not know, kept as it came.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct UnknownEvent {
    /// The `type`.
    pub event_type: String,
    /// Every other key, in order, as written.
    pub fields: Extra,
}

macro_rules! events {
    ($( $(#[$m:meta])* $var:ident = $lit:literal ),* $(,)?) => {
        /// An AG-UI 1.0 event (AG-UI `Event`), keyed on `type`. An unknown `type` is kept as
        /// [`AguiEvent::Unknown`] (see [`AguiEvent::from_json_strict`] for the schema's verdict).
        ///
        /// Decoding reads `type` when it comes (first, from every encoder we know) and parses
        /// the rest straight into the variant: one pass, no intermediate tree.
        ///
        /// ```
        /// use harness_tanstack::agui::AguiEvent;
        /// let ev: AguiEvent = serde_json::from_str(
        ///     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi","x":1}"#)?;
        /// let AguiEvent::TextMessageContent(c) = &ev else { panic!() };
        /// assert_eq!(c.delta, "Hi");
        /// // Unknown keys are kept and written back, after the declared ones.
        /// assert_eq!(serde_json::to_string(&ev)?,
        ///     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi","x":1}"#);
        /// # Ok::<(), serde_json::Error>(())
        /// ```
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        #[allow(clippy::large_enum_variant)]
        pub enum AguiEvent {
            $( $(#[$m])* $var($var), )*
            /// A `type` this version does not know.
            Unknown(UnknownEvent),
        }

        /// Every AG-UI 1.0 event type, in the schema's order.
        pub const EVENT_TYPES: &[&str] = &[$($lit),*];

        impl AguiEvent {
            /// The `type`.
            pub fn event_type(&self) -> &str {
                match self {
                    $( AguiEvent::$var(_) => $lit, )*
                    AguiEvent::Unknown(u) => &u.event_type,
                }
            }
        }

        $( impl From<$var> for AguiEvent {
            fn from(v: $var) -> Self {
                AguiEvent::$var(v)
            }
        } )*

        impl Serialize for AguiEvent {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( AguiEvent::$var(v) => serialize_object(v, s), )*
                    AguiEvent::Unknown(u) => {
                        let mut m = s.serialize_map(None)?;
                        m.serialize_entry("type", &u.event_type)?;
                        u.fields.serialize_entries(&mut m)?;
                        m.end()
                    }
                }
            }
        }

        /// Reads an event into its place.
        struct EventInto<'a>(&'a mut AguiEvent);

        impl<'de> Visitor<'de> for EventInto<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an AG-UI event object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                let (tag, pending) = seek_tag(&mut map, "type")?;
                match &*tag.0 {
                    $( $lit => fill_variant(
                        self.0,
                        AguiEvent::$var,
                        |e| match e {
                            AguiEvent::$var(v) => Some(v),
                            _ => None,
                        },
                        $lit,
                        pending,
                        map,
                    ), )*
                    other => {
                        let u = UnknownObject::read_rest(other, pending, map)?;
                        *self.0 = AguiEvent::Unknown(UnknownEvent { event_type: u.tag, fields: u.fields });
                        Ok(())
                    }
                }
            }
        }
    };
}

events! {
    /// `TEXT_MESSAGE_START`
    TextMessageStart = "TEXT_MESSAGE_START",
    /// `TEXT_MESSAGE_CONTENT`
    TextMessageContent = "TEXT_MESSAGE_CONTENT",
    /// `TEXT_MESSAGE_END`
    TextMessageEnd = "TEXT_MESSAGE_END",
    /// `TEXT_MESSAGE_CHUNK`
    TextMessageChunk = "TEXT_MESSAGE_CHUNK",
    /// `TOOL_CALL_START`
    ToolCallStart = "TOOL_CALL_START",
    /// `TOOL_CALL_ARGS`
    ToolCallArgs = "TOOL_CALL_ARGS",
    /// `TOOL_CALL_END`
    ToolCallEnd = "TOOL_CALL_END",
    /// `TOOL_CALL_CHUNK`
    ToolCallChunk = "TOOL_CALL_CHUNK",
    /// `TOOL_CALL_RESULT`
    ToolCallResult = "TOOL_CALL_RESULT",
    /// `STATE_SNAPSHOT`
    StateSnapshot = "STATE_SNAPSHOT",
    /// `STATE_DELTA`
    StateDelta = "STATE_DELTA",
    /// `MESSAGES_SNAPSHOT`
    MessagesSnapshot = "MESSAGES_SNAPSHOT",
    /// `ACTIVITY_SNAPSHOT`
    ActivitySnapshot = "ACTIVITY_SNAPSHOT",
    /// `ACTIVITY_DELTA`
    ActivityDelta = "ACTIVITY_DELTA",
    /// `RAW`
    Raw = "RAW",
    /// `CUSTOM`
    Custom = "CUSTOM",
    /// `RUN_STARTED`
    RunStarted = "RUN_STARTED",
    /// `RUN_FINISHED`
    RunFinished = "RUN_FINISHED",
    /// `RUN_ERROR`
    RunError = "RUN_ERROR",
    /// `STEP_STARTED`
    StepStarted = "STEP_STARTED",
    /// `STEP_FINISHED`
    StepFinished = "STEP_FINISHED",
    /// `REASONING_START`
    ReasoningStart = "REASONING_START",
    /// `REASONING_MESSAGE_START`
    ReasoningMessageStart = "REASONING_MESSAGE_START",
    /// `REASONING_MESSAGE_CONTENT`
    ReasoningMessageContent = "REASONING_MESSAGE_CONTENT",
    /// `REASONING_MESSAGE_END`
    ReasoningMessageEnd = "REASONING_MESSAGE_END",
    /// `REASONING_MESSAGE_CHUNK`
    ReasoningMessageChunk = "REASONING_MESSAGE_CHUNK",
    /// `REASONING_END`
    ReasoningEnd = "REASONING_END",
    /// `REASONING_ENCRYPTED_VALUE`
    ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE",
    /// `SUBAGENT_STARTED`
    SubagentStarted = "SUBAGENT_STARTED",
    /// `SUBAGENT_FINISHED`
    SubagentFinished = "SUBAGENT_FINISHED",
    /// `SUBAGENT_ERROR`
    SubagentError = "SUBAGENT_ERROR",
}

impl AguiEvent {
    /// `subagentRunId`, where the event has one.
    pub fn subagent_run_id(&self) -> Option<&str> {
        match self {
            AguiEvent::TextMessageStart(e) => e.subagent_run_id.as_deref(),
            AguiEvent::TextMessageContent(e) => e.subagent_run_id.as_deref(),
            AguiEvent::TextMessageEnd(e) => e.subagent_run_id.as_deref(),
            AguiEvent::TextMessageChunk(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ToolCallStart(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ToolCallArgs(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ToolCallEnd(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ToolCallChunk(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ToolCallResult(e) => e.subagent_run_id.as_deref(),
            AguiEvent::StateSnapshot(e) => e.subagent_run_id.as_deref(),
            AguiEvent::StateDelta(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ActivitySnapshot(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ActivityDelta(e) => e.subagent_run_id.as_deref(),
            AguiEvent::Raw(e) => e.subagent_run_id.as_deref(),
            AguiEvent::Custom(e) => e.subagent_run_id.as_deref(),
            AguiEvent::StepStarted(e) => e.subagent_run_id.as_deref(),
            AguiEvent::StepFinished(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningStart(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningMessageStart(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningMessageContent(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningMessageEnd(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningMessageChunk(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningEnd(e) => e.subagent_run_id.as_deref(),
            AguiEvent::ReasoningEncryptedValue(e) => e.subagent_run_id.as_deref(),
            AguiEvent::SubagentStarted(e) => Some(&e.subagent_run_id),
            AguiEvent::SubagentFinished(e) => Some(&e.subagent_run_id),
            AguiEvent::SubagentError(e) => Some(&e.subagent_run_id),
            _ => None,
        }
    }
}

impl DeserializeInto for AguiEvent {
    fn deserialize_into<'de, D: Deserializer<'de>>(
        d: D,
        out: &mut AguiEvent,
    ) -> Result<(), D::Error> {
        d.deserialize_map(EventInto(out))
    }
}

impl<'de> Deserialize<'de> for AguiEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = AguiEvent::default();
        AguiEvent::deserialize_into(d, &mut out)?;
        Ok(out)
    }
}

/// Why an event does not pass the AG-UI 1.0 schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The JSON does not fit the schema of its type (or is not JSON).
    #[error("invalid AG-UI event: {0}")]
    Invalid(String),
    /// The `type` is not one of the 31 AG-UI 1.0 types.
    #[error("unknown AG-UI event type {0:?}")]
    UnknownType(String),
}

impl AguiEvent {
    /// Parses an event the way a consumer must: an unknown `type` is kept
    /// ([`AguiEvent::Unknown`]), anything else that breaks the schema is an error.
    pub fn from_json(text: &str) -> Result<AguiEvent, EventError> {
        serde_json::from_str(text).map_err(|e| EventError::Invalid(e.to_string()))
    }

    /// Parses and validates an event against the AG-UI 1.0 schema exactly: an unknown `type`
    /// is an error too (the reference libraries' verdict).
    pub fn from_json_strict(text: &str) -> Result<AguiEvent, EventError> {
        match AguiEvent::from_json(text)? {
            AguiEvent::Unknown(u) => Err(EventError::UnknownType(u.event_type)),
            ev => Ok(ev),
        }
    }

    /// Compact JSON, keys in the schema's order, unknown keys last.
    pub fn to_json(&self) -> String {
        // ok to default: serializing our own types into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// [`to_json`](Self::to_json), appended to `out` (the log writes each event into its
    /// record's buffer). The events a streamed reply is made of, `TEXT_MESSAGE_CONTENT` and
    /// `TOOL_CALL_ARGS`, with none of their optional fields or unknown keys, are written
    /// directly (their strings escaped by serde_json): byte for byte the serde form
    /// (`tests/codec_props.rs`), without its per-key calls.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            AguiEvent::TextMessageContent(e)
                if e.timestamp.is_none()
                    && e.raw_event.is_none()
                    && e.metadata.is_none()
                    && e.subagent_run_id.is_none()
                    && e.extra.is_empty() =>
            {
                write_delta(
                    out,
                    "TEXT_MESSAGE_CONTENT\",\"messageId",
                    &e.message_id,
                    &e.delta,
                )
            }
            AguiEvent::ToolCallArgs(e)
                if e.timestamp.is_none()
                    && e.raw_event.is_none()
                    && e.metadata.is_none()
                    && e.subagent_run_id.is_none()
                    && e.extra.is_empty() =>
            {
                write_delta(
                    out,
                    "TOOL_CALL_ARGS\",\"toolCallId",
                    &e.tool_call_id,
                    &e.delta,
                )
            }
            _ => {
                let start = out.len();
                if serde_json::to_writer(&mut *out, self).is_err() {
                    // As `to_json`: nothing (serializing our own types cannot fail).
                    out.truncate(start);
                }
            }
        }
    }

    /// The event as the AG-UI encoder frames it on SSE: `data: <json>\n\n`.
    pub fn to_sse(&self) -> String {
        format!("data: {}\n\n", self.to_json())
    }

    /// Whether the `type` is one of the 31 AG-UI 1.0 types.
    pub fn is_known(&self) -> bool {
        !matches!(self, AguiEvent::Unknown(_))
    }

    /// A `CUSTOM` event.
    pub fn custom(name: impl Into<String>, value: Json) -> AguiEvent {
        AguiEvent::Custom(Custom {
            name: name.into(),
            value,
            ..Custom::default()
        })
    }

    /// A `TEXT_MESSAGE_CONTENT` event.
    pub fn text_content(message_id: impl Into<String>, delta: impl Into<String>) -> AguiEvent {
        AguiEvent::TextMessageContent(TextMessageContent {
            message_id: message_id.into(),
            delta: delta.into(),
            ..TextMessageContent::default()
        })
    }
}

impl Default for AguiEvent {
    /// An empty `CUSTOM` event (a placeholder for struct-update syntax).
    fn default() -> Self {
        AguiEvent::Custom(Custom::default())
    }
}

/// `{"type":"<type_and_key>":<id>,"delta":<delta>}`: a streamed fragment in the serde form
/// of its event (`type`, the id, `delta`: the schema's order).
fn write_delta(out: &mut Vec<u8>, type_and_key: &str, id: &str, delta: &str) {
    out.reserve(type_and_key.len() + id.len() + delta.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(type_and_key.as_bytes());
    out.extend_from_slice(b"\":");
    json_str(out, id);
    out.extend_from_slice(b",\"delta\":");
    json_str(out, delta);
    out.push(b'}');
}

/// A JSON string as serde_json writes it.
fn json_str(out: &mut Vec<u8>, s: &str) {
    // ok: a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}
