//! The OpenAI-compatible provider's stream decoder, per streamed delta, against the bare
//! `SseDecoder` over the same bytes in the same run: the difference is what the provider
//! costs on top of SSE framing (target: < 5 µs per delta).
//!
//! Two streams of 20,000 deltas each, built from the recorded fixtures'
//! chunk shapes (`harness-core/tests/fixtures/openai/`): OpenAI text deltas (every chunk with
//! `service_tier`, `system_fingerprint`, `usage: null`, `obfuscation`, some text with escapes
//! and non-ASCII) and OpenAI tool-call argument fragments. Both are pushed in 4 KiB pieces, as
//! an HTTP client hands them over.
//!
//! ```text
//! cargo bench --bench openai
//! python3 scripts/bench_table.py openai_text_20k_deltas SseDecoder_bare/4KiB
//! python3 scripts/bench_table.py openai_tool_args_20k_deltas SseDecoder_bare/4KiB
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use harness_core::model::ModelEvent;
use harness_core::openai::ChatStreamDecoder;
use harness_core::sse::SseDecoder;

const DELTAS: usize = 20_000;
const PUSH: usize = 4096;

const HEAD: &str = r#"{"id":"chatcmpl-CK2xQdZ8pV1rW4mT7nY0aB3cE6fGh","object":"chat.completion.chunk","created":1758876342,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6d7dcc9a98","choices":[{"index":0,"delta":"#;
const TAIL: &str = r#","logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kVe2J"}"#;
const WORDS: &[&str] = &[
    " the",
    " café",
    " opens",
    " at",
    " \\\"eight\\\"",
    ",",
    " and",
    " closes",
    "\\n",
    " at",
    " six",
    " — ",
    "including",
    " weekends",
];

fn chunk(delta: &str) -> String {
    format!("data: {HEAD}{delta}{TAIL}\n\n")
}

fn end(finish: &str) -> String {
    let mut s = chunk("{}").replace(
        r#""finish_reason":null"#,
        &format!(r#""finish_reason":"{finish}""#),
    );
    s.push_str(r#"data: {"id":"chatcmpl-CK2xQdZ8pV1rW4mT7nY0aB3cE6fGh","object":"chat.completion.chunk","created":1758876342,"model":"gpt-4.1-mini-2025-04-14","choices":[],"usage":{"prompt_tokens":27,"completion_tokens":20000,"total_tokens":20027}}"#);
    s.push_str("\n\ndata: [DONE]\n\n");
    s
}

/// A text stream: a role chunk, `DELTAS` content deltas, the finish and usage chunks.
fn text_stream() -> Vec<u8> {
    let mut s = chunk(r#"{"role":"assistant","content":"","refusal":null}"#);
    for i in 0..DELTAS {
        s.push_str(&chunk(&format!(
            r#"{{"content":"{}"}}"#,
            WORDS[i % WORDS.len()]
        )));
    }
    s.push_str(&end("stop"));
    s.into_bytes()
}

/// A tool-call stream: the call's head, then `DELTAS` argument fragments of one long call.
fn tool_stream() -> Vec<u8> {
    let mut s = chunk(
        r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_rH3pX9cQ2vLk8sT4nW6yB1dF","type":"function","function":{"name":"write_notes","arguments":"{\"notes\":\""}}]}"#,
    );
    for i in 0..DELTAS {
        let frag = WORDS[i % WORDS.len()]
            .replace("\\\"", "'")
            .replace("\\n", " ");
        s.push_str(&chunk(&format!(
            r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":"{frag}"}}}}]}}"#
        )));
    }
    s.push_str(&chunk(
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}"#,
    ));
    s.push_str(&end("tool_calls"));
    s.into_bytes()
}

/// The baseline: SSE framing only, each event's data length summed.
fn bare_sse(stream: &[u8]) -> usize {
    let mut dec = SseDecoder::new();
    let mut n = 0;
    for c in stream.chunks(PUSH) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            n += ev.data().len();
        }
    }
    dec.finish().unwrap();
    n
}

/// The provider: deltas out, the completed response at `[DONE]`.
fn provider(stream: &[u8]) -> (usize, usize) {
    let mut dec = ChatStreamDecoder::new();
    let mut deltas = 0;
    let mut parts = 0;
    for c in stream.chunks(PUSH) {
        dec.push(c);
        while let Some(ev) = dec.poll_event().unwrap() {
            match ev {
                ModelEvent::TextDelta(_) => deltas += 1,
                ModelEvent::Completed(r) => parts = r.message.parts.len(),
                _ => {}
            }
        }
    }
    dec.finish().unwrap();
    (deltas, parts)
}

fn group(c: &mut Criterion, name: &str, stream: &[u8]) {
    eprintln!("{name}: {} bytes, {DELTAS} deltas", stream.len());
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(DELTAS as u64));
    g.sample_size(20);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(4));
    g.bench_function("SseDecoder_bare/4KiB", |b| {
        b.iter(|| bare_sse(black_box(stream)))
    });
    g.bench_function("ChatStreamDecoder/4KiB", |b| {
        b.iter(|| provider(black_box(stream)))
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let text = text_stream();
    let tools = tool_stream();
    // Both decoders must read the streams whole before anything is timed.
    assert_eq!(provider(&text), (DELTAS, 1));
    assert_eq!(provider(&tools), (0, 1));
    assert!(bare_sse(&text) > 0 && bare_sse(&tools) > 0);
    group(c, "openai_text_20k_deltas", &text);
    group(c, "openai_tool_args_20k_deltas", &tools);
}

criterion_group!(benches, bench);
criterion_main!(benches);
