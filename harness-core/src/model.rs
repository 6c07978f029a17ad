//! Model providers: what a protocol driver calls to satisfy `sink.model` where the protocol
//! does not mediate model calls itself, and a deterministic scripted model for tests and
//! demos (no network, no key).
//!
//! A [`Model`] streams: zero or more [`ModelEvent::TextDelta`]s (and, from reasoning models,
//! [`ModelEvent::ReasoningDelta`]s), then exactly one [`ModelEvent::Completed`] with the whole
//! response. Drivers turn the deltas into what their protocol streams (jambonz `reply:chunk`s,
//! AG-UI `TEXT_MESSAGE_CONTENT`), with back-pressure, since the stream is pulled.
//!
//! A real provider: [`openai`](crate::openai), the OpenAI Chat Completions wire format that
//! OpenAI, vLLM, Ollama, llama.cpp and many others serve (its HTTP transport behind the
//! `openai` feature).
//!
//! ```
//! use futures::StreamExt;
//! use harness_core::message::{Message, ModelRequest};
//! use harness_core::model::{Model, ModelEvent, ScriptedModel};
//!
//! let model = ScriptedModel::new().reply("We open at eight.");
//! let req = ModelRequest::new(vec![Message::user("When do you open?")]);
//! futures::executor::block_on(async {
//!     let mut deltas = Vec::new();
//!     let mut stream = model.stream(&req);
//!     while let Some(ev) = stream.next().await {
//!         match ev? {
//!             ModelEvent::TextDelta(d) => deltas.push(d),
//!             ModelEvent::Completed(resp) => assert_eq!(resp.message.text(), "We open at eight."),
//!             _ => {}
//!         }
//!     }
//!     assert_eq!(deltas, ["We ", "open ", "at ", "eight."]);
//!     Ok::<(), harness_core::model::ModelError>(())
//! }).unwrap();
//! assert_eq!(model.calls(), 1);
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::message::{
    JsonObject, Message, ModelRequest, ModelResponse, Part, Role, ToolCall, Usage,
};

/// One item of a model's stream.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// More assistant text.
    TextDelta(String),
    /// More of the model's visible reasoning (`reasoning_content` as vLLM, llama.cpp and
    /// DeepSeek stream it, `reasoning` as Ollama and newer vLLM do). Not part of the answer: a
    /// driver with no place for it ignores it, and the completed response carries the whole
    /// of it as a [`Part::Reasoning`].
    ReasoningDelta(String),
    /// The whole response; the last item of the stream.
    Completed(ModelResponse),
}

/// Why a model call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelError {
    /// The provider could not be reached or refused the call.
    #[error("model unavailable: {0}")]
    Unavailable(String),
    /// The provider answered with an error.
    #[error("model error: {0}")]
    Provider(String),
    /// The stream ended without a completed response.
    #[error("model stream ended without a completed response")]
    Incomplete,
    /// The provider refused the request (an HTTP 4xx such as 400, 401, 403 or 404): the
    /// request, the credentials or the model name must change before it can succeed.
    #[error("model provider refused the request (HTTP {status}): {message}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider is rate limiting or failing (HTTP 408, 409, 429, 5xx): the same request
    /// may succeed later, after `retry_after_ms` when the provider said so.
    #[error("model provider busy or failing (HTTP {status}): {message}")]
    Retryable {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait (`Retry-After`), in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// A scripted model was called more times than its script has steps.
    #[error("scripted model: no step left for call {call}")]
    ScriptExhausted {
        /// The 1-based number of the call that found no step.
        call: usize,
    },
}

impl ModelError {
    /// Whether sending the same request again may succeed: a provider that was busy, failing
    /// or out of reach, or a stream cut short. A refused request, a provider's answer that is
    /// an error, and an exhausted script are not.
    ///
    /// ```
    /// use harness_core::model::ModelError;
    ///
    /// let busy = ModelError::Retryable { status: 429, message: "slow down".into(), retry_after_ms: Some(2000) };
    /// assert!(busy.is_retryable());
    /// assert_eq!(busy.retry_after(), Some(std::time::Duration::from_secs(2)));
    /// assert!(!ModelError::Rejected { status: 401, message: "bad key".into() }.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::Retryable { .. } | ModelError::Unavailable(_) | ModelError::Incomplete
        )
    }

    /// How long the provider asked to wait before a retry, when it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ModelError::Retryable {
                retry_after_ms: Some(ms),
                ..
            } => Some(std::time::Duration::from_millis(*ms)),
            _ => None,
        }
    }
}

/// A stream of model events.
pub type ModelStream<'a> = BoxStream<'a, Result<ModelEvent, ModelError>>;

/// A model provider.
#[async_trait]
pub trait Model: Send + Sync {
    /// Starts a completion of `req`: text (and reasoning) deltas, then the completed response.
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a>;

    /// Runs a completion to the end, handing each text delta to `on_delta`.
    async fn complete(
        &self,
        req: &ModelRequest,
        on_delta: &mut (dyn for<'d> FnMut(&'d str) + Send),
    ) -> Result<ModelResponse, ModelError> {
        let mut s = self.stream(req);
        while let Some(ev) = s.next().await {
            match ev? {
                ModelEvent::TextDelta(d) => on_delta(&d),
                ModelEvent::ReasoningDelta(_) => {}
                ModelEvent::Completed(resp) => return Ok(resp),
            }
        }
        Err(ModelError::Incomplete)
    }
}

#[async_trait]
impl<M: Model + ?Sized> Model for std::sync::Arc<M> {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        (**self).stream(req)
    }
}

type Responder = Box<dyn Fn(&ModelRequest) -> Result<Message, ModelError> + Send + Sync>;

enum Step {
    Reply(Message),
    Fail(ModelError),
}

/// A deterministic model for tests and demos: it answers from a script of steps, one per
/// call, then from a fallback function if one is set. No network, no key, no randomness.
///
/// Text is streamed word by word (each delta is a word and the whitespace after it). Tool
/// call ids are `call_1`, `call_2`, … in script order. Usage counts one token per four
/// characters (rounded up) of the request's text and of the reply.
///
/// ```
/// use harness_core::model::ScriptedModel;
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .tool_call("get_hours", json!({}))            // first call: ask for a tool
///     .reply("We're open eight to six.")           // second call: answer
///     .otherwise(|req| Ok(harness_core::message::Message::assistant(
///         format!("You said: {}", req.last_user_text().unwrap_or_default()))));
/// # let _ = model;
/// ```
///
/// **One script per model, not per session.** The steps, and the step counter behind the
/// tool-call ids (`call_1`, `call_2`, …), belong to the model value: every call of it takes
/// the next step, whichever session, turn or connection makes it. A server that serves many
/// sessions with one scripted model hands the second session the first one's next step, and
/// a server restarted mid-session numbers its calls from 1 again. For a server, answer with
/// [`otherwise`](Self::otherwise) and make each answer, ids included, a function of the
/// request, as [`faq_model`](crate::agent::faq::faq_model) does (`call_<messages before it>`):
/// the same request gets the same answer in every session and every process.
///
/// ```
/// use harness_core::message::{Message, ModelRequest};
/// use harness_core::model::{Model, ScriptedModel};
/// use serde_json::json;
///
/// let ask = |m: &ScriptedModel, text: &str| {
///     let req = ModelRequest::new(vec![Message::user(text)]);
///     futures::executor::block_on(m.complete(&req, &mut |_| {})).unwrap().message
/// };
/// // A script: session B's first call gets the step after session A's.
/// let scripted = ScriptedModel::new()
///     .tool_call("get_hours", json!({}))
///     .tool_call("get_hours", json!({}));
/// let a = ask(&scripted, "When are you open?");
/// let b = ask(&scripted, "When are you open?");
/// assert_ne!(a.tool_calls().next().unwrap().id, b.tool_calls().next().unwrap().id);
/// // A function of the request: the same request, the same answer, in any session.
/// let faq = harness_core::agent::faq::faq_model();
/// assert_eq!(ask(&faq, "When are you open?"), ask(&faq, "When are you open?"));
/// ```
pub struct ScriptedModel {
    id: String,
    script: Mutex<VecDeque<Step>>,
    fallback: Option<Responder>,
    calls: AtomicUsize,
    next_tool_call: AtomicUsize,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("id", &self.id)
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// An empty script (every call fails with [`ModelError::ScriptExhausted`] until steps or
    /// a fallback are added). The model id is `scripted`.
    pub fn new() -> Self {
        ScriptedModel {
            id: "scripted".into(),
            script: Mutex::new(VecDeque::new()),
            fallback: None,
            calls: AtomicUsize::new(0),
            next_tool_call: AtomicUsize::new(1),
        }
    }

    /// A model that answers every call with `You said: <last user text>`.
    pub fn echo() -> Self {
        Self::new().otherwise(|req| {
            Ok(Message::assistant(format!(
                "You said: {}",
                req.last_user_text().unwrap_or_default()
            )))
        })
    }

    /// Sets the model id reported in usage.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a step: answer with this text.
    #[must_use]
    pub fn reply(self, text: impl Into<String>) -> Self {
        self.push(Step::Reply(Message::assistant(text)))
    }

    /// Adds a step: answer with this message (text, reasoning, tool call parts…).
    #[must_use]
    pub fn reply_with(self, message: Message) -> Self {
        self.push(Step::Reply(message))
    }

    /// Adds a step: ask for one tool call (`args` should be a JSON object; anything else
    /// becomes `{}`).
    #[must_use]
    pub fn tool_call(self, tool: impl Into<String>, args: serde_json::Value) -> Self {
        let n = self.next_tool_call.fetch_add(1, Ordering::Relaxed);
        let args = match args {
            serde_json::Value::Object(m) => m,
            _ => JsonObject::new(),
        };
        let call = ToolCall::new(format!("call_{n}"), tool, args);
        self.push(Step::Reply(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call)],
        }))
    }

    /// Adds a step: fail with this error.
    #[must_use]
    pub fn fail(self, err: ModelError) -> Self {
        self.push(Step::Fail(err))
    }

    /// Answers with `f` once the script is used up.
    #[must_use]
    pub fn otherwise(
        mut self,
        f: impl Fn(&ModelRequest) -> Result<Message, ModelError> + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Some(Box::new(f));
        self
    }

    /// How many times the model was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Steps of the script not used yet.
    pub fn remaining_steps(&self) -> usize {
        self.script.lock().map(|s| s.len()).unwrap_or(0)
    }

    fn push(self, step: Step) -> Self {
        if let Ok(mut s) = self.script.lock() {
            s.push_back(step);
        }
        self
    }

    fn answer(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let step = self.script.lock().ok().and_then(|mut s| s.pop_front());
        let message = match step {
            Some(Step::Reply(m)) => m,
            Some(Step::Fail(e)) => return Err(e),
            None => match &self.fallback {
                Some(f) => f(req)?,
                None => return Err(ModelError::ScriptExhausted { call }),
            },
        };
        let usage = Usage {
            model: self.id.clone(),
            input_tokens: tokens(req.messages.iter().map(|m| m.text().len()).sum()),
            output_tokens: tokens(message.text().len()),
            reasoning_tokens: 0,
        };
        Ok(ModelResponse { message, usage })
    }
}

fn tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

/// Splits text into deltas: each word with the whitespace that follows it.
pub fn word_deltas(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            out.push(text[start..i].to_owned());
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        out.push(text[start..].to_owned());
    }
    out
}

#[async_trait]
impl Model for ScriptedModel {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let items: Vec<Result<ModelEvent, ModelError>> = match self.answer(req) {
            Err(e) => vec![Err(e)],
            Ok(resp) => {
                let mut v: Vec<_> = word_deltas(&resp.message.text())
                    .into_iter()
                    .map(|d| Ok(ModelEvent::TextDelta(d)))
                    .collect();
                v.push(Ok(ModelEvent::Completed(resp)));
                v
            }
        };
        futures::stream::iter(items).boxed()
    }
}
