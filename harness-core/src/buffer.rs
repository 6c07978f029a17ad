//! The input buffer both line decoders share. With `feed` it holds only what a push left
//! incomplete (and what the caller has not read yet); complete lines are read in place.

/// Bytes pushed and not yet consumed, with the scan position of the line search.
///
/// `buf[pos..]` is unconsumed; `buf[pos..scan]` is known to hold no line end, so a long line
/// arriving in many pushes is scanned once (linear time, never quadratic).
#[derive(Debug, Default)]
pub(crate) struct InputBuffer {
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) scan: usize,
}

impl InputBuffer {
    /// Appends bytes, first dropping the consumed prefix when it is at least half the
    /// buffer: amortised O(1) per byte, and consumed bytes are never kept for long.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.copy_within(self.pos.., 0);
            self.buf.truncate(self.buf.len() - self.pos);
            self.scan -= self.pos;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes pushed and not yet consumed.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Consumes everything buffered (the line search starts afresh).
    pub(crate) fn skip_all(&mut self) {
        self.pos = self.buf.len();
        self.scan = self.pos;
    }

    /// Forgets every byte (end of stream).
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.scan = 0;
    }
}
