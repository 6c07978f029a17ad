//! The controller: exec, replay, resume, fork and approvals over a [`Journal`], with the
//! host's model provider and tool executor plugged in.
//!
//! Every operation reads the session's journal, checks what the spec requires before it
//! writes anything (harness registered and the same version, placement, input completeness,
//! inherited intents, pending approvals), then acquires a new fence and appends under it.
//! Replay is read-only and never calls the provider or the executor.
//!
//! One concern a file, each an `impl Controller` block: [`exec`](Controller::exec) in
//! `exec`, [`replay`](Controller::replay) in `replay`, [`resume`](Controller::resume) in
//! `resume`, approvals in `approval`, [`fork`](Controller::fork) in `fork`; what every turn
//! shares (harness preparation, the sink context, `Start`, the end of a turn) in `turn`; the
//! journaling [`EventSink`](harness_core::EventSink) in `sink`.

mod approval;
mod exec;
mod fork;
mod ids;
mod replay;
mod resume;
mod sink;
mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use harness_core::Harness;
use harness_core::clock::{NoWallClock, WallClock};
use harness_core::event::{EventBody, EventKind};
use harness_core::model::Model;
use harness_core::tool::Tools;

pub use self::approval::PendingApproval;
pub use self::exec::ExecRequest;
pub use self::fork::ForkOutcome;
pub(crate) use self::ids::derive_wire_id;
pub use self::replay::ReplayReport;
pub use crate::envelope::SCHEMA_VERSION;
pub use crate::observer::Observer;

use crate::capabilities::RuntimeCapabilities;
use crate::envelope::envelope;
use crate::error::Error;
use crate::hash::ContentHash;
use crate::journal::{Journal, JournalError, SessionMeta};
use crate::record::{Record, Seq};
use crate::tools::{DedupExecutor, ReceiptStore, ToolExecutor};
use crate::verify::{HeadPin, Verified};

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
pub struct TurnReport {
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
    /// The content hash of that last record.
    pub head_hash: Option<ContentHash>,
}

impl TurnReport {
    /// The journal's head afterwards, as a pin to keep outside the journal: checked with
    /// [`Controller::verify_head`], it catches records later cut off the journal's tail.
    pub fn head_pin(&self) -> Option<HeadPin> {
        HeadPin::of(self.head_seq, self.head_hash)
    }
}

/// Builds a [`Controller`].
///
/// A model, a harness, a clock (and a journal, an executor, an observer) are passed by
/// value, as `impl Model + 'static`, `impl Harness + 'static`, `impl WallClock + 'static`, …,
/// the same shape every host of harness-rs takes them in: pass an `Arc` of one to keep a
/// handle on it (`Arc<M>` is a `Model`, `Arc<H>` a `Harness`, `Arc<C>` a `WallClock`).
pub struct ControllerBuilder {
    journal: Arc<dyn Journal>,
    model: Option<Arc<dyn Model>>,
    tools: Option<Tools>,
    executor: Option<Arc<dyn ToolExecutor>>,
    receipts: Option<Arc<dyn ReceiptStore>>,
    harnesses: Vec<(String, Arc<dyn Harness>)>,
    remote: HashSet<String>,
    default: Option<String>,
    runtime: RuntimeCapabilities,
    clock: Arc<dyn WallClock>,
    observer: Option<Arc<dyn Observer>>,
}

impl ControllerBuilder {
    /// The host's model provider (what `sink.model` invokes live).
    #[must_use]
    pub fn model(mut self, model: impl Model + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The agent's tools: the host runs each host-executed call with the tool of its name
    /// (with a [`ToolContext`](harness_core::tool::ToolContext) holding the session uid and
    /// the execution id), unless an [`executor`](Self::executor) is set; and a call of a tool
    /// registered [`requires_approval`](harness_core::tool::Tool::requires_approval) is gated
    /// whatever the call says ([`rules::gate`](harness_core::tool::rules::gate)). Add
    /// [`receipts`](Self::receipts) so that a re-driven call is answered from its receipt.
    #[must_use]
    pub fn tools(mut self, tools: Tools) -> Self {
        self.tools = Some(tools);
        self
    }

    /// A custom executor (a gateway, a remote service): it runs every host-executed call
    /// instead of the [`tools`](Self::tools), which still gate. Without either,
    /// host-executed calls fail closed after their intent is recorded.
    #[must_use]
    pub fn executor(mut self, executor: impl ToolExecutor + 'static) -> Self {
        self.executor = Some(Arc::new(executor));
        self
    }

    /// Durable receipts, keyed by session uid and idempotency key: what runs the calls (the
    /// tools, or the executor) is wrapped in a [`DedupExecutor`], so a re-driven call whose
    /// receipt was stored is answered from it without running again. A receipt is stored
    /// after the effect: an effect that must not repeat must itself be idempotent on the key
    /// (see [`tools`](crate::tools)).
    #[must_use]
    pub fn receipts(mut self, receipts: impl ReceiptStore + 'static) -> Self {
        self.receipts = Some(Arc::new(receipts));
        self
    }

    /// Registers a harness under a name. The first registered is the default unless
    /// [`default_harness`](Self::default_harness) says otherwise.
    #[must_use]
    pub fn harness(mut self, name: impl Into<String>, harness: impl Harness + 'static) -> Self {
        self.harnesses.push((name.into(), Arc::new(harness)));
        self
    }

    /// Registers a harness whose process the host does not own (a
    /// [`RemoteHarness`](crate::connect::RemoteHarness)): as agentsessionsd's
    /// `--harness name=address`, it must be STATELESS_REPLAY: one that describes itself
    /// `REQUIRES_MEMORY_SNAPSHOT` is refused ([`Error::CannotPlace`], FAILED_PRECONDITION)
    /// on every exec, resume and fork before anything is journaled, whatever the runtime
    /// can snapshot. Otherwise as [`harness`](Self::harness).
    #[must_use]
    pub fn remote_harness(
        mut self,
        name: impl Into<String>,
        harness: impl Harness + 'static,
    ) -> Self {
        let name = name.into();
        self.remote.insert(name.clone());
        self.harness(name, harness)
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

    /// Where the journal's event timestamps come from: wall-clock time (default:
    /// [`NoWallClock`], no timestamps). Any `Fn() -> Option<Timestamp>` is one.
    #[must_use]
    pub fn clock(mut self, clock: impl WallClock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Watches turns as they happen.
    #[must_use]
    pub fn observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// The controller.
    pub fn build(self) -> Controller {
        let default = self
            .default
            .or_else(|| self.harnesses.first().map(|(n, _)| n.clone()))
            .unwrap_or_default();
        let runs = self.executor.or_else(|| {
            self.tools
                .clone()
                .map(|t| Arc::new(t) as Arc<dyn ToolExecutor>)
        });
        let executor = match (runs, self.receipts) {
            (Some(runs), Some(receipts)) => {
                Some(Arc::new(DedupExecutor::new(runs, receipts)) as Arc<dyn ToolExecutor>)
            }
            (runs, _) => runs,
        };
        Controller {
            journal: self.journal,
            model: self.model,
            tools: self.tools.unwrap_or_default(),
            executor,
            registry: self.harnesses.into_iter().collect(),
            remote: self.remote,
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
/// let host = Controller::builder(MemoryJournal::new())
///     .model(model.clone()) // an Arc keeps a handle: model.calls() below
///     .harness("echo", EchoHarness)
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
    /// The agent's tools: what gates a call (and runs it, unless a custom executor does).
    tools: Tools,
    /// What runs host-executed calls (the tools or a custom executor, receipts over it).
    executor: Option<Arc<dyn ToolExecutor>>,
    registry: HashMap<String, Arc<dyn Harness>>,
    /// The registered names whose harness runs in a process the host does not own.
    remote: HashSet<String>,
    default: String,
    runtime: RuntimeCapabilities,
    clock: Arc<dyn WallClock>,
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

impl Controller {
    /// A controller over `journal` (pass an `Arc` of it to keep a handle); add the model,
    /// tools and harnesses on the builder.
    pub fn builder(journal: impl Journal + 'static) -> ControllerBuilder {
        ControllerBuilder {
            journal: Arc::new(journal),
            model: None,
            tools: None,
            executor: None,
            receipts: None,
            harnesses: Vec::new(),
            remote: HashSet::new(),
            default: None,
            runtime: RuntimeCapabilities::default(),
            clock: Arc::new(NoWallClock),
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
    ///
    /// A chain that holds vouches for every record up to its last one, not for records cut
    /// off after it: keep a [`HeadPin`] and use [`verify_head`](Self::verify_head) for that.
    pub fn verify(&self, session: &str) -> Result<Verified, Error> {
        Ok(self.journal.verify(session)?)
    }

    /// [`verify`](Self::verify), and the session still holds `pin`, a head kept outside the
    /// journal (from [`TurnReport::head_pin`], [`ForkOutcome::head_pin`] or
    /// [`head`](Self::head)): whole records cut off the tail are
    /// [`VerifyError::Truncated`](crate::verify::VerifyError::Truncated), a replaced history
    /// [`VerifyError::NotPinnedHead`](crate::verify::VerifyError::NotPinnedHead), both
    /// `DATA_LOSS`. A session that grew past the pin holds.
    pub fn verify_head(&self, session: &str, pin: &HeadPin) -> Result<Verified, Error> {
        Ok(self.journal.verify_head(session, pin)?)
    }

    /// The session's head as a pin (`None` while it has no record).
    pub fn head(&self, session: &str) -> Result<Option<HeadPin>, Error> {
        let head = self.journal.head(session)?;
        Ok(HeadPin::of(head.seq, head.hash))
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
        let appended = self
            .journal
            .append(session, head.seq, fence, std::slice::from_ref(&rec));
        crate::telemetry::appended(&appended, 1);
        appended?;
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
        let host = Controller::builder(MemoryJournal::new()).build();
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
