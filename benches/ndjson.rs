//! NDJSON (stdio transport) throughput on a 64 MiB stream of `harness.event` frames, in the
//! same run as its limits: a bare memchr newline count (framing) and serde_json's own
//! `StreamDeserializer` over the whole buffer (parsing), and the usual std-only reader
//! (`BufRead::split` and a parse per line) as the peer.
//!
//! ```text
//! cargo bench --bench ndjson
//! python3 scripts/bench_table.py ndjson_64MiB memchr_newlines/whole
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use harness_core::ndjson::NdjsonDecoder;
use serde::de::IgnoredAny;

#[path = "support/streams.rs"]
mod streams;

/// A flat view of a frame: what a typed reader of the stdio transport parses.
#[derive(serde::Deserialize)]
struct Frame<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(borrow)]
    cursor: Option<&'a str>,
}

fn lines(stream: &[u8], chunk: usize) -> usize {
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

fn parse_ignored(stream: &[u8], chunk: usize) -> usize {
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

/// The usual std-only reader: `BufRead::split(b'\n')` (a `Vec` per line) and a parse per line.
fn std_bufread_split(stream: &[u8], chunk: usize) -> usize {
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

fn parse_typed(stream: &[u8], chunk: usize) -> usize {
    let mut dec = NdjsonDecoder::new();
    let mut n = 0;
    for c in stream.chunks(chunk) {
        dec.push(c);
        while let Some(line) = dec.poll_line().unwrap() {
            let f: Frame<'_> = serde_json::from_slice(line).unwrap();
            n += f.kind.len() + f.cursor.map_or(0, str::len);
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let stream = streams::realistic_ndjson(64 << 20);
    let frames = memchr::memchr_iter(b'\n', &stream).count();
    assert_eq!(parse_ignored(&stream, 4096), frames);
    assert_eq!(std_bufread_split(&stream, 4096), frames);
    assert_eq!(
        serde_json::Deserializer::from_slice(&stream)
            .into_iter::<IgnoredAny>()
            .count(),
        frames
    );
    eprintln!("stream: {} bytes, {frames} frames", stream.len());

    let mut g = c.benchmark_group("ndjson_64MiB");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(2));
    g.measurement_time(Duration::from_secs(6));

    g.bench_function("memchr_newlines/whole", |b| {
        b.iter(|| memchr::memchr_iter(b'\n', black_box(&stream)).count())
    });
    g.bench_function("serde_json_StreamDeserializer_IgnoredAny/whole", |b| {
        b.iter(|| {
            serde_json::Deserializer::from_slice(black_box(&stream))
                .into_iter::<IgnoredAny>()
                .count()
        })
    });
    for chunk in [4096usize, 65536] {
        let label = if chunk == 4096 { "4KiB" } else { "64KiB" };
        g.bench_with_input(
            BenchmarkId::new("harness_core_NdjsonDecoder_lines", label),
            &chunk,
            |b, &chunk| b.iter(|| lines(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("harness_core_NdjsonDecoder_IgnoredAny", label),
            &chunk,
            |b, &chunk| b.iter(|| parse_ignored(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("std_BufRead_split_IgnoredAny", label),
            &chunk,
            |b, &chunk| b.iter(|| std_bufread_split(black_box(&stream), chunk)),
        );
        g.bench_with_input(
            BenchmarkId::new("harness_core_NdjsonDecoder_typed_frame", label),
            &chunk,
            |b, &chunk| b.iter(|| parse_typed(black_box(&stream), chunk)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
