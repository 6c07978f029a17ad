//! Frames, the catalog and the transports against the words and examples of the spec
//! (tanstack-harness-wire-protocol.md, version 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

use harness_core::Cursor;
use harness_tanstack::Json;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::{self, HarnessEvent};
use harness_tanstack::frame::*;
use harness_tanstack::transport::*;

#[test]
fn the_spec_sse_example_decodes_and_reencodes_byte_for_byte() {
    // "It shows the hello frame, then one SSE event per session event, and a ping comment"
    let wire = "data: {\"type\":\"harness.hello\",\"v\":2,\"threadId\":\"thread-1\"}\n\nid: 4\ndata: {\"type\":\"harness.event\",\"cursor\":\"4\",\"threadId\":\"thread-1\",\"operationId\":\"op-1\",\"event\":{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m-1\",\"delta\":\"Hi\"}}\n\n: ping\n\n";
    let mut dec = SseFrameDecoder::new();
    dec.push(wire.as_bytes());
    let mut frames = Vec::new();
    while let Some(f) = dec.poll_frame().unwrap() {
        frames.push(f);
    }
    assert_eq!(frames.len(), 2);
    assert_eq!(dec.last_event_id(), Some("4"));
    let HostFrame::Event(ev) = &frames[1] else {
        panic!()
    };
    // "On SSE, the `id` of each event is the same cursor."
    assert_eq!(ev.cursor, Cursor::new("4"));
    assert_eq!(ev.thread_id, "thread-1");
    let mut out = Vec::new();
    for f in &frames {
        sse_encode(&mut out, f);
    }
    sse_encode(&mut out, &HostFrame::Ping(Ping::default()));
    assert_eq!(String::from_utf8(out).unwrap(), wire);
}

#[test]
fn unknown_frame_types_are_kept_not_errors() {
    // "Ignore a frame with a `type` that you do not know. A later version of the server can add frames."
    let f = HostFrame::from_json(r#"{"type":"harness.future","x":[1]}"#).unwrap();
    assert_eq!(f.tag(), "harness.future");
    assert_eq!(f.to_json(), r#"{"type":"harness.future","x":[1]}"#);
    let c = ClientFrame::from_json(r#"{"type":"harness.later","y":true}"#).unwrap();
    assert!(matches!(c, ClientFrame::Unknown(_)));
}

#[test]
fn a_subscribe_with_from_null_starts_without_a_cursor() {
    // `harness.subscribe`: "`threadId`, `from?`, `v?`": `from` is optional, and a JavaScript
    // client with no cursor yet may send `from: null` (JSON.stringify keeps null, drops only
    // undefined). It means no cursor, as an absent `from` does; a wrong type is still refused.
    let c = ClientFrame::from_json(
        r#"{"type":"harness.subscribe","threadId":"thread-1","from":null,"v":2}"#,
    )
    .unwrap();
    let ClientFrame::Subscribe(s) = c else {
        panic!("{c:?}")
    };
    assert_eq!(s.from, None);
    assert_eq!(s.v, Some(2));
    let c = ClientFrame::from_json(r#"{"type":"harness.subscribe","threadId":"t","from":"12"}"#)
        .unwrap();
    let ClientFrame::Subscribe(s) = c else {
        panic!("{c:?}")
    };
    assert_eq!(s.from, Some(Cursor::new("12")));
    assert!(
        ClientFrame::from_json(r#"{"type":"harness.subscribe","threadId":"t","from":[1]}"#)
            .is_err()
    );
}

#[test]
fn an_unknown_input_op_is_a_bad_input_and_keeps_its_request_id() {
    // invalid_frame: "has an unknown `type` or a bad `input`"
    let e = ClientFrame::from_json(
        r#"{"type":"harness.input","requestId":"req-9","input":{"op":"teleport"}}"#,
    )
    .unwrap_err();
    assert_eq!(e.request_id.as_deref(), Some("req-9"));
    assert!(e.message.contains("teleport"));
    assert!(ClientFrame::from_json("not json").is_err());
}

#[test]
fn every_input_op_of_the_spec_and_the_v1_source_decodes() {
    // "`input` is one of the ops of Send inputs to a session, for example `{ op: 'prompt', message }` or `{ op: 'cancel', operationId }`"
    let ops = [
        r#"{"op":"prompt","message":"Hello","inputId":"in-1"}"#,
        r#"{"op":"steer","message":"faster"}"#,
        r#"{"op":"followUp","message":"and then?"}"#,
        r#"{"op":"cancel","operationId":"op-1"}"#,
        r#"{"op":"answer","questionId":"q-1","value":"yes"}"#,
        r#"{"op":"command","command":"compact","inputId":"c-1"}"#,
        r#"{"op":"agent","agent":"helper","input":{"x":1},"detached":true}"#,
        r#"{"op":"append","message":"note","inputId":"a-1"}"#,
        r#"{"op":"setDelivery","inputId":"in-2","delivery":"steer"}"#,
        r#"{"op":"cancelInput","inputId":"in-2"}"#,
        r#"{"op":"continue","ephemeral":true}"#,
        r#"{"op":"resolve","resume":[{"interruptId":"i","status":"resolved"}]}"#,
        r#"{"op":"background","toolCallId":"tc-1"}"#,
        r#"{"op":"agentMessage","operationId":"op-2","message":"hi","mode":"steer"}"#,
        r#"{"op":"configure","settings":{"a":1}}"#,
        r#"{"op":"reset","note":"fresh"}"#,
    ];
    for op in ops {
        let input: Input = serde_json::from_str(op).unwrap_or_else(|e| panic!("{op}: {e}"));
        // Unknown keys (`settings`) are kept: the input re-encodes to the same JSON.
        let back: serde_json::Value = serde_json::to_value(&input).unwrap();
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(op).unwrap(),
            "{op}"
        );
    }
    // "A `prompt`, `command`, `agent`, or `append` input with the same `inputId` runs once."
    let idem: Vec<bool> = ops
        .iter()
        .map(|o| serde_json::from_str::<Input>(o).unwrap().is_idempotent())
        .collect();
    assert_eq!(idem.iter().filter(|b| **b).count(), 4);
}

#[test]
fn the_spec_error_example_reads() {
    let text = r#"{"type":"harness.error","message":"Protocol version 3 is not supported. This host speaks version 2.","code":"unsupported_version","requestId":"req-1"}"#;
    let f = HostFrame::from_json(text).unwrap();
    let HostFrame::Error(e) = &f else { panic!() };
    assert_eq!(e.code, Some(ErrorCode::UnsupportedVersion));
    assert_eq!(f.to_json(), text);
}

#[test]
fn the_spec_gap_example_reads_as_a_typed_gap() {
    let text = r#"{"type":"harness.event","cursor":"120","threadId":"thread-1","operationId":"session","event":{"type":"CUSTOM","name":"harness.gap","value":{"from":"12","resumeAt":"120","reason":"truncated"}}}"#;
    let HostFrame::Event(f) = HostFrame::from_json(text).unwrap() else {
        panic!()
    };
    let Some(Ok(HarnessEvent::Gap(g))) = HarnessEvent::from_event(&f.event) else {
        panic!()
    };
    assert_eq!(g.from, Cursor::new("12"));
    assert_eq!(g.resume_at, Cursor::new("120"));
    assert_eq!(g.reason, catalog::GapReason::Truncated);
}

#[test]
fn every_catalog_name_round_trips_and_unknown_names_are_kept() {
    let samples: &[(&str, &str)] = &[
        (
            "harness.operation.started",
            r#"{"operationId":"op-1","kind":"chat"}"#,
        ),
        (
            "harness.operation.finished",
            r#"{"operationId":"op-1","status":"cancelled"}"#,
        ),
        (
            "harness.operation.resumed",
            r#"{"operationId":"op-1","resumedFrom":"h-2"}"#,
        ),
        (
            "harness.turn.retry",
            r#"{"operationId":"op-1","retries":2,"error":{"message":"busy","code":"429","retryAfterMs":500},"continued":true}"#,
        ),
        (
            "harness.handoff",
            r#"{"from":null,"to":{"human":true},"runId":"op-1","by":"tool","waitId":"w-1"}"#,
        ),
        (
            "harness.usage",
            r#"{"model":"m","usage":{"inputTokens":1},"total":{"inputTokens":9}}"#,
        ),
        (
            "harness.input.accepted",
            r#"{"inputId":"in-1","op":"prompt","message":"Hello"}"#,
        ),
        (
            "harness.input.queued",
            r#"{"inputId":"in-1","delivery":"queue"}"#,
        ),
        (
            "harness.input.applied",
            r#"{"inputId":"in-1","operationId":"op-1"}"#,
        ),
        (
            "harness.input.rejected",
            r#"{"inputId":"in-1","reason":"not_running"}"#,
        ),
        (
            "harness.input.settled",
            r#"{"inputId":"in-1","outcome":"failed","error":{"message":"x"}}"#,
        ),
        (
            "harness.input.delivery",
            r#"{"inputId":"in-1","delivery":"steer"}"#,
        ),
        (
            "harness.wait.opened",
            r#"{"waitId":"w","kind":"sign-in","runId":"op","expiresAt":1700000000000}"#,
        ),
        (
            "harness.wait.settled",
            r#"{"waitId":"w","outcome":"expired"}"#,
        ),
        (
            "harness.question",
            r#"{"questionId":"q","message":"Which?","secret":false}"#,
        ),
        ("harness.question.answered", r#"{"questionId":"q"}"#),
        (
            "harness.auth_required",
            r#"{"connector":"github","url":"https://x","userCode":"AB-12"}"#,
        ),
        ("harness.config.changed", r#"{"key":"model","value":"m2"}"#),
        ("harness.settings.changed", r#"{"settings":{"a":1}}"#),
        ("harness.commands.changed", r#"{}"#),
        ("harness.reloaded", r#"{"error":"boom"}"#),
        ("harness.reset", r#"{"inputId":"in-3","note":"fresh"}"#),
        ("harness.revert", r#"{"messageId":null}"#),
        (
            "harness.media",
            r#"{"id":"md","threadId":"t","kind":"image","mimeType":"image/png","name":"a.png","size":3,"createdAt":1,"source":"upload"}"#,
        ),
        (
            "harness.plugin.event",
            r#"{"plugin":"p","name":"n","value":[1]}"#,
        ),
        (
            "harness.plugin.warning",
            r#"{"plugin":"p","message":"hook failed"}"#,
        ),
        (
            "harness.ownership.changed",
            r#"{"epoch":3,"reason":"taken_over"}"#,
        ),
        ("harness.stranded", r#"{"operationId":"op-1"}"#),
        (
            "harness.transferred",
            r#"{"transferId":"x","from":{"threadId":"t0"}}"#,
        ),
        (
            "harness.gap",
            r#"{"from":"12","resumeAt":"120","reason":"evicted"}"#,
        ),
    ];
    assert_eq!(samples.len(), catalog::NAMES.len());
    for (name, value) in samples {
        let value_json = Json::from_text(value).unwrap();
        let h = HarnessEvent::from_custom(name, &value_json).unwrap();
        assert!(!matches!(h, HarnessEvent::Unknown { .. }), "{name}");
        assert_eq!(h.name(), *name);
        let ev = h.to_event();
        let AguiEvent::Custom(c) = &ev else { panic!() };
        assert_eq!(c.value.get(), *value, "{name}");
    }
    // "Ignore a name that you do not know. A later version can add names."
    let h = HarnessEvent::from_custom("harness.someday", &Json::from_text("[1]").unwrap()).unwrap();
    assert!(matches!(h, HarnessEvent::Unknown { .. }));
}

#[test]
fn ndjson_transport_reads_frames_line_by_line() {
    let mut out = Vec::new();
    ndjson_encode(
        &mut out,
        &ClientFrame::Subscribe(Subscribe {
            thread_id: "thread-1".into(),
            v: Some(2),
            ..Subscribe::default()
        }),
    );
    out.extend_from_slice(b"{oops}\n");
    ndjson_encode(&mut out, &ClientFrame::Snapshot(SnapshotRequest::default()));
    let mut dec = NdjsonFrameDecoder::new();
    dec.push(&out);
    assert!(matches!(
        dec.poll_client_frame().unwrap(),
        Some(ClientFrame::Subscribe(_))
    ));
    assert!(dec.poll_client_frame().is_err());
    assert!(matches!(
        dec.poll_client_frame().unwrap(),
        Some(ClientFrame::Snapshot(_))
    ));
    assert_eq!(dec.poll_client_frame().unwrap(), None);
}

/// Frames are read in place (no large value moved through the layers of serde). What that
/// must not change: a key given twice counts once, the last one whole; keys may come
/// before `type`; a required key that is missing is an error even where the slot it is read
/// into already holds a value of that type; and a decoder that reads frame after frame
/// starts each one from nothing.
#[test]
fn frames_read_in_place_read_like_values() {
    let tmc = |id: &str, delta: &str| {
        let mut c = harness_tanstack::agui::TextMessageContent::default();
        c.message_id = id.into();
        c.delta = delta.into();
        AguiEvent::TextMessageContent(c)
    };
    let twice = r#"{"type":"harness.event","cursor":"1","threadId":"t","operationId":"o","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"x","subagentRunId":"s","zz":1},"event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"b","delta":"y"}}"#;
    let HostFrame::Event(f) = HostFrame::from_json(twice).unwrap() else {
        panic!()
    };
    assert_eq!(f.event, tmc("b", "y"));
    let late = r#"{"event":{"delta":"x","messageId":"m","type":"TEXT_MESSAGE_CONTENT"},"cursor":"1","threadId":"t","operationId":"o","type":"harness.event"}"#;
    let HostFrame::Event(f) = HostFrame::from_json(late).unwrap() else {
        panic!()
    };
    assert_eq!((f.cursor.as_str(), f.event), ("1", tmc("m", "x")));
    // `CUSTOM` is the default event, and `value` is required all the same.
    assert!(AguiEvent::from_json(r#"{"type":"CUSTOM","name":"x"}"#).is_err());
    assert!(
        HostFrame::from_json(
            r#"{"type":"harness.event","cursor":"1","threadId":"t","operationId":"o"}"#
        )
        .is_err()
    );
    // Frame after frame, of every kind, each from nothing.
    let frames = [
        r#"{"type":"harness.event","cursor":"1","threadId":"t","operationId":"o","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"s","k":1},"k":2}"#,
        r#"{"type":"harness.event","cursor":"2","threadId":"t","operationId":"o","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"y"}}"#,
        r#"{"type":"harness.hello","v":2}"#,
        r#"{"type":"harness.event","cursor":"3","threadId":"t","operationId":"o","event":{"type":"NEW_THING","a":1}}"#,
        r#"{"type":"harness.later","x":1}"#,
        r#"{"type":"harness.event","cursor":"4","threadId":"t","operationId":"o","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}}"#,
        r#"{"type":"harness.event","cursor":"5","threadId":"t","operationId":"o","event":{"type":"CUSTOM","name":"n","value":null}}"#,
        r#"{"type":"harness.error","message":"m","code":"internal","requestId":"r"}"#,
    ];
    let mut wire = String::new();
    for f in frames {
        wire.push_str(&format!("data: {f}\n\n"));
    }
    let mut dec = SseFrameDecoder::new();
    dec.push(wire.as_bytes());
    for f in frames {
        let got = dec.poll_frame();
        match serde_json::from_str::<HostFrame>(f) {
            Ok(want) => {
                let got = got.unwrap().unwrap();
                assert_eq!(got, want, "{f}");
                // And each is what it says, re-encoded.
                let v = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
                assert_eq!(v(&got.to_json()), v(f), "{f}");
            }
            Err(_) => assert!(got.is_err(), "{f}"),
        }
    }
    assert_eq!(dec.poll_frame().unwrap(), None);
}
