//! Lent events cost no allocation for their text (issue 16): `StreamFeed::next_ref` lends a
//! `StreamEventRef` whose text is the fed bytes, across the end of a feed too. A counting global
//! allocator (`stats_alloc`: our crates forbid the `unsafe impl GlobalAlloc` one would
//! need) around a second pass over a stream of plain delta events, after a first pass has
//! grown every buffer. A plain `main` (`harness = false`): no test threads allocate beside it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;

use harness_uhp::StreamDecoder;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const EVENTS: usize = 20_000;

/// `response.output_text.delta` events with no escaped strings nor nested objects, an `id:`
/// every 16th and a comment every 64th, as a Responses-style server sends them.
fn stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..EVENTS {
        if i % 64 == 63 {
            out.extend_from_slice(b": ping\n\n");
        }
        if i % 16 == 0 {
            out.extend_from_slice(format!("id: {i}\n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "data: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{i},\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok{i} \"}}\n\n"
            )
            .as_bytes(),
        );
    }
    out
}

/// One pass of lent events in `chunk`-byte feeds: the events and the delta bytes seen.
fn pass(dec: &mut StreamDecoder, stream: &[u8], chunk: usize) -> (usize, usize) {
    let (mut n, mut bytes) = (0, 0);
    for c in stream.chunks(chunk) {
        let mut feed = dec.feed(c);
        while let Some(ev) = feed.next_ref() {
            let ev = ev.unwrap();
            n += 1;
            bytes += ev.delta().map_or(0, str::len);
        }
    }
    (n, bytes)
}

fn main() {
    let stream = stream();
    for chunk in [1024, 4096, 65536, 1 << 20] {
        let mut dec = StreamDecoder::new();
        let warm = pass(&mut dec, &stream, chunk); // grows the buffers once
        let region = Region::new(GLOBAL);
        let got = pass(&mut dec, &stream, chunk);
        let stats = region.change();
        assert_eq!(warm, got, "both passes see the same events");
        assert_eq!(got.0, EVENTS);
        let allocations = stats.allocations + stats.reallocations;
        println!(
            "uhp lent events, {chunk}-byte feeds: {allocations} allocations over {EVENTS} events"
        );
        assert_eq!(
            allocations, 0,
            "{chunk}-byte feeds: the lent path allocated"
        );
    }
}
