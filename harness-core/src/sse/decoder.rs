//! The WHATWG server-sent events parser as a sans-IO pull decoder, driven as
//! [`crate::run_loop`] states: `push`, drain `poll_event`, `finish` at the end.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::event::{SseError, SseEvent};
use crate::buffer::InputBuffer;

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

/// The per-event buffers of the WHATWG algorithm (data, event type, last event ID).
#[derive(Debug, Default)]
struct Fields {
    /// The data buffer, without the trailing LF the algorithm appends and later strips.
    data: String,
    /// Whether at least one `data` field was seen (an empty `data:` line still dispatches).
    has_data: bool,
    /// The raw bytes of the event type buffer.
    event_type: Vec<u8>,
    /// The last interned event type, reused while the stream repeats it.
    last_type: Option<Arc<str>>,
    /// The last event ID buffer (`None` when empty).
    last_event_id: Option<Arc<str>>,
    /// An `id` field was read since the last blank line: the buffer may differ from
    /// `last_dispatched_id`.
    id_pending: bool,
    /// The last event ID string: the buffer as the last blank line left it (WHATWG "dispatch
    /// the event", step 1). What a client resumes with; an `id` of an event that never got
    /// its blank line (cut off, or skipped for a limit) never becomes it.
    last_dispatched_id: Option<Arc<str>>,
    /// The reconnection time in milliseconds, when the stream set one.
    retry_ms: Option<u64>,
}

/// What one line did.
enum Step {
    Continue,
    Dispatch(SseEvent),
    Fail(SseError),
}

impl Fields {
    /// Processes one complete line (without its terminator), per WHATWG "interpret a line".
    fn line(&mut self, line: &[u8], max_event: usize) -> Step {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return Step::Continue; // a comment
        }
        // `data:` is most lines of a real stream: skip the colon search for it.
        let split = if line.len() >= 5 && &line[..5] == b"data:" {
            Some(4)
        } else {
            memchr::memchr(b':', line)
        };
        let (name, value) = match split {
            Some(c) => {
                let v = &line[c + 1..];
                // Exactly one leading U+0020 SPACE is removed, never more, never a tab.
                let v = v.strip_prefix(b" ").unwrap_or(v);
                (&line[..c], v)
            }
            None => (line, &b""[..]), // a field name with an empty value
        };
        match name {
            b"data" => {
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > max_event {
                    return Step::Fail(SseError::EventTooLarge { limit: max_event });
                }
                if self.has_data {
                    self.data.push('\n');
                } else {
                    self.has_data = true;
                    self.data.reserve_exact(value.len());
                }
                push_utf8(&mut self.data, value);
            }
            b"event" => {
                self.event_type.clear();
                self.event_type.extend_from_slice(value);
            }
            // Ignored when the value contains U+0000 NULL.
            b"id" if memchr::memchr(0, value).is_none() => {
                self.last_event_id = if value.is_empty() {
                    None
                } else if self.last_event_id.as_deref().map(str::as_bytes) == Some(value) {
                    self.last_event_id.take()
                } else {
                    Some(Arc::from(String::from_utf8_lossy(value)))
                };
                self.id_pending = true;
            }
            // Only when the value is all ASCII digits; saturates rather than overflows.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |acc, d| {
                    acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                self.retry_ms = Some(ms);
            }
            _ => {} // any other field (and a rejected id or retry) is ignored
        }
        Step::Continue
    }

    /// The blank line: dispatch the event when the data buffer is not empty.
    fn dispatch(&mut self) -> Step {
        // Step 1, before the empty-data check: an event with only an `id` sets it too.
        if self.id_pending {
            self.last_dispatched_id = self.last_event_id.clone();
            self.id_pending = false;
        }
        if !self.has_data {
            self.event_type.clear();
            return Step::Continue;
        }
        let event_type = if self.event_type.is_empty() {
            None
        } else {
            match &self.last_type {
                Some(t) if t.as_bytes() == self.event_type.as_slice() => Some(Arc::clone(t)),
                _ => {
                    let t: Arc<str> = Arc::from(String::from_utf8_lossy(&self.event_type));
                    self.last_type = Some(Arc::clone(&t));
                    Some(t)
                }
            }
        };
        self.event_type.clear();
        self.has_data = false;
        Step::Dispatch(SseEvent {
            event_type,
            data: std::mem::take(&mut self.data),
            id: self.last_event_id.clone(),
        })
    }

    /// Drops the event being gathered (after an error or at end of stream), with the `id` it
    /// may have set.
    fn reset_event(&mut self) {
        self.data = String::new();
        self.has_data = false;
        self.event_type.clear();
        if self.id_pending {
            self.last_event_id = self.last_dispatched_id.clone();
            self.id_pending = false;
        }
    }
}

/// Appends bytes decoded as UTF-8, replacing invalid sequences with U+FFFD as the WHATWG
/// "UTF-8 decode" does. Line terminators are ASCII, so a line never splits a character: a
/// character split across two pushes is decoded whole.
fn push_utf8(out: &mut String, bytes: &[u8]) {
    // simdutf8's validation is several times faster than std's on this hot path; on
    // invalid input std's lossy decoding (maximal-subpart replacement, as WHATWG's UTF-8
    // decode) does the replacing.
    match simdutf8::basic::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

/// A sans-IO decoder of a `text/event-stream` body, implementing the WHATWG HTML parsing
/// rules exactly.
///
/// Feed it bytes as they arrive with [`push`](Self::push) (which never fails and never
/// parses), take events out with [`poll_event`](Self::poll_event) (which parses lazily, so
/// an unread event costs nothing), and call [`finish`](Self::finish) at end of stream.
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
    cfg: SseConfig,
    input: InputBuffer,
    /// The BOM check is still to be made (start of a stream).
    bom_pending: bool,
    /// The last line ended with CR: an LF that comes next is part of that line end.
    skip_lf: bool,
    skip: Skip,
    fields: Fields,
    /// Events parsed by `finish` that the caller has not polled yet.
    queued: VecDeque<Result<SseEvent, SseError>>,
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
            cfg,
            input: InputBuffer::default(),
            bom_pending: true,
            skip_lf: false,
            skip: Skip::No,
            fields: Fields::default(),
            queued: VecDeque::new(),
        }
    }

    /// The decoder's limits.
    pub fn config(&self) -> SseConfig {
        self.cfg
    }

    /// Appends bytes of the stream. Never fails and never parses; call
    /// [`poll_event`](Self::poll_event) until it returns `Ok(None)` afterwards.
    pub fn push(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// The next complete event, parsed from the bytes pushed so far.
    ///
    /// `Ok(None)` means more bytes are needed. An `Err` concerns one event only (it was too
    /// large and was skipped); keep polling.
    pub fn poll_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(queued) = self.queued.pop_front() {
            return queued.map(Some);
        }
        self.parse()
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
            match self.parse() {
                Ok(Some(ev)) => self.queued.push_back(Ok(ev)),
                Ok(None) => break,
                Err(e) => self.queued.push_back(Err(e)),
            }
        }
        let tail = &self.input.buf[self.input.pos..];
        let tail = if self.bom_pending && BOM.starts_with(tail) {
            &[][..]
        } else {
            tail
        };
        let tail_is_data =
            self.skip == Skip::No && (tail.starts_with(b"data:") || tail == b"data".as_slice());
        let pending_data = if tail_is_data {
            let v = &tail[5.min(tail.len())..];
            let v = v.strip_prefix(b" ").unwrap_or(v);
            Some(v.len())
        } else {
            None
        };
        let result = if self.skip == Skip::No && (self.fields.has_data || pending_data.is_some()) {
            Err(SseError::IncompleteEvent {
                data_bytes: self.fields.data.len() + pending_data.unwrap_or(0),
            })
        } else {
            Ok(())
        };
        self.input.clear();
        self.bom_pending = true;
        self.skip_lf = false;
        self.skip = Skip::No;
        self.fields.reset_event();
        result
    }

    /// The last event ID (`None` when empty): what to send as `Last-Event-ID` on reconnect.
    ///
    /// This is WHATWG's "last event ID string": the `id` in force at the last blank line. The
    /// `id` of an event still arriving counts once its blank line is read, so a stream that
    /// breaks inside an event resumes from before it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.fields.last_dispatched_id.as_deref()
    }

    /// The reconnection time the stream asked for with `retry:`, if it did.
    pub fn reconnection_time(&self) -> Option<Duration> {
        self.fields.retry_ms.map(Duration::from_millis)
    }

    /// Bytes pushed and not yet consumed by parsing.
    pub fn buffered_bytes(&self) -> usize {
        self.input.pending()
    }

    fn parse(&mut self) -> Result<Option<SseEvent>, SseError> {
        loop {
            if self.bom_pending {
                let avail = &self.input.buf[self.input.pos..];
                if avail.len() < BOM.len() && BOM.starts_with(avail) {
                    return Ok(None); // could still be a BOM
                }
                if avail.starts_with(BOM) {
                    self.input.pos += BOM.len();
                    self.input.scan = self.input.scan.max(self.input.pos);
                }
                self.bom_pending = false;
            }
            if self.skip_lf {
                match self.input.buf.get(self.input.pos) {
                    None => return Ok(None),
                    Some(&b) => {
                        if b == b'\n' {
                            self.input.pos += 1;
                            self.input.scan = self.input.scan.max(self.input.pos);
                        }
                        self.skip_lf = false;
                    }
                }
            }
            // Half the lines of a stream are the blank line that ends an event: look at the
            // first byte before starting a vector search.
            let found = match self.input.buf.get(self.input.scan) {
                Some(b'\n' | b'\r') => Some(0),
                Some(_) => memchr::memchr2(b'\n', b'\r', &self.input.buf[self.input.scan..]),
                None => None,
            };
            let Some(off) = found else {
                self.input.scan = self.input.buf.len();
                let pending = self.input.pending();
                match self.skip {
                    // Inside a line that is being dropped, or a non-blank line of an event
                    // that is being skipped: drop the bytes as they come (bounded memory).
                    Skip::Line => {
                        self.input.skip_all();
                    }
                    Skip::Event if pending > 0 => {
                        self.input.skip_all();
                        self.skip = Skip::Line;
                    }
                    Skip::No if pending > self.cfg.max_line_bytes => {
                        self.input.skip_all();
                        self.skip = Skip::Line;
                        self.fields.reset_event();
                        return Err(SseError::LineTooLong {
                            limit: self.cfg.max_line_bytes,
                        });
                    }
                    _ => {}
                }
                return Ok(None);
            };
            let end = self.input.scan + off;
            let start = self.input.pos;
            self.skip_lf = self.input.buf[end] == b'\r';
            self.input.consume_through(end);
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
                return Err(SseError::LineTooLong {
                    limit: self.cfg.max_line_bytes,
                });
            }
            match self
                .fields
                .line(&self.input.buf[start..end], self.cfg.max_event_bytes)
            {
                Step::Continue => {}
                Step::Dispatch(ev) => return Ok(Some(ev)),
                Step::Fail(e) => {
                    self.skip = Skip::Event;
                    self.fields.reset_event();
                    return Err(e);
                }
            }
        }
    }
}
