//! Park and drive again: the record of a turn's effects that lets a host resume a turn
//! after an approval or an answer, without the agent knowing.
//!
//! A gated tool call or a question *parks* the turn: the sink returns
//! [`SinkError::ApprovalParked`] or [`SinkError::AwaitingAnswer`], the agent returns it from
//! `run`, and the host keeps the turn. When the decision comes, the host runs the agent
//! again with the same [`Start`](crate::Start). Everything the turn already did is served
//! from its [`Tape`] — model completions, tool results, answers — and nothing it already
//! showed is shown again; at the point where it parked, the call now finds its decision and
//! the turn goes on live. This is agentsessions' replay, in miniature, for hosts that have no
//! journal: a harness that is deterministic given its inputs and what the host answered
//! (agentsessions' I0) resumes exactly. A harness that is not gets
//! [`SinkError::Diverged`], never a wrong answer.
//!
//! [`Taped`] wraps a host's live sink and keeps the tape; the host stores the tape with the
//! turn (in memory, or in its durable log so a parked turn survives a restart).
//!
//! ```
//! use harness_core::message::{Message, ModelRequest};
//! use harness_core::model::ScriptedModel;
//! use harness_core::tape::{Tape, Taped};
//! use harness_core::testing::RecordingSink;
//! use harness_core::EventSink;
//!
//! let mut live = RecordingSink::new(ScriptedModel::new().reply("Hello!"));
//! let mut tape = Tape::new();
//! futures::executor::block_on(async {
//!     let mut sink = Taped::new(&mut live, &mut tape);
//!     sink.model(ModelRequest::new(vec![Message::user("hi")])).await.unwrap();
//!     sink.output(" (said live)").await.unwrap();
//! });
//! assert_eq!(tape.len(), 2);
//!
//! // Driven again: the completion comes from the tape, nothing is said twice.
//! futures::executor::block_on(async {
//!     let mut sink = Taped::new(&mut live, &mut tape);
//!     let again = sink.model(ModelRequest::new(vec![Message::user("hi")])).await.unwrap();
//!     assert_eq!(again.message.text(), "Hello!");
//!     sink.output(" (said live)").await.unwrap();
//!     assert!(!sink.is_replaying());
//! });
//! assert_eq!(live.model_calls(), 1);
//! assert_eq!(live.spoken_text(), "Hello! (said live)");
//! ```

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::harness::{EventSink, SinkError};
use crate::interaction::{
    Answer, Command, CommandResult, Feature, Handoff, Question, StateUpdate, Step,
};
use crate::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use crate::model::ModelError;

/// One thing a turn did, as its tape keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TapeEntry {
    /// `sink.model` and what it returned.
    Model {
        /// The completion, or why the call failed.
        result: Result<ModelResponse, ModelError>,
    },
    /// `sink.tool_call` and its result.
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool.
        tool: String,
        /// What the host answered (a denial included).
        result: ToolResult,
    },
    /// `sink.ask` and the answer.
    Answer {
        /// The answer.
        answer: Answer,
    },
    /// `sink.command` and its result.
    Command {
        /// The command's name.
        name: String,
        /// What the platform answered.
        result: CommandResult,
    },
    /// Something the turn showed (output, a report, usage, reasoning, state, a step, a
    /// hand-off): shown once, skipped when the turn is driven again.
    Shown {
        /// Which sink method.
        what: Shown,
    },
}

/// Which sink method a [`TapeEntry::Shown`] stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Shown {
    /// `sink.output`.
    Output,
    /// `sink.report`.
    Report,
    /// `sink.usage`.
    Usage,
    /// `sink.reasoning`.
    Reasoning,
    /// `sink.state`.
    State,
    /// `sink.step`.
    Step,
    /// `sink.handoff`.
    Handoff,
}

/// The effects of one turn, in order. Serializable, so a host can store it with the turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tape {
    entries: Vec<TapeEntry>,
}

impl Tape {
    /// An empty tape (a turn that has done nothing yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the turn has done nothing yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[TapeEntry] {
        &self.entries
    }

    /// Forgets everything (the turn is over; the next one starts a new tape).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// An [`EventSink`] that serves a turn's recorded effects from its [`Tape`], then goes on
/// live through `inner`, recording what the turn does (see the [module docs](self)).
///
/// Calls that park ([`SinkError::is_parked`]) or fail are not recorded: driven again, the
/// turn makes them again, and this time the host has the decision.
pub struct Taped<'a> {
    inner: &'a mut dyn EventSink,
    tape: &'a mut Tape,
    pos: usize,
}

impl std::fmt::Debug for Taped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taped")
            .field("pos", &self.pos)
            .field("len", &self.tape.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Taped<'a> {
    /// Drives a turn through `inner`, serving `tape` first.
    pub fn new(inner: &'a mut dyn EventSink, tape: &'a mut Tape) -> Self {
        Taped {
            inner,
            tape,
            pos: 0,
        }
    }

    /// Whether calls are still being served from the tape.
    pub fn is_replaying(&self) -> bool {
        self.pos < self.tape.entries.len()
    }

    /// The next recorded entry, when replaying.
    fn next(&mut self) -> Option<&TapeEntry> {
        let e = self.tape.entries.get(self.pos)?;
        self.pos += 1;
        Some(e)
    }

    fn record(&mut self, entry: TapeEntry) {
        self.tape.entries.push(entry);
        self.pos = self.tape.entries.len();
    }

    fn diverged(&self, expected: &TapeEntry, got: &str) -> SinkError {
        let what = match expected {
            TapeEntry::Model { .. } => "sink.model".to_owned(),
            TapeEntry::ToolCall { tool, id, .. } => format!("sink.tool_call({tool}, id {id})"),
            TapeEntry::Answer { .. } => "sink.ask".to_owned(),
            TapeEntry::Command { name, .. } => format!("sink.command({name})"),
            TapeEntry::Shown { what } => format!("sink.{what:?}").to_lowercase(),
        };
        SinkError::Diverged(format!(
            "call {} of the turn: it did {what} before, {got} now",
            self.pos
        ))
    }

    /// When replaying, checks that the next entry is a [`TapeEntry::Shown`] of kind `what`
    /// (`Some(Ok)`: skip the call) or reports the divergence; `None` when live.
    fn replay_shown(&mut self, what: Shown) -> Option<Result<(), SinkError>> {
        let e = self.next()?.clone();
        Some(match e {
            TapeEntry::Shown { what: w } if w == what => Ok(()),
            other => Err(self.diverged(&other, &format!("sink.{what:?}").to_lowercase())),
        })
    }
}

#[async_trait]
impl EventSink for Taped<'_> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        if let Some(e) = self.next() {
            return match e {
                TapeEntry::Model { result } => result.clone().map_err(SinkError::Model),
                other => {
                    let other = other.clone();
                    Err(self.diverged(&other, "sink.model"))
                }
            };
        }
        match self.inner.model(req).await {
            Ok(r) => {
                self.record(TapeEntry::Model {
                    result: Ok(r.clone()),
                });
                Ok(r)
            }
            Err(SinkError::Model(e)) => {
                self.record(TapeEntry::Model {
                    result: Err(e.clone()),
                });
                Err(SinkError::Model(e))
            }
            Err(e) => Err(e),
        }
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Output) {
            return r;
        }
        self.inner.output(delta).await?;
        self.record(TapeEntry::Shown {
            what: Shown::Output,
        });
        Ok(())
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        if let Some(e) = self.next() {
            return match e {
                TapeEntry::ToolCall { id, tool, result }
                    if *id == call.id && *tool == call.tool =>
                {
                    Ok(result.clone())
                }
                other => {
                    let other = other.clone();
                    Err(self.diverged(
                        &other,
                        &format!("sink.tool_call({}, id {})", call.tool, call.id),
                    ))
                }
            };
        }
        let (id, tool) = (call.id.clone(), call.tool.clone());
        let result = self.inner.tool_call(call).await?;
        self.record(TapeEntry::ToolCall {
            id,
            tool,
            result: result.clone(),
        });
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Report) {
            return r;
        }
        self.inner.report(result).await?;
        self.record(TapeEntry::Shown {
            what: Shown::Report,
        });
        Ok(())
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Usage) {
            return r;
        }
        self.inner.usage(usage).await?;
        self.record(TapeEntry::Shown { what: Shown::Usage });
        Ok(())
    }

    fn supports(&self, feature: Feature) -> bool {
        self.inner.supports(feature)
    }

    async fn ask(&mut self, question: Question) -> Result<Answer, SinkError> {
        if let Some(e) = self.next() {
            return match e {
                TapeEntry::Answer { answer } => Ok(answer.clone()),
                other => {
                    let other = other.clone();
                    Err(self.diverged(&other, "sink.ask"))
                }
            };
        }
        let mut question = question;
        if question.id.is_empty() {
            // Its place in the turn: the same when the turn is driven again.
            question.id = format!("q{}", self.pos);
        }
        let answer = self.inner.ask(question).await?;
        self.record(TapeEntry::Answer {
            answer: answer.clone(),
        });
        Ok(answer)
    }

    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Handoff) {
            return r;
        }
        self.inner.handoff(handoff).await?;
        self.record(TapeEntry::Shown {
            what: Shown::Handoff,
        });
        Ok(())
    }

    async fn command(&mut self, command: Command) -> Result<CommandResult, SinkError> {
        if let Some(e) = self.next() {
            return match e {
                TapeEntry::Command { name, result } if *name == command.name => Ok(result.clone()),
                other => {
                    let other = other.clone();
                    Err(self.diverged(&other, &format!("sink.command({})", command.name)))
                }
            };
        }
        let name = command.name.clone();
        let result = self.inner.command(command).await?;
        self.record(TapeEntry::Command {
            name,
            result: result.clone(),
        });
        Ok(result)
    }

    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Reasoning) {
            return r;
        }
        self.inner.reasoning(delta).await?;
        self.record(TapeEntry::Shown {
            what: Shown::Reasoning,
        });
        Ok(())
    }

    async fn state(&mut self, update: StateUpdate) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::State) {
            return r;
        }
        self.inner.state(update).await?;
        self.record(TapeEntry::Shown { what: Shown::State });
        Ok(())
    }

    async fn step(&mut self, step: Step) -> Result<(), SinkError> {
        if let Some(r) = self.replay_shown(Shown::Step) {
            return r;
        }
        self.inner.step(step).await?;
        self.record(TapeEntry::Shown { what: Shown::Step });
        Ok(())
    }
}
