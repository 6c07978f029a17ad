//! Turns: `turn:start` with its input, `speech:start` and `transcript` (for starting early),
//! `turn:cancel`.

use harness_core::wire_struct;

/// A turn id, chosen by jambonz (`turn_id: 1`, `2`, …).
pub type TurnId = u64;

/// Known `turn:cancel` reasons.
pub mod cancel_reason {
    /// The caller spoke over the reply.
    pub const BARGE_IN: &str = "barge_in";
}

wire_struct! {
    /// `turn:start`: `{turn_id, input}`. The harness answers the turn with a reply.
    pub struct TurnStart [as_given] [skip "type"] {
        /// The call's id.
        val call_sid: Option<String> = "call_sid",
        /// The turn.
        val turn_id: Option<TurnId> = "turn_id",
        /// What started it.
        val input: TurnInput = "input",
    }
}

wire_struct! {
    /// A turn's input: `{type: "greeting"}`, `{type: "speech", text, language}`, or another
    /// type, kept as given.
    pub struct TurnInput [as_given] {
        /// The input type: `greeting`, `speech`, …
        val kind: String = "type",
        /// What the caller said (speech).
        val text: Option<String> = "text",
        /// The language it was recognized in (speech).
        val language: Option<String> = "language",
    }
}

impl TurnStart {
    /// [`from_fields_lenient`](Self::from_fields_lenient), with the `input` object read
    /// leniently too (its odd fields kept in the input's `extra`).
    pub(crate) fn from_fields_lenient_with_input(
        mut fields: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        let input = match fields.remove("input") {
            Some(serde_json::Value::Object(m)) => Some(TurnInput::from_fields_lenient(m)),
            Some(other) => {
                fields.insert("input".into(), other);
                None
            }
            None => None,
        };
        let mut t = TurnStart::from_fields_lenient(fields);
        if let Some(input) = input {
            t.input = input;
        }
        t
    }
}

/// What kind of input started a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputKind<'a> {
    /// The call connected.
    Greeting,
    /// The caller said something.
    Speech,
    /// A type this version does not know.
    Other(&'a str),
}

impl TurnInput {
    /// `{type: "greeting"}`.
    pub fn greeting() -> Self {
        TurnInput {
            kind: "greeting".into(),
            ..Default::default()
        }
    }

    /// `{type: "speech", text, language}`.
    pub fn speech(text: impl Into<String>, language: Option<String>) -> Self {
        TurnInput {
            kind: "speech".into(),
            text: Some(text.into()),
            language,
            ..Default::default()
        }
    }

    /// Its kind.
    pub fn kind(&self) -> InputKind<'_> {
        match self.kind.as_str() {
            "greeting" => InputKind::Greeting,
            "speech" => InputKind::Speech,
            other => InputKind::Other(other),
        }
    }

    /// The caller's words, for a speech input.
    pub fn speech_text(&self) -> Option<&str> {
        match self.kind() {
            InputKind::Speech => self.text.as_deref(),
            _ => None,
        }
    }
}

wire_struct! {
    /// `speech:start`: `{turn_id}`: the caller started speaking; the turn's text follows.
    pub struct SpeechStart [as_given] [skip "type"] {
        /// The call's id.
        val call_sid: Option<String> = "call_sid",
        /// The turn the speech will become.
        val turn_id: Option<TurnId> = "turn_id",
    }
}

wire_struct! {
    /// `transcript`: `{turn_id, text, final}`: recognized speech, partial or final.
    pub struct Transcript [as_given] [skip "type"] {
        /// The call's id.
        val call_sid: Option<String> = "call_sid",
        /// The turn.
        val turn_id: Option<TurnId> = "turn_id",
        /// The text so far.
        val text: String = "text",
        /// Whether this segment is final.
        val is_final: bool = "final",
    }
}

wire_struct! {
    /// `turn:cancel`: `{turn_id, reason: "barge_in"}`. Send nothing more for the turn.
    pub struct TurnCancel [as_given] [skip "type"] {
        /// The call's id.
        val call_sid: Option<String> = "call_sid",
        /// The cancelled turn.
        val turn_id: Option<TurnId> = "turn_id",
        /// Why, e.g. [`cancel_reason::BARGE_IN`].
        val reason: Option<String> = "reason",
    }
}
