//! The conversation of one call, as the caller heard it.
//!
//! Replies are recorded as they are sent; after a `user_interruption` only what the caller
//! heard (`spoken`) is kept of the interrupted reply, as the spec's minimal harness does
//! ("keep only what the caller heard"). A reply of which nothing was heard is dropped.
//! Text sent on an interrupted reply after its `user_interruption` (the reply streams on
//! until its `turn:cancel` arrives) was not heard either, and is not added.
//!
//! ```
//! use harness_jambonz::history::History;
//! use harness_jambonz::event::UserInterruption;
//!
//! let mut h = History::new();
//! h.user(2, "When are you open");
//! h.assistant_delta("r2", Some(2), "We're open eight to six on weekdays.");
//! h.interrupted(&UserInterruption {
//!     reply_id: Some("r2".into()),
//!     spoken: "We're open eight".into(),
//!     unspoken: " to six on weekdays.".into(),
//!     ..Default::default()
//! });
//! let texts: Vec<String> = h.messages().iter().map(|m| m.text()).collect();
//! assert_eq!(texts, ["When are you open", "We're open eight"]);
//! ```

use std::collections::VecDeque;

use harness_core::event::{Event as JournalEvent, EventBody};
use harness_core::message::Message;

use crate::event::UserInterruption;
use crate::turn::TurnId;

/// One entry of the conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The caller's words of a turn.
    User {
        /// The turn.
        turn_id: TurnId,
        /// What they said.
        text: String,
    },
    /// A reply of the harness.
    Assistant {
        /// The reply.
        reply_id: String,
        /// The turn it answered.
        turn_id: Option<TurnId>,
        /// What was sent (or, after an interruption, what was heard).
        text: String,
    },
}

/// The conversation of one call. Bounded: past `max_entries` the oldest entries go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    entries: VecDeque<Entry>,
    max_entries: usize,
    /// The latest interrupted replies: what is sent on them later is not heard.
    interrupted: VecDeque<String>,
}

/// How many interrupted reply ids a [`History`] remembers.
const MAX_INTERRUPTED: usize = 16;

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

impl History {
    /// An empty history keeping at most 200 entries.
    pub fn new() -> Self {
        Self::with_max_entries(200)
    }

    /// An empty history keeping at most `max_entries` entries (at least 1).
    pub fn with_max_entries(max_entries: usize) -> Self {
        History {
            entries: VecDeque::new(),
            max_entries: max_entries.max(1),
            interrupted: VecDeque::new(),
        }
    }

    fn push(&mut self, e: Entry) {
        if self.entries.len() == self.max_entries {
            self.entries.pop_front();
        }
        self.entries.push_back(e);
    }

    /// Records what the caller said in a turn.
    pub fn user(&mut self, turn_id: TurnId, text: impl Into<String>) {
        self.push(Entry::User {
            turn_id,
            text: text.into(),
        });
    }

    /// Records text sent on a reply (appended to the reply's entry). Text for a reply
    /// already interrupted is not heard, and not recorded.
    pub fn assistant_delta(&mut self, reply_id: &str, turn_id: Option<TurnId>, delta: &str) {
        if self.interrupted.iter().any(|r| r == reply_id) {
            return;
        }
        for e in self.entries.iter_mut().rev() {
            if let Entry::Assistant {
                reply_id: r, text, ..
            } = e
            {
                if r == reply_id {
                    text.push_str(delta);
                    return;
                }
            }
        }
        self.push(Entry::Assistant {
            reply_id: reply_id.to_owned(),
            turn_id,
            text: delta.to_owned(),
        });
    }

    /// Applies a `user_interruption`: the reply keeps only what was spoken; a reply of which
    /// nothing was heard is removed; text sent on it later is not recorded. Returns whether
    /// the reply was found.
    pub fn interrupted(&mut self, ev: &UserInterruption) -> bool {
        let Some(reply_id) = ev.reply_id.as_deref() else {
            return false;
        };
        if !self.interrupted.iter().any(|r| r == reply_id) {
            if self.interrupted.len() == MAX_INTERRUPTED {
                self.interrupted.pop_front();
            }
            self.interrupted.push_back(reply_id.to_owned());
        }
        let pos = self
            .entries
            .iter()
            .rposition(|e| matches!(e, Entry::Assistant { reply_id: r, .. } if r == reply_id));
        let Some(pos) = pos else { return false };
        if ev.spoken.is_empty() {
            self.entries.remove(pos);
        } else if let Some(Entry::Assistant { text, .. }) = self.entries.get_mut(pos) {
            text.clone_from(&ev.spoken);
        }
        true
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// The conversation as messages: user and assistant, oldest first.
    pub fn messages(&self) -> Vec<Message> {
        self.entries
            .iter()
            .map(|e| match e {
                Entry::User { text, .. } => Message::user(text.clone()),
                Entry::Assistant { text, .. } => Message::assistant(text.clone()),
            })
            .collect()
    }

    /// The conversation as journal events (`INPUT` for the caller, `OUTPUT` for replies),
    /// what [`Start::history`](harness_core::Start::history) holds.
    pub fn journal(&self, call_sid: &str) -> Vec<JournalEvent> {
        self.entries
            .iter()
            .map(|e| match e {
                Entry::User { turn_id, text } => JournalEvent::new(
                    format!("{call_sid}:{turn_id}"),
                    EventBody::Input(Message::user(text.clone())),
                ),
                Entry::Assistant { turn_id, text, .. } => JournalEvent::new(
                    match turn_id {
                        Some(t) => format!("{call_sid}:{t}"),
                        None => call_sid.to_owned(),
                    },
                    EventBody::Output(Message::assistant(text.clone())),
                ),
            })
            .collect()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
