//! SSE decoding throughput on a 64 MiB realistic stream (research/perf-limits.md): our
//! `SseDecoder` with owned events against, in the same run, a bare memchr newline count (the
//! framing limit) and the `sse-stream` and `eventsource-stream` crates.
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
use futures::StreamExt;
use harness_core::sse::SseDecoder;

#[path = "support/streams.rs"]
mod streams;

/// Events with data, counted and their data lengths summed, so nothing is optimised away.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Tally {
    events: usize,
    data_bytes: usize,
}

fn ours(stream: &[u8], chunk: usize) -> Tally {
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

fn byte_chunks(stream: &Bytes, chunk: usize) -> Vec<Result<Bytes, std::io::Error>> {
    (0..stream.len())
        .step_by(chunk)
        .map(|i| Ok(stream.slice(i..(i + chunk).min(stream.len()))))
        .collect()
}

fn sse_stream_crate(chunks: Vec<Result<Bytes, std::io::Error>>) -> Tally {
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

fn eventsource_crate(chunks: Vec<Result<Bytes, std::io::Error>>) -> Tally {
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

fn bench(c: &mut Criterion) {
    let stream = Bytes::from(streams::realistic_sse(64 << 20));
    let expected = ours(&stream, 4096);
    // Every implementation must see the same events before any of them is timed.
    for chunk in [4096, 65536] {
        assert_eq!(ours(&stream, chunk), expected);
        assert_eq!(sse_stream_crate(byte_chunks(&stream, chunk)), expected);
        assert_eq!(eventsource_crate(byte_chunks(&stream, chunk)), expected);
    }
    eprintln!(
        "stream: {} bytes, {} events, {} data bytes",
        stream.len(),
        expected.events,
        expected.data_bytes
    );

    let mut g = c.benchmark_group("sse_64MiB");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(2));
    g.measurement_time(Duration::from_secs(6));

    g.bench_function("memchr_newlines/whole", |b| {
        b.iter(|| memchr::memchr_iter(b'\n', black_box(&stream)).count())
    });
    for chunk in [4096usize, 65536] {
        let label = if chunk == 4096 { "4KiB" } else { "64KiB" };
        g.bench_with_input(
            BenchmarkId::new("harness_core_SseDecoder", label),
            &chunk,
            |b, &chunk| b.iter(|| ours(black_box(&stream), chunk)),
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
