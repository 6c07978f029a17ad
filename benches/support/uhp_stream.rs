//! The UHP bench stream and its parse limit, shared by `benches/uhp.rs` and
//! `benches/codec_ratios.rs`: a realistic task stream (StreamBuilder), its payloads, and
//! the baseline, serde_json into a flat struct that borrows from each payload.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;

use harness_core::sse::SseDecoder;
use harness_uhp::builder::StreamBuilder;
use serde::Deserialize;
use serde::de::IgnoredAny;

pub const WORDS: &[&str] = &[
    " the",
    " harness",
    " wrote",
    " tests;",
    " README.md",
    " and",
    " latency",
    " \"quoted\"",
    " café",
    " 東京",
    " 🚀",
    " line\n",
    " findings",
    " throughput",
    " ran",
    " passed.",
];

/// A task stream like the reference server's: reasoning, a tool call, then a long message of
/// small deltas (escapes and non-ASCII included) whose done events and terminal response
/// repeat the full text, as real servers do. ~`target` bytes.
pub fn realistic(target: usize) -> Vec<u8> {
    let mut b = StreamBuilder::new("resp_7f3a9c2e41d84b0f");
    b.created();
    b.reasoning(&["Reading", " the", " README", " first."]);
    b.tool_call("call_1", "read_file", &["{\"path\":", " \"README.md\"}"]);
    b.message_start();
    // ~190 bytes per delta event on the wire, plus 4 copies of ~7 bytes of text each.
    let n = target / 218;
    for i in 0..n {
        b.message_delta(WORDS[(i * 7 + i / 13) % WORDS.len()]);
    }
    b.message_end(&[]);
    b.completed();
    b.to_sse()
}

/// One message whose single delta is `size` bytes, then a small terminal event.
pub fn one_big_event(size: usize) -> Vec<u8> {
    let mut b = StreamBuilder::new("resp_big");
    b.created();
    b.message_start();
    let big = "x".repeat(size);
    b.message_delta(&big);
    let mut sse = b.to_sse();
    // A small terminal: the big event dominates the bytes.
    let mut t = StreamBuilder::new("resp_big");
    t.completed();
    let mut ev = t.events()[0].clone();
    ev["sequence_number"] = serde_json::json!(b.len());
    sse.extend(StreamBuilder::sse_event(&ev));
    sse
}

pub fn payloads(stream: &[u8]) -> Vec<String> {
    let mut dec = SseDecoder::new();
    dec.push(stream);
    let mut out = Vec::new();
    while let Some(ev) = dec.poll_event().unwrap() {
        out.push(ev.into_data());
    }
    out
}

/// A string borrowed from the input unless escapes forced a copy.
struct Str<'a>(#[allow(dead_code)] Cow<'a, str>);
impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
        }
        d.deserialize_str(V).map(Str)
    }
}

/// The baseline: the event's scalar fields into a flat struct, borrowed; nested objects
/// skipped (scanned and validated, not built). The least work a typed parse can do.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Flat<'a> {
    #[serde(rename = "type", borrow)]
    event_type: Str<'a>,
    sequence_number: u64,
    #[serde(borrow, default)]
    item_id: Option<Str<'a>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Str<'a>>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    arguments: Option<Str<'a>>,
    #[serde(default)]
    response: Option<IgnoredAny>,
    #[serde(default)]
    item: Option<IgnoredAny>,
    #[serde(default)]
    part: Option<IgnoredAny>,
}

pub fn baseline(payloads: &[String]) -> u64 {
    let mut n = 0;
    for p in payloads {
        let f: Flat<'_> = serde_json::from_str(p).unwrap();
        n += f.sequence_number;
    }
    n
}

/// Decode + accumulate in place, in `chunk`-byte pushes: `TaskAccumulator::feed` (borrowed
/// SSE events, each lent as a `StreamEventRef` over the fed bytes).
pub fn pipeline_fed(stream: &[u8], chunk: usize) -> harness_uhp::TaskAccumulator {
    let mut dec = harness_uhp::StreamDecoder::new();
    let mut task = harness_uhp::TaskAccumulator::new();
    for c in stream.chunks(chunk) {
        task.feed(&mut dec, c);
    }
    task.finish_decoder(&mut dec);
    task
}

/// The same through `push` and `poll_event` (the body copied into the decoder, an owned
/// event per message).
pub fn pipeline_push_poll(stream: &[u8], chunk: usize) -> harness_uhp::TaskAccumulator {
    let mut dec = harness_uhp::StreamDecoder::new();
    let mut task = harness_uhp::TaskAccumulator::new();
    for c in stream.chunks(chunk) {
        dec.push(c);
        task.drain_decoder(&mut dec);
    }
    task.finish_decoder(&mut dec);
    task
}
