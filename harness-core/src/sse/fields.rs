//! The per-event buffers of the WHATWG algorithm ("interpret a line", "dispatch the event"),
//! over lines that stay where they are: in the decoder's buffer or in the caller's slice.

use std::sync::Arc;

use super::event::{SseError, SseEvent, SseEventRef};

/// Event types remembered for reuse: a stream that cycles through a few types (`delta`,
/// `done`, …) allocates each once, not once per event.
const TYPE_CACHE: usize = 8;

/// The per-event buffers (data, event type, last event ID) and the event last dispatched.
#[derive(Debug, Default)]
pub(super) struct Fields {
    /// The data buffer, without the trailing LF the algorithm appends and later strips. Its
    /// capacity is kept from event to event on the borrowed path.
    data: String,
    /// The data is the value of one `data:` line still in the source, `source[lo..hi]`, not
    /// yet decoded nor copied (the common one-line event costs no copy until it is read).
    span: Option<(usize, usize)>,
    /// Whether at least one `data` field was seen (an empty `data:` line still dispatches).
    has_data: bool,
    /// The raw bytes of the event type buffer.
    event_type: Vec<u8>,
    /// Interned event types, most recent last.
    types: Vec<Arc<str>>,
    /// The last event ID buffer (empty: none). A buffer, not a fresh string per `id:`
    /// line, so that a stream that numbers its events costs no allocation per event.
    id: String,
    /// `id` shared with owned events, made when one is first taken after `id` changed.
    id_shared: Option<Arc<str>>,
    /// An `id` field was read since the last blank line: the last event ID string is
    /// `dispatched_id`, and the buffer may differ from it. Otherwise the last event ID string
    /// is the buffer itself (so that an event dispatched with an `id` copies it once).
    id_pending: bool,
    /// While `id_pending`: the last event ID string, the buffer as the last blank line left
    /// it (WHATWG "dispatch the event", step 1). What a client resumes with; an `id` of an
    /// event that never got its blank line (cut off, or skipped for a limit) never becomes
    /// it. Otherwise unused ([`last_event_id`](Self::last_event_id)).
    dispatched_id: String,
    /// The reconnection time in milliseconds, when the stream set one.
    pub(super) retry_ms: Option<u64>,
    /// The type of the event just dispatched (and not yet taken).
    out_type: Option<Arc<str>>,
}

/// What one line did.
pub(super) enum Step {
    Continue,
    /// An event was dispatched: read it with [`Fields::take`] or [`Fields::borrow`].
    Dispatch,
    Fail(SseError),
}

impl Fields {
    /// Processes the complete line `src[lo..hi]` (without its terminator), per WHATWG
    /// "interpret a line".
    pub(super) fn line(&mut self, src: &[u8], lo: usize, hi: usize, max_event: usize) -> Step {
        let line = &src[lo..hi];
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
        let (name, vlo) = match split {
            Some(c) => {
                // Exactly one leading U+0020 SPACE is removed, never more, never a tab.
                let v = c + 1 + usize::from(line.get(c + 1) == Some(&b' '));
                (&line[..c], lo + v)
            }
            None => (line, hi), // a field name with an empty value
        };
        let value = &src[vlo..hi];
        match name {
            b"data" => {
                if self.has_data {
                    self.materialize(src);
                } else {
                    self.data.clear();
                }
                let extra = value.len() + usize::from(self.has_data);
                if self.data.len() + extra > max_event {
                    return Step::Fail(SseError::EventTooLarge { limit: max_event });
                }
                if self.has_data {
                    self.data.push('\n');
                    push_utf8(&mut self.data, value);
                } else {
                    self.has_data = true;
                    self.span = Some((vlo, hi));
                }
            }
            b"event" => {
                self.event_type.clear();
                self.event_type.extend_from_slice(value);
            }
            // Ignored when the value contains U+0000 NULL.
            b"id" if memchr::memchr(0, value).is_none() => {
                if !self.id_pending {
                    // The last event ID string, kept while the buffer awaits the blank line.
                    self.dispatched_id.clone_from(&self.id);
                }
                if self.id.as_bytes() != value {
                    self.id.clear();
                    push_utf8(&mut self.id, value);
                    self.id_shared = None;
                }
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

    /// The event is one `data` line whose value (one leading space still to strip) is
    /// `src[vlo..hi]`, followed by the blank line: gathers it and dispatches, as
    /// [`line`](Self::line) would for the two lines. `false` (nothing done) when an event is
    /// already being gathered with data or the value is past `max_event`: the caller goes
    /// the line-by-line way, which reports it.
    pub(super) fn single_data(
        &mut self,
        src: &[u8],
        vlo: usize,
        hi: usize,
        max_event: usize,
    ) -> bool {
        let vlo = vlo + usize::from(vlo < hi && src[vlo] == b' ');
        if self.has_data || hi - vlo > max_event {
            return false;
        }
        self.data.clear();
        self.has_data = true;
        self.span = Some((vlo, hi));
        matches!(self.dispatch(), Step::Dispatch)
    }

    /// Nothing is being gathered and no `id` awaits its blank line: a one-line event
    /// dispatched now has the default type, the current `id`, and changes no state.
    #[inline(always)]
    pub(super) fn idle(&self) -> bool {
        !self.has_data && !self.id_pending && self.event_type.is_empty()
    }

    /// An event with an `id:` line of value `id` (decoded) is dispatched from the idle state:
    /// the `id` buffer takes the value, and with no `id` pending the buffer is the last
    /// event ID string too.
    #[inline]
    pub(super) fn dispatch_id(&mut self, id: &str) {
        debug_assert!(self.idle());
        if self.id != id {
            self.id.clear();
            self.id.push_str(id);
            self.id_shared = None;
        }
    }

    /// The last event ID buffer (`None` when empty): the `id` of an event dispatched now.
    #[inline(always)]
    pub(super) fn current_id(&self) -> Option<&str> {
        (!self.id.is_empty()).then_some(self.id.as_str())
    }

    /// [`current_id`](Self::current_id), shared with owned events.
    #[inline]
    pub(super) fn current_id_shared(&mut self) -> Option<Arc<str>> {
        if self.id.is_empty() {
            return None;
        }
        let id = self
            .id_shared
            .get_or_insert_with(|| Arc::from(self.id.as_str()));
        Some(Arc::clone(id))
    }

    /// Copies a data value still in `src` into the data buffer (the source is about to go
    /// away, or a second `data:` line joins it).
    pub(super) fn materialize(&mut self, src: &[u8]) {
        if let Some((lo, hi)) = self.span.take().filter(|_| self.has_data) {
            self.data.clear();
            push_utf8(&mut self.data, &src[lo..hi]);
        }
    }

    /// The blank line: dispatch the event when the data buffer is not empty.
    #[inline(always)]
    fn dispatch(&mut self) -> Step {
        // Step 1, before the empty-data check: an event with only an `id` sets it too (the
        // buffer is the last event ID string once nothing is pending).
        self.id_pending = false;
        if !self.has_data {
            self.event_type.clear();
            return Step::Continue;
        }
        self.out_type = if self.event_type.is_empty() {
            None
        } else {
            Some(self.intern_type())
        };
        self.event_type.clear();
        self.has_data = false;
        Step::Dispatch
    }

    /// The event type buffer as a shared string, allocated once per distinct recent type.
    #[inline(never)]
    fn intern_type(&mut self) -> Arc<str> {
        let raw = std::mem::take(&mut self.event_type);
        let t = self.intern(&raw);
        self.event_type = raw;
        t
    }

    /// The event type `raw` (decoded) as a shared string, allocated once per distinct
    /// recent type.
    pub(super) fn intern(&mut self, raw: &[u8]) -> Arc<str> {
        if let Some(i) = self.types.iter().rposition(|t| t.as_bytes() == raw) {
            return Arc::clone(&self.types[i]);
        }
        let t: Arc<str> = Arc::from(String::from_utf8_lossy(raw));
        if self.types.len() == TYPE_CACHE {
            self.types.remove(0);
        }
        self.types.push(Arc::clone(&t));
        t
    }

    /// The event just dispatched, owned (its data moved out, or copied from `src`). `text`,
    /// when given, is `src[t0..]` (a prefix of it) already validated as UTF-8: a data span
    /// inside it is copied with no validation of its own.
    pub(super) fn take(&mut self, src: &[u8], text: Option<(usize, &str)>) -> SseEvent {
        let data = match self.span.take() {
            Some((lo, hi)) => match within(text, lo, hi) {
                Some(s) => s.to_owned(),
                None => decode_owned(&src[lo..hi]),
            },
            None => std::mem::take(&mut self.data),
        };
        let id = self.current_id_shared();
        SseEvent {
            event_type: self.out_type.take(),
            data,
            id,
        }
    }

    /// The event just dispatched, borrowed from `src` or from the data buffer: no allocation
    /// unless the data is not valid UTF-8 (then it is decoded into the data buffer). `text`
    /// as for [`take`](Self::take).
    #[inline]
    pub(super) fn borrow<'a>(
        &'a mut self,
        src: &'a [u8],
        text: Option<(usize, &'a str)>,
    ) -> SseEventRef<'a> {
        let data: &'a str = match self.span {
            Some((lo, hi)) => match within(text, lo, hi) {
                Some(s) => s,
                None => match self.decode_span(src, lo, hi) {
                    Some(s) => s,
                    None => &self.data,
                },
            },
            None => &self.data,
        };
        SseEventRef {
            event_type: self.out_type.as_deref(),
            data,
            id: self.current_id(),
        }
    }

    /// The data span `src[lo..hi]` outside the validated text: borrowed when it is valid
    /// UTF-8, else decoded into the data buffer (`None`).
    #[cold]
    fn decode_span<'s>(&mut self, src: &'s [u8], lo: usize, hi: usize) -> Option<&'s str> {
        match simdutf8::basic::from_utf8(&src[lo..hi]) {
            Ok(s) => Some(s),
            Err(_) => {
                self.span = None;
                self.data.clear();
                push_utf8(&mut self.data, &src[lo..hi]);
                None
            }
        }
    }

    /// Decodes `bytes`, which are not valid UTF-8, into the data buffer (invalid sequences
    /// replaced), for an event dispatched elsewhere: read it with [`data`](Self::data).
    #[cold]
    pub(super) fn decode_data(&mut self, bytes: &[u8]) {
        self.span = None;
        self.data.clear();
        push_utf8(&mut self.data, bytes);
    }

    /// The data buffer.
    pub(super) fn data(&self) -> &str {
        &self.data
    }

    /// Forgets a dispatched event nobody read as owned (the next one starts clean).
    pub(super) fn release(&mut self) {
        self.span = None;
        self.out_type = None;
    }

    /// Drops the event being gathered (after an error or at end of stream), with the `id` it
    /// may have set.
    pub(super) fn reset_event(&mut self) {
        self.data = String::new();
        self.span = None;
        self.has_data = false;
        self.event_type.clear();
        if self.id_pending {
            self.id.clone_from(&self.dispatched_id);
            self.id_shared = None;
            self.id_pending = false;
        }
    }

    /// The last event ID string (`None` when empty).
    pub(super) fn last_event_id(&self) -> Option<&str> {
        let id = if self.id_pending {
            &self.dispatched_id
        } else {
            &self.id
        };
        (!id.is_empty()).then_some(id.as_str())
    }

    /// Whether an event has data gathered, and how many bytes (at end of stream). A data
    /// value still in the source counts by its raw length; `finish` materializes first.
    pub(super) fn pending_data(&self) -> Option<usize> {
        self.has_data.then_some(self.data.len())
    }
}

/// `src[lo..hi]` as a slice of the validated `text` (`src[t0..]`, a prefix of it), when it
/// lies inside it on character boundaries.
#[inline]
pub(super) fn within(text: Option<(usize, &str)>, lo: usize, hi: usize) -> Option<&str> {
    let (t0, text) = text?;
    text.get(lo.checked_sub(t0)?..hi - t0)
}

/// Bytes decoded as UTF-8 into a new string, invalid sequences replaced.
fn decode_owned(bytes: &[u8]) -> String {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
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
