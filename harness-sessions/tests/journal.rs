//! Journal storage: the trait's contract on both stores, the file journal's crash safety and
//! format, and `verify`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod journal_suite;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use harness_core::event::{Event, EventBody};
use harness_core::message::Message;
use harness_sessions::journal::{Durability, FileJournal, Journal, JournalError, MemoryJournal};
use harness_sessions::record::Record;
use harness_sessions::verify::VerifyError;
use journal_suite::{Store, event, fill, meta};

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A fresh folder under the target dir (no tempfile crate needed).
fn tmpdir(name: &str) -> PathBuf {
    let n = DIRS.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!(
        "harness-sessions-test-{}-{name}-{n}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// The memory store: every "reopen" is the same journal.
struct Memory(Arc<MemoryJournal>);

impl Store for Memory {
    fn open(&self) -> Arc<dyn Journal> {
        self.0.clone()
    }
}

/// The file store: a folder; each reopen a new `FileJournal` on it.
struct Folder(PathBuf);

impl Store for Folder {
    fn open(&self) -> Arc<dyn Journal> {
        Arc::new(FileJournal::open(&self.0).unwrap())
    }
}

/// The shared conformance suite on the memory store.
mod memory {
    use super::{Arc, Memory, MemoryJournal};
    journal_suite!(Memory(Arc::new(MemoryJournal::new())));
}

/// The shared conformance suite on the file store.
mod file {
    use super::{Folder, tmpdir};
    journal_suite!(Folder(tmpdir("conformance")));
}

#[test]
fn file_journal_survives_reopen_and_keeps_meta() {
    let dir = tmpdir("reopen");
    let recs = {
        let j = FileJournal::open(&dir).unwrap();
        j.create("s1", &meta()).unwrap();
        fill(&j, "s1", 4)
    };
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.meta("s1").unwrap(), meta());
    assert_eq!(j.read("s1", 1, None).unwrap(), recs);
    assert_eq!(j.head("s1").unwrap().fence, 1);
    assert_eq!(j.acquire_fence("s1").unwrap(), 2);
    assert_eq!(j.sessions().unwrap(), vec!["s1".to_owned()]);
    assert!(matches!(
        j.create("../x", &meta()),
        Err(JournalError::InvalidSession(_))
    ));
}

/// A file journal in a fresh folder holding session `s` with three records; the folder,
/// the records and the session's file.
fn three_records(name: &str) -> (PathBuf, Vec<Record>, PathBuf) {
    let dir = tmpdir(name);
    let recs = {
        let j = FileJournal::open(&dir).unwrap();
        j.create("s", &meta()).unwrap();
        fill(&j, "s", 3)
    };
    let path = dir.join("s.journal");
    (dir, recs, path)
}

/// Issue: "a torn last record after a crash is detected on open and set aside, nothing
/// before it is lost".
#[test]
fn torn_last_record_is_set_aside_on_open() {
    let (dir, recs, path) = three_records("torn");
    let whole = fs::read(&path).unwrap();
    // Every way the last record's write can be cut short.
    let last_start = whole[..whole.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    for cut in last_start + 1..whole.len() {
        fs::write(&path, &whole[..cut]).unwrap();
        assert!(matches!(
            harness_sessions::journal::FileJournal::open(&dir)
                .unwrap()
                .verify("s"),
            Err(VerifyError::Torn { seq: 3, .. })
        ));
        let j = FileJournal::open(&dir).unwrap();
        assert_eq!(
            j.read("s", 1, None).unwrap(),
            recs[..2].to_vec(),
            "cut at {cut}"
        );
        let torn = j.torn_tails();
        assert_eq!(torn.len(), 1);
        assert_eq!(torn[0].offset, last_start as u64);
        assert_eq!(
            fs::read(torn[0].saved_to.as_ref().unwrap()).unwrap(),
            whole[last_start..cut]
        );
        assert_eq!(j.verify("s").unwrap().records, 2);
        // And the journal takes appends again after the cut.
        let f = j.acquire_fence("s").unwrap();
        let h = j.head("s").unwrap();
        let r = Record::seal(event(9), h.seq + 1, h.hash, f).unwrap();
        j.append("s", h.seq, f, std::slice::from_ref(&r)).unwrap();
        assert_eq!(j.verify("s").unwrap().records, 3);
    }
}

/// Only writers repair; readers report. A read-only journal on a session whose last record
/// is torn serves the complete records before it, reports the torn bytes it left in place,
/// refuses every write, and leaves the file byte for byte as it was; a writer opening the
/// session afterwards sets the bytes aside as before.
#[test]
fn a_read_only_journal_reports_a_torn_tail_and_changes_nothing() {
    let (dir, recs, path) = three_records("read-only-torn");
    let mut bytes = fs::read(&path).unwrap();
    let complete = bytes.len() as u64;
    bytes.extend_from_slice(b"{\"seq\":\"4\",\"prev");
    fs::write(&path, &bytes).unwrap();
    let listing = || {
        let mut v: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing();

    let r = FileJournal::open_read_only(&dir).unwrap();
    assert!(r.is_read_only());
    assert_eq!(r.read("s", 1, None).unwrap(), recs);
    assert_eq!(r.head("s").unwrap().seq, 3);
    assert_eq!(r.meta("s").unwrap(), meta());
    assert_eq!(r.sessions().unwrap(), vec!["s".to_owned()]);
    let torn = r.torn_tails();
    assert_eq!(torn.len(), 1);
    assert_eq!((torn[0].offset, torn[0].len), (complete, 16));
    assert_eq!(torn[0].saved_to, None);
    // verify reports the torn record rather than repairing it.
    assert!(matches!(
        r.verify("s"),
        Err(VerifyError::Torn { seq: 4, .. })
    ));
    // Every write is refused, as READ-ONLY, and changes nothing.
    let h = r.head("s").unwrap();
    let rec = Record::seal(event(9), h.seq + 1, h.hash, h.fence).unwrap();
    for (what, res) in [
        ("create", r.create("t", &meta())),
        ("acquire_fence", r.acquire_fence("s").map(|_| ())),
        ("append", r.append("s", h.seq, h.fence, &[rec])),
        ("fork", r.fork("s", 2, "child", &meta())),
    ] {
        assert!(
            matches!(res, Err(JournalError::ReadOnly { .. })),
            "{what}: {res:?}"
        );
    }
    r.sync("s").unwrap();
    // Readers share the session; a writer waits for them.
    let r2 = FileJournal::open_read_only(&dir).unwrap();
    assert_eq!(r2.read("s", 1, None).unwrap(), recs);
    let w = FileJournal::open(&dir).unwrap();
    assert!(matches!(w.head("s"), Err(JournalError::Busy(_))));
    assert_eq!(fs::read(&path).unwrap(), bytes);
    assert_eq!(listing(), before);
    drop((r, r2));

    // A writer sets the torn bytes aside, as before; a reader then waits for it.
    assert_eq!(w.head("s").unwrap().seq, 3);
    let set_aside = w.torn_tails();
    assert_eq!(set_aside.len(), 1);
    assert_eq!(
        fs::read(set_aside[0].saved_to.as_ref().unwrap()).unwrap(),
        bytes[complete as usize..]
    );
    assert_eq!(fs::read(&path).unwrap(), bytes[..complete as usize]);
    let r = FileJournal::open_read_only(&dir).unwrap();
    assert!(matches!(r.head("s"), Err(JournalError::Busy(_))));
    drop(w);
    assert_eq!(r.verify("s").unwrap().records, 3);
    assert!(r.torn_tails().is_empty());

    // A reader does not create the folder it is pointed at.
    let missing = dir.join("missing");
    assert!(FileJournal::open_read_only(&missing).is_err());
    assert!(!missing.exists());
}

/// Issue: "flipping any byte of any record is caught by verify".
#[test]
fn flipping_any_byte_is_caught_by_verify() {
    let dir = tmpdir("flip");
    {
        let j = FileJournal::open(&dir).unwrap();
        j.create("s", &meta()).unwrap();
        fill(&j, "s", 3);
        j.fork("s", 2, "c", &meta()).unwrap();
        fill(&j, "c", 2);
    }
    for session in ["s", "c"] {
        let path = dir.join(format!("{session}.journal"));
        let whole = fs::read(&path).unwrap();
        let header_end = whole.iter().position(|&b| b == b'\n').unwrap() + 1;
        let j = FileJournal::open(&dir).unwrap();
        assert!(j.verify(session).is_ok());
        let mut caught = 0;
        for i in header_end..whole.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut bytes = whole.clone();
                bytes[i] ^= bit;
                fs::write(&path, &bytes).unwrap();
                let err = j
                    .verify(session)
                    .expect_err(&format!("flip {bit:#x} at {i} not caught"));
                // The failure names a record.
                assert!(err.seq().is_some(), "{err}");
                caught += 1;
            }
        }
        fs::write(&path, &whole).unwrap();
        assert!(caught > 1000);
    }
}

#[test]
fn verify_names_the_first_bad_record_in_memory() {
    let j = MemoryJournal::new();
    j.create("s", &meta()).unwrap();
    let recs = fill(&j, "s", 4);
    // Change record 3's event but keep its stored hash.
    let mut forged = Record::seal(
        Event::new("e1", EventBody::Output(Message::assistant("forged"))),
        3,
        recs[2].prev_hash,
        recs[2].fence,
    )
    .unwrap();
    forged.content_hash = recs[2].content_hash;
    j.tamper("s", 3, forged).unwrap();
    match j.verify("s") {
        Err(VerifyError::HashMismatch { seq, .. }) => assert_eq!(seq, 3),
        other => panic!("{other:?}"),
    }
    // Re-hashing the forged record breaks the next link instead.
    let rehashed = Record::seal(
        Event::new("e1", EventBody::Output(Message::assistant("forged"))),
        3,
        recs[2].prev_hash,
        recs[2].fence,
    )
    .unwrap();
    j.tamper("s", 3, rehashed).unwrap();
    assert_eq!(j.verify("s"), Err(VerifyError::BrokenLink { seq: 4 }));
}

/// A second writer cannot open a session file an open journal holds.
#[test]
fn file_sessions_are_single_writer() {
    let dir = tmpdir("lock");
    let a = FileJournal::open(&dir).unwrap();
    a.create("s", &meta()).unwrap();
    a.head("s").unwrap();
    let b = FileJournal::open(&dir).unwrap();
    // Another writer holds it: a typed, retryable conflict (ABORTED), not an i/o failure.
    let err = b.head("s").unwrap_err();
    assert_eq!(err, JournalError::Busy("s".into()));
    assert_eq!(
        harness_sessions::Error::from(err).code(),
        harness_sessions::Code::Aborted
    );
    a.close("s");
    assert_eq!(b.head("s").unwrap().seq, 0);
}

#[test]
fn every_durability_policy_writes_the_same_bytes() {
    let mut files = Vec::new();
    for d in [
        Durability::EveryRecord,
        Durability::EveryTurn,
        Durability::Never,
    ] {
        let dir = tmpdir("durability");
        let j = FileJournal::with_durability(&dir, d).unwrap();
        assert_eq!(j.durability(), d);
        j.create("s", &meta()).unwrap();
        fill(&j, "s", 3);
        j.sync("s").unwrap();
        files.push(fs::read(dir.join("s.journal")).unwrap());
    }
    assert_eq!(files[0], files[1]);
    assert_eq!(files[1], files[2]);
}

/// The stored record line is JSON whose `event` is the canonical event, so anyone can
/// recompute the hash.
#[test]
fn file_lines_are_json_with_the_canonical_event() {
    let dir = tmpdir("format");
    let j = FileJournal::open(&dir).unwrap();
    j.create("s", &meta()).unwrap();
    let recs = fill(&j, "s", 2);
    let text = fs::read_to_string(dir.join("s.journal")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["fence"], "1");
    assert_eq!(lines[2]["seq"], "1");
    assert_eq!(lines[2]["prev_hash"], "");
    assert_eq!(lines[3]["prev_hash"], recs[0].content_hash.to_string());
    let h = harness_sessions::hash::content_hash_of_value(
        &lines[3]["event"],
        lines[3]["prev_hash"].as_str().unwrap(),
        "2",
    )
    .unwrap();
    assert_eq!(h.to_string(), lines[3]["content_hash"]);
}

/// No panic on any input: a session file whose fence (on a fence line or on a record) is
/// already `u64::MAX` leaves no fence to mint. Acquiring one is an error naming the journal,
/// and the file is not extended; the memory store refuses the same way.
#[test]
fn an_exhausted_fence_is_an_error_not_an_overflow() {
    let dir = tmpdir("fence-max");
    let j = FileJournal::open(&dir).unwrap();
    j.create("s", &meta()).unwrap();
    j.create("t", &meta()).unwrap();
    j.close("s");
    j.close("t");
    let mut s = fs::read(dir.join("s.journal")).unwrap();
    s.extend_from_slice(b"{\"fence\":\"18446744073709551615\"}\n");
    fs::write(dir.join("s.journal"), &s).unwrap();
    // A record line carrying the maximum fence, after the fence line that minted it (a
    // session whose chain does not hold is not opened at all).
    let r = Record::seal(event(0), 1, None, u64::MAX).unwrap();
    let mut t = fs::read(dir.join("t.journal")).unwrap();
    t.extend_from_slice(
        format!(
            "{{\"fence\":\"{}\"}}\n{{\"seq\":\"1\",\"prev_hash\":\"\",\"content_hash\":\"{}\",\"fence\":\"{}\",\"event\":{}}}\n",
            u64::MAX,
            r.content_hash,
            u64::MAX,
            r.canonical()
        )
        .as_bytes(),
    );
    fs::write(dir.join("t.journal"), &t).unwrap();
    let j = FileJournal::open(&dir).unwrap();
    for (session, bytes) in [("s", &s), ("t", &t)] {
        assert_eq!(j.head(session).unwrap().fence, u64::MAX);
        assert!(
            matches!(j.acquire_fence(session), Err(JournalError::Corrupt { .. })),
            "{session}"
        );
        assert_eq!(
            &fs::read(dir.join(format!("{session}.journal"))).unwrap(),
            bytes
        );
    }
    // The memory store: a fork of a record written under the maximum fence.
    let m = MemoryJournal::new();
    m.create("p", &meta()).unwrap();
    fill(&m, "p", 1);
    m.tamper("p", 1, r).unwrap();
    m.fork("p", 1, "c", &meta()).unwrap();
    assert!(m.acquire_fence("c").is_err());
}

/// Issue: a torn last record is "set aside, nothing before it is lost". Setting aside never
/// destroys what an earlier recovery set aside: a second crash that tears the same offset
/// (the recovered journal appends at the same place) keeps both torn tails.
#[test]
fn a_second_torn_tail_at_the_same_offset_keeps_the_first() {
    let dir = tmpdir("torn-twice");
    let path = dir.join("s.journal");
    {
        let j = FileJournal::open(&dir).unwrap();
        j.create("s", &meta()).unwrap();
        fill(&j, "s", 1);
    }
    let len = fs::metadata(&path).unwrap().len();
    let mut saved = Vec::new();
    for torn in [&b"{\"seq\":\"2\",\"prev"[..], b"{\"fence\":\"7"] {
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(torn);
        fs::write(&path, &bytes).unwrap();
        let j = FileJournal::open(&dir).unwrap();
        assert_eq!(j.head("s").unwrap().seq, 1);
        let t = j.torn_tails();
        assert_eq!((t.len(), t[0].offset), (1, len));
        saved.push((t[0].saved_to.clone().unwrap(), torn.to_vec()));
    }
    assert_ne!(saved[0].0, saved[1].0);
    for (path, bytes) in saved {
        assert_eq!(fs::read(&path).unwrap(), bytes, "{}", path.display());
    }
}

/// Rule 4: "Keep that receipt/dedup state durable across host restarts; an in-memory cache is
/// insufficient." File receipts survive a restart; a receipt torn by a crash during its put
/// is ignored (that effect's receipt was not stored) and does not swallow the next one;
/// receipts are scoped by session uid, never by the key alone.
#[test]
fn file_receipts_survive_restarts_and_torn_puts() {
    use harness_core::message::{JsonObject, ToolResult};
    use harness_sessions::tools::{FileReceipts, ReceiptStore};
    let dir = tmpdir("receipts");
    let path = dir.join("receipts.jsonl");
    let ok = |id: &str| ToolResult::ok(id, JsonObject::new());
    {
        let r = FileReceipts::new(&path);
        r.put("s1", "k", &ok("first")).unwrap();
        r.put("s2", "k", &ok("other session")).unwrap();
    }
    // A crash during the next put leaves half a line.
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"session":"s1","key":"k2","res"#);
    fs::write(&path, &bytes).unwrap();
    {
        let r = FileReceipts::new(&path);
        assert_eq!(r.get("s1", "k").unwrap(), Some(ok("first")));
        assert_eq!(r.get("s2", "k").unwrap(), Some(ok("other session")));
        assert_eq!(r.get("s1", "k2").unwrap(), None);
        assert_eq!(r.get("s3", "k").unwrap(), None);
        r.put("s1", "k2", &ok("after the tear")).unwrap();
    }
    let r = FileReceipts::new(&path);
    assert_eq!(r.get("s1", "k2").unwrap(), Some(ok("after the tear")));
    assert_eq!(r.get("s1", "k").unwrap(), Some(ok("first")));
}

/// The chain is "tamper-evident" (spec: "a tamper-evident provenance chain"; research §3):
/// a file whose records do not hold (an event changed after it was written, a `prev_hash`
/// that does not link, a record carrying a fence its writer never acquired, a repeated fence
/// line) is refused when a session is opened, naming the line, rather than served to a
/// harness as History and extended with new records chained onto it (which would make the
/// new records vouch for a prefix that does not verify). Nothing is written to such a file.
#[test]
fn a_file_whose_chain_does_not_hold_is_refused_not_extended() {
    let dir = tmpdir("broken-chain");
    let path = dir.join("s.journal");
    {
        let j = FileJournal::open(&dir).unwrap();
        j.create("s", &meta()).unwrap();
        fill(&j, "s", 4);
        fill(&j, "s", 0); // a second fence line
    }
    let whole = String::from_utf8(fs::read(&path).unwrap()).unwrap();
    let lines: Vec<&str> = whole.split_inclusive('\n').collect();
    // lines: header, fence 1, records 1..=4, fence 2
    let with_line = |i: usize, new: String| {
        let mut l: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
        l[i] = new;
        l.concat()
    };
    let record3 = lines[4];
    let prev3 = &record3[record3.find("\"prev_hash\":\"").unwrap() + 13..][..64];
    let cases: Vec<(&str, String, u64)> = vec![
        (
            "event changed",
            with_line(4, record3.replace("out <2>", "out <9>")),
            5,
        ),
        (
            "prev_hash does not link",
            with_line(4, record3.replace(prev3, &"0".repeat(64))),
            5,
        ),
        (
            "fence never acquired",
            with_line(4, record3.replace("\"fence\":\"1\"", "\"fence\":\"2\"")),
            5,
        ),
        (
            "repeated fence line",
            with_line(6, format!("{}{}", lines[1], lines[6])),
            7,
        ),
    ];
    for (what, bytes, line) in cases {
        fs::write(&path, &bytes).unwrap();
        let err = FileJournal::open(&dir).unwrap().verify("s").unwrap_err();
        assert!(err.seq().is_some(), "{what}: verify names a record: {err}");
        let j = FileJournal::open(&dir).unwrap();
        match j.head("s") {
            Err(JournalError::Corrupt { line: l, .. }) => assert_eq!(l, line, "{what}"),
            other => panic!("{what}: opened a broken chain: {other:?}"),
        }
        assert!(j.acquire_fence("s").is_err(), "{what}");
        assert!(j.read("s", 1, None).is_err(), "{what}");
        assert!(j.fork("s", 2, "child", &meta()).is_err(), "{what}");
        assert!(!dir.join("child.journal").exists(), "{what}");
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes.as_bytes(),
            "{what}: written to"
        );
    }
}

/// A folder that cannot be used is reported with its path: "journal i/o: File exists (os
/// error 17)" for a `--dir` that is a file tells the user neither what nor where.
#[test]
fn an_unusable_folder_is_named_in_the_error() {
    let dir = tmpdir("not-a-dir");
    let file = dir.join("plain-file");
    fs::write(&file, b"x").unwrap();
    let err = FileJournal::open(&file).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("not a directory"), "{err}");
}
