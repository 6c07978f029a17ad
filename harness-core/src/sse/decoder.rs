//! The WHATWG server-sent events parser as a sans-IO pull decoder, driven as
//! [`crate::run_loop`] states: `push`, drain `poll_event`, `finish` at the end.

use std::collections::VecDeque;
use std::time::Duration;

use super::event::{SseError, SseEvent};
use super::fields::{Fields, Step};
use crate::buffer::InputBuffer;

mod feed;
mod lane;

pub use feed::SseFeed;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Limits of an [`SseDecoder`]. Both bound the memory one event can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseConfig {
    /// Longest line (field name, colon and value, without its line end) accepted.
    /// Default 16 MiB.
    pub max_line_bytes: usize,
    /// Largest data of one event (all its `data:` lines joined). Default 16 MiB.
    pub max_event_bytes: usize,
}

impl SseConfig {
    /// The default limits: 16 MiB per line and 16 MiB of data per event.
    pub const DEFAULT: SseConfig = SseConfig {
        max_line_bytes: 16 << 20,
        max_event_bytes: 16 << 20,
    };
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig::DEFAULT
    }
}

/// Where the decoder is with respect to an event it had to give up on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skip {
    /// Parsing normally.
    No,
    /// Inside an over-long line: drop bytes up to its line end, then skip the event.
    Line,
    /// Drop lines up to and including the blank line that ends the current event.
    Event,
}

/// A sans-IO decoder of a `text/event-stream` body, implementing the WHATWG HTML parsing
/// rules exactly.
///
/// Feed it bytes as they arrive with [`push`](Self::push) (which never fails and never
/// parses), take events out with [`poll_event`](Self::poll_event) (which parses lazily, so
/// an unread event costs nothing), and call [`finish`](Self::finish) at end of stream. On a
/// hot path, [`feed`](Self::feed) parses the pushed bytes in place instead (only an
/// incomplete line is copied) and lends each event ([`SseFeed::next_ref`]) with no allocation.
///
/// The rules, all tested against the spec's wording:
/// lines end in CRLF, LF or a lone CR (a CR at the end of one push and an LF at the start of
/// the next are one line end); a UTF-8 BOM at the start of the stream is skipped once; a line
/// starting with `:` is a comment; `field:value` loses exactly one leading space of its
/// value; a line without a colon is a field with an empty value; `data` lines are joined with
/// `\n`; `event` sets the type (default `message`); `id` sets the last event ID unless it
/// contains NUL; `retry` sets the reconnection time only when it is all ASCII digits; a blank
/// line dispatches (nothing when there is no data) and makes the last event ID the one
/// [`last_event_id`](Self::last_event_id) reports; bytes are UTF-8 decoded with U+FFFD for
/// invalid sequences, and a character split across pushes is never replaced; an event not
/// terminated by a blank line at end of stream is not dispatched, nor is its `id` kept.
///
/// Any split of the same bytes into pushes gives the same events and errors.
///
/// ```
/// use harness_core::sse::SseDecoder;
///
/// let mut dec = SseDecoder::new();
/// dec.push(b"\xEF\xBB\xBFevent: greeting\r\nid: 1\r\ndata: hello\r");
/// dec.push(b"\ndata: world\r\n\r\n: ping\n\ndata: {\"partial\":");
///
/// let ev = dec.poll_event()?.expect("one whole event");
/// assert_eq!((ev.event_type(), ev.data(), ev.id()), ("greeting", "hello\nworld", Some("1")));
/// assert_eq!(dec.poll_event()?, None); // the rest is incomplete
///
/// // At end of stream the partial event is reported, never dispatched.
/// assert!(dec.finish().is_err());
/// assert_eq!(dec.last_event_id(), Some("1"));
/// # Ok::<(), harness_core::sse::SseError>(())
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    input: InputBuffer,
    lines: Lines,
    /// Events parsed by `finish` that the caller has not polled yet.
    queued: VecDeque<Result<SseEvent, SseError>>,
    /// A queued event lent out by [`SseFeed::next_ref`].
    lent: Option<SseEvent>,
}

/// The line state machine: everything but the bytes, so that it can run over the decoder's
/// buffer or over the caller's slice alike.
#[derive(Debug)]
struct Lines {
    cfg: SseConfig,
    /// The BOM check is still to be made (start of a stream).
    bom_pending: bool,
    /// The last line ended with CR: an LF that comes next is part of that line end.
    skip_lf: bool,
    skip: Skip,
    fields: Fields,
    ends: LineEnds,
}

/// The line-end search (`\n` or `\r`), set up once per decoder: memchr's AVX2 searcher
/// where the CPU has it (no feature dispatch nor needle set-up per line), its `memchr2`
/// elsewhere.
#[derive(Clone, Copy, Debug)]
struct LineEnds {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::Two>,
}

impl LineEnds {
    fn new() -> Self {
        LineEnds {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::Two::new(b'\n', b'\r'),
        }
    }

    /// The offset of the first `\n` or `\r` of `haystack`.
    #[inline]
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(two) = &self.avx2 {
            return two.find(haystack);
        }
        memchr::memchr2(b'\n', b'\r', haystack)
    }
}

/// What one run of the line machine over a source ended with.
enum Parsed {
    /// An event was dispatched; it is in the fields and may borrow from the source.
    Event,
    /// An error for one event.
    Fail(SseError),
    /// The rest of the source may be a BOM, or an LF after a CR: more bytes decide.
    Wait,
    /// The rest of the source holds no line end.
    NeedMore,
}

/// Where the event [`SseDecoder::next_in`] found is.
enum Found {
    /// First in the queue `finish` filled.
    Queued,
    /// In the fields, borrowing from the decoder's buffer.
    Buffer,
    /// In the fields, borrowing from the caller's slice; its lines start at the index given.
    Slice(usize),
}

impl Lines {
    /// Interprets the lines of `buf[*pos..]` up to the next dispatched event or error.
    /// `buf[*pos..*scan]` is known to hold no line end.
    fn parse(&mut self, buf: &[u8], pos: &mut usize, scan: &mut usize) -> Parsed {
        self.fields.release();
        loop {
            if self.bom_pending {
                let avail = &buf[*pos..];
                if avail.len() < BOM.len() && BOM.starts_with(avail) {
                    return Parsed::Wait; // could still be a BOM
                }
                if avail.starts_with(BOM) {
                    *pos += BOM.len();
                    *scan = (*scan).max(*pos);
                }
                self.bom_pending = false;
            }
            if self.skip_lf {
                match buf.get(*pos) {
                    None => {
                        self.fields.materialize(buf);
                        return Parsed::Wait;
                    }
                    Some(&b) => {
                        if b == b'\n' {
                            *pos += 1;
                            *scan = (*scan).max(*pos);
                        }
                        self.skip_lf = false;
                    }
                }
            }
            // Half the lines of a stream are the blank line that ends an event: look at the
            // first byte before starting a vector search.
            let found = match buf.get(*scan) {
                Some(b'\n' | b'\r') => Some(0),
                Some(_) => self.ends.find(&buf[*scan..]),
                None => None,
            };
            let Some(off) = found else {
                *scan = buf.len();
                self.fields.materialize(buf);
                return Parsed::NeedMore;
            };
            let end = *scan + off;
            let start = *pos;
            // Most events of a real stream are one `data:` line and the blank line: when both
            // are here whole (LF ends, the limits met), the event is dispatched at once, with
            // exactly what the two lines would do one by one.
            if self.skip == Skip::No
                && buf[end] == b'\n'
                && buf.get(end + 1) == Some(&b'\n')
                && end - start <= self.cfg.max_line_bytes
                && buf[start..end].starts_with(b"data:")
                && self
                    .fields
                    .single_data(buf, start + 5, end, self.cfg.max_event_bytes)
            {
                self.skip_lf = false;
                *pos = end + 2;
                *scan = *pos;
                return Parsed::Event;
            }
            self.skip_lf = buf[end] == b'\r';
            *pos = end + 1;
            *scan = *pos;
            match self.skip {
                Skip::Line => {
                    self.skip = Skip::Event;
                    continue;
                }
                Skip::Event => {
                    if end == start {
                        self.skip = Skip::No;
                    }
                    continue;
                }
                Skip::No => {}
            }
            if end - start > self.cfg.max_line_bytes {
                self.skip = Skip::Event;
                self.fields.reset_event();
                return Parsed::Fail(SseError::LineTooLong {
                    limit: self.cfg.max_line_bytes,
                });
            }
            match self.fields.line(buf, start, end, self.cfg.max_event_bytes) {
                Step::Continue => {}
                Step::Dispatch => return Parsed::Event,
                Step::Fail(e) => {
                    self.skip = Skip::Event;
                    self.fields.reset_event();
                    return Parsed::Fail(e);
                }
            }
        }
    }

    /// The common event, `data:` line and blank line, whole at `src[*at..]` with LF ends and
    /// within the limits, in the state between events: dispatched at once (`true`, `*at`
    /// past it), as [`parse`](Self::parse) would. `false`: nothing done, `parse` goes on.
    #[inline]
    fn quick_event(&mut self, src: &[u8], at: &mut usize) -> bool {
        let start = *at;
        if self.bom_pending || self.skip_lf || self.skip != Skip::No {
            return false;
        }
        let rest = src.get(start..).unwrap_or_default();
        if !rest.starts_with(b"data:") {
            return false;
        }
        let Some(off) = self.ends.find(&rest[5..]) else {
            return false;
        };
        let end = start + 5 + off;
        if src[end] != b'\n'
            || src.get(end + 1) != Some(&b'\n')
            || end - start > self.cfg.max_line_bytes
        {
            return false;
        }
        self.fields.release();
        if !self
            .fields
            .single_data(src, start + 5, end, self.cfg.max_event_bytes)
        {
            return false;
        }
        *at = end + 2;
        true
    }

    /// The buffer holds no line end: bound what it keeps. A line being dropped, or a
    /// non-blank line of an event being skipped, is dropped as it comes; a line past the
    /// limit is an error for its event.
    fn hold(&mut self, input: &mut InputBuffer) -> Result<(), SseError> {
        let pending = input.pending();
        match self.skip {
            Skip::Line => input.skip_all(),
            Skip::Event if pending > 0 => {
                input.skip_all();
                self.skip = Skip::Line;
            }
            Skip::No if pending > self.cfg.max_line_bytes => {
                input.skip_all();
                self.skip = Skip::Line;
                self.fields.reset_event();
                return Err(SseError::LineTooLong {
                    limit: self.cfg.max_line_bytes,
                });
            }
            _ => {}
        }
        Ok(())
    }
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default limits ([`SseConfig::DEFAULT`]).
    pub fn new() -> Self {
        Self::with_config(SseConfig::DEFAULT)
    }

    /// A decoder with the given limits. A line or an event past a limit is reported as an
    /// error for that event; the decoder skips to the next event and stays usable.
    pub fn with_config(cfg: SseConfig) -> Self {
        SseDecoder {
            input: InputBuffer::default(),
            lines: Lines {
                cfg,
                bom_pending: true,
                skip_lf: false,
                skip: Skip::No,
                fields: Fields::default(),
                ends: LineEnds::new(),
            },
            queued: VecDeque::new(),
            lent: None,
        }
    }

    /// The decoder's limits.
    pub fn config(&self) -> SseConfig {
        self.lines.cfg
    }

    /// Appends bytes of the stream to the decoder's buffer. Never fails and never parses;
    /// call [`poll_event`](Self::poll_event) until it returns `Ok(None)` afterwards.
    ///
    /// [`feed`](Self::feed) does the same without copying the complete events.
    pub fn push(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Decodes `bytes` in place: the returned [`SseFeed`] yields the events they complete,
    /// parsed from `bytes` itself, as owned [`SseEvent`]s (it is an iterator) or borrowed
    /// [`SseEventRef`](super::SseEventRef)s ([`SseFeed::next_ref`]).
    ///
    /// Only an incomplete last line (and whatever the feed was dropped before yielding) is
    /// copied into the decoder's buffer, so a push of whole events costs no copy. Events
    /// pushed before with [`push`](Self::push) and not yet polled come first. The events and
    /// errors are exactly those of `push` then `poll_event`, whatever the chunking.
    ///
    /// ```
    /// use harness_core::sse::SseDecoder;
    ///
    /// let mut dec = SseDecoder::new();
    /// let mut n = 0;
    /// for chunk in [&b"data: hel"[..], b"lo\n\ndata: a\ndata: b\n\n: ping\n"] {
    ///     let mut feed = dec.feed(chunk);
    ///     while let Some(ev) = feed.next_ref() {
    ///         let ev = ev?; // borrowed: valid until the next call
    ///         assert_eq!(ev.data(), ["hello", "a\nb"][n]);
    ///         n += 1;
    ///     }
    /// }
    /// assert_eq!(n, 2);
    /// assert_eq!(dec.buffered_bytes(), 0);
    /// # Ok::<(), harness_core::sse::SseError>(())
    /// ```
    pub fn feed<'d, 's>(&'d mut self, bytes: &'s [u8]) -> SseFeed<'d, 's> {
        SseFeed::new(self, bytes)
    }

    /// The next complete event, parsed from the bytes pushed so far.
    ///
    /// `Ok(None)` means more bytes are needed. An `Err` concerns one event only (it was too
    /// large and was skipped); keep polling.
    pub fn poll_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(queued) = self.queued.pop_front() {
            return queued.map(Some);
        }
        self.poll_buffered()
    }

    /// Ends the stream.
    ///
    /// Events still complete in the buffer stay available to [`poll_event`](Self::poll_event).
    /// An event that was never terminated by a blank line is discarded with any `id` it set,
    /// as WHATWG requires, and reported as [`SseError::IncompleteEvent`]. The decoder is then
    /// ready for a new stream (a reconnection): the BOM check is re-armed, and the last event
    /// ID and the reconnection time are kept, since a client sends them back when it
    /// reconnects.
    pub fn finish(&mut self) -> Result<(), SseError> {
        loop {
            match self.poll_buffered() {
                Ok(Some(ev)) => self.queued.push_back(Ok(ev)),
                Ok(None) => break,
                Err(e) => self.queued.push_back(Err(e)),
            }
        }
        let lines = &mut self.lines;
        let tail = &self.input.buf[self.input.pos..];
        let tail = if lines.bom_pending && BOM.starts_with(tail) {
            &[][..]
        } else {
            tail
        };
        let tail_is_data =
            lines.skip == Skip::No && (tail.starts_with(b"data:") || tail == b"data".as_slice());
        let pending_data = if tail_is_data {
            let v = &tail[5.min(tail.len())..];
            let v = v.strip_prefix(b" ").unwrap_or(v);
            Some(v.len())
        } else {
            None
        };
        let gathered = lines.fields.pending_data();
        let result = if lines.skip == Skip::No && (gathered.is_some() || pending_data.is_some()) {
            Err(SseError::IncompleteEvent {
                data_bytes: gathered.unwrap_or(0) + pending_data.unwrap_or(0),
            })
        } else {
            Ok(())
        };
        self.input.clear();
        lines.bom_pending = true;
        lines.skip_lf = false;
        lines.skip = Skip::No;
        lines.fields.reset_event();
        result
    }

    /// The last event ID (`None` when empty): what to send as `Last-Event-ID` on reconnect.
    ///
    /// This is WHATWG's "last event ID string": the `id` in force at the last blank line. The
    /// `id` of an event still arriving counts once its blank line is read, so a stream that
    /// breaks inside an event resumes from before it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.lines.fields.last_event_id()
    }

    /// The reconnection time the stream asked for with `retry:`, if it did.
    pub fn reconnection_time(&self) -> Option<Duration> {
        self.lines.fields.retry_ms.map(Duration::from_millis)
    }

    /// Bytes held in the decoder's buffer: pushed and not yet consumed by parsing.
    pub fn buffered_bytes(&self) -> usize {
        self.input.pending()
    }

    /// The next event of the buffer, owned.
    fn poll_buffered(&mut self) -> Result<Option<SseEvent>, SseError> {
        if self.parse_buffered()? {
            Ok(Some(self.lines.fields.take(&self.input.buf, None)))
        } else {
            Ok(None)
        }
    }

    /// Runs the line machine over the buffer: `true` when an event was dispatched.
    fn parse_buffered(&mut self) -> Result<bool, SseError> {
        let input = &mut self.input;
        match self
            .lines
            .parse(&input.buf, &mut input.pos, &mut input.scan)
        {
            Parsed::Event => Ok(true),
            Parsed::Fail(e) => Err(e),
            Parsed::Wait => Ok(false),
            Parsed::NeedMore => self.lines.hold(input).map(|()| false),
        }
    }

    /// The next event from the queue, the buffer, then `src[*at..]`, parsed in place where
    /// it can be: the buffer is only completed with the rest of its incomplete line, and
    /// what `src` leaves incomplete is copied into it.
    fn next_in(&mut self, src: &[u8], at: &mut usize) -> Result<Option<Found>, SseError> {
        if !self.queued.is_empty() {
            return Ok(Some(Found::Queued));
        }
        loop {
            if self.input.pending() > 0 {
                // A buffered tail already searched to its end holds no line: only its bound
                // is to check before completing it (the line machine would find nothing).
                let searched = self.input.scan == self.input.buf.len()
                    && !self.lines.bom_pending
                    && !self.lines.skip_lf;
                if searched {
                    self.lines.hold(&mut self.input)?;
                } else if self.parse_buffered()? {
                    return Ok(Some(Found::Buffer));
                }
                if self.input.pending() == 0 {
                    continue;
                }
                // The buffer holds an incomplete line: complete it from `src`.
                let rest = &src[*at..];
                if rest.is_empty() {
                    return Ok(None);
                }
                // Up to its line end, and the blank line after an LF when it is there: a
                // one-line event split by the push is then dispatched whole by the line
                // machine's own quick check, its data never copied twice.
                let end = self.lines.ends.find(rest);
                let take = match end {
                    Some(i) if rest[i] == b'\n' && rest.get(i + 1) == Some(&b'\n') => i + 2,
                    Some(i) => i + 1,
                    None => rest.len(),
                };
                let searched = self.input.scan == self.input.buf.len();
                self.input.push(&rest[..take]);
                *at += take;
                if let (true, Some(i)) = (searched, end) {
                    // Known to hold no line end up to the one just found: not searched again.
                    self.input.scan = self.input.buf.len() - take + i;
                }
                continue;
            }
            self.input.clear();
            if *at == src.len() {
                return Ok(None);
            }
            let from = *at;
            if self.lines.quick_event(src, at) {
                return Ok(Some(Found::Slice(from)));
            }
            let mut scan = from;
            match self.lines.parse(src, at, &mut scan) {
                Parsed::Event => return Ok(Some(Found::Slice(from))),
                Parsed::Fail(e) => return Err(e),
                Parsed::Wait | Parsed::NeedMore => {
                    // No line end in the rest: it waits in the buffer (which bounds it).
                    self.input.push(&src[*at..]);
                    self.input.scan = self.input.buf.len();
                    *at = src.len();
                }
            }
        }
    }
}
