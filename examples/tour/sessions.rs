//! Chapter: harness-sessions. A chat session on the file journal: a turn crashes mid-way
//! (after its MODEL_CALL reached the journal, before its OUTPUT did), resume finishes it with
//! one provider call, a fork branches the conversation, replay re-runs every turn from the
//! journal without calling the provider, and verify checks the hash chains (and catches a
//! changed byte). Then the tour's FAQ agent and its gated refund: the controller runs the
//! agent's own `Tools`, parks the turn at the refund until a person approves it, and runs it
//! once, even across a crash in the resume.

use std::sync::Arc;

use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
use harness_core::message::Message;
use harness_core::model::ScriptedModel;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::ChatHarness;
use harness_sessions::journal::{FileJournal, Journal, MemoryJournal};
use harness_sessions::testing::CrashAfter;
use harness_sessions::tools::MemoryReceipts;

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("harness-rs-tour-sessions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = Arc::new(ScriptedModel::new().otherwise(|req| {
        let q = req.last_user_text().unwrap_or_default();
        Ok(Message::assistant(match q.as_str() {
            "What is a prime number?" => {
                "A whole number above 1 divisible only by 1 and itself.".into()
            }
            "Give me three examples." => "2, 3 and 5.".into(),
            other => format!("About {other:?}: ask me again later."),
        }))
    }));
    let host_on = |journal: Arc<dyn Journal>| {
        Controller::builder(journal)
            .model(model.clone())
            .harness("chat", ChatHarness::new("tour-model"))
            .build()
    };
    let journal: Arc<dyn Journal> = Arc::new(FileJournal::open(&dir)?);
    let host = host_on(journal.clone());
    futures::executor::block_on(async {
        host.create_session("s1", Some("chat"))?;
        let t1 = host
            .exec(
                ExecRequest::text("s1", "What is a prime number?")
                    .with_config(r#"{"system_prompt":"Answer concisely."}"#),
            )
            .await?;
        println!("  turn 1: {:?}", t1.output);

        // Turn 2 crashes after 3 records: EXECUTION_START, INPUT, MODEL_CALL.
        let crashing = host_on(Arc::new(CrashAfter::new(journal.clone(), 3)));
        let err = crashing
            .exec(ExecRequest::text("s1", "Give me three examples."))
            .await
            .expect_err("the injected crash");
        println!("  turn 2 crashed mid-way: {err}");
        let calls = model.calls();
        let t2 = host.resume("s1").await?.ok_or("nothing to resume")?;
        println!(
            "  resumed: {:?} ({} provider call, {} recorded effect served; OUTPUT appended after the same MODEL_CALL)",
            t2.output,
            model.calls() - calls,
            t2.served_effects
        );

        // Branch the conversation after turn 1 (record 5 is its END).
        let fork = host.fork("s1", 5, "s2").await?;
        println!(
            "  forked s1@5 into s2 (LIFECYCLE FORK is record {})",
            fork.fork_seq
        );
        let t3 = host.exec(ExecRequest::text("s2", "Is 1 prime?")).await?;
        println!("  s2 turn 2: {:?}", t3.output);

        let calls = model.calls();
        for s in ["s1", "s2"] {
            let r = host.replay(s).await?;
            let v = host.verify(s)?;
            println!(
                "  {s}: replayed {} turns, {} records byte-identical, {} provider calls; chain of {} records verifies",
                r.executions, r.records_reproduced, r.provider_calls, v.records
            );
        }
        assert_eq!(model.calls(), calls, "replay never calls the provider");
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    for r in host.records("s1")? {
        println!(
            "    s1 {:>2} {:<16} {}",
            r.seq,
            r.event.kind().as_str(),
            &r.content_hash.to_string()[..16]
        );
    }

    // Change one byte of s1 on disk: verify names the record.
    drop(host);
    drop(journal);
    let path = dir.join("s1.journal");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, text.replacen("2, 3 and 5.", "2, 3 and 7.", 1))?;
    let reopened = FileJournal::open(&dir)?;
    match reopened.verify("s1") {
        Err(e) => println!("  after editing one byte on disk, verify says: {e}"),
        Ok(_) => return Err("verify missed a changed byte".into()),
    }
    let _ = std::fs::remove_dir_all(&dir);
    gated_refund()
}

/// The tour's FAQ agent (`harness_core::agent::faq`) on the controller: its refund is gated
/// (`requires_approval`), so the turn parks at it, journaled as REQUIRES_APPROVAL, until
/// `approve`; the turn then crashes right after the refund ran, before its result reached the
/// journal, and `resume` answers the re-driven call from its receipt: the refund ran once,
/// with the call's idempotency key.
fn gated_refund() -> Result<(), Box<dyn std::error::Error>> {
    let refunds = Refunds::default();
    let tools = faq_tools(&refunds);
    let journal = Arc::new(MemoryJournal::new());
    let receipts = Arc::new(MemoryReceipts::default());
    let host_on = |journal: Arc<dyn Journal>| {
        Controller::builder(journal)
            .model(faq_model())
            .tools(tools.clone())
            .receipts(Arc::clone(&receipts))
            .harness("faq", FaqAgent::new())
            .build()
    };
    let host = host_on(journal.clone());
    futures::executor::block_on(async {
        host.create_session("r1", Some("faq"))?;
        let turn = host
            .exec(ExecRequest::text("r1", "Please refund order 42"))
            .await?;
        if let TurnStatus::Parked {
            tool_call_id,
            request_seq,
        } = &turn.status
        {
            println!(
                "  refund: parked at {tool_call_id} (APPROVAL_REQUEST is record {request_seq}); ran {} times",
                refunds.count()
            );
        }
        let pending = host.pending_approval("r1")?.ok_or("no pending approval")?;
        host.approve("r1", &pending.call.id, true, "checked the receipt")?;
        // Resume on a journal that takes one more record and then fails: the refund runs,
        // and its TOOL_RESULT never reaches the journal.
        let crashing = host_on(Arc::new(CrashAfter::new(journal.clone(), 1)));
        match crashing.resume("r1").await {
            Err(e) => println!(
                "  approved; the resume crashed before the refund's result was journaled: {e} (the refund ran {} time)",
                refunds.count()
            ),
            Ok(t) => return Err(format!("no crash: {:?}", t.map(|t| t.output)).into()),
        }
        let turn = host.resume("r1").await?.ok_or("nothing to resume")?;
        println!(
            "  resumed again: {:?}; the refund ran {} time(s), key {}",
            turn.output,
            refunds.count(),
            refunds
                .paid()
                .first()
                .map(|r| r.idempotency_key.as_str())
                .unwrap_or("")
        );
        if refunds.count() != 1 {
            return Err(format!("the refund ran {} times", refunds.count()).into());
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
