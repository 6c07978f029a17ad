//! The fast lane of [`SseFeed`](super::SseFeed): the shape nearly every event of a real
//! stream has (an optional `id:` line, one `data:` line, the blank line; comments and blank
//! lines between events), recognised in one pass over the caller's bytes with no write to
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
    fn idle(&self) -> bool {
        !self.bom_pending && !self.skip_lf && self.skip == Skip::No && self.fields.idle()
    }

    /// The lane at `src[*at..]`, when the decoder is [`lane_ready`](SseDecoder::lane_ready).
    /// Comment and blank lines (LF-terminated, within the line limit) are passed over,
    /// moving `*at`; an event of the common shape is returned as spans, `*at` left at its
    /// start, nothing written.
    #[inline(always)]
    pub(super) fn lane(&self, src: &[u8], at: &mut usize) -> Lane {
        let max_line = self.cfg.max_line_bytes;
        let mut p = *at;
        let mut id = None;
        loop {
            match src.get(p) {
                Some(b'd') => break,
                Some(b'\n') => p += 1,
                Some(b':') => {
                    let Some(end) = self.ends.find(&src[p..]) else {
                        *at = p;
                        return Lane::Tail;
                    };
                    if src[p + end] != b'\n' || end > max_line {
                        *at = p;
                        return Lane::Other;
                    }
                    p += end + 1;
                }
                Some(b'i') if src[p..].starts_with(b"id:") => {
                    *at = p;
                    let rest = &src[p..];
                    let Some(end) = self.ends.find(rest) else {
                        return Lane::Tail;
                    };
                    if rest[end] != b'\n' || end > max_line {
                        return Lane::Other;
                    }
                    // `rest[3]` is the line end when the value is empty.
                    let vlo = 3 + usize::from(rest[3] == b' ');
                    if memchr::memchr(0, &rest[vlo..end]).is_some() {
                        return Lane::Other; // an id with NUL is ignored: the line machine's
                    }
                    id = Some((p + vlo, p + end));
                    p += end + 1;
                    break;
                }
                _ => {
                    *at = p;
                    return Lane::Other;
                }
            }
        }
        if id.is_none() {
            *at = p;
        }
        let rest = &src[p..];
        if !rest.starts_with(b"data:") {
            return Lane::Other;
        }
        let Some(end) = self.ends.find(&rest[5..]).map(|e| e + 5) else {
            return if id.is_none() {
                Lane::Tail
            } else {
                Lane::Other
            };
        };
        if rest[end] != b'\n' || rest.get(end + 1) != Some(&b'\n') || end > max_line {
            return Lane::Other;
        }
        // `rest[5]` is the line end when the value is empty.
        let vlo = 5 + usize::from(rest[5] == b' ');
        if end - vlo > self.cfg.max_event_bytes {
            return Lane::Other;
        }
        Lane::Event(LaneEvent {
            data: (p + vlo, p + end),
            id,
            next: p + end + 2,
        })
    }
}
