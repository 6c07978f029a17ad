//! The log's per-event writers hold to the serde forms they replace: an AG-UI event written
//! into its record (`AguiEvent::write_json`, direct for a bare `TEXT_MESSAGE_CONTENT` or
//! `TOOL_CALL_ARGS`) is its `to_json`, and a record (`LogRecord::render`) is the
//! `harness.event` frame of spec tanstack-harness.md ("`harness.event` … `cursor`,
//! `threadId`, `operationId`, `event`") around it, as SSE (`id: <cursor>`), a WebSocket text
//! and an NDJSON line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::log::LogRecord;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,12}",
        any::<String>(),
        Just("line\nbreak \"q\" \\ / \u{1}\u{7f}\u{2028} \u{1f600}".to_string()),
    ]
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A `TEXT_MESSAGE_CONTENT` or `TOOL_CALL_ARGS` as a peer may send it: its required members,
/// and any of its optional ones and an unknown key (which take the serde path), in any order
/// of those present.
fn streamed_event() -> impl Strategy<Value = AguiEvent> {
    (
        any::<bool>(),
        text(),
        text(),
        prop::option::of(0i64..(1 << 53)),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(text()),
        any::<bool>(),
    )
        .prop_map(|(args, id, delta, ts, sub, raw, extra, id_last)| {
            let (ty, key) = if args {
                ("TOOL_CALL_ARGS", "toolCallId")
            } else {
                ("TEXT_MESSAGE_CONTENT", "messageId")
            };
            let mut members = vec![format!("\"delta\":{}", json(&delta))];
            let idm = format!("\"{key}\":{}", json(&id));
            if id_last {
                members.push(idm);
            } else {
                members.insert(0, idm);
            }
            if let Some(ts) = ts {
                members.push(format!("\"timestamp\":{ts}"));
            }
            if let Some(s) = sub {
                members.push(format!("\"subagentRunId\":{}", json(&s)));
            }
            if let Some(r) = raw {
                members.push(format!("\"rawEvent\":{{\"r\":{}}}", json(&r)));
            }
            if let Some(x) = extra {
                members.push(format!("\"x-extra\":{}", json(&x)));
            }
            let text = format!("{{\"type\":\"{ty}\",{}}}", members.join(","));
            AguiEvent::from_json(&text).unwrap()
        })
}

fn event() -> impl Strategy<Value = AguiEvent> {
    prop_oneof![
        4 => streamed_event(),
        1 => (text(), text()).prop_map(|(m, d)| AguiEvent::text_content(m, d)),
        1 => (text(), text())
            .prop_map(|(n, v)| AguiEvent::custom(n, harness_tanstack::Json::string(&v))),
        1 => text().prop_map(|s| AguiEvent::from_json(&format!(
            r#"{{"type":"RUN_STARTED","threadId":{},"runId":"r"}}"#,
            json(&s)
        ))
        .unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An event written into a buffer (after what is there) is its serde JSON.
    #[test]
    fn write_json_is_to_json(ev in event(), before in "[a-z]{0,4}") {
        let mut out = before.clone().into_bytes();
        ev.write_json(&mut out);
        prop_assert_eq!(&out[..before.len()], before.as_bytes());
        prop_assert_eq!(std::str::from_utf8(&out[before.len()..]).unwrap(), ev.to_json());
    }

    /// A record is the `harness.event` frame of its event: SSE with its cursor, the frame
    /// alone (WebSocket), the frame and a LF (NDJSON), the event alone (`POST run`).
    #[test]
    fn a_record_is_its_frame(ev in event(), thread in text(), op in text(), seq in any::<u64>()) {
        let rec = LogRecord::render(&thread, seq, &op, &ev);
        let frame = format!(
            r#"{{"type":"harness.event","cursor":"{seq}","threadId":{},"operationId":{},"event":{}}}"#,
            json(&thread),
            json(&op),
            ev.to_json()
        );
        let (sse, ndjson, event) = (format!("id: {seq}\ndata: {frame}\n\n"), format!("{frame}\n"), ev.to_json());
        prop_assert_eq!(&rec.sse()[..], sse.as_bytes());
        prop_assert_eq!(&rec.json()[..], frame.as_bytes());
        prop_assert_eq!(&rec.ndjson()[..], ndjson.as_bytes());
        prop_assert_eq!(&rec.event_json()[..], event.as_bytes());
        prop_assert_eq!(rec.seq, seq);
        prop_assert_eq!(&*rec.operation_id, op.as_str());
        prop_assert_eq!(rec.event().unwrap(), ev);
    }
}
