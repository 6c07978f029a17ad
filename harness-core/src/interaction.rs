//! What an agent can do beyond model calls, text and tools, where its host's protocol offers
//! it: ask a person a question, hand the conversation off, send a platform command, stream
//! reasoning, publish state, mark steps.
//!
//! Each is an [`EventSink`](crate::EventSink) method with a default that answers
//! [`SinkError::Unsupported`](crate::SinkError::Unsupported): a host that cannot do a thing
//! says so with a typed error, never a silent no-op. An agent asks first with
//! [`EventSink::supports`](crate::EventSink::supports), or handles the error.
//!
//! | [`Feature`] | jambonz | TanStack | agentsessions |
//! | --- | --- | --- | --- |
//! | [`Approvals`](Feature::Approvals) (a person decides a gated call) | no: the host's policy decides | `harness.wait.opened` kind `approval`, the `resolve` input | `APPROVAL_REQUEST`, park, `approve` |
//! | [`Questions`](Feature::Questions) | no | `harness.question`, the `answer` input | no |
//! | [`Handoff`](Feature::Handoff) | a platform command, where configured | `harness.handoff` | no |
//! | [`Commands`](Feature::Commands) | `command` + `command:result` | no | no |
//! | [`Reasoning`](Feature::Reasoning) | no | `REASONING_*` | reasoning parts journaled |
//! | [`State`](Feature::State) | no | `STATE_SNAPSHOT` / `STATE_DELTA` | no |
//! | [`Steps`](Feature::Steps) | no | `STEP_STARTED` / `STEP_FINISHED` | no |
//!
//! ```
//! use harness_core::interaction::{Feature, Question};
//! use harness_core::model::ScriptedModel;
//! use harness_core::testing::RecordingSink;
//! use harness_core::{EventSink, SinkError};
//!
//! // A unit-test host without questions, as jambonz is:
//! let mut sink = RecordingSink::new(ScriptedModel::new()).without(Feature::Questions);
//! assert!(!sink.supports(Feature::Questions));
//! let asked = futures::executor::block_on(sink.ask(Question::new("Which day?")));
//! assert_eq!(asked, Err(SinkError::Unsupported(Feature::Questions)));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::JsonObject;

/// Something beyond model calls, text and tools that a host may offer an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Feature {
    /// A person decides gated tool calls (elsewhere the host's policy does, and a gated call
    /// is still never run silently).
    Approvals,
    /// [`EventSink::ask`](crate::EventSink::ask): a question a person answers.
    Questions,
    /// [`EventSink::handoff`](crate::EventSink::handoff): the conversation goes to a person
    /// or another agent.
    Handoff,
    /// [`EventSink::command`](crate::EventSink::command): a platform command (jambonz
    /// `hangup`, …).
    Commands,
    /// [`EventSink::reasoning`](crate::EventSink::reasoning): reasoning text, shown apart
    /// from the answer.
    Reasoning,
    /// [`EventSink::state`](crate::EventSink::state): shared state snapshots and deltas.
    State,
    /// [`EventSink::step`](crate::EventSink::step): named steps of the turn.
    Steps,
}

impl Feature {
    /// Every feature.
    pub const ALL: [Feature; 7] = [
        Feature::Approvals,
        Feature::Questions,
        Feature::Handoff,
        Feature::Commands,
        Feature::Reasoning,
        Feature::State,
        Feature::Steps,
    ];

    /// Its name, as serialized (`approvals`, `questions`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::Approvals => "approvals",
            Feature::Questions => "questions",
            Feature::Handoff => "handoff",
            Feature::Commands => "commands",
            Feature::Reasoning => "reasoning",
            Feature::State => "state",
            Feature::Steps => "steps",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A question for a person ([`EventSink::ask`](crate::EventSink::ask)).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Question {
    /// Its id. Leave it empty: the host gives one that is the same when a parked turn is
    /// driven again (TanStack's `questionId`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// What to ask, for a person.
    pub message: String,
    /// The JSON Schema of the answer, when it is not free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<JsonObject>,
    /// Whether the answer is a secret (a client hides it as it is typed, and the host keeps
    /// it out of the visible transcript).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

impl Question {
    /// A free-text question.
    pub fn new(message: impl Into<String>) -> Self {
        Question {
            message: message.into(),
            ..Question::default()
        }
    }

    /// Sets the JSON Schema of the answer.
    #[must_use]
    pub fn with_schema(mut self, schema: JsonObject) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Marks the answer as a secret.
    #[must_use]
    pub fn secret(mut self) -> Self {
        self.secret = true;
        self
    }
}

/// A person's answer to a [`Question`].
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Answer {
    /// The question it answers.
    pub question_id: String,
    /// The answer: a string for a free-text question, else what its schema says.
    pub value: Value,
}

impl Answer {
    /// An answer to `question_id`.
    pub fn new(question_id: impl Into<String>, value: impl Into<Value>) -> Self {
        Answer {
            question_id: question_id.into(),
            value: value.into(),
        }
    }

    /// The answer as text, when it is a string.
    pub fn text(&self) -> Option<&str> {
        self.value.as_str()
    }
}

/// Who takes the conversation over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandoffTarget {
    /// A person.
    Human,
    /// Another agent, by name.
    Agent(String),
}

/// A hand-off of the conversation ([`EventSink::handoff`](crate::EventSink::handoff)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Handoff {
    /// Who takes over.
    pub to: HandoffTarget,
    /// A note for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Handoff {
    /// A hand-off to a person.
    pub fn to_human() -> Self {
        Handoff {
            to: HandoffTarget::Human,
            note: None,
        }
    }

    /// A hand-off to another agent.
    pub fn to_agent(name: impl Into<String>) -> Self {
        Handoff {
            to: HandoffTarget::Agent(name.into()),
            note: None,
        }
    }

    /// Adds a note.
    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// A platform command ([`EventSink::command`](crate::EventSink::command)): on jambonz,
/// `hangup`, `play`, `listen`, …
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Command {
    /// The command's name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub args: JsonObject,
}

impl Command {
    /// A command with no arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Command {
            name: name.into(),
            args: JsonObject::new(),
        }
    }

    /// `hangup`, with a reason.
    pub fn hangup(reason: impl Into<String>) -> Self {
        Command::new("hangup").with_arg("reason", reason.into())
    }

    /// Adds an argument.
    #[must_use]
    pub fn with_arg(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.args.insert(key.into(), value.into());
        self
    }
}

/// The platform's answer to a [`Command`] (jambonz `command:result`).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct CommandResult {
    /// Whether the command was carried out.
    pub ok: bool,
    /// Why not, when the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Anything else the platform answered, kept as given.
    #[serde(default, skip_serializing_if = "JsonObject::is_empty")]
    pub data: JsonObject,
}

/// A change of the state a turn shares with its client
/// ([`EventSink::state`](crate::EventSink::state)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StateUpdate {
    /// The whole state (AG-UI `STATE_SNAPSHOT`).
    Snapshot(Value),
    /// RFC 6902 JSON Patch operations on the state (AG-UI `STATE_DELTA`).
    Delta(Vec<Value>),
}

/// A named step of a turn ([`EventSink::step`](crate::EventSink::step)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Step {
    /// The step started (AG-UI `STEP_STARTED`).
    Started(String),
    /// The step finished (AG-UI `STEP_FINISHED`).
    Finished(String),
}
