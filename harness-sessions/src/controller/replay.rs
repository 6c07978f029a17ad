//! `replay`: re-running completed turns against the journal, read-only.

use harness_core::event::{Event, EventBody, HarnessEnd};

use super::Controller;
use super::ids::legacy_execution_id;
use super::sink::{Failure, JournalSink, Mode};
use crate::error::Error;
use crate::execution::{Execution, Executions};
use crate::record::Head;

/// What a replay checked.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplayReport {
    /// Completed executions re-run against the journal (the whole-log run of a v0.1.2
    /// prefix counts as one).
    pub executions: usize,
    /// Incomplete executions skipped (interrupted, failed, parked).
    pub skipped: usize,
    /// Records reproduced byte for byte (effects and END).
    pub records_reproduced: usize,
    /// Provider calls made: always zero (I1).
    pub provider_calls: usize,
    /// Tool executor calls made: always zero.
    pub executor_calls: usize,
    /// The output text of each re-run, in order (the legacy run of a v0.1.2 prefix first).
    pub outputs: Vec<String>,
}

impl Controller {
    /// Re-runs every completed execution against the journal, serving every recorded effect
    /// and never calling the provider or the executor (I1). Each effect and END the harness
    /// produces must be byte-identical to the recorded one (I5); the model input hash of
    /// every model call must match (I0). ERROR records and incomplete executions are
    /// skipped. Read-only.
    pub async fn replay(&self, session: &str) -> Result<ReplayReport, Error> {
        let span = tracing::info_span!(
            "sessions.replay",
            session,
            executions = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let r = tracing::Instrument::instrument(self.replay_in(session), span.clone()).await;
        match &r {
            Ok(report) => {
                span.record("executions", report.executions);
                span.record("outcome", "reproduced");
            }
            Err(e) => {
                tracing::debug!(parent: &span, error = %e, "replay failed");
                span.record("outcome", "error");
            }
        }
        r
    }

    async fn replay_in(&self, session: &str) -> Result<ReplayReport, Error> {
        let meta = self.journal.meta(session)?;
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        if let Some(why) = xs.invalid {
            return Err(Error::InvalidExecutionLog(why));
        }
        if xs.orphans > 0 {
            return Err(Error::Legacy(
                "replay: records with execution ids but no start marker",
            ));
        }
        // A v0.1.2 prefix replays first, as one whole-log invocation (see
        // `Executions::legacy_replay`), then every completed modern execution.
        let legacy = xs.legacy_replay(&records, |i| legacy_execution_id(session, &records[i]));
        let skipped = xs.list.iter().filter(|x| !x.is_completed()).count();
        let completed: Vec<Execution> = legacy
            .into_iter()
            .chain(xs.list.into_iter().filter(Execution::is_completed))
            .collect();
        // Check every harness name and version before any Run.
        let mut prepared = Vec::with_capacity(completed.len());
        for x in &completed {
            let p = self
                .recorded_harness(x, &meta)
                .await?
                .journal_rebuildable("replay")?;
            Self::check_inputs(x)?;
            prepared.push(p);
        }
        let mut report = ReplayReport {
            skipped,
            ..ReplayReport::default()
        };
        let events = Self::events_of(&records);
        for (x, p) in completed.iter().zip(prepared) {
            let head = Head {
                seq: records.last().map_or(0, |r| r.seq),
                hash: records.last().map(|r| r.content_hash),
                fence: 0,
            };
            let mut ctx = self.ctx(session, &x.execution_id, 0, &p.descriptor, 0, Mode::Replay);
            ctx.legacy = x.legacy;
            let mut sink = JournalSink::new(ctx, Mode::Replay, &records, x.effects.clone(), head);
            let start = self.start_of(session, &events, x, true);
            let result = p.harness.run(start, &mut sink).await;
            report.provider_calls += sink.stats.provider_calls;
            report.executor_calls += sink.stats.executor_calls;
            let diverged = |detail: String| Error::Diverged {
                execution_id: x.execution_id.clone(),
                detail,
            };
            if let Some(f) = &sink.failure {
                return Err(diverged(match f {
                    Failure::Diverged(d) => d.clone(),
                    other => format!("{other:?}"),
                }));
            }
            if let Err(e) = result {
                return Err(diverged(format!("the harness failed on replay: {e}")));
            }
            if sink.unconsumed() > 0 {
                return Err(diverged(format!(
                    "{} recorded effects were not reproduced",
                    sink.unconsumed()
                )));
            }
            // The END the harness's success produces is the recorded one.
            if let Some(end) = x.end {
                let rec = &records[end];
                let rebuilt = Event {
                    execution_id: rec.event.execution_id.clone(),
                    timestamp: rec.event.timestamp,
                    schema_version: rec.event.schema_version,
                    actor: rec.event.actor.clone(),
                    body: EventBody::End(HarnessEnd::completed()),
                };
                if !rec.holds(&rebuilt) {
                    return Err(diverged(format!("END record {} differs", rec.seq)));
                }
            }
            report.records_reproduced += sink.stats.served + usize::from(x.end.is_some());
            report.outputs.push(sink.output.clone());
            report.executions += 1;
        }
        Ok(report)
    }
}
