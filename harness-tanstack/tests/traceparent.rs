//! The traceparent rules of the spec (tanstack-harness-wire-protocol.md, "Traces",
//! lines 368-393): which inputs read a `traceparent`, which values are dropped, that the
//! value is stored on the log's `harness.input` record (`harness.input.accepted` here),
//! and that it reaches the turn that the input starts (the driver links the turn's
//! `harness.operation` span to it: tests/trace_link.rs of the workspace crate checks that
//! link through `tracing-opentelemetry`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::{HarnessEvent, InputAccepted};
use harness_tanstack::host::{Host, HostConfig, Transport};
use harness_tanstack::log::{EventLog, FileLog};
use support::{Net, PROMPT, net, reply, temp_dir};

const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// Every `harness.input.accepted` record of a thread, in log order.
fn accepted<L: EventLog>(n: &mut Net<L>, thread: &str) -> Vec<InputAccepted> {
    let head = n.host.log().head_seq(thread);
    let first = n.host.log().first_seq(thread);
    let mut out = Vec::new();
    for seq in first..=head {
        let Some(rec) = n.host.log_mut().get(thread, seq).unwrap() else {
            continue;
        };
        if let AguiEvent::Custom(c) = rec.event().unwrap() {
            if let Ok(HarnessEvent::InputAccepted(a)) = HarnessEvent::from_custom(&c.name, &c.value)
            {
                out.push(a);
            }
        }
    }
    out
}

fn control(thread: &str, input: serde_json::Value) -> Vec<u8> {
    serde_json::json!({ "threadId": thread, "input": input })
        .to_string()
        .into_bytes()
}

#[test]
fn a_valid_traceparent_of_a_prompt_is_stored_on_the_input_record_and_reaches_the_turn() {
    let mut n = net();
    // spec:370 "On HTTP, send the traceparent header on POST control or POST run."
    let a = n.host.control(n.now, None, PROMPT, "r", Some(GOOD));
    assert_eq!(a.status, 200);
    n.pump();
    // spec:392 "It stores the value on the harness.input record of the log."
    let recs = accepted(&mut n, "thread-1");
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].traceparent.as_deref(), Some(GOOD));
    // spec:393 "When the input starts a turn, the server that runs the turn gives its
    // harness.operation span a link to the value": the turn carries it to the driver.
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(GOOD));
    assert_eq!(n.turns[0].input_id, recs[0].input_id);
}

#[test]
fn an_invalid_traceparent_is_dropped_everywhere() {
    // spec:391 "It drops a value that is not a valid W3C traceparent."
    for bad in [
        "junk",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "",
    ] {
        let mut n = net();
        n.host.control(n.now, None, PROMPT, "r", Some(bad));
        n.pump();
        let recs = accepted(&mut n, "thread-1");
        assert_eq!(recs[0].traceparent, None, "{bad}");
        assert_eq!(n.turns[0].traceparent, None, "{bad}");
        // Not written to the log in any form.
        let head = n.host.log().head_seq("thread-1");
        for seq in 1..=head {
            let rec = n.host.log_mut().get("thread-1", seq).unwrap().unwrap();
            assert!(!rec.json_str().contains("traceparent"), "{bad}");
        }
    }
}

#[test]
fn steer_and_follow_up_keep_theirs_while_they_wait_and_their_turn_gets_it() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", Some(GOOD));
    n.pump();
    // spec:390 "It reads the traceparent of a message input only: prompt, steer, followUp"
    let steer = control(
        "thread-1",
        serde_json::json!({"op": "steer", "message": "s"}),
    );
    let follow = control(
        "thread-1",
        serde_json::json!({"op": "followUp", "message": "f"}),
    );
    n.host.control(n.now, None, &follow, "r", Some(OTHER));
    n.host.control(n.now, None, &steer, "r", Some(GOOD));
    n.pump();
    let recs = accepted(&mut n, "thread-1");
    let ops: Vec<(&str, Option<&str>)> = recs
        .iter()
        .map(|a| (a.op.as_str(), a.traceparent.as_deref()))
        .collect();
    assert_eq!(
        ops,
        [
            ("prompt", Some(GOOD)),
            ("followUp", Some(OTHER)),
            ("steer", Some(GOOD))
        ]
    );
    // The running turn ends; the steer goes first, then the follow-up: each turn carries
    // the value of the input that started it.
    reply(&mut n, "one");
    assert_eq!(n.turns[0].input_id, recs[2].input_id);
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(GOOD));
    reply(&mut n, "two");
    assert_eq!(n.turns[0].input_id, recs[1].input_id);
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(OTHER));
}

#[test]
fn other_inputs_ignore_it() {
    let mut n = net();
    // spec:390 "Other inputs ignore it.": an append (a message kept, no turn) and an agent
    // input (a turn, not a message input).
    let append = control(
        "thread-1",
        serde_json::json!({"op": "append", "message": "a"}),
    );
    n.host.control(n.now, None, &append, "r", Some(GOOD));
    let agent = control("thread-1", serde_json::json!({"op": "agent", "agent": "x"}));
    n.host.control(n.now, None, &agent, "r", Some(GOOD));
    n.pump();
    let recs = accepted(&mut n, "thread-1");
    assert!(!recs.is_empty());
    assert!(recs.iter().all(|a| a.traceparent.is_none()), "{recs:?}");
    assert!(n.turns.iter().all(|t| t.traceparent.is_none()));
}

#[test]
fn the_socket_reads_it_from_the_input_frame() {
    let mut n = net();
    let c = n
        .host
        .connect(n.now, Transport::WebSocket, None, "upgrade-1");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    // spec:371 "On the socket and the stdio worker, set traceparent on the harness.input frame."
    let frame = serde_json::json!({
        "type": "harness.input", "requestId": "q1",
        "input": {"op": "prompt", "message": "Hi"}, "traceparent": GOOD,
    });
    n.host.handle_frame(n.now, c, &frame.to_string());
    n.pump();
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(GOOD));
    assert_eq!(
        accepted(&mut n, "thread-1")[0].traceparent.as_deref(),
        Some(GOOD)
    );
    // An invalid value on the frame: dropped.
    let bad = serde_json::json!({
        "type": "harness.input", "requestId": "q2",
        "input": {"op": "prompt", "message": "again"}, "traceparent": "00-xyz",
    });
    n.host.handle_frame(n.now, c, &bad.to_string());
    n.pump();
    let recs = accepted(&mut n, "thread-1");
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1].traceparent, None);
}

#[test]
fn post_run_reads_it_for_its_turn() {
    let mut n = net();
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(
        r#"{"threadId":"thread-1","runId":"op-1","messages":[{"id":"u","role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    // spec:390 "…and the turn of POST run."
    n.host
        .run_agui(n.now, &input, None, "r", Some(GOOD))
        .unwrap();
    n.pump();
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(GOOD));
    assert_eq!(
        accepted(&mut n, "thread-1")[0].traceparent.as_deref(),
        Some(GOOD)
    );
}

#[test]
fn the_stored_value_survives_a_restart_of_a_durable_log() {
    let dir = temp_dir("traceparent-restart");
    {
        let log = FileLog::open(&dir).unwrap();
        let mut n = Net::new(Host::new(HostConfig::default(), log));
        n.host.control(n.now, None, PROMPT, "r", Some(GOOD));
        n.pump();
    }
    let log = FileLog::open(&dir).unwrap();
    let mut n = Net::new(Host::new(HostConfig::default(), log));
    // The record another reader of the log (a server that takes the thread over) reads.
    let recs = accepted(&mut n, "thread-1");
    assert_eq!(recs[0].traceparent.as_deref(), Some(GOOD));
    let _ = std::fs::remove_dir_all(&dir);
}
