//! What the simulated caller heard, turn by turn, and what the harness did wrong.

use std::fmt;

use crate::turn::TurnId;
use crate::turn_record::TurnRecord;

/// Completion reasons of a turn, as the simulator records them.
pub mod completion {
    /// The turn's reply was spoken to the end.
    pub const COMPLETED: &str = "completed";
    /// The caller spoke over it.
    pub const BARGE_IN: &str = "barge_in";
    /// A deadline expired (see `harness_error`): what jambonz records as
    /// `completion_reason: "harness_failure"` with a `harness_error`.
    pub const HARNESS_FAILURE: &str = "harness_failure";
    /// The call ended with the turn still open.
    pub const CALL_ENDED: &str = "call_ended";
}

/// `harness_error` values the simulator records. The spec's table of them was lost; these
/// are the simulator's names.
pub mod harness_error {
    /// No `reply:chunk` for the turn before the first-chunk deadline.
    pub const FIRST_CHUNK_TIMEOUT: &str = "first_chunk_timeout";
    /// No `reply:done` for the turn before the reply deadline.
    pub const REPLY_DONE_TIMEOUT: &str = "reply_done_timeout";
    /// A tool the harness called did not answer before the tool deadline.
    pub const TOOL_RESULT_TIMEOUT: &str = "tool_result_timeout";
    /// The harness closed the socket during the turn.
    pub const CONNECTION_CLOSED: &str = "connection_closed";
}

/// One line of what was said.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Line {
    /// The caller spoke.
    Caller {
        /// The turn it became.
        turn_id: TurnId,
        /// The words.
        text: String,
        /// When they started, since the call began.
        at_ms: u64,
    },
    /// A reply was played.
    Agent {
        /// The reply.
        reply_id: String,
        /// The turn it answered (none: unprompted).
        turn_id: Option<TurnId>,
        /// What the caller heard.
        heard: String,
        /// What was sent but not heard.
        unheard: String,
        /// Whether it was cut off (by the caller or by an interrupting reply).
        cut_off: bool,
        /// When it started playing, since the call began.
        at_ms: u64,
    },
}

/// How a turn went.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnSummary {
    /// The turn.
    pub turn_id: TurnId,
    /// `(greeting)` or what the caller said.
    pub input: String,
    /// From `turn:start` to the turn's first `reply:chunk`.
    pub first_chunk_ms: Option<u64>,
    /// See [`completion`].
    pub completion_reason: String,
    /// See [`harness_error`], with `completion_reason` `harness_failure`.
    pub harness_error: Option<String>,
    /// The turn record of the turn's `reply:done`.
    pub turn_record: Option<Box<TurnRecord>>,
}

/// Something the harness did that the spec does not allow (or that jambonz ignores).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// When, since the call began.
    pub at_ms: u64,
    /// What.
    pub kind: ViolationKind,
    /// Details.
    pub detail: String,
}

/// Kinds of [`Violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ViolationKind {
    /// A frame that is not a JSON message.
    Malformed,
    /// "There are no binary frames."
    Binary,
    /// A reply for a turn before its `turn:start` (refused with an error event).
    ReplyBeforeTurnStart,
    /// Something sent for a turn that was cancelled, failed or finished.
    ClosedTurn,
    /// An id reused within the call.
    DuplicateId,
    /// `interrupt` on a chunk that is not the reply's first.
    InterruptNotFirst,
    /// A turn record over 16 KB.
    TurnRecordTooLarge,
    /// A chunk or done for a reply that was refused or dropped.
    DeadReply,
    /// A frame after the call ended.
    AfterEnd,
    /// `delta.tool_calls` in a chunk: ignored, as the spec says.
    ToolCallsInChunk,
    /// A message type jambonz does not know: ignored.
    UnknownType,
    /// More new ids in one call than [`SimConfig::max_ids`](super::SimConfig::max_ids):
    /// the caller hung up.
    TooManyIds,
    /// A reply longer than [`SimConfig::max_reply_bytes`](super::SimConfig::max_reply_bytes):
    /// the rest was not spoken.
    ReplyTooLong,
    /// An unprompted reply without its `reply:done` before the reply deadline
    /// ([`Deadlines::reply_done`](super::Deadlines::reply_done), from its first chunk): cut
    /// off, so that it does not hold the floor for ever.
    ReplyDoneTimeout,
}

/// Everything the simulated call recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallTranscript {
    /// What was said, in order.
    pub lines: Vec<Line>,
    /// How each turn went, in turn order.
    pub turns: Vec<TurnSummary>,
    /// What the harness did wrong or jambonz ignored: the first
    /// [`MAX_VIOLATIONS`](super::MAX_VIOLATIONS).
    pub violations: Vec<Violation>,
    /// Violations past [`MAX_VIOLATIONS`](super::MAX_VIOLATIONS), counted, not kept.
    pub violations_dropped: u64,
    /// `session:end`'s reason and `duration_ms`, once the call ended.
    pub ended: Option<(String, u64)>,
    /// The close the harness sent, if it closed the socket.
    pub closed_by_harness: Option<(u16, String)>,
}

impl CallTranscript {
    /// The turn's summary.
    pub fn turn(&self, turn_id: TurnId) -> Option<&TurnSummary> {
        self.turns.iter().find(|t| t.turn_id == turn_id)
    }

    /// Everything the caller heard from the harness, in order.
    pub fn heard(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Agent { heard, .. } => Some(heard.as_str()),
                Line::Caller { .. } => None,
            })
            .collect()
    }

    /// Violations of one kind.
    pub fn violations_of(&self, kind: ViolationKind) -> Vec<&Violation> {
        self.violations.iter().filter(|v| v.kind == kind).collect()
    }

    /// Why the call does not pass, one line each (empty: it passes). A call passes when it
    /// ended, the harness did not close the socket mid-call, nothing broke a rule, every
    /// turn was answered (completed, barged in on, or open when the call ended) and the
    /// caller heard something.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.ended.is_none() {
            problems.push("the call did not end".to_owned());
        }
        if let Some((code, reason)) = &self.closed_by_harness {
            problems.push(format!(
                "the harness closed the socket mid-call ({code} {reason})"
            ));
        }
        for v in &self.violations {
            problems.push(format!("violation {:?}: {}", v.kind, v.detail));
        }
        if self.violations_dropped > 0 {
            problems.push(format!("and {} more violations", self.violations_dropped));
        }
        for t in &self.turns {
            let answered = [
                completion::COMPLETED,
                completion::BARGE_IN,
                completion::CALL_ENDED,
            ];
            if !answered.contains(&t.completion_reason.as_str()) {
                problems.push(format!(
                    "turn {} {} {}",
                    t.turn_id,
                    t.completion_reason,
                    t.harness_error.as_deref().unwrap_or_default()
                ));
            }
        }
        if self.heard().iter().all(|h| h.is_empty()) {
            problems.push("the caller heard nothing".to_owned());
        }
        problems
    }
}

impl fmt::Display for CallTranscript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            match l {
                Line::Caller {
                    turn_id,
                    text,
                    at_ms,
                } => writeln!(f, "{:>7} ms  caller  (turn {turn_id}): {text}", at_ms)?,
                Line::Agent {
                    reply_id,
                    turn_id,
                    heard,
                    unheard,
                    cut_off,
                    at_ms,
                } => {
                    let turn = turn_id.map_or("unprompted".to_owned(), |t| format!("turn {t}"));
                    write!(f, "{:>7} ms  agent   ({turn}, {reply_id}): {heard}", at_ms)?;
                    if *cut_off {
                        write!(f, "  [cut off; unheard: {unheard:?}]")?;
                    }
                    writeln!(f)?;
                }
            }
        }
        for t in &self.turns {
            write!(
                f,
                "turn {}: {:?} -> {}",
                t.turn_id, t.input, t.completion_reason
            )?;
            if let Some(ms) = t.first_chunk_ms {
                write!(f, ", first chunk {ms} ms")?;
            }
            if let Some(e) = &t.harness_error {
                write!(f, ", harness_error {e}")?;
            }
            writeln!(f)?;
        }
        for v in &self.violations {
            writeln!(f, "{:>7} ms  violation {:?}: {}", v.at_ms, v.kind, v.detail)?;
        }
        if self.violations_dropped > 0 {
            writeln!(f, "and {} more violations", self.violations_dropped)?;
        }
        if let Some((reason, ms)) = &self.ended {
            writeln!(f, "session:end {reason} after {ms} ms")?;
        }
        Ok(())
    }
}
