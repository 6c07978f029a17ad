//! The task accumulator and the sequence check, rule by rule. Quotes: [spec] is
//! spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{created, delta, response, run, run_chunked, sse, terminal};
use harness_uhp::builder::StreamBuilder;
use harness_uhp::{
    Annotation, ContainerFileCitation, ErrorObject, ProtocolFinding, ResponseStatus, SequenceCheck,
    TaskAccumulator, TerminalSource,
};
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

/// Before a terminal event the text is the deltas, in `sequence_number` order; [S] "Text
/// deltas MUST be concatenated in sequence_number order".
#[test]
fn deltas_are_joined_in_sequence_number_order() {
    let body = sse(&[
        created(0),
        delta(1, "a"),
        delta(3, "c"),
        delta(2, "b"),
        delta(4, "d"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "abcd");
    let seq = r.task.sequence();
    assert_eq!(seq.out_of_order, vec![2]);
    assert!(seq.missing.is_empty() && seq.duplicates.is_empty() && !seq.ok);
    assert_eq!(r.task.status(), &ResponseStatus::InProgress);
    assert!(!r.task.is_terminal());
}

/// A replayed delta (same `sequence_number`) is counted once, and reported as a duplicate.
#[test]
fn a_replayed_delta_is_counted_once() {
    let body = sse(&[
        created(0),
        delta(1, "a"),
        delta(2, "b"),
        delta(2, "b"),
        delta(3, "c"),
        delta(1, "a"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "abc");
    assert_eq!(r.task.sequence().duplicates, vec![2, 1]);
    assert!(r.task.sequence().missing.is_empty());
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

/// [S] "First event response.created".
#[test]
fn first_event_must_be_created() {
    let r = run(&sse(&[delta(0, "x")]));
    assert!(matches!(
        r.task.findings()[0],
        ProtocolFinding::FirstEventNotCreated { .. }
    ));
    // Not after a resume: the stream starts wherever the server resumed.
    let mut task = TaskAccumulator::resumed_after(9);
    let ev = harness_uhp::Event::parse(delta(10, "x").to_string()).unwrap();
    task.add(&ev);
    assert!(task.findings().is_empty());
    assert!(task.sequence().ok);
}

/// [S] "Every event MUST carry type and sequence_number (integer ≥0)".
#[test]
fn events_without_a_valid_number_are_reported() {
    let mut e = delta(1, "x");
    e.as_object_mut().unwrap().remove("sequence_number");
    let r = run(&sse(&[created(0), e, delta(2, "y")]));
    assert_eq!(r.task.text(), "xy");
    assert_eq!(r.task.sequence().unnumbered, 1);
    assert!(!r.task.sequence().ok);
    assert!(matches!(
        r.task.findings()[0],
        ProtocolFinding::Unnumbered { .. }
    ));
}

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

fn citation(file: &str) -> Annotation {
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

fn full_task() -> StreamBuilder {
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

/// The stored response (GET /v1/responses/{id}) finishes a task whose stream was lost.
#[test]
fn a_stored_response_finishes_the_task() {
    let body = sse(&[created(0), delta(1, "Hel")]);
    let mut r = run(&body);
    assert_eq!(r.task.response_id(), Some("resp_1"));
    let stored: harness_uhp::Response =
        serde_json::from_value(response("completed", "Hello")).unwrap();
    r.task.apply_response(&stored);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "Hello");
    assert_eq!(
        r.task.terminal_source(),
        Some(TerminalSource::StoredResponse)
    );
    // Once terminal, it does not change; a disagreeing stored response is a finding.
    let other: harness_uhp::Response = serde_json::from_value(response("failed", "x")).unwrap();
    r.task.apply_response(&other);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert!(matches!(
        r.task.findings().last(),
        Some(ProtocolFinding::StoredResponseDisagrees { .. })
    ));
}

/// A stored response still in progress does not finish the task.
#[test]
fn an_in_progress_stored_response_does_not_finish() {
    let mut task = TaskAccumulator::new();
    task.apply_response(&serde_json::from_value(response("in_progress", "")).unwrap());
    assert!(!task.is_terminal());
    assert_eq!(task.response_id(), Some("resp_1"));
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

/// The sequence check: missing, duplicates and out-of-order reported separately.
#[test]
fn sequence_check_reports_each_kind_separately() {
    let mut s = SequenceCheck::new();
    for n in [0, 1, 3, 3, 6, 2, 9] {
        s.record(Some(n));
    }
    let r = s.report();
    assert!(!r.ok);
    assert_eq!(r.missing, vec![4..=5, 7..=8]);
    assert_eq!(r.duplicates, vec![3]);
    assert_eq!(r.out_of_order, vec![2]);
    assert_eq!(r.missing_count(), 4);
    assert_eq!(r.missing_numbers().collect::<Vec<_>>(), vec![4, 5, 7, 8]);
    assert_eq!(s.last_seen(), Some(9));
}

/// [S] "`seqs == list(range(len(seqs)))`" — ok exactly when the numbers are 0, 1, 2, ….
#[test]
fn sequence_ok_is_the_conformance_check() {
    for (seqs, ok) in [
        (vec![0, 1, 2], true),
        (vec![], true),
        (vec![1, 2], false),
        (vec![0, 2], false),
        (vec![0, 1, 1, 2], false),
        (vec![0, 2, 1, 3], false),
    ] {
        let mut s = SequenceCheck::new();
        for n in &seqs {
            s.record(Some(*n));
        }
        let conformance = seqs.iter().enumerate().all(|(i, n)| *n == i as u64);
        assert_eq!(s.report().ok, ok, "{seqs:?}");
        assert_eq!(s.report().ok, conformance, "{seqs:?}");
    }
}

/// Linear, not O(max sequence number): `[0, 5000000]` is one missing range, checked at once;
/// a million events take well under a second.
#[test]
fn sequence_check_is_linear_in_the_events() {
    let mut s = SequenceCheck::new();
    s.record(Some(0));
    s.record(Some(5_000_000));
    assert_eq!(s.report().missing, vec![1..=4_999_999]);
    s.record(Some(u64::MAX));
    s.record(Some(u64::MAX));
    assert_eq!(s.report().duplicates, vec![u64::MAX]);

    let start = Instant::now();
    let mut s = SequenceCheck::new();
    for n in 0..1_000_000u64 {
        // every 1000th number arrives one place late
        let n = if n % 1000 == 1 {
            n + 1
        } else if n % 1000 == 2 {
            n - 1
        } else {
            n
        };
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.out_of_order.len(), 1000);
    assert!(r.missing.is_empty());
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// [S] "if supported the server resumes *after* the given sequence_number … and MUST NOT
/// replay": a resumed stream is checked from its resume point; a replay is a duplicate.
#[test]
fn resume_from_last_event_id() {
    let mut s = SequenceCheck::resumed_after(41);
    for n in [42, 43, 40, 44] {
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.start, 42);
    assert!(r.missing.is_empty());
    assert_eq!(r.duplicates, vec![40]);
    let mut s = SequenceCheck::resumed_after(41);
    s.record(Some(45));
    assert_eq!(s.report().missing, vec![42..=44]);
}

/// The accumulator keeps the last sequence number for `Last-Event-ID`.
#[test]
fn last_sequence_number_for_resumption() {
    let r = run(&sse(&[created(0), delta(1, "a"), delta(2, "b")]));
    assert_eq!(r.task.last_sequence_number(), Some(2));
    let r2 = run_chunked(&sse(&[created(0), delta(1, "a"), delta(2, "b")]), &[3]);
    assert_eq!(r2.task.summary(), r.task.summary());
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

/// Memory bounds: findings are kept (up to `MAX_FINDINGS`), so what each keeps of the
/// peer's bytes is bounded too. An event type, a status or a decoder message that repeats
/// a megabyte of the payload is cut to an excerpt: 1024 such findings cannot pin a
/// gigabyte of a hostile stream.
#[test]
fn findings_keep_bounded_excerpts_of_the_payload() {
    let big = "x".repeat(1 << 20);
    let mut resp = response("completed", "ok");
    resp["status"] = json!(big.clone());
    let mut unnumbered = json!({"type": big.clone()});
    unnumbered["note"] = json!(1);
    let r = run(&sse(&[
        json!({"type": big.clone(), "sequence_number": 0}), // first event not `created`
        unnumbered,
        json!({"type": "response.completed", "sequence_number": 2, "response": resp}),
        json!({"type": big.clone(), "sequence_number": 3}), // after the terminal event
        // A known type with a megabyte where an integer belongs: the decoder's message.
        json!({"type": "response.output_text.delta", "sequence_number": 4,
               "output_index": big.clone(), "delta": "d"}),
    ]));
    assert_eq!(r.task.status().as_str(), big); // the task itself keeps what it was told
    let kinds: Vec<_> = r
        .task
        .findings()
        .iter()
        .map(std::mem::discriminant)
        .collect();
    assert!(kinds.len() >= 4, "{:?}", r.task.findings());
    for f in r.task.findings() {
        let shown = f.to_string();
        assert!(shown.len() < 2048, "a finding of {} bytes", shown.len());
        assert!(format!("{f:?}").len() < 2048);
    }
    for f in &r.findings {
        assert!(
            f.to_string().len() < 2048,
            "a decoder finding of {} bytes",
            f.to_string().len()
        );
    }
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

/// A resumed stream that has delivered nothing yet still resumes from where it was: the
/// `Last-Event-ID` to send after a second drop is the first resume point, not nothing
/// (which would make the server replay the whole stream from 0).
#[test]
fn a_resumed_stream_keeps_its_resume_point_for_the_next_resume() {
    let task = TaskAccumulator::resumed_after(41);
    assert_eq!(task.last_sequence_number(), Some(41));
    assert_eq!(SequenceCheck::resumed_after(41).last_seen(), Some(41));
    assert_eq!(
        SequenceCheck::resumed_after(u64::MAX).last_seen(),
        Some(u64::MAX)
    );
    assert_eq!(TaskAccumulator::new().last_sequence_number(), None);
    let mut task = TaskAccumulator::resumed_after(41);
    task.add(&harness_uhp::Event::parse(delta(42, "x").to_string()).unwrap());
    assert_eq!(task.last_sequence_number(), Some(42));
}

/// Memory bounds: a replaying proxy can send the same event forever. The replays add no
/// content, so they must not add memory either: the duplicate and out-of-order numbers are
/// listed up to `MAX_LISTED` each and counted beyond, and the check stays exact (`ok` is
/// false, the counts are right).
#[test]
fn replays_are_counted_not_hoarded() {
    use harness_uhp::sequence::MAX_LISTED;
    let mut s = SequenceCheck::new();
    s.record(Some(0));
    s.record(Some(3));
    for _ in 0..100_000 {
        s.record(Some(0));
    }
    for n in [2, 1] {
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.duplicates.len(), MAX_LISTED);
    assert_eq!(r.duplicate_count, 100_000);
    assert_eq!(
        (r.out_of_order.clone(), r.out_of_order_count),
        (vec![2, 1], 2)
    );
    assert!(!r.ok && r.missing.is_empty());
    let summary = harness_uhp::SequenceSummary::from(&r);
    assert_eq!(summary.duplicates.len(), MAX_LISTED);
    assert_eq!(summary.duplicate_count, 100_000);
}

/// A task is one response: its stream's events and its stored response carry its `id`
/// (`resp_…`). [S] "GET /v1/responses/{id} … is the source of truth" — of *that* task: a
/// response object with another id (a buggy proxy or cache mixing up tasks) is reported
/// and not applied. It used to end the task with the other task's status and text.
#[test]
fn a_response_with_another_id_is_not_applied() {
    let mut other = terminal(
        "response.completed",
        2,
        "completed",
        "someone else's answer",
    );
    other["response"]["id"] = json!("resp_OTHER");
    let body = sse(&[created(0), delta(1, "mine"), other]);
    let mut r = run(&body);
    assert!(!r.task.is_terminal());
    assert_eq!(r.task.status(), &ResponseStatus::InProgress);
    assert_eq!(r.task.text(), "mine");
    assert_eq!(r.task.response_id(), Some("resp_1"));
    assert!(r.task.findings().iter().any(|f| matches!(
        f,
        ProtocolFinding::ResponseIdMismatch { expected, got } if expected == "resp_1" && got == "resp_OTHER"
    )));

    // The stored response of another task is not this task's either.
    let mut stored: harness_uhp::Response =
        serde_json::from_value(response("completed", "evil")).unwrap();
    stored.id = "resp_OTHER".into();
    r.task.apply_response(&stored);
    assert!(!r.task.is_terminal());
    assert_eq!(r.task.text(), "mine");

    // Its own terminal event still ends it; one without an id (sloppy, not another task's)
    // is taken as this task's.
    let mut own = terminal("response.completed", 3, "completed", "mine, all of it");
    own["response"]["id"] = json!("");
    let mut body = body.clone();
    body.extend(sse(&[own]));
    let r = run(&body);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "mine, all of it");
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
