//! The host's streams, against the spec (tanstack-harness-wire-protocol.md, version 2): `GET
//! events`, the socket's and the stdio worker's `harness.subscribe` handshake, who may read a
//! thread, and fan-out. Each test quotes the words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::field_reassign_with_default)]

mod support;

use std::time::Duration;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::frame::close;
use harness_tanstack::host::{AccessPolicy, Host, HostConfig, Transport};
use harness_tanstack::log::{EventLog, MemoryLog};
use serde_json::Value;
use support::{Net, PROMPT, data_frames, json, net, reply};

#[test]
fn sse_stream_hello_without_id_then_id_per_event_then_ping() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    reply(&mut n, "Hi");
    let c = n
        .host
        .open_sse(n.now, Some("thread-1"), Some("2"), None, None, None, "req")
        .unwrap();
    n.pump();
    let got = n.take(c);
    // "It shows the hello frame, then one SSE event per session event"
    assert_eq!(
        got[0],
        "data: {\"type\":\"harness.hello\",\"v\":2,\"threadId\":\"thread-1\"}\n\n"
    );
    // "With no cursor, the stream starts at the first event of the thread."
    assert!(got[1].starts_with(
        "id: 1\ndata: {\"type\":\"harness.event\",\"cursor\":\"1\",\"threadId\":\"thread-1\""
    ));
    // "On SSE, the id of each event is the same cursor."
    for (i, ev) in got[1..].iter().enumerate() {
        let cur = (i + 1).to_string();
        assert!(ev.starts_with(&format!("id: {cur}\n")));
        assert_eq!(
            data_frames(std::slice::from_ref(ev))[0]["cursor"],
            cur.as_str()
        );
    }
    // "…and a ping comment when the stream is idle" — heartbeatMs default 20 s.
    n.advance(Duration::from_secs(19));
    assert!(n.take(c).is_empty());
    n.advance(Duration::from_secs(1));
    assert_eq!(n.take(c), vec![": ping\n\n".to_string()]);
}

#[test]
fn socket_handshake_rules() {
    let mut n = net();
    let c = n
        .host
        .connect(n.now, Transport::WebSocket, None, "upgrade-1");
    // "The first frame from the client must be harness.subscribe." — else invalid_frame, no close.
    n.host
        .handle_frame(n.now, c, r#"{"type":"harness.snapshot"}"#);
    n.pump();
    let f = json(&n.take(c)[0]);
    assert_eq!(f["code"], "invalid_frame");
    // "A frame with no requestId gets an id from the server. On the socket, that id is the id of the upgrade request."
    assert_eq!(f["requestId"], "upgrade-1");
    assert_eq!(n.closed(c), None);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.pump();
    assert_eq!(
        json(&n.take(c)[0]),
        json(r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#)
    );
    // "…or is a second harness.subscribe." — invalid_frame, does not close.
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1"}"#,
    );
    // "not valid JSON" and "an unknown type" — invalid_frame, does not close.
    n.host.handle_frame(n.now, c, "{nope");
    n.host
        .handle_frame(n.now, c, r#"{"type":"harness.teleport","requestId":"rq"}"#);
    n.pump();
    let errs: Vec<Value> = n.take(c).iter().map(|s| json(s)).collect();
    assert_eq!(errs.len(), 3);
    assert!(errs.iter().all(|e| e["code"] == "invalid_frame"));
    assert_eq!(errs[2]["requestId"], "rq");
    assert_eq!(n.closed(c), None);
    // An input: the receipt repeats the requestId.
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"req-1","input":{"op":"prompt","message":"Hello"}}"#,
    );
    n.pump();
    let got: Vec<Value> = n.take(c).iter().map(|s| json(s)).collect();
    let receipt = got.iter().find(|f| f["type"] == "harness.receipt").unwrap();
    assert_eq!(
        (receipt["requestId"].as_str(), receipt["status"].as_str()),
        (Some("req-1"), Some("accepted"))
    );
    // A bad input: invalid_frame with its requestId, no close.
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"req-2","input":{"op":"warp"}}"#,
    );
    n.pump();
    let e = json(&n.take(c)[0]);
    assert_eq!(
        (e["code"].as_str(), e["requestId"].as_str()),
        (Some("invalid_frame"), Some("req-2"))
    );
    // harness.snapshot answers with the snapshot.
    n.host
        .handle_frame(n.now, c, r#"{"type":"harness.snapshot"}"#);
    n.pump();
    let s = json(&n.take(c)[0]);
    assert_eq!(s["type"], "harness.snapshot");
    assert_eq!(s["snapshot"]["status"], "running");
}

/// "`4401` | `getUser` refused the user." and "`4403` | The user cannot read the thread, or
/// lost access." Each user's thread ids are their own (see tests/host_access.rs), so a
/// thread the user may not read is one whose owner in the log is another user (a log
/// written by hand, or a policy that takes access away): the owner check still refuses it,
/// with `403` on HTTP ("a refused login or action before the stream starts is the `401` or
/// `403` status of the request").
#[test]
fn refused_and_forbidden_users_close_4401_and_4403() {
    let mut cfg = HostConfig::default();
    cfg.access = AccessPolicy::MembersOnly;
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.pump();
    // "4401 | getUser refused the user."
    assert_eq!(json(&n.take(c)[0])["code"], "unauthorized");
    assert_eq!(n.closed(c), Some(close::UNAUTHORIZED));
    // ann's thread-1, which the log says is bob's.
    let key = n.host.thread_key(Some("ann"), "thread-1");
    n.host.log_mut().set_owner(&key, "bob").unwrap();
    let c = n
        .host
        .connect(n.now, Transport::WebSocket, Some("ann"), "up2");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.pump();
    // "4403 | The user cannot read the thread, or lost access."
    assert_eq!(json(&n.take(c)[0])["code"], "forbidden");
    assert_eq!(n.closed(c), Some(close::FORBIDDEN));
    // HTTP: "On a host with access, a thread that has no session yet answers 404"; a refused login is 401, a refused action 403.
    assert_eq!(
        n.host
            .open_sse(n.now, Some("nope"), None, None, None, Some("ann"), "r")
            .unwrap_err()
            .status,
        404
    );
    assert_eq!(
        n.host
            .open_sse(n.now, Some("thread-1"), None, None, None, None, "r")
            .unwrap_err()
            .status,
        401
    );
    assert_eq!(
        n.host
            .open_sse(n.now, Some("thread-1"), None, None, None, Some("ann"), "r")
            .unwrap_err()
            .status,
        403
    );
    assert_eq!(
        n.host.control(n.now, Some("ann"), PROMPT, "r", None).status,
        403
    );
    assert_eq!(n.host.snapshot("thread-1", Some("ann"), "r").status, 403);
}

#[test]
fn stdio_has_no_heartbeat() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::Stdio, None, "stdio");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.pump();
    assert!(n.take(c)[0].ends_with('\n'));
    // "The worker sends no heartbeat."
    n.advance(Duration::from_secs(300));
    assert!(n.take(c).is_empty());
    // "A frame with no requestId gets an id from the server."
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","input":{"op":"prompt","message":"Hello"}}"#,
    );
    n.pump();
    let r = n
        .take(c)
        .iter()
        .map(|s| json(s))
        .find(|f| f["type"] == "harness.receipt")
        .unwrap();
    assert!(!r["requestId"].as_str().unwrap().is_empty());
}

#[test]
fn fan_out_shares_one_rendering() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    let conns: Vec<_> = (0..3)
        .map(|_| {
            n.host
                .open_sse(n.now, Some("thread-1"), None, None, None, None, "r")
                .unwrap()
        })
        .collect();
    n.pump();
    let op = n.turns[0].operation_id.clone();
    n.host
        .emit(n.now, "thread-1", &op, AguiEvent::text_content("m", "x"))
        .unwrap();
    n.pump();
    let last: Vec<bytes::Bytes> = conns
        .iter()
        .map(|c| n.wires[c].received.back().unwrap().clone())
        .collect();
    // The same allocation is shared by every subscriber (serialize once).
    assert!(last.windows(2).all(|w| w[0].as_ptr() == w[1].as_ptr()));
}

/// Connections come and go; the host must not keep anything per thread id a connection
/// once asked for (on an open host, any string is a thread id a client may subscribe to).
#[test]
fn subscriptions_leave_nothing_behind_after_their_connections_go() {
    let mut n = net();
    for i in 0..50 {
        let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
        n.host.handle_frame(
            n.now,
            c,
            &format!(r#"{{"type":"harness.subscribe","threadId":"no-such-{i}"}}"#),
        );
        let s = n
            .host
            .open_sse(
                n.now,
                Some(&format!("sse-{i}")),
                None,
                None,
                None,
                None,
                "r",
            )
            .unwrap();
        n.pump();
        n.host.disconnect(c);
        n.host.disconnect(s);
    }
    let stats = n.host.stats();
    assert_eq!(stats.connections, 0);
    assert_eq!(stats.watched_threads, 0);
    assert_eq!(stats.threads, 0);
}

/// "On the socket and the stdio worker, it is the requestId of the frame that failed." An
/// input sent before `harness.subscribe` has one: the invalid_frame error repeats it.
#[test]
fn a_frame_before_subscribe_gets_an_error_with_its_own_request_id() {
    let mut n = net();
    let c = n
        .host
        .connect(n.now, Transport::WebSocket, None, "upgrade-1");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"r-0","input":{"op":"prompt","message":"x"}}"#,
    );
    n.pump();
    let e = json(&n.take(c)[0]);
    assert_eq!(e["code"], "invalid_frame");
    assert_eq!(e["requestId"], "r-0");
    assert!(!n.host.has_thread("thread-1"));
}

/// A socket may subscribe to a thread before its first input makes it. When another user
/// then sends the same thread id, that makes the other user's own thread (each user's ids
/// are their own, tests/host_access.rs): the early subscriber reads none of its events, and
/// stays open for its own thread ("The user cannot read the thread" is never theirs to
/// read).
#[test]
fn a_subscriber_waiting_for_a_thread_id_another_user_uses_reads_none_of_its_events() {
    let mut cfg = HostConfig::default();
    cfg.access = AccessPolicy::MembersOnly;
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let bob = n
        .host
        .connect(n.now, Transport::WebSocket, Some("bob"), "up-bob");
    n.host.handle_frame(
        n.now,
        bob,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    let ann = n
        .host
        .connect(n.now, Transport::WebSocket, Some("ann"), "up-ann");
    n.host.handle_frame(
        n.now,
        ann,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.pump();
    n.take(bob);
    n.take(ann);
    n.host.control(n.now, Some("ann"), PROMPT, "r", None);
    n.pump();
    let got: Vec<Value> = n.take(bob).iter().map(|s| json(s)).collect();
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(n.closed(bob), None);
    // The owner goes on reading.
    assert!(
        n.take(ann)
            .iter()
            .any(|s| json(s)["type"] == "harness.event")
    );
    assert_eq!(n.closed(ann), None);
    // bob's own thread-1, made by his input, is what he reads.
    n.host.control(n.now, Some("bob"), PROMPT, "r", None);
    n.pump();
    let got: Vec<Value> = n.take(bob).iter().map(|s| json(s)).collect();
    assert!(got.iter().any(|f| f["type"] == "harness.event"));
    assert!(got.iter().all(|f| f["threadId"] == "thread-1"));
}
