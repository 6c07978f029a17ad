//! The event logs: rendering once, eviction, durability across reopen, torn writes,
//! truncation, and thread ids that are not file-name safe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod log_suite;

use std::io::Write;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::log::{EventLog, FileLog, FileLogConfig, LogRecord, MemoryLog};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harness-tanstack-log-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A file log that keeps almost nothing: one open file, one read index, a tiny cache.
fn keeps_almost_nothing() -> FileLogConfig {
    FileLogConfig {
        cache_records: 8,
        cache_bytes: 4 << 10,
        max_open_files: 1,
        max_indexed_threads: 1,
        ..FileLogConfig::default()
    }
}

#[test]
fn a_record_is_one_buffer_with_its_three_wire_forms() {
    let r = LogRecord::render("thread-1", 4, "op-1", &AguiEvent::text_content("m-1", "Hi"));
    let json = r#"{"type":"harness.event","cursor":"4","threadId":"thread-1","operationId":"op-1","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi"}}"#;
    assert_eq!(&r.sse()[..], format!("id: 4\ndata: {json}\n\n").as_bytes());
    assert_eq!(&r.json()[..], json.as_bytes());
    assert_eq!(&r.ndjson()[..], format!("{json}\n").as_bytes());
    assert_eq!(
        &r.event_json()[..],
        br#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi"}"#
    );
    assert_eq!(r.event().unwrap(), AguiEvent::text_content("m-1", "Hi"));
}

#[test]
fn memory_log_evicts_the_oldest_by_count_and_by_bytes() {
    let mut log = MemoryLog::new(3, 1 << 20);
    for i in 0..5 {
        log.append("t", "op", &AguiEvent::text_content("m", format!("{i}")))
            .unwrap();
    }
    assert_eq!((log.first_seq("t"), log.head_seq("t")), (3, 5));
    assert!(log.get("t", 2).unwrap().is_none());
    assert_eq!(log.get("t", 3).unwrap().unwrap().seq, 3);
    assert_eq!(log.gap_reason(), GapReason::Evicted);
    let mut small = MemoryLog::new(1000, 300);
    for _ in 0..10 {
        small
            .append("t", "op", &AguiEvent::text_content("m", "x".repeat(50)))
            .unwrap();
    }
    assert!(small.first_seq("t") > 1);
    assert!(!small.is_durable());
}

#[test]
fn file_log_survives_reopen_a_torn_write_and_odd_thread_ids() {
    let d = dir("torn");
    let odd = "user/42 ☃ ../etc";
    {
        let mut log = FileLog::open(&d).unwrap();
        for i in 0..3 {
            log.append(odd, "op-1", &AguiEvent::text_content("m", format!("{i}")))
                .unwrap();
        }
    }
    // A crash in the middle of a write leaves half a line.
    let file = std::fs::read_dir(&d)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(b"{\"type\":\"harness.ev")
        .unwrap();
    let mut log = FileLog::open(&d).unwrap();
    assert_eq!(log.threads(), vec![odd.to_string()]);
    assert_eq!(log.head_seq(odd), 3);
    let rec = log
        .append(odd, "op-2", &AguiEvent::text_content("m", "after"))
        .unwrap();
    assert_eq!(rec.seq, 4);
    drop(log);
    let mut log = FileLog::open(&d).unwrap();
    for seq in 1..=4 {
        // Read from the file itself (a fresh log has an empty cache).
        assert_eq!(log.get(odd, seq).unwrap().unwrap().seq, seq);
    }
    assert!(log.is_durable());
    log.truncate(odd, 2).unwrap();
    assert_eq!((log.first_seq(odd), log.head_seq(odd)), (3, 4));
    assert!(log.get(odd, 2).unwrap().is_none());
    let _ = std::fs::remove_dir_all(&d);
}

/// A thread id of any length is stored: a file name is at most 255 bytes, so an id whose
/// hex form does not fit gets a fixed-length digest name, with the id itself kept beside
/// it. A reopen maps every file back to its exact thread id, owner included.
#[test]
fn file_log_stores_thread_ids_of_any_length() {
    let d = dir("long-ids");
    let ids = vec![
        "a".repeat(120),
        "b".repeat(121),
        "☃/..".repeat(60),
        "x".repeat(10_000),
        // Two long ids that differ in their last byte only.
        format!("{}1", "y".repeat(300)),
        format!("{}2", "y".repeat(300)),
    ];
    {
        let mut log = FileLog::open(&d).unwrap();
        for id in &ids {
            log.set_owner(id, &format!("owner-{}", id.len())).unwrap();
            let rec = log
                .append(id, "op-1", &AguiEvent::text_content("m", id.clone()))
                .unwrap();
            assert_eq!(rec.seq, 1);
        }
    }
    for e in std::fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name();
        assert!(name.len() <= 255, "{name:?}");
    }
    let mut log = FileLog::open(&d).unwrap();
    let mut got = log.threads();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got, want);
    for id in &ids {
        assert_eq!(log.owner(id), Some(format!("owner-{}", id.len())));
        assert_eq!(log.head_seq(id), 1);
        let rec = log.get(id, 1).unwrap().unwrap();
        assert_eq!(
            rec.event().unwrap(),
            AguiEvent::text_content("m", id.clone())
        );
        let next = log
            .append(id, "op-2", &AguiEvent::text_content("m", "more"))
            .unwrap();
        assert_eq!(next.seq, 2);
        log.truncate(id, 1).unwrap();
    }
    drop(log);
    let mut log = FileLog::open(&d).unwrap();
    for id in &ids {
        assert_eq!(
            (log.first_seq(id), log.head_seq(id)),
            (2, 2),
            "{}",
            id.len()
        );
        assert_eq!(
            log.get(id, 2).unwrap().unwrap().operation_id.as_ref(),
            "op-2"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The files of earlier versions, named by the hex form of the thread id (for ids up to
/// 121 bytes), keep working: they are read, appended to in place, and keep their owner.
#[test]
fn file_log_reads_the_file_names_of_earlier_versions() {
    let d = dir("old-names");
    std::fs::create_dir_all(&d).unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let ids = ["c".repeat(121), "thread-1".to_string()];
    for id in &ids {
        let rec = LogRecord::render(id, 1, "op-1", &AguiEvent::text_content("m", "old"));
        std::fs::write(d.join(format!("{}.harness-log", hex(id))), rec.ndjson()).unwrap();
    }
    std::fs::write(d.join(format!("{}.harness-owner", hex("thread-1"))), "ann").unwrap();
    let files = || std::fs::read_dir(&d).unwrap().count();
    let before = files();
    let mut log = FileLog::open(&d).unwrap();
    let mut got = log.threads();
    got.sort();
    assert_eq!(got, ids.to_vec());
    assert_eq!(log.owner("thread-1").as_deref(), Some("ann"));
    for id in &ids {
        assert_eq!(log.get(id, 1).unwrap().unwrap().seq, 1);
        assert_eq!(
            log.append(id, "op-2", &AguiEvent::text_content("m", "new"))
                .unwrap()
                .seq,
            2
        );
    }
    assert_eq!(files(), before, "appended in place, no new file");
    drop(log);
    let mut log = FileLog::open(&d).unwrap();
    for id in &ids {
        assert_eq!(log.head_seq(id), 2);
        assert_eq!(log.get(id, 2).unwrap().unwrap().seq, 2);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Two hosts that open one folder (a second process, a restart while the old one still
/// runs) must never give two events one cursor: "Each `harness.event` has a `cursor`" and a
/// client that stores the last one resumes "with the first event after that cursor". The
/// second writer's append fails instead of writing a number the file already has.
#[test]
fn two_file_logs_on_one_folder_never_write_one_cursor_twice() {
    let d = dir("two-writers");
    let mut a = FileLog::open(&d).unwrap();
    a.append("t", "op", &AguiEvent::text_content("m", "a1"))
        .unwrap();
    let mut b = FileLog::open(&d).unwrap();
    assert_eq!(
        a.append("t", "op", &AguiEvent::text_content("m", "a2"))
            .unwrap()
            .seq,
        2
    );
    assert!(
        b.append("t", "op", &AguiEvent::text_content("m", "b2"))
            .is_err(),
        "b wrote over a's records"
    );
    drop((a, b));
    let mut log = FileLog::open(&d).unwrap();
    assert_eq!(log.head_seq("t"), 2);
    for seq in 1..=2 {
        assert_eq!(log.get("t", seq).unwrap().unwrap().seq, seq);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The file log reads its records back from a sparse index (a mark per 64 records or
/// 64 KiB) and a cache bounded in bytes: every record reads back as written, in any order,
/// with small and large records, when the cache and the index hold almost nothing, and
/// after a truncate. "Each `harness.event` has a `cursor`" (spec line 242): the record a
/// cursor names, and no other.
#[test]
fn file_log_reads_every_record_back_through_a_bounded_cache_and_index() {
    let d = dir("sparse");
    let cfg = keeps_almost_nothing();
    let text = |t: usize, i: usize| {
        let size = if i % 37 == 0 { 100_000 } else { i % 300 };
        format!("{t}:{i}:{}", "z".repeat(size))
    };
    let mut log = FileLog::open_with(&d, cfg).unwrap();
    for i in 1..=400 {
        for t in 0..2 {
            let rec = log
                .append(
                    &format!("t{t}"),
                    "op",
                    &AguiEvent::text_content("m", text(t, i)),
                )
                .unwrap();
            assert_eq!(rec.seq, i as u64);
        }
    }
    assert_eq!(log.open_files(), 1);
    let mut order: Vec<usize> = (1..=400).collect();
    // A fixed shuffle, then in order, then backwards: every way a reader moves.
    order.sort_by_key(|i| (i * 7919) % 401);
    order.extend(1..=400);
    order.extend((1..=400).rev());
    for &i in &order {
        for t in 0..2 {
            let r = log.get(&format!("t{t}"), i as u64).unwrap().unwrap();
            assert_eq!(r.seq, i as u64);
            assert_eq!(r.event().unwrap(), AguiEvent::text_content("m", text(t, i)));
        }
    }
    assert!(log.get("t0", 401).unwrap().is_none());
    log.truncate("t0", 150).unwrap();
    assert_eq!((log.first_seq("t0"), log.head_seq("t0")), (151, 400));
    assert!(log.get("t0", 150).unwrap().is_none());
    for i in [151, 152, 222, 400] {
        let r = log.get("t0", i).unwrap().unwrap();
        assert_eq!(
            r.event().unwrap(),
            AguiEvent::text_content("m", text(0, i as usize))
        );
    }
    drop(log);
    let mut log = FileLog::open_with(&d, cfg).unwrap();
    assert_eq!((log.first_seq("t0"), log.head_seq("t0")), (151, 400));
    assert_eq!((log.first_seq("t1"), log.head_seq("t1")), (1, 400));
    for i in [400, 1, 333, 151] {
        let r = log.get("t1", i).unwrap().unwrap();
        assert_eq!(
            r.event().unwrap(),
            AguiEvent::text_content("m", text(1, i as usize))
        );
    }
    assert_eq!(
        log.append("t0", "op", &AguiEvent::text_content("m", "x"))
            .unwrap()
            .seq,
        401
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A thread whose file the pool closed is still checked for a second writer when it is
/// written again: the file must be the length this log last saw, or the append fails
/// rather than give a second event a cursor the file already has.
#[test]
fn the_second_writer_check_holds_for_a_file_the_pool_closed() {
    let (d, cfg) = (dir("pool-writers"), keeps_almost_nothing());
    let mut a = FileLog::open_with(&d, cfg).unwrap();
    a.append("t1", "op", &AguiEvent::text_content("m", "a1"))
        .unwrap();
    let mut b = FileLog::open_with(&d, cfg).unwrap();
    assert_eq!(
        b.append("t1", "op", &AguiEvent::text_content("m", "b2"))
            .unwrap()
            .seq,
        2
    );
    // a's file of t1 leaves the pool, and comes back for the next append.
    a.append("t2", "op", &AguiEvent::text_content("m", "a"))
        .unwrap();
    assert_eq!(a.open_files(), 1);
    assert!(
        a.append("t1", "op", &AguiEvent::text_content("m", "a2"))
            .is_err()
    );
    drop((a, b));
    let mut log = FileLog::open(&d).unwrap();
    assert_eq!(log.head_seq("t1"), 2);
    assert_eq!(
        log.get("t1", 2).unwrap().unwrap().event().unwrap(),
        AguiEvent::text_content("m", "b2")
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The memory log is bounded in all, not only per thread: past its total the thread that
/// holds the most gives its oldest records first (a client behind them gets `harness.gap`,
/// reason `evicted`: spec line 278), and the small threads keep theirs.
#[test]
fn memory_log_is_bounded_in_all_and_the_largest_thread_pays() {
    let mut log = MemoryLog::new(1_000_000, 1 << 30).with_max_total_bytes(200_000);
    log.append("small", "op", &AguiEvent::text_content("m", "keep me"))
        .unwrap();
    for i in 0..100 {
        log.append(
            "big",
            "op",
            &AguiEvent::text_content("m", format!("{i}{}", "b".repeat(10_000))),
        )
        .unwrap();
    }
    assert!(log.total_bytes() <= 200_000, "{}", log.total_bytes());
    assert_eq!(log.first_seq("small"), 1);
    assert_eq!(log.get("small", 1).unwrap().unwrap().seq, 1);
    assert!(log.first_seq("big") > 1);
    assert_eq!(log.head_seq("big"), 100);
    // Many threads: the total holds too, and the newest record written always stays.
    for i in 0..100 {
        log.append(
            &format!("t{i}"),
            "op",
            &AguiEvent::text_content("m", "c".repeat(5_000)),
        )
        .unwrap();
        assert!(log.get(&format!("t{i}"), 1).unwrap().is_some());
    }
    assert!(log.total_bytes() <= 200_000, "{}", log.total_bytes());
}

/// The memory store: every "reopen" is a new log (it keeps nothing over a restart).
struct Memory;

impl log_suite::Store for Memory {
    fn open(&self) -> Box<dyn log_suite::Log> {
        Box::new(MemoryLog::default())
    }
}

/// The file store: a folder; each reopen a new `FileLog` on it.
struct Folder(std::path::PathBuf);

impl Folder {
    fn fresh() -> Folder {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Folder(dir(&format!("suite-{n}")))
    }
}

impl log_suite::Store for Folder {
    fn open(&self) -> Box<dyn log_suite::Log> {
        Box::new(FileLog::open(&self.0).unwrap())
    }
}

/// The shared log suite on the memory log.
mod memory {
    use super::{Memory, log_suite};
    log_suite!(Memory);
}

/// The shared log suite on the file log, durable part included.
mod file {
    use super::{Folder, log_suite};
    log_suite!(Folder::fresh());
    durable_log_suite!(Folder::fresh());
}
