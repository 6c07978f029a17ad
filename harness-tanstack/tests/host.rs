//! The host, driven with a virtual clock, against the MUSTs of the spec
//! (tanstack-harness-wire-protocol.md, version 2). Each test quotes the words it checks.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

mod support;

use std::time::Duration;

use harness_tanstack::agui::Event;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::frame::close;
use harness_tanstack::host::{AccessPolicy, Host, HostConfig, Transport, TurnOutcome};
use harness_tanstack::http::{self, StreamConfig, StreamOptions};
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::Value;
use support::Net;

const PROMPT: &[u8] = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#;

fn net() -> Net<MemoryLog> {
    Net::new(Host::new(HostConfig::default(), MemoryLog::default()))
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

/// Runs the turn the host asked for: a text message, then completed.
fn reply<L: harness_tanstack::log::EventLog>(n: &mut Net<L>, text: &str) -> String {
    let t = n.turns.remove(0);
    let now = n.now;
    let op = t.operation_id.clone();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            Event::TextMessageStart(harness_tanstack::agui::TextMessageStart {
                message_id: format!("{op}-m"),
                ..Default::default()
            }),
        )
        .unwrap();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            Event::text_content(format!("{op}-m"), text),
        )
        .unwrap();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            Event::TextMessageEnd(harness_tanstack::agui::TextMessageEnd {
                message_id: format!("{op}-m"),
                ..Default::default()
            }),
        )
        .unwrap();
    n.host
        .finish_turn(now, &t.thread_id, &op, TurnOutcome::Completed)
        .unwrap();
    n.pump();
    op
}

fn data_frames(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .filter_map(|t| t.lines().find_map(|l| l.strip_prefix("data: ")).map(json))
        .collect()
}

#[test]
fn post_control_answers_the_receipt_and_the_first_prompt_makes_the_thread() {
    let mut n = net();
    // "The command prints the receipt, for example {"inputId":"in-1","status":"accepted","operationId":"op-1"}. The first prompt also makes the thread."
    let a = n.host.control(n.now, None, PROMPT, "req-1", None);
    assert_eq!(a.status, 200);
    assert_eq!(
        json(&a.body),
        json(r#"{"inputId":"in-1","status":"accepted","operationId":"op-1"}"#)
    );
    assert!(n.host.has_thread("thread-1"));
    // "Every HTTP answer of the handler sends the id back in the X-Request-Id header."
    assert_eq!(a.request_id, "req-1");
}

#[test]
fn post_control_statuses() {
    let mut cfg = HostConfig::default();
    cfg.access = AccessPolicy::MembersOnly;
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    // "401: getUser returned null."
    assert_eq!(n.host.control(n.now, None, PROMPT, "r", None).status, 401);
    // "400: { error }. The input has a bad shape, or threadId is missing."
    let a = n.host.control(
        n.now,
        Some("ann"),
        br#"{"input":{"op":"prompt","message":"x"}}"#,
        "r",
        None,
    );
    assert_eq!(a.status, 400);
    assert!(json(&a.body)["error"].is_string());
    assert_eq!(
        n.host
            .control(
                n.now,
                Some("ann"),
                br#"{"threadId":"t","input":{"op":"fly"}}"#,
                "r",
                None
            )
            .status,
        400
    );
    assert_eq!(
        n.host
            .control(n.now, Some("ann"), b"not json", "r", None)
            .status,
        400
    );
    // "403: { error: 'forbidden' }. The host refused the action."
    assert_eq!(
        n.host.control(n.now, Some("ann"), PROMPT, "r", None).status,
        200
    );
    let a = n.host.control(n.now, Some("bob"), PROMPT, "r", None);
    assert_eq!(
        (a.status, json(&a.body)),
        (403, json(r#"{"error":"forbidden"}"#))
    );
    // "A rejected receipt is still 200. Its reason says why"
    let a = n.host.control(
        n.now,
        Some("ann"),
        br#"{"threadId":"thread-1","input":{"op":"cancel","operationId":"op-9"}}"#,
        "r",
        None,
    );
    assert_eq!(a.status, 200);
    assert_eq!(json(&a.body)["status"], "rejected");
    assert_eq!(json(&a.body)["reason"], "not_running");
}

#[test]
fn receipts_are_accepted_queued_or_rejected() {
    let mut n = net();
    // "The status of a receipt is accepted, queued, or rejected."
    let a = json(&n.host.control(n.now, None, PROMPT, "r", None).body);
    assert_eq!(a["status"], "accepted");
    let q = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"followUp","message":"more"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(q["status"], "queued");
    let r = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"agent","agent":"nobody"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str()),
        (Some("rejected"), Some("unknown_agent"))
    );
    // The queued follow-up runs when the turn ends.
    n.pump();
    assert_eq!(n.turns.len(), 1);
    reply(&mut n, "Hi");
    assert_eq!(n.turns.len(), 1);
    assert_eq!(n.turns[0].message.text(), "more");
}

#[test]
fn the_same_input_id_runs_once_and_the_receipt_repeats_it() {
    let mut n = net();
    // "A prompt, command, agent, or append input with the same inputId runs once. The inputId of its receipt is the id that you sent."
    let body =
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello","inputId":"mine-1"}}"#;
    let a = n.host.control(n.now, None, body, "r1", None);
    let b = n.host.control(n.now, None, body, "r2", None);
    assert_eq!(a.body, b.body);
    assert_eq!(json(&a.body)["inputId"], "mine-1");
    n.pump();
    assert_eq!(n.turns.len(), 1);
    for body in [
        &br#"{"threadId":"thread-1","input":{"op":"command","command":"compact","inputId":"c-1"}}"#
            [..],
        br#"{"threadId":"thread-1","input":{"op":"agent","agent":"x","inputId":"g-1"}}"#,
        br#"{"threadId":"thread-1","input":{"op":"append","message":"note","inputId":"a-1"}}"#,
    ] {
        let a = n.host.control(n.now, None, body, "r", None);
        let b = n.host.control(n.now, None, body, "r", None);
        assert_eq!(a.body, b.body);
    }
    let appended = n
        .host
        .messages("thread-1")
        .iter()
        .filter(|m| m.text() == "note")
        .count();
    assert_eq!(appended, 1);
}

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
fn last_event_id_wins_over_from_and_the_stream_starts_after_the_cursor() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    reply(&mut n, "Hi");
    // "When you send both, the header wins." / "The stream starts with the first event after that cursor."
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            Some("1"),
            Some("4"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(frames[1]["cursor"], "5");
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
fn refused_and_forbidden_users_close_4401_and_4403() {
    let mut cfg = HostConfig::default();
    cfg.access = AccessPolicy::MembersOnly;
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.pump();
    // "4401 | getUser refused the user."
    assert_eq!(json(&n.take(c)[0])["code"], "unauthorized");
    assert_eq!(n.closed(c), Some(close::UNAUTHORIZED));
    n.host.control(n.now, Some("ann"), PROMPT, "r", None);
    let c = n
        .host
        .connect(n.now, Transport::WebSocket, Some("bob"), "up2");
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
            .open_sse(n.now, Some("thread-1"), None, None, None, Some("bob"), "r")
            .unwrap_err()
            .status,
        403
    );
}

#[test]
fn memory_eviction_sends_one_gap_with_reason_evicted() {
    let mut n = Net::new(Host::new(HostConfig::default(), MemoryLog::new(5, 1 << 20)));
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    reply(&mut n, "Hi");
    let head = n.host.log().head_seq("thread-1");
    assert!(head > 5);
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            Some("2"),
            None,
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    let gap = &frames[1];
    // "the stream sends one CUSTOM event with the name harness.gap, and continues from the first event that it has"
    assert_eq!(gap["operationId"], "session");
    assert_eq!(gap["event"]["name"], "harness.gap");
    // "from is the cursor that you sent." "resumeAt is the cursor of this event."
    assert_eq!(gap["event"]["value"]["from"], "2");
    assert_eq!(gap["event"]["value"]["resumeAt"], gap["cursor"]);
    assert_eq!(gap["event"]["value"]["reason"], "evicted");
    let first = n.host.log().first_seq("thread-1");
    assert_eq!(gap["cursor"], (first - 1).to_string().as_str());
    // "The stream continues after it."
    assert_eq!(frames[2]["cursor"], first.to_string().as_str());
    assert_eq!(frames.len(), 2 + (head - first + 1) as usize);
}

#[test]
fn file_log_cursors_survive_a_restart_and_truncation_yields_reason_truncated() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let head;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        reply(&mut n, "Hi");
        head = n.host.log().head_seq("thread-1");
    }
    // "A cursor works on every server and after a restart only on a durable host"
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    assert_eq!(n.host.log().head_seq("thread-1"), head);
    assert_eq!(
        n.host
            .messages("thread-1")
            .iter()
            .map(|m| m.text())
            .collect::<Vec<_>>(),
        vec!["Hello", "Hi"]
    );
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            None,
            Some("3"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(frames[1]["cursor"], "4");
    assert_eq!(frames.len() as u64, 1 + head - 3);
    // New events continue the sequence, and a new run id does not collide.
    n.host.control(
        n.now,
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"again"}}"#,
        "r",
        None,
    );
    n.pump();
    assert_eq!(n.turns[0].operation_id, "op-2");
    // "A truncate of the log removes old records" → reason truncated.
    n.host.log_mut().truncate("thread-1", 5).unwrap();
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            None,
            Some("2"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(
        frames[1]["event"]["value"],
        json(r#"{"from":"2","resumeAt":"5","reason":"truncated"}"#)
    );
    assert_eq!(frames[2]["cursor"], "6");
    drop(n);
    // The truncation itself survives a restart.
    let log = FileLog::open(&dir).unwrap();

    assert_eq!(log.first_seq("thread-1"), 6);
    assert_eq!(log.gap_reason(), GapReason::Truncated);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slow_consumer_is_closed_4408_and_loses_no_events() {
    let mut cfg = HostConfig::default();
    cfg.stream = StreamOptions {
        socket_buffer_bytes: Some(600.0),
        slow_consumer_ms: Some(30_000.0),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.stalled.push(c);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    for i in 0..20 {
        let op = n.turns[0].operation_id.clone();
        n.host
            .emit(
                n.now,
                "thread-1",
                &op,
                Event::text_content("m", format!("chunk {i}")),
            )
            .unwrap();
    }
    n.pump();
    // "Above this bufferedAmount, the server stops sending."
    let got = n.take(c);
    assert!(got.len() < 20);
    assert!(n.host.in_flight(c) >= 600);
    let last_cursor = got
        .iter()
        .rev()
        .filter_map(|s| json(s)["cursor"].as_str().map(str::to_owned))
        .next()
        .unwrap();
    n.advance(Duration::from_secs(29));
    assert_eq!(n.closed(c), None);
    // "If the client does not read for this long, the server sends slow_consumer and closes."
    n.advance(Duration::from_secs(1));
    assert_eq!(json(n.take(c).last().unwrap())["code"], "slow_consumer");
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
    // "A slow client loses no events. The server reads them from the log when the client reads again."
    let c2 = n.host.connect(n.now, Transport::WebSocket, None, "up2");
    n.host.handle_frame(
        n.now,
        c2,
        &format!(r#"{{"type":"harness.subscribe","threadId":"thread-1","from":"{last_cursor}"}}"#),
    );
    n.pump();
    let rest: Vec<Value> = n.take(c2).iter().map(|s| json(s)).collect();
    let deltas: Vec<String> = got
        .iter()
        .chain(
            rest.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .iter(),
        )
        .filter_map(|s| json(s)["event"]["delta"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        deltas,
        (0..20).map(|i| format!("chunk {i}")).collect::<Vec<_>>()
    );
}

#[test]
fn stream_values_must_be_finite_and_above_zero_and_the_error_names_the_field() {
    // "Each value must be a finite number above 0. If a value is not, … the error names the field."
    for (opts, field) in [
        (
            StreamOptions {
                heartbeat_ms: Some(0.0),
                ..Default::default()
            },
            "heartbeatMs",
        ),
        (
            StreamOptions {
                sse_queue_bytes: Some(f64::NAN),
                ..Default::default()
            },
            "sseQueueBytes",
        ),
        (
            StreamOptions {
                socket_buffer_bytes: Some(-1.0),
                ..Default::default()
            },
            "socketBufferBytes",
        ),
        (
            StreamOptions {
                slow_consumer_ms: Some(f64::INFINITY),
                ..Default::default()
            },
            "slowConsumerMs",
        ),
    ] {
        let e = opts.validate().unwrap_err();
        assert_eq!(e.field, field);
        assert!(e.to_string().contains(field));
    }
    // A huge value is finite and above 0: it saturates, and time arithmetic never overflows.
    let huge = StreamOptions {
        heartbeat_ms: Some(1e300),
        slow_consumer_ms: Some(1e300),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let mut n = Net::new(Host::new(
        HostConfig {
            stream: huge,
            ..HostConfig::default()
        },
        MemoryLog::default(),
    ));
    let c = n
        .host
        .open_sse(n.now, Some("t"), None, None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(n.host.poll_timeout(), None);
    n.advance(Duration::from_secs(3600));
    assert_eq!(n.take(c).len(), 1);
    // "A value that you do not set keeps its default" — 20 s, 1 MiB, 8 MiB, 30 s.
    let c = StreamOptions {
        heartbeat_ms: Some(10_000.0),
        ..Default::default()
    }
    .validate()
    .unwrap();
    assert_eq!(
        c,
        StreamConfig {
            heartbeat: Duration::from_secs(10),
            ..StreamConfig::default()
        }
    );
    assert_eq!(StreamConfig::default().sse_queue_bytes, 1 << 20);
    assert_eq!(StreamConfig::default().socket_buffer_bytes, 8 << 20);
    assert_eq!(
        StreamConfig::default().slow_consumer,
        Duration::from_secs(30)
    );
}

#[test]
fn request_ids_and_traceparents_are_validated() {
    // "1 to 128 letters, digits, -, _, ., or :. Else the server makes a new UUID."
    assert_eq!(http::request_id(Some("abc-1_2.3:4")), "abc-1_2.3:4");
    assert_eq!(http::request_id(Some(&"a".repeat(128))).len(), 128);
    for bad in ["", "has space", "slash/", &"a".repeat(129)] {
        let id = http::request_id(Some(bad));
        assert_ne!(id, bad);
        assert_eq!(id.len(), 36); // a UUID
    }
    // "It drops a value that is not a valid W3C traceparent."
    let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert!(http::is_valid_traceparent(good));
    for bad in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "garbage",
    ] {
        assert!(!http::is_valid_traceparent(bad), "{bad}");
    }
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", Some(good));
    n.pump();
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(good));
    reply(&mut n, "x");
    n.host.control(
        n.now,
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"y"}}"#,
        "r",
        Some("junk"),
    );
    n.pump();
    assert_eq!(n.turns[0].traceparent, None);
}

#[test]
fn cancel_drops_the_turn_and_run_finished_carries_outcome_cancelled() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    let t = n.turns.remove(0);
    n.host
        .emit(
            n.now,
            "thread-1",
            &t.operation_id,
            Event::TextMessageStart(harness_tanstack::agui::TextMessageStart {
                message_id: "m1".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    let a = json(
        &n.host
            .control(
                n.now,
                None,
                format!(
                    r#"{{"threadId":"thread-1","input":{{"op":"cancel","operationId":"{}"}}}}"#,
                    t.operation_id
                )
                .as_bytes(),
                "r",
                None,
            )
            .body,
    );
    assert_eq!(a["status"], "accepted");
    n.pump();
    assert_eq!(n.cancels, vec![t.operation_id.clone()]);
    n.host
        .finish_turn(n.now, "thread-1", &t.operation_id, TurnOutcome::Cancelled)
        .unwrap();
    let c = n
        .host
        .open_sse(n.now, Some("thread-1"), None, None, None, None, "r")
        .unwrap();
    n.pump();
    let types: Vec<String> = data_frames(&n.take(c))
        .iter()
        .skip(1)
        .map(|f| match f["event"]["name"].as_str() {
            Some(n) => n.to_owned(),
            None => f["event"]["type"].as_str().unwrap().to_owned(),
        })
        .collect();
    // "Before it, a cancelled turn ends its open text message and sends RUN_FINISHED with outcome: { type: 'cancelled' }."
    let i = types.iter().position(|t| t == "TEXT_MESSAGE_END").unwrap();
    assert_eq!(
        &types[i..i + 3],
        [
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
            "harness.operation.finished"
        ]
    );
    let all = data_frames(&n.take(c));
    let _ = all;
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
        .emit(n.now, "thread-1", &op, Event::text_content("m", "x"))
        .unwrap();
    n.pump();
    let last: Vec<bytes::Bytes> = conns
        .iter()
        .map(|c| n.wires[c].received.back().unwrap().clone())
        .collect();
    // The same allocation is shared by every subscriber (serialize once).
    assert!(last.windows(2).all(|w| w[0].as_ptr() == w[1].as_ptr()));
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

#[test]
fn a_run_the_host_was_running_when_it_stopped_is_closed_as_interrupted() {
    let dir =
        std::env::temp_dir().join(format!("harness-tanstack-interrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        let op = n.turns[0].operation_id.clone();
        n.host
            .emit(
                n.now,
                "thread-1",
                &op,
                Event::text_content("m", "half an ans"),
            )
            .unwrap();
        // The process dies here: no RUN_FINISHED.
    }
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let c = n
        .host
        .open_sse(n.now, Some("thread-1"), None, None, Some("5"), None, "r")
        .unwrap();
    n.pump();
    let f = data_frames(&n.take(c));
    // The run ends in the log: RUN_ERROR (code interrupted), then operation.finished
    // "status is … interrupted", then input.settled "outcome is … interrupted".
    assert_eq!(f[1]["event"]["type"], "RUN_ERROR");
    assert_eq!(f[1]["event"]["code"], "interrupted");
    assert_eq!(
        f[2]["event"]["value"],
        json(r#"{"operationId":"op-1","status":"interrupted"}"#)
    );
    assert_eq!(
        f[3]["event"]["value"],
        json(r#"{"inputId":"in-1","operationId":"op-1","outcome":"interrupted"}"#)
    );
    // The thread is idle, and new ids do not collide with the old ones.
    let a = json(&n.host.control(n.now, None, PROMPT, "r", None).body);
    assert_eq!(
        a,
        json(r#"{"inputId":"in-2","status":"accepted","operationId":"op-2"}"#)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_client_that_sends_and_never_reads_is_a_slow_consumer_and_memory_stays_bounded() {
    let cfg = HostConfig {
        max_queued_frames: 8,
        stream: StreamOptions {
            socket_buffer_bytes: Some(200.0),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        ..HostConfig::default()
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.stalled.push(c);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    for _ in 0..100 {
        n.host.handle_frame(n.now, c, "not json");
    }
    n.pump();
    // "Above this bufferedAmount, the server stops sending." — then the queue bound trips.
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
    let got = n.take(c);
    assert!(got.len() <= 10, "{}", got.len());
    assert_eq!(json(got.last().unwrap())["code"], "slow_consumer");
}

#[test]
fn idempotency_receipts_are_bounded() {
    let cfg = HostConfig {
        max_receipts: 2,
        ..HostConfig::default()
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    for id in ["a-1", "a-2", "a-3", "a-3", "a-1"] {
        let body = format!(
            r#"{{"threadId":"thread-1","input":{{"op":"append","message":"note {id}","inputId":"{id}"}}}}"#
        );
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200
        );
    }
    let texts: Vec<String> = n
        .host
        .messages("thread-1")
        .iter()
        .map(|m| m.text())
        .collect();
    // a-3 repeated within the window ran once; a-1 was forgotten (oldest of more than 2) and ran again.
    assert_eq!(texts, ["note a-1", "note a-2", "note a-3", "note a-1"]);
}

// ---- review: bounds, gaps on every stream, access, restarts -----------------------------

fn sse_cfg(sse_queue_bytes: f64) -> HostConfig {
    HostConfig {
        stream: StreamOptions {
            sse_queue_bytes: Some(sse_queue_bytes),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        ..HostConfig::default()
    }
}

/// `GET host-events` reads the host's own bounded log. A reader that fell behind what that
/// log still has must not stall silently: like a thread stream ("the stream sends one
/// CUSTOM event with the name harness.gap, and continues from the first event that it
/// has"), it gets a gap with reason evicted, then the rest.
#[test]
fn a_host_events_reader_behind_evicted_status_events_gets_a_gap_then_the_rest() {
    let cfg = HostConfig {
        max_host_events: 4,
        ..sse_cfg(1.0)
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let h = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.stalled.push(h);
    n.pump();
    // Five threads: ten status changes, more than the four the host keeps.
    for i in 0..5 {
        let body = format!(r#"{{"threadId":"t-{i}","input":{{"op":"prompt","message":"x"}}}}"#);
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200
        );
    }
    n.pump();
    // The reader reads again.
    n.stalled.clear();
    let in_flight = n.host.in_flight(h);
    n.host.sent(n.now, h, in_flight);
    n.pump();
    let frames = data_frames(&n.take(h));
    assert_eq!(frames[0]["type"], "harness.hello");
    let gap = &frames[1]["event"];
    assert_eq!(gap["name"], "harness.gap", "{frames:?}");
    assert_eq!(gap["value"]["from"], "0");
    assert_eq!(gap["value"]["reason"], "evicted");
    assert_eq!(gap["value"]["resumeAt"], frames[1]["cursor"]);
    // Then the four status events the host still has, in order.
    assert_eq!(frames.len(), 2 + 4, "{frames:?}");
    let first: u64 = frames[2]["cursor"].as_str().unwrap().parse().unwrap();
    assert_eq!(frames[1]["cursor"], (first - 1).to_string().as_str());
}

/// `GET host-events` gives each status event an SSE `id` (its cursor), so a reader that
/// lost the stream (a drop, or `slow_consumer`: "After `slow_consumer`, `events()` and
/// `hostEvents()` connect again") comes back with it: "To continue after a disconnect,
/// connect again with the last cursor: On SSE, send it as the `Last-Event-ID` header, or as
/// `?from=`. When you send both, the header wins." and "The stream starts with the first
/// event after that cursor." ("A slow client loses no events.") A cursor the host never
/// handed out (a memory host that restarted) cannot be placed: a gap, then what it has.
#[test]
fn a_host_events_reader_resumes_after_its_last_event_id_and_loses_nothing() {
    let mut n = net();
    let first = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.pump();
    let body =
        |i: usize| format!(r#"{{"threadId":"t-{i}","input":{{"op":"prompt","message":"x"}}}}"#);
    n.host.control(n.now, None, body(0).as_bytes(), "r", None);
    n.pump();
    let seen = data_frames(&n.take(first));
    let cursors: Vec<String> = seen[1..]
        .iter()
        .map(|f| f["cursor"].as_str().unwrap().to_owned())
        .collect();
    assert!(!cursors.is_empty(), "{seen:?}");
    let last = cursors.last().unwrap().clone();
    // The reader goes; status changes happen while it is away.
    n.host.disconnect(first);
    for i in 1..3 {
        n.host.control(n.now, None, body(i).as_bytes(), "r", None);
        n.pump();
    }
    let status = |frames: &[Value]| -> Vec<(String, String)> {
        frames
            .iter()
            .filter(|f| f["type"] == "harness.event")
            .map(|f| {
                let v = &f["event"]["value"];
                (
                    v["threadId"].as_str().unwrap_or_default().to_owned(),
                    v["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    // Everything after the last cursor, nothing before it: by the header, by ?from=, and
    // the header over ?from= when both come.
    let mut resumed = Vec::new();
    for (from, last_event_id) in [
        (None, Some(last.as_str())),
        (Some(last.as_str()), None),
        (Some("0"), Some(last.as_str())),
    ] {
        let c = n
            .host
            .open_host_events(n.now, Some("2"), from, last_event_id, None, "r")
            .unwrap();
        n.pump();
        let frames = data_frames(&n.take(c));
        assert_eq!(frames[0], json(r#"{"type":"harness.hello","v":2}"#));
        let after: u64 = last.parse().unwrap();
        for f in &frames[1..] {
            let cursor: u64 = f["cursor"].as_str().unwrap().parse().unwrap();
            assert!(
                cursor > after,
                "cursor {cursor} replayed after {after}: {frames:?}"
            );
        }
        let got = status(&frames);
        assert!(
            got.iter().any(|(t, _)| t == "t-1") && got.iter().any(|(t, _)| t == "t-2"),
            "the status changes while away are lost: {frames:?}"
        );
        assert!(!got.iter().any(|(t, _)| t == "t-0"), "{frames:?}");
        resumed.push(got);
        n.host.disconnect(c);
    }
    assert_eq!(resumed[0], resumed[1]);
    assert_eq!(resumed[0], resumed[2]);
    // No cursor: the stream starts now, as before.
    let live = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(data_frames(&n.take(live)).len(), 1);
    // A cursor the host never handed out: one gap (it names the cursor), then what it has.
    let c = n
        .host
        .open_host_events(n.now, Some("2"), None, Some("999999"), None, "r")
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    let gap = &frames[1]["event"];
    assert_eq!(gap["name"], "harness.gap", "{frames:?}");
    assert_eq!(gap["value"]["from"], "999999");
    assert_eq!(gap["value"]["resumeAt"], frames[1]["cursor"]);
    assert_eq!(
        status(&frames[2..]).len(),
        cursors.len() + resumed[0].len(),
        "{frames:?}"
    );
}

/// `POST run` streams one run's plain AG-UI events and "ends after its RUN_FINISHED or
/// RUN_ERROR". When the log evicted events of the run before a slow reader got them, the
/// stream must not hang forever waiting for events that are gone: it ends with RUN_ERROR
/// (plain AG-UI has no gap event), code `evicted`.
#[test]
fn a_post_run_reader_behind_evicted_events_gets_run_error_and_the_end() {
    let mut n = Net::new(Host::new(sse_cfg(1.0), MemoryLog::new(4, 1 << 20)));
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(
        r#"{"threadId":"t","runId":"r-1","messages":[{"id":"u","role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    let c = n.host.run_agui(n.now, &input, None, "r", None).unwrap();
    n.stalled.push(c);
    n.pump();
    let op = n.turns.remove(0).operation_id;
    for i in 0..10 {
        n.host
            .emit(n.now, "t", &op, Event::text_content("m", format!("{i}")))
            .unwrap();
    }
    n.host
        .finish_turn(n.now, "t", &op, TurnOutcome::Completed)
        .unwrap();
    n.pump();
    n.stalled.clear();
    let in_flight = n.host.in_flight(c);
    n.host.sent(n.now, c, in_flight);
    n.pump();
    let got = n.take(c);
    let last = json(
        got.last()
            .unwrap()
            .strip_prefix("data: ")
            .unwrap()
            .trim_end(),
    );
    assert_eq!(last["type"], "RUN_ERROR", "{got:?}");
    assert_eq!(last["code"], "evicted");
    assert!(n.closed(c).is_some());
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

/// Inputs that wait behind a running turn are kept in memory until they run: a client that
/// sends without end must get `rejected` receipts past a bound, not grow the host's memory.
#[test]
fn waiting_inputs_are_bounded_per_thread() {
    let mut n = Net::new(Host::new(
        HostConfig {
            max_waiting_inputs: 3,
            ..HostConfig::default()
        },
        MemoryLog::default(),
    ));
    n.host.control(n.now, None, PROMPT, "r", None);
    let mut statuses = Vec::new();
    for i in 0..5 {
        let body =
            format!(r#"{{"threadId":"thread-1","input":{{"op":"followUp","message":"f{i}"}}}}"#);
        let a = json(&n.host.control(n.now, None, body.as_bytes(), "r", None).body);
        statuses.push((
            a["status"].as_str().unwrap().to_owned(),
            a["reason"].clone(),
        ));
    }
    assert_eq!(statuses[..3].iter().filter(|s| s.0 == "queued").count(), 3);
    assert_eq!(statuses[3].0, "rejected");
    assert_eq!(statuses[4].1, "queue_full");
    let snap = json(&n.host.snapshot("thread-1", None, "r").body);
    assert_eq!(snap["waitingInputs"].as_array().unwrap().len(), 3);
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

/// `GET run` of a run the thread never had: no stream that waits forever, a 404.
#[test]
fn get_run_of_an_unknown_run_is_404() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    let op = n.turns[0].operation_id.clone();
    assert_eq!(
        n.host
            .open_run(n.now, "thread-1", "no-such-run", None, "r")
            .unwrap_err()
            .status,
        404
    );
    assert!(n.host.open_run(n.now, "thread-1", &op, None, "r").is_ok());
}

/// "4403 | The user cannot read the thread, or lost access." A socket may subscribe to a
/// thread before its first input makes it. When another user's input then makes the thread
/// (and owns it, `membersOnly()`), the early subscriber must not read that user's events.
#[test]
fn a_subscriber_waiting_for_a_thread_that_another_user_makes_is_closed_4403() {
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
    assert!(got.iter().all(|f| f["type"] != "harness.event"), "{got:?}");
    assert_eq!(got.last().unwrap()["code"], "forbidden");
    assert_eq!(n.closed(bob), Some(close::FORBIDDEN));
    // The owner goes on reading.
    assert!(
        n.take(ann)
            .iter()
            .any(|s| json(s)["type"] == "harness.event")
    );
    assert_eq!(n.closed(ann), None);
}

/// A durable host restarts while a turn runs and an input waits. "Give each input an
/// inputId, and send the same id again after a lost answer. A prompt … with the same inputId
/// runs once": the retry after the restart gets the same receipt and starts nothing. The
/// waiting input settles (interrupted) instead of vanishing, and ids the host makes up
/// after the restart neither collide with client-chosen ones nor overflow.
#[test]
fn a_durable_restart_keeps_idempotency_settles_waiting_inputs_and_makes_fresh_ids() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let prompt =
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello","inputId":"my-1"}}"#;
    let first;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        first = json(&n.host.control(n.now, None, prompt, "r", None).body);
        assert_eq!(first["status"], "accepted");
        let q = json(
            &n.host
                .control(
                    n.now,
                    None,
                    br#"{"threadId":"thread-1","input":{"op":"followUp","message":"later","inputId":"f-1"}}"#,
                    "r",
                    None,
                )
                .body,
        );
        assert_eq!(q["status"], "queued");
        // A client-chosen inputId that looks like the host's own, at the top of u64.
        let big = json(
            &n.host
                .control(
                    n.now,
                    None,
                    br#"{"threadId":"thread-1","input":{"op":"append","message":"x","inputId":"in-18446744073709551615"}}"#,
                    "r",
                    None,
                )
                .body,
        );
        assert_eq!(big["status"], "accepted");
        n.pump();
        // The process dies here.
    }
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let again = json(&n.host.control(n.now, None, prompt, "r", None).body);
    assert_eq!(again, first);
    n.pump();
    assert!(
        n.turns.is_empty(),
        "the retried prompt ran again: {:?}",
        n.turns
    );
    // The waiting followUp settled, as interrupted.
    let c = n
        .host
        .open_sse(n.now, Some("thread-1"), None, None, None, None, "r")
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert!(
        frames
            .iter()
            .any(|f| f["event"]["name"] == "harness.input.settled"
                && f["event"]["value"]["inputId"] == "f-1"
                && f["event"]["value"]["outcome"] == "interrupted"),
        "{frames:?}"
    );
    // New ids: no panic, no collision.
    let fresh = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"prompt","message":"new"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(fresh["status"], "accepted");
    assert_ne!(fresh["inputId"], "in-18446744073709551615");
    assert_ne!(fresh["inputId"], "my-1");
    assert_ne!(fresh["operationId"], first["operationId"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ids the host makes up (`in-N`, `op-N`) must not collide, in one thread, with ids a client
/// chose (an `inputId`, a `POST run` runId): a collision would answer one input with
/// another's receipt, or give two runs one operationId.
#[test]
fn host_made_ids_do_not_collide_with_client_chosen_ones() {
    let mut n = net();
    // The client takes "in-1" for an append and "op-1" for a POST run.
    let a = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"append","message":"x","inputId":"in-1"}}"#,
                "r",
                None,
            )
            .body,
    );
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(
        r#"{"threadId":"thread-1","runId":"op-1","messages":[{"id":"u","role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    n.host.run_agui(n.now, &input, None, "r", None).unwrap();
    n.pump();
    let run = n.turns.remove(0);
    assert_eq!(run.operation_id, "op-1");
    n.host
        .finish_turn(n.now, "thread-1", "op-1", TurnOutcome::Completed)
        .unwrap();
    // The host's own ids for a prompt must be different ones.
    let p = json(&n.host.control(n.now, None, PROMPT, "r", None).body);
    assert_ne!(p["inputId"], "in-1");
    assert_ne!(p["operationId"], "op-1");
    // And the append's retry still gets the append's receipt.
    let again = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"append","message":"x","inputId":"in-1"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(again, a);
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

/// "If the client does not read for this long, the server sends slow_consumer and closes."
/// Not reading also means the transport does not take the next bytes at all: the host woke
/// the connection and nobody asked it for bytes (a socket write that never completes).
#[test]
fn a_connection_whose_writer_is_stuck_is_a_slow_consumer() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.pump();
    n.take(c);
    n.deaf.push(c);
    let t0 = n.now;
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    n.advance(Duration::from_secs(29));
    // The host knows when it must look again.
    assert!(n.host.poll_timeout().unwrap() <= t0 + Duration::from_secs(30));
    n.advance(Duration::from_secs(1));
    n.deaf.clear();
    // What is left to send: the heartbeat queued at 29 s, then the error; then the close.
    let left: Vec<Value> = std::iter::from_fn(|| n.host.poll_transmit(n.now, c))
        .map(|b| json(std::str::from_utf8(&b).unwrap()))
        .collect();
    assert_eq!(left.last().unwrap()["code"], "slow_consumer", "{left:?}");
    assert!(left.iter().all(|f| f["type"] != "harness.event"));
    assert_eq!(n.host.close_code(c), Some(close::SLOW_CONSUMER));
    n.pump();
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
    assert_eq!(n.host.close_code(c), None, "forgotten after disconnect");
}

/// `membersOnly()`: a thread belongs to the user who made it, and anyone else gets `403` /
/// 4403. On a durable host that must hold after a restart too, or every signed-in user
/// could read every thread once the host restarts.
#[test]
fn thread_owners_survive_a_durable_restart() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-owner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = HostConfig {
        access: AccessPolicy::MembersOnly,
        ..HostConfig::default()
    };
    {
        let mut n = Net::new(Host::new(cfg.clone(), FileLog::open(&dir).unwrap()));
        assert_eq!(
            n.host.control(n.now, Some("ann"), PROMPT, "r", None).status,
            200
        );
        n.pump();
    }
    let mut n = Net::new(Host::new(cfg, FileLog::open(&dir).unwrap()));
    let open = |n: &mut Net<FileLog>, user: &str| {
        n.host
            .open_sse(
                n.now,
                Some("thread-1"),
                Some("2"),
                None,
                None,
                Some(user),
                "r",
            )
            .map(|_| ())
            .map_err(|a| a.status)
    };
    assert_eq!(open(&mut n, "bob"), Err(403));
    assert_eq!(open(&mut n, "ann"), Ok(()));
    assert_eq!(
        n.host.control(n.now, Some("bob"), PROMPT, "r", None).status,
        403
    );
    assert_eq!(n.host.snapshot("thread-1", Some("bob"), "r").status, 403);
    let _ = std::fs::remove_dir_all(&dir);
}

/// "If the client does not read for this long, the server sends slow_consumer and closes."
/// Not reading does not need megabytes: bytes handed out and not taken by the client for
/// `slowConsumerMs` (under the buffer limit too) is a client that does not read.
#[test]
fn bytes_not_taken_for_slow_consumer_ms_close_4408_even_under_the_buffer_limit() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.stalled.push(c);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    assert!(n.host.in_flight(c) > 0 && n.host.in_flight(c) < 8 << 20);
    n.advance(Duration::from_secs(29));
    assert_eq!(n.closed(c), None);
    // Progress (the client took some bytes) starts the count again.
    n.host.sent(n.now, c, 1);
    n.advance(Duration::from_secs(29));
    assert_eq!(n.closed(c), None);
    n.advance(Duration::from_secs(1));
    assert_eq!(json(n.take(c).last().unwrap())["code"], "slow_consumer");
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
}

/// A client that reads everything is never a slow consumer, however long it stays idle.
#[test]
fn an_idle_client_that_reads_is_never_a_slow_consumer() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    for _ in 0..30 {
        n.advance(Duration::from_secs(7));
    }
    assert_eq!(n.closed(c), None);
    assert_eq!(n.host.in_flight(c), 0);
}

/// "`400`: `{ error }`. The input has a bad shape" (and on the socket, `invalid_frame` for
/// "a bad `input`"): the message of a message input is text, a message object or its
/// parts; `null`, a number or a boolean is no message, and must not run a turn.
#[test]
fn a_message_that_is_not_text_an_object_or_parts_is_a_bad_shape() {
    let mut n = net();
    for bad in ["null", "1", "true"] {
        for op in ["prompt", "steer", "followUp", "append"] {
            let body =
                format!(r#"{{"threadId":"thread-1","input":{{"op":"{op}","message":{bad}}}}}"#);
            let a = n.host.control(n.now, None, body.as_bytes(), "r", None);
            assert_eq!(a.status, 400, "{op} {bad}: {}", a.body);
            assert!(json(&a.body)["error"].as_str().unwrap().contains("message"));
        }
    }
    assert!(!n.host.has_thread("thread-1"));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"r-9","input":{"op":"prompt","message":null}}"#,
    );
    n.pump();
    let got: Vec<Value> = n.take(c).iter().map(|s| json(s)).collect();
    assert_eq!(got[1]["code"], "invalid_frame");
    assert_eq!(got[1]["requestId"], "r-9");
    assert!(n.turns.is_empty());
    // Text, a message object and parts are messages.
    for good in [
        r#""hi""#,
        r#"{"role":"user","content":"hi"}"#,
        r#"[{"type":"text","text":"hi"}]"#,
    ] {
        let body =
            format!(r#"{{"threadId":"thread-2","input":{{"op":"append","message":{good}}}}}"#);
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200,
            "{good}"
        );
    }
}

/// "`400`: … `threadId` is missing": an empty thread id is no thread, on every way in (the
/// socket's subscribe is an `invalid_frame` that does not close).
#[test]
fn an_empty_thread_id_is_refused_everywhere() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"","v":2}"#,
    );
    n.pump();
    let e = json(&n.take(c)[0]);
    assert_eq!(e["code"], "invalid_frame");
    assert_eq!(n.closed(c), None);
    // Still waiting for a real subscribe: an input is refused, and makes no thread "".
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"r","input":{"op":"prompt","message":"x"}}"#,
    );
    n.pump();
    assert_eq!(json(&n.take(c)[0])["code"], "invalid_frame");
    assert!(!n.host.has_thread(""));
    let typed = n.host.input(
        n.now,
        "",
        None,
        harness_tanstack::frame::Input::prompt("x"),
        None,
    );
    assert_eq!(typed.unwrap_err().status, 400);
    assert_eq!(
        n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"","input":{"op":"prompt","message":"x"}}"#,
                "r",
                None
            )
            .status,
        400
    );
    assert!(!n.host.has_thread(""));
    assert_eq!(n.host.stats().threads, 0);
}

/// Frames that wait for a client that does not read are bounded in bytes too, not only in
/// number: a client that sends again and again an input with a large `requestId` (each
/// receipt repeats it) and reads nothing is a slow consumer long before the host holds
/// gigabytes for it. A `harness.snapshot` it asks for is not held as bytes (it is taken
/// when it goes out, at its place in the stream), and is bounded in number.
#[test]
fn queued_frames_are_bounded_in_bytes() {
    let cfg = HostConfig {
        max_queued_bytes: 20_000,
        stream: StreamOptions {
            socket_buffer_bytes: Some(1.0),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        ..HostConfig::default()
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    n.host.control(n.now, None, PROMPT, "r", None);
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.stalled.push(c);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    let big = "x".repeat(5_000);
    for _ in 0..50 {
        n.host.handle_frame(
            n.now,
            c,
            &format!(
                r#"{{"type":"harness.input","requestId":"{big}","input":{{"op":"cancel","operationId":"nope"}}}}"#
            ),
        );
    }
    n.pump();
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
    let got = n.take(c);
    let bytes: usize = got.iter().map(String::len).sum();
    assert!(bytes < 20_000 + 6_000, "{bytes} bytes queued");
    assert_eq!(json(got.last().unwrap())["code"], "slow_consumer");

    // Snapshots asked again and again by a client that reads nothing.
    let cfg = HostConfig {
        max_queued_frames: 16,
        stream: StreamOptions {
            socket_buffer_bytes: Some(1.0),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        ..HostConfig::default()
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    n.host.control(n.now, None, PROMPT, "r", None);
    let big = "x".repeat(5_000);
    let body =
        format!(r#"{{"threadId":"thread-1","input":{{"op":"followUp","message":"{big}"}}}}"#);
    n.host.control(n.now, None, body.as_bytes(), "r", None);
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.stalled.push(c);
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    for _ in 0..50 {
        n.host
            .handle_frame(n.now, c, r#"{"type":"harness.snapshot"}"#);
        assert!(n.host.stats().queued_bytes < 1_000);
    }
    n.pump();
    assert_eq!(n.closed(c), Some(close::SLOW_CONSUMER));
    assert_eq!(json(n.take(c).last().unwrap())["code"], "slow_consumer");
}

/// A thread id is the client's own string: "`POST control`: the body is `{ threadId, input
/// }`", and "The first prompt also makes the thread." On a durable host a thread id too
/// long to be a file name is a thread like any other (not a `500`), and it keeps its
/// events and its owner over a restart.
#[test]
fn a_long_thread_id_makes_a_thread_on_a_durable_host_and_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-long-id-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = HostConfig {
        access: AccessPolicy::MembersOnly,
        ..HostConfig::default()
    };
    let id = format!("tenant-42/project-7/{}", "thread-".repeat(40));
    assert!(id.len() > 255);
    let body =
        serde_json::json!({ "threadId": id, "input": { "op": "prompt", "message": "Hello" } })
            .to_string();
    {
        let mut n = Net::new(Host::new(cfg.clone(), FileLog::open(&dir).unwrap()));
        let a = n
            .host
            .control(n.now, Some("ann"), body.as_bytes(), "r", None);
        assert_eq!(a.status, 200, "{}", a.body);
        n.pump();
        reply(&mut n, "Hi");
    }
    let mut n = Net::new(Host::new(cfg, FileLog::open(&dir).unwrap()));
    assert!(n.host.has_thread(&id));
    assert_eq!(n.host.snapshot(&id, Some("bob"), "r").status, 403);
    let c = n
        .host
        .open_sse(n.now, Some(&id), Some("2"), None, None, Some("ann"), "r")
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(frames[0]["threadId"], id.as_str());
    assert!(
        frames
            .iter()
            .any(|f| f["event"]["delta"] == "Hi" && f["threadId"] == id.as_str())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The spec sets no length for a thread id; this host takes up to
/// `HostConfig::max_thread_id_bytes` (1 KiB by default). A longer one is refused at every
/// way in as a bad request, like a missing one: "`400`: `{ error }`. The input has a bad
/// shape, or `threadId` is missing.", and on the socket `invalid_frame`, which "does not
/// close". Never a `500`.
#[test]
fn a_thread_id_over_the_limit_is_a_bad_request_everywhere() {
    let mut n = net();
    assert_eq!(n.host.config().max_thread_id_bytes, 1024);
    let ok = "t".repeat(1024);
    let long = "t".repeat(1025);
    let body = |id: &str| {
        serde_json::json!({ "threadId": id, "input": { "op": "prompt", "message": "x" } })
            .to_string()
    };
    let a = n
        .host
        .control(n.now, None, body(&long).as_bytes(), "r", None);
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        json(&a.body)["error"]
            .as_str()
            .unwrap()
            .contains("threadId")
    );
    let typed = n.host.input(
        n.now,
        &long,
        None,
        harness_tanstack::frame::Input::prompt("x"),
        None,
    );
    assert_eq!(typed.unwrap_err().status, 400);
    let sse = n
        .host
        .open_sse(n.now, Some(&long), Some("2"), None, None, None, "r");
    assert_eq!(sse.unwrap_err().status, 400);
    let run: harness_tanstack::agui::RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": long, "runId": "run-1", "messages": [{"id": "u", "role": "user", "content": "hi"}]
    }))
    .unwrap();
    assert_eq!(
        n.host
            .run_agui(n.now, &run, None, "r", None)
            .unwrap_err()
            .status,
        400
    );
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    let sub = |id: &str| {
        serde_json::json!({ "type": "harness.subscribe", "threadId": id, "v": 2 }).to_string()
    };
    n.host.handle_frame(n.now, c, &sub(&long));
    n.pump();
    assert_eq!(json(&n.take(c)[0])["code"], "invalid_frame");
    assert_eq!(n.closed(c), None);
    assert_eq!(n.host.stats().threads, 0);
    assert_eq!(n.host.stats().watched_threads, 0);
    // At the limit: a thread.
    n.host.handle_frame(n.now, c, &sub(&ok));
    assert_eq!(
        n.host
            .control(n.now, None, body(&ok).as_bytes(), "r", None)
            .status,
        200
    );
    n.pump();
    assert_eq!(json(&n.take(c)[0])["type"], "harness.hello");
    assert!(n.host.has_thread(&ok));
    // The limit is the host's to set.
    let mut n = Net::new(Host::new(
        HostConfig {
            max_thread_id_bytes: 4096,
            ..HostConfig::default()
        },
        MemoryLog::default(),
    ));
    assert_eq!(
        n.host
            .control(n.now, None, body(&long).as_bytes(), "r", None)
            .status,
        200
    );
}

/// "Give each input an `inputId`, and send the same id again after a lost answer. A
/// `prompt`, `command`, `agent`, or `append` input with the same `inputId` runs once." A
/// prompt that waited behind a turn when a durable host stopped never ran: it settles
/// `interrupted` (the crate README: "send them again"). Sent again with its `inputId`, it
/// must run, not get back the old `queued` receipt of an input that no longer waits. The
/// same holds for a prompt whose turn the host stopped before it was applied.
#[test]
fn a_prompt_that_waited_when_a_durable_host_stopped_runs_when_sent_again() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-requeue-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first =
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"one","inputId":"p-1"}}"#;
    let second =
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"two","inputId":"p-2"}}"#;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        assert_eq!(
            json(&n.host.control(n.now, None, first, "r", None).body)["status"],
            "accepted"
        );
        assert_eq!(
            json(&n.host.control(n.now, None, second, "r", None).body)["status"],
            "queued"
        );
        n.pump();
        // The process dies here, with p-2 waiting behind p-1's turn.
    }
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    // p-1 ran (its turn was cut off): its receipt stands and it does not run again.
    let again = json(&n.host.control(n.now, None, first, "r", None).body);
    assert_eq!(again["status"], "accepted");
    n.pump();
    assert!(n.turns.is_empty(), "p-1 ran twice: {:?}", n.turns);
    // p-2 never ran: sent again, it runs now, once.
    let retry = json(&n.host.control(n.now, None, second, "r", None).body);
    n.pump();
    assert_eq!(retry["status"], "accepted", "{retry}");
    assert_eq!(retry["inputId"], "p-2");
    assert_eq!(n.turns.len(), 1, "{:?}", n.turns);
    assert_eq!(n.turns[0].input_id, "p-2");
    assert_eq!(n.turns[0].message.text(), "two");
    let once = json(&n.host.control(n.now, None, second, "r", None).body);
    n.pump();
    assert_eq!(once, retry, "the same inputId runs once");
    assert_eq!(n.turns.len(), 1);
    // And over one more restart, the receipt is the one it got when it ran.
    drop(n);
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let later = json(&n.host.control(n.now, None, second, "r", None).body);
    n.pump();
    assert_eq!(later, retry);
    assert!(n.turns.is_empty(), "p-2 ran twice: {:?}", n.turns);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record of a durable log that no longer reads (a corrupt line in the middle of the
/// file, garbage written after the last record) is an event "the server no longer has":
/// "Then the stream sends one `CUSTOM` event with the name `harness.gap`, and continues
/// from the first event that it has", with "`resumeAt` … the cursor of this event. The
/// stream continues after it." Closing with `internal` ("connect again from the last
/// cursor") sent every reader behind the record back to the same record, for ever.
#[test]
fn a_record_that_no_longer_reads_is_a_gap_not_a_stream_that_never_passes_it() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        for i in 1..=3 {
            n.host
                .emit(n.now, "t", "op", Event::text_content("m", format!("{i}")))
                .unwrap();
        }
    }
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The middle record is overwritten in place, and garbage follows the last one.
    let bad = format!(
        "{}\n{}\n{}\ngarbage\n",
        lines[0],
        "x".repeat(lines[1].len()),
        lines[2]
    );
    std::fs::write(&file, bad).unwrap();
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let after = n
        .host
        .emit(n.now, "t", "op", Event::text_content("m", "after"))
        .unwrap();
    assert_eq!(after.as_str(), "5");
    for from in [None, Some("1")] {
        let c = n
            .host
            .open_sse(n.now, Some("t"), None, from, None, None, "r")
            .unwrap();
        n.pump();
        let frames = data_frames(&n.take(c));
        let seen: Vec<(String, String)> = frames
            .iter()
            .skip(1)
            .map(|f| {
                let ev = &f["event"];
                let what = if ev["name"] == "harness.gap" {
                    format!(
                        "gap {} {} {}",
                        ev["value"]["from"], ev["value"]["resumeAt"], ev["value"]["reason"]
                    )
                } else {
                    ev["delta"].to_string()
                };
                (f["cursor"].as_str().unwrap().to_owned(), what)
            })
            .collect();
        let mut want = vec![
            ("2".into(), r#"gap "1" "2" "truncated""#.into()),
            ("3".into(), r#""3""#.into()),
            ("4".into(), r#"gap "3" "4" "truncated""#.into()),
            ("5".into(), r#""after""#.into()),
        ];
        if from.is_none() {
            want.insert(0, ("1".into(), r#""1""#.into()));
        }
        assert_eq!(seen, want, "from {from:?}");
        assert_eq!(n.closed(c), None, "from {from:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
