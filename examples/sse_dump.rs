//! Decode SSE test cases with `harness_core::sse::SseDecoder` and print what each one gave:
//! the driver of the differential test against eventsource-parser
//! (`scripts/interop/core-sse`).
//!
//! ```text
//! cargo run --example sse_dump -- cases.jsonl
//! cargo run --example sse_dump < cases.jsonl
//! ```
//!
//! Input, one case per line: `{"id":N,"chunks":["base64",...]}` (bytes as base64, so invalid
//! UTF-8 and a CR at the end of a chunk survive). Each case gets a fresh decoder: every chunk
//! is pushed and the events drained (odd ids: fed in place with `feed`, borrowed events),
//! then `finish()`. Output, one line per case:
//! `{"id":N,"events":[{"event":..,"data":..,"id":..}],"last_event_id":..,"retry":ms|null}`,
//! where an event's `id` is the last event ID at its dispatch and a skipped event is
//! `{"error":".."}`.

use std::io::{BufRead, Write};

use harness_core::sse::SseDecoder;
use serde_json::{Value, json};

fn fail(why: &str) -> ! {
    eprintln!("sse_dump: {why}");
    std::process::exit(1);
}

/// Standard base64 with `=` padding (RFC 4648 §4).
fn base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

fn drain(dec: &mut SseDecoder, events: &mut Vec<Value>) {
    loop {
        match dec.poll_event() {
            Ok(Some(ev)) => {
                events.push(json!({"event": ev.event_type(), "data": ev.data(), "id": ev.id()}))
            }
            Ok(None) => return,
            Err(e) => events.push(json!({"error": e.to_string()})),
        }
    }
}

fn main() {
    let input: Box<dyn BufRead> = match std::env::args().nth(1).as_deref() {
        None | Some("-") => Box::new(std::io::stdin().lock()),
        Some(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(std::io::BufReader::new(f)),
            Err(e) => fail(&format!("{path}: {e}")),
        },
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in input.lines() {
        let line = line.unwrap_or_else(|e| fail(&format!("read error: {e}")));
        if line.trim().is_empty() {
            continue;
        }
        let case: Value = serde_json::from_str(&line).unwrap_or_else(|e| fail(&format!("{e}")));
        let chunks = case["chunks"]
            .as_array()
            .unwrap_or_else(|| fail("no chunks"));
        let mut dec = SseDecoder::new();
        let mut events = Vec::new();
        // Every other case goes in place (`feed`, borrowed events): both paths face the peer.
        let in_place = case["id"].as_u64().is_some_and(|id| id % 2 == 1);
        for chunk in chunks {
            let bytes = chunk.as_str().and_then(base64);
            let bytes = bytes.unwrap_or_else(|| fail("a chunk is not base64"));
            if in_place {
                let mut feed = dec.feed(&bytes);
                while let Some(ev) = feed.next_ref() {
                    events.push(match ev {
                        Ok(ev) => {
                            json!({"event": ev.event_type(), "data": ev.data(), "id": ev.id()})
                        }
                        Err(e) => json!({"error": e.to_string()}),
                    });
                }
            } else {
                dec.push(&bytes);
                drain(&mut dec, &mut events);
            }
        }
        // An unterminated event is reported here and never dispatched: nothing to print.
        let _ = dec.finish();
        drain(&mut dec, &mut events);
        let retry = dec
            .reconnection_time()
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let result = json!({
            "id": case["id"],
            "events": events,
            "last_event_id": dec.last_event_id(),
            "retry": retry,
        });
        writeln!(out, "{result}").unwrap_or_else(|e| fail(&format!("write error: {e}")));
    }
    out.flush()
        .unwrap_or_else(|e| fail(&format!("write error: {e}")));
}
