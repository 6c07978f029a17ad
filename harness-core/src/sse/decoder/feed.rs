//! [`SseFeed`]: the events of one [`SseDecoder::feed`], parsed in place, through the fast
//! lane where it applies and the line machine elsewhere.

use super::lane::{Lane, LaneEvent};
use super::{Found, SseDecoder};
use crate::sse::event::{SseError, SseEvent, SseEventRef};
use crate::sse::fields::within;

/// The events of one [`SseDecoder::feed`], parsed in place from the fed bytes.
///
/// As an [`Iterator`] it yields owned [`SseEvent`]s; [`next_ref`](Self::next_ref) yields
/// borrowed ones. Dropping it copies the bytes it has not parsed yet into the decoder's
/// buffer, so nothing is lost: the next `feed` or `poll_event` goes on from there.
#[derive(Debug)]
pub struct SseFeed<'d, 's> {
    dec: &'d mut SseDecoder,
    src: &'s [u8],
    at: usize,
    /// The part of the fed bytes validated as UTF-8, so that an event's data is a slice of
    /// it rather than a validation of its own.
    window: Window<'s>,
    /// The decoder was [`lane_ready`](SseDecoder::lane_ready) and only the lane ran since.
    ready: bool,
}

/// How many fed bytes are validated at once: a window small enough to stay in the L1 cache
/// while its events are then read, so that a large push is not read from memory twice.
const WINDOW_BYTES: usize = 16 << 10;

/// A window of the fed bytes validated as UTF-8: `src[start..end]`, from a line start to a
/// line end or an ASCII byte; `text` is `None` when they are not valid (their events are then
/// decoded one by one).
#[derive(Clone, Copy, Debug)]
struct Window<'s> {
    start: usize,
    end: usize,
    text: Option<&'s str>,
}

impl<'s> Window<'s> {
    const NONE: Window<'static> = Window {
        start: 0,
        end: 0,
        text: None,
    };

    /// `src[lo..hi]`, which lies within the lines from `from` (a line start) to `hi`'s line
    /// end, as a slice of the validated text: the window moves to `from` when it does not
    /// hold it. `None`: not valid UTF-8.
    #[inline(always)]
    fn slice(&mut self, src: &'s [u8], from: usize, lo: usize, hi: usize) -> Option<&'s str> {
        if lo < self.start || hi > self.end {
            *self = Window::at(src, from, hi);
        }
        within(self.text(), lo, hi)
    }

    /// The validated text and where it starts, moved to `from` (a line start) when it does
    /// not hold it, for the line machine's events (their data is sliced from it if it lies
    /// within, else validated alone).
    fn text_from(&mut self, src: &'s [u8], from: usize) -> Option<(usize, &'s str)> {
        if from < self.start || from >= self.end {
            *self = Window::at(src, from, from);
        }
        self.text()
    }

    #[inline(always)]
    fn text(&self) -> Option<(usize, &'s str)> {
        Some((self.start, self.text?))
    }

    /// The window from `from` (a line start) to [`WINDOW_BYTES`] past it, or past `need`
    /// when that is further: to its last byte when that is ASCII, else to its last line end.
    #[cold]
    fn at(src: &'s [u8], from: usize, need: usize) -> Window<'s> {
        let limit = from
            .saturating_add(WINDOW_BYTES)
            .max(need.saturating_add(1))
            .min(src.len());
        // It ends where no character can be split: after an ASCII byte (the end of a small
        // push nearly always is one), else at the last line end.
        let end = match src.get(from..limit) {
            Some([.., last]) if last.is_ascii() => limit,
            Some(w) => match memchr::memrchr2(b'\n', b'\r', w) {
                Some(i) => from + i,
                None => return Window::NONE,
            },
            None => return Window::NONE,
        };
        Window {
            start: from,
            end,
            text: simdutf8::basic::from_utf8(&src[from..end]).ok(),
        }
    }
}

/// What [`SseFeed::straight`] found.
enum Straight<'s> {
    /// A one-line event's data.
    Event(&'s str),
    /// The start of a `data:` line with no line end: the tail.
    Tail,
    /// Not its case.
    No,
}

/// What the fast lane gave [`SseFeed`].
enum Quick<'s> {
    /// An event of the common shape: its data and its type (`None`: the default).
    Event(&'s str, Option<&'s str>),
    /// The fed bytes are used up (their incomplete tail is in the buffer).
    Done,
    /// The buffered tail is past the line limit.
    Fail(SseError),
    /// A one-line event completed in the decoder's buffer ([`SseFeed::join`]): the span of
    /// its data in the buffer, not yet validated.
    Joined(usize, usize),
    /// The line machine's turn.
    Slow,
}

impl<'d, 's> SseFeed<'d, 's> {
    /// A feed of `src` into `dec`, from its start.
    pub(super) fn new(dec: &'d mut SseDecoder, src: &'s [u8]) -> Self {
        SseFeed {
            dec,
            src,
            at: 0,
            window: Window::NONE,
            ready: false,
        }
    }

    /// The lane's most common case, taken first: the lane is ready and the next line is an
    /// event's one `data:` line, whole, with the blank line after it, its value inside the
    /// validated text (its data, the feed moved past it), or the start of one with no line
    /// end yet (the tail). Else [`lane`](Self::lane) decides (nothing changed but the window).
    #[inline(always)]
    fn straight(&mut self) -> Straight<'s> {
        if !self.ready || self.src.get(self.at) != Some(&b'd') {
            return Straight::No;
        }
        let (lo, hi) = match self.dec.lines.data_event(self.src, self.at) {
            Ok(span) => span,
            Err(true) => return Straight::Tail,
            Err(false) => return Straight::No,
        };
        let Some(data) = self.window.slice(self.src, self.at, lo, hi) else {
            return Straight::No;
        };
        self.at = hi + 2;
        Straight::Event(data)
    }

    /// The end of the fed bytes: the tail buffered ([`tail`](Self::tail)), or its error.
    #[cold]
    fn end<T>(&mut self) -> Option<Result<T, SseError>> {
        match self.tail() {
            Quick::Fail(e) => Some(Err(e)),
            _ => None,
        }
    }

    /// The decoder's fast lane ([`SseDecoder::lane`]) at the feed's position: an event of
    /// the common shape with its data (and `id`) inside the feed's validated text is
    /// dispatched here, the feed moved past it; an incomplete tail goes into the buffer as
    /// the line machine would put it there.
    #[inline(always)]
    fn lane(&mut self) -> Quick<'s> {
        if !self.ready {
            if !self.dec.lane_ready() {
                return self.join();
            }
            self.ready = true;
        }
        match self.dec.lines.lane(self.src, &mut self.at) {
            Lane::Other => {
                self.ready = false;
                Quick::Slow
            }
            Lane::Tail => self.tail(),
            Lane::Event(ev) => {
                let Some(data) = self.window.slice(self.src, self.at, ev.data.0, ev.data.1) else {
                    self.ready = false;
                    return Quick::Slow;
                };
                if ev.id.is_some() || ev.event_type.is_some() {
                    return self.lane_fields(&ev, data);
                }
                self.at = ev.next;
                Quick::Event(data, None)
            }
        }
    }

    /// A lane event with an `id:` or `event:` line: their values taken from the validated
    /// text (else the line machine's way, nothing changed), then the event dispatched.
    #[inline(never)]
    fn lane_fields(&mut self, ev: &LaneEvent, data: &'s str) -> Quick<'s> {
        let mut text = |span: Option<(usize, usize)>| match span {
            None => Some(None),
            Some((lo, hi)) => self.window.slice(self.src, self.at, lo, hi).map(Some),
        };
        let (Some(id), Some(event_type)) = (text(ev.id), text(ev.event_type)) else {
            self.ready = false;
            return Quick::Slow;
        };
        if let Some(id) = id {
            self.dec.lines.fields.dispatch_id(id);
        }
        self.at = ev.next;
        // An empty type is the default one.
        Quick::Event(data, event_type.filter(|t| !t.is_empty()))
    }

    /// The decoder holds only the start of an event's first line (a lane [`tail`](Self::tail):
    /// searched, nothing gathered) and the fed bytes end that line with an LF and the blank
    /// line: both are added to the buffer, as the line machine would add them, and the lane
    /// reads the event there. A push that splits a one-line event then costs no trip through
    /// the line machine. Anything else is the line machine's, in the same state.
    #[inline(never)]
    fn join(&mut self) -> Quick<'s> {
        let dec = &mut *self.dec;
        let input = &mut dec.input;
        let pending = input.pending();
        if pending == 0
            || input.scan != input.buf.len()
            || !dec.queued.is_empty()
            || !dec.lines.idle()
        {
            return Quick::Slow;
        }
        let rest = &self.src[self.at..];
        let Some(i) = dec.lines.ends.find(rest) else {
            return Quick::Slow;
        };
        if rest[i] != b'\n' || rest.get(i + 1) != Some(&b'\n') {
            return Quick::Slow;
        }
        // What `next_in` does with this line: added up to the blank line, searched up to
        // its end (the buffered part was searched before).
        input.push(&rest[..i + 2]);
        self.at += i + 2;
        let end = input.buf.len() - 2;
        input.scan = end;
        // The lane's `data:` line, as it reads one in the fed bytes.
        let start = input.pos;
        if !input.buf[start..end].starts_with(b"data:") {
            return Quick::Slow;
        }
        match dec.lines.data_value(&input.buf, start, end) {
            Some((lo, hi)) => Quick::Joined(lo, hi),
            None => Quick::Slow,
        }
    }

    /// A [`Quick::Joined`] event is read: the buffer is consumed (its one `data:` line sets
    /// no state but the data) and the lane is ready again.
    #[inline(always)]
    fn consume_joined(&mut self) {
        let input = &mut self.dec.input;
        input.pos = input.buf.len();
        input.scan = input.pos;
        self.ready = true;
    }

    /// The rest of the fed bytes is an incomplete line the lane can buffer: it goes into
    /// the buffer, searched, and its bound is checked, as the line machine would.
    #[cold]
    fn tail(&mut self) -> Quick<'s> {
        self.ready = false;
        let dec = &mut *self.dec;
        dec.input.clear();
        dec.input.push(&self.src[self.at..]);
        dec.input.scan = dec.input.buf.len();
        self.at = self.src.len();
        match dec.lines.hold(&mut dec.input) {
            Ok(()) => Quick::Done,
            Err(e) => Quick::Fail(e),
        }
    }

    /// The next event, borrowed from the fed bytes or the decoder until the next call: no
    /// allocation per event (unless its data is not valid UTF-8, or its type is new).
    /// `None`: the fed bytes are used up. An `Err` concerns one event; keep calling.
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<SseEventRef<'_>, SseError>> {
        match self.straight() {
            Straight::Event(data) => Some(Ok(SseEventRef {
                event_type: None,
                data,
                id: self.dec.lines.fields.current_id(),
            })),
            Straight::Tail => self.end(),
            Straight::No => self.lane_ref(),
        }
    }

    /// [`next_ref`](Self::next_ref) past its straight path.
    #[inline(never)]
    fn lane_ref(&mut self) -> Option<Result<SseEventRef<'_>, SseError>> {
        match self.lane() {
            Quick::Event(data, event_type) => {
                return Some(Ok(SseEventRef {
                    event_type,
                    data,
                    id: self.dec.lines.fields.current_id(),
                }));
            }
            Quick::Done => return None,
            Quick::Fail(e) => return Some(Err(e)),
            Quick::Joined(lo, hi) => return self.joined_ref(lo, hi),
            Quick::Slow => {}
        }
        self.slow_ref()
    }

    /// [`next_ref`](Self::next_ref) of a [`Quick::Joined`] event: its data borrowed from the
    /// buffer (decoded into the data buffer when it is not valid UTF-8, as the line machine
    /// would).
    #[inline(never)]
    fn joined_ref(&mut self, lo: usize, hi: usize) -> Option<Result<SseEventRef<'_>, SseError>> {
        self.consume_joined();
        let dec = &mut *self.dec;
        let bytes = &dec.input.buf[lo..hi];
        let data = match simdutf8::basic::from_utf8(bytes) {
            Ok(data) => data,
            Err(_) => {
                dec.lines.fields.decode_data(bytes);
                dec.lines.fields.data()
            }
        };
        Some(Ok(SseEventRef {
            event_type: None,
            data,
            id: dec.lines.fields.current_id(),
        }))
    }

    /// [`next_ref`](Self::next_ref) by the line machine.
    #[inline(never)]
    fn slow_ref(&mut self) -> Option<Result<SseEventRef<'_>, SseError>> {
        let dec = &mut *self.dec;
        match dec.next_in(self.src, &mut self.at) {
            Err(e) => Some(Err(e)),
            Ok(None) => None,
            Ok(Some(Found::Queued)) => match dec.queued.pop_front()? {
                Err(e) => Some(Err(e)),
                Ok(ev) => Some(Ok(SseEventRef::from(&*dec.lent.insert(ev)))),
            },
            Ok(Some(Found::Buffer)) => Some(Ok(dec.lines.fields.borrow(&dec.input.buf, None))),
            Ok(Some(Found::Slice(from))) => {
                let text = self.window.text_from(self.src, from);
                Some(Ok(dec.lines.fields.borrow(self.src, text)))
            }
        }
    }

    /// The decoder the bytes are fed to (its last event ID, its reconnection time).
    pub fn decoder(&self) -> &SseDecoder {
        self.dec
    }
}

impl Iterator for SseFeed<'_, '_> {
    type Item = Result<SseEvent, SseError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.straight() {
            Straight::Event(data) => {
                let id = self.dec.lines.fields.current_id_shared();
                Some(Ok(SseEvent::dispatched(None, data, id)))
            }
            Straight::Tail => self.end(),
            Straight::No => self.lane_next(),
        }
    }
}

impl SseFeed<'_, '_> {
    /// [`Iterator::next`] past its straight path.
    #[inline(never)]
    fn lane_next(&mut self) -> Option<Result<SseEvent, SseError>> {
        match self.lane() {
            Quick::Event(data, event_type) => {
                let fields = &mut self.dec.lines.fields;
                let event_type = event_type.map(|t| fields.intern(t.as_bytes()));
                return Some(Ok(SseEvent::dispatched(
                    event_type,
                    data,
                    fields.current_id_shared(),
                )));
            }
            Quick::Done => return None,
            Quick::Fail(e) => return Some(Err(e)),
            Quick::Joined(lo, hi) => return Some(Ok(self.joined_owned(lo, hi))),
            Quick::Slow => {}
        }
        self.slow_next()
    }
}

impl SseFeed<'_, '_> {
    /// [`Iterator::next`] of a [`Quick::Joined`] event.
    #[inline(never)]
    fn joined_owned(&mut self, lo: usize, hi: usize) -> SseEvent {
        self.consume_joined();
        let dec = &mut *self.dec;
        let id = dec.lines.fields.current_id_shared();
        let bytes = &dec.input.buf[lo..hi];
        match simdutf8::basic::from_utf8(bytes) {
            Ok(data) => SseEvent::dispatched(None, data, id),
            Err(_) => SseEvent::dispatched(None, &String::from_utf8_lossy(bytes), id),
        }
    }

    /// [`Iterator::next`] by the line machine.
    #[inline(never)]
    fn slow_next(&mut self) -> Option<Result<SseEvent, SseError>> {
        let dec = &mut *self.dec;
        match dec.next_in(self.src, &mut self.at) {
            Err(e) => Some(Err(e)),
            Ok(None) => None,
            Ok(Some(Found::Queued)) => dec.queued.pop_front(),
            Ok(Some(Found::Buffer)) => Some(Ok(dec.lines.fields.take(&dec.input.buf, None))),
            Ok(Some(Found::Slice(from))) => {
                let text = self.window.text_from(self.src, from);
                Some(Ok(dec.lines.fields.take(self.src, text)))
            }
        }
    }
}

impl Drop for SseFeed<'_, '_> {
    fn drop(&mut self) {
        if let Some(rest) = self.src.get(self.at..) {
            if !rest.is_empty() {
                self.dec.input.push(rest);
            }
        }
    }
}
