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

/// The proto3-JSON shape of an Event: every oneof member as an optional field.
#[derive(Deserialize, Default)]
struct EventWire {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    execution_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ts: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    schema_version: i32,
    kind: Option<EventKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<ModelCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<ToolResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval_result: Option<ApprovalResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifecycle: Option<Lifecycle>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<HarnessEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    execution_start: Option<ExecutionStart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor: Option<IdentityRef>,
}

/// The serializing twin of [`EventWire`], borrowing the body instead of cloning it.
#[derive(Serialize, Default)]
struct EventWireRef<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    execution_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<Timestamp>,
    #[serde(skip_serializing_if = "is_zero_i32")]
    schema_version: i32,
    kind: Option<EventKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a ModelCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a ToolResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<&'a ApprovalRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_result: Option<&'a ApprovalResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<&'a Lifecycle>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<&'a HarnessEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution_start: Option<&'a ExecutionStart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<&'a IdentityRef>,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = EventWireRef {
            execution_id: &self.execution_id,
            ts: self.timestamp,
            schema_version: self.schema_version,
            kind: Some(self.kind()),
            actor: self.actor.as_ref(),
            ..EventWireRef::default()
        };
        match &self.body {
            EventBody::Input(m) | EventBody::Output(m) => w.message = Some(m),
            EventBody::ModelCall(b) => w.model = Some(b),
            EventBody::ToolCall(b) => w.tool = Some(b),
            EventBody::ToolResult(b) => w.result = Some(b),
            EventBody::ApprovalRequest(b) => w.approval = Some(b),
            EventBody::ApprovalResult(b) => w.approval_result = Some(b),
            EventBody::Usage(b) => w.usage = Some(b),
            EventBody::Lifecycle(b) => w.lifecycle = Some(b),
            EventBody::End(b) => w.end = Some(b),
            EventBody::Error(b) => w.error = Some(b),
            EventBody::ExecutionStart(b) => w.execution_start = Some(b),
        }
        w.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let w = EventWire::deserialize(d)?;
        let kind = w
            .kind
            .ok_or_else(|| D::Error::custom("event without a kind"))?;
        let body = match kind {
            EventKind::Input => EventBody::Input(w.message.unwrap_or_default()),
            EventKind::Output => EventBody::Output(w.message.unwrap_or_default()),
            EventKind::ModelCall => EventBody::ModelCall(w.model.unwrap_or_default()),
            EventKind::ToolCall => EventBody::ToolCall(w.tool.unwrap_or_default()),
            EventKind::ToolResult => EventBody::ToolResult(w.result.unwrap_or_default()),
            EventKind::ApprovalRequest => {
                EventBody::ApprovalRequest(w.approval.unwrap_or_default())
            }
            EventKind::ApprovalResult => {
                EventBody::ApprovalResult(w.approval_result.unwrap_or_default())
            }
            EventKind::Usage => EventBody::Usage(w.usage.unwrap_or_default()),
            EventKind::Lifecycle => EventBody::Lifecycle(w.lifecycle.unwrap_or_default()),
            EventKind::End => EventBody::End(w.end.unwrap_or_default()),
            EventKind::Error => EventBody::Error(w.error.unwrap_or_default()),
            EventKind::ExecutionStart => {
                EventBody::ExecutionStart(w.execution_start.unwrap_or_default())
            }
        };
        Ok(Event {
            execution_id: w.execution_id,
            timestamp: w.ts,
            schema_version: w.schema_version,
            actor: w.actor,
            body,
        })
    }
}
