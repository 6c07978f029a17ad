//! NDJSON (stdio transport) throughput on a 64 MiB stream of `harness.event` frames, push
//! sizes 1 KiB to 1 MiB, in the same run as its limits: a bare memchr newline count
//! (framing), serde_json's own `StreamDeserializer` over the whole buffer (parsing, with no
//! isolation of a bad line), serde_json into a flat struct over the lines split beforehand,
//! and the usual std-only reader (`BufRead::split` and a parse per line) as the peer. Ours:
//! in place (`feed`) and the classic `push` + `poll`. Ratios for the README come from the
//! interleaved `benches/codec_ratios.rs`.
//!
//! ```text
//! cargo bench --bench ndjson
//! python3 scripts/bench_table.py ndjson_64MiB memchr_newlines/whole
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/streams.rs"]
mod streams;
#[path = "support/workloads.rs"]
mod workloads;

use workloads::{
    PUSH_SIZES, bufread_split, flat_frames, memchr_newlines, nd_ignored, nd_lines, nd_push_ignored,
    nd_push_lines, nd_typed, nd_values, stream_deserializer,
};

fn bench(c: &mut Criterion) {
    let stream = streams::realistic_ndjson(64 << 20);
    let frames = memchr_newlines(&stream);
    let lines: Vec<&[u8]> = stream
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(nd_ignored(&stream, 4096), frames);
    assert_eq!(nd_values(&stream, 4096), frames);
    assert_eq!(nd_push_ignored(&stream, 4096), frames);
    assert_eq!(bufread_split(&stream, 4096), frames);
    assert_eq!(stream_deserializer(&stream), frames);
    assert_eq!(nd_lines(&stream, 4096), nd_push_lines(&stream, 4096));
    assert_eq!(nd_typed(&stream, 4096), flat_frames(&lines));
    eprintln!("stream: {} bytes, {frames} frames", stream.len());

    let mut g = c.benchmark_group("ndjson_64MiB");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));

    g.bench_function("memchr_newlines/whole", |b| {
        b.iter(|| memchr_newlines(black_box(&stream)))
    });
    g.bench_function("serde_json_StreamDeserializer_IgnoredAny/whole", |b| {
        b.iter(|| stream_deserializer(black_box(&stream)))
    });
    g.bench_function("serde_json_flat_frame/pre_split", |b| {
        b.iter(|| flat_frames(black_box(&lines)))
    });
    for (chunk, label) in PUSH_SIZES {
        let mut f = |name: &str, w: fn(&[u8], usize) -> usize| {
            g.bench_with_input(BenchmarkId::new(name, label), &chunk, |b, &chunk| {
                b.iter(|| w(black_box(&stream), chunk))
            });
        };
        f("harness_core_NdjsonDecoder_lines", nd_lines);
        f("harness_core_NdjsonDecoder_push_lines", nd_push_lines);
        f("harness_core_NdjsonDecoder_IgnoredAny", nd_ignored);
        f("harness_core_NdjsonDecoder_values_IgnoredAny", nd_values);
        f(
            "harness_core_NdjsonDecoder_push_IgnoredAny",
            nd_push_ignored,
        );
        f("harness_core_NdjsonDecoder_typed_frame", nd_typed);
        f("std_BufRead_split_IgnoredAny", bufread_split);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
