//! The host against "Stream values" of the spec (tanstack-harness-wire-protocol.md, version
//! 2): heartbeats, buffer limits, slow consumers, and what waits for a client that does not
//! read. Each test quotes the words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::field_reassign_with_default)]

mod support;

use std::time::Duration;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::frame::close;
use harness_tanstack::host::{Host, HostConfig, Transport};
use harness_tanstack::http::{StreamConfig, StreamOptions};
use harness_tanstack::log::MemoryLog;
use serde_json::Value;
use support::{Net, PROMPT, json, net};

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
                AguiEvent::text_content("m", format!("chunk {i}")),
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
