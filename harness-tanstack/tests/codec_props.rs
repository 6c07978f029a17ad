//! Property tests of the codecs: any chunking of the same bytes gives the same frames,
//! encode → decode round-trips, and arbitrary bytes never panic a decoder.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

use harness_core::Cursor;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::frame::*;
use harness_tanstack::transport::*;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,12}",
        any::<String>(),
        Just("line\nbreak \"q\" \\ \u{2603}".to_string()),
    ]
}

fn event() -> impl Strategy<Value = AguiEvent> {
    prop_oneof![
        (text(), text()).prop_map(|(m, d)| AguiEvent::text_content(m, d)),
        (text(), text())
            .prop_map(|(n, v)| AguiEvent::custom(n, harness_tanstack::Json::string(&v))),
        text().prop_map(|s| AguiEvent::from_json(&format!(
            r#"{{"type":"RUN_STARTED","threadId":{},"runId":"r","parentRunId":"p"}}"#,
            serde_json::to_string(&s).unwrap()
        ))
        .unwrap()),
    ]
}

fn host_frame() -> impl Strategy<Value = HostFrame> {
    prop_oneof![
        (text(), text(), text(), event()).prop_map(|(c, t, o, e)| HostFrame::Event(EventFrame {
            cursor: Cursor::new(c),
            thread_id: t,
            operation_id: o,
            event: e,
            ..EventFrame::default()
        })),
        text().prop_map(|t| HostFrame::Hello(Hello {
            v: Some(2),
            thread_id: Some(t),
            ..Hello::default()
        })),
        (text(), text()).prop_map(|(r, m)| HostFrame::error(ErrorCode::InvalidFrame, m, r)),
        text().prop_map(|r| HostFrame::Receipt(ReceiptFrame {
            request_id: r,
            status: ReceiptStatus::Queued,
            input_id: Some("in".into()),
            ..ReceiptFrame::default()
        })),
        Just(HostFrame::Ping(Ping::default())),
    ]
}

fn decode_all(wire: &[u8], cuts: &[usize]) -> Vec<String> {
    let mut dec = SseFrameDecoder::new();
    let mut out = Vec::new();
    let mut last = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    points.sort_unstable();
    points.push(wire.len());
    for p in points {
        dec.push(&wire[last..p.max(last)]);
        last = p.max(last);
        loop {
            match dec.poll_frame() {
                Ok(Some(f)) => out.push(f.to_json()),
                Ok(None) => break,
                Err(e) => out.push(format!("error {e}")),
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn sse_chunking_never_changes_the_frames(frames in prop::collection::vec(host_frame(), 1..8), cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let mut wire = Vec::new();
        for f in &frames {
            sse_encode(&mut wire, f);
        }
        let whole = decode_all(&wire, &[]);
        prop_assert_eq!(&whole, &decode_all(&wire, &cuts));
        // encode → decode round-trips (a ping is a comment, no frame)
        let expect: Vec<String> = frames.iter().filter(|f| !matches!(f, HostFrame::Ping(_))).map(|f| f.to_json()).collect();
        prop_assert_eq!(whole, expect);
    }

    #[test]
    fn ndjson_round_trips_any_chunking(frames in prop::collection::vec(host_frame(), 1..8), cut in any::<usize>()) {
        let mut wire = Vec::new();
        for f in &frames {
            ndjson_encode(&mut wire, f);
        }
        let cut = cut % (wire.len() + 1);
        let mut dec = NdjsonFrameDecoder::new();
        dec.push(&wire[..cut]);
        let mut got = Vec::new();
        while let Some(f) = dec.poll_host_frame().unwrap() { got.push(f); }
        dec.push(&wire[cut..]);
        while let Some(f) = dec.poll_host_frame().unwrap() { got.push(f); }
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn frame_json_round_trips(f in host_frame()) {
        let json = f.to_json();
        prop_assert_eq!(HostFrame::from_json(&json).unwrap(), f);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_all(&bytes, &[7, 100]);
        let text = String::from_utf8_lossy(&bytes);
        let _ = HostFrame::from_json(&text);
        let _ = ClientFrame::from_json(&text);
        let _ = AguiEvent::from_json(&text);
        let mut nd = NdjsonFrameDecoder::new();
        nd.push(&bytes);
        nd.finish();
        while let Ok(Some(_)) | Err(_) = nd.poll_client_frame().map(|f| f.map(|_| ())) {
            if nd.poll_line().map(|l| l.is_none()).unwrap_or(false) { break; }
        }
    }

    #[test]
    fn json_shaped_garbage_never_panics(keys in prop::collection::vec(("[a-zA-Z]{1,12}", prop_oneof![Just("null".to_string()), Just("1.5".to_string()), Just("\"x\"".to_string()), Just("[]".to_string()), Just("{}".to_string()), Just("9007199254740993".to_string())]), 0..6), ty in prop_oneof![Just("TEXT_MESSAGE_CONTENT"), Just("RUN_FINISHED"), Just("MESSAGES_SNAPSHOT"), Just("STATE_DELTA"), Just("harness.event"), Just("harness.input")]) {
        let mut s = format!(r#"{{"type":"{ty}""#);
        for (k, v) in &keys { s.push_str(&format!(r#","{k}":{v}"#)); }
        s.push('}');
        if let Ok(ev) = AguiEvent::from_json(&s) {
            // whatever decodes re-encodes to something that decodes to the same value
            prop_assert_eq!(AguiEvent::from_json(&ev.to_json()).unwrap(), ev);
        }
        let _ = HostFrame::from_json(&s);
        let _ = ClientFrame::from_json(&s);
    }
}
