//! Arbitrary bytes never panic the TanStack frame decoders (SSE, NDJSON, JSON frames, AG-UI
//! events), a split never changes the SSE frames, and whatever decodes re-encodes to a frame
//! that decodes to the same value.
#![no_main]

use harness_core::sse::SseConfig;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::frame::{ClientFrame, HostFrame};
use harness_tanstack::transport::{NdjsonFrameDecoder, SseFrameDecoder};
use libfuzzer_sys::fuzz_target;

fn sse(chunks: &[&[u8]]) -> Vec<String> {
    let mut dec = SseFrameDecoder::with_config(SseConfig {
        max_line_bytes: 256,
        max_event_bytes: 512,
    });
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        loop {
            match dec.poll_frame() {
                Ok(Some(f)) => out.push(f.to_json()),
                Ok(None) => break,
                Err(e) => out.push(format!("error {e}")),
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let body = &data[1..];
    let split = (usize::from(data[0]) % data.len()).min(body.len());
    assert_eq!(sse(&[body]), sse(&[&body[..split], &body[split..]]));

    let text = String::from_utf8_lossy(body);
    if let Ok(f) = HostFrame::from_json(&text) {
        assert_eq!(HostFrame::from_json(&f.to_json()).ok(), Some(f));
    }
    if let Ok(f) = ClientFrame::from_json(&text) {
        assert_eq!(ClientFrame::from_json(&f.to_json()).ok(), Some(f));
    }
    if let Ok(e) = AguiEvent::from_json(&text) {
        assert_eq!(AguiEvent::from_json(&e.to_json()).ok(), Some(e));
    }
    let mut nd = NdjsonFrameDecoder::new();
    nd.push(body);
    nd.finish();
    for _ in 0..body.len() + 1 {
        match nd.poll_line() {
            Ok(None) => break,
            Ok(Some(l)) => {
                let _ = ClientFrame::from_json(&l);
            }
            Err(_) => {}
        }
    }
});
