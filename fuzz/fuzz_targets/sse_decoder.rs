//! Arbitrary bytes, split at an arbitrary point, never panic the SSE decoder, and neither the
//! split nor the path (`push` + `poll_event`, or in place with `feed`, borrowed events)
//! changes what comes out.
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

/// The same through `feed` and `next_ref`.
fn run_fed(chunks: &[&[u8]]) -> Vec<String> {
    let mut dec = SseDecoder::with_config(SseConfig { max_line_bytes: 64, max_event_bytes: 128 });
    let mut out = Vec::new();
    for c in chunks {
        let mut feed = dec.feed(c);
        while let Some(ev) = feed.next_ref() {
            match ev {
                Ok(ev) => out.push(format!("{}|{}|{:?}", ev.event_type(), ev.data(), ev.id())),
                Err(e) => out.push(format!("error {e}")),
            }
        }
    }
    out.push(format!("finish {:?}", dec.finish()));
    for ev in dec.feed(&[]) {
        match ev {
            Ok(ev) => out.push(format!("{}|{}|{:?}", ev.event_type(), ev.data(), ev.id())),
            Err(_) => break,
        }
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
    assert_eq!(whole, run_fed(&[&body[..split], &body[split..]]));
});
