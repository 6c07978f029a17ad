//! The host's runs, against the spec (tanstack-harness-wire-protocol.md, version 2): a
//! cancelled turn, and the plain AG-UI runs of `POST run` and `GET run`. Each test quotes the
//! words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::host::{Host, TurnOutcome};
use harness_tanstack::log::MemoryLog;
use support::{Net, PROMPT, data_frames, json, net, sse_cfg};

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
            AguiEvent::TextMessageStart(harness_tanstack::agui::TextMessageStart {
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
            .emit(
                n.now,
                "t",
                &op,
                AguiEvent::text_content("m", format!("{i}")),
            )
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

/// The same `POST run` sent again (a retry, or a client that lost the answer) starts no
/// second run: "The server must then … not start a new run" (research note
/// tanstack-ai-client.md:118), and "The run must use the client's `runId`" (:55). The
/// second stream is the first run's, from its `RUN_STARTED` to its `RUN_FINISHED`, the
/// same events; the driver is asked for one turn.
#[test]
fn a_post_run_sent_again_with_its_run_id_streams_that_run_and_starts_none() {
    let mut n = net();
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(
        r#"{"threadId":"t","runId":"run-1","messages":[{"id":"u","role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    let first = n.host.run_agui(n.now, &input, None, "r1", None).unwrap();
    n.pump();
    assert_eq!(n.turns.len(), 1);
    let op = n.turns.remove(0).operation_id;
    assert_eq!(op, "run-1");
    n.host
        .emit(n.now, "t", &op, AguiEvent::text_content("m", "Hello"))
        .unwrap();
    // Sent again while the run runs: joins it (the events so far, then live).
    let again = n.host.run_agui(n.now, &input, None, "r2", None).unwrap();
    n.pump();
    n.host
        .finish_turn(n.now, "t", &op, TurnOutcome::Completed)
        .unwrap();
    n.pump();
    // And once more after its end: the whole run, then the end of the stream.
    let after = n.host.run_agui(n.now, &input, None, "r3", None).unwrap();
    n.pump();
    assert!(n.turns.is_empty(), "a second turn: {:?}", n.turns.len());
    let events = |got: Vec<String>| -> Vec<serde_json::Value> {
        got.iter()
            .filter_map(|t| t.strip_prefix("data: "))
            .map(|d| json(d.trim_end()))
            .collect()
    };
    let one = events(n.take(first));
    assert_eq!(one.first().unwrap()["type"], "RUN_STARTED");
    assert_eq!(one.last().unwrap()["type"], "RUN_FINISHED");
    assert_eq!(one.last().unwrap()["runId"], "run-1");
    assert_eq!(events(n.take(again)), one);
    assert_eq!(events(n.take(after)), one);
    for c in [first, again, after] {
        assert!(n.closed(c).is_some());
    }
}
