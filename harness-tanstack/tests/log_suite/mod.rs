//! The event log conformance suite, run on every log (memory, file, PostgreSQL) by
//! [`log_suite!`]; [`durable_log_suite!`] adds what only a durable log promises (cursors over
//! a reopen, truncation with reason `truncated`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::log::EventLog;

/// One storage location of a log.
pub trait Store {
    /// A log on this location (each call a new handle: a reopen).
    fn open(&self) -> Box<dyn Log>;
}

/// A log under test: the trait, and the durable logs' truncate.
pub trait Log: EventLog {
    /// Drops a thread's records through `through`.
    fn cut(&mut self, thread: &str, through: u64);
}

impl Log for harness_tanstack::log::MemoryLog {
    fn cut(&mut self, _: &str, _: u64) {
        panic!("the memory log evicts; it has no truncate")
    }
}

impl Log for harness_tanstack::log::FileLog {
    fn cut(&mut self, thread: &str, through: u64) {
        self.truncate(thread, through).unwrap()
    }
}

#[cfg(feature = "postgres")]
impl Log for harness_tanstack::log::PgLog {
    fn cut(&mut self, thread: &str, through: u64) {
        self.truncate(thread, through).unwrap()
    }
}

pub fn text(s: &str) -> AguiEvent {
    AguiEvent::text_content("m-1", s)
}

macro_rules! log_suite {
    ($store:expr) => {
        log_suite!(@tests $store;
            cursors_are_per_thread_gapless_and_read_back_as_written,
            owner_and_waits_are_kept_beside_the_records,
        );
    };
    (@tests $store:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                log_suite::$name(&$store);
            }
        )*
    };
}

macro_rules! durable_log_suite {
    ($store:expr) => {
        log_suite!(@tests $store;
            cursors_survive_a_reopen,
            a_truncated_log_starts_later_and_says_truncated,
        );
    };
}

/// Spec line 242: "Each `harness.event` has a `cursor`. On SSE, the `id` of each event is the
/// same cursor." One cursor space per thread, from 1, gapless; a cursor reads back the very
/// record it named, and no other.
pub fn cursors_are_per_thread_gapless_and_read_back_as_written(store: &dyn Store) {
    let mut log = store.open();
    let mut written = Vec::new();
    for i in 0..5 {
        let t = if i % 2 == 0 { "a" } else { "b b" };
        written.push((t, log.append(t, "op-1", &text(&format!("{i} é"))).unwrap()));
    }
    let seqs: Vec<_> = written.iter().map(|(t, r)| (*t, r.seq)).collect();
    assert_eq!(seqs, [("a", 1), ("b b", 1), ("a", 2), ("b b", 2), ("a", 3)]);
    for (t, r) in &written {
        let back = log.get(t, r.seq).unwrap().unwrap();
        assert_eq!(back.sse(), r.sse());
        assert_eq!(back.cursor().as_str(), r.seq.to_string());
        assert_eq!(back.thread_id().as_deref(), Some(*t));
    }
    assert_eq!((log.first_seq("a"), log.head_seq("a")), (1, 3));
    assert_eq!(log.head_seq("b b"), 2);
    assert!(log.get("a", 0).unwrap().is_none());
    assert!(log.get("a", 4).unwrap().is_none());
    assert!(log.get("nope", 1).unwrap().is_none());
    assert_eq!(log.head_seq("nope"), 0);
    assert!(!log.contains("nope"));
    let mut threads = log.threads();
    threads.sort();
    assert_eq!(threads, ["a", "b b"]);
    // A key that is not the thread id (membersOnly): the frame names the thread.
    let r = log
        .append_as("alice\u{1f}t", "t", "op-2", &text("x"))
        .unwrap();
    assert_eq!(r.seq, 1);
    assert_eq!(
        log.get("alice\u{1f}t", 1)
            .unwrap()
            .unwrap()
            .thread_id()
            .as_deref(),
        Some("t")
    );
}

/// log/mod.rs (the waits record): kept beside the log, "never sent to a client and takes no
/// sequence number"; the owner of a thread is kept for `membersOnly()`.
pub fn owner_and_waits_are_kept_beside_the_records(store: &dyn Store) {
    let mut log = store.open();
    log.set_owner("t", "alice").unwrap();
    assert!(log.contains("t"));
    assert_eq!(log.owner("t").as_deref(), Some("alice"));
    assert_eq!(log.head_seq("t"), 0);
    log.append("t", "op", &text("one")).unwrap();
    match log.set_waits("t", Some("{\"waits\":1}")) {
        Ok(()) => {
            assert_eq!(log.waits("t").unwrap().as_deref(), Some("{\"waits\":1}"));
            log.set_waits("t", Some("{\"waits\":2}")).unwrap();
            assert_eq!(log.waits("t").unwrap().as_deref(), Some("{\"waits\":2}"));
            log.set_waits("t", None).unwrap();
            assert_eq!(log.waits("t").unwrap(), None);
        }
        Err(e) => panic!("this log keeps no waits: {e}"),
    }
    assert_eq!(log.head_seq("t"), 1, "waits take no sequence number");
}

/// A durable log's cursors survive a restart of the host: a client resumes with the cursor
/// it kept (spec line 242: "Store the last one").
pub fn cursors_survive_a_reopen(store: &dyn Store) {
    let first;
    {
        let mut log = store.open();
        assert!(log.is_durable());
        first = log.append("t", "op", &text("before")).unwrap();
        log.append("t", "op", &text("before 2")).unwrap();
        log.set_owner("t", "alice").unwrap();
    }
    let mut log = store.open();
    assert_eq!(log.head_seq("t"), 2);
    assert_eq!(log.get("t", 1).unwrap().unwrap().sse(), first.sse());
    assert_eq!(log.owner("t").as_deref(), Some("alice"));
    assert_eq!(log.append("t", "op", &text("after")).unwrap().seq, 3);
}

/// Spec line 278: "`reason` is `truncated` (a truncate of the log)": the records through the
/// cut are gone, the next cursor continues.
pub fn a_truncated_log_starts_later_and_says_truncated(store: &dyn Store) {
    let mut log = store.open();
    for i in 0..5 {
        log.append("t", "op", &text(&i.to_string())).unwrap();
    }
    log.cut("t", 3);
    assert_eq!((log.first_seq("t"), log.head_seq("t")), (4, 5));
    assert!(log.get("t", 3).unwrap().is_none());
    assert_eq!(log.get("t", 4).unwrap().unwrap().seq, 4);
    assert_eq!(log.gap_reason(), GapReason::Truncated);
    // Past the head: capped.
    log.cut("t", 99);
    assert_eq!((log.first_seq("t"), log.head_seq("t")), (6, 5));
    assert_eq!(log.append("t", "op", &text("next")).unwrap().seq, 6);
    assert_eq!(log.get("t", 6).unwrap().unwrap().seq, 6);
}
