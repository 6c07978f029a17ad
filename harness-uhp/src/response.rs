//! The response object: a task's status and output, as streamed in lifecycle events and as
//! stored on the server (`GET /v1/responses/{id}`, the source of truth).
//!
//! Shapes follow the 2026-08-11 JSON schema (`Response`, `OutputItem`, `ContentPart` as
//! [`OutputContent`], `Annotation`, `Usage` as [`ResponseUsage`]). Unknown item, part and
//! annotation types decode to an `Other` variant carrying their fields; unknown fields of
//! known shapes are kept in `extra`, so a value serializes back to what was received.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ErrorObject;
use harness_core::tagged_deserialize;
use harness_core::wire::{Key, Tagged, serialize_tagged};

/// The state of a task (schema `ResponseStatus`). The last four are terminal and never change.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResponseStatus {
    /// `in_progress`: the task is running.
    InProgress,
    /// `completed`: the work is done.
    Completed,
    /// `failed`: it could not be done; the response's `error` says why.
    Failed,
    /// `incomplete`: a budget stopped the work; usually worth continuing.
    Incomplete,
    /// `cancelled`: the client asked for a stop. Never reported as `failed`.
    Cancelled,
    /// A status this version of the protocol does not define, kept as sent.
    Other(String),
}

impl ResponseStatus {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            ResponseStatus::InProgress => "in_progress",
            ResponseStatus::Completed => "completed",
            ResponseStatus::Failed => "failed",
            ResponseStatus::Incomplete => "incomplete",
            ResponseStatus::Cancelled => "cancelled",
            ResponseStatus::Other(s) => s,
        }
    }

    /// Parses a wire name; unknown names become [`ResponseStatus::Other`].
    pub fn parse(s: &str) -> Self {
        match s {
            "in_progress" => ResponseStatus::InProgress,
            "completed" => ResponseStatus::Completed,
            "failed" => ResponseStatus::Failed,
            "incomplete" => ResponseStatus::Incomplete,
            "cancelled" => ResponseStatus::Cancelled,
            other => ResponseStatus::Other(other.to_owned()),
        }
    }

    /// Whether the status is one of the four terminal ones (`completed`, `failed`,
    /// `incomplete`, `cancelled`): a task in it will never change state again.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ResponseStatus::Completed
                | ResponseStatus::Failed
                | ResponseStatus::Incomplete
                | ResponseStatus::Cancelled
        )
    }
}

impl std::fmt::Display for ResponseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ResponseStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResponseStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Key::deserialize(d)?;
        Ok(ResponseStatus::parse(&s.0))
    }
}

/// A response object (schema `Response`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `resp_…`.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// Always `response`.
    #[serde(default = "response_object", deserialize_with = "object_or_response")]
    pub object: String,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// The task's status; authoritative over the name of the event that carried it.
    pub status: ResponseStatus,
    /// Non-null only when the status is `failed`.
    #[serde(default)]
    pub error: Option<ErrorObject>,
    /// Why the task stopped early, when `incomplete`.
    #[serde(default)]
    pub incomplete_details: Option<Value>,
    /// The response this one continues, if any.
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// The model that actually ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The output items, in order.
    #[serde(default, deserialize_with = "nullable")]
    pub output: Vec<OutputItem>,
    /// Whether the server stores the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Token usage; `null` when the server cannot account for it (never a fabricated 0).
    #[serde(default)]
    pub usage: Option<ResponseUsage>,
    /// Server metadata (`session_id`, `requested_model`, `model_fallback`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Fields this version does not define, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The fields of [`Response`] besides `status` and `output`.
const FIELDS: &[&str] = &[
    "id",
    "object",
    "created_at",
    "error",
    "incomplete_details",
    "previous_response_id",
    "model",
    "store",
    "usage",
    "metadata",
];

fn response_object() -> String {
    "response".to_owned()
}

/// A field whose `null` reads as its empty value. The schema has no `null` there (a string,
/// an array), but a client must not lose a whole response — a terminal event — over one:
/// the Python peer reads them as empty too. Applied to the response model's strings and
/// lists; the event's own fields (`delta`, `item_id`, the indices) stay strict.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn object_or_response<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(response_object))
}

impl Response {
    /// A response with this id and status and nothing else (for tests and servers).
    pub fn new(id: impl Into<String>, status: ResponseStatus) -> Self {
        Response {
            id: id.into(),
            object: response_object(),
            created_at: None,
            status,
            error: None,
            incomplete_details: None,
            previous_response_id: None,
            model: None,
            output: Vec::new(),
            store: None,
            usage: None,
            metadata: None,
            extra: Map::new(),
        }
    }

    /// Reads a response as leniently as a client can without guessing: when the strict
    /// reading fails, a peripheral field of the wrong JSON type (`created_at` as a float, a
    /// token count as a string, …) is left out — kept in `extra` when that serializes back
    /// to what was received — an `error` keeps its fields with scalars as text (`"code": 504`
    /// reads as `"504"`), and an output item that does not match its type's shape is kept as
    /// [`OutputItem::Other`]. `status` (and an `output` that is not a list) cannot be read
    /// around: those are still an error, the strict one.
    pub fn from_value_lenient(v: Value) -> Result<Response, serde_json::Error> {
        let strict = match Response::deserialize(&v) {
            Ok(r) => return Ok(r),
            Err(e) => e,
        };
        let Value::Object(mut obj) = v else {
            return Err(strict);
        };
        let output = match obj.remove("output") {
            Some(Value::Array(items)) => items.into_iter().map(OutputItem::lenient).collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(strict),
        };
        // The fields that cannot be read alone are set aside.
        let mut set_aside = Vec::new();
        for key in FIELDS {
            let Some(value) = obj.get(*key) else { continue };
            let mut probe = Map::new();
            probe.insert("status".to_owned(), Value::from("completed"));
            probe.insert((*key).to_owned(), value.clone());
            if Response::deserialize(Value::Object(probe)).is_err() {
                if let Some(value) = obj.remove(*key) {
                    set_aside.push((*key, value));
                }
            }
        }
        let mut r = Response::deserialize(Value::Object(obj)).map_err(|_| strict)?;
        r.output = output;
        for (key, value) in set_aside {
            match key {
                "error" => r.error = ErrorObject::lenient(value),
                // Skipped when absent, so kept as received.
                "created_at" | "model" | "store" | "metadata" => {
                    r.extra.insert(key.to_owned(), value);
                }
                _ => {} // `null` when written back: left out
            }
        }
        Ok(r)
    }

    /// The session the task ran in (`metadata.session_id`).
    pub fn session_id(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("session_id")?.as_str()
    }

    /// The assistant text: every `output_text` part of every `message` item, in order.
    pub fn output_text(&self) -> String {
        let mut out = String::new();
        for item in &self.output {
            if let OutputItem::Message(m) = item {
                for part in &m.content {
                    if let OutputContent::OutputText(t) = part {
                        out.push_str(&t.text);
                    }
                }
            }
        }
        out
    }

    /// The reasoning summary: every `summary_text` of every `reasoning` item, in order.
    pub fn reasoning_text(&self) -> String {
        let mut out = String::new();
        for item in &self.output {
            if let OutputItem::Reasoning(r) = item {
                for part in &r.summary {
                    if let OutputContent::SummaryText(t) = part {
                        out.push_str(&t.text);
                    }
                }
            }
        }
        out
    }

    /// The tools the agent invoked: every `function_call` item, in order.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCallItem> {
        self.output.iter().filter_map(|i| match i {
            OutputItem::FunctionCall(c) => Some(c),
            _ => None,
        })
    }

    /// Every annotation on every `output_text` part of every `message` item, in order.
    pub fn annotations(&self) -> impl Iterator<Item = &Annotation> {
        self.output
            .iter()
            .filter_map(|i| match i {
                OutputItem::Message(m) => Some(m.content.iter()),
                _ => None,
            })
            .flatten()
            .filter_map(|p| match p {
                OutputContent::OutputText(t) => Some(t.annotations.iter()),
                _ => None,
            })
            .flatten()
    }

    /// The artifacts: every `container_file_citation` annotation (the files the agent wrote).
    pub fn artifacts(&self) -> impl Iterator<Item = &ContainerFileCitation> {
        self.annotations()
            .filter_map(Annotation::as_container_file_citation)
    }
}

/// One output item (schema `OutputItem`). Clients must tolerate item types they do not know.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputItem {
    /// `message`: assistant text in `output_text` parts.
    Message(OutputMessage),
    /// `reasoning`: a reasoning summary.
    Reasoning(Reasoning),
    /// `function_call`: a tool the agent invoked.
    FunctionCall(FunctionCallItem),
    /// `function_call_output`: what the tool returned.
    FunctionCallOutput(FunctionCallOutput),
    /// An item type this crate does not know, with all its fields except `type`.
    Other {
        /// The item's `type`.
        item_type: String,
        /// Its other fields.
        fields: Map<String, Value>,
    },
}

impl OutputItem {
    /// The wire `type`.
    pub fn item_type(&self) -> &str {
        match self {
            OutputItem::Message(_) => "message",
            OutputItem::Reasoning(_) => "reasoning",
            OutputItem::FunctionCall(_) => "function_call",
            OutputItem::FunctionCallOutput(_) => "function_call_output",
            OutputItem::Other { item_type, .. } => item_type,
        }
    }

    /// The item's `id`, when it has one.
    pub fn id(&self) -> Option<&str> {
        match self {
            OutputItem::Message(m) => m.id.as_deref(),
            OutputItem::Reasoning(r) => r.id.as_deref(),
            OutputItem::FunctionCall(c) => c.id.as_deref(),
            OutputItem::FunctionCallOutput(o) => o.id.as_deref(),
            OutputItem::Other { fields, .. } => fields.get("id").and_then(Value::as_str),
        }
    }
}

impl OutputItem {
    /// An item as its type's shape when it has it, else as [`OutputItem::Other`] (its fields
    /// kept), so that one malformed item does not cost the response it is in.
    fn lenient(v: Value) -> OutputItem {
        if let Ok(item) = OutputItem::deserialize(&v) {
            return item;
        }
        let mut fields = match v {
            Value::Object(m) => m,
            other => Map::from_iter([("value".to_owned(), other)]),
        };
        let item_type = match fields.remove("type") {
            Some(Value::String(t)) => t,
            Some(other) => {
                fields.insert("type".to_owned(), other);
                String::new()
            }
            None => String::new(),
        };
        OutputItem::Other { item_type, fields }
    }
}

impl<'de> Tagged<'de> for OutputItem {
    const EXPECTING: &'static str = "an output item object";
    fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        Ok(match tag {
            "message" => OutputItem::Message(OutputMessage::deserialize(rest)?),
            "reasoning" => OutputItem::Reasoning(Reasoning::deserialize(rest)?),
            "function_call" => OutputItem::FunctionCall(FunctionCallItem::deserialize(rest)?),
            "function_call_output" => {
                OutputItem::FunctionCallOutput(FunctionCallOutput::deserialize(rest)?)
            }
            other => OutputItem::Other {
                item_type: other.to_owned(),
                fields: Map::deserialize(rest)?,
            },
        })
    }
}
tagged_deserialize!(OutputItem);

impl Serialize for OutputItem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OutputItem::Message(m) => serialize_tagged(s, "message", m),
            OutputItem::Reasoning(r) => serialize_tagged(s, "reasoning", r),
            OutputItem::FunctionCall(c) => serialize_tagged(s, "function_call", c),
            OutputItem::FunctionCallOutput(o) => serialize_tagged(s, "function_call_output", o),
            OutputItem::Other { item_type, fields } => serialize_tagged(s, item_type, fields),
        }
    }
}

/// A `message` item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputMessage {
    /// `msg_…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `in_progress` while streaming, then `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `assistant`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts, in order.
    #[serde(default, deserialize_with = "nullable")]
    pub content: Vec<OutputContent>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `reasoning` item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// `rs_…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The summary parts (`summary_text`), in order. The schema does not require a summary
    /// entry to carry `type`; one without it is read as a `summary_text` (and written back
    /// with that type).
    #[serde(default, deserialize_with = "summary_parts")]
    pub summary: Vec<OutputContent>,
    /// The item's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A reasoning summary entry: an [`OutputContent`], or a `summary_text` when it has no `type`.
struct SummaryPart(OutputContent);

impl<'de> Tagged<'de> for SummaryPart {
    const EXPECTING: &'static str = "a summary part object";
    fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        OutputContent::from_rest(tag, rest).map(SummaryPart)
    }
    fn untagged(fields: Map<String, Value>) -> Result<Self, serde_json::Error> {
        SummaryText::deserialize(Value::Object(fields))
            .map(|t| SummaryPart(OutputContent::SummaryText(t)))
    }
}
tagged_deserialize!(SummaryPart);

fn summary_parts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<OutputContent>, D::Error> {
    let parts = Option::<Vec<SummaryPart>>::deserialize(d)?.unwrap_or_default();
    Ok(parts.into_iter().map(|p| p.0).collect())
}

/// A `function_call` item: a tool the agent invoked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallItem {
    /// `fc_…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `call_…`: pairs the call with its `function_call_output`.
    #[serde(default, deserialize_with = "nullable")]
    pub call_id: String,
    /// The tool's name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The arguments, a JSON document as a string.
    #[serde(default, deserialize_with = "nullable")]
    pub arguments: String,
    /// The item's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `function_call_output` item: what a tool returned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutput {
    /// `fco_…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The `call_id` of the call this answers.
    #[serde(default, deserialize_with = "nullable")]
    pub call_id: String,
    /// The tool's output.
    #[serde(default)]
    pub output: Value,
    /// The item's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content part (schema `ContentPart`) or a reasoning summary part.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputContent {
    /// `output_text`: assistant text with its annotations.
    OutputText(OutputText),
    /// `summary_text`: one part of a reasoning summary.
    SummaryText(SummaryText),
    /// A part type this crate does not know, with its fields except `type`.
    Other {
        /// The part's `type`.
        part_type: String,
        /// Its other fields.
        fields: Map<String, Value>,
    },
}

impl OutputContent {
    /// The part's text, for the text-bearing types.
    pub fn text(&self) -> Option<&str> {
        match self {
            OutputContent::OutputText(t) => Some(&t.text),
            OutputContent::SummaryText(t) => Some(&t.text),
            OutputContent::Other { .. } => None,
        }
    }
}

impl<'de> Tagged<'de> for OutputContent {
    const EXPECTING: &'static str = "a content part object";
    fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        Ok(match tag {
            "output_text" => OutputContent::OutputText(OutputText::deserialize(rest)?),
            "summary_text" => OutputContent::SummaryText(SummaryText::deserialize(rest)?),
            other => OutputContent::Other {
                part_type: other.to_owned(),
                fields: Map::deserialize(rest)?,
            },
        })
    }
}
tagged_deserialize!(OutputContent);

impl Serialize for OutputContent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OutputContent::OutputText(t) => serialize_tagged(s, "output_text", t),
            OutputContent::SummaryText(t) => serialize_tagged(s, "summary_text", t),
            OutputContent::Other { part_type, fields } => serialize_tagged(s, part_type, fields),
        }
    }
}

/// An `output_text` part.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputText {
    /// The text.
    #[serde(default, deserialize_with = "nullable")]
    pub text: String,
    /// Its annotations (artifact citations).
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: Vec<Annotation>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `summary_text` part of a reasoning item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryText {
    /// The text.
    #[serde(default, deserialize_with = "nullable")]
    pub text: String,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An annotation on an `output_text` part (schema `Annotation`).
#[derive(Clone, Debug, PartialEq)]
pub enum Annotation {
    /// `container_file_citation`: a file the agent produced (an artifact).
    ContainerFileCitation(ContainerFileCitation),
    /// An annotation type this crate does not know, with its fields except `type`.
    Other {
        /// The annotation's `type`.
        annotation_type: String,
        /// Its other fields.
        fields: Map<String, Value>,
    },
}

impl Annotation {
    /// The citation, when this is a `container_file_citation`.
    pub fn as_container_file_citation(&self) -> Option<&ContainerFileCitation> {
        match self {
            Annotation::ContainerFileCitation(c) => Some(c),
            Annotation::Other { .. } => None,
        }
    }
}

impl<'de> Tagged<'de> for Annotation {
    const EXPECTING: &'static str = "an annotation object";
    fn from_rest<D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        Ok(match tag {
            "container_file_citation" => {
                Annotation::ContainerFileCitation(ContainerFileCitation::deserialize(rest)?)
            }
            other => Annotation::Other {
                annotation_type: other.to_owned(),
                fields: Map::deserialize(rest)?,
            },
        })
    }
}
tagged_deserialize!(Annotation);

impl Serialize for Annotation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Annotation::ContainerFileCitation(c) => {
                serialize_tagged(s, "container_file_citation", c)
            }
            Annotation::Other {
                annotation_type,
                fields,
            } => serialize_tagged(s, annotation_type, fields),
        }
    }
}

/// A `container_file_citation`: a file in the task's container, with where to download it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerFileCitation {
    /// `cntr_…`.
    #[serde(default, deserialize_with = "nullable")]
    pub container_id: String,
    /// `file_…`.
    #[serde(default, deserialize_with = "nullable")]
    pub file_id: String,
    /// The file's name.
    #[serde(default, deserialize_with = "nullable")]
    pub filename: String,
    /// `/v1/containers/{container_id}/files/{file_id}/content`, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
    /// Where the citation starts in the part's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_index: Option<i64>,
    /// Where it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_index: Option<i64>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token usage (schema `Usage`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseUsage {
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Their total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Tokens read from a prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Tokens written to a prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
