//! Replies: `reply:chunk` (an OpenAI `chat.completion.chunk` inside) and `reply:done` with
//! the turn record.

use serde_json::Value;

use crate::turn::TurnId;
use crate::turn_record::TurnRecord;
use crate::wire::wire_struct;

wire_struct! {
    /// `reply:chunk`: `{reply_id, turn_id?, chunk, interrupt?}`.
    ///
    /// A reply with a `turn_id` answers that turn; one without is the harness speaking on its
    /// own initiative. `interrupt: true` belongs on a reply's first chunk only.
    pub struct ReplyChunk {
        skip: ["type"],
        lenient: false,
        /// The reply, chosen by the harness, unique within the call.
        pub reply_id: String = "reply_id",
        /// The turn it answers; none for an unprompted reply.
        pub turn_id: Option<TurnId> = "turn_id",
        /// The text, in the shape of an OpenAI `chat.completion.chunk`.
        pub chunk: Chunk = "chunk",
        /// On a first chunk: cut off whatever is playing and speak this reply now.
        pub interrupt: Option<bool> = "interrupt",
    }
}

wire_struct! {
    /// An OpenAI `chat.completion.chunk`. Only `choices[].delta.content` is spoken; every
    /// other field (`id`, `model`, `usage`, …) is kept as given.
    pub struct Chunk {
        skip: [],
        lenient: false,
        /// The choices; jambonz speaks the first one's `delta.content`.
        pub choices: Vec<Choice> = "choices",
    }
}

wire_struct! {
    /// One entry of `choices`.
    pub struct Choice {
        skip: [],
        lenient: false,
        /// The new text (and, ignored by jambonz, tool calls).
        pub delta: Option<Delta> = "delta",
        /// Why the model stopped, on the last chunk.
        pub finish_reason: Option<String> = "finish_reason",
    }
}

wire_struct! {
    /// A choice's `delta`.
    pub struct Delta {
        skip: [],
        lenient: false,
        /// Text to speak.
        pub content: Option<String> = "content",
        /// Tool calls of the model. "Tool calls inside chunks (delta.tool_calls) are
        /// ignored": send `tool:call` instead.
        pub tool_calls: Option<Value> = "tool_calls",
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
    pub struct ReplyDone {
        skip: ["type"],
        lenient: false,
        /// The reply.
        pub reply_id: String = "reply_id",
        /// The turn it answered.
        pub turn_id: Option<TurnId> = "turn_id",
        /// The harness's account of the turn.
        pub turn_record: Option<TurnRecord> = "turn_record",
    }
}
