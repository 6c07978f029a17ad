//! Assembling text and tool calls out of deltas: each part's text in `sequence_number`
//! order however its deltas arrived, and a function call from its events.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::response::FunctionCallItem;

/// Text gathered from deltas for one part, in `sequence_number` order.
///
/// Deltas are appended as they arrive while their numbers increase. A delta can only arrive
/// late into a gap of the sequence, so the text is kept as runs of consecutive numbers (one
/// mark per run, not per delta); a late delta is placed before the first run that starts
/// after it, when the text is read.
#[derive(Clone, Debug, Default)]
pub(super) struct PartText {
    /// Deltas appended in order of arrival while their numbers increase.
    pub(super) text: String,
    /// `(first sequence_number, start offset in text)` of each run of consecutive numbers.
    runs: Vec<(u64, usize)>,
    /// Deltas that arrived after a higher-numbered one of the same part.
    late: Vec<(u64, String)>,
    /// The number of the last appended delta.
    last_seq: Option<u64>,
    /// A `done` event gave the whole text; deltas no longer matter.
    done: bool,
}

impl PartText {
    pub(super) fn push(&mut self, seq: Option<u64>, delta: &str) {
        if self.done {
            return;
        }
        let s = seq.or(self.last_seq).unwrap_or(0);
        match self.last_seq {
            Some(last) if s < last => {
                self.late.push((s, delta.to_owned()));
                return;
            }
            Some(last) if s == last || s == last + 1 => {}
            _ => self.runs.push((s, self.text.len())),
        }
        self.text.push_str(delta);
        self.last_seq = Some(s);
    }

    pub(super) fn set_done(&mut self, text: &str) {
        // The done events of one part repeat its text (`output_text.done`, then
        // `content_part.done`, then `output_item.done`): read, not written again.
        if self.done && self.text == text {
            return;
        }
        self.text.clear();
        self.text.push_str(text);
        self.runs = Vec::new();
        self.late = Vec::new();
        self.done = true;
    }

    pub(super) fn assembled(&self) -> Cow<'_, str> {
        if self.late.is_empty() {
            return Cow::Borrowed(&self.text);
        }
        let mut pieces: Vec<(u64, &str)> = Vec::with_capacity(self.runs.len() + self.late.len());
        for (i, &(s, start)) in self.runs.iter().enumerate() {
            let end = self.runs.get(i + 1).map_or(self.text.len(), |r| r.1);
            pieces.push((s, self.text.get(start..end).unwrap_or("")));
        }
        pieces.extend(self.late.iter().map(|(s, t)| (*s, t.as_str())));
        pieces.sort_by_key(|p| p.0); // stable: equal numbers keep arrival order
        Cow::Owned(pieces.into_iter().map(|p| p.1).collect())
    }
}

/// Text parts keyed by (output_index, content or summary index), with a cache of the last
/// part touched (deltas of one part come in runs).
#[derive(Clone, Debug, Default)]
pub(super) struct Parts {
    index: HashMap<(u64, u64), usize>,
    parts: Vec<((u64, u64), PartText)>,
    last: Option<((u64, u64), usize)>,
}

impl Parts {
    pub(super) fn get(&mut self, key: (u64, u64)) -> &mut PartText {
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let next = self.parts.len();
                let i = *self.index.entry(key).or_insert(next);
                if i == next {
                    self.parts.push((key, PartText::default()));
                }
                self.last = Some((key, i));
                i
            }
        };
        &mut self.parts[i].1 // ok: i comes from the index, which only holds valid positions
    }

    pub(super) fn joined(&self) -> Cow<'_, str> {
        match self.parts.as_slice() {
            [] => Cow::Borrowed(""),
            [(_, p)] => p.assembled(),
            _ => {
                let mut sorted: Vec<&((u64, u64), PartText)> = self.parts.iter().collect();
                sorted.sort_by_key(|(k, _)| *k);
                Cow::Owned(sorted.iter().map(|(_, p)| p.assembled()).collect())
            }
        }
    }
}

/// A function call being assembled from its events.
#[derive(Clone, Debug, Default)]
pub(super) struct CallState {
    pub(super) id: Option<String>,
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) status: Option<String>,
    pub(super) arguments: PartText,
    pub(super) done: Option<FunctionCallItem>,
}

impl CallState {
    pub(super) fn to_call(&self) -> FunctionCallItem {
        if let Some(done) = &self.done {
            return done.clone();
        }
        FunctionCallItem {
            id: self.id.clone(),
            call_id: self.call_id.clone(),
            name: self.name.clone(),
            arguments: self.arguments.assembled().into_owned(),
            status: self.status.clone(),
            extra: Default::default(),
        }
    }
}
