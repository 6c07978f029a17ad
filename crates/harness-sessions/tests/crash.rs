//! Crash injection (issue: "stop a turn after each record in turn, resume, and check the turn
//! completes with at most one extra provider call and no tool effect repeated").
//!
//! Rule 1: "a cut during a model call costs at most one extra provider call"; I3: "A crash
//! between an effect's intent and its result is re-driven at most once. Host-executed tools
//! carry an idempotency key so the re-drive dedups."
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use harness_core::event::{EventBody, EventKind};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{FileJournal, Journal, MemoryJournal, SessionMeta};
use harness_sessions::tools::{DedupExecutor, FileReceipts, MemoryReceipts, ToolExecutor};
use harness_sessions::{Error, Record};

fn script() -> Vec<Op> {
    vec![
        Op::Model,
        Op::Tool,
        Op::Output("thinking".into()),
        Op::Model,
        Op::Tool,
        Op::Report,
        Op::Usage(12),
        Op::Model,
    ]
}

fn controller(
    j: Arc<dyn Journal>,
    model: &Arc<harness_core::model::ScriptedModel>,
    exec: Arc<dyn ToolExecutor>,
) -> Controller {
    Controller::builder(j)
        .model(model.clone())
        .executor(exec)
        .harness("script", Arc::new(ScriptHarness::new(script())))
        .build()
}

/// The OUTPUT texts of a journal.
fn outputs(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.event.body {
            EventBody::Output(m) => Some(m.text()),
            _ => None,
        })
        .collect()
}

struct Baseline {
    records: usize,
    provider_calls: usize,
    effects: usize,
    outputs: Vec<String>,
}

fn baseline() -> Baseline {
    let journal = Arc::new(MemoryJournal::new());
    let model = counting_model();
    let effects = Arc::new(Effects::default());
    let host = controller(
        journal.clone(),
        &model,
        dedup(&effects, &Arc::new(MemoryReceipts::default())),
    );
    host.create_session("s", None).unwrap();
    block(host.exec(ExecRequest::text("s", "go"))).unwrap();
    let recs = host.records("s").unwrap();
    Baseline {
        records: recs.len(),
        provider_calls: model.calls(),
        effects: effects.count(),
        outputs: outputs(&recs),
    }
}

/// Runs the turn until `n` records were appended, then recovers it the way an operator would.
/// Returns the provider calls and tool effects across the crash and the recovery.
fn crash_and_recover(
    n: usize,
    journal: Arc<dyn Journal>,
    reopen: &dyn Fn() -> Arc<dyn Journal>,
    exec: &dyn Fn() -> (Arc<dyn ToolExecutor>, Arc<Effects>),
    base: &Baseline,
) {
    let model = counting_model();
    let (executor, effects) = exec();
    journal
        .create(
            "s",
            &SessionMeta {
                harness: "script".into(),
                parent: None,
            },
        )
        .unwrap();
    let first = controller(Arc::new(Crashing::new(journal, Some(n))), &model, executor);
    let crashed = block(first.exec(ExecRequest::text("s", "go")));
    assert!(crashed.is_err(), "crash after {n} records");
    drop(first);
    // "Restart": a new controller over the reopened journal and the same durable receipts.
    let journal = reopen();
    let (executor, effects2) = exec();
    let host = controller(journal.clone(), &model, executor);
    let recorded = host.records("s").unwrap().len();
    assert_eq!(recorded, n, "every record before the crash survived");
    match block(host.resume("s")) {
        Ok(Some(turn)) => assert_eq!(turn.status, TurnStatus::Completed),
        // Nothing started, or the inputs did not all commit: resume refuses without calling
        // anything; a new Exec runs the turn.
        Ok(None) => {
            assert_eq!(n, 0);
            block(host.exec(ExecRequest::text("s", "go"))).unwrap();
        }
        Err(Error::InvalidExecutionLog(_)) => {
            assert_eq!(n, 1, "only the start marker committed");
            assert_eq!(model.calls(), 0);
            block(host.exec(ExecRequest::text("s", "go"))).unwrap();
        }
        Err(e) => panic!("crash after {n}: {e}"),
    }
    let recs = host.records("s").unwrap();
    assert!(
        model.calls() <= base.provider_calls + 1,
        "crash after {n}: {} provider calls",
        model.calls()
    );
    let all_effects: Vec<_> = effects.keys().into_iter().chain(effects2.keys()).collect();
    let mut unique = all_effects.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        all_effects.len(),
        "crash after {n}: an effect repeated"
    );
    assert_eq!(all_effects.len(), base.effects, "crash after {n}");
    // The recovered turn says what the uninterrupted one said, once.
    assert_eq!(outputs(&recs), base.outputs, "crash after {n}");
    assert_eq!(
        recs.iter()
            .filter(|r| r.event.kind() == EventKind::End)
            .count(),
        1
    );
    assert!(host.verify("s").is_ok());
    let calls = model.calls();
    let rep = block(host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.provider_calls), (1, 0));
    assert_eq!(model.calls(), calls);
}

#[test]
fn crash_after_each_record_in_memory() {
    let base = baseline();
    assert_eq!(base.records, 16);
    for n in 0..base.records {
        let journal = Arc::new(MemoryJournal::new());
        let receipts = Arc::new(MemoryReceipts::default());
        let j2 = journal.clone();
        let reopen = move || -> Arc<dyn Journal> { j2.clone() };
        let exec = || {
            let effects = Arc::new(Effects::default());
            let e: Arc<dyn ToolExecutor> = dedup(&effects, &receipts);
            (e, effects)
        };
        crash_and_recover(n, journal, &reopen, &exec, &base);
    }
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

fn tmpdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harness-sessions-crash-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// The same on the file journal, with a torn half-written record left behind by the crash and
/// receipts in a file: the restart reopens both from disk.
#[test]
fn crash_after_each_record_on_files_with_a_torn_tail() {
    let base = baseline();
    for n in 0..base.records {
        let dir = tmpdir();
        let journal: Arc<dyn Journal> = Arc::new(FileJournal::open(&dir).unwrap());
        let d2 = dir.clone();
        let holder = std::sync::Mutex::new(Some(journal.clone()));
        let reopen = move || -> Arc<dyn Journal> {
            // The old process is gone: release its file and leave a torn write behind.
            holder.lock().unwrap().take();
            let mut f = fs::OpenOptions::new()
                .append(true)
                .open(d2.join("s.journal"))
                .unwrap();
            f.write_all(br#"{"seq":"99","prev_hash":"ab"#).unwrap();
            let j = FileJournal::open(&d2).unwrap();
            let _ = j.head("s");
            assert_eq!(j.torn_tails().len(), 1);
            Arc::new(j)
        };
        let receipts_path = dir.join("receipts.jsonl");
        let exec = || {
            let effects = Arc::new(Effects::default());
            let e: Arc<dyn ToolExecutor> = Arc::new(DedupExecutor::new(
                effects.clone(),
                FileReceipts::new(receipts_path.clone()),
            ));
            (e, effects)
        };
        crash_and_recover(n, journal, &reopen, &exec, &base);
        let _ = fs::remove_dir_all(&dir);
    }
}
