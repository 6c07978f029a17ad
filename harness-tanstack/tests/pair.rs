//! Client and host driven against each other with a virtual clock: disconnect mid-turn,
//! reconnect from the cursor, eviction gap, slow consumer, duplicate inputId, idle
//! detection, the run tree; and a property test that the client never delivers an event
//! twice or skips one without a gap.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

mod support;

use std::time::Duration;

use harness_core::Cursor;
use harness_tanstack::agui::{AguiEvent, RunStarted};
use harness_tanstack::client::{Action, Client, ClientConfig, ClientEvent};
use harness_tanstack::frame::{ErrorCode, Input, ReceiptStatus, close};
use harness_tanstack::host::{ConnId, Host, HostConfig, Transport, TurnOutcome};
use harness_tanstack::http::StreamOptions;
use harness_tanstack::log::{EventLog, MemoryLog};
use proptest::prelude::*;
use support::Net;

/// A client on a socket to the host.
struct Pair {
    net: Net<MemoryLog>,
    client: Client,
    conn: Option<ConnId>,
    delivered: Vec<(String, AguiEvent)>,
    gaps: Vec<(Cursor, Cursor)>,
    closes: Vec<Action>,
    receipts: Vec<(String, String, ReceiptStatus, Option<String>)>,
    errors: Vec<(Option<ErrorCode>, Action)>,
}

impl Pair {
    fn new(log: MemoryLog, cfg: HostConfig) -> Pair {
        Pair {
            net: Net::new(Host::new(cfg, log)),
            client: Client::new(ClientConfig::new("thread-1")),
            conn: None,
            delivered: Vec::new(),
            gaps: Vec::new(),
            closes: Vec::new(),
            receipts: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn connect(&mut self) {
        let now = self.net.now;
        let c = self.net.host.connect(now, Transport::WebSocket, None, "up");
        self.conn = Some(c);
        self.client.connect(now);
        self.flush();
    }

    fn disconnect(&mut self) {
        if let Some(c) = self.conn.take() {
            self.net.host.disconnect(c);
            self.client.handle_close(self.net.now, None);
        }
        self.drain_client();
    }

    /// Client frames to the host, host frames to the client, until quiet.
    fn flush(&mut self) {
        loop {
            let mut moved = false;
            if let Some(c) = self.conn {
                while let Some(f) = self.client.poll_transmit() {
                    self.net.host.handle_frame(self.net.now, c, &f);
                    moved = true;
                }
            }
            self.net.pump();
            if let Some(c) = self.conn {
                for f in self.net.take(c) {
                    self.client.handle_frame(self.net.now, &f);
                    moved = true;
                }
                if let Some(code) = self.net.closed(c) {
                    self.conn = None;
                    self.client.handle_close(self.net.now, Some(code));
                    self.net.wires.remove(&c);
                }
            }
            self.drain_client();
            if !moved {
                break;
            }
        }
    }

    fn drain_client(&mut self) {
        while let Some(e) = self.client.poll_event() {
            match e {
                ClientEvent::Event(d) => {
                    self.delivered.push((d.cursor.as_str().to_owned(), d.event))
                }
                ClientEvent::Gap(r) => self.gaps.push((r.from, r.resume_at)),
                ClientEvent::Closed(a) => self.closes.push(a),
                ClientEvent::Receipt(r) => {
                    self.receipts
                        .push((r.request_id, r.input_id, r.status, r.operation_id))
                }
                ClientEvent::Error { code, action, .. } => self.errors.push((code, action)),
                _ => {}
            }
        }
    }

    fn emit(&mut self, op: &str, ev: AguiEvent) {
        let now = self.net.now;
        self.net.host.emit(now, "thread-1", op, ev).unwrap();
        self.flush();
    }

    fn advance(&mut self, d: Duration) {
        self.net.advance(d);
        self.client.handle_timeout(self.net.now);
        self.flush();
    }

    /// The cursors of the log, in order.
    fn log_cursors(&mut self) -> Vec<String> {
        let log = self.net.host.log();
        (log.first_seq("thread-1")..=log.head_seq("thread-1"))
            .map(|s| s.to_string())
            .collect()
    }
}

fn delivered_cursors(p: &Pair) -> Vec<String> {
    p.delivered.iter().map(|(c, _)| c.clone()).collect()
}

#[test]
fn disconnect_mid_turn_then_reconnect_from_the_cursor_gets_every_event_once() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    p.client.send_input(Input::prompt("Hello"));
    p.flush();
    let op = p.net.turns[0].operation_id.clone();
    p.emit(&op, AguiEvent::text_content("m", "one "));
    // "A disconnect does not stop a running turn."
    p.disconnect();
    p.emit(&op, AguiEvent::text_content("m", "two "));
    p.emit(&op, AguiEvent::text_content("m", "three"));
    p.connect(); // subscribes with from = last cursor
    p.emit(&op, AguiEvent::text_content("m", "four"));
    assert_eq!(delivered_cursors(&p), p.log_cursors());
    assert!(p.gaps.is_empty());
}

#[test]
fn eviction_gap_is_an_explicit_instruction_and_the_client_continues_from_resume_at() {
    let mut p = Pair::new(MemoryLog::new(4, 1 << 20), HostConfig::default());
    p.connect();
    p.client.send_input(Input::prompt("Hello"));
    p.flush();
    let op = p.net.turns[0].operation_id.clone();
    p.disconnect();
    for i in 0..10 {
        p.emit(&op, AguiEvent::text_content("m", format!("{i}")));
    }
    p.connect();
    assert_eq!(p.gaps.len(), 1);
    let (from, resume_at) = p.gaps[0].clone();
    let first = p.net.host.log().first_seq("thread-1");
    assert_eq!(resume_at.as_str(), (first - 1).to_string());
    assert_ne!(from, resume_at);
    // "Store resumeAt as your cursor" (the client did) and "On the socket, send harness.snapshot."
    let after: Vec<String> = delivered_cursors(&p)
        .into_iter()
        .skip_while(|c| c.parse::<u64>().unwrap() < first)
        .collect();
    assert_eq!(after, p.log_cursors());
    assert!(p.net.take(ConnId(0)).is_empty());
}

#[test]
fn duplicate_input_id_after_a_lost_answer_runs_once() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    let input = Input::prompt("Hello").with_input_id("in-42");
    let req = p.client.send_input(input);
    // The frame reaches the host, but the connection dies before the receipt arrives.
    let c = p.conn.unwrap();
    let f = p.client.poll_transmit().unwrap();
    p.net.host.handle_frame(p.net.now, c, &f);
    p.disconnect();
    assert_eq!(p.client.pending_inputs(), vec![(req.as_str(), "in-42")]);
    p.connect();
    // "Give each input an inputId, and send the same id again after a lost answer."
    let retried = p.client.retry_pending();
    p.flush();
    assert_eq!(p.net.turns.len(), 1);
    let r = p.receipts.iter().find(|r| r.0 == retried[0]).unwrap();
    assert_eq!((r.1.as_str(), &r.2), ("in-42", &ReceiptStatus::Accepted));
    assert_eq!(r.3.as_deref(), Some(p.net.turns[0].operation_id.as_str()));
}

#[test]
fn slow_consumer_resubscribes_and_loses_nothing() {
    let mut cfg = HostConfig::default();
    cfg.stream = StreamOptions {
        socket_buffer_bytes: Some(400.0),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let mut p = Pair::new(MemoryLog::default(), cfg);
    p.connect();
    p.client.send_input(Input::prompt("Hello"));
    p.flush();
    let op = p.net.turns[0].operation_id.clone();
    p.net.stalled.push(p.conn.unwrap());
    for i in 0..15 {
        p.emit(&op, AguiEvent::text_content("m", format!("part {i}")));
    }
    p.advance(Duration::from_secs(31));
    // "4408 | The client read too slowly. | Subscribe again from the last cursor."
    assert!(p.errors.iter().any(
        |(c, a)| *c == Some(ErrorCode::SlowConsumer) && matches!(a, Action::Resubscribe { .. })
    ));
    assert!(p.conn.is_none());
    p.connect();
    assert_eq!(delivered_cursors(&p), p.log_cursors());
}

#[test]
fn close_codes_and_error_codes_map_to_what_the_client_must_do() {
    let t = std::time::Instant::now();
    let cases = [
        (Some(close::UNAUTHORIZED), Action::SignIn),
        (Some(close::FORBIDDEN), Action::Stop),
        (Some(close::UNSUPPORTED_VERSION), Action::Stop),
        (
            Some(close::SLOW_CONSUMER),
            Action::Resubscribe {
                from: Some(Cursor::new("7")),
            },
        ),
        (
            Some(close::FEED_ENDED),
            Action::Resubscribe {
                from: Some(Cursor::new("7")),
            },
        ),
        (
            None,
            Action::Reconnect {
                from: Some(Cursor::new("7")),
            },
        ),
    ];
    for (code, want) in cases {
        let mut c = Client::resume(ClientConfig::new("t"), Cursor::new("7"));
        c.connect(t);
        assert_eq!(c.handle_close(t, code), want, "{code:?}");
    }
    for (code, want) in [
        ("unauthorized", Action::SignIn),
        ("forbidden", Action::Stop),
        ("unsupported_version", Action::Stop),
        ("slow_consumer", Action::Resubscribe { from: None }),
        ("invalid_frame", Action::Continue),
    ] {
        let mut c = Client::new(ClientConfig::new("t"));
        c.connect(t);
        c.handle_frame(
            t,
            &format!(r#"{{"type":"harness.error","message":"m","code":"{code}","requestId":"x"}}"#),
        );
        let got = std::iter::from_fn(|| c.poll_event()).find_map(|e| match e {
            ClientEvent::Error { action, .. } => Some(action),
            _ => None,
        });
        assert_eq!(got, Some(want), "{code}");
    }
    // "When the host refuses one input, no [close]": an error for a pending request goes on.
    let mut c = Client::new(ClientConfig::new("t"));
    c.connect(t);
    let req = c.send_input(Input::prompt("x"));
    c.handle_frame(
        t,
        &format!(
            r#"{{"type":"harness.error","message":"m","code":"forbidden","requestId":"{req}"}}"#
        ),
    );
    assert!(std::iter::from_fn(|| c.poll_event()).any(|e| matches!(
        e,
        ClientEvent::Error {
            action: Action::Continue,
            ..
        }
    )));
    assert!(c.is_connected());
}

#[test]
fn idle_for_60_seconds_means_reconnect_and_pings_keep_it_alive() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    // Heartbeats every 20 s keep bytes coming: no reconnect.
    for _ in 0..10 {
        p.advance(Duration::from_secs(20));
    }
    assert!(p.closes.is_empty());
    // A dead connection: no bytes at all for 60 s.
    let mut c = Client::new(ClientConfig::new("t"));
    let t0 = std::time::Instant::now();
    c.connect(t0);
    c.handle_timeout(t0 + Duration::from_secs(59));
    assert_eq!(c.poll_event(), None);
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(60)));
    c.handle_timeout(t0 + Duration::from_secs(60));
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::Closed(Action::Reconnect { from: None }))
    );
}

#[test]
fn events_are_grouped_into_the_run_tree() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    let run = |id: &str, parent: Option<&str>| {
        AguiEvent::RunStarted(RunStarted {
            thread_id: "thread-1".into(),
            run_id: id.into(),
            parent_run_id: parent.map(str::to_owned),
            ..Default::default()
        })
    };
    p.emit("op-lead", run("op-lead", None));
    p.emit("op-a", run("op-a", Some("op-lead")));
    p.emit("op-b", run("op-b", Some("op-lead")));
    p.emit("op-a", AguiEvent::text_content("m", "from a"));
    // "To rebuild the tree, keep the parentRunId of the RUN_STARTED of each operationId."
    let tree = p.client.run_tree();
    assert_eq!(tree["op-lead"], None);
    assert_eq!(tree["op-a"].as_deref(), Some("op-lead"));
    assert_eq!(tree["op-b"].as_deref(), Some("op-lead"));
    assert_eq!(
        p.net.host.run_tree("thread-1")["op-b"].as_deref(),
        Some("op-lead")
    );
}

#[test]
fn the_gap_on_sse_tells_the_app_to_reload_over_http() {
    let mut net = Net::new(Host::new(HostConfig::default(), MemoryLog::new(3, 1 << 20)));
    net.host.control(
        net.now,
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#,
        "r",
        None,
    );
    net.pump();
    let op = net.turns[0].operation_id.clone();
    for i in 0..6 {
        net.host
            .emit(
                net.now,
                "thread-1",
                &op,
                AguiEvent::text_content("m", format!("{i}")),
            )
            .unwrap();
    }
    let mut c = Client::resume(ClientConfig::new("thread-1"), Cursor::new("1"));
    let (query, last_id) = c.connect_sse(net.now);
    assert_eq!(query, "threadId=thread-1&v=2");
    let conn = net
        .host
        .open_sse(
            net.now,
            Some("thread-1"),
            Some("2"),
            None,
            last_id.as_deref(),
            None,
            "r",
        )
        .unwrap();
    net.pump();
    for b in net.take(conn) {
        c.handle_sse_bytes(net.now, b.as_bytes());
    }
    let evs: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event()).collect();
    assert!(matches!(&evs[1], ClientEvent::Gap(r) if r.from == "1"));
    // On SSE the client does not send harness.snapshot: the app loads GET snapshot and GET transcript.
    assert_eq!(c.poll_transmit(), None);
    let _ = net
        .host
        .finish_turn(net.now, "thread-1", &op, TurnOutcome::Completed);
}

#[derive(Clone, Debug)]
enum Step {
    Emit(u8),
    Disconnect,
    Connect,
    Stall,
    Advance(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u8..4).prop_map(Step::Emit),
        1 => Just(Step::Disconnect),
        2 => Just(Step::Connect),
        1 => Just(Step::Stall),
        1 => (1u8..40).prop_map(Step::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the disconnects, stalls and evictions, every event the client delivers is
    /// delivered once, in log order, and any event it misses is covered by a gap.
    #[test]
    fn never_twice_never_skipped_without_a_gap(steps in prop::collection::vec(step(), 1..60), cap in 3usize..40) {
        let mut cfg = HostConfig::default();
        cfg.stream = StreamOptions { socket_buffer_bytes: Some(500.0), ..Default::default() }.validate().unwrap();
        let mut p = Pair::new(MemoryLog::new(cap, 1 << 20), cfg);
        p.connect();
        let mut n = 0;
        for s in steps {
            match s {
                Step::Emit(k) => for _ in 0..k { n += 1; p.emit("op-1", AguiEvent::text_content("m", format!("{n}"))); },
                Step::Disconnect => p.disconnect(),
                Step::Connect => if p.conn.is_none() { p.connect() },
                Step::Stall => if let Some(c) = p.conn { p.net.stalled.push(c) },
                Step::Advance(s) => p.advance(Duration::from_secs(u64::from(s))),
            }
        }
        p.net.stalled.clear();
        if p.conn.is_none() { p.connect(); } else { p.disconnect(); p.connect(); }
        let got: Vec<u64> = delivered_cursors(&p).iter().map(|c| c.parse().unwrap()).collect();
        // never twice, always in order
        prop_assert!(got.windows(2).all(|w| w[0] < w[1]), "{:?}", got);
        // a skip only across a gap: each jump starts where a gap resumed
        let resumes: Vec<u64> = p.gaps.iter().map(|g| g.1.as_str().parse().unwrap()).collect();
        let mut prev = 0u64;
        for c in &got {
            // With no cursor yet, "the stream starts at the first event of the thread" that
            // the host still has: the client loads the snapshot and transcript first.
            if prev != 0 && *c != prev + 1 {
                prop_assert!(resumes.contains(&(c - 1)), "skip {prev} -> {c} without a gap; gaps {:?}", resumes);
            }
            prev = *c;
        }
        // and the client ends at the head of the log
        let head = p.net.host.log().head_seq("thread-1");
        if head > 0 {
            prop_assert_eq!(p.client.last_cursor().map(|c| c.as_str().to_owned()), Some(head.to_string()));
        }
    }

    /// Random frames never panic the client, and it never delivers a cursor twice between
    /// two gaps (a gap resets what was built from events: the events after it are new).
    #[test]
    fn random_frames_never_panic_the_client(frames in prop::collection::vec(prop_oneof![
        (0u8..6).prop_map(|c| format!(r#"{{"type":"harness.event","cursor":"{c}","threadId":"t","operationId":"o","event":{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}}}}"#)),
        Just(r#"{"type":"harness.event","cursor":"9","threadId":"t","operationId":"s","event":{"type":"CUSTOM","name":"harness.gap","value":{"from":"1","resumeAt":"9","reason":"evicted"}}}"#.to_string()),
        Just(r#"{"type":"harness.receipt","requestId":"req-1","status":"accepted"}"#.to_string()),
        Just(r#"{"type":"harness.error","message":"m","code":"internal"}"#.to_string()),
        Just(r#"{"type":"harness.ping"}"#.to_string()),
        Just(r#"{"type":"harness.hello","v":2}"#.to_string()),
        ".{0,40}",
    ], 0..40)) {
        let t = std::time::Instant::now();
        let mut c = Client::new(ClientConfig::new("t"));
        c.connect(t);
        let mut seen = std::collections::HashSet::new();
        for f in frames {
            c.handle_frame(t, &f);
            c.handle_sse_bytes(t, f.as_bytes());
            while let Some(e) = c.poll_event() {
                match e {
                    ClientEvent::Event(d) => prop_assert!(seen.insert(d.cursor.as_str().to_owned())),
                    ClientEvent::Gap(_) => seen.clear(),
                    _ => {}
                }
            }
        }
    }
}

/// A memory host that restarted: the client's cursor is unknown to it, so the stream starts
/// with `harness.gap` and the events after it reuse cursors the client saw before the
/// restart. "When you get harness.gap … 1. Delete the state that you built from events."
/// The events after the gap are new: the client must deliver them, not drop them as replays.
#[test]
fn after_a_gap_events_with_cursors_seen_before_it_are_delivered() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    for i in 0..6 {
        p.emit("op-1", AguiEvent::text_content("m", format!("old {i}")));
    }
    assert_eq!(delivered_cursors(&p), ["1", "2", "3", "4", "5", "6"]);
    p.disconnect();
    // The host restarts with an empty memory; the thread gets three new events.
    p.net = Net::new(Host::new(HostConfig::default(), MemoryLog::default()));
    for i in 0..3 {
        let now = p.net.now;
        p.net
            .host
            .emit(
                now,
                "thread-1",
                "op-9",
                AguiEvent::text_content("m", format!("new {i}")),
            )
            .unwrap();
    }
    p.delivered.clear();
    p.connect(); // from "6": a cursor this host never handed out
    assert_eq!(p.gaps.len(), 1);
    assert_eq!(p.gaps[0].0, "6");
    let got: Vec<(String, String)> = p
        .delivered
        .iter()
        .map(|(c, e)| match e {
            AguiEvent::TextMessageContent(t) => (c.clone(), t.delta.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("1".to_string(), "new 0".to_string()),
            ("2".into(), "new 1".into()),
            ("3".into(), "new 2".into())
        ]
    );
    assert_eq!(p.client.last_cursor().map(|c| c.as_str()), Some("3"));
}

/// An error frame that ends the stream comes before the close itself. The close must still
/// answer what to do (the action of the error and of its close code), not "continue": on
/// SSE there is no close code at all, only the end of the body after the error.
#[test]
fn the_close_after_a_closing_error_still_says_what_to_do() {
    let t = std::time::Instant::now();
    for (code, close_code, want) in [
        ("unauthorized", Some(close::UNAUTHORIZED), Action::SignIn),
        ("forbidden", Some(close::FORBIDDEN), Action::Stop),
        (
            "unsupported_version",
            Some(close::UNSUPPORTED_VERSION),
            Action::Stop,
        ),
        // SSE: "it sends one error frame and closes the stream" — no close code.
        ("unsupported_version", None, Action::Stop),
        (
            "slow_consumer",
            Some(close::SLOW_CONSUMER),
            Action::Resubscribe {
                from: Some(Cursor::new("7")),
            },
        ),
        (
            "internal",
            Some(close::FEED_ENDED),
            Action::Resubscribe {
                from: Some(Cursor::new("7")),
            },
        ),
    ] {
        let mut c = Client::resume(ClientConfig::new("t"), Cursor::new("7"));
        c.connect(t);
        c.handle_frame(
            t,
            &format!(
                r#"{{"type":"harness.error","message":"m","code":"{code}","requestId":"up"}}"#
            ),
        );
        assert_eq!(c.handle_close(t, close_code), want, "{code} {close_code:?}");
        // A second close of the same connection says the same, and reports nothing new.
        assert_eq!(c.handle_close(t, close_code), want, "{code} twice");
        let closed: Vec<ClientEvent> = std::iter::from_fn(|| c.poll_event())
            .filter(|e| matches!(e, ClientEvent::Closed(_)))
            .collect();
        assert!(closed.len() <= 1, "{code}: {closed:?}");
    }
    // The idle timeout already said "reconnect"; the close of the dead socket agrees.
    let mut c = Client::resume(ClientConfig::new("t"), Cursor::new("7"));
    c.connect(t);
    c.handle_timeout(t + Duration::from_secs(60));
    let want = Action::Reconnect {
        from: Some(Cursor::new("7")),
    };
    assert_eq!(c.handle_close(t + Duration::from_secs(60), None), want);
    // A new connection starts afresh: its own close is mapped from its own code.
    c.connect(t);
    assert_eq!(c.handle_close(t, Some(close::FORBIDDEN)), Action::Stop);
}

/// "The socket handles the frames of one connection in the order they came": inputs sent
/// again after a reconnect must go in the order they were first sent, also past nine.
#[test]
fn retried_inputs_keep_their_order() {
    let t = std::time::Instant::now();
    let mut c = Client::new(ClientConfig::new("t"));
    c.connect(t);
    let _ = c.poll_transmit();
    for i in 0..12 {
        c.send_input(Input::prompt(&format!("m{i}")).with_input_id(format!("in-{i}")));
    }
    while c.poll_transmit().is_some() {}
    c.handle_close(t, None);
    c.connect(t);
    let _ = c.poll_transmit();
    c.retry_pending();
    let order: Vec<String> = std::iter::from_fn(|| c.poll_transmit())
        .map(|f| {
            serde_json::from_str::<serde_json::Value>(&f).unwrap()["input"]["inputId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let want: Vec<String> = (0..12).map(|i| format!("in-{i}")).collect();
    assert_eq!(order, want);
}

/// "To rebuild the tree, keep the `parentRunId` of the `RUN_STARTED` of each
/// `operationId`." A host can start runs without end, so the client keeps at most
/// `max_runs` of them: the oldest runs that ended (`RUN_FINISHED` / `RUN_ERROR`) go first,
/// and only when none has ended, the oldest of all. A run that still streams keeps its
/// parent.
#[test]
fn the_run_tree_is_bounded_and_forgets_the_oldest_ended_runs_first() {
    let now = std::time::Instant::now();
    let mut cfg = ClientConfig::new("thread-1");
    assert_eq!(cfg.max_runs, 4096);
    cfg.max_runs = 4;
    let mut c = Client::new(cfg);
    c.connect(now);
    let mut cursor = 0;
    let mut frame = |c: &mut Client, op: &str, event: serde_json::Value| {
        cursor += 1;
        let f = serde_json::json!({
            "type": "harness.event", "cursor": cursor.to_string(), "threadId": "thread-1",
            "operationId": op, "event": event,
        });
        c.handle_frame(now, &f.to_string());
    };
    let start = |c: &mut Client,
                 f: &mut dyn FnMut(&mut Client, &str, serde_json::Value),
                 op: &str,
                 parent: Option<&str>| {
        let mut e = serde_json::json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": op});
        if let Some(p) = parent {
            e["parentRunId"] = p.into();
        }
        f(c, op, e);
    };
    start(&mut c, &mut frame, "lead", None);
    start(&mut c, &mut frame, "a", Some("lead"));
    start(&mut c, &mut frame, "b", Some("lead"));
    start(&mut c, &mut frame, "c", Some("lead"));
    frame(
        &mut c,
        "b",
        serde_json::json!({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "b"}),
    );
    frame(
        &mut c,
        "a",
        serde_json::json!({"type": "RUN_ERROR", "message": "failed"}),
    );
    // Full: a new run pushes out the oldest run that ended ("a", started before "b").
    start(&mut c, &mut frame, "d", Some("lead"));
    let mut runs: Vec<&String> = c.run_tree().keys().collect();
    runs.sort();
    assert_eq!(runs, ["b", "c", "d", "lead"]);
    start(&mut c, &mut frame, "e", Some("lead"));
    let mut runs: Vec<&String> = c.run_tree().keys().collect();
    runs.sort();
    assert_eq!(runs, ["c", "d", "e", "lead"]);
    // None has ended: the oldest of all goes.
    start(&mut c, &mut frame, "f", Some("c"));
    let mut runs: Vec<&String> = c.run_tree().keys().collect();
    runs.sort();
    assert_eq!(runs, ["c", "d", "e", "f"]);
    // A hostile host that starts and ends runs without end: the tree stays bounded, and a
    // run that still streams keeps its parent.
    for i in 0..10_000 {
        let op = format!("x{i}");
        start(&mut c, &mut frame, &op, Some("f"));
        frame(
            &mut c,
            &op,
            serde_json::json!({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": op}),
        );
        assert!(c.run_tree().len() <= 4);
    }
    assert_eq!(c.run_tree()["f"].as_deref(), Some("c"));
    let _ = std::iter::from_fn(|| c.poll_event()).count();
    frame(
        &mut c,
        "f",
        serde_json::json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "still here"}),
    );
    let Some(ClientEvent::Event(ev)) = c.poll_event() else {
        panic!()
    };
    assert_eq!(ev.parent_run_id.as_deref(), Some("c"));
}

/// "Give each input an inputId, and send the same id again after a lost answer. A `prompt`,
/// `command`, `agent`, or `append` input with the same `inputId` runs once." Only those
/// four: a `followUp` (or a `steer`) sent again runs again. The reconnect procedure must not
/// send one again on its own: a follow-up whose answer was lost was queued twice (two turns,
/// and two waiting inputs with one `inputId` for `cancelInput` / `setDelivery` to name). The
/// client hands it back to the app as in doubt, and still retries the prompt.
#[test]
fn the_reconnect_retries_only_inputs_that_run_once() {
    let mut p = Pair::new(MemoryLog::default(), HostConfig::default());
    p.connect();
    p.client.send_input(Input::prompt("Hello"));
    p.flush();
    assert_eq!(p.net.turns.len(), 1);
    // While the turn runs: a follow-up and a prompt reach the host, their answers are lost.
    let follow: Input =
        serde_json::from_str(r#"{"op":"followUp","message":"again","inputId":"in-f"}"#).unwrap();
    let req_f = p.client.send_input(follow.clone());
    p.client
        .send_input(Input::prompt("Later").with_input_id("in-p"));
    let c = p.conn.unwrap();
    while let Some(f) = p.client.poll_transmit() {
        p.net.host.handle_frame(p.net.now, c, &f);
    }
    p.disconnect();
    assert_eq!(p.net.host.stats().waiting_inputs, 2);
    p.connect();
    let mut in_doubt = Vec::new();
    let retried = p.client.retry_pending();
    while let Some(e) = p.client.poll_event() {
        if let ClientEvent::InDoubt(d) = e {
            in_doubt.push(d);
        }
    }
    p.flush();
    // The prompt was sent again and ran once; the follow-up was not sent again.
    assert_eq!(retried.len(), 1);
    let r = p.receipts.iter().find(|r| r.0 == retried[0]).unwrap();
    assert_eq!(r.1, "in-p");
    assert_eq!(p.net.host.stats().waiting_inputs, 2);
    assert_eq!(in_doubt.len(), 1);
    assert_eq!(
        (
            in_doubt[0].request_id.as_str(),
            in_doubt[0].input_id.as_str()
        ),
        (req_f.as_str(), "in-f")
    );
    assert!(p.client.pending_inputs().is_empty());
}
