//! What every turn shares: its harness (placement, version guard), sink context, `Start` and end.

use std::sync::Arc;

use harness_core::event::{ErrorInfo, Event, EventBody, HarnessEnd, Lifecycle, LifecycleKind};
use harness_core::{
    Descriptor, Harness, HarnessError, History, IdentityContext, Resumability, SinkError, Start,
};

use super::sink::{Failure, JournalSink, Mode, TurnCtx};
use super::{Controller, TurnReport, TurnStatus};
use crate::capabilities::can_place;
use crate::error::Error;
use crate::execution::Execution;
use crate::journal::SessionMeta;
use crate::record::{Fence, Record, Seq};

/// The setup every turn shares.
pub(super) struct Prepared {
    pub(super) name: String,
    pub(super) harness: Arc<dyn Harness>,
    pub(super) descriptor: Descriptor,
}

impl Prepared {
    /// Refuses a harness that requires a memory snapshot: `operation` (replay, resume, fork)
    /// rebuilds its state from the journal, which such a harness never reads.
    pub(super) fn journal_rebuildable(self, operation: &'static str) -> Result<Self, Error> {
        if self.descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
            return Err(Error::NeedsMemorySnapshot {
                harness: self.name,
                operation,
            });
        }
        Ok(self)
    }
}

/// A session-scoped lifecycle event body.
pub(super) fn lifecycle(kind: LifecycleKind, detail: impl Into<String>) -> EventBody {
    EventBody::Lifecycle(Lifecycle {
        kind,
        detail: detail.into(),
        ..Lifecycle::default()
    })
}

impl Controller {
    pub(super) async fn prepare(&self, name: &str) -> Result<Prepared, Error> {
        let harness = self
            .registry
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownHarness(name.to_owned()))?;
        // Describe on every exec, resume and fork, and place before anything is journaled.
        let descriptor = harness.describe().await.map_err(Error::Describe)?;
        // A harness whose process the host does not own cannot have its memory captured.
        let remote_snapshot = self.remote.contains(name)
            && descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot;
        if remote_snapshot || !can_place(&descriptor.capabilities, &self.runtime) {
            return Err(Error::CannotPlace {
                harness: name.to_owned(),
            });
        }
        Ok(Prepared {
            name: name.to_owned(),
            harness,
            descriptor,
        })
    }

    /// The registered harness that recorded `x`, checked against its recorded version.
    pub(super) async fn recorded_harness(
        &self,
        x: &Execution,
        meta: &SessionMeta,
    ) -> Result<Prepared, Error> {
        let name = if x.marker.harness.is_empty() {
            meta.harness.clone()
        } else {
            x.marker.harness.clone()
        };
        let prepared = match self.prepare(&name).await {
            Err(Error::UnknownHarness(_)) => {
                return Err(Error::HarnessMismatch {
                    execution_id: x.execution_id.clone(),
                    recorded: name,
                });
            }
            other => other?,
        };
        // Known recorded versions must match exactly; an empty recorded version is unguarded
        // (and served empty is a mismatch for a known one).
        if !x.marker.harness_version.is_empty()
            && prepared.descriptor.version != x.marker.harness_version
        {
            return Err(Error::HarnessVersionMismatch {
                execution_id: x.execution_id.clone(),
                harness: name,
                recorded: x.marker.harness_version.clone(),
                served: prepared.descriptor.version.clone(),
            });
        }
        Ok(prepared)
    }

    pub(super) fn ctx<'a>(
        &'a self,
        session: &'a str,
        execution_id: &str,
        fence: Fence,
        descriptor: &Descriptor,
        fork_seq: Seq,
        mode: Mode,
    ) -> TurnCtx<'a> {
        let live = mode == Mode::Recover;
        TurnCtx {
            journal: &*self.journal,
            session,
            execution_id: execution_id.to_owned(),
            fence,
            clock: &*self.clock,
            model: if live { self.model.as_deref() } else { None },
            tools: &self.tools,
            executor: if live { self.executor.as_deref() } else { None },
            observer: self.observer.as_deref(),
            memory_snapshot: descriptor.capabilities.resumability
                == Resumability::RequiresMemorySnapshot,
            fork_seq,
            legacy: false,
        }
    }

    pub(super) fn host_append(
        &self,
        sink: &mut JournalSink<'_>,
        body: EventBody,
    ) -> Result<Seq, Error> {
        sink.append_body(body, false)
            .map_err(|_| match &sink.failure {
                Some(Failure::Journal(e)) => Error::Journal(e.clone()),
                Some(Failure::Diverged(d)) => Error::InvalidExecutionLog(d.clone()),
                _ => Error::InvalidExecutionLog("append failed".into()),
            })
    }

    /// Ends a turn: END, SUSPEND (parked) or ERROR, then the durability point.
    pub(super) fn finish(
        &self,
        session: &str,
        execution_id: &str,
        mut sink: JournalSink<'_>,
        result: Result<(), HarnessError>,
    ) -> Result<TurnReport, Error> {
        let outcome = |sink: &JournalSink<'_>, status| TurnReport {
            session: session.to_owned(),
            execution_id: execution_id.to_owned(),
            status,
            output: sink.output.clone(),
            provider_calls: sink.stats.provider_calls,
            executor_calls: sink.stats.executor_calls,
            served_effects: sink.stats.served,
            appended: sink.stats.appended,
            head_seq: sink.head().seq,
            head_hash: sink.head().hash,
        };
        let error_body =
            |description: String, code: i32| EventBody::Error(ErrorInfo { code, description });
        match sink.failure.clone() {
            Some(Failure::Journal(e)) => {
                // Nothing more can be recorded under this fence: the turn stays interrupted
                // and resume picks it up. Make what was recorded durable (best effort).
                let _ = self.journal.sync(session);
                return Err(Error::Journal(e));
            }
            Some(Failure::Diverged(detail)) => {
                let _ = sink.append_body(error_body(format!("diverged: {detail}"), 9), false);
                let _ = self.journal.sync(session);
                return Err(Error::Diverged {
                    execution_id: execution_id.to_owned(),
                    detail,
                });
            }
            Some(Failure::Parked {
                tool_call_id,
                request_seq,
            }) => {
                // The park is the turn's outcome whatever the harness returned, unless the
                // park never reached the harness (a remote harness whose park exchange
                // failed: "Transport/snapshot/append failures leave the request recoverable
                // and retain the actual error, not a fake successful park"). A SUSPEND the
                // journal refuses keeps its own error (a fenced writer is ABORTED).
                sink.failure = None;
                if let Err(e @ HarnessError::Sink(SinkError::Transport(_))) = &result {
                    let _ = self.journal.sync(session);
                    return Err(Error::TurnFailed {
                        execution_id: execution_id.to_owned(),
                        error: e.clone(),
                    });
                }
                if sink
                    .append_body(lifecycle(LifecycleKind::Suspend, ""), true)
                    .is_err()
                {
                    let _ = self.journal.sync(session);
                    return Err(self.sink_error(&sink));
                }
                self.journal.sync(session)?;
                return Ok(outcome(
                    &sink,
                    TurnStatus::Parked {
                        tool_call_id,
                        request_seq,
                    },
                ));
            }
            None => {}
        }
        match result {
            Ok(()) if sink.unconsumed() > 0 => {
                let detail = format!(
                    "the harness completed with {} recorded effects not reproduced",
                    sink.unconsumed()
                );
                let _ = sink.append_body(error_body(format!("diverged: {detail}"), 9), false);
                let _ = self.journal.sync(session);
                Err(Error::Diverged {
                    execution_id: execution_id.to_owned(),
                    detail,
                })
            }
            Ok(()) => {
                self.host_append(&mut sink, EventBody::End(HarnessEnd::completed()))?;
                self.journal.sync(session)?;
                Ok(outcome(&sink, TurnStatus::Completed))
            }
            Err(error) => {
                let code = crate::error::turn_failure_code(&error).grpc();
                // Best effort: the ERROR is audit only.
                let _ = sink.append_body(error_body(error.to_string(), code), false);
                let _ = self.journal.sync(session);
                Err(Error::TurnFailed {
                    execution_id: execution_id.to_owned(),
                    error,
                })
            }
        }
    }

    pub(super) fn sink_error(&self, sink: &JournalSink<'_>) -> Error {
        match &sink.failure {
            Some(Failure::Journal(e)) => Error::Journal(e.clone()),
            other => Error::InvalidExecutionLog(format!("{other:?}")),
        }
    }

    /// The events of `records`, shared by every turn's [`History`] (a prefix view each: no
    /// per-turn copy, so replaying T turns stays linear in T).
    pub(super) fn events_of(records: &[Record]) -> Arc<Vec<Event>> {
        Arc::new(records.iter().map(|r| r.event.clone()).collect())
    }

    pub(super) fn start_of(
        &self,
        session: &str,
        events: &Arc<Vec<Event>>,
        x: &Execution,
        stateless: bool,
    ) -> Start {
        Start {
            execution_id: x.execution_id.clone(),
            session_uid: session.to_owned(),
            config: x.marker.config.clone(),
            // The exact prefix before this execution's start marker (prior markers included).
            history: if stateless {
                History::prefix(Arc::clone(events), x.start_index)
            } else {
                History::default()
            },
            inputs: x.inputs.clone(),
            identity: IdentityContext::default(),
            resume_from_seq: x.marker.resume_from_seq,
        }
    }

    /// Checks that every input of `x` committed.
    pub(super) fn check_inputs(x: &Execution) -> Result<(), Error> {
        if x.legacy {
            // "markerless logs retain their legacy behavior": no recorded count to check.
            return Ok(());
        }
        match x.marker.input_count {
            None => Err(Error::InvalidExecutionLog(format!(
                "execution {}: start marker lacks an input count",
                x.execution_id
            ))),
            Some(n) if usize::try_from(n).ok() != Some(x.inputs.len()) => {
                Err(Error::InvalidExecutionLog(format!(
                    "execution {}: {} of {n} inputs committed",
                    x.execution_id,
                    x.inputs.len()
                )))
            }
            Some(_) => Ok(()),
        }
    }
}
