//! Chapter: harness-sessions. A chat session on the file journal: a turn crashes mid-way
//! (after its MODEL_CALL reached the journal, before its OUTPUT did), resume finishes it with
//! one provider call, a fork branches the conversation, replay re-runs every turn from the
//! journal without calling the provider, and verify checks the hash chains (and catches a
//! changed byte).

use std::sync::Arc;

use harness_core::message::Message;
use harness_core::model::ScriptedModel;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::harnesses::ChatHarness;
use harness_sessions::journal::{FileJournal, Journal};
use harness_sessions::testing::CrashAfter;

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
    Ok(())
}
