//! What the simulated caller does, step by step.

use std::collections::VecDeque;
use std::time::Duration;

/// When a step happens.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum When {
    /// As soon as the step before it is done.
    Now,
    /// Once the call is quiet (nothing playing, queued or held, no turn open, no tool
    /// running, the caller silent) for this long: the caller waits for the answer.
    Quiet(Duration),
    /// This long after the next reply starts playing: the caller speaks over it (barge-in).
    /// If no reply comes and the call goes quiet (the turn failed, the reply was empty), the
    /// caller speaks after [`DEFAULT_PAUSE`] of quiet instead of waiting for ever.
    DuringReply(Duration),
}

/// What the caller does.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ScriptAction {
    /// The call connects: `turn:start` with `{type: "greeting"}`.
    Greeting,
    /// The caller says something: `speech:start`, partial transcripts (word by word, at the
    /// caller's speaking rate) unless `partials` is off, the final transcript, `turn:start`.
    Say {
        /// The words.
        text: String,
        /// Whether partial transcripts are sent.
        partials: bool,
    },
    /// A `silence` event.
    Silence,
    /// The caller hangs up: `session:end` (reason `caller_hangup`).
    HangUp,
    /// A raw text frame, sent as is (to test how a harness takes unknown or broken frames).
    Raw(String),
}

/// One step of a [`Script`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptStep {
    /// When.
    pub when: When,
    /// What.
    pub action: ScriptAction,
}

/// A scripted call. After the last step, once the call has been quiet for the configured
/// idle time, the caller hangs up.
///
/// ```
/// use std::time::Duration;
/// use harness_jambonz::simulator::Script;
///
/// // The spec's "A whole call": a greeting, a question, a barge-in.
/// let script = Script::new()
///     .greeting()
///     .say("When are you open")
///     .barge_in(Duration::from_millis(1100), "Thanks, bye");
/// assert_eq!(script.len(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Script {
    pub(crate) steps: VecDeque<ScriptStep>,
}

/// The pause a caller leaves after an answer before speaking.
pub const DEFAULT_PAUSE: Duration = Duration::from_millis(500);

impl Script {
    /// An empty script: the call connects and the caller hangs up when idle.
    pub fn new() -> Self {
        Script::default()
    }

    /// Adds a step.
    #[must_use]
    pub fn step(mut self, when: When, action: ScriptAction) -> Self {
        self.steps.push_back(ScriptStep { when, action });
        self
    }

    /// The greeting turn, at once.
    #[must_use]
    pub fn greeting(self) -> Self {
        self.step(When::Now, ScriptAction::Greeting)
    }

    /// The caller waits for the answer, pauses, then says `text` (with partials).
    #[must_use]
    pub fn say(self, text: impl Into<String>) -> Self {
        self.step(
            When::Quiet(DEFAULT_PAUSE),
            ScriptAction::Say {
                text: text.into(),
                partials: true,
            },
        )
    }

    /// The caller says `text` `after` the next reply starts playing: a barge-in.
    #[must_use]
    pub fn barge_in(self, after: Duration, text: impl Into<String>) -> Self {
        self.step(
            When::DuringReply(after),
            ScriptAction::Say {
                text: text.into(),
                partials: true,
            },
        )
    }

    /// A `silence` event once the call is quiet for `after`.
    #[must_use]
    pub fn silence(self, after: Duration) -> Self {
        self.step(When::Quiet(after), ScriptAction::Silence)
    }

    /// The caller hangs up once the call is quiet.
    #[must_use]
    pub fn hang_up(self) -> Self {
        self.step(When::Quiet(DEFAULT_PAUSE), ScriptAction::HangUp)
    }

    /// A raw frame, at once.
    #[must_use]
    pub fn raw(self, frame: impl Into<String>) -> Self {
        self.step(When::Now, ScriptAction::Raw(frame.into()))
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}
