//! No allocation per event on the borrowed paths (issue 16): a counting global allocator
//! (`stats_alloc`, since our crates forbid the `unsafe impl GlobalAlloc` one would need)
//! around a second pass over a realistic stream, after a first pass has grown every buffer.
//! A plain `main` (`harness = false`): no test threads allocate beside it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;

use harness_core::ndjson::NdjsonDecoder;
use harness_core::sse::SseDecoder;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const EVENTS: usize = 20_000;

/// Events like a real stream's: a few event types, numbered ids, one-line JSON data, now and
/// then a two-line data and a comment, CRLF and LF line ends.
fn sse_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..EVENTS {
        let ty = ["delta", "delta", "delta", "done", "ping"][i % 5];
        let eol = if i % 7 == 0 { "\r\n" } else { "\n" };
        // Both fields, then an `id:` alone (a TanStack cursor), then an `event:` alone (a
        // Responses type): each shape the lane reads.
        let fields = match i % 3 {
            0 => format!("event: {ty}{eol}id: {i}{eol}"),
            1 => format!("id: {i}{eol}"),
            _ => format!("event: {ty}{eol}"),
        };
        out.extend_from_slice(fields.as_bytes());
        out.extend_from_slice(
            format!("data: {{\"seq\":{i},\"delta\":\"tok{i} é\"}}{eol}").as_bytes(),
        );
        if i % 11 == 0 {
            out.extend_from_slice(
                format!("data: second line {i}{eol}: keep-alive{eol}").as_bytes(),
            );
        }
        out.extend_from_slice(eol.as_bytes());
    }
    out
}

/// One pass of the borrowed SSE path in `chunk`-byte feeds; the events and data bytes seen.
fn sse_pass(dec: &mut SseDecoder, stream: &[u8], chunk: usize) -> (usize, usize) {
    let (mut n, mut bytes) = (0, 0);
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(ev) = feed.next_ref() {
            let ev = ev.unwrap();
            n += 1;
            bytes += ev.data().len() + ev.event_type().len() + ev.id().map_or(0, str::len);
        }
    }
    (n, bytes)
}

/// NDJSON frames, CRLF now and then, parsed into a struct that borrows from the line.
fn ndjson_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..EVENTS {
        let eol = if i % 7 == 0 { "\r\n" } else { "\n" };
        out.extend_from_slice(
            format!("{{\"type\":\"harness.event\",\"seq\":{i},\"text\":\"tok{i}\"}}{eol}")
                .as_bytes(),
        );
    }
    out
}

#[derive(serde::Deserialize)]
struct Frame<'a> {
    #[serde(rename = "type")]
    ty: &'a str,
    seq: u64,
}

/// One pass of NDJSON feeds parsed into borrowing frames; the frames and a checksum.
fn ndjson_pass(dec: &mut NdjsonDecoder, stream: &[u8], chunk: usize) -> (usize, u64) {
    let (mut n, mut sum) = (0, 0);
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(f) = feed.next_value::<Frame<'_>>() {
            let f = f.unwrap();
            n += 1;
            sum += f.seq + f.ty.len() as u64;
        }
    }
    (n, sum)
}

fn check(name: &str, allocations: usize, events: usize) {
    println!("{name}: {allocations} allocations over {events} events");
    assert!(events >= EVENTS, "{name}: only {events} events");
    assert_eq!(allocations, 0, "{name}: the borrowed path allocated");
}

fn main() {
    let stream = sse_stream();
    for chunk in [1024, 4096, 65536, 1 << 20] {
        let mut dec = SseDecoder::new();
        let warm = sse_pass(&mut dec, &stream, chunk); // grows the buffers once
        let region = Region::new(GLOBAL);
        let got = sse_pass(&mut dec, &stream, chunk);
        let stats = region.change();
        assert_eq!(warm, got, "both passes see the same events");
        check(
            &format!("sse borrowed, {chunk}-byte feeds"),
            stats.allocations + stats.reallocations,
            got.0,
        );
    }
    let stream = ndjson_stream();
    for chunk in [1024, 4096, 65536, 1 << 20] {
        let mut dec = NdjsonDecoder::new();
        let warm = ndjson_pass(&mut dec, &stream, chunk);
        let region = Region::new(GLOBAL);
        let got = ndjson_pass(&mut dec, &stream, chunk);
        let stats = region.change();
        assert_eq!(warm, got, "both passes see the same frames");
        check(
            &format!("ndjson borrowed frames, {chunk}-byte feeds"),
            stats.allocations + stats.reallocations,
            got.0,
        );
    }
    // Owned values with one deserializer kept across the lines of a feed (`values`): nested
    // objects need serde_json's scratch stack, allocated per feed (once for the kept
    // deserializer, once for the line a feed completes in the decoder's buffer), never per
    // line (a deserializer per line, as `next_value` makes, allocates it on every line).
    let nested: Vec<u8> = (0..EVENTS)
        .flat_map(|i| {
            format!(
                "{{\"type\":\"harness.event\",\"seq\":{i},\"event\":{{\"delta\":\"tok{i}\"}}}}\n"
            )
            .into_bytes()
        })
        .collect();
    for chunk in [4096, 65536, 1 << 20] {
        let mut dec = NdjsonDecoder::new();
        let region = Region::new(GLOBAL);
        let (mut n, mut feeds) = (0, 0);
        for c in nested.chunks(chunk) {
            feeds += 1;
            for v in dec.feed(c).values::<serde::de::IgnoredAny>() {
                v.unwrap();
                n += 1;
            }
        }
        let stats = region.change();
        let allocations = stats.allocations + stats.reallocations;
        println!("ndjson values, {chunk}-byte feeds: {allocations} allocations over {n} lines");
        assert_eq!(n, EVENTS);
        assert!(
            allocations <= 2 * feeds + 8 && allocations < n / 8,
            "values: {allocations} allocations for {feeds} feeds"
        );
    }
    let stream = sse_stream();
    // The owned path, for contrast: per event its data and, as every event here has a new id,
    // that id (shared with the events after it while it stays the same).
    let mut dec = SseDecoder::new();
    let _ = sse_pass(&mut dec, &stream, 4096);
    let region = Region::new(GLOBAL);
    let mut n = 0;
    for c in stream.chunks(4096) {
        for ev in dec.feed(c) {
            n += usize::from(!ev.unwrap().data().is_empty());
        }
    }
    let stats = region.change();
    println!(
        "sse owned, 4096-byte feeds: {} allocations over {n} events",
        stats.allocations
    );
    assert!(
        stats.allocations <= 2 * n + 8,
        "owned: more than data + id per event"
    );
}
