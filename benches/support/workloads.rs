//! The SSE and NDJSON workloads the benches time, shared by `benches/sse.rs`,
//! `benches/ndjson.rs` and the interleaved `benches/codec_ratios.rs`: ours (owned and
//! borrowed, in `chunk`-byte pushes) and the baselines (sse-stream, eventsource-stream,
//! serde_json's `StreamDeserializer`, `BufRead::split`, bare memchr), each returning a tally
//! so that nothing is optimised away and every implementation can be checked to agree.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use futures::StreamExt;
use harness_core::ndjson::NdjsonDecoder;
use harness_core::sse::SseDecoder;
use serde::de::IgnoredAny;

/// The push sizes of the matrix (issue 16): 1 KiB to 1 MiB.
pub const PUSH_SIZES: [(usize, &str); 5] = [
    (1 << 10, "1KiB"),
    (4 << 10, "4KiB"),
    (16 << 10, "16KiB"),
    (64 << 10, "64KiB"),
    (1 << 20, "1MiB"),
];

/// Events with data, counted and their data lengths summed.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub struct Tally {
    pub events: usize,
    pub data_bytes: usize,
}

/// Ours, the classic way: `push` (a copy into the decoder) and owned events from `poll_event`.
pub fn sse_push_poll(stream: &[u8], chunk: usize) -> Tally {
    let mut dec = SseDecoder::new();
    let mut t = Tally::default();
    for c in stream.chunks(chunk) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            t.events += 1;
            t.data_bytes += ev.data().len();
        }
    }
    dec.finish().unwrap();
    t
}

/// Ours in place, owned events: `feed` as an iterator of `SseEvent`.
pub fn sse_owned(stream: &[u8], chunk: usize) -> Tally {
    let mut dec = SseDecoder::new();
    let mut t = Tally::default();
    for c in stream.chunks(chunk) {
        for ev in dec.feed(c) {
            t.events += 1;
            t.data_bytes += ev.unwrap().data().len();
        }
    }
    dec.finish().unwrap();
    t
}

/// Ours in place, borrowed events: `feed` and `next_ref`.
pub fn sse_borrowed(stream: &[u8], chunk: usize) -> Tally {
    let mut dec = SseDecoder::new();
    let mut t = Tally::default();
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(ev) = feed.next_ref() {
            t.events += 1;
            t.data_bytes += ev.unwrap().data().len();
        }
    }
    dec.finish().unwrap();
    t
}

/// The stream cut into `Bytes` chunks, as a body stream yields them (made outside timing).
pub fn byte_chunks(stream: &Bytes, chunk: usize) -> Vec<Result<Bytes, std::io::Error>> {
    (0..stream.len())
        .step_by(chunk)
        .map(|i| Ok(stream.slice(i..(i + chunk).min(stream.len()))))
        .collect()
}

pub fn sse_stream_crate(chunks: Vec<Result<Bytes, std::io::Error>>) -> Tally {
    futures::executor::block_on(async {
        let mut s = sse_stream::SseByteStream::new(futures::stream::iter(chunks));
        let mut t = Tally::default();
        while let Some(ev) = s.next().await {
            if let Some(d) = ev.unwrap().data {
                t.events += 1;
                t.data_bytes += d.len();
            }
        }
        t
    })
}

pub fn eventsource_crate(chunks: Vec<Result<Bytes, std::io::Error>>) -> Tally {
    use eventsource_stream::Eventsource;
    futures::executor::block_on(async {
        let mut s = futures::stream::iter(chunks).eventsource();
        let mut t = Tally::default();
        while let Some(ev) = s.next().await {
            let ev = ev.unwrap();
            t.events += 1;
            t.data_bytes += ev.data.len();
        }
        t
    })
}

/// The framing limit: a bare memchr count of the line feeds.
pub fn memchr_newlines(stream: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', stream).count()
}

/// A flat view of an NDJSON frame, borrowed: what a typed reader of the stdio transport parses.
#[derive(serde::Deserialize)]
pub struct Frame<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: &'a str,
    #[serde(borrow)]
    pub cursor: Option<&'a str>,
}

/// Ours, the classic way: `push` then `poll_line`.
pub fn nd_push_lines(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        dec.push(c);
        while let Some(line) = dec.poll_line().unwrap() {
            n += line.len();
        }
    }
    dec.finish();
    while let Some(line) = dec.poll_line().unwrap() {
        n += line.len();
    }
    n
}

/// Ours in place: the lines of `feed`, borrowed.
pub fn nd_lines(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(line) = feed.next_line() {
            n += line.unwrap().len();
        }
    }
    n
}

/// Ours, the classic way, parsed: `push` then `poll::<IgnoredAny>`.
pub fn nd_push_ignored(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        dec.push(c);
        while dec.poll::<IgnoredAny>().unwrap().is_some() {
            n += 1;
        }
    }
    n
}

/// Ours in place, parsed: `feed` and `next_value::<IgnoredAny>` (each line its own parse,
/// so a bad line is that line's error).
pub fn nd_ignored(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(v) = feed.next_value::<IgnoredAny>() {
            v.unwrap();
            n += 1;
        }
    }
    n
}

/// Ours in place, owned values with one deserializer kept across the lines of a push:
/// `feed` and `values::<IgnoredAny>` (a bad line is still that line's error).
pub fn nd_values(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        for v in dec.feed(c).values::<IgnoredAny>() {
            v.unwrap();
            n += 1;
        }
    }
    n
}

/// Ours in place into the borrowed `Frame`.
pub fn nd_typed(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(f) = feed.next_value::<Frame<'_>>() {
            let f = f.unwrap();
            n += f.kind.len() + f.cursor.map_or(0, str::len);
        }
    }
    n
}

/// serde_json's `StreamDeserializer` over the whole buffer (one bad value ends it: no
/// isolation of a bad line).
pub fn stream_deserializer(stream: &[u8]) -> usize {
    serde_json::Deserializer::from_slice(stream)
        .into_iter::<IgnoredAny>()
        .count()
}

/// The usual std-only reader: `BufRead::split(b'\n')` (a `Vec` per line) and a parse per line.
pub fn bufread_split(stream: &[u8], chunk: usize) -> usize {
    use std::io::BufRead;
    let reader = std::io::BufReader::with_capacity(chunk, stream);
    let mut n = 0;
    for line in reader.split(b'\n') {
        let line = line.unwrap();
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let _: IgnoredAny = serde_json::from_slice(&line).unwrap();
        n += 1;
    }
    n
}

/// serde_json into the flat `Frame` over the lines split beforehand (no framing): the parse
/// limit of the typed path.
pub fn flat_frames(lines: &[&[u8]]) -> usize {
    let mut n = 0;
    for l in lines {
        let f: Frame<'_> = serde_json::from_slice(l).unwrap();
        n += f.kind.len() + f.cursor.map_or(0, str::len);
    }
    n
}
