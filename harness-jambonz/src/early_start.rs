//! Starting early: "speech:start and transcript let a harness start work before the turn
//! ends … Send nothing for the turn until its turn:start, then compare the turn's text with
//! what you started from: if it matches, stream the draft at once; if the caller said more,
//! redo it."
//!
//! [`EarlyStart`] holds drafts keyed by the final transcript they were made from. At
//! `turn:start` it says whether the turn's text matches a draft (take it and stream it) or
//! not (redo). Texts are compared after normalization: case, punctuation and runs of
//! whitespace do not count.
//!
//! ```
//! use harness_jambonz::early_start::{EarlyStart, Verdict};
//!
//! let mut early = EarlyStart::new();
//! early.speech_started(2);
//! // a final transcript arrives: start a draft from its text
//! if let Some(text) = early.final_transcript(2, "When are you open", true) {
//!     early.insert_draft(2, &text, format!("draft for {text}"));
//! }
//! match early.turn_started(2, "When are you open?") {
//!     Verdict::Matches(draft) => assert_eq!(draft, "draft for When are you open"),
//!     other => panic!("{other:?}"),
//! }
//! ```

use crate::turn::TurnId;

/// What to do at `turn:start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<D> {
    /// The turn's text matches a draft: stream it at once.
    Matches(D),
    /// There were drafts, but the caller said more (or something else): redo.
    Redo {
        /// The texts the dropped drafts were made from.
        drafted_from: Vec<String>,
    },
    /// No draft for this turn.
    NoDraft,
}

/// Drafts for the turn being spoken. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct EarlyStart<D> {
    turn: Option<TurnId>,
    drafts: Vec<(String, String, D)>,
    max_drafts: usize,
}

impl<D> Default for EarlyStart<D> {
    fn default() -> Self {
        Self::new()
    }
}

/// Lowercase, letters and digits only, words separated by one space.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().any(char::is_alphanumeric))
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(
            word.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase),
        );
    }
    out
}

impl<D> EarlyStart<D> {
    /// No drafts; at most 4 drafts held per turn.
    pub fn new() -> Self {
        EarlyStart {
            turn: None,
            drafts: Vec::new(),
            max_drafts: 4,
        }
    }

    /// `speech:start` for a turn: drafts of any other turn are dropped.
    pub fn speech_started(&mut self, turn_id: TurnId) {
        if self.turn != Some(turn_id) {
            self.turn = Some(turn_id);
            self.drafts.clear();
        }
    }

    /// A `transcript`: returns the text to start a draft from when it is final and no
    /// draft of the same text is held.
    pub fn final_transcript(
        &mut self,
        turn_id: TurnId,
        text: &str,
        is_final: bool,
    ) -> Option<String> {
        self.speech_started(turn_id);
        if !is_final {
            return None;
        }
        let key = normalize(text);
        if key.is_empty() || self.drafts.iter().any(|(k, _, _)| *k == key) {
            return None;
        }
        Some(text.to_owned())
    }

    /// Holds a draft made from `text` for the turn (dropped if the turn is not the current
    /// one, or if `text` has no words: a draft from nothing matches no turn). The oldest
    /// draft goes past the limit.
    pub fn insert_draft(&mut self, turn_id: TurnId, text: &str, draft: D) {
        if self.turn != Some(turn_id) {
            return;
        }
        let key = normalize(text);
        if key.is_empty() {
            return;
        }
        if self.drafts.len() == self.max_drafts {
            self.drafts.remove(0);
        }
        self.drafts.push((key, text.to_owned(), draft));
    }

    /// Whether a draft is held for the turn.
    pub fn has_draft(&self, turn_id: TurnId) -> bool {
        self.turn == Some(turn_id) && !self.drafts.is_empty()
    }

    /// `turn:start` with the turn's text: the matching draft, or redo. All drafts go.
    #[must_use = "the drafts are taken: a matching one is only in the verdict"]
    pub fn turn_started(&mut self, turn_id: TurnId, text: &str) -> Verdict<D> {
        let drafts = std::mem::take(&mut self.drafts);
        let current = self.turn.take() == Some(turn_id);
        if !current || drafts.is_empty() {
            return Verdict::NoDraft;
        }
        let key = normalize(text);
        let mut drafted_from = Vec::new();
        for (k, original, d) in drafts.into_iter().rev() {
            if k == key {
                return Verdict::Matches(d);
            }
            drafted_from.push(original);
        }
        drafted_from.reverse();
        Verdict::Redo { drafted_from }
    }
}
