//! The turn record: the harness's account of how it handled a turn, sent on `reply:done`.
//!
//! Spec: "Every field is optional, and anything else you add is kept as given. Up to 16 KB;
//! do not put caller secrets in it, since it is stored." The known fields are typed; any
//! other field, and a known field whose value does not have the documented shape (the spec's
//! own minimal harness sends `model_calls: 1`), is kept in `extra` as given and written back.

use serde_json::Value;

use harness_core::wire_struct;

/// The largest serialized turn record jambonz stores: "Up to 16 KB" (read as 16 × 1024 bytes
/// of JSON).
pub const TURN_RECORD_MAX_BYTES: usize = 16 * 1024;

wire_struct! {
    /// `turn_record` on `reply:done`.
    ///
    /// ```
    /// use harness_jambonz::turn_record::{TurnRecord, ModelCallRecord};
    ///
    /// let mut record = TurnRecord::default().with_route("chat");
    /// record.model_calls_mut().push(ModelCallRecord {
    ///     model: Some("gpt-4.1".into()),
    ///     first_token_ms: Some(420),
    ///     ms: Some(900),
    ///     ..Default::default()
    /// });
    /// assert!(record.check_size().is_ok());
    /// let json = serde_json::to_string(&record).unwrap();
    /// assert_eq!(json, r#"{"route":"chat","model_calls":[{"model":"gpt-4.1","first_token_ms":420,"ms":900}]}"#);
    /// ```
    pub struct TurnRecord [as_given] {
        /// How the turn was routed, e.g. `chat` or `procedure`.
        lenient route: Option<String> = "route",
        /// Procedures the turn ran.
        lenient procedures: Option<Vec<String>> = "procedures",
        /// Steps the harness took, with their duration.
        lenient steps: Option<Vec<StepRecord>> = "steps",
        /// Model calls made for the turn.
        lenient model_calls: Option<Vec<ModelCallRecord>> = "model_calls",
        /// Tools of the harness's own that it ran.
        lenient own_tools: Option<Vec<OwnToolRecord>> = "own_tools",
        /// Flags, e.g. `identity_verified`.
        lenient flags: Option<Vec<String>> = "flags",
        /// Free text.
        lenient note: Option<String> = "note",
    }
}

wire_struct! {
    /// One entry of `steps`: `{ "name": "retrieve", "ms": 120, "detail": { "documents": 4 } }`.
    pub struct StepRecord [as_given] {
        /// The step's name.
        lenient name: Option<String> = "name",
        /// How long it took.
        lenient ms: Option<u64> = "ms",
        /// Anything about it.
        lenient detail: Option<Value> = "detail",
    }
}

wire_struct! {
    /// One entry of `model_calls`.
    pub struct ModelCallRecord [as_given] {
        /// The model id.
        lenient model: Option<String> = "model",
        /// What the call was for, e.g. `router` or `reply`.
        lenient purpose: Option<String> = "purpose",
        /// Prompt tokens.
        lenient input_tokens: Option<u64> = "input_tokens",
        /// Completion tokens.
        lenient output_tokens: Option<u64> = "output_tokens",
        /// Time to the first token.
        lenient first_token_ms: Option<u64> = "first_token_ms",
        /// Time to the last token.
        lenient ms: Option<u64> = "ms",
    }
}

wire_struct! {
    /// One entry of `own_tools`: a tool the harness ran itself.
    pub struct OwnToolRecord [as_given] {
        /// The tool's name.
        lenient name: Option<String> = "name",
        /// Whether it succeeded.
        lenient ok: Option<bool> = "ok",
        /// How long it took.
        lenient ms: Option<u64> = "ms",
    }
}

/// A turn record over the spec's size limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("turn_record is {size} bytes of JSON, over the {limit}-byte limit")]
pub struct TurnRecordTooLarge {
    /// Its serialized size.
    pub size: usize,
    /// The limit.
    pub limit: usize,
}

impl TurnRecord {
    /// Sets `route`.
    #[must_use]
    pub fn with_route(mut self, route: impl Into<String>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// Sets `note`.
    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// `steps`, created empty if unset.
    pub fn steps_mut(&mut self) -> &mut Vec<StepRecord> {
        self.steps.get_or_insert_with(Vec::new)
    }

    /// `model_calls`, created empty if unset.
    pub fn model_calls_mut(&mut self) -> &mut Vec<ModelCallRecord> {
        self.model_calls.get_or_insert_with(Vec::new)
    }

    /// `own_tools`, created empty if unset.
    pub fn own_tools_mut(&mut self) -> &mut Vec<OwnToolRecord> {
        self.own_tools.get_or_insert_with(Vec::new)
    }

    /// `flags`, created empty if unset.
    pub fn flags_mut(&mut self) -> &mut Vec<String> {
        self.flags.get_or_insert_with(Vec::new)
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == TurnRecord::default()
    }

    /// Its size as serialized JSON, in bytes.
    pub fn serialized_size(&self) -> usize {
        let mut counter = ByteCounter(0);
        // ok to ignore: writing to a counter cannot fail and a Map/Value always serializes.
        let _ = serde_json::to_writer(&mut counter, self);
        counter.0
    }

    /// Checks the spec's limit: "Up to 16 KB" of serialized JSON.
    pub fn check_size(&self) -> Result<(), TurnRecordTooLarge> {
        let size = self.serialized_size();
        if size > TURN_RECORD_MAX_BYTES {
            Err(TurnRecordTooLarge {
                size,
                limit: TURN_RECORD_MAX_BYTES,
            })
        } else {
            Ok(())
        }
    }
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
