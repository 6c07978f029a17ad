//! What `@tanstack/ai-client` reads back after a reload, on `GET run`: `joinRun`
//! (`?offset=-1&runId=`, no thread named) and `hydrate` (`?threadId=` →
//! `{messages, activeRun, interrupts}`). The contract is the one written up in
//! /work/shared/research/tanstack-ai-client.md (§3 joinRun, §4 hydrate; quoted per test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::{AguiEvent, RunAgentInput};
use harness_tanstack::host::TurnOutcome;
use serde_json::Value;
use support::{Net, json, members, net, net_with};

fn input(thread: &str, run: &str, text: &str) -> RunAgentInput {
    serde_json::from_value(serde_json::json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": text}],
    }))
    .unwrap()
}

fn types(frames: &[String]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| json(d.trim_end())["type"].as_str().unwrap().to_owned())
        .collect()
}

/// Starts `run` on `thread` (`POST run`) and streams "Hel" of its reply; returns its op.
fn start<L: harness_tanstack::log::EventLog>(
    n: &mut Net<L>,
    thread: &str,
    run: &str,
    user: Option<&str>,
) -> String {
    let c = n
        .host
        .run_agui(n.now, &input(thread, run, "Hello"), user, "r", None)
        .unwrap();
    n.pump();
    n.take(c);
    let op = n.turns.remove(0).operation_id;
    assert_eq!(op, run, "the run keeps the client's runId");
    let begin = AguiEvent::TextMessageStart(harness_tanstack::agui::TextMessageStart {
        message_id: "m1".into(),
        ..Default::default()
    });
    n.host.emit(n.now, thread, &op, begin).unwrap();
    n.host
        .emit(n.now, thread, &op, AguiEvent::text_content("m1", "Hel"))
        .unwrap();
    n.pump();
    op
}

fn finish<L: harness_tanstack::log::EventLog>(n: &mut Net<L>, thread: &str, op: &str) {
    n.host
        .emit(n.now, thread, op, AguiEvent::text_content("m1", "lo"))
        .unwrap();
    n.host
        .finish_turn(n.now, thread, op, TurnOutcome::Completed)
        .unwrap();
    n.pump();
}

/// A run of `user` on `thread`, started and finished with no event between (the index
/// tests make many).
fn run_and_finish(n: &mut Net<harness_tanstack::MemoryLog>, user: &str, thread: &str, run: &str) {
    let c = n
        .host
        .run_agui(n.now, &input(thread, run, "Hello"), Some(user), "r", None)
        .unwrap();
    n.pump();
    let turn = n.turns.remove(0);
    n.host
        .finish_turn(
            n.now,
            &turn.thread_id,
            &turn.operation_id,
            TurnOutcome::Completed,
        )
        .unwrap();
    n.pump();
    n.take(c);
}

/// §3: "Run still going: replay everything stored, keep tailing live events, and close
/// after RUN_FINISHED or RUN_ERROR." (tanstack-ai-client.md:140), found by `runId` alone:
/// joinRun sends "`GET <url>?offset=-1&runId=<id>`, with `options.headers` only"
/// (tanstack-ai-client.md:131).
#[test]
fn join_mid_run_replays_from_run_started_and_tails_to_the_end() {
    let mut n = net();
    let op = start(&mut n, "t-join", "run-1-abc", None);
    let c = n
        .host
        .join_run(n.now, None, "run-1-abc", Some("-1"), None, "r")
        .unwrap();
    n.pump();
    let first = types(&n.take(c));
    assert_eq!(first[0], "RUN_STARTED", "{first:?}");
    assert!(
        first.contains(&"TEXT_MESSAGE_CONTENT".to_owned()),
        "{first:?}"
    );
    assert_eq!(n.closed(c), None, "a live run's stream stays open");
    finish(&mut n, "t-join", &op);
    let rest = types(&n.take(c));
    assert_eq!(
        rest.last().map(String::as_str),
        Some("RUN_FINISHED"),
        "{rest:?}"
    );
    assert!(n.closed(c).is_some(), "the stream ends after RUN_FINISHED");
}

/// §3: "Run finished: replay the whole run, RUN_STARTED through terminal, then close."
/// (tanstack-ai-client.md:141)
#[test]
fn join_after_the_end_replays_the_whole_run_then_closes() {
    let mut n = net();
    let op = start(&mut n, "t-done", "run-2-abc", None);
    finish(&mut n, "t-done", &op);
    // Another run after it: the join is of run-2 only.
    let op3 = start(&mut n, "t-done", "run-3-abc", None);
    finish(&mut n, "t-done", &op3);
    let c = n
        .host
        .join_run(n.now, None, "run-2-abc", Some("-1"), None, "r")
        .unwrap();
    n.pump();
    let frames = n.take(c);
    let got = types(&frames);
    assert_eq!(got.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(got.last().map(String::as_str), Some("RUN_FINISHED"));
    assert!(
        frames.iter().all(|f| !f.contains("run-3-abc")),
        "{frames:?}"
    );
    let text: String = frames
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| json(d.trim_end()))
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "Hello");
    assert!(n.closed(c).is_some());
}

/// §3: "Unknown or expired run: return 404." (tanstack-ai-client.md:142): also another
/// user's run on a `membersOnly` host (it is no run of this user's), and an `offset` that
/// is no cursor this host handed out is a bad request.
#[test]
fn join_of_an_unknown_or_foreign_run_is_404() {
    let mut n = net_with(members());
    start(&mut n, "t-mine", "run-4-abc", Some("alice"));
    let status = |n: &mut Net<_>, run: &str, user: &str, offset: &str| {
        n.host
            .join_run(n.now, None, run, Some(offset), Some(user), "r")
            .map(|_| 200)
            .unwrap_or_else(|a| a.status)
    };
    assert_eq!(status(&mut n, "run-nope", "alice", "-1"), 404);
    assert_eq!(status(&mut n, "run-4-abc", "mallory", "-1"), 404);
    assert_eq!(status(&mut n, "run-4-abc", "alice", "17"), 400);
    assert_eq!(status(&mut n, "run-4-abc", "alice", "-1"), 200);
    assert_eq!(
        n.host
            .join_run(n.now, None, "run-4-abc", Some("-1"), None, "r")
            .unwrap_err()
            .status,
        401
    );
}

fn hydrate<L: harness_tanstack::log::EventLog>(
    n: &mut Net<L>,
    thread: &str,
    user: Option<&str>,
) -> (u16, Value) {
    let a = n.host.hydrate(thread, user, "r");
    (a.status, json(&a.body))
}

/// §4: "Unknown thread: 200 with {"messages":[],"activeRun":null,"interrupts":null}"
/// (tanstack-ai-client.md:191); on a `membersOnly` host another user's id names their own
/// thread, so no user hydrates another's.
#[test]
fn hydrate_of_an_unknown_thread_is_empty_and_ids_are_per_user() {
    let mut n = net_with(members());
    let (s, v) = hydrate(&mut n, "t-none", Some("alice"));
    assert_eq!(s, 200);
    assert_eq!(
        v,
        serde_json::json!({"messages": [], "activeRun": null, "interrupts": null})
    );
    start(&mut n, "t-alice", "run-5-abc", Some("alice"));
    // Mallory's "t-alice" is her own (empty) thread: ids are per user.
    let (s, v) = hydrate(&mut n, "t-alice", Some("mallory"));
    assert_eq!((s, v["messages"].as_array().unwrap().len()), (200, 0));
}

/// §4: "`activeRun` is `{runId}` or `null`" (tanstack-ai-client.md:186); "`parts` is
/// required … a message without `parts` makes the whole hydrate be thrown away"
/// (tanstack-ai-client.md:184).
#[test]
fn hydrate_gives_ui_messages_with_parts_and_the_active_run() {
    let mut n = net();
    let op = start(&mut n, "t-h", "run-6-abc", None);
    let (s, v) = hydrate(&mut n, "t-h", None);
    assert_eq!(s, 200);
    assert_eq!(v["activeRun"], serde_json::json!({"runId": "run-6-abc"}));
    assert_eq!(v["interrupts"], Value::Null);
    let msgs = v["messages"].as_array().unwrap();
    assert!(msgs.iter().all(|m| m["parts"].is_array()), "{v}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(
        msgs[0]["parts"],
        serde_json::json!([{"type": "text", "content": "Hello"}])
    );
    finish(&mut n, "t-h", &op);
    let (_, v) = hydrate(&mut n, "t-h", None);
    assert_eq!(v["activeRun"], Value::Null, "the run ended");
    let last = v["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(
        last["parts"],
        serde_json::json!([{"type": "text", "content": "Hello"}])
    );
}

/// §3: joinRun names the run alone ("`GET <url>?offset=-1&runId=<id>`",
/// tanstack-ai-client.md:131), and on a `membersOnly` host a user's ids are their own: a
/// run of another user's under the same `runId` does not hide the user's own run from its
/// joinRun (a `404` would make the client forget it, tanstack-ai-client.md:142).
#[test]
fn another_users_run_of_the_same_id_does_not_hide_ones_own_from_join() {
    let mut n = net_with(members());
    for user in ["alice", "mallory"] {
        let c = n
            .host
            .run_agui(n.now, &input("t", "run-x", "Hello"), Some(user), "r", None)
            .unwrap();
        n.pump();
        n.take(c);
        n.turns.remove(0);
    }
    for user in ["alice", "mallory"] {
        let got = n
            .host
            .join_run(n.now, None, "run-x", Some("-1"), Some(user), "r")
            .map(|_| 200)
            .unwrap_or_else(|a| a.status);
        assert_eq!(got, 200, "{user}'s own run-x");
    }
    assert_eq!(
        n.host
            .join_run(n.now, None, "run-x", Some("-1"), Some("bob"), "r")
            .unwrap_err()
            .status,
        404
    );
}

/// The run index behind `joinRun` by `runId` alone is shared by every user of the host;
/// one user starting many runs pushes out their own oldest entries, never another user's
/// (`HostConfig::max_indexed_runs_per_user`). Else alice's 20,000 runs, more than the
/// 16,384 the host indexes, would turn bob's reload into a `404`, and the client "quietly
/// forgets" a run on `404` (tanstack-ai-client.md:142). Alice's own oldest run is still
/// found with its `threadId`.
#[test]
fn one_users_many_runs_do_not_push_another_users_run_out_of_the_index() {
    let mut cfg = members();
    cfg.max_indexed_runs_per_user = 1_024;
    // A thread per run (a thread's log grows with each of its runs): alice may make them.
    cfg.max_threads = 30_000;
    cfg.max_threads_per_user = 30_000;
    let mut n = net_with(cfg);
    run_and_finish(&mut n, "bob", "tb", "run-bob");
    for i in 0..20_000 {
        run_and_finish(&mut n, "alice", &format!("ta-{i}"), &format!("run-a-{i}"));
    }
    let join = |n: &mut Net<harness_tanstack::MemoryLog>, thread, run: &str, user| {
        n.host
            .join_run(n.now, thread, run, Some("-1"), Some(user), "r")
            .map(|_| 200)
            .unwrap_or_else(|a| a.status)
    };
    assert_eq!(join(&mut n, None, "run-bob", "bob"), 200, "bob's run by id");
    assert_eq!(join(&mut n, None, "run-a-19999", "alice"), 200);
    assert_eq!(
        join(&mut n, None, "run-a-18976", "alice"),
        200,
        "her 1,024th newest"
    );
    assert_eq!(
        join(&mut n, None, "run-a-18975", "alice"),
        404,
        "past her share"
    );
    assert_eq!(
        join(&mut n, Some("ta-18975"), "run-a-18975", "alice"),
        200,
        "with its thread"
    );
}

/// The whole run index is bounded by `HostConfig::max_indexed_runs`: past it the oldest
/// run of anyone is no longer found by its id alone (`404`, which the client takes as
/// "forget it", tanstack-ai-client.md:142), and is still found with its `threadId`.
#[test]
fn the_run_index_holds_the_configured_number_of_runs() {
    let mut cfg = members();
    cfg.max_indexed_runs = 4;
    let mut n = net_with(cfg);
    for i in 0..6 {
        run_and_finish(&mut n, "carol", &format!("tc-{i}"), &format!("r-{i}"));
    }
    let join = |n: &mut Net<harness_tanstack::MemoryLog>, thread, run: &str| {
        n.host
            .join_run(n.now, thread, run, Some("-1"), Some("carol"), "r")
            .map(|_| 200)
            .unwrap_or_else(|a| a.status)
    };
    assert_eq!(
        join(&mut n, None, "r-1"),
        404,
        "the 5th newest, past the index"
    );
    assert_eq!(join(&mut n, None, "r-2"), 200, "the 4th newest");
    assert_eq!(join(&mut n, None, "r-5"), 200);
    assert_eq!(join(&mut n, Some("tc-1"), "r-1"), 200, "with its thread");
}
