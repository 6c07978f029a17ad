//! streaming.md §2 "Event vocabulary" (spec/uhp-2026-08-11), in the task accumulator: output items,
//! assistant text, reasoning, tool use and errors, each assembled from its events. Quotes: [spec]
//! is spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{citation, created, full_task, run, sse};
use harness_uhp::builder::StreamBuilder;
use harness_uhp::{ErrorObject, ResponseStatus};
use serde_json::json;

/// [S] "error event = error that did not end the task; MUST be followed by a terminal event";
/// the task's error comes from the `error` event, else from the terminal response's `error`.
#[test]
fn the_error_from_the_event_or_the_terminal_response() {
    let mut b = StreamBuilder::new("resp_1");
    b.created()
        .error("provider_error", "The upstream model provider failed.");
    b.failed(
        ErrorObject::new("provider_error", "The upstream model provider failed.")
            .with_type("harness_error"),
    );
    let r = run(&b.to_sse());
    let e = r.task.error().unwrap();
    assert_eq!(
        (e.code.as_deref(), e.error_type.as_deref()),
        (Some("provider_error"), None)
    );

    let mut b = StreamBuilder::new("resp_1");
    b.created();
    b.failed(
        ErrorObject::new("timeout", "The task exceeded its wall-clock budget.")
            .with_type("harness_error"),
    );
    let r = run(&b.to_sse());
    let e = r.task.error().unwrap();
    assert_eq!(
        (e.code.as_deref(), e.error_type.as_deref()),
        (Some("timeout"), Some("harness_error"))
    );
    assert_eq!(r.task.status(), &ResponseStatus::Failed);
}

/// Reasoning, tool calls and annotations (artifacts) from the events.
#[test]
fn reasoning_tool_calls_and_annotations() {
    let b = full_task();
    let r = run(&b.to_sse());
    assert_eq!(r.task.reasoning(), "Thinking.");
    let calls = r.task.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].call_id.as_str(), calls[0].name.as_str()),
        ("call_1", "write_file")
    );
    assert_eq!(calls[0].arguments, "{\"path\":\"a.md\"}");
    assert_eq!(
        r.task.annotations(),
        vec![citation("file_1"), citation("file_2")]
    );
    assert_eq!(r.task.artifacts().len(), 2);
    assert!(r.task.sequence().ok && r.task.findings().is_empty());
}

/// A tool call assembled from `output_item.added` and its argument deltas when the done
/// events were lost and no terminal event came.
#[test]
fn tool_call_assembled_from_argument_deltas() {
    let b = full_task();
    let keep: Vec<_> = b
        .events()
        .iter()
        .filter(|e| {
            let t = e["type"].as_str().unwrap();
            t == "response.created"
                || (e["item"]["type"] == "function_call" && t == "response.output_item.added")
                || t == "response.function_call_arguments.delta"
        })
        .cloned()
        .collect();
    let r = run(&sse(&keep));
    let calls = r.task.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("write_file", "{\"path\":\"a.md\"}")
    );
    assert!(!r.task.is_terminal());
}

/// `output_text.done` carries the whole part: a truncated stream still has the right text.
#[test]
fn output_text_done_is_authoritative_for_its_part() {
    let mut b = StreamBuilder::new("resp_1");
    b.created().message(&["a", "b", "c"], &[]);
    let mut events = b.events().to_vec();
    events.retain(|e| e["delta"] != "b"); // one delta lost
    let r = run(&sse(&events));
    assert_eq!(r.task.text(), "abc");
    assert!(!r.task.is_terminal());
}

/// The schema requires only `type` and `sequence_number` of an event: `output_index` may be
/// absent, and then `item_id` names the item. Two tool calls and two messages streamed that
/// way stay two of each (they used to share one slot: the second call overwrote the first,
/// and the first message's `output_text.done` froze the slot, losing the second message).
#[test]
fn items_without_output_index_are_told_apart_by_item_id() {
    let ev = |v: serde_json::Value| v;
    let mut events = vec![created(0)];
    let mut n = 0u64;
    let mut next = || {
        n += 1;
        n
    };
    for (id, call, args) in [
        ("fc_1", "call_1", ["{\"a\":", "1}"]),
        ("fc_2", "call_2", ["{\"b\":", "2}"]),
    ] {
        events.push(ev(json!({"type": "response.output_item.added", "sequence_number": next(),
            "item": {"id": id, "type": "function_call", "call_id": call, "name": "t", "arguments": ""}})));
        for a in args {
            events.push(ev(json!({"type": "response.function_call_arguments.delta",
                "sequence_number": next(), "item_id": id, "delta": a})));
        }
    }
    for (id, text) in [("msg_1", "First. "), ("msg_2", "Second.")] {
        events.push(ev(
            json!({"type": "response.output_item.added", "sequence_number": next(),
            "item": {"id": id, "type": "message", "role": "assistant", "content": []}}),
        ));
        events.push(ev(
            json!({"type": "response.output_text.delta", "sequence_number": next(),
            "item_id": id, "content_index": 0, "delta": text}),
        ));
        events.push(ev(
            json!({"type": "response.output_text.done", "sequence_number": next(),
            "item_id": id, "content_index": 0, "text": text}),
        ));
    }
    let r = run(&sse(&events));
    assert!(r.findings.is_empty() && r.task.sequence().ok);
    let calls = r.task.tool_calls();
    let got: Vec<_> = calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(got, [("call_1", "{\"a\":1}"), ("call_2", "{\"b\":2}")]);
    assert_eq!(r.task.text(), "First. Second.");
}
