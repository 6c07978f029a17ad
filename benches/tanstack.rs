//! harness-tanstack hot paths, each against a baseline measured in the same run.
//!
//! 1. `tanstack_decode`: `harness.event` frames carrying `TEXT_MESSAGE_CONTENT`, read from SSE
//!    bytes in 4 KiB chunks into typed frames (`SseFrameDecoder` → `HostFrame::Event`), against
//!    the same SSE decoder followed by bare `serde_json` into a flat struct of the same
//!    fields (the target: within 1.5x), and against serde's internally tagged enums (what a
//!    derive-based design would cost).
//! 2. `tanstack_fanout`: one event emitted on a thread with N subscribers, each taking its
//!    bytes (`Host::emit` + `poll_transmit`), against serializing the frame once per
//!    subscriber.
//!
//! ```text
//! cargo bench --bench tanstack
//! python3 scripts/bench_table.py tanstack_decode flat_struct_serde_json
//! python3 scripts/bench_table.py tanstack_fanout serialize_per_subscriber
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use harness_core::sse::SseDecoder;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::frame::HostFrame;
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::{LogRecord, MemoryLog};
use harness_tanstack::transport::SseFrameDecoder;
use serde::Deserialize;

const EVENTS: usize = 20_000;
const CHUNK: usize = 4096;

/// A realistic stream: deltas of 1 to 6 words, some with escapes and non-ASCII.
fn stream() -> Vec<u8> {
    let words = [
        "Hello",
        "world,",
        "the",
        "café",
        "is",
        "open",
        "\"daily\"",
        "from",
        "8\\n",
        "to",
        "6 ☃",
        "and",
    ];
    let mut out = Vec::new();
    for i in 0..EVENTS {
        let n = 1 + i % 6;
        let delta: String = (0..n)
            .map(|k| format!("{} ", words[(i + k) % words.len()]))
            .collect();
        let rec = LogRecord::render(
            "thread-1",
            (i + 1) as u64,
            "op-17",
            &AguiEvent::text_content("op-17-msg-1", delta),
        );
        out.extend_from_slice(&rec.sse());
    }
    out
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct FlatEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "messageId")]
    message_id: String,
    delta: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct FlatFrame {
    #[serde(rename = "type")]
    kind: String,
    cursor: String,
    #[serde(rename = "threadId")]
    thread_id: String,
    #[serde(rename = "operationId")]
    operation_id: String,
    event: FlatEvent,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
#[allow(dead_code, clippy::large_enum_variant)]
enum TaggedEvent {
    #[serde(rename = "TEXT_MESSAGE_CONTENT")]
    Content {
        #[serde(rename = "messageId")]
        message_id: String,
        delta: String,
    },
    #[serde(rename = "TEXT_MESSAGE_END")]
    End {
        #[serde(rename = "messageId")]
        message_id: String,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type")]
#[allow(dead_code)]
enum TaggedFrame {
    #[serde(rename = "harness.event")]
    Event {
        cursor: String,
        #[serde(rename = "threadId")]
        thread_id: String,
        #[serde(rename = "operationId")]
        operation_id: String,
        event: TaggedEvent,
    },
    #[serde(rename = "harness.ping")]
    Ping,
}

fn ours(wire: &[u8]) -> usize {
    let mut dec = SseFrameDecoder::new();
    let mut n = 0;
    for c in wire.chunks(CHUNK) {
        dec.push(c);
        while let Some(f) = dec.poll_frame().unwrap() {
            if let HostFrame::Event(e) = f {
                if let AguiEvent::TextMessageContent(c) = e.event {
                    n += c.delta.len();
                }
            }
        }
    }
    n
}

fn flat(wire: &[u8]) -> usize {
    let mut dec = SseDecoder::new();
    let mut n = 0;
    for c in wire.chunks(CHUNK) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            let f: FlatFrame = serde_json::from_str(ev.data()).unwrap();
            n += f.event.delta.len();
        }
    }
    n
}

fn tagged(wire: &[u8]) -> usize {
    let mut dec = SseDecoder::new();
    let mut n = 0;
    for c in wire.chunks(CHUNK) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            if let TaggedFrame::Event {
                event: TaggedEvent::Content { delta, .. },
                ..
            } = serde_json::from_str(ev.data()).unwrap()
            {
                n += delta.len();
            }
        }
    }
    n
}

fn sse_only(wire: &[u8]) -> usize {
    let mut dec = SseDecoder::new();
    let mut n = 0;
    for c in wire.chunks(CHUNK) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            n += ev.data().len();
        }
    }
    n
}

fn decode(c: &mut Criterion) {
    let wire = stream();
    assert_eq!(ours(&wire), flat(&wire));
    assert_eq!(ours(&wire), tagged(&wire));
    let mut g = c.benchmark_group("tanstack_decode");
    g.throughput(Throughput::Bytes(wire.len() as u64));
    g.measurement_time(Duration::from_secs(4));
    g.bench_function("sse_frame_decoder_typed", |b| {
        b.iter(|| black_box(ours(black_box(&wire))))
    });
    g.bench_function("flat_struct_serde_json", |b| {
        b.iter(|| black_box(flat(black_box(&wire))))
    });
    g.bench_function("serde_tag_enums", |b| {
        b.iter(|| black_box(tagged(black_box(&wire))))
    });
    g.bench_function("sse_framing_only", |b| {
        b.iter(|| black_box(sse_only(black_box(&wire))))
    });
    g.finish();
}

fn fanout(c: &mut Criterion) {
    let mut g = c.benchmark_group("tanstack_fanout");
    g.measurement_time(Duration::from_secs(3));
    for subs in [10usize, 1000] {
        g.throughput(Throughput::Elements(subs as u64));
        let now = Instant::now();
        let mut host = Host::new(HostConfig::default(), MemoryLog::new(64, 1 << 20));
        let conns: Vec<_> = (0..subs)
            .map(|_| {
                host.open_sse(now, Some("thread-1"), Some("2"), None, None, None, "r")
                    .unwrap()
            })
            .collect();
        for &c in &conns {
            while host.poll_transmit(now, c).is_some() {}
        }
        let ev = AguiEvent::text_content("op-1-msg-1", "Hello, wörld ☃ ");
        g.bench_with_input(
            BenchmarkId::new("host_emit_shared_bytes", subs),
            &subs,
            |b, _| {
                b.iter(|| {
                    host.emit(now, "thread-1", "op-1", ev.clone()).unwrap();
                    let mut total = 0;
                    for &c in &conns {
                        let bytes = host.poll_transmit(now, c).unwrap();
                        total += bytes.len();
                        host.sent(now, c, bytes.len());
                    }
                    while host.poll_event().is_some() {}
                    black_box(total)
                })
            },
        );
        let mut seq = 0u64;
        g.bench_with_input(
            BenchmarkId::new("serialize_per_subscriber", subs),
            &subs,
            |b, _| {
                b.iter(|| {
                    seq += 1;
                    let mut total = 0;
                    for _ in 0..subs {
                        let rec = LogRecord::render("thread-1", seq, "op-1", &ev);
                        total += rec.sse().len();
                    }
                    black_box(total)
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, decode, fanout);
criterion_main!(benches);
