//! The streamed response body → [`ModelEvent`]s, as a sans-IO pull decoder over
//! [`SseDecoder`] (the [`crate::run_loop`] codec contract: `push`, drain `poll_event`,
//! `finish`).

use std::collections::VecDeque;

use serde_json::Value;

use super::chunk::{Chunk, ToolCallDelta, WireUsage};
use super::status::{is_retryable_status, json_text, message_of};
use crate::message::{
    JsonObject, Message, ModelResponse, Part, ReasoningPart, Role, ToolCall, Usage,
};
use crate::model::{ModelError, ModelEvent};
use crate::sse::{SseConfig, SseDecoder, SseError, SseEvent};

/// Why a stream of chat completion chunks could not be decoded.
///
/// Every error ends the stream: the decoder reports it once, then yields nothing more.
/// `From<ChatStreamError> for ModelError` maps it for a [`Model`](crate::model::Model).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChatStreamError {
    /// The server sent an error object in the stream (`data: {"error": {...}}`).
    #[error("the model server reported an error: {message}")]
    Api {
        /// `error.message`.
        message: String,
        /// `error.type`, when given (`server_error`, `BadRequestError`…).
        kind: Option<String>,
        /// `error.code` as text, when given (`rate_limit_exceeded`, `400`…).
        code: Option<String>,
    },
    /// A `data:` payload that is not a chat completion chunk (not JSON, or fields of the
    /// wrong type).
    #[error("invalid chat completion chunk: {error}")]
    InvalidChunk {
        /// What serde said.
        error: String,
    },
    /// A tool call that cannot be used: its arguments are not a JSON object (cut by
    /// `max_tokens`, or a model that wrote bad JSON), or it has no name.
    #[error("tool call {index} ({name:?}) is unusable: {error}")]
    InvalidToolCall {
        /// The call's `index` in the stream.
        index: u32,
        /// Its function name, as far as it came.
        name: String,
        /// What is wrong.
        error: String,
    },
    /// The text, reasoning and tool arguments of the response grew past
    /// [`ChatStreamConfig::max_response_bytes`].
    #[error("the model response grew past {limit} bytes")]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// More distinct tool calls than [`ChatStreamConfig::max_tool_calls`].
    #[error("the model asked for more than {limit} tool calls")]
    TooManyToolCalls {
        /// The configured limit.
        limit: usize,
    },
    /// The SSE framing failed (a line or an event past the SSE limits).
    #[error("server-sent events: {0}")]
    Sse(SseError),
    /// The stream ended before `data: [DONE]`: cut mid-chunk, or closed early.
    #[error("the stream ended before data: [DONE]")]
    Incomplete,
}

impl From<ChatStreamError> for ModelError {
    fn from(e: ChatStreamError) -> Self {
        match e {
            ChatStreamError::Incomplete => ModelError::Incomplete,
            ChatStreamError::Api {
                message,
                code: Some(code),
                ..
            } if code.parse::<u16>().is_ok_and(|s| (400..600).contains(&s)) => {
                let status = code.parse::<u16>().unwrap_or(500);
                if is_retryable_status(status) {
                    ModelError::Retryable {
                        status,
                        message,
                        retry_after_ms: None,
                    }
                } else {
                    ModelError::Rejected { status, message }
                }
            }
            ChatStreamError::Api { message, .. } => ModelError::Provider(message),
            other => ModelError::Provider(other.to_string()),
        }
    }
}

/// Why the model stopped (`finish_reason` of the last choice chunk).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// `stop`: a natural end or a stop sequence.
    Stop,
    /// `length`: `max_tokens` (or the context) ran out; the text is cut.
    Length,
    /// `tool_calls`: the model asks for tools.
    ToolCalls,
    /// `content_filter`: the provider's filter withheld content.
    ContentFilter,
    /// `function_call`: the deprecated single-function form.
    FunctionCall,
    /// Any other value, as given (`error`, `abort`, `eos`…).
    Other(String),
}

impl FinishReason {
    /// The reason named by a `finish_reason` value.
    pub fn from_wire(s: &str) -> Self {
        match s {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "function_call" => FinishReason::FunctionCall,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other(s) => s,
        }
    }
}

/// Limits of a [`ChatStreamDecoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatStreamConfig {
    /// The SSE limits (one line, one event).
    pub sse: SseConfig,
    /// The most text, reasoning and tool-call arguments one response may gather, in bytes.
    /// Default 32 MiB.
    pub max_response_bytes: usize,
    /// The most distinct tool calls in one response. Default 128.
    pub max_tool_calls: usize,
}

impl ChatStreamConfig {
    /// The default limits: the SSE defaults, 32 MiB per response, 128 tool calls.
    pub const DEFAULT: ChatStreamConfig = ChatStreamConfig {
        sse: SseConfig::DEFAULT,
        max_response_bytes: 32 << 20,
        max_tool_calls: 128,
    };
}

impl Default for ChatStreamConfig {
    fn default() -> Self {
        ChatStreamConfig::DEFAULT
    }
}

/// A tool call being assembled from its deltas.
#[derive(Debug, Default)]
struct CallBuilder {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Streaming,
    /// `[DONE]` was read: the completed response is out (or queued).
    Done,
    /// An error was reported: nothing more comes out.
    Failed,
}

/// A sans-IO decoder of a streamed Chat Completions response body (`stream: true`), the
/// wire format of OpenAI and of the servers compatible with it (vLLM, Ollama, llama.cpp,
/// DeepSeek, OpenRouter…).
///
/// Push the body's bytes as they arrive, in any chunks; [`poll_event`](Self::poll_event)
/// hands out [`ModelEvent`]s: a [`TextDelta`](ModelEvent::TextDelta) per piece of answer,
/// a [`ReasoningDelta`](ModelEvent::ReasoningDelta) per piece of visible reasoning, and at
/// `data: [DONE]` one [`Completed`](ModelEvent::Completed) with the whole assistant message
/// (a reasoning part, the text, then the tool calls) and the usage. Call
/// [`finish`](Self::finish) at the end of the body: a body that ends before `[DONE]` is
/// [`ChatStreamError::Incomplete`].
///
/// What it reads, chunk by chunk (only choice `0`; others, from `n > 1`, are skipped):
/// `delta.content` (a string, or an array of text parts), `delta.refusal` (as text),
/// `delta.reasoning_content` or else `delta.reasoning`, `delta.tool_calls` (assembled by
/// `index`: the id and the name from the first delta that has them, the `arguments`
/// fragments concatenated, parsed as a JSON object at `[DONE]`; a call without `index` is
/// keyed by its position), `finish_reason`, `usage` (in any chunk; a usage-only chunk has
/// `choices: []` or `null`), `model`, `id`, and an `error` object (OpenAI, Ollama, vLLM;
/// also vLLM's top-level `"object": "error"`). Unknown fields, comments and empty `data:`
/// lines are ignored. Any chunking of the same bytes gives the same events.
///
/// The completed usage counts `prompt_tokens` as input, `completion_tokens` as output and
/// `completion_tokens_details.reasoning_tokens` as reasoning; its model is the chunks'
/// `model`.
///
/// ```
/// use harness_core::model::ModelEvent;
/// use harness_core::openai::{ChatStreamDecoder, FinishReason};
///
/// let body = concat!(
///     r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#, "\n\n",
///     r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"Open "},"finish_reason":null}]}"#, "\n\n",
///     r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"content":"at eight."},"finish_reason":"stop"}]}"#, "\n\n",
///     r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}"#, "\n\n",
///     "data: [DONE]\n\n",
/// );
/// let mut dec = ChatStreamDecoder::new();
/// let mut deltas = Vec::new();
/// for piece in body.as_bytes().chunks(7) {          // any chunking
///     dec.push(piece);
///     while let Some(ev) = dec.poll_event()? {
///         match ev {
///             ModelEvent::TextDelta(d) => deltas.push(d),
///             ModelEvent::Completed(resp) => {
///                 assert_eq!(resp.message.text(), "Open at eight.");
///                 assert_eq!((resp.usage.input_tokens, resp.usage.output_tokens), (12, 4));
///                 assert_eq!(resp.usage.model, "gpt-4.1-mini");
///             }
///             _ => {}
///         }
///     }
/// }
/// dec.finish()?;
/// assert_eq!(deltas, ["Open ", "at eight."]);
/// assert_eq!(dec.finish_reason(), Some(&FinishReason::Stop));
/// # Ok::<(), harness_core::openai::ChatStreamError>(())
/// ```
#[derive(Debug)]
pub struct ChatStreamDecoder {
    cfg: ChatStreamConfig,
    sse: SseDecoder,
    state: State,
    queue: VecDeque<ModelEvent>,
    id: String,
    model: String,
    text: String,
    reasoning: String,
    calls: Vec<CallBuilder>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    /// Text, reasoning and argument bytes gathered so far.
    gathered: usize,
}

impl Default for ChatStreamDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChatStreamDecoder {
    /// A decoder with the default limits ([`ChatStreamConfig::DEFAULT`]).
    pub fn new() -> Self {
        Self::with_config(ChatStreamConfig::DEFAULT)
    }

    /// A decoder with the given limits.
    pub fn with_config(cfg: ChatStreamConfig) -> Self {
        ChatStreamDecoder {
            cfg,
            sse: SseDecoder::with_config(cfg.sse),
            state: State::Streaming,
            queue: VecDeque::new(),
            id: String::new(),
            model: String::new(),
            text: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            usage: None,
            finish_reason: None,
            gathered: 0,
        }
    }

    /// Appends bytes of the response body. Never fails and never parses; drain
    /// [`poll_event`](Self::poll_event) afterwards.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.state == State::Streaming {
            self.sse.push(bytes);
        }
    }

    /// The next event, decoded from the bytes pushed so far; `Ok(None)` when more bytes are
    /// needed, or once the stream is over.
    ///
    /// An `Err` ends the stream: it is reported once, and everything after it is dropped.
    pub fn poll_event(&mut self) -> Result<Option<ModelEvent>, ChatStreamError> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            if self.state != State::Streaming || !self.advance()? {
                return Ok(None);
            }
        }
    }

    /// Ends the body. Events still queued stay available to [`poll_event`](Self::poll_event).
    ///
    /// `Ok` when `data: [DONE]` was read (bytes after it are ignored) or an error was already
    /// reported; [`ChatStreamError::Incomplete`] when the body ended before it, whether
    /// cleanly between chunks or in the middle of one.
    pub fn finish(&mut self) -> Result<(), ChatStreamError> {
        if self.state == State::Streaming {
            // An unterminated event is what `Incomplete` reports; its own error adds nothing.
            let _ = self.sse.finish();
            while self.state == State::Streaming && self.advance()? {}
        }
        if self.state == State::Streaming {
            self.state = State::Failed;
            return Err(ChatStreamError::Incomplete);
        }
        Ok(())
    }

    /// Whether `data: [DONE]` was read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The `finish_reason` the stream gave, once it gave one.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// The completion's `id` (`chatcmpl-…`), once a chunk carried one.
    pub fn response_id(&self) -> Option<&str> {
        (!self.id.is_empty()).then_some(self.id.as_str())
    }

    /// Processes one SSE event, if a whole one is there. `Ok(false)`: none yet.
    fn advance(&mut self) -> Result<bool, ChatStreamError> {
        let ev = match self.sse.poll_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => return Ok(false),
            Err(e) => return Err(self.fail(ChatStreamError::Sse(e))),
        };
        if let Err(e) = self.handle(&ev) {
            return Err(self.fail(e));
        }
        Ok(true)
    }

    fn fail(&mut self, e: ChatStreamError) -> ChatStreamError {
        self.state = State::Failed;
        self.queue.clear();
        e
    }

    fn handle(&mut self, ev: &SseEvent) -> Result<(), ChatStreamError> {
        let data = ev.data();
        if data.trim_ascii().is_empty() {
            return Ok(()); // an empty `data:` some proxies send to keep the line open
        }
        if data.trim_ascii() == "[DONE]" {
            let resp = self.complete()?;
            self.state = State::Done;
            self.queue.push_back(ModelEvent::Completed(resp));
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| {
            if ev.event_type() == "error" {
                api_error_text(data)
            } else {
                ChatStreamError::InvalidChunk {
                    error: e.to_string(),
                }
            }
        })?;
        if let Some(e) = chunk_error(&chunk, ev.event_type() == "error") {
            return Err(e);
        }
        if let Some(id) = chunk.id.as_deref() {
            if self.id.is_empty() && !id.is_empty() {
                self.id = id.to_owned();
            }
        }
        if let Some(model) = chunk.model.as_deref() {
            if !model.is_empty() && model != self.model {
                self.model = model.to_owned();
            }
        }
        if let Some(u) = &chunk.usage {
            self.usage = Some(usage(u));
        }
        for choice in chunk.choices {
            if choice.index != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let reasoning = delta.reasoning_content.or(delta.reasoning);
                if let Some(r) = reasoning.filter(|r| !r.0.is_empty()) {
                    self.gather(r.0.len())?;
                    self.reasoning.push_str(&r.0);
                    self.queue
                        .push_back(ModelEvent::ReasoningDelta(r.0.into_owned()));
                }
                for text in [delta.content, delta.refusal].into_iter().flatten() {
                    if !text.0.is_empty() {
                        self.gather(text.0.len())?;
                        self.text.push_str(&text.0);
                        self.queue
                            .push_back(ModelEvent::TextDelta(text.0.into_owned()));
                    }
                }
                for (pos, call) in delta.tool_calls.into_iter().enumerate() {
                    self.tool_call_delta(pos, call)?;
                }
            }
            if let Some(reason) = choice.finish_reason.as_deref() {
                self.finish_reason = Some(FinishReason::from_wire(reason));
            }
        }
        Ok(())
    }

    fn gather(&mut self, n: usize) -> Result<(), ChatStreamError> {
        self.gathered = self.gathered.saturating_add(n);
        if self.gathered > self.cfg.max_response_bytes {
            return Err(ChatStreamError::TooLarge {
                limit: self.cfg.max_response_bytes,
            });
        }
        Ok(())
    }

    fn tool_call_delta(
        &mut self,
        pos: usize,
        delta: ToolCallDelta<'_>,
    ) -> Result<(), ChatStreamError> {
        let index = delta
            .index
            .unwrap_or_else(|| u32::try_from(pos).unwrap_or(u32::MAX));
        let slot = match self.calls.iter().position(|c| c.index == index) {
            Some(i) => i,
            None => {
                if self.calls.len() >= self.cfg.max_tool_calls {
                    return Err(ChatStreamError::TooManyToolCalls {
                        limit: self.cfg.max_tool_calls,
                    });
                }
                self.calls.push(CallBuilder {
                    index,
                    ..CallBuilder::default()
                });
                self.calls.len() - 1
            }
        };
        let (name, arguments) = match delta.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let more = name.as_ref().map_or(0, |n| n.len())
            + arguments.as_ref().map_or(0, |a| a.0.len())
            + delta.id.as_ref().map_or(0, |i| i.len());
        self.gather(more)?;
        let call = &mut self.calls[slot];
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            if call.id.is_empty() {
                call.id = id.into_owned();
            }
        }
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if call.name.is_empty() {
                call.name = name.into_owned();
            }
        }
        if let Some(args) = arguments {
            call.arguments.push_str(&args.0);
        }
        Ok(())
    }

    /// The completed response, at `[DONE]`.
    fn complete(&mut self) -> Result<ModelResponse, ChatStreamError> {
        let mut parts = Vec::with_capacity(2 + self.calls.len());
        if !self.reasoning.is_empty() {
            parts.push(Part::Reasoning(ReasoningPart {
                provider: "openai".into(),
                model_id: self.model.clone(),
                summary: vec![Part::text(std::mem::take(&mut self.reasoning))],
                ..ReasoningPart::default()
            }));
        }
        if !self.text.is_empty() {
            parts.push(Part::text(std::mem::take(&mut self.text)));
        }
        self.calls.sort_by_key(|c| c.index);
        for call in std::mem::take(&mut self.calls) {
            parts.push(Part::ToolCall(finish_call(call)?));
        }
        let mut usage = self.usage.take().unwrap_or_default();
        usage.model.clone_from(&self.model);
        Ok(ModelResponse {
            message: Message {
                role: Role::Assistant,
                parts,
            },
            usage,
        })
    }
}

/// A whole tool call: its arguments parsed (empty or `null` is `{}`), an id made up as
/// `call_<index>` when the server gave none.
fn finish_call(call: CallBuilder) -> Result<ToolCall, ChatStreamError> {
    let invalid = |error: String| ChatStreamError::InvalidToolCall {
        index: call.index,
        name: call.name.clone(),
        error,
    };
    if call.name.is_empty() {
        return Err(invalid("no function name".into()));
    }
    let args = if call.arguments.trim().is_empty() {
        JsonObject::new()
    } else {
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Null) => JsonObject::new(),
            Ok(other) => {
                return Err(invalid(format!(
                    "arguments are not a JSON object: {}",
                    json_kind(&other)
                )));
            }
            Err(e) => return Err(invalid(format!("arguments are not valid JSON: {e}"))),
        }
    };
    let id = if call.id.is_empty() {
        format!("call_{}", call.index)
    } else {
        call.id
    };
    Ok(ToolCall::new(id, call.name, args))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn usage(u: &WireUsage) -> Usage {
    Usage {
        model: String::new(),
        input_tokens: u.prompt_tokens.unwrap_or(0),
        output_tokens: u.completion_tokens.unwrap_or(0),
        reasoning_tokens: u
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0),
    }
}

/// The error a chunk carries, if it is an error object.
fn chunk_error(chunk: &Chunk<'_>, error_event: bool) -> Option<ChatStreamError> {
    let top_level = chunk.object.as_deref() == Some("error") || error_event;
    let obj = match &chunk.error {
        Some(Value::Null) | None if !top_level => return None,
        Some(Value::Null) | None => None,
        Some(e) => Some(e),
    };
    let (message, kind, code) = match obj {
        Some(Value::Object(e)) => (
            e.get("message").map(json_text),
            e.get("type").map(json_text),
            e.get("code").map(json_text),
        ),
        Some(other) => (Some(json_text(other)), None, None),
        None => (
            chunk.message.as_ref().map(json_text),
            chunk.kind.as_ref().map(json_text),
            chunk.code.as_ref().map(json_text),
        ),
    };
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    Some(ChatStreamError::Api {
        message: nonempty(message).unwrap_or_else(|| "unknown error".into()),
        kind: nonempty(kind),
        code: nonempty(code),
    })
}

/// An `event: error` whose data is not a chunk: its message, or its text.
fn api_error_text(data: &str) -> ChatStreamError {
    let message = serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|v| message_of(&v))
        .unwrap_or_else(|| data.trim().to_owned());
    ChatStreamError::Api {
        message,
        kind: None,
        code: None,
    }
}
