//! The conversation of one call, as the caller heard it.
//!
//! Replies are recorded as they are sent; after a `user_interruption` only what the caller
//! heard (`spoken`) is kept of the interrupted reply, as the spec's minimal harness does
//! ("keep only what the caller heard"). A reply of which nothing was heard is dropped.
//! Text sent on an interrupted reply after its `user_interruption` (the reply streams on
//! until its `turn:cancel` arrives) was not heard either, and is not added.
//!
//! Every turn gets the conversation before it as [`Start::history`](harness_core::Start::history),
//! a [`harness_core::History`]: a view of one shared list of journal events, not a copy.
//! [`CallHistory::journal`] appends what happened since the last turn to that list (in place,
//! unless a turn still running holds a view of it) and hands out the view, so starting a
//! turn costs nothing per past turn.
//!
//! ```
//! use harness_jambonz::history::CallHistory;
//! use harness_jambonz::event::UserInterruption;
//!
//! let mut h = CallHistory::new();
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
//!
//! // What the next turn gets: the events so far, shared.
//! let before_turn_3 = h.journal("CA1");
//! assert_eq!(before_turn_3.len(), 2);
//! assert_eq!(before_turn_3[1].execution_id, "CA1:2");
//! ```

use std::collections::VecDeque;
use std::sync::Arc;

use harness_core::event::{Event as JournalEvent, EventBody};
use harness_core::message::Message;

use crate::event::UserInterruption;
use crate::turn::TurnId;

/// One entry not yet in the shared list: what was said since the last turn started.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    /// The caller's words of a turn.
    User { turn_id: TurnId, text: String },
    /// A reply of the harness.
    Assistant {
        reply_id: String,
        turn_id: Option<TurnId>,
        text: String,
    },
}

impl Entry {
    fn message(&self) -> Message {
        match self {
            Entry::User { text, .. } => Message::user(text.clone()),
            Entry::Assistant { text, .. } => Message::assistant(text.clone()),
        }
    }

    fn into_event(self, call_sid: &str) -> JournalEvent {
        match self {
            Entry::User { turn_id, text } => JournalEvent::new(
                format!("{call_sid}:{turn_id}"),
                EventBody::Input(Message::user(text)),
            ),
            Entry::Assistant { turn_id, text, .. } => JournalEvent::new(
                match turn_id {
                    Some(t) => format!("{call_sid}:{t}"),
                    None => call_sid.to_owned(),
                },
                EventBody::Output(Message::assistant(text)),
            ),
        }
    }
}

/// The conversation of one call. Bounded: past `max_entries` the oldest entries go, half of
/// them at once (so that trimming, too, costs nothing per turn on average): a call keeps
/// between `max_entries / 2` and `max_entries` of its latest entries.
#[derive(Clone, Debug)]
pub struct CallHistory {
    /// Entries handed to turns already, as journal events: shared with the turns still
    /// running.
    shared: Arc<Vec<JournalEvent>>,
    /// The replies among `shared` (their sequence numbers), the latest
    /// [`MAX_SHARED_REPLIES`]: a reply can still be interrupted, or stream on, after the
    /// next turn started.
    shared_replies: VecDeque<(String, u64)>,
    /// Sequence number of `shared[0]` (entries trimmed so far).
    base: u64,
    /// Entries since the last [`journal`](Self::journal).
    tail: Vec<Entry>,
    max_entries: usize,
    /// The latest interrupted replies: what is sent on them later is not heard.
    interrupted: VecDeque<String>,
}

/// How many interrupted reply ids a [`CallHistory`] remembers.
const MAX_INTERRUPTED: usize = 16;

/// How many replies already handed to turns a [`CallHistory`] can still change.
const MAX_SHARED_REPLIES: usize = 16;

impl Default for CallHistory {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for CallHistory {
    fn eq(&self, other: &Self) -> bool {
        self.messages() == other.messages()
    }
}

impl CallHistory {
    /// An empty history keeping at most 200 entries.
    pub fn new() -> Self {
        Self::with_max_entries(200)
    }

    /// An empty history keeping at most `max_entries` entries (at least 1).
    pub fn with_max_entries(max_entries: usize) -> Self {
        CallHistory {
            shared: Arc::default(),
            shared_replies: VecDeque::new(),
            base: 0,
            tail: Vec::new(),
            max_entries: max_entries.max(1),
            interrupted: VecDeque::new(),
        }
    }

    fn push(&mut self, e: Entry) {
        if self.tail.capacity() == 0 {
            // A turn adds two: the caller's words and the reply.
            self.tail.reserve_exact(2);
        }
        self.tail.push(e);
        let len = self.len();
        if len > self.max_entries {
            // Keep the newest half (at least one): trimming happens once every
            // `max_entries / 2` entries, not on every one.
            self.trim(len - self.max_entries.div_ceil(2).max(1));
        }
    }

    /// Drops the `n` oldest entries.
    fn trim(&mut self, n: usize) {
        let from_shared = n.min(self.shared.len());
        if from_shared > 0 {
            match Arc::get_mut(&mut self.shared) {
                Some(v) => {
                    v.drain(..from_shared);
                }
                // A turn still holds the list: the rest goes into a new one.
                None => self.shared = Arc::new(self.shared[from_shared..].to_vec()),
            }
            self.base += from_shared as u64;
            let base = self.base;
            self.shared_replies.retain(|(_, seq)| *seq >= base);
        }
        let from_tail = (n - from_shared).min(self.tail.len());
        self.tail.drain(..from_tail);
    }

    /// Records what the caller said in a turn.
    pub fn user(&mut self, turn_id: TurnId, text: impl Into<String>) {
        self.push(Entry::User {
            turn_id,
            text: text.into(),
        });
    }

    /// The index in `shared` of a reply handed to turns already.
    fn shared_reply(&self, reply_id: &str) -> Option<usize> {
        let (_, seq) = self
            .shared_replies
            .iter()
            .rev()
            .find(|(r, _)| r == reply_id)?;
        seq.checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < self.shared.len())
    }

    /// Records text sent on a reply (appended to the reply's entry). Text for a reply
    /// already interrupted is not heard, and not recorded.
    pub fn assistant_delta(&mut self, reply_id: &str, turn_id: Option<TurnId>, delta: &str) {
        if self.interrupted.iter().any(|r| r == reply_id) {
            return;
        }
        for e in self.tail.iter_mut().rev() {
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
        if let Some(i) = self.shared_reply(reply_id) {
            // A reply that goes on after the next turn started (turns overlap): rare, and
            // a copy of the list when a turn still holds it.
            if let Some(ev) = Arc::make_mut(&mut self.shared).get_mut(i) {
                if let EventBody::Output(m) = &mut ev.body {
                    *m = Message::assistant(m.text() + delta);
                }
            }
            return;
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
            .tail
            .iter()
            .rposition(|e| matches!(e, Entry::Assistant { reply_id: r, .. } if r == reply_id));
        if let Some(pos) = pos {
            if ev.spoken.is_empty() {
                self.tail.remove(pos);
            } else if let Some(Entry::Assistant { text, .. }) = self.tail.get_mut(pos) {
                text.clone_from(&ev.spoken);
            }
            return true;
        }
        // An interruption that comes after the next turn started: rare (see above).
        let Some(i) = self.shared_reply(reply_id) else {
            return false;
        };
        let shared = Arc::make_mut(&mut self.shared);
        if ev.spoken.is_empty() {
            shared.remove(i);
            let removed = self.base + i as u64;
            self.shared_replies.retain(|(_, seq)| *seq != removed);
            for (_, seq) in &mut self.shared_replies {
                if *seq > removed {
                    *seq -= 1;
                }
            }
        } else if let Some(e) = shared.get_mut(i) {
            e.body = EventBody::Output(Message::assistant(ev.spoken.clone()));
        }
        true
    }

    /// The conversation as messages: user and assistant, oldest first (a copy).
    pub fn messages(&self) -> Vec<Message> {
        let shared = self.shared.iter().filter_map(|e| match &e.body {
            EventBody::Input(m) | EventBody::Output(m) => Some(m.clone()),
            _ => None,
        });
        shared.chain(self.tail.iter().map(Entry::message)).collect()
    }

    /// The conversation as journal events (`INPUT` for the caller, `OUTPUT` for replies),
    /// what [`Start::history`](harness_core::Start::history) holds; each event's
    /// `execution_id` is `<call_sid>:<turn_id>` (`<call_sid>` for a reply without a turn).
    ///
    /// The entries since the last call are appended to the list shared with earlier
    /// turns, in place when no turn holds it any more (otherwise into a copy, which the
    /// next call then appends to in place), and the returned history is a view of it: no
    /// copy of past turns.
    pub fn journal(&mut self, call_sid: &str) -> harness_core::History {
        if !self.tail.is_empty() {
            let seq = self.base + self.shared.len() as u64;
            for (i, e) in self.tail.iter().enumerate() {
                if let Entry::Assistant { reply_id, .. } = e {
                    if self.shared_replies.len() == MAX_SHARED_REPLIES {
                        self.shared_replies.pop_front();
                    }
                    self.shared_replies
                        .push_back((reply_id.clone(), seq + i as u64));
                }
            }
            let tail = std::mem::take(&mut self.tail);
            let shared = Arc::make_mut(&mut self.shared);
            shared.reserve(tail.len());
            shared.extend(tail.into_iter().map(|e| e.into_event(call_sid)));
        }
        let len = self.shared.len();
        harness_core::History::prefix(Arc::clone(&self.shared), len)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.shared.len() + self.tail.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn texts(h: &CallHistory) -> Vec<String> {
        h.messages().iter().map(Message::text).collect()
    }

    /// A turn that starts while no earlier turn runs appends to the shared list in place:
    /// the list is the same allocation turn after turn, and each turn's view is a prefix.
    #[test]
    fn turns_share_one_list() {
        let mut h = CallHistory::new();
        let mut last_ptr = None;
        for t in 1..=50u64 {
            let view = h.journal("CA1");
            assert_eq!(view.len() as u64, 2 * (t - 1));
            h.user(t, format!("q{t}"));
            h.assistant_delta(&format!("r{t}"), Some(t), &format!("a{t}"));
            // The turn is over: its view is dropped before the next turn starts.
            drop(view);
            let ptr = Arc::as_ptr(&h.shared);
            if t > 2 {
                // Appending in place keeps the same Arc (its Vec may grow).
                assert_eq!(Some(ptr), last_ptr);
            }
            last_ptr = Some(ptr);
        }
        let all = h.journal("CA1");
        assert_eq!(all.len(), 100);
        assert_eq!(all[98].execution_id, "CA1:50");
    }

    /// A view held by a running turn never changes, whatever happens after.
    #[test]
    fn a_running_turns_view_is_fixed() {
        let mut h = CallHistory::new();
        h.user(1, "hello");
        h.assistant_delta("r1", Some(1), "Hi");
        let v2 = h.journal("CA1");
        h.user(2, "open?");
        h.assistant_delta("r2", Some(2), "We're open eight to six.");
        let v3 = h.journal("CA1"); // turn 2 still runs: the list is copied
        // The reply of turn 2 streams on and is then interrupted after turn 3 started.
        h.assistant_delta("r1", Some(1), " there");
        assert!(h.interrupted(&UserInterruption {
            reply_id: Some("r2".into()),
            spoken: "We're open".into(),
            ..Default::default()
        }));
        assert_eq!(v2.len(), 2);
        assert_eq!(v2[1].body, EventBody::Output(Message::assistant("Hi")));
        assert_eq!(v3.len(), 4);
        assert_eq!(
            v3[3].body,
            EventBody::Output(Message::assistant("We're open eight to six."))
        );
        assert_eq!(texts(&h), ["hello", "Hi there", "open?", "We're open"]);
        // Nothing heard of a shared reply: it goes.
        assert!(h.interrupted(&UserInterruption {
            reply_id: Some("r1".into()),
            ..Default::default()
        }));
        assert_eq!(texts(&h), ["hello", "open?", "We're open"]);
        h.assistant_delta("r1", Some(1), " again"); // interrupted: not heard
        assert_eq!(texts(&h), ["hello", "open?", "We're open"]);
    }

    /// Past the bound, the oldest half goes at once; a held view keeps its events.
    #[test]
    fn trimming_is_by_halves() {
        let mut h = CallHistory::with_max_entries(10);
        let mut held = None;
        for t in 1..=30u64 {
            let v = h.journal("CA1");
            if t == 12 {
                held = Some(v);
            }
            h.user(t, format!("q{t}"));
            assert!(h.len() <= 10, "turn {t}: {}", h.len());
        }
        assert!(h.len() >= 5);
        assert_eq!(texts(&h).last().unwrap(), "q30");
        let held = held.unwrap();
        assert_eq!(held.last().unwrap().execution_id, "CA1:11");
        // Replies interrupted after they were trimmed are simply not found.
        assert!(!h.interrupted(&UserInterruption {
            reply_id: Some("r1".into()),
            ..Default::default()
        }));
    }
}
