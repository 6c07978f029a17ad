//! Arbitrary bytes, split at an arbitrary point, never panic the SSE decoder, and the split
//! never changes what comes out.
#![no_main]

use harness_core::sse::{SseConfig, SseDecoder};
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]]) -> Vec<String> {
    let mut dec = SseDecoder::with_config(SseConfig { max_line_bytes: 64, max_event_bytes: 128 });
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => out.push(format!("{}|{}|{:?}", ev.event_type(), ev.data(), ev.id())),
                Ok(None) => break,
                Err(e) => out.push(format!("error {e}")),
            }
        }
    }
    out.push(format!("finish {:?}", dec.finish()));
    while let Ok(Some(ev)) = dec.poll_event() {
        out.push(format!("{}|{}|{:?}", ev.event_type(), ev.data(), ev.id()));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let split = usize::from(data[0]) % data.len();
    let body = &data[1..];
    let split = split.min(body.len());
    let whole = run(&[body]);
    let parts = run(&[&body[..split], &body[split..]]);
    assert_eq!(whole, parts);
});
