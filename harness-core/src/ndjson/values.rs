//! [`NdjsonFeed::values`]: owned values with one stream deserializer kept across the lines of
//! the fed bytes, each value still checked to fill its own line.
//!
//! The values are parsed a window of lines at a time. Within a window each value is checked
//! in O(1): it starts at its line start (no JSON whitespace there), ends exactly before its
//! line end (LF, or CRLF) and is within the line limit. What those checks cannot see is a
//! value whose JSON whitespace holds a LF (`{"a":\n1}`: serde_json skips it), which NDJSON
//! makes two bad lines. So the window's LFs are counted in one vectorized pass: each value
//! ends at a LF of its own, and they are contiguous, so the window holds exactly as many LFs
//! as values when, and only when, no value holds one. Only then are its values handed out;
//! otherwise the window is read again line by line (each line's end searched first), which
//! reports every line exactly as the framing path does.

use serde::de::DeserializeOwned;

use super::{Fast, Found, NdjsonError, NdjsonFeed};

/// Bytes of the fed slice one window parses before its LFs are counted (it closes at the
/// first line end past this). Small enough that the count reads them from L1.
const WINDOW_BYTES: usize = 16 << 10;

/// Fed bytes left below which no window is started: over a few lines, the count's fixed cost
/// is more than their line-end searches.
const MIN_WINDOW_BYTES: usize = 1 << 10;

/// Values one window holds at most before they are handed out (the bound of the queue).
const WINDOW_VALUES: usize = 128;

/// A value of `src` ending at `end` fills the line whose LF is at `lf`: it ends before the LF
/// with only JSON whitespace (which holds the one CR of a CRLF) after it. The common case, the
/// LF right after the value, is one compare.
#[inline(always)]
fn fills_line(src: &[u8], end: usize, lf: usize) -> bool {
    end == lf
        || src
            .get(end..lf)
            .is_some_and(|gap| gap.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')))
}

/// The values of an [`NdjsonFeed`], owned, with one deserializer kept from line to line
/// ([`NdjsonFeed::values`]).
///
/// Values are parsed a window of lines ahead and handed out once their window is checked;
/// dropping the iterator drops only values not handed out, and the next read of the feed
/// goes on from the line of the first of them.
pub struct NdjsonValues<'f, 'd, 's, T> {
    feed: &'f mut NdjsonFeed<'d, 's>,
    /// The deserializer over `src[base..]` and `next`, the line start it may go on
    /// from: only JSON whitespace and the one LF were left between the end of its last value
    /// and `next`.
    kept: Option<Kept<'s, T>>,
    /// The checked window's values not handed out yet, last first (the feed is at the
    /// window's end, and counts them as `unhanded`).
    queue: Vec<T>,
    /// Lines that start before this are read one by one (a window there did not check out,
    /// or its last line was not one a window takes).
    slow_until: usize,
    /// Where the fed bytes' last complete line ends (after its LF), once looked for: a
    /// window never parses the incomplete line after it.
    tail: Option<usize>,
}

/// A deserializer kept over the fed bytes.
struct Kept<'s, T> {
    base: usize,
    next: usize,
    de: serde_json::StreamDeserializer<'s, serde_json::de::SliceRead<'s>, T>,
}

impl<T> std::fmt::Debug for NdjsonValues<'_, '_, '_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NdjsonValues")
            .field("feed", &self.feed)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl<'f, 'd, 's, T> NdjsonValues<'f, 'd, 's, T> {
    /// The values of `feed`, no deserializer kept yet.
    pub(super) fn new(feed: &'f mut NdjsonFeed<'d, 's>) -> Self {
        NdjsonValues {
            feed,
            kept: None,
            queue: Vec::new(),
            slow_until: 0,
            tail: None,
        }
    }

    /// The 1-based number of the last line returned or reported.
    pub fn line_number(&self) -> u64 {
        self.feed.dec.lines.line_no
    }
}

/// Why a window stopped taking lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    /// It is full, or the complete lines are used up: the line at its end is for the next
    /// window.
    Full,
    /// The line at its end is not one a window takes (or the deserializer went past it):
    /// that line goes the one-by-one way.
    Line,
}

impl<'s, T: DeserializeOwned> NdjsonValues<'_, '_, 's, T> {
    /// Parses the window of lines at the feed's position into the queue and checks it (see the
    /// module's documentation). `true`: the queue holds its values, and the feed is at the
    /// window's end. `false`: nothing queued; the lines before `slow_until` are for the one-by-one way.
    fn window(&mut self) -> bool {
        let feed = &mut *self.feed;
        let (a, src) = (feed.at, feed.src);
        let dec = &mut *feed.dec;
        if dec.input.pending() > 0 || dec.lines.dropping || dec.lines.eof {
            return false;
        }
        if src.len().saturating_sub(a) < MIN_WINDOW_BYTES {
            self.slow_until = usize::MAX; // nor later in these fed bytes
            return false;
        }
        let lf = &dec.lf;
        let tail = *self.tail.get_or_insert_with(|| {
            src.get(a..)
                .and_then(|rest| lf.rfind(rest))
                .map_or(0, |i| a + i + 1)
        });
        if tail.saturating_sub(a) < MIN_WINDOW_BYTES {
            self.slow_until = usize::MAX;
            return false;
        }
        let max = dec.lines.cfg.max_line_bytes;
        let kept = match &mut self.kept {
            Some(kept) if kept.next == a => kept,
            slot => slot.insert(Kept {
                base: a,
                next: a,
                de: serde_json::Deserializer::from_slice(&src[a..]).into_iter(),
            }),
        };
        self.queue.reserve(WINDOW_VALUES);
        let limit = a.saturating_add(WINDOW_BYTES).min(tail);
        let mut pos = a;
        let close = loop {
            if pos >= limit || self.queue.len() == WINDOW_VALUES {
                break Close::Full;
            }
            // The value starts at the line start: the deserializer skips JSON whitespace,
            // and a line led by it (blank, indented, a CR) is the framing path's.
            if matches!(src.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n') | None) {
                break Close::Line;
            }
            let Some(Ok(value)) = kept.de.next() else {
                break Close::Line;
            };
            let end = kept.base + kept.de.byte_offset();
            // It ends right before its line end, and the line is within the limit (a CR
            // before the LF is not the line's).
            let next = match src.get(end..) {
                Some([b'\n', ..]) => end + 1,
                Some([b'\r', b'\n', ..]) => end + 2,
                _ => break Close::Line,
            };
            if end.wrapping_sub(pos) > max {
                break Close::Line;
            }
            self.queue.push(value);
            pos = next;
        };
        let n = self.queue.len();
        // Each value ends at a LF of its own and the next starts right after it: no other LF
        // in the window means no value holds one.
        let checked = n > 0 && src.get(a..pos).is_some_and(|w| lf.count(w) == n);
        if close == Close::Line {
            // The deserializer may have gone past `pos`; the line there is read one by one.
            self.kept = None;
            self.slow_until = pos + 1;
        } else if let Some(kept) = &mut self.kept {
            kept.next = pos;
        }
        if !checked {
            self.queue.clear();
            self.kept = None;
            self.slow_until = self.slow_until.max(pos);
            return false;
        }
        self.queue.reverse();
        feed.at = pos;
        feed.unhanded = n;
        true
    }

    /// The next value of the checked window, if any: the feed moves past its line.
    #[inline(always)]
    fn queued(&mut self) -> Option<T> {
        let value = self.queue.pop()?;
        let feed = &mut *self.feed;
        feed.dec.lines.line_no += 1;
        feed.unhanded -= 1;
        Some(value)
    }

    /// The fast path, on the terms of [`NdjsonDecoder::line_in_place`], with the kept
    /// deserializer.
    #[inline(always)]
    fn in_place(&mut self) -> Fast<T> {
        let feed = &mut *self.feed;
        let (at, src) = (feed.at, feed.src);
        let lf = match feed.dec.line_in_place(src, at) {
            Fast::Line(lf) => lf,
            Fast::End => {
                feed.at = src.len();
                return Fast::End;
            }
            Fast::Slow => return Fast::Slow,
        };
        // Kept in place (not moved in and out of its slot: it is not small).
        let kept = match &mut self.kept {
            Some(kept) if kept.next == at => kept,
            slot => slot.insert(Kept {
                base: at,
                next: at,
                de: serde_json::Deserializer::from_slice(&src[at..]).into_iter(),
            }),
        };
        // What the deserializer skips before the value is what the last value was checked
        // to be followed by (JSON whitespace, then the LF before `at`).
        if let Some(Ok(value)) = kept.de.next() {
            // A `{` or `[` value ends at its closing bracket wherever the slice ends: it
            // parsed within its line exactly when it ends before the LF.
            let end = kept.base + kept.de.byte_offset();
            if fills_line(src, end, lf) {
                feed.dec.lines.line_no += 1;
                feed.at = lf + 1;
                kept.next = lf + 1;
                return Fast::Line(value);
            }
        }
        self.kept = None;
        Fast::Slow
    }
}

impl<T: DeserializeOwned> NdjsonValues<'_, '_, '_, T> {
    /// A value when the checked window has none left: the next window's, or the next line's,
    /// one by one. Out of line, so that handing out a queued value stays small.
    #[inline(never)]
    fn next_unqueued(&mut self) -> Option<Result<T, NdjsonError>> {
        if self.feed.at >= self.slow_until && self.window() {
            if let Some(value) = self.queued() {
                return Some(Ok(value));
            }
        }
        match self.in_place() {
            Fast::Line(v) => return Some(Ok(v)),
            Fast::End => return None,
            Fast::Slow => {}
        }
        let feed = &mut *self.feed;
        let dec = &mut *feed.dec;
        let line = match dec.next_in(feed.src, &mut feed.at) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(Found::Buffer(lo, hi))) => &dec.input.buf[lo..hi],
            Ok(Some(Found::Slice(lo, hi))) => &feed.src[lo..hi],
        };
        Some(dec.lines.parse(line))
    }
}

impl<T: DeserializeOwned> Iterator for NdjsonValues<'_, '_, '_, T> {
    type Item = Result<T, NdjsonError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.queued() {
            Some(value) => Some(Ok(value)),
            None => self.next_unqueued(),
        }
    }
}
