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

use common::approval_rig::{GatedRig, recover_at_every_cut_on_the_approval_path};
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
        .harness("script", ScriptHarness::new(script()))
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
                effects.tools(),
                FileReceipts::new(receipts_path.clone()),
            ));
            (e, effects)
        };
        crash_and_recover(n, journal, &reopen, &exec, &base);
        let _ = fs::remove_dir_all(&dir);
    }
}

/// Recovery can itself be cut: the process dies again after each record a resume appends.
/// Every cut costs at most one extra provider call, and no tool effect ever repeats.
#[test]
fn a_crash_during_recovery_is_recovered_too() {
    let base = baseline();
    for first in 2..base.records {
        for second in 0..base.records - first {
            let journal = Arc::new(MemoryJournal::new());
            let model = counting_model();
            let effects = Arc::new(Effects::default());
            let receipts = Arc::new(MemoryReceipts::default());
            let exec: Arc<dyn ToolExecutor> = dedup(&effects, &receipts);
            let on = |budget: Option<usize>| {
                controller(
                    Arc::new(Crashing::new(journal.clone(), budget)),
                    &model,
                    exec.clone(),
                )
            };
            on(None).create_session("s", None).unwrap();
            assert!(block(on(Some(first)).exec(ExecRequest::text("s", "go"))).is_err());
            let len = journal.read("s", 1, None).unwrap().len();
            // The recovery dies after `second` more records (0: before any record).
            let _ = block(on(Some(second)).resume("s"));
            let host = on(None);
            if journal.read("s", 1, None).unwrap().len() < base.records {
                let turn = block(host.resume("s"))
                    .unwrap_or_else(|e| panic!("{first}/{second}: {e}"))
                    .unwrap();
                assert_eq!(turn.status, TurnStatus::Completed);
            }
            let recs = host.records("s").unwrap();
            assert!(
                model.calls() <= base.provider_calls + 2,
                "{first}/{second} (after {len} records): {} provider calls",
                model.calls()
            );
            let mut keys = effects.keys();
            assert_eq!(keys.len(), base.effects, "{first}/{second}: effects");
            keys.sort();
            keys.dedup();
            assert_eq!(
                keys.len(),
                base.effects,
                "{first}/{second}: an effect repeated"
            );
            assert_eq!(outputs(&recs), base.outputs, "{first}/{second}");
            assert!(host.verify("s").is_ok());
            assert_eq!(block(host.replay("s")).unwrap().executions, 1);
        }
    }
}

/// A stateless harness that asks the model, then runs an approval-gated tool, then asks the
/// model again.
fn gated_script() -> Vec<Op> {
    vec![Op::Model, Op::Gated, Op::Model]
}

/// The script harness in the approval-path rig, on a host whose `effect` tool is registered
/// `gated` (`requires_approval`) or not.
fn script_rig(ops: Vec<Op>, gated: bool) -> GatedRig {
    let model = counting_model();
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let tool = if gated {
        effects.tool().requires_approval()
    } else {
        effects.tool()
    };
    let m = model.clone();
    GatedRig {
        build: Box::new(move |j| {
            Controller::builder(j)
                .model(m.clone())
                .tools(harness_core::Tools::new().with(tool.clone()))
                .receipts(receipts.clone())
                .harness("script", ScriptHarness::new(ops.clone()))
                .build()
        }),
        effects: Box::new(move || effects.count()),
        provider_calls: Box::new(move || model.calls()),
    }
}

/// Record-before-effect on the approval path: the turn is cut after each record it appends,
/// whether before the park, in the approval decision's resume, or in between; recovery
/// (resume, approve when a decision is pending, resume) completes it with the executor run
/// exactly once, after the recorded decision, and at most one extra provider call.
#[test]
fn a_crash_anywhere_on_the_approval_path_is_recovered() {
    recover_at_every_cut_on_the_approval_path(&|| script_rig(gated_script(), false), "go");
}

/// The same when the harness's call says only CONTROLLER_MEDIATED and the host's registry
/// gates the tool (`requires_approval`): the gated tool never runs without its approval, at
/// any cut, and runs exactly once after it.
#[test]
fn a_tool_the_registry_gates_never_runs_without_its_approval_at_any_cut() {
    let ops = vec![Op::Model, Op::Tool, Op::Model];
    recover_at_every_cut_on_the_approval_path(&|| script_rig(ops.clone(), true), "go");
}
