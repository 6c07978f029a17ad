//! The controller: exec, replay, resume, fork and approvals over a [`Journal`], with the
//! host's model provider and tool executor plugged in.
//!
//! Every operation reads the session's journal, checks what the spec requires before it
//! writes anything (harness registered and the same version, placement, input completeness,
//! inherited intents, pending approvals), then acquires a new fence and appends under it.
//! Replay is read-only and never calls the provider or the executor.

use std::collections::HashMap;
use std::sync::Arc;

use harness_core::event::{
    ApprovalResult, ErrorInfo, Event, EventBody, EventKind, ExecutionStart, HarnessEnd,
    LifecycleKind,
};
use harness_core::message::{Message, ToolCall};
use harness_core::model::Model;
use harness_core::{
    Descriptor, Harness, HarnessError, History, IdentityContext, Resumability, Start,
};

pub use crate::envelope::{Clock, NoClock, SCHEMA_VERSION};
pub use crate::observer::Observer;

use crate::capabilities::{RuntimeCapabilities, can_place};
use crate::envelope::envelope;
use crate::error::Error;
use crate::execution::{Execution, Executions};
use crate::journal::{ForkOrigin, Journal, JournalError, SessionMeta};
use crate::record::{Fence, Head, Record, Seq};
use crate::sink::{Failure, JournalSink, Mode, TurnCtx, derive_execution_id, lifecycle};
use crate::tools::ToolExecutor;
use crate::verify::Verified;

/// A new turn.
#[derive(Clone, Debug, Default)]
pub struct ExecRequest {
    /// The session (created beforehand with [`Controller::create_session`]).
    pub session: String,
    /// The invocation's inputs (one INPUT record each).
    pub inputs: Vec<Message>,
    /// Opaque per-execution config, journaled verbatim before the harness runs. Not a secret
    /// channel: it is durable journal content.
    pub config: Vec<u8>,
    /// A harness for this turn only (a registry name); `None` uses the session's default.
    pub harness: Option<String>,
    /// The harness cursor (journaled; not the append CAS cursor).
    pub resume_from_seq: i64,
    /// Who the turn runs for.
    pub identity: IdentityContext,
}

impl ExecRequest {
    /// A turn of `session` with these inputs.
    pub fn new(session: impl Into<String>, inputs: Vec<Message>) -> Self {
        ExecRequest {
            session: session.into(),
            inputs,
            ..Default::default()
        }
    }

    /// A turn with one user text input.
    pub fn text(session: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(session, vec![Message::user(text)])
    }

    /// Sets the per-execution config.
    #[must_use]
    pub fn with_config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.config = config.into();
        self
    }

    /// Runs this turn on another registered harness.
    #[must_use]
    pub fn with_harness(mut self, harness: impl Into<String>) -> Self {
        self.harness = Some(harness.into());
        self
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnStatus {
    /// END{COMPLETED} was recorded.
    Completed,
    /// An approval-gated tool call parked the turn (LIFECYCLE SUSPEND recorded): approve or
    /// deny, then resume.
    Parked {
        /// The gated call.
        tool_call_id: String,
        /// Its APPROVAL_REQUEST record.
        request_seq: Seq,
    },
}

/// What a turn did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The session.
    pub session: String,
    /// The execution.
    pub execution_id: String,
    /// How it ended.
    pub status: TurnStatus,
    /// The text of the turn's OUTPUT records (served and new).
    pub output: String,
    /// Provider calls made by this call (at most one per re-driven MODEL_CALL on resume).
    pub provider_calls: usize,
    /// Tool executor invocations made by this call.
    pub executor_calls: usize,
    /// Recorded effects served from the journal instead of being redone.
    pub served_effects: usize,
    /// Records appended by this call.
    pub appended: usize,
    /// The journal's last seq afterwards.
    pub head_seq: Seq,
}

/// What a replay checked.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplayReport {
    /// Completed executions re-run against the journal.
    pub executions: usize,
    /// Incomplete executions skipped (interrupted, failed, parked).
    pub skipped: usize,
    /// Records reproduced byte for byte (effects and END).
    pub records_reproduced: usize,
    /// Provider calls made: always zero (I1).
    pub provider_calls: usize,
    /// Tool executor calls made: always zero.
    pub executor_calls: usize,
}

/// A fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkOutcome {
    /// The new session.
    pub child: String,
    /// Its LIFECYCLE FORK record.
    pub fork_seq: Seq,
}

/// An approval request waiting for a decision.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingApproval {
    /// The parked execution.
    pub execution_id: String,
    /// The gated call.
    pub call: ToolCall,
    /// Its APPROVAL_REQUEST record.
    pub request_seq: Seq,
}

/// Builds a [`Controller`].
pub struct ControllerBuilder {
    journal: Arc<dyn Journal>,
    model: Option<Arc<dyn Model>>,
    executor: Option<Arc<dyn ToolExecutor>>,
    harnesses: Vec<(String, Arc<dyn Harness>)>,
    default: Option<String>,
    runtime: RuntimeCapabilities,
    clock: Arc<dyn Clock>,
    observer: Option<Arc<dyn Observer>>,
}

impl ControllerBuilder {
    /// The host's model provider (what `sink.model` invokes live).
    #[must_use]
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// The host's tool executor (controller-mediated and approved calls). Without one,
    /// host-executed calls fail closed after their intent is recorded.
    #[must_use]
    pub fn executor(mut self, executor: Arc<dyn ToolExecutor>) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Registers a harness under a name. The first registered is the default unless
    /// [`default_harness`](Self::default_harness) says otherwise.
    #[must_use]
    pub fn harness(mut self, name: impl Into<String>, harness: Arc<dyn Harness>) -> Self {
        self.harnesses.push((name.into(), harness));
        self
    }

    /// The registry default, for sessions created without a harness name.
    #[must_use]
    pub fn default_harness(mut self, name: impl Into<String>) -> Self {
        self.default = Some(name.into());
        self
    }

    /// What the runtime can do (default: filesystem only, no memory snapshots).
    #[must_use]
    pub fn runtime(mut self, runtime: RuntimeCapabilities) -> Self {
        self.runtime = runtime;
        self
    }

    /// Where event timestamps come from (default: none).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Watches turns as they happen.
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The controller.
    pub fn build(self) -> Controller {
        let default = self
            .default
            .or_else(|| self.harnesses.first().map(|(n, _)| n.clone()))
            .unwrap_or_default();
        Controller {
            journal: self.journal,
            model: self.model,
            executor: self.executor,
            registry: self.harnesses.into_iter().collect(),
            default,
            runtime: self.runtime,
            clock: self.clock,
            observer: self.observer,
            guards: Guards::default(),
        }
    }
}

/// The host side of agentsessions: runs harness turns against a journal.
///
/// Exec and resume of one session run one at a time (the host's per-session guard); turns
/// of different sessions run concurrently. Writers elsewhere (another host on the same
/// journal) are kept out by the journal's fence and compare-and-set instead. As the spec
/// warns of its serialized operations, re-entry deadlocks: a harness must not exec or
/// resume its own session from inside its turn.
///
/// ```
/// use std::sync::Arc;
/// use harness_core::model::ScriptedModel;
/// use harness_sessions::controller::{Controller, ExecRequest};
/// use harness_sessions::harnesses::EchoHarness;
/// use harness_sessions::journal::MemoryJournal;
///
/// let model = Arc::new(ScriptedModel::new().reply("Hello!"));
/// let host = Controller::builder(Arc::new(MemoryJournal::new()))
///     .model(model.clone())
///     .harness("echo", Arc::new(EchoHarness))
///     .build();
/// futures::executor::block_on(async {
///     host.create_session("s1", None)?;
///     let turn = host.exec(ExecRequest::text("s1", "hi")).await?;
///     assert_eq!(turn.output, "Hello!");
///     let replay = host.replay("s1").await?;
///     assert_eq!(replay.provider_calls, 0);
///     Ok::<(), harness_sessions::Error>(())
/// }).unwrap();
/// assert_eq!(model.calls(), 1); // replay served the recorded completion
/// ```
pub struct Controller {
    journal: Arc<dyn Journal>,
    model: Option<Arc<dyn Model>>,
    executor: Option<Arc<dyn ToolExecutor>>,
    registry: HashMap<String, Arc<dyn Harness>>,
    default: String,
    runtime: RuntimeCapabilities,
    clock: Arc<dyn Clock>,
    observer: Option<Arc<dyn Observer>>,
    /// The per-session guard that serializes exec and resume of a session on this host.
    guards: Guards,
}

type Guards = std::sync::Mutex<HashMap<String, Arc<futures::lock::Mutex<()>>>>;

/// Holds a session's guard; releasing it forgets the session's lock once nobody waits on it.
struct SessionGuard<'a> {
    guards: &'a Guards,
    session: String,
    held: Option<futures::lock::OwnedMutexGuard<()>>,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        self.held.take();
        if let Ok(mut map) = self.guards.lock()
            && map
                .get(&self.session)
                .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.session);
        }
    }
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.registry.keys().collect();
        names.sort();
        f.debug_struct("Controller")
            .field("harnesses", &names)
            .field("default", &self.default)
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

/// The setup every turn shares.
struct Prepared {
    name: String,
    harness: Arc<dyn Harness>,
    descriptor: Descriptor,
}

fn to_i64(s: Seq) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}

impl Controller {
    /// A controller over `journal`; add the model, executor and harnesses on the builder.
    pub fn builder(journal: Arc<dyn Journal>) -> ControllerBuilder {
        ControllerBuilder {
            journal,
            model: None,
            executor: None,
            harnesses: Vec::new(),
            default: None,
            runtime: RuntimeCapabilities::default(),
            clock: Arc::new(NoClock),
            observer: None,
        }
    }

    /// The journal.
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// Creates an empty session whose default harness is `harness` (or the registry
    /// default). An unknown name is [`Error::UnknownHarness`].
    pub fn create_session(
        &self,
        session: &str,
        harness: Option<&str>,
    ) -> Result<SessionMeta, Error> {
        if session.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        let name = harness.unwrap_or(&self.default).to_owned();
        if !self.registry.contains_key(&name) {
            return Err(Error::UnknownHarness(name));
        }
        let meta = SessionMeta {
            harness: name,
            parent: None,
        };
        self.journal.create(session, &meta)?;
        Ok(meta)
    }

    /// Every record of a session (raw journal read: works whatever harness is served).
    pub fn records(&self, session: &str) -> Result<Vec<Record>, Error> {
        Ok(self.journal.read(session, 1, None)?)
    }

    /// Recomputes the session's hash chain.
    pub fn verify(&self, session: &str) -> Result<Verified, Error> {
        Ok(self.journal.verify(session)?)
    }

    /// Waits for the session's guard: exec and resume of one session run one at a time on
    /// this host (as the spec's per-session guard serializes Exec, Suspend and Resume), so a
    /// cut MODEL_CALL is re-driven once, not once per racing resume.
    async fn guard(&self, session: &str) -> SessionGuard<'_> {
        let lock = match self.guards.lock() {
            Ok(mut map) => Arc::clone(map.entry(session.to_owned()).or_default()),
            // A poisoned map (a panic elsewhere while it was held): fence and CAS still keep
            // the journal single-writer.
            Err(_) => Arc::default(),
        };
        SessionGuard {
            guards: &self.guards,
            session: session.to_owned(),
            held: Some(lock.lock_owned().await),
        }
    }

    async fn prepare(&self, name: &str) -> Result<Prepared, Error> {
        let harness = self
            .registry
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownHarness(name.to_owned()))?;
        // Describe on every exec, resume and fork, and place before anything is journaled.
        let descriptor = harness.describe().await.map_err(Error::Describe)?;
        if !can_place(&descriptor.capabilities, &self.runtime) {
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
    async fn recorded_harness(&self, x: &Execution, meta: &SessionMeta) -> Result<Prepared, Error> {
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

    fn ctx<'a>(
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
            executor: if live { self.executor.as_deref() } else { None },
            observer: self.observer.as_deref(),
            memory_snapshot: descriptor.capabilities.resumability
                == Resumability::RequiresMemorySnapshot,
            fork_seq,
        }
    }

    /// Runs a new turn: EXECUTION_START (config, cursor, input count, harness name and
    /// version), one INPUT per input, then the harness with a live sink; END on success,
    /// ERROR on failure.
    pub async fn exec(&self, req: ExecRequest) -> Result<TurnOutcome, Error> {
        if req.session.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        let _guard = self.guard(&req.session).await;
        let meta = self.journal.meta(&req.session)?;
        let name = req.harness.clone().unwrap_or(meta.harness);
        let p = self.prepare(&name).await?;
        let fence = self.journal.acquire_fence(&req.session)?;
        let stateless = p.descriptor.capabilities.resumability == Resumability::StatelessReplay;
        let history: History = if stateless {
            self.records(&req.session)?
                .into_iter()
                .map(|r| r.event)
                .collect()
        } else {
            // A memory-snapshot harness holds its state in RAM and never reads History (I4).
            History::default()
        };
        let head = self.journal.head(&req.session)?;
        let marker = ExecutionStart {
            config: req.config.clone(),
            resume_from_seq: req.resume_from_seq,
            input_count: Some(i64::try_from(req.inputs.len()).unwrap_or(i64::MAX)),
            harness: p.name.clone(),
            harness_version: p.descriptor.version.clone(),
        };
        let execution_id = derive_execution_id(&req.session, &head, &marker, &req.inputs);
        let ctx = self.ctx(
            &req.session,
            &execution_id,
            fence,
            &p.descriptor,
            0,
            Mode::Recover,
        );
        let mut sink = JournalSink::new(ctx, Mode::Recover, &[], Vec::new(), head);
        self.host_append(&mut sink, EventBody::ExecutionStart(marker))?;
        for m in &req.inputs {
            self.host_append(&mut sink, EventBody::Input(m.clone()))?;
        }
        let start = Start {
            execution_id: execution_id.clone(),
            session_uid: req.session.clone(),
            config: req.config,
            history,
            inputs: req.inputs,
            identity: req.identity,
            resume_from_seq: req.resume_from_seq,
        };
        let result = p.harness.run(start, &mut sink).await;
        self.finish(&req.session, &execution_id, sink, result)
    }

    fn host_append(&self, sink: &mut JournalSink<'_>, body: EventBody) -> Result<Seq, Error> {
        sink.append_body(body, false)
            .map_err(|_| match &sink.failure {
                Some(Failure::Journal(e)) => Error::Journal(e.clone()),
                Some(Failure::Diverged(d)) => Error::InvalidExecutionLog(d.clone()),
                _ => Error::InvalidExecutionLog("append failed".into()),
            })
    }

    /// Ends a turn: END, SUSPEND (parked) or ERROR, then the durability point.
    fn finish(
        &self,
        session: &str,
        execution_id: &str,
        mut sink: JournalSink<'_>,
        result: Result<(), HarnessError>,
    ) -> Result<TurnOutcome, Error> {
        let outcome = |sink: &JournalSink<'_>, status| TurnOutcome {
            session: session.to_owned(),
            execution_id: execution_id.to_owned(),
            status,
            output: sink.output.clone(),
            provider_calls: sink.stats.provider_calls,
            executor_calls: sink.stats.executor_calls,
            served_effects: sink.stats.served,
            appended: sink.stats.appended,
            head_seq: sink.head().seq,
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
                // The park is the turn's outcome whatever the harness returned. A SUSPEND the
                // journal refuses keeps its own error (a fenced writer is ABORTED): the
                // request stays recoverable, and no park is claimed.
                sink.failure = None;
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

    /// The events of `records`, shared by every turn's [`History`] (a prefix view each: no
    /// per-turn copy, so replaying T turns stays linear in T).
    fn events_of(records: &[Record]) -> Arc<Vec<Event>> {
        Arc::new(records.iter().map(|r| r.event.clone()).collect())
    }

    fn start_of(
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
    fn check_inputs(x: &Execution) -> Result<(), Error> {
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

    /// Re-runs every completed execution against the journal, serving every recorded effect
    /// and never calling the provider or the executor (I1). Each effect and END the harness
    /// produces must be byte-identical to the recorded one (I5); the model input hash of
    /// every model call must match (I0). ERROR records and incomplete executions are
    /// skipped. Read-only.
    pub async fn replay(&self, session: &str) -> Result<ReplayReport, Error> {
        let meta = self.journal.meta(session)?;
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        if xs.orphans > 0 {
            return Err(Error::Legacy("replay"));
        }
        let completed: Vec<&Execution> = xs.list.iter().filter(|x| x.is_completed()).collect();
        // Check every harness name and version before any Run.
        let mut prepared = Vec::with_capacity(completed.len());
        for x in &completed {
            let p = self.recorded_harness(x, &meta).await?;
            if p.descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
                return Err(Error::NeedsMemorySnapshot {
                    harness: p.name,
                    operation: "replay",
                });
            }
            Self::check_inputs(x)?;
            prepared.push(p);
        }
        let mut report = ReplayReport {
            skipped: xs.list.len() - completed.len(),
            ..ReplayReport::default()
        };
        let events = Self::events_of(&records);
        for (x, p) in completed.iter().zip(prepared) {
            let head = Head {
                seq: records.last().map_or(0, |r| r.seq),
                hash: records.last().map(|r| r.content_hash),
                fence: 0,
            };
            let ctx = self.ctx(session, &x.execution_id, 0, &p.descriptor, 0, Mode::Replay);
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
            report.records_reproduced += sink.stats.served + 1;
            report.executions += 1;
        }
        Ok(report)
    }

    /// Resumes the session's interrupted turn, if its last execution did not complete:
    /// serves the recorded prefix, re-drives a trailing MODEL_CALL once (after the I0 check,
    /// appending its OUTPUT after that same MODEL_CALL) or a trailing tool intent with its
    /// original key (same session only), delivers a recorded approval decision, then
    /// finishes the turn. `Ok(None)` when there is nothing to resume.
    pub async fn resume(&self, session: &str) -> Result<Option<TurnOutcome>, Error> {
        let _guard = self.guard(session).await;
        let meta = self.journal.meta(session)?;
        let records = self.records(session)?;
        // A v0.1.2 turn (records without execution ids) at the head is not re-driven: a
        // legacy END or ERROR finished it (nothing to resume); otherwise resume fails
        // without calling anything. A new Exec supersedes it.
        let tail = records
            .iter()
            .rev()
            .find(|r| !(r.event.execution_id.is_empty() && r.event.kind() == EventKind::Lifecycle));
        if let Some(r) = tail
            && r.event.execution_id.is_empty()
        {
            return match r.event.kind() {
                EventKind::End | EventKind::Error => Ok(None),
                _ => Err(Error::Legacy("resume")),
            };
        }
        let xs = Executions::split(&records);
        let Some(x) = xs.list.last() else {
            return Ok(None);
        };
        if x.is_completed() {
            return Ok(None);
        }
        let p = self.recorded_harness(x, &meta).await?;
        if p.descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
            return Err(Error::NeedsMemorySnapshot {
                harness: p.name,
                operation: "resume",
            });
        }
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
        let ctx = self.ctx(
            session,
            &x.execution_id,
            fence,
            &p.descriptor,
            xs.fork_seq,
            Mode::Recover,
        );
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

    fn sink_error(&self, sink: &JournalSink<'_>) -> Error {
        match &sink.failure {
            Some(Failure::Journal(e)) => Error::Journal(e.clone()),
            other => Error::InvalidExecutionLog(format!("{other:?}")),
        }
    }

    /// An inherited (pre-fork) host-executed tool intent of `x` without a result at the head.
    fn inherited_intent(records: &[Record], x: &Execution, fork_seq: Seq) -> Option<(String, Seq)> {
        if fork_seq == 0 {
            return None;
        }
        for (n, &i) in x.effects.iter().enumerate() {
            let r = &records[i];
            let EventBody::ToolCall(c) = &r.event.body else {
                continue;
            };
            if r.seq >= fork_seq || !c.mediation.is_host_executed() {
                continue;
            }
            let resolved = x.effects[n + 1..].iter().any(
                |&j| matches!(&records[j].event.body, EventBody::ToolResult(res) if res.id == c.id),
            );
            if !resolved {
                return Some((c.id.clone(), r.seq));
            }
        }
        None
    }

    /// The approval request of `x` that has no decision yet.
    fn pending_in(records: &[Record], x: &Execution) -> Option<PendingApproval> {
        let mut pending: Option<PendingApproval> = None;
        let mut last_call: Option<ToolCall> = None;
        for &i in &x.effects {
            let r = &records[i];
            match &r.event.body {
                EventBody::ToolCall(c) => last_call = Some(c.clone()),
                EventBody::ApprovalRequest(a) => {
                    let call = last_call
                        .clone()
                        .filter(|c| c.id == a.tool_call_id)
                        .unwrap_or_else(|| ToolCall {
                            id: a.tool_call_id.clone(),
                            ..ToolCall::default()
                        });
                    pending = Some(PendingApproval {
                        execution_id: x.execution_id.clone(),
                        call,
                        request_seq: r.seq,
                    });
                }
                EventBody::ApprovalResult(d)
                    if pending
                        .as_ref()
                        .is_some_and(|p| p.call.id == d.tool_call_id) =>
                {
                    pending = None;
                }
                _ => {}
            }
        }
        pending
    }

    /// The approval request the session's last execution is parked on, if any.
    pub fn pending_approval(&self, session: &str) -> Result<Option<PendingApproval>, Error> {
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        Ok(xs
            .list
            .last()
            .filter(|x| !x.is_completed())
            .and_then(|x| Self::pending_in(&records, x)))
    }

    /// Records a decision on a pending approval request (APPROVAL_RESULT). Resume then
    /// delivers it: a denial gives an `APPROVAL_DENIED` result and never runs the executor.
    /// A request this session inherited from its fork parent cannot be decided here
    /// ([`Error::InheritedToolIntent`]): resume would never deliver the decision.
    pub fn approve(
        &self,
        session: &str,
        tool_call_id: &str,
        approved: bool,
        reason: &str,
    ) -> Result<Seq, Error> {
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        let x = xs
            .list
            .last()
            .filter(|x| !x.is_completed())
            .ok_or_else(|| Error::NoPendingApproval(tool_call_id.to_owned()))?;
        let pending = Self::pending_in(&records, x)
            .filter(|p| p.call.id == tool_call_id)
            .ok_or_else(|| Error::NoPendingApproval(tool_call_id.to_owned()))?;
        // A gated call inherited from a fork parent is never re-driven under the child's
        // uid, so a decision on it could not be delivered: refuse it before appending.
        if let Some((id, seq)) = Self::inherited_intent(&records, x, xs.fork_seq)
            && id == tool_call_id
        {
            return Err(Error::InheritedToolIntent {
                execution_id: x.execution_id.clone(),
                tool_call_id: id,
                seq,
            });
        }
        let body = EventBody::ApprovalResult(ApprovalResult {
            tool_call_id: tool_call_id.to_owned(),
            approved,
            reason: reason.to_owned(),
            request_seq: to_i64(pending.request_seq),
        });
        let rec = self.append_host_record(session, pending.execution_id, body)?;
        Ok(rec.seq)
    }

    /// Forks `parent` at `at` into a new session `child`: copies records `1..=at` verbatim
    /// (same hashes), then appends LIFECYCLE FORK (`parent@<at>`) chained onto
    /// `parent@at`. The child is a new dedup namespace: an inherited tool intent without a
    /// result is refused on resume.
    pub async fn fork(&self, parent: &str, at: Seq, child: &str) -> Result<ForkOutcome, Error> {
        if parent.is_empty() || child.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        let meta = self.journal.meta(parent)?;
        let head = self.journal.head(parent)?;
        if at > head.seq {
            return Err(Error::ForkPoint { at, head: head.seq });
        }
        let p = self.prepare(&meta.harness).await?;
        if p.descriptor.capabilities.resumability == Resumability::RequiresMemorySnapshot {
            return Err(Error::NeedsMemorySnapshot {
                harness: p.name,
                operation: "fork",
            });
        }
        let child_meta = SessionMeta {
            harness: meta.harness,
            parent: Some(ForkOrigin {
                session: parent.to_owned(),
                seq: at,
            }),
        };
        self.journal.fork(parent, at, child, &child_meta)?;
        let body = lifecycle(LifecycleKind::Fork, format!("parent@{at}"));
        let rec = self.append_host_record(child, String::new(), body)?;
        Ok(ForkOutcome {
            child: child.to_owned(),
            fork_seq: rec.seq,
        })
    }

    /// Appends one record the host writes on its own (an approval decision, a fork marker)
    /// under a new fence, then reaches the durability point; the observer sees it.
    fn append_host_record(
        &self,
        session: &str,
        execution_id: String,
        body: EventBody,
    ) -> Result<Record, Error> {
        let fence = self.journal.acquire_fence(session)?;
        let head = self.journal.head(session)?;
        let ev = envelope(&*self.clock, execution_id, body);
        let seq = head
            .next_seq()
            .ok_or_else(|| JournalError::no_seq_left(session))?;
        let rec = Record::seal(ev, seq, head.hash, fence)
            .map_err(|e| Error::InvalidExecutionLog(e.to_string()))?;
        self.journal
            .append(session, head.seq, fence, std::slice::from_ref(&rec))?;
        self.journal.sync(session)?;
        if let Some(o) = &self.observer {
            o.on_record(session, &rec);
        }
        Ok(rec)
    }

    /// The text of every OUTPUT of a session, by execution, in order (what a reader sees).
    pub fn transcript(&self, session: &str) -> Result<Vec<(EventKind, String)>, Error> {
        Ok(self
            .records(session)?
            .into_iter()
            .filter_map(|r| match r.event.body {
                EventBody::Input(m) => Some((EventKind::Input, m.text())),
                EventBody::Output(m) => Some((EventKind::Output, m.text())),
                _ => None,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::MemoryJournal;

    /// The per-session guards do not accumulate: a released guard nobody waits on is
    /// forgotten.
    #[test]
    fn session_guards_are_forgotten_once_released() {
        let host = Controller::builder(Arc::new(MemoryJournal::new())).build();
        futures::executor::block_on(async {
            let a = host.guard("a").await;
            let b = host.guard("b").await;
            assert_eq!(host.guards.lock().map(|m| m.len()).unwrap_or(0), 2);
            drop(a);
            drop(b);
        });
        assert_eq!(host.guards.lock().map(|m| m.len()).unwrap_or(99), 0);
    }
}
