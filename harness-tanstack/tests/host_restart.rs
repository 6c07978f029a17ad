//! A durable host after a restart, against the spec (tanstack-harness-wire-protocol.md,
//! version 2): "A cursor works on every server and after a restart only on a durable host".
//! Runs cut off, idempotency, owners and long thread ids survive it. Each test quotes the
//! words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::host::{AccessPolicy, Host, HostConfig};
use harness_tanstack::log::{EventLog, FileLog};
use support::{Net, PROMPT, data_frames, json, reply};

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
                AguiEvent::text_content("m", "half an ans"),
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

/// `membersOnly()`: a thread belongs to the user who made it, and no one else reads it (each
/// user's `thread-1` is their own: tests/host_access.rs). On a durable host that must hold
/// after a restart too, or every signed-in user could read every thread once the host
/// restarts: another user's `thread-1` has no session ("a thread that has no session yet
/// answers `404`") until that user's own input makes it, and then it holds only theirs.
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
    assert_eq!(open(&mut n, "bob"), Err(404));
    assert_eq!(open(&mut n, "ann"), Ok(()));
    assert_eq!(n.host.snapshot("thread-1", Some("bob"), "r").status, 404);
    assert_eq!(
        n.host.control(n.now, Some("bob"), PROMPT, "r", None).status,
        200
    );
    let t = json(&n.host.transcript("thread-1", Some("bob"), "r").body);
    assert_eq!(t["messages"].as_array().unwrap().len(), 1, "{t}");
    let t = json(&n.host.transcript("thread-1", Some("ann"), "r").body);
    assert_eq!(t["messages"][0]["content"], "Hello");
    assert_eq!(
        n.host
            .log()
            .owner(&n.host.thread_key(Some("ann"), "thread-1"))
            .as_deref(),
        Some("ann")
    );
    let _ = std::fs::remove_dir_all(&dir);
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
    assert!(n.host.has_thread(&n.host.thread_key(Some("ann"), &id)));
    assert_eq!(n.host.snapshot(&id, Some("bob"), "r").status, 404);
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

/// `joinRun` after a restart of a durable host: the client "calls `GET
/// <url>?offset=-1&runId=<id>`" with no thread (/work/shared/research/tanstack-ai-client.md:131),
/// and for a finished run the host must "replay the whole run, RUN_STARTED through
/// terminal, then close" (:141). The run index is rebuilt from the log when the host opens
/// it, so a run from before the restart is found by its id alone; an id the log never had
/// is still `404` ("Unknown or expired run: return 404").
#[test]
fn join_run_finds_a_run_from_before_the_restart_by_its_id_alone() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-joinrun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let op;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        op = reply(&mut n, "Hi there");
        // A second thread with a run of its own: each run maps to its thread.
        let other = br#"{"threadId":"thread-2","input":{"op":"prompt","message":"Yo"}}"#;
        n.host.control(n.now, None, other, "r", None);
        n.pump();
        reply(&mut n, "Hey");
    }
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let c = n
        .host
        .join_run(n.now, None, &op, Some("-1"), None, "r")
        .expect("the run from before the restart, by its id alone");
    n.pump();
    let events: Vec<serde_json::Value> = n
        .take(c)
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| json(d.trim_end()))
        .collect();
    assert_eq!(events.first().unwrap()["type"], "RUN_STARTED");
    assert_eq!(events.first().unwrap()["threadId"], "thread-1");
    assert!(
        events.iter().any(|e| e["delta"] == "Hi there"),
        "{events:?}"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    assert!(n.closed(c).is_some(), "the finished run's stream ends");
    let e = n
        .host
        .join_run(n.now, None, "op-99", Some("-1"), None, "r")
        .unwrap_err();
    assert_eq!(e.status, 404);
    let _ = std::fs::remove_dir_all(&dir);
}
