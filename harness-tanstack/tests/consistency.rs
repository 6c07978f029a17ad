//! Consistency of what a host hands out across subscribers, gaps, snapshots and restarts
//! (tanstack-harness-wire-protocol.md, version 2). Each test quotes the words it checks.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

mod support;

use std::time::Duration;

use harness_tanstack::agui::{AguiEvent, TextMessageStart};
use harness_tanstack::frame::close;
use harness_tanstack::host::{ConnId, Host, HostConfig, Transport, TurnOutcome};
use harness_tanstack::http::StreamOptions;
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::Value;
use support::Net;

const PROMPT: &[u8] = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#;

fn json(s: &str) -> Value {
    serde_json::from_str(
        s.lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(s),
    )
    .unwrap()
}

/// The `harness.event` frames a connection received, as JSON.
fn events(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .map(|t| json(t))
        .filter(|v| v["type"] == "harness.event")
        .collect()
}

fn cursors(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .map(|f| f["cursor"].as_str().unwrap().parse().unwrap())
        .collect()
}

fn subscribe<L: EventLog>(n: &mut Net<L>, from: Option<&str>) -> ConnId {
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    let from = from
        .map(|f| format!(r#","from":"{f}""#))
        .unwrap_or_default();
    n.host.handle_frame(
        n.now,
        c,
        &format!(r#"{{"type":"harness.subscribe","threadId":"thread-1","v":2{from}}}"#),
    );
    c
}

fn cfg(socket_buffer_bytes: f64) -> HostConfig {
    let mut cfg = HostConfig::default();
    cfg.stream = StreamOptions {
        socket_buffer_bytes: Some(socket_buffer_bytes),
        slow_consumer_ms: Some(30_000.0),
        ..Default::default()
    }
    .validate()
    .unwrap();
    cfg
}

/// A prompt whose turn has streamed five text deltas; the turn's operation id.
fn prompt_and_five_deltas<L: harness_tanstack::log::EventLog>(n: &mut Net<L>) -> String {
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    let op = n.turns[0].operation_id.clone();
    for i in 0..5 {
        n.host
            .emit(
                n.now,
                "thread-1",
                &op,
                AguiEvent::text_content("m", format!("a{i}")),
            )
            .unwrap();
    }
    op
}

#[test]
fn many_subscribers_one_slow_the_others_get_every_event_once_and_the_slow_one_loses_nothing() {
    let mut n = Net::new(Host::new(cfg(800.0), MemoryLog::default()));
    let op = prompt_and_five_deltas(&mut n);
    // Subscribers with different cursors: from the start, from 3, from the head.
    let head0 = n.host.log().head_seq("thread-1");
    let all = subscribe(&mut n, None);
    let mid = subscribe(&mut n, Some("3"));
    let tail = subscribe(&mut n, Some(&head0.to_string()));
    let slow = subscribe(&mut n, Some("2"));
    n.stalled.push(slow);
    n.pump();
    for i in 0..100 {
        n.host
            .emit(
                n.now,
                "thread-1",
                &op,
                AguiEvent::text_content("m", format!("b{i}")),
            )
            .unwrap();
        n.pump();
        n.now += Duration::from_millis(400);
        if let Some(t) = n.host.poll_timeout() {
            if t <= n.now {
                n.host.handle_timeout(n.now);
            }
        }
        n.pump();
    }
    let head = n.host.log().head_seq("thread-1");
    // "If the client does not read for this long, the server sends slow_consumer and closes."
    assert_eq!(n.closed(slow), Some(close::SLOW_CONSUMER));
    let slow_got = n.take(slow);
    assert_eq!(json(slow_got.last().unwrap())["code"], "slow_consumer");
    // The others are unaffected: every event once, in order, nothing closed.
    for (c, from) in [(all, 0), (mid, 3), (tail, head0)] {
        assert_eq!(n.closed(c), None);
        let got = cursors(&events(&n.take(c)));
        assert_eq!(got, (from + 1..=head).collect::<Vec<_>>(), "conn {c:?}");
    }
    // "A slow client loses no events. The server reads them from the log when the client
    // reads again." — "Subscribe again from the last cursor."
    let before = cursors(&events(&slow_got));
    let last = before.last().copied().unwrap_or(2);
    let again = subscribe(&mut n, Some(&last.to_string()));
    n.pump();
    let after = cursors(&events(&n.take(again)));
    let mut union = before.clone();
    union.extend(after);
    assert_eq!(union, (3..=head).collect::<Vec<_>>());
}

#[test]
fn eviction_while_a_subscriber_is_part_way_through_is_one_gap_then_the_rest_once() {
    let mut n = Net::new(Host::new(cfg(600.0), MemoryLog::new(8, 1 << 20)));
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    let op = n.turns[0].operation_id.clone();
    let c = subscribe(&mut n, None);
    n.pump();
    let first_read = cursors(&events(&n.take(c)));
    let last_read = *first_read.last().unwrap();
    // The reader stops taking bytes; the log moves on and evicts what it has not read.
    n.stalled.push(c);
    for i in 0..30 {
        n.host
            .emit(
                n.now,
                "thread-1",
                &op,
                AguiEvent::text_content("m", format!("x{i}")),
            )
            .unwrap();
        n.pump();
    }
    let stalled_read = events(&n.take(c));
    let read_so_far = cursors(&stalled_read).last().copied().unwrap_or(last_read);
    // It reads again: it acks what it has.
    n.stalled.clear();
    let inflight = n.host.in_flight(c);
    n.host.sent(n.now, c, inflight);
    n.pump();
    let rest = events(&n.take(c));
    let first = n.host.log().first_seq("thread-1");
    let head = n.host.log().head_seq("thread-1");
    assert!(read_so_far + 1 < first, "the test must evict unread events");
    // "the stream sends one CUSTOM event with the name harness.gap, and continues from the
    // first event that it has" — "from is the cursor that you sent" (its last cursor),
    // "resumeAt is the cursor of this event", "reason is … evicted".
    let gap = &rest[0];
    assert_eq!(gap["event"]["name"], "harness.gap");
    assert_eq!(
        gap["event"]["value"]["from"],
        read_so_far.to_string().as_str()
    );
    assert_eq!(gap["event"]["value"]["resumeAt"], gap["cursor"]);
    assert_eq!(gap["event"]["value"]["reason"], "evicted");
    assert_eq!(gap["cursor"], (first - 1).to_string().as_str());
    assert_eq!(
        cursors(&rest[1..]),
        (first..=head).collect::<Vec<_>>(),
        "then every event it has, once"
    );
    assert_eq!(
        rest.iter()
            .filter(|f| f["event"]["name"] == "harness.gap")
            .count(),
        1
    );
}

/// "`harness.snapshot` | none | Asks for the snapshot of the session." and, after a gap,
/// "On the socket, send `harness.snapshot`. Store `resumeAt` as your cursor, and continue
/// to read the stream." The snapshot is the state after the event at its `cursor`: on the
/// socket it must come after the events up to that cursor and before the events after
/// it, or a client applies those events on top of a state that already has them.
/// Its fields (research: "status, activeOperations[{id, kind}], waitingInputs[{inputId,
/// delivery, message}]") agree with the events up to its cursor.
#[test]
fn a_socket_snapshot_sits_in_the_stream_at_its_cursor() {
    let mut n = Net::new(Host::new(HostConfig::default(), MemoryLog::default()));
    let op = prompt_and_five_deltas(&mut n);
    let follow =
        br#"{"threadId":"thread-1","input":{"op":"followUp","message":"Next","inputId":"in-f"}}"#;
    n.host.control(n.now, None, follow, "r", None);
    // The stdio worker "runs the frames in order, so an input right after the subscribe is
    // safe": subscribe from the start, then ask for the snapshot (twice), before reading.
    let c = subscribe(&mut n, None);
    n.host
        .handle_frame(n.now, c, r#"{"type":"harness.snapshot"}"#);
    n.host
        .handle_frame(n.now, c, r#"{"type":"harness.snapshot"}"#);
    n.pump();
    n.host
        .emit(n.now, "thread-1", &op, AguiEvent::text_content("m", "late"))
        .unwrap();
    n.pump();
    let frames: Vec<Value> = n.take(c).iter().map(|t| json(t)).collect();
    let snaps: Vec<usize> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["type"] == "harness.snapshot")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(snaps.len(), 2, "one answer per request");
    let at = snaps[0];
    let snap = &frames[at]["snapshot"];
    let snap_cursor: u64 = snap["cursor"].as_str().unwrap().parse().unwrap();
    let before: Vec<Value> = frames[..at]
        .iter()
        .filter(|f| f["type"] == "harness.event")
        .cloned()
        .collect();
    let after: Vec<Value> = frames[at + 1..]
        .iter()
        .filter(|f| f["type"] == "harness.event")
        .cloned()
        .collect();
    assert_eq!(cursors(&before), (1..=snap_cursor).collect::<Vec<_>>());
    let head = n.host.log().head_seq("thread-1");
    assert_eq!(
        cursors(&after),
        (snap_cursor + 1..=head).collect::<Vec<_>>()
    );
    // What the events up to the cursor say: the run started and has not finished, the
    // follow-up was queued behind it.
    assert!(
        before
            .iter()
            .any(|f| f["event"]["type"] == "RUN_STARTED" && f["event"]["runId"] == op.as_str())
    );
    assert!(!before.iter().any(|f| f["event"]["type"] == "RUN_FINISHED"));
    assert!(
        before
            .iter()
            .any(|f| f["event"]["name"] == "harness.input.queued"
                && f["event"]["value"]["inputId"] == "in-f")
    );
    assert_eq!(snap["status"], "running");
    assert_eq!(
        snap["activeOperations"],
        serde_json::json!([{ "id": op, "kind": "chat" }])
    );
    assert_eq!(
        snap["waitingInputs"],
        serde_json::json!([{ "inputId": "in-f", "delivery": "queue", "message": "Next" }])
    );
}

fn ev(s: &str) -> AguiEvent {
    AguiEvent::from_json(s).unwrap()
}

/// The run tree through a restart of a durable host. "The AG-UI `RUN_STARTED` event of a
/// child run has `parentRunId`: the run that started it." "An event of a subagent also has
/// `subagentRunId` on the `event` itself." "A cursor works … after a restart only on a
/// durable host": what is replayed from the log is what was sent. "Before it, a cancelled
/// turn … sends `RUN_FINISHED` with `outcome: { type: 'cancelled' }`." A run the restart cut
/// off ends `interrupted` (README: "a running turn ends `interrupted`"), its children too.
#[test]
fn the_run_tree_and_a_cancelled_outcome_survive_a_durable_restart_and_cut_off_runs_end_interrupted()
{
    let dir = std::env::temp_dir().join(format!(
        "harness-tanstack-consistency-tree-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let before: Vec<Value>;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        let lead = n.turns.remove(0).operation_id;
        let now = n.now;
        let h = &mut n.host;
        h.emit(now, "thread-1", "op-a", ev(&format!(
            r#"{{"type":"RUN_STARTED","threadId":"thread-1","runId":"op-a","parentRunId":"{lead}"}}"#
        ))).unwrap();
        h.emit(now, "thread-1", "op-a", ev(
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"ma","delta":"sub","subagentRunId":"sub-1"}"#,
        )).unwrap();
        h.emit(
            now,
            "thread-1",
            "op-a",
            ev(r#"{"type":"RUN_FINISHED","threadId":"thread-1","runId":"op-a"}"#),
        )
        .unwrap();
        h.emit(
            now,
            "thread-1",
            &lead,
            AguiEvent::TextMessageStart(TextMessageStart {
                message_id: "m1".into(),
                ..Default::default()
            }),
        )
        .unwrap();
        h.emit(
            now,
            "thread-1",
            &lead,
            AguiEvent::text_content("m1", "half"),
        )
        .unwrap();
        h.finish_turn(now, "thread-1", &lead, TurnOutcome::Cancelled)
            .unwrap();
        n.pump();
        // A second turn, with a child, cut off by the restart.
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        let second = n.turns.remove(0).operation_id;
        n.host.emit(n.now, "thread-1", "op-b", ev(&format!(
            r#"{{"type":"RUN_STARTED","threadId":"thread-1","runId":"op-b","parentRunId":"{second}"}}"#
        ))).unwrap();
        let c = subscribe(&mut n, None);
        n.pump();
        before = events(&n.take(c));
        assert_eq!(
            n.host.run_tree("thread-1").get("op-a"),
            Some(&Some(lead.clone()))
        );
    }
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let tree = n.host.run_tree("thread-1");
    assert_eq!(tree.get("op-1"), Some(&None));
    assert_eq!(tree.get("op-a"), Some(&Some("op-1".to_owned())));
    assert_eq!(tree.get("op-2"), Some(&None));
    assert_eq!(tree.get("op-b"), Some(&Some("op-2".to_owned())));
    let c = subscribe(&mut n, None);
    n.pump();
    let after = events(&n.take(c));
    // Every event sent before the restart comes back the same, cursor for cursor.
    assert_eq!(&after[..before.len()], &before[..]);
    let find = |f: &dyn Fn(&Value) -> bool| after.iter().find(|v| f(v)).cloned().unwrap();
    let started_a = find(&|v| v["event"]["type"] == "RUN_STARTED" && v["operationId"] == "op-a");
    assert_eq!(started_a["event"]["parentRunId"], "op-1");
    let sub = find(&|v| v["event"]["messageId"] == "ma");
    assert_eq!(sub["event"]["subagentRunId"], "sub-1");
    let fin = find(&|v| v["event"]["type"] == "RUN_FINISHED" && v["operationId"] == "op-1");
    assert_eq!(
        fin["event"]["outcome"],
        serde_json::json!({ "type": "cancelled" })
    );
    let op1_fin = find(&|v| {
        v["event"]["name"] == "harness.operation.finished"
            && v["event"]["value"]["operationId"] == "op-1"
    });
    assert_eq!(op1_fin["event"]["value"]["status"], "cancelled");
    // What the restart cut off: op-2 and its child op-b end interrupted, once each; op-1
    // and op-a, which ended, get nothing more.
    let tail = &after[before.len()..];
    let errors: Vec<&str> = tail
        .iter()
        .filter(|v| v["event"]["type"] == "RUN_ERROR")
        .map(|v| v["operationId"].as_str().unwrap())
        .collect();
    let mut sorted = errors.clone();
    sorted.sort();
    assert_eq!(sorted, ["op-2", "op-b"]);
    assert!(
        tail.iter()
            .all(|v| v["event"]["type"] != "RUN_ERROR" || v["event"]["code"] == "interrupted")
    );
    let finished: Vec<(&str, &str)> = tail
        .iter()
        .filter(|v| v["event"]["name"] == "harness.operation.finished")
        .map(|v| {
            (
                v["event"]["value"]["operationId"].as_str().unwrap(),
                v["event"]["value"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(finished.contains(&("op-2", "interrupted")), "{finished:?}");
    assert!(finished.iter().all(|(_, s)| *s == "interrupted"));
    // A second restart adds nothing: what was closed stays closed.
    let head = n.host.log().head_seq("thread-1");
    drop(n);
    let n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    assert_eq!(n.host.log().head_seq("thread-1"), head);
    let _ = std::fs::remove_dir_all(&dir);
}

/// "`GET snapshot?threadId=` and `GET transcript?threadId=`: the state and the saved
/// messages of the thread. When the client starts, load both." and after a gap "Delete the
/// state that you built from events. Load `GET snapshot` and `GET transcript` again." The
/// transcript stands in for what a client built from the events, so it has what the events
/// say: a tool call (`TOOL_CALL_START` / `_ARGS` / `_END`) is an assistant message with
/// `toolCalls` (as `@ag-ui/client` applies `TOOL_CALL_START`: the assistant message
/// `parentMessageId`, or a new assistant message with the id `parentMessageId ??
/// toolCallId`), before the tool message of its `TOOL_CALL_RESULT`. A tool message that
/// answers no call is a message missing.
#[test]
fn the_transcript_has_the_assistant_tool_calls_the_events_made() {
    let mut n = Net::new(Host::new(HostConfig::default(), MemoryLog::default()));
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    let op = n.turns.remove(0).operation_id;
    for e in [
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Let me look"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#,
        r#"{"type":"TOOL_CALL_START","toolCallId":"tc-1","toolCallName":"search"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"tc-1","delta":"{\"q\":"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"tc-1","delta":"\"x\"}"}"#,
        r#"{"type":"TOOL_CALL_END","toolCallId":"tc-1"}"#,
        r#"{"type":"TOOL_CALL_RESULT","messageId":"r-1","toolCallId":"tc-1","content":"found"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"Done"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m2"}"#,
        r#"{"type":"TOOL_CALL_START","toolCallId":"tc-2","toolCallName":"save","parentMessageId":"m2"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"tc-2","delta":"{}"}"#,
        r#"{"type":"TOOL_CALL_END","toolCallId":"tc-2"}"#,
        r#"{"type":"TOOL_CALL_RESULT","messageId":"r-2","toolCallId":"tc-2","content":"ok"}"#,
    ] {
        n.host.emit(n.now, "thread-1", &op, ev(e)).unwrap();
    }
    n.host
        .finish_turn(n.now, "thread-1", &op, TurnOutcome::Completed)
        .unwrap();
    let t = json(&n.host.transcript("thread-1", None, "r").body);
    let call = |id: &str, name: &str, args: &str| serde_json::json!({ "id": id, "type": "function", "function": { "name": name, "arguments": args } });
    assert_eq!(
        t["messages"],
        serde_json::json!([
            { "id": "in-1-msg", "role": "user", "content": "Hello" },
            { "id": "m1", "role": "assistant", "content": "Let me look" },
            { "id": "tc-1", "role": "assistant", "toolCalls": [call("tc-1", "search", r#"{"q":"x"}"#)] },
            { "id": "r-1", "role": "tool", "content": "found", "toolCallId": "tc-1" },
            { "id": "m2", "role": "assistant", "content": "Done", "toolCalls": [call("tc-2", "save", "{}")] },
            { "id": "r-2", "role": "tool", "content": "ok", "toolCallId": "tc-2" },
        ])
    );
}
