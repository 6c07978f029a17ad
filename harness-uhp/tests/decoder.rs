//! The stream decoder: the official conformance suite's framing cases, and the findings for
//! payloads that are not UHP events. Spec quotes are from research/uhp.md §2 (the streaming
//! chapter and the conformance suite's reader) unless marked otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{run, run_chunked};
use harness_core::sse::SseError;
use harness_uhp::{EventType, Finding, StreamDecoder, StreamEventKind};
use serde_json::Value;

fn framing_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance_framing")
}

fn types(r: &common::Run) -> Vec<String> {
    r.events.iter().map(|e| e.type_name().to_owned()).collect()
}

/// "Decoding follows WHATWG SSE: CRLF/LF/CR line ends …, data lines joined by LF, exactly one
/// leading space stripped … ignores non-object JSON ([DONE], [1,2]), ignores event:/id:/retry:/
/// comments, and does not dispatch an event lacking its blank line at EOF."
#[test]
fn conformance_framing_cases() {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(framing_dir().join("EXPECTED.json")).unwrap())
            .unwrap();
    let mut n = 0;
    for (file, want) in expected.as_object().unwrap() {
        if file.starts_with('_') {
            continue;
        }
        let body = std::fs::read(framing_dir().join(file)).unwrap();
        let want: Vec<String> = serde_json::from_value(want.clone()).unwrap();
        for sizes in [vec![usize::MAX], vec![1], vec![2], vec![7], vec![3, 11]] {
            assert_eq!(types(&run_chunked(&body, &sizes)), want, "{file} {sizes:?}");
        }
        n += 1;
    }
    assert_eq!(n, 6);
}

/// "holds a trailing CR until more bytes arrive": a CRLF split across reads is one line end.
#[test]
fn crlf_split_across_reads() {
    let case: Value = serde_json::from_slice(
        &std::fs::read(framing_dir().join("crlf_split_across_reads.chunks.json")).unwrap(),
    )
    .unwrap();
    let mut dec = StreamDecoder::new();
    let mut got = Vec::new();
    for hex in case["chunks_hex"].as_array().unwrap() {
        dec.push(&decode_hex(hex.as_str().unwrap()));
        while let Some(ev) = dec.poll_event().unwrap() {
            got.push(ev.type_name().to_owned());
        }
    }
    assert_eq!(got, ["a", "b"]);
    assert_eq!(dec.buffered_bytes(), 0);
    dec.finish().unwrap();
}

/// The suite's trailing-CR case: `data: {…}\r\r` — the second CR is a blank line.
#[test]
fn trailing_cr_is_a_blank_line() {
    let case: Value = serde_json::from_slice(
        &std::fs::read(framing_dir().join("trailing_cr.chunks.json")).unwrap(),
    )
    .unwrap();
    let body = decode_hex(case["chunks_hex"][0].as_str().unwrap());
    let r = run(&body);
    assert_eq!(types(&r), ["a"]);
}

fn decode_hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// "Each event = one SSE message whose data is one JSON object": anything else is a typed
/// finding for that message, and the stream goes on.
#[test]
fn bad_payloads_are_findings_and_the_stream_goes_on() {
    let body = concat!(
        "data: [DONE]\n\n",
        "data: [1, 2]\n\n",
        "data: 42\n\n",
        "data: \"text\"\n\n",
        "data: {not json\n\n",
        "data: {\"sequence_number\": 3}\n\n",
        "data: {\"type\": 7, \"sequence_number\": 4}\n\n",
        "data: {\"type\": \"response.output_text.delta\", \"sequence_number\": 5, \"delta\": 9}\n\n",
        "data: {\"type\": \"response.completed\", \"sequence_number\": 6}\n\n",
        "data: {\"type\": \"response.output_text.delta\", \"sequence_number\": 7, \"delta\": \"ok\"}\n\n",
    );
    let r = run(body.as_bytes());
    assert_eq!(
        types(&r),
        ["response.completed", "response.output_text.delta"]
    );
    assert!(matches!(r.findings[0], Finding::DoneSentinel));
    assert!(matches!(r.findings[1], Finding::NotObject { .. }));
    assert!(matches!(r.findings[2], Finding::NotObject { .. }));
    assert!(matches!(r.findings[3], Finding::NotObject { .. }));
    assert!(matches!(r.findings[4], Finding::NotJson { .. }));
    assert_eq!(
        r.findings[5],
        Finding::MissingType {
            sequence_number: Some(3)
        }
    );
    assert_eq!(
        r.findings[6],
        Finding::MissingType {
            sequence_number: Some(4)
        }
    );
    // A known type with a field of the wrong JSON type; the finding keeps its number.
    match &r.findings[7] {
        Finding::InvalidEvent {
            event_type,
            sequence_number,
            ..
        } => {
            assert_eq!(
                (event_type.as_str(), *sequence_number),
                ("response.output_text.delta", Some(5))
            );
        }
        f => panic!("{f:?}"),
    }
    assert_eq!(r.findings.len(), 8);
    // A terminal event without its response object is an event, but it cannot end the task
    // (the stored response is the source of truth).
    assert_eq!(
        r.events[0].kind(),
        StreamEventKind::MissingField {
            event_type: "response.completed",
            field: "response"
        }
    );
    assert!(!r.task.is_terminal());
    assert!(r.task.findings().iter().any(|f| matches!(
        f,
        harness_uhp::ProtocolFinding::MissingField {
            field: "response",
            ..
        }
    )));
    // The unusable events arrived: their numbers are not reported missing.
    assert_eq!(r.task.sequence().missing, vec![0..=2]);
}

/// "Unknown event types and item types MUST be tolerated": kept, with their raw JSON.
#[test]
fn unknown_event_types_are_kept_with_their_raw_json() {
    let raw = r#"{"type":"response.future_thing","sequence_number":0,"response":"not an object","x":[1,{"y":2}]}"#;
    let r = run(format!("data: {raw}\n\n").as_bytes());
    assert!(r.findings.is_empty());
    let ev = &r.events[0];
    assert_eq!(ev.event_type(), EventType::Unknown);
    assert_eq!(
        ev.kind(),
        StreamEventKind::Unknown {
            event_type: "response.future_thing"
        }
    );
    assert_eq!(ev.raw_json(), raw);
    assert_eq!(ev.sequence_number(), Some(0));
}

/// Unknown fields of known events are kept in the raw JSON; unknown item types decode to
/// `Other` with their fields.
#[test]
fn unknown_fields_and_item_types_are_kept() {
    let raw = r#"{"type":"response.output_item.done","sequence_number":3,"output_index":2,"vendor":true,"item":{"type":"web_search_call","id":"ws_1","query":"uhp"}}"#;
    let r = run(format!("data: {raw}\n\n").as_bytes());
    let ev = &r.events[0];
    assert_eq!(ev.raw_json(), raw);
    match ev.kind() {
        StreamEventKind::OutputItemDone {
            output_index: Some(2),
            item,
        } => {
            assert_eq!(item.item_type(), "web_search_call");
            assert_eq!(item.id(), Some("ws_1"));
            let back = serde_json::to_value(item).unwrap();
            assert_eq!(
                back,
                serde_json::json!({"type":"web_search_call","id":"ws_1","query":"uhp"})
            );
        }
        k => panic!("{k:?}"),
    }
}

/// An object whose `type` is not its first key decodes the same (slow path).
#[test]
fn type_need_not_be_the_first_key() {
    let a = r#"{"type":"response.output_item.done","sequence_number":1,"item":{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}}"#;
    let b = r#"{"item":{"name":"n","arguments":"{}","call_id":"c","type":"function_call"},"sequence_number":1,"type":"response.output_item.done"}"#;
    let ra = run(format!("data: {a}\n\n").as_bytes());
    let rb = run(format!("data: {b}\n\n").as_bytes());
    assert_eq!(ra.events[0].kind(), rb.events[0].kind());
}

/// Escaped strings are unescaped; `sequence_number: true` is not the integer 1.
#[test]
fn escapes_and_invalid_sequence_numbers() {
    let body = "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":true,\"delta\":\"a\\\"b\\n\\u00e9\\ud83d\\ude80\"}\n\n";
    let r = run(body.as_bytes());
    let ev = &r.events[0];
    assert_eq!(ev.delta(), Some("a\"b\né🚀"));
    assert_eq!(ev.sequence_number(), None);
    assert!(ev.has_invalid_sequence_number());
    assert_eq!(r.task.sequence().unnumbered, 1);
    assert!(!r.task.sequence().ok);
}

/// "an event lacking its blank line at EOF" is not dispatched, and finish() reports it.
#[test]
fn unterminated_final_event_is_reported_not_dispatched() {
    let body = "data: {\"type\":\"a\",\"sequence_number\":0}\n\ndata: {\"type\":\"b\",\"sequence_number\":1}\n";
    let r = run(body.as_bytes());
    assert_eq!(types(&r), ["a"]);
    assert!(matches!(
        r.findings[..],
        [Finding::Sse(SseError::IncompleteEvent { .. })]
    ));
}

/// "decodes UTF-8 per event (never per chunk)": a character split across pushes is whole.
#[test]
fn utf8_split_across_pushes() {
    let body = "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":0,\"delta\":\"café 東京 🚀\"}\n\n";
    for size in 1..8 {
        let r = run_chunked(body.as_bytes(), &[size]);
        assert_eq!(r.events[0].delta(), Some("café 東京 🚀"), "chunk {size}");
    }
}

/// A BOM at stream start is skipped (the peer loses `response.created`).
#[test]
fn bom_at_start() {
    let body = "\u{feff}data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n";
    let r = run(body.as_bytes());
    assert_eq!(types(&r), ["response.created"]);
}

/// Exactly one leading space is removed from a field value, not every space and tab.
#[test]
fn exactly_one_leading_space_is_stripped() {
    let body = "data:  {\"type\":\"x\",\"sequence_number\":0}\n\ndata:\t{\"type\":\"y\",\"sequence_number\":1}\n\n";
    let r = run(body.as_bytes());
    // JSON allows leading whitespace, so both decode; the raw text shows what was kept.
    assert_eq!(
        r.events[0].raw_json(),
        " {\"type\":\"x\",\"sequence_number\":0}"
    );
    assert_eq!(
        r.events[1].raw_json(),
        "\t{\"type\":\"y\",\"sequence_number\":1}"
    );
}

/// Over-long events are findings (bounded memory), and the next event still decodes.
#[test]
fn limits_are_findings() {
    let cfg = harness_core::sse::SseConfig {
        max_line_bytes: 64,
        max_event_bytes: 64,
    };
    let mut dec = StreamDecoder::with_config(cfg);
    let long = "x".repeat(100);
    dec.push(
        format!("data: {{\"type\":\"a\",\"delta\":\"{long}\"}}\n\ndata: {{\"type\":\"b\"}}\n\n")
            .as_bytes(),
    );
    assert!(matches!(
        dec.poll_event(),
        Err(Finding::Sse(SseError::LineTooLong { .. }))
    ));
    assert_eq!(dec.poll_event().unwrap().unwrap().type_name(), "b");
}

/// The SSE `id:` is the last event ID to resume with.
#[test]
fn last_event_id() {
    let mut dec = StreamDecoder::new();
    dec.push(b"id: 41\ndata: {\"type\":\"a\",\"sequence_number\":41}\n\n");
    dec.poll_event().unwrap().unwrap();
    assert_eq!(dec.last_event_id(), Some("41"));
}

/// Every known type has a wire name that maps back to it.
#[test]
fn event_type_names_round_trip() {
    for (t, name) in EventType::ALL {
        assert_eq!(EventType::from_wire(name), *t);
        assert_eq!(t.wire_name(), Some(*name));
    }
    assert_eq!(
        EventType::from_wire("response.cancelled"),
        EventType::Unknown
    );
    assert!(EventType::Failed.is_terminal() && !EventType::Error.is_terminal());
}

/// The schema types `delta`, `item_id` and the indices as string / integer: `null` there is a
/// schema violation (a finding that keeps the number), while `param` may be null.
#[test]
fn null_where_the_schema_says_string() {
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":0,\"delta\":null}\n\n",
        "data: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"x\",\"message\":\"m\",\"param\":null}\n\n",
    );
    let r = run(body.as_bytes());
    assert!(matches!(
        &r.findings[..],
        [Finding::InvalidEvent {
            sequence_number: Some(0),
            ..
        }]
    ));
    assert_eq!(
        r.events[0].kind(),
        StreamEventKind::Error {
            code: Some("x"),
            message: Some("m"),
            param: None
        }
    );
    assert_eq!(r.task.sequence().missing, vec![]);
}

/// `drain_decoder` is the whole run loop when only the task matters.
#[test]
fn drain_decoder_accumulates() {
    let mut b = harness_uhp::builder::StreamBuilder::new("resp_1");
    b.created().message(&["a", "b"], &[]).completed();
    let mut dec = StreamDecoder::new();
    let mut task = harness_uhp::TaskAccumulator::new();
    dec.push(&b.to_sse());
    dec.push(b"data: [DONE]\n\n");
    task.drain_decoder(&mut dec);
    assert_eq!(task.text(), "ab");
    assert!(task.is_terminal());
    assert_eq!(task.findings().len(), 1);
}

/// Issue 16: a lent event's text is the fed bytes themselves, not a copy, for a flat event
/// and for one with nested objects alike; a finding on the lent path is the owned path's.
#[test]
fn a_lent_event_borrows_its_text_from_the_fed_bytes() {
    let body = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"a\\\"b\"}\n\n",
        "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
        "data: [DONE]\n\n",
    )
    .as_bytes();
    let within = |s: &str| {
        let (lo, hi) = (body.as_ptr() as usize, body.as_ptr() as usize + body.len());
        (lo..hi).contains(&(s.as_ptr() as usize))
    };
    let mut dec = StreamDecoder::new();
    let mut feed = dec.feed(body);
    let ev = feed.next_ref().unwrap().unwrap();
    assert!(within(ev.raw_json()));
    assert_eq!(ev.delta(), Some("a\"b")); // unescaped (a copy: it differs from the bytes)
    let ev = feed.next_ref().unwrap().unwrap();
    assert!(within(ev.raw_json()));
    assert!(matches!(ev.kind(), StreamEventKind::Created(r) if r.id == "r"));
    assert_eq!(feed.next_ref().unwrap().unwrap_err(), Finding::DoneSentinel);
    assert!(feed.next_ref().is_none());
}
