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
