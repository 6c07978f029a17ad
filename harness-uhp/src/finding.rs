//! A finding: one message of the stream that did not decode to an event, and why. The
//! decoder reports it and goes on; the accumulator records it.

use harness_core::sse::SseError;

/// Something wrong with one message of the stream. The decoder stays usable: keep polling.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Finding {
    /// The SSE layer: an over-long line or event (skipped), or a final event that the stream
    /// ended inside, which is never dispatched.
    #[error(transparent)]
    Sse(#[from] SseError),
    /// The data is not JSON. A UHP event is one JSON object.
    #[error("event data is not JSON ({error}): {data}")]
    NotJson {
        /// The JSON parser's message.
        error: String,
        /// The start of the data.
        data: String,
    },
    /// The data is `[DONE]`: the OpenAI-style end sentinel, not a UHP event. UHP ends a
    /// stream with its terminal event; the sentinel is ignored.
    #[error("`[DONE]` sentinel, not a UHP event")]
    DoneSentinel,
    /// The data is JSON but not an object (`[1, 2]`, `42`, `"x"`).
    #[error("event data is JSON but not an object: {data}")]
    NotObject {
        /// The start of the data.
        data: String,
    },
    /// The object has no string `type`.
    #[error("event object has no string `type` (sequence_number {sequence_number:?})")]
    MissingType {
        /// Its `sequence_number`, when it had a valid one.
        sequence_number: Option<u64>,
    },
    /// A known event type whose fields do not match the schema (a field missing or of the
    /// wrong JSON type).
    #[error("`{event_type}` event does not match the schema: {error}")]
    InvalidEvent {
        /// The event's `type`.
        event_type: String,
        /// Its `sequence_number`, when it had a valid one.
        sequence_number: Option<u64>,
        /// What is wrong.
        error: String,
    },
}

impl Finding {
    /// The `sequence_number` of the message the finding is about, when it could be read: the
    /// event arrived, even if it could not be used, so it is not counted as missing.
    pub fn sequence_number(&self) -> Option<u64> {
        match self {
            Finding::MissingType { sequence_number }
            | Finding::InvalidEvent {
                sequence_number, ..
            } => *sequence_number,
            _ => None,
        }
    }
}

/// The longest excerpt of a payload (or of a message quoting it) a finding keeps.
const EXCERPT: usize = 256;

pub(crate) fn excerpt(data: &str) -> String {
    if data.len() <= EXCERPT {
        return data.to_owned();
    }
    let mut end = EXCERPT;
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &data[..end])
}
