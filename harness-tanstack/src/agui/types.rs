//! The shared AG-UI 1.0 types: messages by role, content parts and their sources, tool calls,
//! JSON Patch operations, token usage, interrupts, run outcomes and `RunAgentInput`.
//!
//! Field names, required/optional and key order follow `@ag-ui/core@1.0.0`'s zod schemas
//! (the stricter of the two reference libraries); every object is open.

use std::fmt;

use harness_core::{wire_struct, wire_union};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::Json;

/// The roles a streamed text message may take (`TEXT_MESSAGE_START.role`). Not `tool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextMessageRole {
    /// `developer`
    Developer,
    /// `system`
    System,
    /// `assistant` (what an absent role means)
    Assistant,
    /// `user`
    User,
}

/// The literal role `tool` (`TOOL_CALL_RESULT.role`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// `tool`
    #[default]
    Tool,
}

/// The literal role `reasoning` (`REASONING_MESSAGE_START.role`, required).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// `reasoning`
    #[default]
    Reasoning,
}

/// What a `REASONING_ENCRYPTED_VALUE` is attached to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EncryptedValueSubtype {
    /// `tool-call`
    #[default]
    #[serde(rename = "tool-call")]
    ToolCall,
    /// `message`
    #[serde(rename = "message")]
    Message,
}

/// How an interrupt was resumed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// `resolved`
    #[default]
    Resolved,
    /// `cancelled`
    Cancelled,
}

wire_struct! {
    /// Bytes carried inline.
    pub struct DataSource [tag "type" = "data" @ 0] {
        /// The bytes (base64).
        req value: String = "value",
        /// Their media type.
        req mime_type: String = "mimeType",
    }
}

wire_struct! {
    /// Bytes referenced by URL.
    pub struct UrlSource [tag "type" = "url" @ 0] {
        /// The URL.
        req value: String = "value",
        /// Their media type.
        opt mime_type: String = "mimeType",
    }
}

wire_struct! {
    /// Bytes already at the provider, named by its handle.
    pub struct FileSource [tag "type" = "file" @ 0] {
        /// The handle.
        req value: String = "value",
        /// The provider that minted it.
        opt provider: String = "provider",
        /// Their media type.
        opt mime_type: String = "mimeType",
    }
}

wire_union! {
    /// Where a media part's bytes come from.
    pub enum PartSource ["type"] {
        /// `data`
        Data(DataSource) = "data",
        /// `url`
        Url(UrlSource) = "url",
        /// `file`
        File(FileSource) = "file",
    }
}

impl Default for PartSource {
    fn default() -> Self {
        PartSource::Url(UrlSource::default())
    }
}

wire_struct! {
    /// A text part (AG-UI `TextPart`).
    pub struct AguiTextPart [tag "type" = "text" @ 0] {
        /// An id.
        opt id: String = "id",
        /// The text.
        req text: String = "text",
        /// Extra information (any JSON but `null`).
        opt_nn metadata: Json = "metadata",
    }
}

wire_union! {
    /// One part of a message body.
    pub enum ContentPart ["type"] {
        /// `text`
        Text(AguiTextPart) = "text",
        /// `image`
        Image(ImagePart) = "image",
        /// `audio`
        Audio(AudioPart) = "audio",
        /// `video`
        Video(VideoPart) = "video",
        /// `document`
        Document(DocumentPart) = "document",
    }
}

macro_rules! media_part {
    ($(#[$m:meta])* $name:ident = $lit:literal) => {
        wire_struct! {
            $(#[$m])*
            pub struct $name [tag "type" = $lit @ 0] {
                /// An id.
                opt id: String = "id",
                /// Where its bytes are.
                req source: PartSource = "source",
                /// Extra information (any JSON but `null`).
                opt_nn metadata: Json = "metadata",
            }
        }
    };
}
media_part!(
    /// An image part.
    ImagePart = "image"
);
media_part!(
    /// An audio part.
    AudioPart = "audio"
);
media_part!(
    /// A video part.
    VideoPart = "video"
);
media_part!(
    /// A document part.
    DocumentPart = "document"
);

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text(AguiTextPart {
            text: text.into(),
            ..AguiTextPart::default()
        })
    }
}

/// A message body: a string, or a list of parts.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<ContentPart>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text: the string, or the text parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Content::Text(s.to_owned())
    }
}

impl From<String> for Content {
    fn from(s: String) -> Self {
        Content::Text(s)
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Text(t) => s.serialize_str(t),
            Content::Parts(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element::<ContentPart>()? {
                    parts.push(p);
                }
                Ok(Content::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

wire_struct! {
    /// The name and arguments of a tool call.
    pub struct FunctionCall {
        /// The tool's name.
        req name: String = "name",
        /// The arguments, as JSON text.
        req arguments: String = "arguments",
    }
}

wire_struct! {
    /// A call an assistant message made (AG-UI `ToolCall`; `type` is always `function`).
    pub struct AguiToolCall [tag "type" = "function" @ 1] {
        /// The call id.
        req id: String = "id",
        /// The function and its arguments.
        req function: FunctionCall = "function",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// Instructions from the application developer.
    pub struct DeveloperMessage [tag "role" = "developer" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// A name.
        opt name: String = "name",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
        /// The text.
        req content: String = "content",
    }
}

wire_struct! {
    /// Instructions from the system.
    pub struct SystemMessage [tag "role" = "system" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// A name.
        opt name: String = "name",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
        /// The text.
        req content: String = "content",
    }
}

wire_struct! {
    /// What the assistant said and the tools it called.
    pub struct AssistantMessage [tag "role" = "assistant" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// A name.
        opt name: String = "name",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// The text.
        opt content: String = "content",
        /// The tool calls.
        opt tool_calls: Vec<AguiToolCall> = "toolCalls",
    }
}

wire_struct! {
    /// What the user said.
    pub struct UserMessage [tag "role" = "user" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// A name.
        opt name: String = "name",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// The text or parts.
        req content: Content = "content",
    }
}

wire_struct! {
    /// What a tool returned.
    pub struct ToolMessage [tag "role" = "tool" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// The text or parts.
        req content: Content = "content",
        /// The call it answers.
        req tool_call_id: String = "toolCallId",
        /// Why the tool failed.
        opt error: String = "error",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// A structured activity shown in the transcript.
    pub struct ActivityMessage [tag "role" = "activity" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// The kind of activity.
        req activity_type: String = "activityType",
        /// Its content (an object).
        req_obj content: Json = "content",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// Reasoning kept in the transcript.
    pub struct ReasoningMessage [tag "role" = "reasoning" @ 2] {
        /// The subagent run that made it.
        opt subagent_run_id: String = "subagentRunId",
        /// The message id.
        req id: String = "id",
        /// The reasoning text.
        req content: String = "content",
        /// Provider-encrypted state.
        opt encrypted_value: String = "encryptedValue",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_union! {
    /// A message (AG-UI `Message`), keyed on its `role`.
    pub enum AguiMessage ["role"] {
        /// `developer`
        Developer(DeveloperMessage) = "developer",
        /// `system`
        System(SystemMessage) = "system",
        /// `assistant`
        Assistant(AssistantMessage) = "assistant",
        /// `user`
        User(UserMessage) = "user",
        /// `tool`
        Tool(ToolMessage) = "tool",
        /// `activity`
        Activity(ActivityMessage) = "activity",
        /// `reasoning`
        Reasoning(ReasoningMessage) = "reasoning",
    }
}

impl AguiMessage {
    /// A user message with text.
    pub fn user(id: impl Into<String>, text: impl Into<String>) -> Self {
        AguiMessage::User(UserMessage {
            id: id.into(),
            content: Content::Text(text.into()),
            ..UserMessage::default()
        })
    }

    /// An assistant message with text.
    pub fn assistant(id: impl Into<String>, text: impl Into<String>) -> Self {
        AguiMessage::Assistant(AssistantMessage {
            id: id.into(),
            content: Some(text.into()),
            ..AssistantMessage::default()
        })
    }

    /// The message id.
    pub fn id(&self) -> &str {
        match self {
            AguiMessage::Developer(m) => &m.id,
            AguiMessage::System(m) => &m.id,
            AguiMessage::Assistant(m) => &m.id,
            AguiMessage::User(m) => &m.id,
            AguiMessage::Tool(m) => &m.id,
            AguiMessage::Activity(m) => &m.id,
            AguiMessage::Reasoning(m) => &m.id,
        }
    }

    /// The text of the message (empty for an activity).
    pub fn text(&self) -> String {
        match self {
            AguiMessage::Developer(m) => m.content.clone(),
            AguiMessage::System(m) => m.content.clone(),
            AguiMessage::Assistant(m) => m.content.clone().unwrap_or_default(),
            AguiMessage::User(m) => m.content.text(),
            AguiMessage::Tool(m) => m.content.text(),
            AguiMessage::Activity(_) => String::new(),
            AguiMessage::Reasoning(m) => m.content.clone(),
        }
    }
}

macro_rules! patch_op {
    ($(#[$m:meta])* $name:ident = $lit:literal { $($body:tt)* }) => {
        wire_struct! {
            $(#[$m])*
            pub struct $name [tag "op" = $lit @ 0] { $($body)* }
        }
    };
}

patch_op!(
    /// `add` (RFC 6902 §4.1).
    AddOp = "add" {
        /// Where.
        req(crate::wire::pointer) path: String = "path",
        /// What (any JSON, `null` included).
        req value: Json = "value",
    }
);
patch_op!(
    /// `remove` (RFC 6902 §4.2).
    RemoveOp = "remove" {
        /// Where.
        req(crate::wire::pointer) path: String = "path",
    }
);
patch_op!(
    /// `replace` (RFC 6902 §4.3).
    ReplaceOp = "replace" {
        /// Where.
        req(crate::wire::pointer) path: String = "path",
        /// What.
        req value: Json = "value",
    }
);
patch_op!(
    /// `move` (RFC 6902 §4.4).
    MoveOp = "move" {
        /// From where.
        req(crate::wire::pointer) from: String = "from",
        /// To where.
        req(crate::wire::pointer) path: String = "path",
    }
);
patch_op!(
    /// `copy` (RFC 6902 §4.5).
    CopyOp = "copy" {
        /// From where.
        req(crate::wire::pointer) from: String = "from",
        /// To where.
        req(crate::wire::pointer) path: String = "path",
    }
);
patch_op!(
    /// `test` (RFC 6902 §4.6).
    TestOp = "test" {
        /// Where.
        req(crate::wire::pointer) path: String = "path",
        /// The expected value.
        req value: Json = "value",
    }
);

wire_union! {
    /// One JSON Patch operation, keyed on `op`.
    pub enum PatchOp ["op"] {
        /// `add`
        Add(AddOp) = "add",
        /// `remove`
        Remove(RemoveOp) = "remove",
        /// `replace`
        Replace(ReplaceOp) = "replace",
        /// `move`
        Move(MoveOp) = "move",
        /// `copy`
        Copy(CopyOp) = "copy",
        /// `test`
        Test(TestOp) = "test",
    }
}

wire_struct! {
    /// Token usage of a model call or a run.
    pub struct TokenUsage {
        /// The provider.
        opt provider: String = "provider",
        /// The model.
        opt model: String = "model",
        /// Prompt tokens.
        opt(crate::wire::count) input_tokens: u64 = "inputTokens",
        /// Completion tokens.
        opt(crate::wire::count) output_tokens: u64 = "outputTokens",
        /// All tokens.
        opt(crate::wire::count) total_tokens: u64 = "totalTokens",
        /// Reasoning tokens.
        opt(crate::wire::count) reasoning_tokens: u64 = "reasoningTokens",
        /// Prompt tokens read from a cache.
        opt(crate::wire::count) cached_input_tokens: u64 = "cachedInputTokens",
        /// Prompt tokens written to a cache.
        opt(crate::wire::count) cache_write_input_tokens: u64 = "cacheWriteInputTokens",
    }
}

wire_struct! {
    /// Why a run stopped to wait for someone.
    pub struct Interrupt {
        /// The subagent run that raised it.
        opt subagent_run_id: String = "subagentRunId",
        /// Its id (what `ResumeEntry.interruptId` names).
        req id: String = "id",
        /// Why.
        req reason: String = "reason",
        /// For people.
        opt message: String = "message",
        /// The tool call it is about.
        opt tool_call_id: String = "toolCallId",
        /// JSON Schema of the answer (an object).
        opt_obj response_schema: Json = "responseSchema",
        /// When it expires.
        opt expires_at: String = "expiresAt",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// The run succeeded.
    pub struct SuccessOutcome [tag "type" = "success" @ 0] {
        /// Tool calls the client still has to run.
        opt pending_tool_call_ids: Vec<String> = "pendingToolCallIds",
    }
}

wire_struct! {
    /// The run stopped to wait.
    pub struct InterruptOutcome [tag "type" = "interrupt" @ 0] {
        /// What it waits for (at least one).
        req_nonempty interrupts: Vec<Interrupt> = "interrupts",
    }
}

wire_struct! {
    /// The run was cancelled.
    pub struct CancelledOutcome [tag "type" = "cancelled" @ 0] {}
}

wire_union! {
    /// How a run ended (`RUN_FINISHED.outcome`; absent means success).
    pub enum RunFinishedOutcome ["type"] {
        /// `success`
        Success(SuccessOutcome) = "success",
        /// `interrupt`
        Interrupt(InterruptOutcome) = "interrupt",
        /// `cancelled`
        Cancelled(CancelledOutcome) = "cancelled",
    }
}

impl RunFinishedOutcome {
    /// `{ "type": "cancelled" }`.
    pub fn cancelled() -> Self {
        RunFinishedOutcome::Cancelled(CancelledOutcome::default())
    }
}

wire_struct! {
    /// The subagent succeeded.
    pub struct SubagentSuccessOutcome [tag "type" = "success" @ 0] {}
}

wire_struct! {
    /// The subagent is suspended on interrupts.
    pub struct SubagentSuspendedOutcome [tag "type" = "suspended" @ 0] {
        /// The interrupts it waits on.
        opt interrupt_ids: Vec<String> = "interruptIds",
    }
}

wire_union! {
    /// How a subagent ended.
    pub enum SubagentFinishedOutcome ["type"] {
        /// `success`
        Success(SubagentSuccessOutcome) = "success",
        /// `suspended`
        Suspended(SubagentSuspendedOutcome) = "suspended",
    }
}

wire_struct! {
    /// A tool offered to the agent (AG-UI `Tool`).
    pub struct AguiTool {
        /// Its name.
        req name: String = "name",
        /// What it does.
        req description: String = "description",
        /// JSON Schema of its arguments.
        opt_nn parameters: Json = "parameters",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// A piece of context for the agent.
    pub struct Context {
        /// What it is.
        req description: String = "description",
        /// Its value.
        req value: String = "value",
    }
}

wire_struct! {
    /// The answer to one interrupt.
    pub struct ResumeEntry {
        /// The interrupt it answers.
        req interrupt_id: String = "interruptId",
        /// Resolved or cancelled.
        req status: ResumeStatus = "status",
        /// The answer.
        opt_nn payload: Json = "payload",
        /// Extra information (an object).
        opt_obj metadata: Json = "metadata",
    }
}

wire_struct! {
    /// The body of a standard AG-UI run request (`POST run`).
    pub struct RunAgentInput {
        /// The thread.
        req thread_id: String = "threadId",
        /// The run.
        req run_id: String = "runId",
        /// The AG-UI version the client speaks.
        opt protocol_version: String = "protocolVersion",
        /// The run that started this one.
        opt parent_run_id: String = "parentRunId",
        /// Agent state (`null` reads as absent).
        opt_null state: Json = "state",
        /// The conversation.
        req messages: Vec<AguiMessage> = "messages",
        /// Tools the client offers.
        opt tools: Vec<AguiTool> = "tools",
        /// Context.
        opt context: Vec<Context> = "context",
        /// Anything else the client forwards.
        opt_nn forwarded_props: Json = "forwardedProps",
        /// Answers to interrupts.
        opt resume: Vec<ResumeEntry> = "resume",
    }
}

impl RunAgentInput {
    /// The text of the last user message.
    pub fn last_user_text(&self) -> Option<String> {
        self.messages.iter().rev().find_map(|m| match m {
            AguiMessage::User(u) => Some(u.content.text()),
            _ => None,
        })
    }
}
