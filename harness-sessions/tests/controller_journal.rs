//! The journal under the controller: the single-writer fence, the durability point, a head
//! with no seq left, and how `verify` reports journal errors. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use harness_core::event::EventBody;
use harness_core::message::Message;
use harness_core::model::{ModelError, ScriptedModel};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;
use harness_sessions::{Code, Error};

/// The journal's single-writer order: a zombie controller whose fence was superseded cannot
/// append ("The log rejects a lower fence").
#[test]
fn a_superseded_writer_is_fenced() {
    let journal = Arc::new(MemoryJournal::new());
    journal
        .create(
            "s",
            &harness_sessions::journal::SessionMeta {
                harness: "x".into(),
                parent: None,
            },
        )
        .unwrap();
    let old = journal.acquire_fence("s").unwrap();
    let _new = journal.acquire_fence("s").unwrap();
    let r = harness_sessions::Record::seal(
        harness_core::event::Event::new("e", EventBody::Output(Message::assistant("late"))),
        1,
        None,
        old,
    )
    .unwrap();
    let err: Error = journal.append("s", 0, old, &[r]).unwrap_err().into();
    assert_eq!(err.code(), Code::Aborted);
}

/// No panic on any input: a store whose head is already at `u64::MAX` (a hostile or broken
/// journal) has no next seq. Exec, fork and the store's append report it; nothing panics.
#[test]
fn a_head_at_u64_max_is_an_error_not_an_overflow() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    let last = h.host.records("s").unwrap().pop().unwrap();
    let forged =
        harness_sessions::Record::seal(last.event.clone(), u64::MAX, last.prev_hash, last.fence)
            .unwrap();
    h.journal.tamper("s", last.seq, forged.clone()).unwrap();
    assert_eq!(h.journal.head("s").unwrap().seq, u64::MAX);
    let err = block(h.host.exec(ExecRequest::text("s", "again"))).unwrap_err();
    assert!(matches!(err, Error::Journal(_)), "{err}");
    // The fork copies the prefix up to that head; its FORK marker has no seq left.
    let err = block(h.host.fork("s", u64::MAX, "c")).unwrap_err();
    assert!(matches!(err, Error::Journal(_)), "{err}");
    let f = h.journal.acquire_fence("s").unwrap();
    let next = harness_sessions::Record::seal(last.event, 1, Some(forged.content_hash), f).unwrap();
    assert!(h.journal.append("s", u64::MAX, f, &[next]).is_err());
}

/// Logs the writes a controller makes to its journal.
struct Logged<J> {
    inner: J,
    log: Mutex<Vec<&'static str>>,
}

impl<J: Journal> Journal for Logged<J> {
    fn create(
        &self,
        s: &str,
        m: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.inner.create(s, m)
    }
    fn meta(
        &self,
        s: &str,
    ) -> Result<harness_sessions::journal::SessionMeta, harness_sessions::JournalError> {
        self.inner.meta(s)
    }
    fn sessions(&self) -> Result<Vec<String>, harness_sessions::JournalError> {
        self.inner.sessions()
    }
    fn head(
        &self,
        s: &str,
    ) -> Result<harness_sessions::record::Head, harness_sessions::JournalError> {
        self.inner.head(s)
    }
    fn acquire_fence(&self, s: &str) -> Result<u64, harness_sessions::JournalError> {
        self.log.lock().unwrap().push("fence");
        self.inner.acquire_fence(s)
    }
    fn append(
        &self,
        s: &str,
        e: u64,
        f: u64,
        r: &[harness_sessions::Record],
    ) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("append");
        self.inner.append(s, e, f, r)
    }
    fn read(
        &self,
        s: &str,
        from: u64,
        to: Option<u64>,
    ) -> Result<Vec<harness_sessions::Record>, harness_sessions::JournalError> {
        self.inner.read(s, from, to)
    }
    fn fork(
        &self,
        p: &str,
        at: u64,
        c: &str,
        m: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("fork");
        self.inner.fork(p, at, c, m)
    }
    fn sync(&self, s: &str) -> Result<(), harness_sessions::JournalError> {
        self.log.lock().unwrap().push("sync");
        self.inner.sync(s)
    }
}

/// Issue: "durability policy explicit (fsync per turn by default, configurable)": the
/// controller ends every operation that wrote records with the journal's durability point
/// (`Journal::sync`, where the file journal fsyncs by default), whatever the outcome:
/// completed, failed, parked, approved, forked, or cut short by a journal failure.
#[test]
fn every_operation_that_writes_ends_at_a_durability_point() {
    let mem = Arc::new(MemoryJournal::new());
    let model = Arc::new(
        ScriptedModel::new()
            .reply("one")
            .fail(ModelError::Provider("down".into()))
            .otherwise(|_| Ok(Message::assistant("ok"))),
    );
    let effects = Arc::new(Effects::default());
    let run = |budget: Option<usize>, op: &dyn Fn(&Controller)| {
        let logged = Arc::new(Logged {
            inner: Crashing::new(mem.clone(), budget),
            log: Mutex::new(Vec::new()),
        });
        let host = Controller::builder(logged.clone())
            .model(model.clone())
            .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
            .harness("script", ScriptHarness::new(vec![Op::Model]))
            .harness("gated", ScriptHarness::new(vec![Op::Gated]))
            .build();
        op(&host);
        let log = logged.log.lock().unwrap().clone();
        assert!(log.contains(&"append"), "{log:?}");
        assert_eq!(log.last(), Some(&"sync"), "{log:?}");
    };
    run(None, &|h| {
        h.create_session("s", Some("script")).unwrap();
        block(h.exec(ExecRequest::text("s", "completed"))).unwrap();
    });
    run(None, &|h| {
        assert!(block(h.exec(ExecRequest::text("s", "failed"))).is_err());
    });
    run(None, &|h| {
        block(h.resume("s")).unwrap().unwrap();
    });
    run(Some(3), &|h| {
        assert!(block(h.exec(ExecRequest::text("s", "cut"))).is_err());
    });
    run(None, &|h| {
        let t = block(h.exec(ExecRequest::text("s", "parked").with_harness("gated"))).unwrap();
        assert!(matches!(t.status, TurnStatus::Parked { .. }));
    });
    run(None, &|h| {
        h.approve("s", "call-0", true, "").unwrap();
    });
    run(None, &|h| {
        block(h.fork("s", 3, "c")).unwrap();
    });
}

/// Every other operation on an unknown session is NOT_FOUND, and on an unusable uid
/// INVALID_ARGUMENT; `verify` is no different (it said INTERNAL, which tells a caller the
/// host broke rather than that the session does not exist).
#[test]
fn verify_maps_journal_errors_like_every_other_operation() {
    let h = host_with(vec![], counting_model());
    let err = h.host.verify("nope").unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    assert_eq!(
        err.code(),
        h.host.records("nope").unwrap_err().code(),
        "records and verify agree"
    );
    let dir = std::env::temp_dir().join(format!("hs-verify-codes-{}", std::process::id()));
    let files = Arc::new(harness_sessions::journal::FileJournal::open(&dir).unwrap());
    let host = Controller::builder(files).build();
    let err = host.verify("../x").unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let err = host.verify("nope").unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A journal whose chain does not hold is corruption, not a host fault: every operation
/// reports it as gRPC `DATA_LOSS` (15, "Unrecoverable data loss or corruption"), not
/// `INTERNAL` (13), whether `verify` finds it (memory or file journal) or opening the file
/// refuses it (exec, records).
#[test]
fn a_journal_that_does_not_hold_is_data_loss() {
    // Memory: a record changed after it was written.
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "hi"))).unwrap();
    let mut second = h.host.records("s").unwrap()[1].clone();
    second.event.body = EventBody::Input(Message::user("changed"));
    // Resealed: its own hash holds, record 3 no longer links to it.
    let forged =
        harness_sessions::Record::seal(second.event, 2, second.prev_hash, second.fence).unwrap();
    h.journal.tamper("s", 2, forged).unwrap();
    let err = h.host.verify("s").unwrap_err();
    assert_eq!(err.code().grpc(), 15, "{err}");

    // File: an event changed in place.
    let dir = std::env::temp_dir().join(format!("hs-data-loss-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let build = || {
        Controller::builder(Arc::new(
            harness_sessions::journal::FileJournal::open(&dir).unwrap(),
        ))
        .model(counting_model())
        .harness("script", ScriptHarness::new(vec![Op::Model]))
        .build()
    };
    let host = build();
    host.create_session("s", None).unwrap();
    block(host.exec(ExecRequest::text("s", "hello"))).unwrap();
    drop(host);
    let path = dir.join("s.journal");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("hello", "jello")).unwrap();
    let host = build();
    let err = host.verify("s").unwrap_err();
    assert_eq!(err.code().grpc(), 15, "verify: {err}");
    let err = host.records("s").unwrap_err();
    assert_eq!(err.code().grpc(), 15, "records: {err}");
    let err = block(host.exec(ExecRequest::text("s", "again"))).unwrap_err();
    assert_eq!(err.code().grpc(), 15, "exec: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
