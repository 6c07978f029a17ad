//! Newline-delimited JSON: one JSON value per line, the framing of the stdio transports.
//!
//! [`NdjsonDecoder`] holds partial lines across pushes, tolerates CRLF, skips blank lines and
//! one UTF-8 BOM at the start of the stream (RFC 8259 §8.1 allows it; Windows writers send
//! one), and bounds the length of a line; a line that is not valid JSON (or not the type asked for) is
//! an error for that line only. [`NdjsonEncoder`] writes compact JSON, one value per line.
//! The decoder is driven as [`crate::run_loop`] states: `push`, drain `poll_line`/`poll`.
//!
//! ```
//! use harness_core::ndjson::{NdjsonDecoder, NdjsonEncoder};
//! use serde_json::{json, Value};
//!
//! let mut wire = Vec::new();
//! NdjsonEncoder::encode(&mut wire, &json!({"type": "harness.subscribe", "v": 2}))?;
//! wire.extend_from_slice(b"\r\n{not json}\n{\"type\":\"harness.ping\"}");
//!
//! let mut dec = NdjsonDecoder::new();
//! dec.push(&wire);
//! assert_eq!(dec.poll::<Value>()?.unwrap()["v"], 2);
//! assert!(dec.poll::<Value>().is_err());          // line 3 only; the decoder goes on
//! assert_eq!(dec.poll::<Value>()?, None);          // the last line has no LF yet
//! dec.finish();                                    // end of input: it is a line after all
//! assert_eq!(dec.poll::<Value>()?.unwrap()["type"], "harness.ping");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::{Deserialize, Serialize};

/// The UTF-8 byte order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

use crate::buffer::InputBuffer;
use serde::de::DeserializeOwned;

mod values;
pub use values::NdjsonValues;

/// Limits of an [`NdjsonDecoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdjsonConfig {
    /// Longest line accepted, without its line end. Default 16 MiB.
    pub max_line_bytes: usize,
}

impl Default for NdjsonConfig {
    fn default() -> Self {
        NdjsonConfig {
            max_line_bytes: 16 << 20,
        }
    }
}

/// An error for one line of an NDJSON stream; the decoder goes on with the next line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NdjsonError {
    /// The line was longer than the limit; it was dropped.
    #[error("NDJSON line {line} is longer than {limit} bytes")]
    LineTooLong {
        /// 1-based line number in the stream.
        line: u64,
        /// The configured `max_line_bytes`.
        limit: usize,
    },
    /// The line is not valid JSON, or not a value of the type asked for.
    #[error("NDJSON line {line}: {message}")]
    Json {
        /// 1-based line number in the stream.
        line: u64,
        /// serde_json's description of the problem (with its column).
        message: String,
    },
}

impl NdjsonError {
    /// The 1-based number of the line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            NdjsonError::LineTooLong { line, .. } | NdjsonError::Json { line, .. } => *line,
        }
    }
}

/// A sans-IO decoder of newline-delimited JSON.
///
/// Two ways in: [`push`](Self::push) copies bytes into the decoder's buffer, and
/// [`poll_line`](Self::poll_line) / [`poll`](Self::poll) take lines out of it; or
/// [`feed`](Self::feed) reads lines in place from the caller's bytes, copying only an
/// incomplete last line. Both give the same lines and errors under any chunking.
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    input: InputBuffer,
    lines: Lines,
    lf: LfSearch,
}

/// The line-end search of the in-place paths: memchr's AVX2 searcher called directly where the
/// CPU has AVX2 (memchr's own entry point goes through a function pointer on every call, a
/// cost per line), memchr's portable entry point elsewhere.
#[derive(Clone, Copy, Debug)]
struct LfSearch {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::One>,
}

impl Default for LfSearch {
    fn default() -> Self {
        LfSearch {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::One::new(b'\n'),
        }
    }
}

impl LfSearch {
    /// The offset of the first LF in `hay`.
    #[inline(always)]
    fn find(&self, hay: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(one) = &self.avx2 {
            return one.find(hay);
        }
        memchr::memchr(b'\n', hay)
    }
}

/// What the in-place fast path of a feed found at its position.
enum Fast<V> {
    /// A line `src[at..lf]` (plus its LF) the fast path takes: starts with `{` or `[`,
    /// within the limit, nothing buffered before it.
    Line(V),
    /// The fed bytes are used up (an incomplete last line, within the limit, was buffered).
    End,
    /// Anything else: the framing path's turn.
    Slow,
}

/// The line state machine: everything but the bytes, so that it runs over the decoder's
/// buffer or over the caller's slice alike.
#[derive(Debug, Default)]
struct Lines {
    cfg: NdjsonConfig,
    /// Dropping the rest of an over-long line.
    dropping: bool,
    /// No more input: the unterminated tail is the last line.
    eof: bool,
    /// Lines seen so far (blank ones included).
    line_no: u64,
}

/// What one run of the line machine over a source found.
enum Got {
    /// A non-blank line, `source[lo..hi]`, without its line end.
    Line(usize, usize),
    Fail(NdjsonError),
    /// The rest of the source holds no line end.
    NeedMore,
}

impl Lines {
    /// The next non-blank line of `buf[*pos..]`; `buf[*pos..*scan]` holds no LF. At `eof`, an
    /// unterminated rest is a line.
    fn next(
        &mut self,
        lf: &LfSearch,
        buf: &[u8],
        pos: &mut usize,
        scan: &mut usize,
        eof: bool,
    ) -> Got {
        loop {
            let (start, end) = match lf.find(&buf[*scan..]) {
                Some(off) => {
                    let end = *scan + off;
                    let start = *pos;
                    *pos = end + 1;
                    *scan = *pos;
                    (start, end)
                }
                None if eof && *pos < buf.len() => {
                    let start = *pos;
                    *pos = buf.len();
                    *scan = *pos;
                    (start, *pos)
                }
                None => {
                    *scan = buf.len();
                    return Got::NeedMore;
                }
            };
            if let Some(got) = self.take(buf, start, end) {
                return got;
            }
        }
    }

    /// The line `buf[start..end]` (its line end excluded) seen: counted, then given as a
    /// line or an error; `None` for a blank line or the rest of a line already reported.
    #[inline]
    fn take(&mut self, buf: &[u8], start: usize, end: usize) -> Option<Got> {
        if self.dropping {
            self.dropping = false; // the rest of a line already reported
            return None;
        }
        self.line_no += 1;
        let (mut lo, mut hi) = (start, end);
        if buf[lo..hi].ends_with(b"\r") {
            hi -= 1;
        }
        if self.line_no == 1 && buf[lo..hi].starts_with(BOM) {
            lo += BOM.len(); // one BOM at the start of the stream (RFC 8259 §8.1)
        }
        if hi - lo > self.cfg.max_line_bytes {
            return Some(Got::Fail(NdjsonError::LineTooLong {
                line: self.line_no,
                limit: self.cfg.max_line_bytes,
            }));
        }
        if buf[lo..hi]
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
        {
            return None; // blank lines are skipped
        }
        Some(Got::Line(lo, hi))
    }

    /// The buffer holds no LF: bound what it keeps (a line past the limit is reported as
    /// soon as it is, and its rest dropped as it comes).
    fn hold(&mut self, input: &mut InputBuffer) -> Result<(), NdjsonError> {
        // A CR last may be the first half of a CRLF: not the line's.
        let mut held = match input.buf[input.pos..] {
            [.., b'\r'] => input.pending() - 1,
            _ => input.pending(),
        };
        if self.line_no == 0 {
            // Nor is a BOM the first line may start with (an early report only: the whole
            // line is measured exactly at its line end).
            held = held.saturating_sub(BOM.len());
        }
        if self.dropping {
            input.skip_all();
        } else if held > self.cfg.max_line_bytes {
            input.skip_all();
            self.dropping = true;
            self.line_no += 1;
            return Err(NdjsonError::LineTooLong {
                line: self.line_no,
                limit: self.cfg.max_line_bytes,
            });
        }
        Ok(())
    }

    fn parse<'a, T: Deserialize<'a>>(&self, line: &'a [u8]) -> Result<T, NdjsonError> {
        serde_json::from_slice(line).map_err(|e| NdjsonError::Json {
            line: self.line_no,
            message: e.to_string(),
        })
    }
}

/// Where [`NdjsonDecoder::next_in`] found a line.
enum Found {
    Buffer(usize, usize),
    Slice(usize, usize),
}

impl NdjsonDecoder {
    /// A decoder with the default limit (16 MiB per line).
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given limit.
    pub fn with_config(cfg: NdjsonConfig) -> Self {
        NdjsonDecoder {
            input: InputBuffer::default(),
            lines: Lines {
                cfg,
                ..Lines::default()
            },
            lf: LfSearch::default(),
        }
    }

    /// Appends input bytes to the decoder's buffer. Never fails and never parses.
    /// [`feed`](Self::feed) reads complete lines without copying them.
    pub fn push(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Reads `bytes` in place: the returned [`NdjsonFeed`] yields the lines they complete,
    /// borrowed from `bytes` itself (or parsed from it). Only an incomplete last line (and
    /// what the feed was dropped before reading) is copied into the decoder's buffer. Lines
    /// pushed before with [`push`](Self::push) and not yet polled come first.
    ///
    /// ```
    /// use harness_core::ndjson::NdjsonDecoder;
    /// use serde_json::Value;
    ///
    /// let mut dec = NdjsonDecoder::new();
    /// let mut seen = Vec::new();
    /// for chunk in [&b"{\"n\":1}\n{\"n\""[..], b":2}\r\nnot json\n"] {
    ///     let mut feed = dec.feed(chunk);
    ///     while let Some(v) = feed.next_value::<Value>() {
    ///         seen.push(v.map(|v| v["n"].as_u64()).map_err(|e| e.line()));
    ///     }
    /// }
    /// assert_eq!(seen, [Ok(Some(1)), Ok(Some(2)), Err(3)]); // a bad line is its own error
    /// ```
    pub fn feed<'d, 's>(&'d mut self, bytes: &'s [u8]) -> NdjsonFeed<'d, 's> {
        NdjsonFeed {
            dec: self,
            src: bytes,
            at: 0,
        }
    }

    /// Marks the end of input: an unterminated last line becomes a line like the others.
    pub fn finish(&mut self) {
        self.lines.eof = true;
    }

    /// Bytes held in the decoder's buffer: pushed and not yet consumed.
    pub fn buffered_bytes(&self) -> usize {
        self.input.pending()
    }

    /// The next non-blank line, without its line end (LF or CRLF), not parsed.
    pub fn poll_line(&mut self) -> Result<Option<&[u8]>, NdjsonError> {
        Ok(self
            .poll_buffered()?
            .map(|(lo, hi)| &self.input.buf[lo..hi]))
    }

    /// The next line parsed as a `T`. A line that does not parse is an error for that line;
    /// the next call goes on with the next line.
    pub fn poll<T: DeserializeOwned>(&mut self) -> Result<Option<T>, NdjsonError> {
        match self.poll_buffered()? {
            None => Ok(None),
            Some((lo, hi)) => self.lines.parse(&self.input.buf[lo..hi]).map(Some),
        }
    }

    /// The 1-based number of the last line returned or reported.
    pub fn line_number(&self) -> u64 {
        self.lines.line_no
    }

    /// The next line of the buffer, as a range of it.
    fn poll_buffered(&mut self) -> Result<Option<(usize, usize)>, NdjsonError> {
        let input = &mut self.input;
        let eof = self.lines.eof;
        match self
            .lines
            .next(&self.lf, &input.buf, &mut input.pos, &mut input.scan, eof)
        {
            Got::Line(lo, hi) => Ok(Some((lo, hi))),
            Got::Fail(e) => Err(e),
            Got::NeedMore => self.lines.hold(input).map(|()| None),
        }
    }

    /// The fast path of the in-place reads: the line at `src[at..]`, if it starts with `{`
    /// or `[`, nothing is buffered before it and it is within the limit, as the offset of its
    /// LF (one search per line). The caller parses `src[at..lf]` and must see the value fill
    /// the line (JSON whitespace after it, which holds the one CR of a CRLF, is allowed, as
    /// the framing path allows it). The line end is found first: JSON whitespace includes
    /// LF, so a value spread over two lines would otherwise parse as one. Anything else (a
    /// blank or BOM-led line, a line past the limit, bytes still buffered, a line that does
    /// not parse, which the caller finds) is left to the framing path, which reports it
    /// exactly. Fed bytes with no LF left are buffered here (the framing path would search
    /// them again) when they are within the limit.
    #[inline(always)]
    fn line_in_place(&mut self, src: &[u8], at: usize) -> Fast<usize> {
        let Some(rest) = src.get(at..) else {
            return Fast::Slow;
        };
        if !matches!(rest.first(), Some(b'{' | b'['))
            || self.input.pending() > 0
            || self.lines.dropping
            || self.lines.eof
        {
            return Fast::Slow;
        }
        match self.lf.find(rest) {
            // A CR before the LF is not the line's: a line of `max + 1` bytes and a CR is
            // still within the limit, which the framing path measures exactly.
            Some(len) if len <= self.lines.cfg.max_line_bytes => Fast::Line(at + len),
            Some(_) => Fast::Slow,
            None if rest.len() <= self.lines.cfg.max_line_bytes => {
                // What `hold` would keep: no LF, within the limit (a BOM and a last CR only
                // make the held part shorter).
                self.input.clear();
                self.input.push(rest);
                self.input.scan = self.input.buf.len();
                Fast::End
            }
            None => Fast::Slow,
        }
    }

    /// The next line from the buffer, then from `src[*at..]` in place: the buffer is only
    /// completed with the rest of its incomplete line, and what `src` leaves incomplete is
    /// copied into it.
    fn next_in(&mut self, src: &[u8], at: &mut usize) -> Result<Option<Found>, NdjsonError> {
        loop {
            let input = &mut self.input;
            if input.pending() > 0
                && input.scan == input.buf.len()
                && !self.lines.dropping
                && !self.lines.eof
            {
                // The buffer holds the start of a line, searched, bounded (`hold`) and with
                // no LF: one search completes it from `src`, and the line is taken as it is
                // (what `poll_buffered` would find, without searching the buffer again).
                if let Some(i) = src.get(*at..).and_then(|rest| self.lf.find(rest)) {
                    input.push(&src[*at..*at + i]);
                    *at += i + 1;
                    let (start, end) = (input.pos, input.buf.len());
                    input.skip_all();
                    match self.lines.take(&input.buf, start, end) {
                        Some(Got::Line(lo, hi)) => return Ok(Some(Found::Buffer(lo, hi))),
                        Some(Got::Fail(e)) => return Err(e),
                        Some(Got::NeedMore) | None => continue,
                    }
                }
            }
            if self.input.pending() > 0 {
                if let Some((lo, hi)) = self.poll_buffered()? {
                    return Ok(Some(Found::Buffer(lo, hi)));
                }
                if self.input.pending() == 0 {
                    continue;
                }
                let rest = &src[*at..];
                if rest.is_empty() {
                    return Ok(None);
                }
                match self.lf.find(rest) {
                    Some(i) => {
                        self.input.push(&rest[..=i]);
                        *at += i + 1;
                        // The held bytes have no LF, nor do those before `i`: the line
                        // search finds the LF last, without searching them again.
                        self.input.scan = self.input.buf.len() - 1;
                    }
                    None => {
                        self.input.push(rest);
                        *at = src.len();
                    }
                }
                continue;
            }
            self.input.clear();
            if *at == src.len() {
                return Ok(None);
            }
            let mut scan = *at;
            match self.lines.next(&self.lf, src, at, &mut scan, false) {
                Got::Line(lo, hi) => return Ok(Some(Found::Slice(lo, hi))),
                Got::Fail(e) => return Err(e),
                Got::NeedMore => {
                    // No LF in the rest: it waits in the buffer (which bounds it).
                    self.input.push(&src[*at..]);
                    self.input.scan = self.input.buf.len();
                    *at = src.len();
                }
            }
        }
    }
}

/// The lines of one [`NdjsonDecoder::feed`], read in place from the fed bytes.
///
/// Dropping it copies the bytes it has not read yet into the decoder's buffer, so nothing is
/// lost: the next `feed` or `poll` goes on from there.
#[derive(Debug)]
pub struct NdjsonFeed<'d, 's> {
    dec: &'d mut NdjsonDecoder,
    src: &'s [u8],
    at: usize,
}

impl<'d, 's> NdjsonFeed<'d, 's> {
    /// The next non-blank line, without its line end, borrowed until the next call. `None`:
    /// the fed bytes are used up. An `Err` concerns one line; keep calling.
    pub fn next_line(&mut self) -> Option<Result<&[u8], NdjsonError>> {
        let dec = &mut *self.dec;
        match dec.next_in(self.src, &mut self.at) {
            Err(e) => Some(Err(e)),
            Ok(None) => None,
            Ok(Some(Found::Buffer(lo, hi))) => Some(Ok(&dec.input.buf[lo..hi])),
            Ok(Some(Found::Slice(lo, hi))) => Some(Ok(&self.src[lo..hi])),
        }
    }

    /// The next line parsed as a `T`, which may borrow from the line (`&str` fields without
    /// escapes) until the next call. A line that does not parse is an error for that line
    /// only; keep calling.
    pub fn next_value<'a, T: Deserialize<'a>>(&'a mut self) -> Option<Result<T, NdjsonError>> {
        let dec = &mut *self.dec;
        let src = self.src;
        match dec.line_in_place(src, self.at) {
            Fast::Line(lf) => {
                // One deserializer per call: `T` borrows for this call only, so none can be
                // kept across calls. Over the line alone, its end is checked by `end` (a
                // stream deserializer over the rest, which says where its value ended, costs
                // more per call than serde_json's slower scan near the end of its input).
                let mut de = serde_json::Deserializer::from_slice(&src[self.at..lf]);
                if let Ok(value) = T::deserialize(&mut de) {
                    if de.end().is_ok() {
                        dec.lines.line_no += 1;
                        self.at = lf + 1;
                        return Some(Ok(value));
                    }
                }
            }
            Fast::End => {
                self.at = src.len();
                return None;
            }
            Fast::Slow => {}
        }
        let line = match dec.next_in(src, &mut self.at) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(Found::Buffer(lo, hi))) => &dec.input.buf[lo..hi],
            Ok(Some(Found::Slice(lo, hi))) => &src[lo..hi],
        };
        Some(dec.lines.parse(line))
    }

    /// The lines parsed as owned `T`s (values that borrow nothing, such as
    /// `serde_json::Value` or `IgnoredAny`), as an iterator: [`next_value`](Self::next_value)
    /// with one deserializer kept across the lines of the fed bytes instead of one per line,
    /// which saves its set-up (and its scratch allocation for nested values) on every line.
    /// Each value must still end its own line: a value that runs past its line end, or
    /// anything after it on the line but JSON whitespace, sends that line the framing way,
    /// which reports it as that line's error. The same values and errors as `next_value`,
    /// under any chunking.
    ///
    /// ```
    /// use harness_core::ndjson::NdjsonDecoder;
    /// use serde_json::Value;
    ///
    /// let mut dec = NdjsonDecoder::new();
    /// let mut feed = dec.feed(b"{\"n\":1}\n{\"n\":\n2}\n[3]\n");
    /// let got: Vec<_> = feed.values::<Value>().map(|v| v.map_err(|e| e.line())).collect();
    /// // `{"n":` and `2}` are two bad lines: every value is on its own line.
    /// assert_eq!(got, [Ok(serde_json::json!({"n": 1})), Err(2), Err(3), Ok(serde_json::json!([3]))]);
    /// ```
    pub fn values<T: DeserializeOwned>(&mut self) -> NdjsonValues<'_, 'd, 's, T> {
        NdjsonValues::new(self)
    }

    /// The 1-based number of the last line returned or reported.
    pub fn line_number(&self) -> u64 {
        self.dec.lines.line_no
    }
}

impl Drop for NdjsonFeed<'_, '_> {
    fn drop(&mut self) {
        if let Some(rest) = self.src.get(self.at..) {
            if !rest.is_empty() {
                self.dec.input.push(rest);
            }
        }
    }
}

/// Writes one JSON value per line.
#[derive(Clone, Copy, Debug, Default)]
pub struct NdjsonEncoder;

impl NdjsonEncoder {
    /// Appends `value` as compact JSON and a LF. Compact JSON never holds a raw line break
    /// (strings escape theirs), so the line is always one line. On error (a value serde_json
    /// cannot write, such as a map with non-string keys) nothing is appended.
    pub fn encode<T: Serialize + ?Sized>(
        out: &mut Vec<u8>,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let len = out.len();
        if let Err(e) = serde_json::to_writer(&mut *out, value) {
            out.truncate(len); // never half a line: the next frame would join it
            return Err(e);
        }
        out.push(b'\n');
        Ok(())
    }
}
