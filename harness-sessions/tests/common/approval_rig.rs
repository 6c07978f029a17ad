//! The crash rig of the approval path, for any agent whose turn parks on one gated call: cut
//! the turn after each record it appends (before the park, or in the resume that delivers the
//! decision), recover it as an operator would, and check the gated effect ran exactly once,
//! after its journaled decision.

use std::sync::Arc;

use harness_core::event::{EventBody, EventKind};
use harness_sessions::Error;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{Journal, MemoryJournal};

use super::{Crashing, block};

/// One run of the rig: fresh effects, receipts and model, shared by every controller `build`
/// makes (a "restarted" process keeps its durable receipts and its provider).
pub struct GatedRig {
    /// A controller over `journal`, registering the agent as the default harness.
    pub build: Box<dyn Fn(Arc<dyn Journal>) -> Controller>,
    /// How many times the gated effect ran.
    pub effects: Box<dyn Fn() -> usize>,
    /// How many times the provider was called.
    pub provider_calls: Box<dyn Fn() -> usize>,
}

/// The uncut turn: the records before the park, the records the resume after the decision
/// appends, and the provider calls of the whole turn.
fn uncut(rig: &GatedRig, input: &str) -> (usize, usize, usize) {
    let journal = Arc::new(MemoryJournal::new());
    let host = (rig.build)(journal.clone());
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", input))).unwrap();
    assert!(matches!(turn.status, TurnStatus::Parked { .. }), "{turn:?}");
    let before_park = journal.read("s", 1, None).unwrap().len();
    let p = host.pending_approval("s").unwrap().unwrap();
    host.approve("s", &p.call.id, true, "").unwrap();
    let turn = block(host.resume("s")).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!((rig.effects)(), 1);
    (before_park, turn.appended, (rig.provider_calls)())
}

/// Cuts the gated turn of `new_rig()`'s agent after each record, on the way to the park and in
/// the resume after the decision, then recovers it (resume, approve when a decision is
/// pending, resume; exec again when nothing committed). Each time: the turn completes once,
/// the effect ran exactly once and only after its decision was journaled, at most one extra
/// provider call, the chain verifies and the turn replays.
pub fn recover_at_every_cut_on_the_approval_path(new_rig: &dyn Fn() -> GatedRig, input: &str) {
    let (before_park, after_decision, provider_calls) = uncut(&new_rig(), input);
    for (phase, cuts) in [("exec", before_park), ("resume", after_decision)] {
        for n in 0..cuts {
            let rig = new_rig();
            let journal = Arc::new(MemoryJournal::new());
            let on = |budget: Option<usize>| {
                (rig.build)(Arc::new(Crashing::new(journal.clone(), budget)))
            };
            let host = on(None);
            host.create_session("s", None).unwrap();
            let exec_budget = if phase == "exec" { Some(n) } else { None };
            let _ = block(on(exec_budget).exec(ExecRequest::text("s", input)));
            if phase == "resume" {
                let p = host.pending_approval("s").unwrap().unwrap();
                let decision = host.approve("s", &p.call.id, true, "").unwrap();
                assert_eq!((rig.effects)(), 0, "no effect before the decision");
                let _ = block(on(Some(n)).resume("s"));
                // The effect only ever ran after its decision was journaled.
                assert!(journal.head("s").unwrap().seq >= decision);
            }
            // Recover the way an operator would.
            for _ in 0..4 {
                match block(host.resume("s")) {
                    Ok(Some(t)) if t.status == TurnStatus::Completed => break,
                    Ok(Some(_)) | Err(Error::ApprovalPending { .. }) => {
                        assert_eq!((rig.effects)(), 0, "{phase} cut after {n}: ran ungated");
                        let p = host.pending_approval("s").unwrap().unwrap();
                        host.approve("s", &p.call.id, true, "").unwrap();
                    }
                    // Nothing committed: the turn is run again.
                    Ok(None) if host.records("s").unwrap().is_empty() => {
                        match block(host.exec(ExecRequest::text("s", input))) {
                            Ok(t) => assert!(matches!(t.status, TurnStatus::Parked { .. })),
                            Err(e) => panic!("{phase} cut after {n}: {e}"),
                        }
                    }
                    Ok(None) => break,
                    Err(Error::InvalidExecutionLog(_)) => {
                        block(host.exec(ExecRequest::text("s", input))).unwrap();
                    }
                    Err(e) => panic!("{phase} cut after {n}: {e}"),
                }
            }
            let recs = host.records("s").unwrap();
            let count = |k: EventKind| recs.iter().filter(|r| r.event.kind() == k).count();
            assert_eq!(
                count(EventKind::End),
                1,
                "{phase} cut after {n}: completed once"
            );
            assert_eq!((rig.effects)(), 1, "{phase} cut after {n}: effects");
            assert!(
                (rig.provider_calls)() <= provider_calls + 1,
                "{phase} cut after {n}: {} calls",
                (rig.provider_calls)()
            );
            // The gated call's one receipt follows its decision.
            let decision = recs
                .iter()
                .position(|r| r.event.kind() == EventKind::ApprovalResult)
                .unwrap();
            let receipts: Vec<usize> = recs
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    matches!(&r.event.body, EventBody::ToolResult(t) if t.approval_decision_seq != 0)
                })
                .map(|(i, _)| i)
                .collect();
            assert_eq!(receipts.len(), 1, "{phase} cut after {n}");
            assert!(decision < receipts[0], "{phase} cut after {n}");
            assert!(host.verify("s").is_ok());
            assert_eq!(block(host.replay("s")).unwrap().executions, 1);
            assert_eq!(
                (rig.effects)(),
                1,
                "{phase} cut after {n}: replay ran nothing"
            );
        }
    }
}
