//! The host against "Protocol version" of the spec (tanstack-harness-wire-protocol.md,
//! version 2): the version it speaks, and the one it does not. Each test quotes the words it
//! checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use harness_tanstack::frame::close;
use harness_tanstack::host::Transport;
use support::{data_frames, json, net};

#[test]
fn unsupported_version_closes_4400_with_the_spec_message() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":3}"#,
    );
    n.pump();
    let e = json(&n.take(c)[0]);
    // "If the server does not speak your v, it sends one error frame and closes the stream"
    assert_eq!(e["code"], "unsupported_version");
    assert_eq!(
        e["message"],
        "Protocol version 3 is not supported. This host speaks version 2."
    );
    assert_eq!(n.closed(c), Some(close::UNSUPPORTED_VERSION));
    // SSE: the error frame, then the end of the stream.
    let s = n
        .host
        .open_sse(n.now, Some("thread-1"), Some("3"), None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(data_frames(&n.take(s))[0]["code"], "unsupported_version");
    assert!(n.closed(s).is_some());
}

#[test]
fn no_v_means_the_current_version_and_run_routes_get_pings_too() {
    let mut n = net();
    // "With no v, the server uses its current version." / "The harness.hello frame gives the version that the server uses."
    let c = n
        .host
        .open_sse(n.now, Some("thread-1"), None, None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(
        data_frames(&n.take(c))[0],
        json(r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#)
    );
    // GET capabilities: "custom.tanstack.protocol is the protocol version of the server."
    let caps = json(&n.host.capabilities("acme/assistant", "r").body);
    assert_eq!(caps["custom"]["tanstack"]["protocol"], 2);
    // "POST run and GET run also get the : ping comment."
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(r#"{"threadId":"t-run","runId":"run-1","messages":[{"id":"u","role":"user","content":"hi"}]}"#).unwrap();
    let run = n.host.run_agui(n.now, &input, None, "r", None).unwrap();
    n.pump();
    let first = n.take(run);
    // Plain AG-UI events: no harness.* frame around them.
    assert!(first[0].starts_with("data: {\"type\":\"RUN_STARTED\""));
    n.advance(Duration::from_secs(20));
    assert!(n.take(run).contains(&": ping\n\n".to_string()));
    // "GET host-events ... Its harness.hello frame has no threadId."
    let h = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(
        data_frames(&n.take(h))[0],
        json(r#"{"type":"harness.hello","v":2}"#)
    );
}

/// A `v` that is not a number is not a version the host speaks: the message says what was
/// sent, not a made-up number.
#[test]
fn a_non_numeric_version_is_named_as_sent() {
    let mut n = net();
    let s = n
        .host
        .open_sse(n.now, Some("thread-1"), Some("two"), None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(
        data_frames(&n.take(s))[0]["message"],
        "Protocol version two is not supported. This host speaks version 2."
    );
}
