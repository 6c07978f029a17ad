//! The fast lane of [`SseFeed`](super::SseFeed): the shape nearly every event of a real
//! stream has (an optional `id:` line and an optional `event:` line in either order, one
//! `data:` line, the blank line; comments and blank lines between events), recognised in one pass over the caller's bytes with no write to
//! the line machine. Anything else, or any doubt, goes the line machine's way, which gives
//! the same events: the lane is only a shortcut through states where the WHATWG rules
//! change nothing but the last event ID.

use super::{Lines, Skip, SseDecoder};

/// An event of the common shape: spans of the source.
pub(super) struct LaneEvent {
    /// The value of its `data:` line (one leading space removed).
    pub(super) data: (usize, usize),
    /// The value of its `id:` line, when it has one (one leading space removed, no NUL).
    pub(super) id: Option<(usize, usize)>,
    /// The value of its `event:` line, when it has one (one leading space removed).
    pub(super) event_type: Option<(usize, usize)>,
    /// Where the next line starts, past the blank line.
    pub(super) next: usize,
}

/// What the lane found at the feed's position.
pub(super) enum Lane {
    /// An event of the common shape.
    Event(LaneEvent),
    /// The rest of the source is an incomplete line that starts an event (or a comment):
    /// it can go into the buffer as it is.
    Tail,
    /// Anything else: the line machine decides.
    Other,
}

impl SseDecoder {
    /// Whether the lane may run: nothing queued nor buffered, the line machine idle. The
    /// lane keeps it so (an [`SseFeed`](super::SseFeed) checks it once, not per event).
    #[inline]
    pub(super) fn lane_ready(&self) -> bool {
        self.queued.is_empty() && self.input.pending() == 0 && self.lines.idle()
    }
}

impl Lines {
    /// Between events, with nothing being gathered: comment and blank lines change nothing,
    /// and an event of the common shape changes only the last event ID.
    #[inline(always)]
    pub(super) fn idle(&self) -> bool {
        !self.bom_pending && !self.skip_lf && self.skip == Skip::No && self.fields.idle()
    }

    /// The lane at `src[*at..]`, when the decoder is [`lane_ready`](SseDecoder::lane_ready).
    /// Comment and blank lines (LF-terminated, within the line limit) are passed over,
    /// moving `*at`; an event of the common shape is returned as spans, `*at` left at its
    /// start, nothing written.
    #[inline(always)]
    pub(super) fn lane(&self, src: &[u8], at: &mut usize) -> Lane {
        // Most events are one `data:` line: straight to it.
        if src.get(*at) == Some(&b'd') {
            return self.data_line(src, *at, None, None, false);
        }
        // Then one `id:` or `event:` line before it (a TanStack cursor, a Responses type).
        if let Some(ev) = self.field_event(src, *at) {
            return Lane::Event(ev);
        }
        self.lane_lines(src, at)
    }

    /// An event of one `id:` or `event:` line, then one `data:` line and the blank line, at
    /// `src[p..]`, all whole and within the limits (no NUL in the id): what
    /// [`lane_lines`](Self::lane_lines) gives for it, without its loop. `None`: anything
    /// else, which `lane_lines` reads (a tail, another shape).
    #[inline(always)]
    fn field_event(&self, src: &[u8], p: usize) -> Option<LaneEvent> {
        let rest = src.get(p..)?;
        let is_id = if rest.starts_with(b"id:") {
            true
        } else if rest.starts_with(b"event:") {
            false
        } else {
            return None;
        };
        let (lo, hi, next) = self.field_line(src, p, if is_id { 3 } else { 6 })?;
        if is_id && src[lo..hi].contains(&0) {
            return None;
        }
        let data = self.data_event(src, next).ok()?;
        let field = Some((lo, hi));
        Some(LaneEvent {
            data,
            id: if is_id { field } else { None },
            event_type: if is_id { None } else { field },
            next: data.1 + 2,
        })
    }

    /// [`lane`](Self::lane) for an event that starts with another line.
    #[inline(never)]
    fn lane_lines(&self, src: &[u8], at: &mut usize) -> Lane {
        let max_line = self.cfg.max_line_bytes;
        let mut p = *at;
        let (mut id, mut event_type) = (None, None);
        // An `id:` or `event:` line was read: the event has started, and a blank line would
        // now end it (with no data: not the lane's case).
        let mut started = false;
        loop {
            match src.get(p) {
                Some(b'd') => break,
                Some(b'\n') if !started => p += 1,
                Some(b':') => {
                    let Some(end) = self.ends.find(&src[p..]) else {
                        return self.stop(at, p, started, Lane::Tail);
                    };
                    if src[p + end] != b'\n' || end > max_line {
                        return self.stop(at, p, started, Lane::Other);
                    }
                    p += end + 1;
                }
                Some(b'i') if id.is_none() && src[p..].starts_with(b"id:") => {
                    let Some((lo, hi, next)) = self.field_line(src, p, 3) else {
                        return self.stop(at, p, started, self.unended(src, p));
                    };
                    if src[lo..hi].contains(&0) {
                        // An id with NUL is ignored: the line machine's case.
                        return self.stop(at, p, started, Lane::Other);
                    }
                    if !started {
                        *at = p;
                        started = true;
                    }
                    id = Some((lo, hi));
                    p = next;
                }
                Some(b'e') if event_type.is_none() && src[p..].starts_with(b"event:") => {
                    let Some((lo, hi, next)) = self.field_line(src, p, 6) else {
                        return self.stop(at, p, started, self.unended(src, p));
                    };
                    if !started {
                        *at = p;
                        started = true;
                    }
                    event_type = Some((lo, hi));
                    p = next;
                }
                _ => return self.stop(at, p, started, Lane::Other),
            }
        }
        if !started {
            *at = p;
        }
        self.data_line(src, p, id, event_type, started)
    }

    /// The event's `data:` line at `src[p..]` and the blank line after it, with the `id` and
    /// type read before it (`started`: at least one line was).
    #[inline(always)]
    fn data_line(
        &self,
        src: &[u8],
        p: usize,
        id: Option<(usize, usize)>,
        event_type: Option<(usize, usize)>,
        started: bool,
    ) -> Lane {
        match self.data_event(src, p) {
            Ok((lo, hi)) => Lane::Event(LaneEvent {
                data: (lo, hi),
                id,
                event_type,
                next: hi + 2,
            }),
            Err(true) if !started => Lane::Tail,
            Err(_) => Lane::Other,
        }
    }

    /// The `data:` line at `src[p..]`, LF-ended within the limits, and the blank line after
    /// it: the span of its value (one leading space removed), the next line starting two
    /// bytes past it. `Err(true)`: a `data:` line with no line end yet (a tail).
    #[inline(always)]
    pub(super) fn data_event(&self, src: &[u8], p: usize) -> Result<(usize, usize), bool> {
        let rest = &src[p..];
        if !rest.starts_with(b"data:") {
            return Err(false);
        }
        let Some(end) = self.ends.find(&rest[5..]).map(|e| e + 5) else {
            return Err(true);
        };
        if rest[end] != b'\n' || rest.get(end + 1) != Some(&b'\n') {
            return Err(false);
        }
        self.data_value(src, p, p + end).ok_or(false)
    }

    /// The value of the `data:` line `src[p..end]` (`end`: its line end), one leading space
    /// removed, when the line and the value are within the limits.
    #[inline(always)]
    pub(super) fn data_value(&self, src: &[u8], p: usize, end: usize) -> Option<(usize, usize)> {
        if end - p > self.cfg.max_line_bytes {
            return None;
        }
        // `src[p + 5]` is the line end when the value is empty.
        let lo = p + 5 + usize::from(src[p + 5] == b' ');
        (end - lo <= self.cfg.max_event_bytes).then_some((lo, end))
    }

    /// The field line `name:value` at `src[p..]` whose name and colon are `name_len` bytes:
    /// its value (one leading space removed) and where the next line starts, when it ends
    /// with an LF within the line limit.
    #[inline(always)]
    fn field_line(&self, src: &[u8], p: usize, name_len: usize) -> Option<(usize, usize, usize)> {
        let rest = &src[p..];
        let end = self.ends.find(rest)?;
        if rest[end] != b'\n' || end > self.cfg.max_line_bytes {
            return None;
        }
        // `rest[name_len]` is the line end when the value is empty.
        let lo = name_len + usize::from(rest[name_len] == b' ');
        Some((p + lo, p + end, p + end + 1))
    }

    /// Why [`field_line`](Self::field_line) gave nothing at `src[p..]`: no line end yet (a
    /// tail), or a line the line machine must read.
    #[cold]
    fn unended(&self, src: &[u8], p: usize) -> Lane {
        match self.ends.find(&src[p..]) {
            None => Lane::Tail,
            Some(_) => Lane::Other,
        }
    }

    /// The lane stops at `p`: lines passed over before an event started are behind `*at`;
    /// once an event started (`*at` at its first line), only the line machine may go on, and
    /// a tail is not the lane's to buffer.
    #[inline(always)]
    fn stop(&self, at: &mut usize, p: usize, started: bool, why: Lane) -> Lane {
        if started {
            return Lane::Other;
        }
        *at = p;
        why
    }
}
