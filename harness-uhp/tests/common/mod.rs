//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_uhp::{Event, Finding, StreamDecoder, TaskAccumulator};
use serde_json::Value;

/// What a stream decoded to.
pub struct Run {
    pub events: Vec<Event>,
    pub findings: Vec<Finding>,
    pub task: TaskAccumulator,
}

/// Decodes and accumulates `body`, pushed in chunks of the given sizes (cycled).
pub fn run_chunked(body: &[u8], sizes: &[usize]) -> Run {
    let mut dec = StreamDecoder::new();
    let mut task = TaskAccumulator::new();
    let mut events = Vec::new();
    let mut findings = Vec::new();
    let mut rest = body;
    let mut i = 0;
    loop {
        if !rest.is_empty() {
            let n = sizes[i % sizes.len()].clamp(1, rest.len());
            dec.push(&rest[..n]);
            rest = &rest[n..];
            i += 1;
        }
        let end = if rest.is_empty() {
            dec.finish().err()
        } else {
            None
        };
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => {
                    task.add(&ev);
                    events.push(ev);
                }
                Ok(None) => break,
                Err(f) => {
                    task.add_finding(&f);
                    findings.push(f);
                }
            }
        }
        if rest.is_empty() {
            if let Some(f) = end {
                task.add_finding(&f);
                findings.push(f);
            }
            break;
        }
    }
    Run {
        events,
        findings,
        task,
    }
}

pub fn run(body: &[u8]) -> Run {
    run_chunked(body, &[usize::MAX])
}

/// SSE body of these JSON events (`data: …\n\n` each).
pub fn sse(events: &[Value]) -> Vec<u8> {
    events
        .iter()
        .flat_map(|e| format!("data: {e}\n\n").into_bytes())
        .collect()
}

/// A response object with this status and message text.
pub fn response(status: &str, text: &str) -> Value {
    let output = if text.is_empty() {
        serde_json::json!([])
    } else {
        serde_json::json!([{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}])
    };
    serde_json::json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
        "error": null, "model": "m", "output": output, "usage": null, "metadata": {"session_id": "hsess1"}})
}

pub fn created(seq: u64) -> Value {
    serde_json::json!({"type": "response.created", "sequence_number": seq, "response": response("in_progress", "")})
}

pub fn delta(seq: u64, text: &str) -> Value {
    serde_json::json!({"type": "response.output_text.delta", "sequence_number": seq, "item_id": "msg_1",
        "output_index": 0, "content_index": 0, "delta": text})
}

pub fn terminal(kind: &str, seq: u64, status: &str, text: &str) -> Value {
    serde_json::json!({"type": kind, "sequence_number": seq, "response": response(status, text)})
}
