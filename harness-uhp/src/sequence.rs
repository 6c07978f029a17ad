//! The sequence check: `sequence_number` starts at 0 and increases by exactly 1 per event.
//!
//! The official conformance check is `seqs == list(range(len(seqs)))`: a gap, a duplicate and
//! a reordering are all violations. [`SequenceCheck`] reports the three separately, in time
//! and memory linear in the events (gaps are kept as ranges, so `[0, 5000000]` is one range,
//! not five million numbers), and can start from a resume point (`Last-Event-ID`).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// How many duplicate (and, separately, out-of-order) numbers a report lists; past this
/// they are only counted, so a stream replayed without end takes no memory per replay.
pub const MAX_LISTED: usize = 1024;

/// How one event's number relates to the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next number expected.
    InOrder,
    /// Later than expected: the numbers in between are missing (so far).
    AfterGap,
    /// A number that was missing, arriving late (out of order). Its content is new.
    Late,
    /// A number already seen (or before the resume point): a replay. Count its content once.
    Duplicate,
    /// The event had no valid `sequence_number`.
    Unnumbered,
}

/// Tracks the sequence numbers of one stream.
#[derive(Clone, Debug, Default)]
pub struct SequenceCheck {
    /// The first number of the stream (0, or one past the resume point). `u128` so that
    /// `u64::MAX` can be followed without overflow.
    start: u128,
    /// The next number expected.
    next: u128,
    /// Gaps still open: start → end (inclusive).
    gaps: BTreeMap<u64, u64>,
    duplicates: Vec<u64>,
    duplicate_count: u64,
    out_of_order: Vec<u64>,
    out_of_order_count: u64,
    unnumbered: u64,
    events: u64,
}

/// Lists `n` while there is room, and counts it either way.
fn note(list: &mut Vec<u64>, count: &mut u64, n: u64) {
    if list.len() < MAX_LISTED {
        list.push(n);
    }
    *count = count.saturating_add(1);
}

/// The result of the check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SequenceReport {
    /// `true` exactly when the numbers ran `start, start+1, …` with nothing missing,
    /// duplicated, reordered or unnumbered (the conformance check).
    pub ok: bool,
    /// The numbers that never arrived, as inclusive ranges in order. Only numbers below the
    /// highest one seen can be known missing: a truncated stream's tail is not reported.
    pub missing: Vec<RangeInclusive<u64>>,
    /// Numbers that arrived more than once (one entry per extra arrival), in arrival order:
    /// the first [`MAX_LISTED`].
    pub duplicates: Vec<u64>,
    /// How many extra arrivals there were in all.
    pub duplicate_count: u64,
    /// Numbers that arrived after a higher one (late, but not duplicates), in arrival order:
    /// the first [`MAX_LISTED`].
    pub out_of_order: Vec<u64>,
    /// How many late arrivals there were in all.
    pub out_of_order_count: u64,
    /// Events without a valid `sequence_number`.
    pub unnumbered: u64,
    /// The first number the stream was checked from.
    pub start: u64,
}

impl SequenceReport {
    /// How many numbers are missing.
    pub fn missing_count(&self) -> u64 {
        self.missing
            .iter()
            .map(|r| r.end().saturating_sub(*r.start()).saturating_add(1))
            .fold(0u64, u64::saturating_add)
    }

    /// The missing numbers one by one (beware: `[0, 5000000]` yields 4,999,999 of them).
    pub fn missing_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.missing.iter().flat_map(|r| r.clone())
    }
}

impl SequenceCheck {
    /// A check for a stream that starts at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// A check for a stream resumed with `Last-Event-ID: n`: the server resumes after `n`
    /// and must not replay, so the first number expected is `n + 1`.
    pub fn resumed_after(last_sequence_number: u64) -> Self {
        let start = u128::from(last_sequence_number) + 1;
        SequenceCheck {
            start,
            next: start,
            ..Self::default()
        }
    }

    /// Records one event's number and says how it relates to the ones before.
    pub fn record(&mut self, sequence_number: Option<u64>) -> Arrival {
        self.events += 1;
        let Some(n) = sequence_number else {
            self.unnumbered += 1;
            return Arrival::Unnumbered;
        };
        let wide = u128::from(n);
        if wide == self.next {
            self.next = wide + 1;
            return Arrival::InOrder;
        }
        if wide > self.next {
            // ok: next < n ≤ u64::MAX, so next fits in u64 and n ≥ 1.
            self.gaps.insert(self.next as u64, n - 1);
            self.next = wide + 1;
            return Arrival::AfterGap;
        }
        // n < next: either fills a gap or was seen already.
        let gap = self.gaps.range(..=n).next_back().map(|(s, e)| (*s, *e));
        match gap {
            Some((s, e)) if n <= e => {
                self.gaps.remove(&s);
                if s < n {
                    self.gaps.insert(s, n - 1);
                }
                if n < e {
                    self.gaps.insert(n + 1, e);
                }
                note(&mut self.out_of_order, &mut self.out_of_order_count, n);
                Arrival::Late
            }
            _ => {
                note(&mut self.duplicates, &mut self.duplicate_count, n);
                Arrival::Duplicate
            }
        }
    }

    /// The highest number seen plus one (where a resumed stream should continue).
    pub fn next_expected(&self) -> u128 {
        self.next
    }

    /// What to send as `Last-Event-ID`: the highest valid number seen, or, for a resumed
    /// stream that has delivered nothing yet, the number it was resumed after. `None` only
    /// for a stream from 0 that has delivered no number.
    pub fn last_seen(&self) -> Option<u64> {
        // ok: next - 1 is a recorded number or the resume point, so it fits in u64.
        (self.next > 0).then(|| (self.next - 1) as u64)
    }

    /// Events recorded (numbered or not).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The report so far.
    pub fn report(&self) -> SequenceReport {
        let missing: Vec<_> = self.gaps.iter().map(|(s, e)| *s..=*e).collect();
        SequenceReport {
            ok: missing.is_empty()
                && self.duplicate_count == 0
                && self.out_of_order_count == 0
                && self.unnumbered == 0,
            missing,
            duplicates: self.duplicates.clone(),
            duplicate_count: self.duplicate_count,
            out_of_order: self.out_of_order.clone(),
            out_of_order_count: self.out_of_order_count,
            unnumbered: self.unnumbered,
            start: u64::try_from(self.start).unwrap_or(u64::MAX),
        }
    }
}
