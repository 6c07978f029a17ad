//! SSE decoding throughput on a 64 MiB realistic stream (research/perf-limits.md), push sizes
//! 1 KiB to 1 MiB: our `SseDecoder` in place with owned events (`feed`), with borrowed events
//! (`feed` + `next_ref`) and the classic `push` + `poll_event`, against, in the same run, a
//! bare memchr newline count (the framing limit) and the `sse-stream` and
//! `eventsource-stream` crates. Ratios for the README come from the interleaved
//! `benches/codec_ratios.rs`, not from these blocks (the machine drifts between blocks).
//!
//! ```text
//! cargo bench --bench sse
//! python3 scripts/bench_table.py sse_64MiB memchr_newlines/whole
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/streams.rs"]
mod streams;
#[path = "support/workloads.rs"]
mod workloads;

use workloads::{
    PUSH_SIZES, byte_chunks, eventsource_crate, memchr_newlines, sse_borrowed, sse_owned,
    sse_push_poll, sse_stream_crate,
};

fn bench(c: &mut Criterion) {
    let stream = Bytes::from(streams::realistic_sse(64 << 20));
    let expected = sse_push_poll(&stream, 4096);
    // Every implementation must see the same events before any of them is timed.
    for (chunk, _) in PUSH_SIZES {
        assert_eq!(sse_owned(&stream, chunk), expected);
        assert_eq!(sse_borrowed(&stream, chunk), expected);
        assert_eq!(sse_stream_crate(byte_chunks(&stream, chunk)), expected);
    }
    assert_eq!(eventsource_crate(byte_chunks(&stream, 4096)), expected);
    eprintln!(
        "stream: {} bytes, {} events, {} data bytes",
        stream.len(),
        expected.events,
        expected.data_bytes
    );

    let mut g = c.benchmark_group("sse_64MiB");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));

    g.bench_function("memchr_newlines/whole", |b| {
        b.iter(|| memchr_newlines(black_box(&stream)))
    });
    for (chunk, label) in PUSH_SIZES {
        g.bench_with_input(
            BenchmarkId::new("harness_core_SseDecoder_owned", label),
            &chunk,
            |b, &chunk| b.iter(|| sse_owned(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("harness_core_SseDecoder_borrowed", label),
            &chunk,
            |b, &chunk| b.iter(|| sse_borrowed(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("harness_core_SseDecoder_push_poll", label),
            &chunk,
            |b, &chunk| b.iter(|| sse_push_poll(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("sse-stream", label),
            &chunk,
            |b, &chunk| {
                b.iter_batched(
                    || byte_chunks(&stream, chunk),
                    sse_stream_crate,
                    criterion::BatchSize::LargeInput,
                )
            },
        );
        if chunk > 64 << 10 {
            continue; // eventsource-stream is quadratic in the push size: minutes per pass
        }
        g.bench_with_input(
            BenchmarkId::new("eventsource-stream", label),
            &chunk,
            |b, &chunk| {
                b.iter_batched(
                    || byte_chunks(&stream, chunk),
                    eventsource_crate,
                    criterion::BatchSize::LargeInput,
                )
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
