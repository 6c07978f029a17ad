//! The event stream (streaming.md): each event one SSE message `data: {json}\n\n`, `type`
//! and `sequence_number` first, the number counting from 0 by exactly one per event within
//! the stream; the bytes of each event are queued for the transport the moment the event is
//! made (never held back to the end, §1) and the transport is woken once per batch.
//!
//! A stream holds what its client has not taken yet, up to
//! [`UhpServerConfig::max_stream_buffer_bytes`](super::UhpServerConfig::max_stream_buffer_bytes):
//! past it the stream ends (the client reads the stored response: the stream is an
//! optimisation, §5) and the task goes on. A closed connection does not abort the task
//! either. Idle streams get a `: keep-alive` comment every
//! [`UhpServerConfig::keep_alive`](super::UhpServerConfig::keep_alive) (errors.md §5), which is no
//! event and takes no sequence number.

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use super::{ServerEvent, StreamId, StreamPoll, UhpServer, Wake};

/// An open stream.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    /// Bytes not yet taken by the transport.
    buf: Vec<u8>,
    /// The terminal event is queued; once `buf` is taken, the body ends.
    done: bool,
    /// A wake is queued and not yet answered by a poll.
    wake_queued: bool,
    /// Something was sent since the last keep-alive tick.
    active: bool,
}

/// Where a task's events go: its stream, if a client follows it, and the wake queue.
pub(crate) struct Out<'a> {
    pub(crate) streams: &'a mut HashMap<StreamId, Stream>,
    pub(crate) events: &'a mut VecDeque<ServerEvent>,
    pub(crate) max_buffer: usize,
}

/// Where one task's events go (its stream, if a client follows it) and their next number.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    pub(crate) stream: Option<StreamId>,
    pub(crate) seq: u64,
}

impl Out<'_> {
    /// `{…,"response":r}`: a lifecycle event.
    pub(crate) fn response(&mut self, c: &mut Cursor, ty: &str, r: &impl serde::Serialize) {
        self.event(&mut c.stream, &mut c.seq, ty, |b| {
            field(b, "response", r);
            b.push(b'}');
        });
    }

    /// `{…,"output_index":i,"item":item}`: `output_item.added` or `.done`.
    pub(crate) fn item(
        &mut self,
        c: &mut Cursor,
        ty: &str,
        index: usize,
        item: &impl serde::Serialize,
    ) {
        self.event(&mut c.stream, &mut c.seq, ty, |b| {
            int(b, "output_index", index as u64);
            field(b, "item", item);
            b.push(b'}');
        });
    }

    /// `{…,"item_id":id,"output_index":i[,"<sub>":0],"<key>":value}`: an event about part of
    /// an item (a delta, a done, a part).
    #[allow(clippy::too_many_arguments)] // the event's own fields
    pub(crate) fn part(
        &mut self,
        c: &mut Cursor,
        ty: &str,
        id: &str,
        index: usize,
        sub: Option<&str>,
        key: &str,
        value: &impl serde::Serialize,
    ) {
        self.event(&mut c.stream, &mut c.seq, ty, |b| {
            raw_str(b, "item_id", id);
            int(b, "output_index", index as u64);
            if let Some(s) = sub {
                int(b, s, 0);
            }
            field(b, key, value);
            b.push(b'}');
        });
    }

    /// Writes one event to `stream` (if the task has one): `write` gets the buffer after
    /// `{"type":"…","sequence_number":N` and must close the object. The sequence number
    /// advances whether or not anyone listens, so every stream of a task counts alike.
    pub(crate) fn event(
        &mut self,
        stream: &mut Option<StreamId>,
        seq: &mut u64,
        ty: &str,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let n = *seq;
        *seq += 1;
        let Some(id) = *stream else { return };
        let Some(s) = self.streams.get_mut(&id) else {
            *stream = None;
            return;
        };
        let b = &mut s.buf;
        b.extend_from_slice(b"data: {\"type\":\"");
        b.extend_from_slice(ty.as_bytes());
        b.extend_from_slice(b"\",\"sequence_number\":");
        let _ = write!(b, "{n}"); // ok: writing to a Vec cannot fail
        write(b);
        b.extend_from_slice(b"\n\n");
        s.active = true;
        if s.buf.len() > self.max_buffer {
            // The client does not keep up: end its stream; it reads the stored response.
            s.buf.clear();
            s.done = true;
            *stream = None;
        }
        if !s.wake_queued {
            s.wake_queued = true;
            self.events.push_back(ServerEvent::Wake(Wake::Stream(id)));
        }
    }

    /// Ends the stream after what is queued (the terminal event was written).
    pub(crate) fn end(&mut self, stream: &mut Option<StreamId>) {
        let Some(id) = stream.take() else { return };
        if let Some(s) = self.streams.get_mut(&id) {
            s.done = true;
            if !s.wake_queued {
                s.wake_queued = true;
                self.events.push_back(ServerEvent::Wake(Wake::Stream(id)));
            }
        }
    }
}

/// `,"key":` then `value` as JSON.
pub(crate) fn field(b: &mut Vec<u8>, key: &str, value: &impl serde::Serialize) {
    b.extend_from_slice(b",\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":");
    // ok: serializing our own values to a Vec does not fail
    let _ = serde_json::to_writer(&mut *b, value);
}

/// `,"key":N`.
pub(crate) fn int(b: &mut Vec<u8>, key: &str, n: u64) {
    b.extend_from_slice(b",\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":");
    let _ = write!(b, "{n}");
}

/// `,"key":"text"` for text known to need no escaping (our own ids).
pub(crate) fn raw_str(b: &mut Vec<u8>, key: &str, text: &str) {
    b.extend_from_slice(b",\"");
    b.extend_from_slice(key.as_bytes());
    b.extend_from_slice(b"\":\"");
    b.extend_from_slice(text.as_bytes());
    b.push(b'"');
}

impl UhpServer {
    /// Opens a stream (the caller checked the bound).
    pub(crate) fn open_stream(&mut self, now: std::time::Instant) -> StreamId {
        let id = StreamId(self.new_handle());
        self.streams.insert(id, Stream::default());
        if self.next_keep_alive.is_none() {
            self.next_keep_alive = now.checked_add(self.cfg.keep_alive);
        }
        id
    }

    /// The bytes of stream `id` not sent yet, all of them.
    pub fn poll_stream(&mut self, id: StreamId) -> StreamPoll {
        let Some(s) = self.streams.get_mut(&id) else {
            return StreamPoll::End;
        };
        s.wake_queued = false;
        if !s.buf.is_empty() {
            return StreamPoll::Data(std::mem::take(&mut s.buf));
        }
        if s.done {
            self.streams.remove(&id);
            return StreamPoll::End;
        }
        StreamPoll::Pending
    }

    /// The client of stream `id` went away (or the body ended): forget it. Its task goes on
    /// (streaming.md §5).
    pub fn close_stream(&mut self, id: StreamId) {
        // Its task finds the stream gone at its next event (ids are never reused).
        self.streams.remove(&id);
    }

    pub(crate) fn keep_alive_tick(&mut self) {
        for (id, s) in &mut self.streams {
            if !s.active && !s.done {
                s.buf.extend_from_slice(b": keep-alive\n\n");
                if !s.wake_queued {
                    s.wake_queued = true;
                    self.events.push_back(ServerEvent::Wake(Wake::Stream(*id)));
                }
            }
            s.active = false;
        }
    }
}

/// Everything a stream holds, taken (for a reply built whole).
pub(crate) fn take(s: &mut Stream) -> Option<Vec<u8>> {
    (!s.buf.is_empty()).then(|| std::mem::take(&mut s.buf))
}
