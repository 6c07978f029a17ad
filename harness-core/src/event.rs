//! Journal events: what a turn did, as agentsessions records it and as a harness sees it in
//! [`Start::history`](crate::Start::history).
//!
//! An [`Event`] serializes as agentsessions' proto3-JSON of `agentsessions.v1.Event`
//! (snake_case names, the kind as its enum name, the body under its oneof field name, unset
//! fields omitted, int64 as strings), which is the form its hash chain is computed over.
//!
//! ```
//! use harness_core::event::{Event, EventBody, EventKind};
//! use harness_core::message::Message;
//!
//! let ev = Event::new("exec-1", EventBody::Output(Message::assistant("hello")));
//! assert_eq!(ev.kind(), EventKind::Output);
//! assert_eq!(
//!     serde_json::to_string(&ev).unwrap(),
//!     r#"{"execution_id":"exec-1","kind":"EVENT_OUTPUT","message":{"role":"assistant","parts":[{"text":{"text":"hello"}}]}}"#
//! );
//! let back: Event = serde_json::from_str(&serde_json::to_string(&ev).unwrap()).unwrap();
//! assert_eq!(back, ev);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::{
    Message, ModelRequest, ToolCall, ToolChoice, ToolDefinition, ToolResult, Usage, is_default,
    is_false, is_zero_i64,
};
use crate::proto_json::Timestamp;

/// The kind of a journal event (agentsessions `EventKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EventKind {
    /// An invocation input (host, one per input).
    #[serde(rename = "EVENT_INPUT")]
    Input,
    /// A model call, recorded before the provider is invoked.
    #[serde(rename = "EVENT_MODEL_CALL")]
    ModelCall,
    /// Assistant output: a model completion or text from `sink.output`.
    #[serde(rename = "EVENT_OUTPUT")]
    Output,
    /// A tool call intent, recorded before the executor runs.
    #[serde(rename = "EVENT_TOOL_CALL")]
    ToolCall,
    /// A tool result: the executor's receipt or a harness `sink.report`.
    #[serde(rename = "EVENT_TOOL_RESULT")]
    ToolResult,
    /// An approval gate opened for a tool call.
    #[serde(rename = "EVENT_APPROVAL_REQUEST")]
    ApprovalRequest,
    /// An approval decision.
    #[serde(rename = "EVENT_APPROVAL_RESULT")]
    ApprovalResult,
    /// Token accounting.
    #[serde(rename = "EVENT_USAGE")]
    Usage,
    /// A session lifecycle change (suspend, resume, fork, baseline, cancel).
    #[serde(rename = "EVENT_LIFECYCLE")]
    Lifecycle,
    /// The turn completed.
    #[serde(rename = "EVENT_END")]
    End,
    /// The turn failed (audit only: skipped on replay).
    #[serde(rename = "EVENT_ERROR")]
    Error,
    /// The first record of an execution: its config, cursor, input count and harness.
    #[serde(rename = "EVENT_EXECUTION_START")]
    ExecutionStart,
    /// A kind this version does not know (its name is in [`EventBody::Unknown`]).
    #[serde(other, rename = "EVENT_KIND_UNSPECIFIED")]
    Unknown,
}

impl EventKind {
    /// The Go `api.EventKind` name (`INPUT`, `MODEL_CALL`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Input => "INPUT",
            EventKind::ModelCall => "MODEL_CALL",
            EventKind::Output => "OUTPUT",
            EventKind::ToolCall => "TOOL_CALL",
            EventKind::ToolResult => "TOOL_RESULT",
            EventKind::ApprovalRequest => "APPROVAL_REQUEST",
            EventKind::ApprovalResult => "APPROVAL_RESULT",
            EventKind::Usage => "USAGE",
            EventKind::Lifecycle => "LIFECYCLE",
            EventKind::End => "END",
            EventKind::Error => "ERROR",
            EventKind::ExecutionStart => "EXECUTION_START",
            EventKind::Unknown => "UNKNOWN",
        }
    }
}

/// Who caused an event.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IdentityRef {
    /// The principal, e.g. `agent://a`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub principal: String,
    /// Who issued the identity.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    /// The subject.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
}

/// A model call as journaled: the model, the request's input hash (I0) and the call id.
/// `messages`, `tools` and `tool_choice` travel on the wire to the host but are stripped
/// before the call is journaled.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelCall {
    /// The model id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Provider parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// Hash of the model request (checked on replay and resume: I0).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub input_hash: String,
    /// The call id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The conversation (wire only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<crate::message::Message>,
    /// The tools offered (wire only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// The tool choice (wire only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

impl ModelCall {
    /// The journaled form of a call of `req`: model and params, with the given hash and id.
    pub fn journaled(req: &ModelRequest, input_hash: String, id: String) -> Self {
        ModelCall {
            model: req.model.clone(),
            params: BTreeMap::new(),
            input_hash,
            id,
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: None,
        }
    }
}

/// An approval gate opened for a tool call.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The gated call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_call_id: String,
    /// Why approval is needed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// An approval decision.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApprovalResult {
    /// The gated call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_call_id: String,
    /// Approved or denied.
    #[serde(default, skip_serializing_if = "is_false")]
    pub approved: bool,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Seq of the APPROVAL_REQUEST it answers.
    #[serde(
        default,
        with = "crate::proto_json::int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub request_seq: i64,
}

/// The kind of a lifecycle change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum LifecycleKind {
    /// Not set.
    #[default]
    #[serde(rename = "LIFECYCLE_UNSPECIFIED")]
    Unspecified,
    /// The session was suspended (snapshot fields set).
    #[serde(rename = "LIFECYCLE_SUSPEND")]
    Suspend,
    /// The session was resumed.
    #[serde(rename = "LIFECYCLE_RESUME")]
    Resume,
    /// This session was forked from a parent (detail `parent@<seq>`).
    #[serde(rename = "LIFECYCLE_FORK")]
    Fork,
    /// A baseline.
    #[serde(rename = "LIFECYCLE_BASELINE")]
    Baseline,
    /// The session was cancelled.
    #[serde(rename = "LIFECYCLE_CANCEL")]
    Cancel,
}

/// A session lifecycle change.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Lifecycle {
    /// What happened.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kind: LifecycleKind,
    /// Detail, e.g. `parent@12` on a fork.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Local snapshot location (suspend).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snapshot_local: String,
    /// External snapshot URI (suspend).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snapshot_external_uri: String,
    /// Whether memory was snapshotted (suspend).
    #[serde(default, skip_serializing_if = "is_false")]
    pub snapshot_memory: bool,
    /// Whether the snapshot is sealed (suspend).
    #[serde(default, skip_serializing_if = "is_false")]
    pub snapshot_sealed: bool,
}

/// An error, with a gRPC status code.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// gRPC status code (0 when not set).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub code: i32,
    /// What went wrong (fixed diagnostics; never secrets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// The end of a turn.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HarnessEnd {
    /// `COMPLETED`, `FAILED` or `CANCELED`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The failure, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
}

impl HarnessEnd {
    /// `END{state: "COMPLETED"}`.
    pub fn completed() -> Self {
        HarnessEnd {
            state: "COMPLETED".into(),
            error: None,
        }
    }
}

/// The first record of an execution (host-owned).
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecutionStart {
    /// The opaque per-execution config, journaled verbatim (base64 in JSON).
    #[serde(
        default,
        with = "crate::proto_json::bytes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub config: Vec<u8>,
    /// The harness cursor (not the append CAS cursor).
    #[serde(
        default,
        with = "crate::proto_json::int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub resume_from_seq: i64,
    /// How many INPUT records the execution has (explicit zero for an inputless one).
    #[serde(
        default,
        with = "crate::proto_json::int64_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_count: Option<i64>,
    /// The host's resolved registry name of the harness.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness: String,
    /// The version the harness advertised (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness_version: String,
}

/// The body of an event; its variant is the event's kind.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EventBody {
    /// `INPUT`: one invocation input.
    Input(Message),
    /// `MODEL_CALL`.
    ModelCall(ModelCall),
    /// `OUTPUT`.
    Output(Message),
    /// `TOOL_CALL`: the intent.
    ToolCall(ToolCall),
    /// `TOOL_RESULT`.
    ToolResult(ToolResult),
    /// `APPROVAL_REQUEST`.
    ApprovalRequest(ApprovalRequest),
    /// `APPROVAL_RESULT`.
    ApprovalResult(ApprovalResult),
    /// `USAGE`.
    Usage(Usage),
    /// `LIFECYCLE`.
    Lifecycle(Lifecycle),
    /// `END`.
    End(HarnessEnd),
    /// `ERROR`.
    Error(ErrorInfo),
    /// `EXECUTION_START`.
    ExecutionStart(ExecutionStart),
    /// An event of a kind this version does not know, kept rather than dropped so that a
    /// journal written by a newer peer stays readable and re-serializes unchanged.
    Unknown {
        /// The kind's wire name, e.g. `EVENT_SNAPSHOT`.
        kind: String,
        /// Every member of the event but the envelope's (`execution_id`, `ts`,
        /// `schema_version`, `kind`, `actor`), as JSON.
        fields: serde_json::Map<String, serde_json::Value>,
    },
}

impl EventBody {
    /// The kind this body makes.
    pub fn kind(&self) -> EventKind {
        match self {
            EventBody::Input(_) => EventKind::Input,
            EventBody::ModelCall(_) => EventKind::ModelCall,
            EventBody::Output(_) => EventKind::Output,
            EventBody::ToolCall(_) => EventKind::ToolCall,
            EventBody::ToolResult(_) => EventKind::ToolResult,
            EventBody::ApprovalRequest(_) => EventKind::ApprovalRequest,
            EventBody::ApprovalResult(_) => EventKind::ApprovalResult,
            EventBody::Usage(_) => EventKind::Usage,
            EventBody::Lifecycle(_) => EventKind::Lifecycle,
            EventBody::End(_) => EventKind::End,
            EventBody::Error(_) => EventKind::Error,
            EventBody::ExecutionStart(_) => EventKind::ExecutionStart,
            EventBody::Unknown { .. } => EventKind::Unknown,
        }
    }
}

/// One journal event (agentsessions `Event`, without the record's seq and hashes).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The execution (turn) it belongs to; empty for session-scoped events.
    pub execution_id: String,
    /// When it was recorded (passed in by the application; never read from a clock here).
    pub timestamp: Option<Timestamp>,
    /// Schema version (0 when not set).
    pub schema_version: i32,
    /// Who caused it.
    pub actor: Option<IdentityRef>,
    /// What happened.
    pub body: EventBody,
}

impl Event {
    /// An event of an execution, with no timestamp, schema version or actor.
    pub fn new(execution_id: impl Into<String>, body: EventBody) -> Self {
        Event {
            execution_id: execution_id.into(),
            timestamp: None,
            schema_version: 0,
            actor: None,
            body,
        }
    }

    /// Sets the timestamp.
    #[must_use]
    pub fn at(mut self, ts: Timestamp) -> Self {
        self.timestamp = Some(ts);
        self
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        self.body.kind()
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        if !self.execution_id.is_empty() {
            m.serialize_entry("execution_id", &self.execution_id)?;
        }
        if let Some(ts) = &self.timestamp {
            m.serialize_entry("ts", ts)?;
        }
        if self.schema_version != 0 {
            m.serialize_entry("schema_version", &self.schema_version)?;
        }
        match &self.body {
            EventBody::Unknown { kind, fields } => {
                m.serialize_entry("kind", kind)?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
            }
            body => {
                m.serialize_entry("kind", &body.kind())?;
                match body {
                    EventBody::Input(b) | EventBody::Output(b) => {
                        m.serialize_entry("message", b)?
                    }
                    EventBody::ModelCall(b) => m.serialize_entry("model", b)?,
                    EventBody::ToolCall(b) => m.serialize_entry("tool", b)?,
                    EventBody::ToolResult(b) => m.serialize_entry("result", b)?,
                    EventBody::ApprovalRequest(b) => m.serialize_entry("approval", b)?,
                    EventBody::ApprovalResult(b) => m.serialize_entry("approval_result", b)?,
                    EventBody::Usage(b) => m.serialize_entry("usage", b)?,
                    EventBody::Lifecycle(b) => m.serialize_entry("lifecycle", b)?,
                    EventBody::End(b) => m.serialize_entry("end", b)?,
                    EventBody::Error(b) => m.serialize_entry("error", b)?,
                    EventBody::ExecutionStart(b) => m.serialize_entry("execution_start", b)?,
                    EventBody::Unknown { .. } => {}
                }
            }
        }
        if let Some(actor) = &self.actor {
            m.serialize_entry("actor", actor)?;
        }
        m.end()
    }
}

/// The fields of an Event as they are read: every oneof member as an optional slot, and
/// the keys this version does not know, kept for an event of an unknown kind.
#[derive(Default)]
struct EventFields {
    execution_id: String,
    ts: Option<Timestamp>,
    schema_version: i32,
    kind: Option<String>,
    message: Option<Message>,
    model: Option<ModelCall>,
    tool: Option<ToolCall>,
    result: Option<ToolResult>,
    approval: Option<ApprovalRequest>,
    approval_result: Option<ApprovalResult>,
    usage: Option<Usage>,
    lifecycle: Option<Lifecycle>,
    end: Option<HarnessEnd>,
    error: Option<ErrorInfo>,
    execution_start: Option<ExecutionStart>,
    actor: Option<IdentityRef>,
    unknown: serde_json::Map<String, serde_json::Value>,
}

/// An enum member as proto3-JSON allows it: its name, or its number.
struct KindName(String);

impl<'de> Deserialize<'de> for KindName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KindName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an EventKind name or number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<KindName, E> {
                Ok(KindName(v.to_owned()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<KindName, E> {
                const NAMES: [&str; 13] = [
                    "EVENT_KIND_UNSPECIFIED",
                    "EVENT_INPUT",
                    "EVENT_MODEL_CALL",
                    "EVENT_OUTPUT",
                    "EVENT_TOOL_CALL",
                    "EVENT_TOOL_RESULT",
                    "EVENT_APPROVAL_REQUEST",
                    "EVENT_APPROVAL_RESULT",
                    "EVENT_USAGE",
                    "EVENT_LIFECYCLE",
                    "EVENT_END",
                    "EVENT_ERROR",
                    "EVENT_EXECUTION_START",
                ];
                Ok(KindName(
                    match usize::try_from(v).ok().and_then(|i| NAMES.get(i)) {
                        Some(name) => (*name).to_owned(),
                        None => v.to_string(),
                    },
                ))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<KindName, E> {
                match u64::try_from(v) {
                    Ok(u) => self.visit_u64(u),
                    Err(_) => Ok(KindName(v.to_string())),
                }
            }
        }
        d.deserialize_any(V)
    }
}

struct EventVisitor;

impl<'de> serde::de::Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an agentsessions Event as proto3-JSON")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        use serde::de::Error as _;
        let mut f = EventFields::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            // A null member is an unset member (proto3-JSON).
            match &*key {
                "execution_id" => {
                    f.execution_id = map.next_value::<Option<_>>()?.unwrap_or_default()
                }
                "ts" => f.ts = map.next_value()?,
                "schema_version" => {
                    f.schema_version = map.next_value::<Option<_>>()?.unwrap_or_default()
                }
                "kind" => f.kind = map.next_value::<Option<KindName>>()?.map(|k| k.0),
                "message" => f.message = map.next_value()?,
                "model" => f.model = map.next_value()?,
                "tool" => f.tool = map.next_value()?,
                "result" => f.result = map.next_value()?,
                "approval" => f.approval = map.next_value()?,
                "approval_result" => f.approval_result = map.next_value()?,
                "usage" => f.usage = map.next_value()?,
                "lifecycle" => f.lifecycle = map.next_value()?,
                "end" => f.end = map.next_value()?,
                "error" => f.error = map.next_value()?,
                "execution_start" => f.execution_start = map.next_value()?,
                "actor" => f.actor = map.next_value()?,
                _ => {
                    let v: serde_json::Value = map.next_value()?;
                    f.unknown.insert(key.into_owned(), v);
                }
            }
        }
        let kind = f
            .kind
            .ok_or_else(|| A::Error::custom("event without a kind"))?;
        let body = match kind.as_str() {
            "EVENT_INPUT" => EventBody::Input(f.message.unwrap_or_default()),
            "EVENT_OUTPUT" => EventBody::Output(f.message.unwrap_or_default()),
            "EVENT_MODEL_CALL" => EventBody::ModelCall(f.model.unwrap_or_default()),
            "EVENT_TOOL_CALL" => EventBody::ToolCall(f.tool.unwrap_or_default()),
            "EVENT_TOOL_RESULT" => EventBody::ToolResult(f.result.unwrap_or_default()),
            "EVENT_APPROVAL_REQUEST" => EventBody::ApprovalRequest(f.approval.unwrap_or_default()),
            "EVENT_APPROVAL_RESULT" => {
                EventBody::ApprovalResult(f.approval_result.unwrap_or_default())
            }
            "EVENT_USAGE" => EventBody::Usage(f.usage.unwrap_or_default()),
            "EVENT_LIFECYCLE" => EventBody::Lifecycle(f.lifecycle.unwrap_or_default()),
            "EVENT_END" => EventBody::End(f.end.unwrap_or_default()),
            "EVENT_ERROR" => EventBody::Error(f.error.unwrap_or_default()),
            "EVENT_EXECUTION_START" => {
                EventBody::ExecutionStart(f.execution_start.unwrap_or_default())
            }
            _ => {
                // A kind this version does not know: keep every member but the envelope's,
                // so the event re-serializes as it came (and hashes the same).
                let mut fields = f.unknown;
                let known = [
                    ("message", f.message.map(serde_json::to_value)),
                    ("model", f.model.map(serde_json::to_value)),
                    ("tool", f.tool.map(serde_json::to_value)),
                    ("result", f.result.map(serde_json::to_value)),
                    ("approval", f.approval.map(serde_json::to_value)),
                    (
                        "approval_result",
                        f.approval_result.map(serde_json::to_value),
                    ),
                    ("usage", f.usage.map(serde_json::to_value)),
                    ("lifecycle", f.lifecycle.map(serde_json::to_value)),
                    ("end", f.end.map(serde_json::to_value)),
                    ("error", f.error.map(serde_json::to_value)),
                    (
                        "execution_start",
                        f.execution_start.map(serde_json::to_value),
                    ),
                ];
                for (name, v) in known {
                    if let Some(v) = v {
                        fields.insert(name.to_owned(), v.map_err(A::Error::custom)?);
                    }
                }
                EventBody::Unknown { kind, fields }
            }
        };
        Ok(Event {
            execution_id: f.execution_id,
            timestamp: f.ts,
            schema_version: f.schema_version,
            actor: f.actor,
            body,
        })
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}
