//! `resume`: finishing the session's interrupted turn.

use harness_core::event::{EventBody, EventKind, LifecycleKind};

use super::ids::legacy_execution_id;
use super::sink::{JournalSink, Mode};
use super::turn::lifecycle;
use super::{Controller, TurnReport};
use crate::error::Error;
use crate::execution::Executions;

impl Controller {
    /// Resumes the session's interrupted turn, if its last execution did not complete:
    /// serves the recorded prefix, re-drives a trailing MODEL_CALL once (after the I0 check,
    /// appending its OUTPUT after that same MODEL_CALL) or a trailing tool intent with its
    /// original key (same session only), delivers a recorded approval decision, then
    /// finishes the turn. `Ok(None)` when there is nothing to resume.
    pub async fn resume(&self, session: &str) -> Result<Option<TurnReport>, Error> {
        let span = tracing::info_span!(
            "sessions.resume",
            session,
            execution_id = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let r = tracing::Instrument::instrument(self.resume_in(session), span.clone()).await;
        span.in_scope(|| match &r {
            Ok(None) => {
                tracing::Span::current().record("outcome", "nothing_to_resume");
            }
            Ok(Some(o)) => {
                crate::telemetry::turn_result(&Ok(o.clone()));
            }
            Err(e) => {
                tracing::debug!(error = %e, "resume failed");
                tracing::Span::current().record("outcome", "error");
                crate::telemetry::turn("error");
            }
        });
        r
    }

    async fn resume_in(&self, session: &str) -> Result<Option<TurnReport>, Error> {
        let _guard = self.guard(session).await;
        let meta = self.journal.meta(session)?;
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        if let Some(why) = xs.invalid {
            return Err(Error::InvalidExecutionLog(why));
        }
        // A v0.1.2 turn (records without execution ids) at the head: a legacy END or ERROR
        // finished it (nothing to resume); otherwise its last INPUT is continued, with an
        // empty execution id on what is appended. A new Exec supersedes it instead.
        let legacy = xs.legacy_resume(&records, |i| legacy_execution_id(session, &records[i]));
        let Some(x) = legacy.as_ref().or(xs.list.last()) else {
            return Ok(None);
        };
        if x.is_completed() {
            return Ok(None);
        }
        if x.legacy
            && let Some(&last) = x.effects.last()
            && records[last].event.kind() == EventKind::ModelCall
        {
            // "a v0.1.2 journal without them is not re-driven, and Resume fails with
            // “recorded completion missing” without calling the provider".
            return Err(Error::Legacy("resume: recorded completion missing"));
        }
        let p = self
            .recorded_harness(x, &meta)
            .await?
            .journal_rebuildable("resume")?;
        // Refuse an invocation whose inputs did not all commit, without calling anything.
        Self::check_inputs(x)?;
        let pending = Self::pending_in(&records, x);
        if let Some(pa) = pending {
            return Err(Error::ApprovalPending {
                execution_id: x.execution_id.clone(),
                tool_call_id: pa.call.id,
                request_seq: pa.request_seq,
            });
        }
        if let Some((id, seq)) = Self::inherited_intent(&records, x, xs.fork_seq) {
            return Err(Error::InheritedToolIntent {
                execution_id: x.execution_id.clone(),
                tool_call_id: id,
                seq,
            });
        }
        let fence = self.journal.acquire_fence(session)?;
        let head = self.journal.head(session)?;
        let mut ctx = self.ctx(
            session,
            &x.execution_id,
            fence,
            &p.descriptor,
            xs.fork_seq,
            Mode::Recover,
        );
        ctx.legacy = x.legacy;
        let mut sink = JournalSink::new(ctx, Mode::Recover, &records, x.effects.clone(), head);
        let suspended = records.iter().rev().find_map(|r| match &r.event.body {
            EventBody::Lifecycle(l)
                if matches!(l.kind, LifecycleKind::Suspend | LifecycleKind::Resume) =>
            {
                Some(l.kind)
            }
            _ => None,
        }) == Some(LifecycleKind::Suspend);
        if suspended {
            sink.append_body(lifecycle(LifecycleKind::Resume, ""), true)
                .map_err(|_| self.sink_error(&sink))?;
        }
        let start = self.start_of(session, &Self::events_of(&records), x, true);
        let result = p.harness.run(start, &mut sink).await;
        self.finish(session, &x.execution_id, sink, result)
            .map(Some)
    }
}
