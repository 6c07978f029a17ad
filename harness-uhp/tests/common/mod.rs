//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{ClientRequest, CreateRequest, TaskClient, TaskClientConfig, TaskEvent};
use harness_uhp::retry::RetryPolicy;
use harness_uhp::{
    Annotation, ContainerFileCitation, Finding, StreamDecoder, StreamEvent, TaskAccumulator,
};
use http::HeaderMap;
use serde_json::{Value, json};

/// What a stream decoded to.
pub struct Run {
    pub events: Vec<StreamEvent>,
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

// The task client, driven without a network.

/// A header map of these pairs.
pub fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

/// The head of an event-stream answer.
pub fn sse_head() -> HeaderMap {
    headers(&[("content-type", "text/event-stream")])
}

/// The head of a JSON answer.
pub fn json_head() -> HeaderMap {
    headers(&[("content-type", "application/json")])
}

/// The server's side of a task (`resp_1`): created, the message `Hel` `lo`, completed.
pub fn server() -> StreamBuilder {
    let mut b = StreamBuilder::new("resp_1");
    b.created().message(&["Hel", "lo"], &[]).completed();
    b
}

/// The client under test: token `tok`, harness `chrn_1`, a poll every 500 ms, a seeded policy.
pub fn client() -> TaskClient {
    let mut cfg = TaskClientConfig::new("http://uhp.test/api/").with_token("tok");
    cfg.poll_interval = Duration::from_millis(500);
    TaskClient::with_policy(
        cfg,
        CreateRequest::new("hi").harness("chrn_1"),
        RetryPolicy::new().with_seed(5),
    )
}

/// Every event the client has queued.
pub fn events(c: &mut TaskClient) -> Vec<TaskEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Answers request `t` in one go: head, JSON body, end.
pub fn answer_json(
    c: &mut TaskClient,
    now: Instant,
    t: &ClientRequest,
    status: u16,
    h: &HeaderMap,
    body: &Value,
) {
    c.handle_head(now, t.id, status, h);
    c.handle_data(now, t.id, body.to_string().as_bytes());
    c.handle_end(now, t.id);
}

/// A `response.created` carrying this id, as SSE.
pub fn created_with_id(id: &str) -> Vec<u8> {
    let ev = json!({"type": "response.created", "sequence_number": 0,
        "response": {"id": id, "object": "response", "status": "in_progress", "output": []}});
    format!("data: {ev}\n\n").into_bytes()
}

// A task with every kind of output.

/// A `container_file_citation` of the file `file`.
pub fn citation(file: &str) -> Annotation {
    Annotation::ContainerFileCitation(ContainerFileCitation {
        container_id: "cntr_1".into(),
        file_id: file.into(),
        filename: format!("{file}.md"),
        download_url: Some(format!(
            "https://x/v1/containers/cntr_1/files/{file}/content"
        )),
        start_index: Some(0),
        end_index: Some(4),
        extra: Default::default(),
    })
}

/// A whole task: reasoning, a `write_file` tool call, and a message citing two files.
pub fn full_task() -> StreamBuilder {
    let mut b = StreamBuilder::new("resp_1");
    b.created()
        .reasoning(&["Think", "ing."])
        .tool_call("call_1", "write_file", &["{\"path\":", "\"a.md\"}"])
        .message(
            &["Wrote", " it."],
            &[citation("file_1"), citation("file_2")],
        )
        .completed();
    b
}
