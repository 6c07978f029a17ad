//! The journal conformance suite: the [`Journal`] contract, run on every store (memory, file,
//! PostgreSQL) by [`journal_suite!`]. A store is a [`Store`]: something that opens a journal
//! on one storage location, again and again (a reopen sees what an earlier handle wrote).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::sync::{Arc, Barrier};

use harness_core::event::{Event, EventBody, ExecutionStart};
use harness_core::message::Message;
use harness_sessions::journal::{ForkOrigin, Journal, JournalError, SessionMeta};
use harness_sessions::record::{Head, Record};

/// One storage location of a store.
pub trait Store {
    /// A journal on this location (each call a new handle: a "reopen").
    fn open(&self) -> Arc<dyn Journal>;
}

pub fn meta() -> SessionMeta {
    SessionMeta {
        harness: "echo".into(),
        parent: None,
    }
}

pub fn event(i: usize) -> Event {
    if i == 0 {
        Event::new(
            "e1",
            EventBody::ExecutionStart(ExecutionStart {
                input_count: Some(1),
                harness: "echo".into(),
                ..Default::default()
            }),
        )
    } else {
        Event::new(
            "e1",
            EventBody::Output(Message::assistant(format!("out <{i}> é"))),
        )
    }
}

/// Appends `n` records one at a time under a fresh fence.
pub fn fill(j: &dyn Journal, session: &str, n: usize) -> Vec<Record> {
    let fence = j.acquire_fence(session).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let h = j.head(session).unwrap();
        let r = Record::seal(event(i), h.seq + 1, h.hash, fence).unwrap();
        j.append(session, h.seq, fence, std::slice::from_ref(&r))
            .unwrap();
        out.push(r);
    }
    out
}

/// Generates one `#[test]` per suite function for the store `$store` (an expression that
/// makes a fresh storage location; it is evaluated once per test).
macro_rules! journal_suite {
    ($store:expr) => {
        journal_suite!(@tests $store;
            append_is_cas_on_head_and_fence,
            fork_copies_a_prefix_verbatim,
            a_reopened_journal_keeps_records_meta_and_fence,
            sessions_lists_every_session_and_unknown_ones_are_not_found,
            a_multi_record_append_is_all_or_nothing,
            concurrent_appends_at_one_seq_have_one_winner,
            a_newer_fence_fences_every_older_writer,
            an_empty_session_uid_is_refused,
        );
    };
    (@tests $store:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::journal_suite::$name(&$store);
            }
        )*
    };
}

/// Issue: "append with compare-and-set on the expected last seq and a fence (a lower fence
/// and a head mismatch are distinct errors)". research/agentsessions.md:237: "The log
/// rejects a lower fence (eventlog.ErrFenced) and a head mismatch (eventlog.ErrConflict)."
pub fn append_is_cas_on_head_and_fence(store: &dyn Store) {
    let j = store.open();
    j.create("s", &meta()).unwrap();
    assert_eq!(
        j.create("s", &meta()),
        Err(JournalError::AlreadyExists("s".into()))
    );
    let old = j.acquire_fence("s").unwrap();
    let new = j.acquire_fence("s").unwrap();
    assert!(new > old);
    let r1 = Record::seal(event(0), 1, None, old).unwrap();
    // A lower fence: Fenced, not Conflict.
    match j.append("s", 0, old, std::slice::from_ref(&r1)) {
        Err(JournalError::Fenced { fence, current, .. }) => {
            assert_eq!((fence, current), (old, new))
        }
        other => panic!("{other:?}"),
    }
    let r1 = Record::seal(event(0), 1, None, new).unwrap();
    j.append("s", 0, new, std::slice::from_ref(&r1)).unwrap();
    // A head mismatch: Conflict, not Fenced.
    let r2 = Record::seal(event(1), 2, Some(r1.content_hash), new).unwrap();
    match j.append("s", 0, new, std::slice::from_ref(&r2)) {
        Err(JournalError::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (0, 1)),
        other => panic!("{other:?}"),
    }
    // A record that does not chain onto the head.
    let bad = Record::seal(event(1), 2, None, new).unwrap();
    assert!(matches!(
        j.append("s", 1, new, std::slice::from_ref(&bad)),
        Err(JournalError::BadRecords(_))
    ));
    // A fence never acquired.
    match j.append("s", 1, new + 5, std::slice::from_ref(&r2)) {
        Err(JournalError::UnknownFence { fence, current, .. }) => {
            assert_eq!((fence, current), (new + 5, new))
        }
        other => panic!("{other:?}"),
    }
    j.append("s", 1, new, std::slice::from_ref(&r2)).unwrap();
    assert_eq!(
        j.head("s").unwrap(),
        Head {
            seq: 2,
            hash: Some(r2.content_hash),
            fence: new
        }
    );
    assert_eq!(j.read("s", 1, None).unwrap(), vec![r1.clone(), r2.clone()]);
    assert_eq!(j.read("s", 2, Some(2)).unwrap(), vec![r2.clone()]);
    assert_eq!(j.read("s", 3, None).unwrap(), vec![]);
    assert_eq!(j.verify("s").unwrap().records, 2);
    assert!(matches!(j.head("nope"), Err(JournalError::NotFound(_))));
}

/// research/agentsessions.md:233: "Fork(parent, child, atSeq): the child must be an empty
/// log. It mints a new fence, copies records 1..atSeq verbatim".
pub fn fork_copies_a_prefix_verbatim(store: &dyn Store) {
    let j = store.open();
    j.create("p", &meta()).unwrap();
    let recs = fill(&*j, "p", 5);
    let child_meta = SessionMeta {
        harness: "echo".into(),
        parent: Some(ForkOrigin {
            session: "p".into(),
            seq: 3,
        }),
    };
    j.fork("p", 3, "c", &child_meta).unwrap();
    assert_eq!(j.read("c", 1, None).unwrap(), recs[..3].to_vec());
    assert_eq!(j.meta("c").unwrap(), child_meta);
    assert_eq!(j.head("c").unwrap().seq, 3);
    // The child's next fence is new (higher than any copied).
    let f = j.acquire_fence("c").unwrap();
    assert!(f > recs[2].fence);
    // The child must not exist; the fork point must exist.
    assert!(matches!(
        j.fork("p", 1, "c", &meta()),
        Err(JournalError::AlreadyExists(_))
    ));
    assert!(matches!(
        j.fork("p", 6, "d", &meta()),
        Err(JournalError::ForkPoint { at: 6, head: 5, .. })
    ));
    assert!(matches!(
        j.fork("nope", 0, "d", &meta()),
        Err(JournalError::NotFound(_))
    ));
    j.fork("p", 0, "e", &meta()).unwrap();
    assert!(j.read("e", 1, None).unwrap().is_empty());
    assert_eq!(j.head("e").unwrap().hash, None);
    assert_eq!(j.verify("c").unwrap().head, Some(recs[2].content_hash));
    // The parent is untouched.
    assert_eq!(j.read("p", 1, None).unwrap(), recs);
}

/// What a journal stored is what a new handle on the same storage reads: records, metadata,
/// the newest fence (a restarted host must not mint a fence a zombie already holds).
pub fn a_reopened_journal_keeps_records_meta_and_fence(store: &dyn Store) {
    let recs;
    let fence;
    {
        let j = store.open();
        j.create("s", &meta()).unwrap();
        recs = fill(&*j, "s", 3);
        fence = j.head("s").unwrap().fence;
        j.sync("s").unwrap();
    }
    let j = store.open();
    assert_eq!(j.read("s", 1, None).unwrap(), recs);
    assert_eq!(j.meta("s").unwrap(), meta());
    assert_eq!(j.head("s").unwrap().fence, fence);
    assert!(j.acquire_fence("s").unwrap() > fence);
    assert_eq!(j.verify("s").unwrap().records, 3);
}

/// Sessions listing (the daemon's `ListSessions`), and NotFound for every per-session
/// operation on an unknown session.
pub fn sessions_lists_every_session_and_unknown_ones_are_not_found(store: &dyn Store) {
    let j = store.open();
    assert!(j.sessions().unwrap().is_empty());
    for s in ["a", "b", "c"] {
        j.create(s, &meta()).unwrap();
    }
    let mut all = j.sessions().unwrap();
    all.sort();
    assert_eq!(all, ["a", "b", "c"]);
    let nf = |r: Result<(), JournalError>| assert!(matches!(r, Err(JournalError::NotFound(_))));
    nf(j.meta("x").map(drop));
    nf(j.head("x").map(drop));
    nf(j.acquire_fence("x").map(drop));
    nf(j.read("x", 1, None).map(drop));
    let r = Record::seal(event(0), 1, None, 1).unwrap();
    nf(j.append("x", 0, 1, &[r]));
}

/// "All or none are appended" (the trait's contract): a batch whose third record does not
/// chain leaves the journal as it was.
pub fn a_multi_record_append_is_all_or_nothing(store: &dyn Store) {
    let j = store.open();
    j.create("s", &meta()).unwrap();
    let f = j.acquire_fence("s").unwrap();
    let r1 = Record::seal(event(0), 1, None, f).unwrap();
    let r2 = Record::seal(event(1), 2, Some(r1.content_hash), f).unwrap();
    let bad = Record::seal(event(2), 3, Some(r1.content_hash), f).unwrap();
    assert!(matches!(
        j.append("s", 0, f, &[r1.clone(), r2.clone(), bad]),
        Err(JournalError::BadRecords(_))
    ));
    assert_eq!(j.head("s").unwrap().seq, 0);
    assert!(j.read("s", 1, None).unwrap().is_empty());
    let r3 = Record::seal(event(2), 3, Some(r2.content_hash), f).unwrap();
    j.append("s", 0, f, &[r1, r2, r3.clone()]).unwrap();
    assert_eq!(j.head("s").unwrap().hash, Some(r3.content_hash));
    assert_eq!(j.verify("s").unwrap().records, 3);
}

/// research/agentsessions.md:237, single writer by CAS: writers racing to append at the same
/// seq, each with its own record, get exactly one winner per seq; every loser gets
/// `Conflict` naming the seq that won; the chain holds.
pub fn concurrent_appends_at_one_seq_have_one_winner(store: &dyn Store) {
    const WRITERS: usize = 4;
    const ROUNDS: usize = 5;
    let j = store.open();
    j.create("s", &meta()).unwrap();
    let fence = j.acquire_fence("s").unwrap();
    for round in 0..ROUNDS {
        let head = j.head("s").unwrap();
        let barrier = Arc::new(Barrier::new(WRITERS));
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let j = Arc::clone(&j);
                    let barrier = Arc::clone(&barrier);
                    scope.spawn(move || {
                        let r = Record::seal(
                            event(1 + round * WRITERS + w),
                            head.seq + 1,
                            head.hash,
                            fence,
                        )
                        .unwrap();
                        barrier.wait();
                        j.append("s", head.seq, fence, std::slice::from_ref(&r))
                            .map(|()| r)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&Record> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, JournalError::Conflict { expected, actual, .. }
                        if *expected == head.seq && *actual == head.seq + 1),
                    "{e:?}"
                );
            }
        }
        assert_eq!(
            j.read("s", head.seq + 1, None).unwrap(),
            vec![winners[0].clone()]
        );
    }
    assert_eq!(j.verify("s").unwrap().records, ROUNDS as u64);
}

/// research/agentsessions.md:237, "a monotonic per-incarnation fence": once a new writer has
/// acquired a fence, every older writer's append is `Fenced`, however current its head.
pub fn a_newer_fence_fences_every_older_writer(store: &dyn Store) {
    let j = store.open();
    j.create("s", &meta()).unwrap();
    let a = j.acquire_fence("s").unwrap();
    let r1 = Record::seal(event(0), 1, None, a).unwrap();
    j.append("s", 0, a, std::slice::from_ref(&r1)).unwrap();
    let b = j.acquire_fence("s").unwrap();
    let c = j.acquire_fence("s").unwrap();
    for old in [a, b] {
        let r = Record::seal(event(1), 2, Some(r1.content_hash), old).unwrap();
        match j.append("s", 1, old, &[r]) {
            Err(JournalError::Fenced { fence, current, .. }) => {
                assert_eq!((fence, current), (old, c))
            }
            other => panic!("{other:?}"),
        }
    }
    let r = Record::seal(event(1), 2, Some(r1.content_hash), c).unwrap();
    j.append("s", 1, c, &[r]).unwrap();
}

/// A session needs a UID (the spec's scope.SessionUID is nonempty).
pub fn an_empty_session_uid_is_refused(store: &dyn Store) {
    let j = store.open();
    assert!(matches!(
        j.create("", &meta()),
        Err(JournalError::InvalidSession(_))
    ));
    j.create("p", &meta()).unwrap();
    assert!(matches!(
        j.fork("p", 0, "", &meta()),
        Err(JournalError::InvalidSession(_))
    ));
}
