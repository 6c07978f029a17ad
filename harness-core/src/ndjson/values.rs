//! [`NdjsonFeed::values`]: owned values with one stream deserializer kept across the lines of
//! the fed bytes, each value still checked to fill its own line.

use serde::de::DeserializeOwned;

use super::{Fast, Found, NdjsonError, NdjsonFeed};

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
pub struct NdjsonValues<'f, 'd, 's, T> {
    feed: &'f mut NdjsonFeed<'d, 's>,
    /// The deserializer over `src[base..]` and `next`, the line start it may go on
    /// from: only JSON whitespace and the one LF were left between the end of its last value
    /// and `next`.
    kept: Option<Kept<'s, T>>,
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
            .finish_non_exhaustive()
    }
}

impl<'f, 'd, 's, T> NdjsonValues<'f, 'd, 's, T> {
    /// The values of `feed`, no deserializer kept yet.
    pub(super) fn new(feed: &'f mut NdjsonFeed<'d, 's>) -> Self {
        NdjsonValues { feed, kept: None }
    }

    /// The 1-based number of the last line returned or reported.
    pub fn line_number(&self) -> u64 {
        self.feed.dec.lines.line_no
    }
}

impl<'s, T: DeserializeOwned> NdjsonValues<'_, '_, 's, T> {
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

impl<T: DeserializeOwned> Iterator for NdjsonValues<'_, '_, '_, T> {
    type Item = Result<T, NdjsonError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.in_place() {
            Fast::Line(v) => Some(Ok(v)),
            Fast::End => None,
            Fast::Slow => self.next_line_by_line(),
        }
    }
}

impl<T: DeserializeOwned> NdjsonValues<'_, '_, '_, T> {
    /// The next value the framing way (a line the fast path does not take).
    #[inline(never)]
    fn next_line_by_line(&mut self) -> Option<Result<T, NdjsonError>> {
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
