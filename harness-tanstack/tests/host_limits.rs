//! What the host keeps, bounded (issue 11): the transcript, the history and the waiting
//! inputs of a thread in bytes, the threads of a user and of a host in number, the states of
//! idle threads in memory (read back from the log when used again), and a restart that
//! reads a thread only when it is used. Past a limit an input gets what the spec
//! (tanstack-harness-wire-protocol.md, version 2) gives for a refused input: "A `rejected`
//! receipt is still `200`. Its `reason` says why" (line 98).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::RunAgentInput;
use harness_tanstack::host::HostConfig;
use serde_json::Value;
use support::{Net, PROMPT, durable, json, members, net, net_with, prompt, reply, temp_dir};

fn receipt<L: harness_tanstack::log::EventLog>(
    n: &mut Net<L>,
    user: Option<&str>,
    body: &[u8],
) -> Value {
    let a = n.host.control(n.now, user, body, "r", None);
    assert_eq!(a.status, 200, "{}", a.body);
    json(&a.body)
}

/// A client that sends prompt after prompt to one thread must not grow the host without
/// end: the transcript ("`GET transcript`: … the saved messages of the thread", line 86)
/// keeps its newest messages within `max_transcript_bytes`, and the history a turn gets
/// within `max_history_bytes`; the newest message is always there.
#[test]
fn the_transcript_and_history_of_a_thread_stay_within_their_byte_limits() {
    let mut n = net();
    let cfg = n.host.config().clone();
    let big = "x".repeat(900_000);
    let mut last_history = 0;
    for i in 0..12 {
        let text = format!("{i}{big}");
        let r = receipt(&mut n, None, &prompt("thread-1", &text));
        assert_eq!(r["status"], "accepted", "{r}");
        n.pump();
        last_history = n.turns[0]
            .history
            .iter()
            .map(|m| m.text().len())
            .sum::<usize>();
        reply(&mut n, &format!("ok {i}"));
    }
    assert!(
        last_history <= cfg.max_history_bytes,
        "history of {last_history} bytes"
    );
    let t = n.host.transcript("thread-1", None, "r");
    assert_eq!(t.status, 200);
    assert!(
        t.body.len() <= cfg.max_transcript_bytes + 4096,
        "transcript of {} bytes",
        t.body.len()
    );
    let msgs = json(&t.body)["messages"].as_array().unwrap().clone();
    // The newest exchange is there, whole.
    let last = &msgs[msgs.len() - 1];
    assert_eq!(last["content"], "ok 11");
    assert!(
        msgs[msgs.len() - 2]["content"]
            .as_str()
            .unwrap()
            .starts_with("11x")
    );
    assert!(n.host.stats().resident_bytes <= cfg.max_resident_bytes);
}

/// One input may not carry more than `max_input_bytes`: it gets "a `rejected` receipt …
/// Its `reason` says why" (line 98), reason `too_large`, and runs nothing; on the socket
/// the same receipt. `POST run` (plain AG-UI, no receipt) answers `413`.
#[test]
fn an_input_over_the_size_limit_gets_a_rejected_receipt() {
    let mut n = net();
    let limit = n.host.config().max_input_bytes;
    let r = receipt(&mut n, None, &prompt("thread-1", &"y".repeat(limit + 1)));
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str()),
        (Some("rejected"), Some("too_large"))
    );
    n.pump();
    assert!(n.turns.is_empty());
    assert!(n.host.messages("thread-1").is_empty());
    // Just under it runs.
    let r = receipt(&mut n, None, &prompt("thread-1", &"y".repeat(limit - 16)));
    assert_eq!(r["status"], "accepted");
    // POST run.
    let run: RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": "thread-2", "runId": "run-1",
        "messages": [{ "id": "u", "role": "user", "content": "z".repeat(limit + 1) }]
    }))
    .unwrap();
    let e = n.host.run_agui(n.now, &run, None, "r", None).unwrap_err();
    assert_eq!(e.status, 413);
    assert_eq!(json(&e.body)["error"], "too_large");
}

/// Inputs that wait behind a turn are kept in memory until they run: past
/// `max_waiting_bytes` of messages an input gets the `queue_full` refusal that
/// `max_waiting_inputs` gives (line 98: a rejected receipt with its reason).
#[test]
fn waiting_inputs_are_bounded_in_bytes() {
    let mut n = net();
    let limit = n.host.config().max_waiting_bytes;
    receipt(&mut n, None, PROMPT);
    let each = 900_000;
    let fit = limit / each;
    let mut statuses = Vec::new();
    for i in 0..fit + 2 {
        let body = serde_json::json!({
            "threadId": "thread-1",
            "input": { "op": "followUp", "message": format!("{i}{}", "w".repeat(each)) }
        })
        .to_string();
        let r = receipt(&mut n, None, body.as_bytes());
        statuses.push((r["status"].clone(), r["reason"].clone()));
    }
    assert!(statuses[..fit - 1].iter().all(|s| s.0 == "queued"));
    let last = statuses.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1.as_str()),
        (Some("rejected"), Some("queue_full"))
    );
}

/// A user may make `max_threads_per_user` threads ("The first prompt also makes the
/// thread", line 14); one more gets a rejected receipt with reason `thread_limit`, and
/// makes nothing. Another user still makes threads, and the user's own threads still
/// work.
#[test]
fn a_user_cannot_make_more_threads_than_the_limit() {
    let per_user = members().max_threads_per_user;
    assert!(per_user >= 1_000, "generous enough for real use");
    let mut n = net_with(members());
    for i in 0..per_user {
        let r = receipt(&mut n, Some("ann"), &prompt(&format!("t-{i}"), "hi"));
        assert_eq!(r["status"], "accepted", "{i}: {r}");
    }
    n.pump();
    n.turns.clear();
    let r = receipt(&mut n, Some("ann"), &prompt("one-more", "hi"));
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str()),
        (Some("rejected"), Some("thread_limit"))
    );
    assert_eq!(n.host.stats().threads, per_user);
    let r = receipt(&mut n, Some("bob"), &prompt("one-more", "hi"));
    assert_eq!(r["status"], "accepted");
    // An input to a thread the user has is no new thread.
    let r = receipt(&mut n, Some("ann"), &prompt("t-0", "again"));
    assert_eq!(r["status"], "queued");
}

/// The threads of the whole host are bounded too (`max_threads`, all users and the
/// log's threads together), with the same refusal; `POST run` answers `429`.
#[test]
fn a_host_cannot_hold_more_threads_than_the_limit() {
    let mut n = net_with(HostConfig {
        max_threads: 3,
        ..HostConfig::default()
    });
    for i in 0..3 {
        let r = receipt(
            &mut n,
            Some(&format!("u{i}")),
            &prompt(&format!("t-{i}"), "hi"),
        );
        assert_eq!(r["status"], "accepted");
    }
    let r = receipt(&mut n, Some("u9"), &prompt("t-9", "hi"));
    assert_eq!(r["reason"], "thread_limit");
    let run: RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": "t-10", "runId": "run-1",
        "messages": [{ "id": "u", "role": "user", "content": "hi" }]
    }))
    .unwrap();
    let e = n.host.run_agui(n.now, &run, None, "r", None).unwrap_err();
    assert_eq!(e.status, 429);
    assert_eq!(json(&e.body)["error"], "thread_limit");
    assert_eq!(n.host.stats().threads, 3);
}

/// Idle threads past `max_resident_threads` leave memory; used again they are read back
/// from the log, whole: their transcript, and "A `prompt` … with the same `inputId` runs
/// once" (line 236) across it.
#[test]
fn idle_threads_leave_memory_and_come_back_whole_from_the_log() {
    let cfg = HostConfig {
        max_resident_threads: 4,
        ..HostConfig::default()
    };
    let mut n = net_with(cfg);
    for i in 0..20 {
        let body = serde_json::json!({
            "threadId": format!("t-{i}"),
            "input": { "op": "prompt", "message": format!("hello {i}"), "inputId": format!("p-{i}") }
        })
        .to_string();
        receipt(&mut n, None, body.as_bytes());
        n.pump();
        reply(&mut n, &format!("answer {i}"));
    }
    let s = n.host.stats();
    assert_eq!(s.threads, 20);
    assert!(s.resident_threads <= 4, "{s:?}");
    let texts: Vec<String> = n.host.messages("t-0").iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["hello 0", "answer 0"]);
    let again = serde_json::json!({
        "threadId": "t-1",
        "input": { "op": "prompt", "message": "hello 1", "inputId": "p-1" }
    })
    .to_string();
    let r = receipt(&mut n, None, again.as_bytes());
    assert_eq!(r["inputId"], "p-1");
    n.pump();
    assert!(n.turns.is_empty(), "the retry ran again");
    assert!(n.host.stats().resident_threads <= 4);
}

/// A restart reads no thread: "a thread's state is read from the log when first touched"
/// (issue 11), so a host on a big log starts in the memory of an empty one; the thread then
/// reads back whole when it is used.
#[test]
fn a_restarted_host_reads_a_thread_only_when_it_is_used() {
    let dir = temp_dir("lazy");
    {
        let mut n = durable(HostConfig::default(), &dir);
        for i in 0..30 {
            receipt(
                &mut n,
                None,
                &prompt(&format!("t-{i}"), &format!("hello {i}")),
            );
            n.pump();
            reply(&mut n, &format!("answer {i}"));
        }
    }
    let mut n = durable(HostConfig::default(), &dir);
    let s = n.host.stats();
    assert_eq!((s.threads, s.resident_threads), (30, 0), "{s:?}");
    assert!(n.host.has_thread("t-7"));
    let texts: Vec<String> = n.host.messages("t-7").iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["hello 7", "answer 7"]);
    assert_eq!(n.host.stats().resident_threads, 1);
    let _ = std::fs::remove_dir_all(&dir);
}
