use async_trait::async_trait;
use harness_core::event::EventBody;
use harness_core::message::{Message, ModelRequest};
use harness_core::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, Resumability, Start,
};
use serde_json::Value;

/// Why a chat config was rejected. The diagnostics are fixed: they never quote the config
/// or the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Malformed JSON, or trailing JSON or other tokens after the value.
    #[error("config is not a single valid JSON value")]
    Malformed,
    /// The value is not an object (including top-level `null`).
    #[error("config is not a JSON object")]
    NotAnObject,
    /// `system_prompt` is present but not a string (including `null`).
    #[error("config field system_prompt is not a string")]
    SystemPromptNotString,
}

/// Reads the optional system prompt from a chat execution's config, exactly as the spec
/// words the rules:
///
/// - no config or zero-length config: none;
/// - otherwise the config must be one JSON object (malformed JSON, trailing tokens and
///   non-objects, including `null`, are errors);
/// - `system_prompt` (case-sensitive; unknown fields ignored) absent or `""`: none; a string:
///   that string as decoded, whitespace and newlines included; any other type, including
///   `null`: an error.
///
/// ```
/// use harness_sessions::harnesses::{ConfigError, parse_system_prompt};
///
/// assert_eq!(parse_system_prompt(b""), Ok(None));
/// assert_eq!(parse_system_prompt(br#"{"system_prompt":"Be brief."}"#), Ok(Some("Be brief.".into())));
/// assert_eq!(parse_system_prompt(b"null"), Err(ConfigError::NotAnObject));
/// assert_eq!(parse_system_prompt(br#"{} {}"#), Err(ConfigError::Malformed));
/// ```
pub fn parse_system_prompt(config: &[u8]) -> Result<Option<String>, ConfigError> {
    if config.is_empty() {
        return Ok(None);
    }
    // serde_json rejects trailing tokens (whitespace after the value is allowed) and, for a
    // repeated key, keeps the last value, as Go's decoder does.
    let v: Value = serde_json::from_slice(config).map_err(|_| ConfigError::Malformed)?;
    let Value::Object(mut m) = v else {
        return Err(ConfigError::NotAnObject);
    };
    match m.remove("system_prompt") {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ConfigError::SystemPromptNotString),
    }
}

/// The spec's reference harness 2 (`harness/chatagent`): a text-only conversation. Each turn
/// it optionally prepends one system message from the execution's config, then the messages
/// of prior INPUT and OUTPUT events in `Start::history` (journal order), then every current
/// input exactly once, and calls only `sink.model` with its configured model id. ID `chat`,
/// version `1`, STATELESS_REPLAY, fork-safe.
#[derive(Clone, Debug)]
pub struct ChatHarness {
    model: String,
}

impl ChatHarness {
    /// A chat harness asking for `model` on every call.
    pub fn new(model: impl Into<String>) -> Self {
        ChatHarness {
            model: model.into(),
        }
    }

    /// The model request of a turn (what `run` sends), or the config error.
    pub fn request(&self, start: &Start) -> Result<ModelRequest, ConfigError> {
        let prompt = parse_system_prompt(&start.config)?;
        let mut messages = Vec::with_capacity(start.history.len() + start.inputs.len() + 1);
        if let Some(p) = prompt {
            messages.push(Message::system(p));
        }
        // Audit and lifecycle events (MODEL_CALL, END, ERROR, LIFECYCLE, …) stay out.
        for ev in &start.history {
            if let EventBody::Input(m) | EventBody::Output(m) = &ev.body {
                messages.push(m.clone());
            }
        }
        messages.extend(start.inputs.iter().cloned());
        Ok(ModelRequest::new(messages).with_model(self.model.clone()))
    }
}

#[async_trait]
impl Harness for ChatHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor {
            id: "chat".into(),
            version: "1".into(),
            models: vec![self.model.clone()],
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
        })
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        // A rejected config fails the execution before any model call.
        let req = self
            .request(&start)
            .map_err(|e| HarnessError::Config(e.to_string()))?;
        sink.model(req).await?;
        Ok(())
    }
}
