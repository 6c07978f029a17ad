//! The PostgreSQL stores on a real server (feature `postgres`): the shared journal
//! conformance suite, then what only a shared database shows: two hosts (two pools) on one
//! session, migrations racing, receipts seen across hosts, tampering caught by `verify`.
//!
//! Needs `HARNESS_PG_URL` (scripts/interop/postgres/run.sh starts a throwaway server and sets
//! it); without it every test fails, saying so. Each test works in a schema of its own, so
//! the tests run in parallel on one database.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod journal_suite;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use harness_core::message::ModelRequest;
use harness_core::message::{ToolCall, ToolResult};
use harness_core::model::{Model, ModelStream, ScriptedModel};
use harness_core::pg::{Pg, PgConfig, PgError};
use harness_core::tool::ToolContext;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::ChatHarness;
use harness_sessions::journal::{Durability, Journal, JournalError, PgJournal, PgReceipts};
use harness_sessions::record::Record;
use harness_sessions::tools::{DedupExecutor, ReceiptStore, ToolError, ToolExecutor};
use harness_sessions::verify::VerifyError;
use journal_suite::{Store, event, fill, meta};

/// A schema of this test's own (or a failure saying how to get a server: never a silent pass).
fn fresh_config() -> PgConfig {
    PgConfig::for_test("sessions")
        .unwrap_or_else(|e| panic!("{e}"))
        .pool_size(4)
}

/// A schema; each open is a new host: a new pool, a new `PgJournal` whose every append
/// waits for its WAL flush (`Durability::EveryRecord`).
struct Schema(PgConfig);

impl Store for Schema {
    fn open(&self) -> Arc<dyn Journal> {
        Arc::new(
            PgJournal::with_config(&self.0)
                .unwrap()
                .with_durability(Durability::EveryRecord),
        )
    }
}

/// The shared conformance suite on PostgreSQL.
mod conformance {
    use super::{Schema, fresh_config};
    journal_suite!(Schema(fresh_config()));
}

/// A schema whose journals commit their appends without waiting for the WAL flush
/// (`Durability::EveryTurn`, the default): a different statement, the same answers.
struct TurnSchema(PgConfig);

impl Store for TurnSchema {
    fn open(&self) -> Arc<dyn Journal> {
        Arc::new(
            PgJournal::with_config(&self.0)
                .unwrap()
                .with_durability(Durability::EveryTurn),
        )
    }
}

/// The shared conformance suite on PostgreSQL with flushes per turn: compare-and-set, fences,
/// `Conflict`/`Fenced`/`UnknownFence` exactly as with a flush per append.
mod conformance_every_turn {
    use super::{TurnSchema, fresh_config};
    journal_suite!(TurnSchema(fresh_config()));
}

/// `Durability::EveryTurn` (the file journal's default policy, journal/file/mod.rs): the
/// appends of a turn commit without waiting for their WAL flush, and `sync`, the durability
/// point the host calls when a turn ends (journal/mod.rs, `Journal::sync`), returns only
/// once the server's WAL is flushed past every one of them. The `synchronous_commit = off`
/// of an append is its own transaction's: the pooled connection keeps the server's setting.
#[test]
fn every_turn_sync_flushes_the_wal_past_the_turns_appends() {
    let j = PgJournal::with_config(&fresh_config().pool_size(1))
        .unwrap()
        .with_durability(Durability::EveryTurn);
    j.create("s", &meta()).unwrap();
    let fence = j.acquire_fence("s").unwrap();
    let mut head = j.head("s").unwrap();
    for i in 0..8 {
        let r = Record::seal(event(i), head.seq + 1, head.hash, fence).unwrap();
        j.append("s", head.seq, fence, std::slice::from_ref(&r))
            .unwrap();
        head.seq = r.seq;
        head.hash = Some(r.content_hash);
    }
    let pool = j.pg().pool().clone();
    let (inserted, setting): (String, String) = j
        .pg()
        .block_on(async move {
            let c = pool.get().await?;
            let lsn = c
                .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
                .await?;
            let setting = c.query_one("SHOW synchronous_commit", &[]).await?;
            Ok((lsn.get(0), setting.get(0)))
        })
        .unwrap();
    assert_eq!(
        setting, "on",
        "an append's setting leaked onto its connection"
    );
    j.sync("s").unwrap();
    let pool = j.pg().pool().clone();
    let flushed: bool = j
        .pg()
        .block_on(async move {
            let c = pool.get().await?;
            let row = c
                .query_one(
                    "SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn",
                    &[&inserted],
                )
                .await?;
            Ok(row.get(0))
        })
        .unwrap();
    assert!(
        flushed,
        "sync returned before the WAL was flushed past the turn's appends"
    );
    assert_eq!(j.verify("s").unwrap().records, 8);
}

/// The race across hosts: each writer is its own host (its own pool and connections), all
/// appending at one seq of one session. research/agentsessions.md:237, single writer by CAS:
/// exactly one wins per seq, every other gets `Conflict`.
#[test]
fn writers_on_separate_hosts_have_one_winner_per_seq() {
    const HOSTS: usize = 4;
    let store = Schema(fresh_config());
    let hosts: Vec<Arc<dyn Journal>> = (0..HOSTS).map(|_| store.open()).collect();
    hosts[0].create("s", &meta()).unwrap();
    let fence = hosts[0].acquire_fence("s").unwrap();
    for round in 0..5 {
        let head = hosts[0].head("s").unwrap();
        let barrier = Barrier::new(HOSTS);
        let results: Vec<Result<Record, JournalError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = hosts
                .iter()
                .enumerate()
                .map(|(w, j)| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let r = Record::seal(
                            event(1 + round * HOSTS + w),
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
        let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "{results:?}");
        assert!(results.iter().all(|r| match r {
            Ok(_) => true,
            Err(JournalError::Conflict { actual, .. }) => *actual == head.seq + 1,
            Err(_) => false,
        }));
        // Every host reads the winner.
        for j in &hosts {
            assert_eq!(
                j.read("s", head.seq + 1, None).unwrap(),
                vec![won[0].clone()]
            );
        }
    }
    assert_eq!(hosts[3].verify("s").unwrap().records, 5);
}

/// A fence acquired on one host fences the writer on another (research/agentsessions.md:237:
/// "The log rejects a lower fence (eventlog.ErrFenced)").
#[test]
fn a_fence_acquired_on_another_host_fences_this_one() {
    let store = Schema(fresh_config());
    let (a, b) = (store.open(), store.open());
    a.create("s", &meta()).unwrap();
    let fa = a.acquire_fence("s").unwrap();
    let r1 = Record::seal(event(0), 1, None, fa).unwrap();
    a.append("s", 0, fa, std::slice::from_ref(&r1)).unwrap();
    let fb = b.acquire_fence("s").unwrap();
    let r2 = Record::seal(event(1), 2, Some(r1.content_hash), fa).unwrap();
    assert_eq!(
        a.append("s", 1, fa, &[r2]),
        Err(JournalError::Fenced {
            session: "s".into(),
            fence: fa,
            current: fb
        })
    );
    let r2 = Record::seal(event(1), 2, Some(r1.content_hash), fb).unwrap();
    b.append("s", 1, fb, &[r2]).unwrap();
    assert_eq!(a.head("s").unwrap(), b.head("s").unwrap());
}

/// A stored record changed behind the journal's back is named by `verify` (the chain is over
/// the stored bytes, research/agentsessions.md:55).
#[test]
fn verify_names_a_record_changed_in_the_database() {
    let cfg = fresh_config();
    let j = PgJournal::with_config(&cfg).unwrap();
    j.create("s", &meta()).unwrap();
    let recs = fill(&j, "s", 4);
    let pool = j.pg().pool().clone();
    let forged = event(99);
    let forged = harness_sessions::hash::canonical_event(&forged).unwrap();
    j.pg()
        .block_on(async move {
            let c = pool.get().await?;
            c.execute(
                "UPDATE harness_record SET event = $1 WHERE session = 's' AND seq = 3",
                &[&forged],
            )
            .await?;
            Ok(())
        })
        .unwrap();
    match j.verify("s") {
        Err(VerifyError::HashMismatch { seq, .. }) => assert_eq!(seq, 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(j.read("s", 4, None).unwrap(), vec![recs[3].clone()]);
}

/// research/agentsessions.md:55: seq and fence are int64. A fence at `i64::MAX` cannot grow:
/// acquiring one is an error, not an overflow, and the stored fence is unchanged.
#[test]
fn an_exhausted_fence_is_an_error_not_an_overflow() {
    let j = PgJournal::with_config(&fresh_config()).unwrap();
    j.create("s", &meta()).unwrap();
    let pool = j.pg().pool().clone();
    j.pg()
        .block_on(async move {
            let c = pool.get().await?;
            c.execute(
                "UPDATE harness_session SET fence = 9223372036854775807 WHERE session = 's'",
                &[],
            )
            .await?;
            Ok(())
        })
        .unwrap();
    assert!(matches!(
        j.acquire_fence("s"),
        Err(JournalError::Corrupt { .. })
    ));
    assert_eq!(j.head("s").unwrap().fence, i64::MAX as u64);
    // A record whose seq does not fit is refused before it reaches the database.
    let r = Record::seal(event(0), u64::MAX, None, 1).unwrap();
    assert!(matches!(
        j.append("s", 0, 1, &[r]),
        Err(JournalError::BadRecords(_))
    ));
}

/// Hosts starting together migrate one database once: every one connects, the version table
/// holds version 1 once. A database migrated past this build's versions is refused.
#[test]
fn migrations_run_once_under_the_lock_and_a_newer_schema_is_refused() {
    let cfg = fresh_config();
    let barrier = Barrier::new(6);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                barrier.wait();
                PgJournal::with_config(&cfg).unwrap();
            });
        }
    });
    let pg = Pg::connect(&cfg).unwrap();
    let pool = pg.pool().clone();
    let versions: Vec<i32> = pg
        .block_on(async move {
            let c = pool.get().await?;
            let rows = c
                .query(
                    "SELECT version FROM harness_schema_version WHERE component = 'sessions'",
                    &[],
                )
                .await?;
            c.execute(
                "INSERT INTO harness_schema_version (component, version, name) \
                 VALUES ('sessions', 99, 'from the future')",
                &[],
            )
            .await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
        .unwrap();
    assert_eq!(versions, vec![1]);
    let err = PgJournal::with_config(&cfg).unwrap_err();
    assert!(
        err.to_string().contains("version 99"),
        "{err}: {:?}",
        PgError::SchemaTooNew {
            component: "sessions".into(),
            found: 99,
            known: 1
        }
    );
}

/// The spec's executor dedup "keyed by (scope.SessionUID, call.IdempotencyKey)" must be
/// durable and shared (agentsessions-writing-a-harness.txt:160: "Keep that receipt/dedup
/// state durable across host restarts"): a receipt stored on one host answers on another,
/// and the tool runs once.
#[test]
fn receipts_are_shared_by_hosts_and_the_first_one_wins() {
    let cfg = fresh_config();
    let a = PgReceipts::new(Pg::connect(&cfg).unwrap()).unwrap();
    let b = PgReceipts::new(Pg::connect(&cfg).unwrap()).unwrap();
    assert_eq!(b.get("s", "k1").unwrap(), None);
    let first = ToolResult::ok_json("c1", serde_json::json!({"charged": 5}));
    a.put("s", "k1", &first).unwrap();
    assert_eq!(b.get("s", "k1").unwrap(), Some(first.clone()));
    b.put(
        "s",
        "k1",
        &ToolResult::ok_json("c1", serde_json::json!({"charged": 10})),
    )
    .unwrap();
    assert_eq!(a.get("s", "k1").unwrap(), Some(first));
    // Keys are per session.
    assert_eq!(a.get("other", "k1").unwrap(), None);

    struct Counting(AtomicUsize);
    #[async_trait::async_trait]
    impl ToolExecutor for Counting {
        async fn execute(&self, _: &ToolContext, call: &ToolCall) -> Result<ToolResult, ToolError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(ToolResult::ok_json(&call.id, serde_json::json!("done")))
        }
    }
    let tool = Arc::new(Counting(AtomicUsize::new(0)));
    let host_a = DedupExecutor::new(tool.clone(), a);
    let host_b = DedupExecutor::new(tool.clone(), b);
    let cx = ToolContext::new("s", "e1");
    let mut call = ToolCall::new("c2", "charge", Default::default());
    call.idempotency_key = "k2".into();
    let ra = futures::executor::block_on(host_a.execute(&cx, &call)).unwrap();
    let rb = futures::executor::block_on(host_b.execute(&cx, &call)).unwrap();
    assert_eq!(ra, rb);
    assert_eq!(tool.0.load(Ordering::SeqCst), 1);
}

/// A model that waits (up to 5 s) until `parties` callers are inside it, then answers.
struct Meeting {
    inner: ScriptedModel,
    parties: usize,
    inside: Mutex<usize>,
    cv: Condvar,
}

impl Model for Meeting {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let mut n = self.inside.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        let _ = self
            .cv
            .wait_timeout_while(n, Duration::from_secs(5), |n| *n < self.parties)
            .unwrap();
        self.inner.stream(req)
    }
}

/// Issue 15: "Two sessions controllers racing one session: exactly one append per seq wins,
/// the other gets Conflict/Fenced". Host A starts a turn and is inside its model call when
/// host B starts one on the same session (a new fence): A's next append is fenced, B's turn
/// completes, the chain holds and every seq was written once.
#[test]
fn two_controllers_racing_one_session() {
    let cfg = fresh_config();
    let model = Arc::new(Meeting {
        inner: ScriptedModel::new().reply("from A").reply("from B"),
        parties: 2,
        inside: Mutex::new(0),
        cv: Condvar::new(),
    });
    let host = |m: Arc<Meeting>| {
        Controller::builder(PgJournal::with_config(&cfg).unwrap())
            .model(m)
            .harness("chat", ChatHarness::new("m"))
            .build()
    };
    let (a, b) = (host(model.clone()), host(model.clone()));
    a.create_session("s", Some("chat")).unwrap();
    let (ra, rb) = std::thread::scope(|scope| {
        let ta =
            scope.spawn(|| futures::executor::block_on(a.exec(ExecRequest::text("s", "hi A"))));
        // B starts once A is inside its model call.
        while *model.inside.lock().unwrap() < 1 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let tb =
            scope.spawn(|| futures::executor::block_on(b.exec(ExecRequest::text("s", "hi B"))));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    match &ra {
        Err(harness_sessions::Error::Journal(JournalError::Fenced { .. }))
        | Err(harness_sessions::Error::Journal(JournalError::Conflict { .. })) => {}
        other => panic!("host A: {other:?}"),
    }
    let rb = rb.unwrap();
    assert_eq!(rb.status, TurnStatus::Completed);
    let v = b.verify("s").unwrap();
    let records = a.records("s").unwrap();
    assert_eq!(v.records, records.len() as u64);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1);
    }
}
