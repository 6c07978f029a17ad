//! A [`ModelRequest`] as the JSON body of `POST /chat/completions`, streamed.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::message::{
    FilePart, Message, ModelRequest, Part, Role, ToolChoiceMode, ToolDefinition, ToolResult,
};

/// Top-level fields the codec writes itself; a parameter of the same name is not sent.
const RESERVED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
];

/// Parameters whose value is text even when it reads as JSON (`"user": "42"` stays a
/// string); an array or an object is still sent as JSON (`"stop": "[\"\\n\\n\"]"`).
const TEXT_PARAMS: &[&str] = &[
    "user",
    "stop",
    "reasoning_effort",
    "service_tier",
    "verbosity",
    "prompt_cache_key",
    "safety_identifier",
];

/// The body of a streamed Chat Completions request for `req`, as a JSON value.
///
/// - `model`: the `model` argument (the transport passes its configured model; the request's
///   own `model` is a harness's label, which a provider may not know).
/// - `messages`: each [`Message`] in order, with its role (`system`, `user`, `assistant`,
///   `tool`, or an unknown role as given). Text parts become `content` (a string when the
///   message is only text, else an array of `text`, `image_url` and `file` parts; a data part
///   is sent as its JSON text). An assistant's tool calls become `tool_calls`
///   (`{"id", "type": "function", "function": {"name", "arguments"}}`, the arguments as JSON
///   text) with `content: null` when it said nothing. Each tool result becomes its own
///   `{"role": "tool", "tool_call_id", "content"}` message after the message that holds it:
///   the output object as JSON text, a failure as `{"error": "…"}`. Reasoning parts are not
///   sent (DeepSeek refuses `reasoning_content` in input; other servers ignore it).
/// - `tools`: each [`ToolDefinition`] as `{"type": "function", "function": {"name",
///   "description", "parameters"}}` (parameters: its input schema, omitted without one).
/// - `tool_choice`: `auto`, `none`, `required`, or `{"type": "function", "function":
///   {"name"}}` for a named required tool; omitted when unset or when no tool is offered.
/// - `stream: true` and `stream_options: {"include_usage": true}` (the usage chunk).
/// - every entry of `params`: a value that reads as JSON is sent as that JSON
///   (`"temperature": "0.2"` → `0.2`, `"max_tokens": "256"` → `256`,
///   `"response_format": "{\"type\":\"json_object\"}"` → the object), anything else as a
///   string; `user`, `stop`, `reasoning_effort`, `service_tier`, `verbosity`,
///   `prompt_cache_key` and `safety_identifier` stay strings unless they read as an array or
///   object. A parameter named like a field above is ignored.
///
/// ```
/// use harness_core::message::{Message, ModelRequest, ToolDefinition};
/// use harness_core::openai::request_json;
/// use serde_json::json;
///
/// let mut req = ModelRequest::new(vec![Message::system("Be brief."), Message::user("Hours?")])
///     .with_tools(vec![ToolDefinition::new("get_hours", "Opening hours")]);
/// req.params.insert("temperature".into(), "0.2".into());
/// assert_eq!(request_json(&req, "gpt-4.1-mini"), json!({
///     "model": "gpt-4.1-mini",
///     "messages": [
///         {"role": "system", "content": "Be brief."},
///         {"role": "user", "content": "Hours?"}
///     ],
///     "tools": [{"type": "function", "function": {"name": "get_hours", "description": "Opening hours"}}],
///     "stream": true,
///     "stream_options": {"include_usage": true},
///     "temperature": 0.2
/// }));
/// ```
pub fn request_json(req: &ModelRequest, model: &str) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        push_message(&mut messages, m);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(tool_json).collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = req.tool_choice.as_ref().and_then(|c| match c.mode {
            ToolChoiceMode::Unspecified => None,
            ToolChoiceMode::Auto => Some(json!("auto")),
            ToolChoiceMode::None => Some(json!("none")),
            ToolChoiceMode::Required if c.name.is_empty() => Some(json!("required")),
            ToolChoiceMode::Required => {
                Some(json!({"type": "function", "function": {"name": c.name}}))
            }
        }) {
            body.insert("tool_choice".into(), choice);
        }
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    for (k, v) in &req.params {
        if !RESERVED.contains(&k.as_str()) {
            body.insert(k.clone(), param_value(k, v));
        }
    }
    Value::Object(body)
}

/// [`request_json`] as the bytes to send (`Content-Type: application/json`).
///
/// ```
/// use harness_core::message::{Message, ModelRequest};
/// use harness_core::openai::request_body;
///
/// let body = request_body(&ModelRequest::new(vec![Message::user("Hi")]), "llama3.2");
/// let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
/// assert_eq!(v["messages"][0]["content"], "Hi");
/// assert_eq!(v["stream"], true);
/// ```
pub fn request_body(req: &ModelRequest, model: &str) -> Vec<u8> {
    request_json(req, model).to_string().into_bytes()
}

fn param_value(key: &str, raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ (Value::Array(_) | Value::Object(_))) => v,
        Ok(v) if !TEXT_PARAMS.contains(&key) => v,
        _ => Value::String(raw.to_owned()),
    }
}

fn tool_json(t: &ToolDefinition) -> Value {
    let mut f = Map::new();
    f.insert("name".into(), Value::String(t.name.clone()));
    if !t.description.is_empty() {
        f.insert("description".into(), Value::String(t.description.clone()));
    }
    if let Some(schema) = &t.input_schema {
        f.insert("parameters".into(), Value::Object(schema.clone()));
    }
    json!({"type": "function", "function": f})
}

/// Appends the wire messages of one message: its own (if it has content or tool calls), then
/// one `tool` message per tool result.
fn push_message(out: &mut Vec<Value>, m: &Message) {
    let mut content: Vec<Value> = Vec::new();
    let mut only_text = true;
    let mut calls: Vec<Value> = Vec::new();
    let mut results: Vec<&ToolResult> = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text(t) => content.push(json!({"type": "text", "text": t.text})),
            Part::Data(d) => {
                let text = Value::Object(d.data.clone()).to_string();
                content.push(json!({"type": "text", "text": text}));
            }
            Part::File(f) => {
                let (part, text) = file_part(f);
                only_text &= text;
                content.push(part);
            }
            Part::Reasoning(_) => {}
            Part::ToolCall(c) => calls.push(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.tool, "arguments": Value::Object(c.args.clone()).to_string()},
            })),
            Part::ToolResult(r) => results.push(r),
        }
    }
    let has_own = !content.is_empty() || !calls.is_empty();
    if has_own && m.role != Role::Tool {
        let mut msg = Map::new();
        msg.insert("role".into(), Value::String(m.role.as_str().to_owned()));
        let content = if content.is_empty() {
            Value::Null
        } else if only_text {
            let mut text = String::new();
            for p in &content {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Value::String(text)
        } else {
            Value::Array(content)
        };
        msg.insert("content".into(), content);
        if !calls.is_empty() {
            msg.insert("tool_calls".into(), Value::Array(calls));
        }
        out.push(Value::Object(msg));
    } else if m.parts.is_empty() && m.role != Role::Tool {
        // An empty message keeps its place (a server may require alternating roles).
        out.push(json!({"role": m.role.as_str(), "content": ""}));
    }
    for r in results {
        out.push(json!({"role": "tool", "tool_call_id": r.id, "content": tool_content(r)}));
    }
}

/// A file part as a content part, and whether it is text (a URI-only non-image file is
/// named in a text part: Chat Completions has no file-by-URL part).
fn file_part(f: &FilePart) -> (Value, bool) {
    let data_url = f.bytes.as_ref().map(|b| {
        let mime = if f.mime.is_empty() {
            "application/octet-stream"
        } else {
            &f.mime
        };
        format!(
            "data:{mime};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )
    });
    if f.mime.starts_with("image/") {
        let url = data_url.unwrap_or_else(|| f.uri.clone());
        return (
            json!({"type": "image_url", "image_url": {"url": url}}),
            false,
        );
    }
    match data_url {
        Some(data) => {
            let mut file = Map::new();
            if !f.name.is_empty() {
                file.insert("filename".into(), Value::String(f.name.clone()));
            }
            file.insert("file_data".into(), Value::String(data));
            (json!({"type": "file", "file": file}), false)
        }
        None => (
            json!({"type": "text", "text": format!("[file: {}]", f.uri)}),
            true,
        ),
    }
}

/// The `content` of a tool message: the output as JSON text, or the failure.
fn tool_content(r: &ToolResult) -> String {
    if r.is_error {
        let error = if r.error.is_empty() {
            "the tool failed"
        } else {
            &r.error
        };
        return json!({"error": error}).to_string();
    }
    if let Some(out) = &r.output {
        return Value::Object(out.clone()).to_string();
    }
    let text: String = r
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    if !text.is_empty() {
        return text;
    }
    if !r.output_uri.is_empty() {
        return json!({"output_uri": r.output_uri}).to_string();
    }
    "{}".to_owned()
}
