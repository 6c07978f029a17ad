//! Replies: `reply:chunk` (an OpenAI `chat.completion.chunk` inside) and `reply:done` with
//! the turn record.

use serde_json::Value;

use crate::turn::TurnId;
use crate::turn_record::TurnRecord;
use harness_core::wire_struct;

wire_struct! {
    /// `reply:chunk`: `{reply_id, turn_id?, chunk, interrupt?}`.
    ///
    /// A reply with a `turn_id` answers that turn; one without is the harness speaking on its
    /// own initiative. `interrupt: true` belongs on a reply's first chunk only.
    pub struct ReplyChunk [as_given] [skip "type"] {
        /// The reply, chosen by the harness, unique within the call.
        val reply_id: String = "reply_id",
        /// The turn it answers; none for an unprompted reply.
        val turn_id: Option<TurnId> = "turn_id",
        /// The text, in the shape of an OpenAI `chat.completion.chunk`.
        val chunk: Chunk = "chunk",
        /// On a first chunk: cut off whatever is playing and speak this reply now.
        val interrupt: Option<bool> = "interrupt",
    }
}

wire_struct! {
    /// An OpenAI `chat.completion.chunk`. Only `choices[].delta.content` is spoken; every
    /// other field (`id`, `model`, `usage`, …) is kept as given.
    pub struct Chunk [as_given] {
        /// The choices; jambonz speaks the first one's `delta.content`.
        val choices: Vec<Choice> = "choices",
    }
}

wire_struct! {
    /// One entry of `choices`.
    pub struct Choice [as_given] {
        /// The new text (and, ignored by jambonz, tool calls).
        val delta: Option<Delta> = "delta",
        /// Why the model stopped, on the last chunk.
        val finish_reason: Option<String> = "finish_reason",
    }
}

wire_struct! {
    /// A choice's `delta`.
    pub struct Delta [as_given] {
        /// Text to speak.
        val content: Option<String> = "content",
        /// Tool calls of the model. "Tool calls inside chunks (delta.tool_calls) are
        /// ignored": send `tool:call` instead.
        val tool_calls: Option<Value> = "tool_calls",
    }
}

impl Chunk {
    /// A chunk of text: `{choices: [{delta: {content}}]}`.
    pub fn text(content: impl Into<String>) -> Self {
        Chunk {
            choices: vec![Choice {
                delta: Some(Delta {
                    content: Some(content.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The text jambonz speaks: the first choice's `delta.content`.
    pub fn content(&self) -> &str {
        self.choices
            .first()
            .and_then(|c| c.delta.as_ref())
            .and_then(|d| d.content.as_deref())
            .unwrap_or("")
    }

    /// Whether any choice carries `delta.tool_calls` (which jambonz ignores).
    pub fn has_tool_calls(&self) -> bool {
        self.choices.iter().any(|c| {
            c.delta
                .as_ref()
                .and_then(|d| d.tool_calls.as_ref())
                .is_some_and(|t| !t.is_null())
        })
    }
}

wire_struct! {
    /// `reply:done`: `{reply_id, turn_id?, turn_record?}`: the reply is complete.
    pub struct ReplyDone [as_given] [skip "type"] {
        /// The reply.
        val reply_id: String = "reply_id",
        /// The turn it answered.
        val turn_id: Option<TurnId> = "turn_id",
        /// The harness's account of the turn.
        val turn_record: Option<TurnRecord> = "turn_record",
    }
}

/// A `reply:chunk` of text (`chunk: {choices: [{delta: {content}}]}`), written directly:
/// the same bytes as the [`HarnessMessage`](crate::HarnessMessage) of a [`ReplyChunk`] with
/// [`Chunk::text`], in one allocation of exactly the frame's size (the hot path of a reply:
/// no chunk built and dropped, and a frame that becomes a WebSocket message without a copy).
pub(crate) fn encode_text_chunk(
    reply_id: &str,
    turn_id: Option<TurnId>,
    text: &str,
    interrupt: bool,
) -> String {
    const HEAD: &str = r#"{"type":"reply:chunk","reply_id":"#;
    const TURN: &str = r#","turn_id":"#;
    const CHUNK: &str = r#","chunk":{"choices":[{"delta":{"content":"#;
    const CHUNK_END: &str = "}}]}";
    const INTERRUPT: &str = r#","interrupt":true"#;
    let mut turn_digits = [0u8; 20];
    let turn = turn_id.map(|t| {
        let mut n = t;
        let mut i = turn_digits.len();
        loop {
            i -= 1;
            turn_digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break i;
            }
        }
    });
    let len = HEAD.len()
        + escaped_len(reply_id)
        + turn.map_or(0, |i| TURN.len() + turn_digits.len() - i)
        + CHUNK.len()
        + escaped_len(text)
        + CHUNK_END.len()
        + if interrupt { INTERRUPT.len() } else { 0 }
        + 1;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(HEAD.as_bytes());
    // ok to ignore: writing a JSON string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, reply_id);
    if let Some(i) = turn {
        out.extend_from_slice(TURN.as_bytes());
        out.extend_from_slice(&turn_digits[i..]);
    }
    out.extend_from_slice(CHUNK.as_bytes());
    let _ = serde_json::to_writer(&mut out, text);
    out.extend_from_slice(CHUNK_END.as_bytes());
    if interrupt {
        out.extend_from_slice(INTERRUPT.as_bytes());
    }
    out.push(b'}');
    // serde_json writes valid UTF-8, and so do the constants.
    String::from_utf8(out).unwrap_or_default()
}

/// The length of `s` as a JSON string, quotes included, as serde_json escapes it.
fn escaped_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::frame::HarnessMessage;

    /// The direct encoding is the codec's, byte for byte, at exactly its length.
    #[test]
    fn a_text_chunk_is_encoded_as_the_codec_does() {
        let texts = [
            "",
            "We're open ",
            "quote \" back\\slash",
            "tab\tnew\nline\r\u{8}\u{c}\u{1}\u{1f}\u{7f}",
            "é ü 日本 🎉",
            "</script>",
        ];
        for text in texts {
            for turn_id in [None, Some(0), Some(7), Some(1234567890123), Some(u64::MAX)] {
                for interrupt in [false, true] {
                    let reply_id = "r\"1";
                    let codec = HarnessMessage::ReplyChunk(ReplyChunk {
                        reply_id: reply_id.to_owned(),
                        turn_id,
                        chunk: Chunk::text(text),
                        interrupt: interrupt.then_some(true),
                        extra: Default::default(),
                    })
                    .encode();
                    let direct = encode_text_chunk(reply_id, turn_id, text, interrupt);
                    assert_eq!(direct, codec);
                    assert_eq!(direct.len(), direct.capacity(), "{direct}");
                }
            }
        }
    }
}
