//! Realistic synthetic streams for the benches (research/perf-limits.md): UHP
//! `response.output_text.delta` events of about 140 bytes of JSON, deltas with escapes and
//! non-ASCII text, an `id:` every 16th event and a `: ping` comment every 64th.
#![allow(dead_code)]

const WORDS: &[&str] = &[
    "Hello",
    "world",
    "the",
    "caf\u{e9}",
    "\\\"quoted\\\"",
    "\u{6771}\u{4eac}",
    "line\\nbreak",
    "tab\\t",
    "na\u{ef}ve",
    "r\u{e9}sum\u{e9}",
    "data",
    "stream",
    "\u{1f680}",
    "a",
    "model",
];

/// The JSON of the `n`th delta event (deterministic).
pub fn delta_json(n: usize) -> String {
    let mut delta = String::new();
    let mut k = n.wrapping_mul(2_654_435_761);
    for _ in 0..(2 + n % 4) {
        delta.push_str(WORDS[k % WORDS.len()]);
        delta.push(' ');
        k = k.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    }
    format!(
        "{{\"type\":\"response.output_text.delta\",\"sequence_number\":{n},\"item_id\":\"msg_00000000000000000000000000000001\",\"output_index\":0,\"content_index\":0,\"delta\":\"{delta}\"}}"
    )
}

/// An SSE stream of at least `target` bytes of delta events.
pub fn realistic_sse(target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 256);
    let mut n = 0;
    while out.len() < target {
        if n % 64 == 63 {
            out.extend_from_slice(b": ping\n\n");
        }
        if n % 16 == 0 {
            out.extend_from_slice(format!("id: {n}\n").as_bytes());
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(delta_json(n).as_bytes());
        out.extend_from_slice(b"\n\n");
        n += 1;
    }
    out
}

/// An NDJSON stream of at least `target` bytes: TanStack-style `harness.event` frames around
/// the same delta payloads.
pub fn realistic_ndjson(target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 256);
    let mut n = 0;
    while out.len() < target {
        out.extend_from_slice(
            format!(
                "{{\"type\":\"harness.event\",\"cursor\":\"{n}\",\"threadId\":\"thread-1\",\"event\":{}}}\n",
                delta_json(n)
            )
            .as_bytes(),
        );
        n += 1;
    }
    out
}
