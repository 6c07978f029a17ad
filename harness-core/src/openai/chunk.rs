//! The `chat.completion.chunk` objects of a streamed Chat Completion, as serde reads them:
//! borrowed where the JSON has no escapes, every field optional, unknown fields skipped
//! (`obfuscation`, `system_fingerprint`, llama.cpp's `timings`, logprobs…).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// One `data:` payload of the stream: a chunk, a usage-only chunk, or an error object.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Option<Cow<'a, str>>,
    /// `chat.completion.chunk`, or `error` for vLLM's top-level error objects.
    #[serde(default, borrow)]
    pub object: Option<Cow<'a, str>>,
    /// Missing, `null` (vLLM's usage chunk) and `[]` (OpenAI's) are all "no choice".
    #[serde(default, borrow, deserialize_with = "null_as_empty")]
    pub choices: Vec<Choice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// `{"error": {...}}` (OpenAI, Ollama, vLLM ≥ 0.5) or `{"error": "text"}`.
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    /// vLLM's top-level error object (`"object":"error"`) carries these beside `object`.
    #[serde(default)]
    pub message: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    pub kind: Option<serde_json::Value>,
    #[serde(default)]
    pub code: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(default)]
    pub index: u32,
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(default, borrow)]
    pub content: Option<Text<'a>>,
    /// DeepSeek, vLLM before 0.11, llama.cpp.
    #[serde(default, borrow)]
    pub reasoning_content: Option<Text<'a>>,
    /// Ollama, vLLM ≥ 0.11, OpenRouter.
    #[serde(default, borrow)]
    pub reasoning: Option<Text<'a>>,
    /// OpenAI's refusal text (structured outputs): streamed as answer text.
    #[serde(default, borrow)]
    pub refusal: Option<Text<'a>>,
    #[serde(default, borrow, deserialize_with = "null_as_empty")]
    pub tool_calls: Vec<ToolCallDelta<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ToolCallDelta<'a> {
    /// Missing on some servers that send each call whole: the position in the array then.
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub function: Option<FunctionDelta<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    /// A fragment of the JSON text (an object, from servers that send it parsed).
    #[serde(default, borrow)]
    pub arguments: Option<Text<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A text field, read leniently: a string (borrowed when it has no escapes), `null`, an array
/// of content parts (`[{"type":"text","text":"…"}]`, as Mistral streams `content`; the `text`
/// of each part, joined), or an object (tool arguments some servers send parsed: its JSON
/// text).
#[derive(Debug, Default)]
pub(super) struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, null, an array of text parts or an object")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = String::new();
        while let Some(part) = seq.next_element::<TextPart<'de>>()? {
            if let Some(t) = part.text {
                out.push_str(&t.0);
            }
        }
        Ok(Text(Cow::Owned(out)))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let v = serde_json::Map::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Text(Cow::Owned(serde_json::Value::Object(v).to_string())))
    }
}

/// One element of a content-part array: its `text`, if it has one (other fields, such as
/// `type`, are skipped).
#[derive(Deserialize)]
struct TextPart<'a> {
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
}
