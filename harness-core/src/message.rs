//! The message model every protocol shares: messages and their parts, tool calls and results,
//! model requests and responses, usage.
//!
//! The nouns and field names are agentsessions' (`api/types.go`), the richest of the four
//! protocols; the serde form is its proto3-JSON (snake_case names, bytes as base64, unset
//! fields omitted), so a journal record reads the same in both. Adapters map these types to
//! jambonz `reply:chunk`s, AG-UI events or UHP output items.
//!
//! ```
//! use harness_core::message::{Message, Part, Role};
//!
//! let m = Message::user("When are you open?");
//! assert_eq!(m.role, Role::User);
//! assert_eq!(m.text(), "When are you open?");
//! assert_eq!(
//!     serde_json::to_string(&m).unwrap(),
//!     r#"{"role":"user","parts":[{"text":{"text":"When are you open?"}}]}"#
//! );
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object: tool arguments, tool outputs, data parts, schemas.
pub type JsonObject = Map<String, Value>;

/// Who a message is from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The person (or caller) talking to the agent.
    #[default]
    User,
    /// The agent / model.
    Assistant,
    /// Tool results fed back to the model.
    Tool,
    /// A role this version does not know, kept as given.
    Other(String),
}

impl Role {
    /// The wire name (`system`, `user`, `assistant`, `tool`, or the unknown name).
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(s) => s,
        }
    }
}

impl From<&str> for Role {
    fn from(s: &str) -> Self {
        match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Role::from(&*s))
    }
}

/// One message of a conversation: a role and its parts.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Message {
    /// Who it is from.
    #[serde(default)]
    pub role: Role,
    /// What it holds, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
}

impl Message {
    /// A message of `role` with one text part.
    pub fn with_text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::text(text)],
        }
    }

    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self::with_text(Role::System, text)
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::with_text(Role::User, text)
    }

    /// An assistant message with one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::with_text(Role::Assistant, text)
    }

    /// A tool message carrying one tool result: what an agent appends to the conversation
    /// after `sink.tool_call` so the model sees the result on its next call.
    ///
    /// ```
    /// use harness_core::message::{JsonObject, Message, Part, Role, ToolResult};
    ///
    /// let m = Message::tool_result(ToolResult::ok("call_1", JsonObject::new()));
    /// assert_eq!(m.role, Role::Tool);
    /// assert!(matches!(&m.parts[0], Part::ToolResult(r) if r.id == "call_1"));
    /// ```
    pub fn tool_result(result: ToolResult) -> Self {
        Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(result)],
        }
    }

    /// The text of every text part, concatenated.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Part::Text(t) = p {
                out.push_str(&t.text);
            }
        }
        out
    }

    /// The tool calls the message asks for (an assistant message's `tool_call` parts).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

/// One part of a message. Exactly one kind per part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Text.
    Text(TextPart),
    /// A file, inline or by URI.
    File(FilePart),
    /// Structured data.
    Data(DataPart),
    /// Opaque provider reasoning, kept verbatim so it can be replayed (agentsessions I2).
    Reasoning(ReasoningPart),
    /// A tool call the model asked for (in an assistant message).
    ToolCall(ToolCall),
    /// A tool's result fed back to the model (in a `tool` message); its `id` is the call's.
    ToolResult(ToolResult),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text(TextPart { text: text.into() })
    }
}

/// A text part.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
}

/// A file part: inline bytes or a URI.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FilePart {
    /// The media type, e.g. `image/png`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mime: String,
    /// Inline content (base64 in JSON).
    #[serde(
        default,
        with = "crate::proto_json::bytes_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<Vec<u8>>,
    /// Where the content is, when not inline.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// A file name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// A content digest such as `sha256:…`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

/// A structured data part.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct DataPart {
    /// The data.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub data: JsonObject,
}

/// Opaque provider reasoning. Harnesses return it verbatim and never interpret `opaque`.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningPart {
    /// The provider that produced it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// The model that produced it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_id: String,
    /// The provider's opaque reasoning bytes (base64 in JSON).
    #[serde(
        default,
        rename = "opaque_bytes",
        with = "crate::proto_json::bytes_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub opaque: Option<Vec<u8>>,
    /// Where the opaque reasoning is stored, when not inline.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub opaque_uri: String,
    /// A readable summary, when the provider gives one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<Part>,
    /// The provider's item id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    /// Position among the reasoning items of one response.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ordinal: i32,
    /// Where the reasoning is valid (agentsessions: the execution id).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub validity_scope: String,
    /// Digest of the opaque reasoning.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub opaque_digest: String,
}

/// Who runs a tool (agentsessions `api.Mediation`). Serialized with the proto enum names
/// (`MEDIATION_CONTROLLER_MEDIATED`); the Go names (`CONTROLLER_MEDIATED`) are read too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Mediation {
    /// Not set; treated as [`InHarnessReported`](Mediation::InHarnessReported). A tool call
    /// part returned by a model has this value until the harness sets one.
    #[default]
    #[serde(rename = "MEDIATION_UNSPECIFIED")]
    Unspecified,
    /// The harness runs the tool itself and records it with `sink.report`.
    #[serde(
        rename = "MEDIATION_IN_HARNESS_REPORTED",
        alias = "IN_HARNESS_REPORTED"
    )]
    InHarnessReported,
    /// The host runs the tool: `sink.tool_call` blocks for the result.
    #[serde(
        rename = "MEDIATION_CONTROLLER_MEDIATED",
        alias = "CONTROLLER_MEDIATED"
    )]
    ControllerMediated,
    /// The host runs the tool after a human or policy approval.
    #[serde(rename = "MEDIATION_REQUIRES_APPROVAL", alias = "REQUIRES_APPROVAL")]
    RequiresApproval,
}

impl Mediation {
    /// Whether the host, not the harness, runs a tool of this tier.
    pub fn is_host_executed(self) -> bool {
        matches!(
            self,
            Mediation::ControllerMediated | Mediation::RequiresApproval
        )
    }
}

/// A tool call: the model's request (as a part), or the harness's request to the host
/// (`sink.tool_call`), with its mediation tier and idempotency key.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; the result carries the same id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The tool's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub args: JsonObject,
    /// Who runs it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mediation: Mediation,
    /// Chosen by the harness, unique within its session, for any side-effecting tool: the
    /// host dedups a re-driven call on session + key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub idempotency_key: String,
}

impl ToolCall {
    /// A call of `tool` with `args` (not mediated yet, no key).
    pub fn new(id: impl Into<String>, tool: impl Into<String>, args: JsonObject) -> Self {
        ToolCall {
            id: id.into(),
            tool: tool.into(),
            args,
            ..Default::default()
        }
    }

    /// Sets the mediation tier.
    #[must_use]
    pub fn with_mediation(mut self, mediation: Mediation) -> Self {
        self.mediation = mediation;
        self
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = key.into();
        self
    }

    /// Asks the host to run this call: [`Mediation::ControllerMediated`], with the
    /// idempotency key `<execution_id>:<call id>` (the call id alone when `execution_id` is
    /// empty, as in a unit test), unique within the session.
    ///
    /// This is what `sink.tool_call` needs on every host: the agentsessions controller (and
    /// [`RecordingSink`](crate::testing::RecordingSink)) reject an unmediated call or one
    /// without a key. Pass [`Start::execution_id`](crate::Start::execution_id). A model's tool
    /// call part comes unmediated and without a key: set them on a copy, as
    /// [`ToolLoopAgent`](crate::agent::ToolLoopAgent) does.
    ///
    /// ```
    /// use harness_core::message::{JsonObject, Mediation, ToolCall};
    ///
    /// let call = ToolCall::new("call_1", "get_weather", JsonObject::new()).controller_mediated("x1");
    /// assert_eq!(call.mediation, Mediation::ControllerMediated);
    /// assert_eq!(call.idempotency_key, "x1:call_1");
    /// ```
    #[must_use]
    pub fn controller_mediated(self, execution_id: &str) -> Self {
        let key = if execution_id.is_empty() {
            self.id.clone()
        } else {
            format!("{execution_id}:{}", self.id)
        };
        self.with_mediation(Mediation::ControllerMediated)
            .with_idempotency_key(key)
    }
}

/// Why a tool result is what it is, beyond `is_error` (agentsessions `ToolResult.Code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolResultCode {
    /// Nothing special.
    #[default]
    #[serde(rename = "CODE_UNSPECIFIED")]
    Unspecified,
    /// The approval gate denied the call; the tool never ran.
    ApprovalDenied,
    /// The executor failed.
    ExecutorError,
}

/// A tool's result.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The output, as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<JsonObject>,
    /// Where a large output is stored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_uri: String,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_error: bool,
    /// The failure, when `is_error`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Digest of the output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_digest: String,
    /// Rich content of the result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Part>,
    /// Why, beyond `is_error`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub code: ToolResultCode,
    /// Journal seq of the approval request, for an approval-gated call.
    #[serde(
        default,
        with = "crate::proto_json::int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub approval_request_seq: i64,
    /// Journal seq of the approval decision, for an approval-gated call.
    #[serde(
        default,
        with = "crate::proto_json::int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub approval_decision_seq: i64,
}

impl ToolResult {
    /// A successful result with an output object.
    pub fn ok(id: impl Into<String>, output: JsonObject) -> Self {
        ToolResult {
            id: id.into(),
            output: Some(output),
            ..Default::default()
        }
    }

    /// A successful result from any JSON value: an object is the output, any other value is
    /// wrapped as `{"result": value}` (as harness-jambonz reads a `tool:result`).
    ///
    /// ```
    /// use harness_core::message::ToolResult;
    /// use serde_json::json;
    ///
    /// let r = ToolResult::ok_json("call_1", json!({"forecast": "sunny"}));
    /// assert_eq!(r.output.unwrap()["forecast"], "sunny");
    /// let r = ToolResult::ok_json("call_2", json!(21));
    /// assert_eq!(r.output.unwrap()["result"], 21);
    /// ```
    pub fn ok_json(id: impl Into<String>, output: Value) -> Self {
        let output = match output {
            Value::Object(m) => m,
            other => {
                let mut m = JsonObject::new();
                m.insert("result".into(), other);
                m
            }
        };
        Self::ok(id, output)
    }

    /// A failed result.
    pub fn error(id: impl Into<String>, error: impl Into<String>) -> Self {
        ToolResult {
            id: id.into(),
            is_error: true,
            error: error.into(),
            ..Default::default()
        }
    }

    /// The result of a gated call whose approval was denied: the tool never ran. It is an
    /// error result with the code [`ToolResultCode::ApprovalDenied`] and the message
    /// `approval denied: <reason>` (`approval denied` when there is no reason), the same on
    /// every host, so an agent can tell the person what happened.
    ///
    /// ```
    /// use harness_core::message::{ToolResult, ToolResultCode};
    ///
    /// let r = ToolResult::denied("call_1", "not approved by the caller");
    /// assert!(r.is_error && r.output.is_none());
    /// assert_eq!(r.code, ToolResultCode::ApprovalDenied);
    /// assert_eq!(r.error, "approval denied: not approved by the caller");
    /// ```
    pub fn denied(id: impl Into<String>, reason: &str) -> Self {
        let error = if reason.is_empty() {
            "approval denied".to_owned()
        } else {
            format!("approval denied: {reason}")
        };
        ToolResult::error(id, error).with_code(ToolResultCode::ApprovalDenied)
    }

    /// Whether this is the result of a denied approval (the tool never ran).
    pub fn is_denied(&self) -> bool {
        self.code == ToolResultCode::ApprovalDenied
    }

    /// Sets the code.
    #[must_use]
    pub fn with_code(mut self, code: ToolResultCode) -> Self {
        self.code = code;
        self
    }
}

/// A tool the harness declares in its [`Descriptor`](crate::Descriptor).
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Who runs it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mediation: Mediation,
}

/// A tool offered to the model in a [`ModelRequest`].
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<JsonObject>,
}

impl ToolDefinition {
    /// A definition with a name and a description, and no schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema: None,
        }
    }
}

/// How the model may use the offered tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolChoiceMode {
    /// Not set.
    #[default]
    #[serde(rename = "MODE_UNSPECIFIED")]
    Unspecified,
    /// The model decides.
    #[serde(rename = "MODE_AUTO")]
    Auto,
    /// No tool calls.
    #[serde(rename = "MODE_NONE")]
    None,
    /// The model must call a tool (the named one, when `name` is set).
    #[serde(rename = "MODE_REQUIRED")]
    Required,
}

/// The tool choice of a [`ModelRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolChoice {
    /// The mode.
    #[serde(default)]
    pub mode: ToolChoiceMode,
    /// The tool that must be called (only with [`ToolChoiceMode::Required`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A request to a model, mediated by the host (`sink.model`).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model id (may be empty: the host's default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The conversation to complete.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Provider parameters, as strings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// How it may call them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

impl ModelRequest {
    /// A request of `messages` to the host's default model.
    pub fn new(messages: Vec<Message>) -> Self {
        ModelRequest {
            messages,
            ..Default::default()
        }
    }

    /// Sets the model id.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Offers tools to the model.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// The text of the last user message, if any (what most simple agents answer).
    pub fn last_user_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(Message::text)
    }
}

/// A model's completion.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The assistant message: text, reasoning and tool call parts.
    #[serde(default)]
    pub message: Message,
    /// What it cost.
    #[serde(default)]
    pub usage: Usage,
}

/// Token accounting. Counts are int64 in proto3-JSON, so they serialize as strings
/// (`"input_tokens":"12"`); numbers are read too.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// The model it is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Prompt tokens.
    #[serde(
        default,
        with = "crate::proto_json::uint64",
        skip_serializing_if = "is_zero_u64"
    )]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(
        default,
        with = "crate::proto_json::uint64",
        skip_serializing_if = "is_zero_u64"
    )]
    pub output_tokens: u64,
    /// Reasoning tokens (part of or in addition to output, as the provider counts them).
    #[serde(
        default,
        with = "crate::proto_json::uint64",
        skip_serializing_if = "is_zero_u64"
    )]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Adds another usage to this one (saturating).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        if self.model.is_empty() {
            self.model.clone_from(&other.model);
        }
    }
}

pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
pub(crate) fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
