//! Interleaved ratios of the core codecs against their baselines (issue 16): for each push
//! size, ours and the baseline run alternately (ABBA order), and a ratio is the median of the
//! per-pair ratios, so that the machine's drift between blocks cancels out. Throughputs are
//! medians too. Prints the markdown tables of the README's performance section.
//!
//! ```text
//! cargo bench --bench codec_ratios                  # 64 MiB SSE/NDJSON, 50 MB UHP, 7 pairs
//! CODEC_RATIOS_MB=16 CODEC_RATIOS_PAIRS=5 cargo bench --bench codec_ratios   # quicker
//! ```
//!
//! `CODEC_RATIOS_ONE=WORKLOAD:PUSH` runs one workload once and nothing else, for a profiler
//! (`valgrind --tool=callgrind target/release/deps/codec_ratios-*` then `callgrind_annotate`):
//! WORKLOAD is one of `sse_owned`, `sse_borrowed`, `sse_stream`, `sse_ids` (borrowed, an `id:`
//! line on every event), `nd_ignored`, `nd_values`, `stream_deserializer`, `uhp_fed`,
//! `uhp_flat`; PUSH a size in bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;

#[path = "support/streams.rs"]
mod streams;
#[path = "support/uhp_stream.rs"]
mod uhp_stream;
#[path = "support/workloads.rs"]
mod workloads;

use workloads::*;

/// The medians of a set of interleaved pairs.
struct Pair {
    /// Median of (baseline time / our time): above 1, ours is faster.
    ratio: f64,
    /// Our median throughput, MB/s.
    ours: f64,
    /// The baseline's median throughput, MB/s.
    base: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The time `f` takes.
fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    black_box(f());
    t.elapsed()
}

/// `timed` as the closure `pair` takes.
macro_rules! t {
    ($e:expr) => {
        &mut || timed(|| $e)
    };
}

/// Runs `ours` and `base` (each timing itself, so that a baseline's input can be made
/// outside its timing) alternately `pairs` times (ABBA), after one warm-up of each.
fn pair(
    bytes: usize,
    pairs: usize,
    ours: &mut dyn FnMut() -> Duration,
    base: &mut dyn FnMut() -> Duration,
) -> Pair {
    let time = |f: &mut dyn FnMut() -> Duration| f();
    time(ours);
    time(base);
    let (mut ratios, mut o, mut b) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        let (to, tb): (Duration, Duration) = if i % 2 == 0 {
            let to = time(ours);
            (to, time(base))
        } else {
            let tb = time(base);
            (time(ours), tb)
        };
        ratios.push(tb.as_secs_f64() / to.as_secs_f64());
        o.push(bytes as f64 / 1e6 / to.as_secs_f64());
        b.push(bytes as f64 / 1e6 / tb.as_secs_f64());
    }
    Pair {
        ratio: median(ratios),
        ours: median(o),
        base: median(b),
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sse(mb: usize, pairs: usize) {
    let stream = Bytes::from(streams::realistic_sse(mb << 20));
    let len = stream.len();
    let want = sse_push_poll(&stream, 4096);
    for (chunk, _) in PUSH_SIZES {
        assert_eq!(sse_owned(&stream, chunk), want);
        assert_eq!(sse_borrowed(&stream, chunk), want);
        assert_eq!(sse_stream_crate(byte_chunks(&stream, chunk)), want);
    }
    assert_eq!(eventsource_crate(byte_chunks(&stream, 4096)), want);
    println!(
        "\n### SSE: {:.1} MB, {} events (median of {pairs} interleaved pairs; ×: baseline time / ours)\n",
        len as f64 / 1e6,
        want.events
    );
    println!(
        "| push | owned MB/s | × sse-stream | owned × the push size before | borrowed MB/s | × sse-stream | borrowed × the push size before | owned × eventsource-stream | push+poll × sse-stream | borrowed / memchr |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut before: Option<usize> = None;
    for (chunk, label) in PUSH_SIZES {
        // The baselines' chunks are made once, outside timing, and cloned (cheap `Bytes`).
        let chunks = byte_chunks(&stream, chunk);
        let clone = || -> Vec<Result<Bytes, std::io::Error>> {
            chunks
                .iter()
                .map(|c| Ok(c.as_ref().unwrap().clone()))
                .collect()
        };
        let owned = pair(len, pairs, t!(sse_owned(&stream, chunk)), &mut || {
            let c = clone();
            timed(|| sse_stream_crate(c))
        });
        let borrowed = pair(len, pairs, t!(sse_borrowed(&stream, chunk)), &mut || {
            let c = clone();
            timed(|| sse_stream_crate(c))
        });
        // eventsource-stream is quadratic in the push size (it re-scans its buffer): past
        // 64 KiB one pass of 64 MiB takes minutes, so it is measured up to 64 KiB.
        let es = (chunk <= 64 << 10).then(|| {
            pair(len, pairs, t!(sse_owned(&stream, chunk)), &mut || {
                let c = clone();
                timed(|| eventsource_crate(c))
            })
        });
        let classic = pair(len, pairs, t!(sse_push_poll(&stream, chunk)), &mut || {
            let c = clone();
            timed(|| sse_stream_crate(c))
        });
        let limit = pair(
            len,
            pairs,
            t!(sse_borrowed(&stream, chunk)),
            t!(memchr_newlines(&stream)),
        );
        // Whether throughput falls as pushes grow: this size against the one before, also
        // interleaved (above 1: this size is faster).
        let growth = |f: fn(&[u8], usize) -> Tally| {
            before.map_or("—".to_owned(), |b| {
                let p = pair(len, pairs, t!(f(&stream, chunk)), t!(f(&stream, b)));
                format!("{:.2}×", p.ratio)
            })
        };
        let (owned_growth, borrowed_growth) = (growth(sse_owned), growth(sse_borrowed));
        before = Some(chunk);
        println!(
            "| {label} | {:.0} | {:.2}× | {owned_growth} | {:.0} | {:.2}× | {borrowed_growth} | {} | {:.2}× | {:.0}% (memchr {:.0} MB/s) |",
            owned.ours,
            owned.ratio,
            borrowed.ours,
            borrowed.ratio,
            es.map_or("not run (quadratic)".to_owned(), |e| format!(
                "{:.2}×",
                e.ratio
            )),
            classic.ratio,
            100.0 * limit.ratio,
            limit.base
        );
    }
}

fn ndjson(mb: usize, pairs: usize) {
    let stream = streams::realistic_ndjson(mb << 20);
    let len = stream.len();
    let frames = memchr_newlines(&stream);
    let lines: Vec<&[u8]> = stream
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(stream_deserializer(&stream), frames);
    for (chunk, _) in PUSH_SIZES {
        assert_eq!(nd_ignored(&stream, chunk), frames);
        assert_eq!(nd_values(&stream, chunk), frames);
        assert_eq!(bufread_split(&stream, chunk), frames);
        assert_eq!(nd_typed(&stream, chunk), flat_frames(&lines));
    }
    println!(
        "\n### NDJSON: {:.1} MB, {frames} frames (median of {pairs} interleaved pairs; ×: baseline time / ours)\n",
        len as f64 / 1e6
    );
    println!(
        "| push | framing+parse MB/s | × StreamDeserializer | `values` MB/s | `values` × StreamDeserializer | × BufRead::split | push+poll × StreamDeserializer | typed frame × flat serde_json (pre-split) | lines / memchr |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (chunk, label) in PUSH_SIZES {
        let sd = pair(
            len,
            pairs,
            t!(nd_ignored(&stream, chunk)),
            t!(stream_deserializer(&stream)),
        );
        let values = pair(
            len,
            pairs,
            t!(nd_values(&stream, chunk)),
            t!(stream_deserializer(&stream)),
        );
        let split = pair(
            len,
            pairs,
            t!(nd_ignored(&stream, chunk)),
            t!(bufread_split(&stream, chunk)),
        );
        let classic = pair(
            len,
            pairs,
            t!(nd_push_ignored(&stream, chunk)),
            t!(stream_deserializer(&stream)),
        );
        let typed = pair(
            len,
            pairs,
            t!(nd_typed(&stream, chunk)),
            t!(flat_frames(&lines)),
        );
        let limit = pair(
            len,
            pairs,
            t!(nd_lines(&stream, chunk)),
            t!(memchr_newlines(&stream)),
        );
        println!(
            "| {label} | {:.0} | {:.2}× | {:.0} | {:.2}× | {:.2}× | {:.2}× | {:.0}% | {:.0}% |",
            sd.ours,
            sd.ratio,
            values.ours,
            values.ratio,
            split.ratio,
            classic.ratio,
            100.0 * typed.ratio,
            100.0 * limit.ratio
        );
    }
}

fn uhp(mb: usize, pairs: usize) {
    let stream = uhp_stream::realistic(mb * 1_000_000 * 50 / 64);
    let len = stream.len();
    let loads = uhp_stream::payloads(&stream);
    let check = uhp_stream::pipeline_fed(&stream, 4096);
    assert!(check.is_terminal() && check.sequence().ok);
    println!(
        "\n### UHP decode + accumulate: {:.1} MB, {} events (median of {pairs} interleaved pairs; baseline: serde_json into a flat struct over the payloads split beforehand)\n",
        len as f64 / 1e6,
        loads.len()
    );
    println!("| push | `feed` MB/s | `feed` vs flat struct | `push`+`poll_event` vs flat struct |");
    println!("| --- | ---: | ---: | ---: |");
    for (chunk, label) in PUSH_SIZES {
        let fed = pair(
            len,
            pairs,
            t!(uhp_stream::pipeline_fed(&stream, chunk).text().len()),
            t!(uhp_stream::baseline(&loads)),
        );
        let classic = pair(
            len,
            pairs,
            t!(uhp_stream::pipeline_push_poll(&stream, chunk).text().len()),
            t!(uhp_stream::baseline(&loads)),
        );
        println!(
            "| {label} | {:.0} | {:.0}% | {:.0}% |",
            fed.ours,
            100.0 * fed.ratio,
            100.0 * classic.ratio
        );
    }
}

/// The realistic SSE stream's events, each with an `id:` line (the cursors of a TanStack
/// host), for `CODEC_RATIOS_ONE=sse_ids:PUSH`: the fast lane's path for an `id:` line.
fn sse_with_ids(target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 256);
    let mut n = 0;
    while out.len() < target {
        out.extend_from_slice(format!("id: {n}\ndata: {}\n\n", streams::delta_json(n)).as_bytes());
        n += 1;
    }
    out
}

/// One workload (`CODEC_RATIOS_ONE`), for a profiler: its input is made once, then it runs
/// `CODEC_RATIOS_REPEAT` times (default once) and the best time is printed.
fn one(spec: &str, mb: usize) {
    let (name, push) = spec.split_once(':').unwrap_or((spec, "4096"));
    let push: usize = push.parse().expect("CODEC_RATIOS_ONE=WORKLOAD:PUSH_BYTES");
    let repeat: usize = std::env::var("CODEC_RATIOS_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let sse = || Bytes::from(streams::realistic_sse(mb << 20));
    let nd = || streams::realistic_ndjson(mb << 20);
    let uhp = || uhp_stream::realistic(mb * 1_000_000 * 50 / 64);
    let mut run: Box<dyn FnMut() -> usize> = match name {
        "sse_owned" => {
            let s = sse();
            Box::new(move || sse_owned(&s, push).events)
        }
        "sse_borrowed" => {
            let s = sse();
            Box::new(move || sse_borrowed(&s, push).events)
        }
        "sse_stream" => {
            let s = sse();
            Box::new(move || sse_stream_crate(byte_chunks(&s, push)).events)
        }
        "sse_ids" => {
            let s = sse_with_ids(mb << 20);
            Box::new(move || sse_borrowed(&s, push).events)
        }
        "nd_ignored" => {
            let s = nd();
            Box::new(move || nd_ignored(&s, push))
        }
        "nd_values" => {
            let s = nd();
            Box::new(move || nd_values(&s, push))
        }
        "stream_deserializer" => {
            let s = nd();
            Box::new(move || stream_deserializer(&s))
        }
        "uhp_fed" => {
            let s = uhp();
            Box::new(move || uhp_stream::pipeline_fed(&s, push).text().len())
        }
        "uhp_flat" => {
            let p = uhp_stream::payloads(&uhp());
            Box::new(move || uhp_stream::baseline(&p) as usize)
        }
        other => panic!("CODEC_RATIOS_ONE: unknown workload {other}"),
    };
    let (mut n, mut best) = (0, Duration::MAX);
    for _ in 0..repeat.max(1) {
        best = best.min(timed(|| n = black_box(run())));
    }
    println!(
        "{name} at {push}-byte pushes: {n} ({:.2} ms, best of {repeat})",
        best.as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter word picks sections.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let on = |s: &str| args.is_empty() || args.iter().any(|a| s.contains(a.as_str()));
    let mb = env("CODEC_RATIOS_MB", 64);
    let pairs = env("CODEC_RATIOS_PAIRS", 7).max(5);
    if let Ok(spec) = std::env::var("CODEC_RATIOS_ONE") {
        return one(&spec, mb);
    }
    if on("sse") {
        sse(mb, pairs);
    }
    if on("ndjson") {
        ndjson(mb, pairs);
    }
    if on("uhp") {
        uhp(mb, pairs);
    }
}
