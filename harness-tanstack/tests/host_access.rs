//! Who reads what under `membersOnly()` (issue 11): `GET host-events` gives a user "the
//! status changes and session list changes that the user may read" (spec line 88), and a
//! thread id is the user's own, so no user can take another's thread id first and lock its
//! owner out with `403`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::host::Host;
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::Value;
use support::{Net, PROMPT, data_frames, events, json, members, prompt, reply, socket, temp_dir};

/// The `threadId` of each `harness.session.status` a host-events reader got.
fn statuses(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["event"]["name"] == "harness.session.status")
        .map(|f| f["event"]["value"]["threadId"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of the messages of a user's thread (`GET transcript`).
fn transcript<L: EventLog>(n: &mut Net<L>, user: &str) -> Vec<String> {
    let t = json(&n.host.transcript("thread-1", Some(user), "r").body);
    t["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// "`GET host-events?v=`: the status changes and session list changes that the user may
/// read" (line 88): under `membersOnly()` a user reads their own threads only, from a
/// cursor too, never another user's thread ids or statuses.
#[test]
fn host_events_give_a_user_only_the_threads_that_user_may_read() {
    let mut n = Net::new(Host::new(members(), MemoryLog::default()));
    let open = |n: &mut Net<MemoryLog>, user: &str, cursor: Option<&str>| {
        n.host
            .open_host_events(n.now, Some("2"), Some("0"), cursor, Some(user), "r")
            .unwrap()
    };
    let ann = open(&mut n, "ann", None);
    let bob = open(&mut n, "bob", None);
    n.host.control(
        n.now,
        Some("bob"),
        &prompt("bob-secret-plan", "hi"),
        "r",
        None,
    );
    n.host
        .control(n.now, Some("ann"), &prompt("ann-thread", "hi"), "r", None);
    n.pump();
    reply(&mut n, "ok");
    reply(&mut n, "ok");
    let ann_frames = data_frames(&n.take(ann));
    let a = statuses(&ann_frames);
    let b = statuses(&data_frames(&n.take(bob)));
    assert!(
        !a.is_empty() && a.iter().all(|t| t == "ann-thread"),
        "{a:?}"
    );
    assert!(
        !b.is_empty() && b.iter().all(|t| t == "bob-secret-plan"),
        "{b:?}"
    );
    // From a cursor (a reconnect): still only the reader's own.
    let cursor = ann_frames
        .iter()
        .find_map(|f| f["cursor"].as_str().map(str::to_owned));
    let again = open(&mut n, "ann", cursor.as_deref());
    n.pump();
    let a = statuses(&data_frames(&n.take(again)));
    assert!(a.iter().all(|t| t == "ann-thread"), "{a:?}");
}

/// A thread id is the client's own string ("The first prompt also makes the thread", line
/// 14). Under `membersOnly()` one user taking an id first must not lock out another user
/// who uses the same id ("`403` … The host refused the action", line 96, is for a thread
/// the user may not use): each user's `thread-1` is a thread of their own, on every route,
/// and neither reads the other's events.
#[test]
fn a_thread_id_another_user_used_first_is_still_the_users_own() {
    let mut n = Net::new(Host::new(members(), MemoryLog::default()));
    let a = n.host.control(n.now, Some("mallory"), PROMPT, "r", None);
    assert_eq!(a.status, 200);
    n.pump();
    reply(&mut n, "mallory's answer");
    let a = n.host.control(n.now, Some("ann"), PROMPT, "r", None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(json(&a.body)["status"], "accepted");
    n.pump();
    reply(&mut n, "ann's answer");
    // GET events, snapshot, transcript: ann's own thread.
    let frames = events(&mut n, "thread-1", None, Some("ann")).unwrap();
    assert!(frames.iter().all(|f| f["threadId"] == "thread-1"));
    let deltas: Vec<&str> = frames
        .iter()
        .filter_map(|f| f["event"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, ["ann's answer"]);
    assert_eq!(n.host.snapshot("thread-1", Some("ann"), "r").status, 200);
    assert_eq!(transcript(&mut n, "ann"), ["Hello", "ann's answer"]);
    // The socket too.
    let (s, got) = socket(&mut n, Some("ann"), "thread-1");
    assert_eq!(got[0]["type"], "harness.hello");
    assert!(
        got.iter()
            .all(|f| f["event"]["delta"] != "mallory's answer")
    );
    assert_eq!(n.closed(s), None);
    // And mallory still reads mallory's.
    assert_eq!(transcript(&mut n, "mallory"), ["Hello", "mallory's answer"]);
}

/// The same holds on a durable host over a restart: each user's thread comes back as
/// theirs.
#[test]
fn each_users_thread_of_one_id_survives_a_durable_restart() {
    let dir = temp_dir("scoped");
    {
        let mut n = Net::new(Host::new(members(), FileLog::open(&dir).unwrap()));
        for user in ["ann", "bob"] {
            n.host.control(n.now, Some(user), PROMPT, "r", None);
            n.pump();
            reply(&mut n, &format!("for {user}"));
        }
    }
    let mut n = Net::new(Host::new(members(), FileLog::open(&dir).unwrap()));
    for user in ["ann", "bob"] {
        assert_eq!(
            transcript(&mut n, user),
            ["Hello".to_owned(), format!("for {user}")]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A durable log written before each user's ids were their own keeps a thread under its id,
/// with its owner beside it. After the upgrade that thread is still its owner's, under the
/// same id ("A cursor works … after a restart only on a durable host", line 256), and still
/// no one else's: another user's `thread-1` is that user's own.
#[test]
fn a_thread_made_before_ids_were_per_user_stays_its_owners() {
    let dir = temp_dir("earlier");
    {
        let mut log = FileLog::open(&dir).unwrap();
        log.set_owner("thread-1", "ann").unwrap();
        log.append(
            "thread-1",
            "op-1",
            &AguiEvent::text_content("m-1", "from before"),
        )
        .unwrap();
    }
    let mut n = Net::new(Host::new(members(), FileLog::open(&dir).unwrap()));
    assert_eq!(n.host.thread_key(Some("ann"), "thread-1"), "thread-1");
    let frames = events(&mut n, "thread-1", Some("0"), Some("ann")).unwrap();
    assert!(frames.iter().any(|f| f["event"]["delta"] == "from before"));
    assert_ne!(n.host.thread_key(Some("bob"), "thread-1"), "thread-1");
    assert_eq!(events(&mut n, "thread-1", None, Some("bob")), Err(404));
    let _ = std::fs::remove_dir_all(&dir);
}
