//! streaming.md §4 "Terminal events" (spec/uhp-2026-08-11), in the task accumulator: exactly one,
//! authoritative, carrying the complete response; the status is its `status` field, and a terminal
//! state never changes. Quotes: [spec] is spec/uhp-harnessclientprotocol.txt; [S] is the protocol
//! digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{created, delta, full_task, response, run, sse, terminal};
use harness_uhp::{ProtocolFinding, ResponseStatus, TerminalSource};
use serde_json::json;

/// [spec] "TaskAccumulator treats the terminal event as authoritative and the deltas as an
/// optimisation": the text is the terminal response's when it has one.
#[test]
fn terminal_text_replaces_the_deltas() {
    let body = sse(&[
        created(0),
        delta(1, "Hel"),
        delta(2, "lo?"),
        terminal("response.completed", 3, "completed", "Hello!"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "Hello!");
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(
        r.task.terminal_source(),
        Some(TerminalSource::Stream(harness_uhp::EventType::Completed))
    );
}

/// [spec] "it will produce correct text from the terminal event alone if every delta went
/// missing".
#[test]
fn correct_text_from_the_terminal_event_alone() {
    let body = sse(&[
        created(0),
        terminal("response.completed", 7, "completed", "All of it."),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "All of it.");
    assert_eq!(r.task.sequence().missing, vec![1..=6]);
}

/// [S] "A cancelled task terminates with response.failed carrying status: "cancelled" … The
/// status field, not the event name, is authoritative."
#[test]
fn cancelled_is_read_from_the_status_field() {
    let body = sse(&[
        created(0),
        delta(1, "part"),
        terminal("response.failed", 2, "cancelled", "partial"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.status(), &ResponseStatus::Cancelled);
    assert_eq!(r.task.text(), "partial"); // "partial output retained"
}

/// [S] "incomplete means a budget stopped the work".
#[test]
fn incomplete_and_failed() {
    let r = run(&sse(&[
        created(0),
        terminal("response.incomplete", 1, "incomplete", ""),
    ]));
    assert_eq!(r.task.status(), &ResponseStatus::Incomplete);
    let r = run(&sse(&[
        created(0),
        terminal("response.failed", 1, "failed", ""),
    ]));
    assert_eq!(r.task.status(), &ResponseStatus::Failed);
}

/// [S] "the last four are terminal and never change"; "exactly one terminal event, and it is
/// last": a second terminal event or anything after the first is a finding, not applied.
#[test]
fn a_terminal_state_never_changes() {
    let body = sse(&[
        created(0),
        terminal("response.completed", 1, "completed", "final"),
        delta(2, " more"),
        terminal("response.failed", 3, "failed", "other"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "final");
    let f = r.task.findings();
    assert!(matches!(
        &f[0],
        ProtocolFinding::AfterTerminal {
            sequence_number: Some(2),
            ..
        }
    ));
    assert!(matches!(
        &f[1],
        ProtocolFinding::SecondTerminal {
            sequence_number: Some(3),
            ..
        }
    ));
    assert!(r.task.sequence().ok); // the numbers themselves ran 0..=3
}

/// A terminal event whose response still says `in_progress`: the event's name decides, and
/// the contradiction is reported.
#[test]
fn terminal_event_with_a_non_terminal_status() {
    let r = run(&sse(&[
        created(0),
        terminal("response.completed", 1, "in_progress", "x"),
    ]));
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert!(matches!(
        r.task.findings()[0],
        ProtocolFinding::TerminalStatusNotTerminal { .. }
    ));
}

/// Everything is also taken from the terminal response when its events were dropped.
#[test]
fn dropped_events_are_recovered_from_the_terminal_response() {
    let b = full_task();
    let events = b.events();
    let last = events.len() - 1;
    let r = run(&sse(&[events[0].clone(), events[last].clone()]));
    assert_eq!(r.task.text(), "Wrote it.");
    assert_eq!(r.task.reasoning(), "Thinking.");
    assert_eq!(r.task.tool_calls()[0].arguments, "{\"path\":\"a.md\"}");
    assert_eq!(r.task.annotations().len(), 2);
    assert_eq!(r.task.sequence().missing, vec![1..=(last as u64 - 1)]);
}

/// Unknown item types in the terminal response are tolerated and kept.
#[test]
fn unknown_items_in_the_terminal_response() {
    let mut resp = response("completed", "ok");
    resp["output"].as_array_mut().unwrap().insert(
        0,
        json!({"type": "computer_call", "id": "cc_1", "action": {"x": 1}}),
    );
    let r = run(&sse(&[
        created(0),
        json!({"type": "response.completed", "sequence_number": 1, "response": resp}),
    ]));
    assert_eq!(r.task.text(), "ok");
    let stored = r.task.response().unwrap();
    assert_eq!(stored.output[0].item_type(), "computer_call");
    let back = serde_json::to_value(&stored.output[0]).unwrap();
    assert_eq!(
        back,
        json!({"type": "computer_call", "id": "cc_1", "action": {"x": 1}})
    );
}

/// [spec] "TaskAccumulator treats the terminal event as authoritative"; [S] "exactly one
/// terminal event, and it is last". A terminal event that reuses an earlier event's number
/// is a numbering fault (reported as a duplicate), not a replay of that earlier event: its
/// content was never counted, so it still ends the task. (It used to be dropped as a replay,
/// leaving a finished task `in_progress` forever.)
#[test]
fn a_terminal_event_with_a_reused_number_still_ends_the_task() {
    let r = run(&sse(&[
        created(0),
        delta(1, "a"),
        terminal("response.completed", 1, "completed", "a!"),
    ]));
    assert!(r.task.is_terminal());
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "a!");
    assert_eq!(r.task.sequence().duplicates, vec![1]);
    assert!(!r.task.sequence().ok);
    // A true replay of the terminal event itself is still a second terminal event.
    let t = terminal("response.failed", 2, "failed", "");
    let r = run(&sse(&[created(0), delta(1, "a"), t.clone(), t]));
    assert_eq!(r.task.status(), &ResponseStatus::Failed);
    assert!(matches!(
        r.task.findings(),
        [ProtocolFinding::SecondTerminal { .. }]
    ));
}

/// The schema's reasoning item: `summary: {type: array, items: {type: object,
/// additionalProperties: true}}` — a summary entry need not carry `type` (unlike a
/// `ContentPart`). A terminal response with such an entry is valid and must end the task,
/// its text counted as reasoning; it used to fail to decode, losing the terminal event.
#[test]
fn a_summary_entry_without_a_type_is_valid() {
    let mut resp = response("completed", "ok");
    resp["output"].as_array_mut().unwrap().insert(
        0,
        json!({"type": "reasoning", "id": "rs_1", "summary": [{"text": "why"}, {"type": "summary_text", "text": " so"}]}),
    );
    let r = run(&sse(&[
        created(0),
        json!({"type": "response.completed", "sequence_number": 1, "response": resp.clone()}),
    ]));
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.task.is_terminal());
    assert_eq!(r.task.reasoning(), "why so");
    assert_eq!(r.task.text(), "ok");
    // The same object as a stored response.
    let stored: harness_uhp::Response = serde_json::from_value(resp).unwrap();
    assert_eq!(stored.reasoning_text(), "why so");
    // An output item or a content part still needs its `type`.
    let mut bad = response("completed", "ok");
    bad["output"][0]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("type");
    assert!(serde_json::from_value::<harness_uhp::Response>(bad).is_err());
}

/// [spec] "it will produce correct text from the terminal event alone": a terminal response
/// that writes `null` where the schema has an empty string or list (`output`, `content`,
/// `annotations`, `text`, a call's `call_id`/`name`/`arguments`, a citation's ids, `id`,
/// `object`, `summary`) still ends the task — `null` reads as the empty value, as the Python
/// peer reads it. (It used to fail the whole `response.completed`, and the task never ended.)
#[test]
fn nulls_in_the_terminal_response_read_as_empty() {
    let resp = json!({"id": null, "object": null, "created_at": 1, "status": "completed", "model": "m",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": null},
            {"type": "function_call", "id": "fc_1", "call_id": null, "name": null, "arguments": null},
            {"type": "function_call_output", "id": "fco_1", "call_id": null, "output": null},
            {"type": "message", "id": "msg_0", "role": "assistant", "content": null},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [
                {"type": "output_text", "text": null, "annotations": null},
                {"type": "output_text", "text": "ok", "annotations": [
                    {"type": "container_file_citation", "container_id": null, "file_id": "file_1",
                     "filename": null, "download_url": null}]}]}]});
    let r = run(&sse(&[
        created(0),
        json!({"type": "response.completed", "sequence_number": 1, "response": resp.clone()}),
    ]));
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.task.is_terminal());
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "ok");
    assert_eq!(r.task.tool_calls().len(), 1);
    assert_eq!(r.task.artifacts()[0].file_id, "file_1");
    let mut empty = resp;
    empty["output"] = json!(null);
    let stored: harness_uhp::Response = serde_json::from_value(empty).unwrap();
    assert!(stored.output.is_empty() && stored.id.is_empty());
    assert_eq!(stored.object, "response");
}

/// [spec] "TaskAccumulator treats the terminal event as authoritative": a terminal event
/// whose response has a sloppy peripheral field — `created_at` as a float (a Python server's
/// `time.time()`), a token count as a string, a numeric error `code`, a tool call whose
/// `arguments` is an object — still ends the task with its status, text and error. The
/// whole event used to be rejected, the task stayed `in_progress`, and the stored response
/// (with the same shape) then failed the client with a malformed body.
#[test]
fn a_sloppy_field_does_not_cost_the_terminal_event() {
    let mut fin = terminal("response.failed", 1, "failed", "partial answer");
    fin["response"]["created_at"] = json!(1786400000.25);
    fin["response"]["usage"] =
        json!({"input_tokens": "12", "output_tokens": 3, "total_tokens": 15});
    fin["response"]["error"] = json!({"type": "harness_error", "code": 504, "message": "upstream timed out", "param": null});
    fin["response"]["output"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": {"path": "."}}));
    let r = run(&sse(&[created(0), fin]));
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.task.is_terminal());
    assert_eq!(r.task.status(), &ResponseStatus::Failed);
    assert_eq!(r.task.text(), "partial answer");
    let e = r.task.error().unwrap();
    assert_eq!(e.code.as_deref(), Some("504"));
    assert_eq!(e.message.as_deref(), Some("upstream timed out"));
    let resp = r.task.response().unwrap();
    assert_eq!(resp.created_at, None);
    assert_eq!(resp.extra["created_at"], json!(1786400000.25)); // kept as received
    assert_eq!(resp.output[1].item_type(), "function_call"); // the item is kept

    // The status cannot be guessed: without it the event still is not applied.
    let mut fin = terminal("response.completed", 1, "completed", "x");
    fin["response"]["created_at"] = json!(1.5);
    fin["response"].as_object_mut().unwrap().remove("status");
    let r = run(&sse(&[created(0), fin]));
    assert!(!r.task.is_terminal());
    assert_eq!(r.findings.len(), 1);
}
