//! The server against streaming.md (spec/uhp-2026-08-11): §1 opening a stream, §2 the
//! vocabulary, §3 ordering, §4 terminal events, §5 reconnecting; errors.md §5 keep-alives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use std::time::Duration;

use harness_core::message::{JsonObject, ToolCall};
use harness_uhp::server::StreamPoll;
use serde_json::{Value, json};
use server_rig::{ALICE, Got, Rig, values};

fn open(r: &mut Rig, body: Value) -> (harness_uhp::server::StreamId, String, server_rig::Answer) {
    let mut body = body;
    body["stream"] = json!(true);
    let Got::Stream(head, sid) = r.send_as(ALICE, "POST", "/v1/responses", Some(body)) else {
        panic!("a stream");
    };
    let id = r.turns.last().unwrap().response_id.clone();
    (sid, id, head)
}

/// §3 rules 1–4 on a task with text, reasoning, a tool call and an artifact: `response.created`
/// first; one terminal event, last; every item's `added` before its events and `done` after
/// them; `sequence_number` from 0 by exactly one.
fn check_ordering(events: &[Value]) {
    assert_eq!(events[0]["type"], "response.created");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i as u64, "gapless from 0");
        assert!(e["type"].is_string());
    }
    let terminal = [
        "response.completed",
        "response.incomplete",
        "response.failed",
    ];
    let finals: Vec<usize> = (0..events.len())
        .filter(|i| terminal.contains(&events[*i]["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        finals,
        vec![events.len() - 1],
        "exactly one terminal event, the last"
    );
    let mut open: Vec<(u64, bool)> = Vec::new(); // (output_index, done)
    for e in events {
        let ty = e["type"].as_str().unwrap();
        let Some(oi) = e["output_index"].as_u64() else {
            continue;
        };
        match ty {
            "response.output_item.added" => {
                assert!(!open.iter().any(|(i, _)| *i == oi), "added once");
                open.push((oi, false));
            }
            "response.output_item.done" => {
                let slot = open
                    .iter_mut()
                    .find(|(i, _)| *i == oi)
                    .expect("added before done");
                assert!(!slot.1);
                slot.1 = true;
            }
            _ => {
                let slot = open
                    .iter()
                    .find(|(i, _)| *i == oi)
                    .expect("added before its events");
                assert!(!slot.1, "{ty} after its item's done");
            }
        }
    }
    assert!(open.iter().all(|(_, done)| *done), "every item done");
}

/// §1: `200`, `Content-Type: text/event-stream`, `Cache-Control: no-cache`; "MUST NOT buffer
/// the stream to completion": each event can be sent as soon as the agent makes it.
#[test]
fn the_stream_is_progressive() {
    let mut r = Rig::new();
    let (sid, id, head) = open(&mut r, json!({"input": "hi"}));
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), "text/event-stream");
    assert_eq!(head.header("cache-control"), "no-cache");
    assert_eq!(head.header("x-accel-buffering"), "no");
    let (first, done) = r.read_stream(sid);
    assert!(!done);
    let ev = values(&first);
    assert_eq!(ev.len(), 2, "created and in_progress leave at once");
    assert_eq!(r.server.poll_stream(sid), StreamPoll::Pending);
    r.text(&id, "Hel");
    assert!(r.wakes.contains(&harness_uhp::server::Wake::Stream(sid)));
    let (b, _) = r.read_stream(sid);
    let ev = values(&b);
    assert_eq!(ev.last().unwrap()["type"], "response.output_text.delta");
    assert_eq!(ev.last().unwrap()["delta"], "Hel");
    r.text(&id, "lo");
    let (b, _) = r.read_stream(sid);
    assert_eq!(values(&b).len(), 1, "one delta, one event, now");
    r.end(&id);
    let (_, done) = r.read_stream(sid);
    assert!(done);
}

/// §2–§4 on a full task, decoded by harness-uhp's own client.
#[test]
fn vocabulary_and_ordering() {
    let mut r = Rig::new();
    let (sid, id, _) = open(&mut r, json!({"input": "Create a file"}));
    let now = r.now();
    r.server.turn_reasoning(now, &id, "Thinking").unwrap();
    r.server.turn_reasoning(now, &id, " briefly.").unwrap();
    r.text(&id, "Writing ");
    let call = ToolCall::new("call_1", "write_file", JsonObject::new());
    r.server.turn_tool_call(now, &id, &call).unwrap();
    r.server
        .turn_write_file(now, &id, "out/report.md", b"# hi".to_vec())
        .unwrap();
    r.server
        .turn_tool_result(
            now,
            &id,
            &harness_core::message::ToolResult::ok_json("call_1", json!({})),
        )
        .unwrap();
    r.text(&id, "done.");
    r.end(&id);
    let (body, done) = r.read_stream(sid);
    assert!(done);
    let events = values(&body);
    check_ordering(&events);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for t in [
        "response.in_progress",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_part.done",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_text.annotation.added",
        "response.completed",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    // §4: the terminal event carries the complete response, equal to the stored one.
    let last = &events.last().unwrap()["response"];
    let stored = r.call("GET", &format!("/v1/responses/{id}"), None).json();
    assert_eq!(last, &stored);
    // And the client decodes the task whole.
    let mut acc = harness_uhp::TaskAccumulator::new();
    for e in server_rig::decode(&body) {
        acc.add(&e);
    }
    assert_eq!(acc.status(), &harness_uhp::ResponseStatus::Completed);
    assert!(acc.sequence().ok);
    assert_eq!(acc.text(), "Writing done.");
    assert_eq!(acc.reasoning(), "Thinking briefly.");
    assert_eq!(acc.artifacts()[0].filename, "out/report.md");
}

/// §4: "A cancelled task terminates with response.failed carrying status: cancelled".
#[test]
fn a_cancelled_stream_ends_failed_with_status_cancelled() {
    let mut r = Rig::new();
    let (sid, id, _) = open(&mut r, json!({"input": "count"}));
    r.text(&id, "1\n");
    r.call("POST", &format!("/v1/responses/{id}/cancel"), None);
    let (body, done) = r.read_stream(sid);
    assert!(done);
    let events = values(&body);
    check_ordering(&events);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["status"], "cancelled");
}

/// §5: "A dropped connection MUST NOT abort the task"; the stored response is the truth.
/// errors.md §5: a comment at least every 30 s on an idle stream.
#[test]
fn a_dropped_stream_does_not_abort_and_idle_streams_get_keep_alives() {
    let mut r = Rig::new();
    let (sid, id, _) = open(&mut r, json!({"input": "slow"}));
    r.read_stream(sid);
    // Silent for at most two ticks (here 2 × 15 s: within the 30 s the spec asks).
    r.advance(Duration::from_secs(16));
    assert_eq!(r.read_stream(sid).0, b"");
    r.advance(Duration::from_secs(15));
    let (b, _) = r.read_stream(sid);
    assert_eq!(b, b": keep-alive\n\n");
    r.text(&id, "busy");
    r.advance(Duration::from_secs(14));
    let (b, _) = r.read_stream(sid);
    assert!(
        !String::from_utf8_lossy(&b).contains("keep-alive"),
        "an active stream needs none"
    );
    r.server.close_stream(sid);
    assert_eq!(r.server.open_streams(), 0);
    r.text(&id, " still");
    r.end(&id);
    let v = r.call("GET", &format!("/v1/responses/{id}"), None).json();
    assert_eq!(
        (
            v["status"].as_str(),
            v["output"][0]["content"][0]["text"].as_str()
        ),
        (Some("completed"), Some("busy still"))
    );
}

/// A client that does not read: past `max_stream_buffer_bytes` its stream ends (it reads the
/// stored response), the task goes on; open streams are bounded (`429 rate_limited`).
#[test]
fn streams_are_bounded() {
    let mut cfg = server_rig::config();
    cfg.max_stream_buffer_bytes = 4096;
    cfg.max_open_streams = 1;
    let mut r = Rig::with(cfg);
    let (sid, id, _) = open(&mut r, json!({"input": "flood"}));
    let refused = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "x", "stream": true})),
    );
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (429, "rate_limited")
    );
    assert_eq!(refused.header("retry-after"), "1");
    for _ in 0..100 {
        r.text(&id, "0123456789012345678901234567890123456789");
    }
    let (_, done) = r.read_stream(sid);
    assert!(done, "the slow reader's stream ended");
    r.end(&id);
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).json()["status"],
        "completed"
    );
}
