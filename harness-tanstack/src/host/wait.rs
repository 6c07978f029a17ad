//! Waits for a person: a run that needs an approval, an answer or a person ends with an
//! interrupt, the host keeps what it needs to drive the turn again, and a `resolve` or
//! `answer` input drives it.
//!
//! Spec, "Waits for a person": `harness.wait.opened` "`{ waitId, kind, runId, message? }`. A
//! wait opened in the log … The interrupts of a turn come in its `RUN_FINISHED`";
//! `harness.wait.settled` "`{ waitId, outcome }`"; `harness.question` "Answer it with the
//! `answer` input"; `harness.question.answered` "`{ questionId }`". The interrupt of each
//! wait is the shape `@tanstack/ai-client` acts on (`reason: "approval_required"`,
//! `metadata: {kind, toolName, input}` for an approval).
//!
//! The life of a parked turn:
//!
//! 1. The driver ends the turn with [`TurnOutcome::Interrupted`](super::TurnOutcome): its
//!    [`Wait`]s and an opaque `state` (what the driver needs to drive the turn again).
//! 2. [`Host::finish_turn`](super::Host::finish_turn) keeps both in the thread's *waits
//!    record* ([`EventLog::set_waits`]: beside the log, never sent to a client, at most
//!    [`max_parked_bytes`](super::HostConfig::max_parked_bytes)), then logs
//!    `harness.question` (a question), `harness.wait.opened` for each wait, and
//!    `RUN_FINISHED` with `outcome: {type: "interrupt", interrupts}`.
//! 3. While a turn is parked, message inputs queue behind it as behind a running turn. A
//!    `resolve` (`{op: "resolve", resume: [{interruptId, status, payload?}]}`) or an
//!    `answer` (`{op: "answer", questionId, value}`) names open waits (else it is
//!    `rejected`, reason `not_waiting`): each settles (`harness.question.answered`,
//!    `harness.wait.settled`), and once none of the turn's waits is open, the host starts a
//!    new run, `RUN_STARTED` with `parentRunId` the interrupted run, whose
//!    [`TurnRequest::resume`](super::TurnRequest::resume) carries the state and the
//!    decisions. A `cancel` of the interrupted run settles its waits `cancelled` and drops
//!    the turn.
//! 4. A hand-off to a person opens a wait of kind `human` in a turn that completed: it has
//!    no state, blocks nothing, and a `resolve` only settles it (a new turn settles it
//!    `cancelled`: the agent has the conversation back).
//!
//! After a restart of a durable host the record is read back with the thread, so the same
//! `resolve` drives the same turn. The log is the truth of what settled: a wait the log
//! settled is no longer open, whatever the record says (a crash between the two writes),
//! a wait the record decided but the log did not settle is settled then, a wait the log
//! opened that the record does not hold is settled `cancelled`, and a parked run that never
//! finished in the log is dropped (it was closed `interrupted`). A turn is driven again at
//! most once.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use harness_core::message::{Message, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::thread::Thread;
use super::{Host, Refusal};
use crate::Json;
use crate::agui::{self, AguiEvent, Interrupt, ResumeEntry, ResumeStatus};
use crate::catalog::{self, HarnessEvent, InputOutcome, OperationKind, WaitKind, WaitOutcome};
use crate::frame::{Receipt, ReceiptStatus};
use crate::log::{EventLog, LogError};

/// What a [`Wait`] waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WaitFor {
    /// A person approves (or denies) a gated tool call (kind `approval`).
    Approval {
        /// The call (its `TOOL_CALL_*` events were sent).
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments.
        input: Value,
    },
    /// A person answers a question (kind `question`); the `answer` input names it.
    Question {
        /// The `questionId` (also the wait's id).
        question_id: String,
        /// The JSON Schema of the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        /// Whether the answer is a secret.
        #[serde(default)]
        secret: bool,
    },
    /// The conversation went to a person (kind `human`).
    Human,
}

/// A wait for a person that a run opened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Wait {
    /// The `waitId` (the `id` of its interrupt, what `resolve` names as `interruptId`).
    pub wait_id: String,
    /// For people.
    pub message: String,
    /// What it waits for.
    pub what: WaitFor,
}

impl Wait {
    /// The wait of a gated tool call: `approval-<call id>`, "Approve `<tool>`?".
    pub fn approval(call: &ToolCall) -> Wait {
        Wait {
            wait_id: format!("approval-{}", call.id),
            message: format!("Approve {}?", call.tool),
            what: WaitFor::Approval {
                tool_call_id: call.id.clone(),
                tool_name: call.tool.clone(),
                input: Value::Object(call.args.clone()),
            },
        }
    }

    /// The wait of a question: its id is the `questionId`.
    pub fn question(
        question_id: impl Into<String>,
        message: impl Into<String>,
        schema: Option<Value>,
        secret: bool,
    ) -> Wait {
        let question_id = question_id.into();
        Wait {
            wait_id: question_id.clone(),
            message: message.into(),
            what: WaitFor::Question {
                question_id,
                schema,
                secret,
            },
        }
    }

    /// The wait of a hand-off to a person.
    pub fn human(wait_id: impl Into<String>, message: impl Into<String>) -> Wait {
        Wait {
            wait_id: wait_id.into(),
            message: message.into(),
            what: WaitFor::Human,
        }
    }

    /// Its `kind`: `approval`, `question` or `human`.
    pub fn kind(&self) -> WaitKind {
        match self.what {
            WaitFor::Approval { .. } => WaitKind::Approval,
            WaitFor::Question { .. } => WaitKind::Question,
            WaitFor::Human => WaitKind::Human,
        }
    }

    /// Whether the turn must be driven again once it is decided (an approval, a question);
    /// a hand-off to a person is not.
    pub fn parks(&self) -> bool {
        !matches!(self.what, WaitFor::Human)
    }

    /// Its AG-UI interrupt, as `RUN_FINISHED.outcome.interrupts` carries it. An approval is
    /// the shape `@tanstack/ai-client` resolves with `addToolApprovalResponse`:
    /// `{id, reason: "approval_required", message, toolCallId, metadata: {kind: "approval",
    /// toolName, input}}`.
    pub fn interrupt(&self) -> Interrupt {
        /// The interrupt's `metadata`, its keys in this order.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Metadata<'a> {
            kind: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            tool_name: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            input: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            question_id: Option<&'a str>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            secret: bool,
        }
        let kind = self.kind();
        let mut meta = Metadata {
            kind: kind.as_str(),
            tool_name: None,
            input: None,
            question_id: None,
            secret: false,
        };
        let (reason, tool_call_id, schema) = match &self.what {
            WaitFor::Approval {
                tool_call_id,
                tool_name,
                input,
            } => {
                meta.tool_name = Some(tool_name);
                meta.input = Some(input);
                ("approval_required", Some(tool_call_id.clone()), None)
            }
            WaitFor::Question {
                question_id,
                schema,
                secret,
            } => {
                meta.question_id = Some(question_id);
                meta.secret = *secret;
                let schema = schema.as_ref().filter(|s| s.is_object());
                ("input_required", None, schema.map(Json::from_value))
            }
            WaitFor::Human => ("human_handoff", None, None),
        };
        Interrupt {
            id: self.wait_id.clone(),
            reason: reason.to_owned(),
            message: Some(self.message.clone()),
            tool_call_id,
            response_schema: schema,
            metadata: Json::new(&meta).ok(),
            ..Interrupt::default()
        }
    }
}

/// A person's decision on a wait: what a `resolve` (one of its `resume` entries) or an
/// `answer` input said.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Resolution {
    /// The wait it decides.
    pub wait: Wait,
    /// `status: "cancelled"`.
    #[serde(default)]
    pub cancelled: bool,
    /// The `payload` of a `resolve` entry, or the `value` of an `answer`.
    #[serde(default)]
    pub payload: Value,
}

impl Resolution {
    /// Whether it approves a gated call: `status: "resolved"` with `payload.approved`
    /// exactly `true` (anything else denies it).
    pub fn approves(&self) -> bool {
        !self.cancelled && self.payload.get("approved") == Some(&Value::Bool(true))
    }

    /// Why a gated call was denied: the payload's `reason` (or `message`) when it gives one.
    pub fn denial_reason(&self) -> String {
        if self.cancelled {
            return "the approval was cancelled".to_owned();
        }
        ["reason", "message"]
            .iter()
            .find_map(|k| self.payload.get(*k).and_then(Value::as_str))
            .map_or_else(|| "the user denied it".to_owned(), str::to_owned)
    }
}

/// A turn driven again once its waits were decided ([`TurnRequest::resume`]).
///
/// [`TurnRequest::resume`]: super::TurnRequest::resume
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Resume {
    /// The interrupted run (the new run's `parentRunId`).
    pub parent_run_id: String,
    /// What the driver gave in [`Interrupted::state`].
    pub state: String,
    /// The decisions, one per wait of the interrupted run.
    pub resolutions: Vec<Resolution>,
}

/// How a turn ended when it waits for a person
/// ([`TurnOutcome::Interrupted`](super::TurnOutcome::Interrupted)).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Interrupted {
    /// The waits it opened (at least one).
    pub waits: Vec<Wait>,
    /// What the driver needs to drive the turn again (its inputs and what it did so far),
    /// kept by the host with the thread and handed back in [`Resume::state`]; `None` for a
    /// turn that completed and only left a hand-off to a person open.
    pub state: Option<String>,
}

impl Interrupted {
    /// A parked turn: its waits and its state.
    pub fn parked(waits: Vec<Wait>, state: String) -> Self {
        Interrupted {
            waits,
            state: Some(state),
        }
    }

    /// A turn that completed, leaving waits that drive nothing (a hand-off to a person).
    pub fn completed(waits: Vec<Wait>) -> Self {
        Interrupted { waits, state: None }
    }
}

/// The waits record of a thread: what [`EventLog::set_waits`] keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Parked {
    /// The interrupted run.
    pub(super) run_id: String,
    pub(super) kind: OperationKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) agent: Option<String>,
    /// The driver's state; `None`: only waits that drive nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) state: Option<String>,
    /// Waits not decided yet.
    pub(super) open: Vec<Wait>,
    /// Waits decided, while others of the turn are still open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) decided: Vec<Resolution>,
}

impl Parked {
    /// Whether inputs wait behind it: a turn is parked on it (it has a state).
    pub(super) fn blocks(&self) -> bool {
        self.state.is_some()
    }

    fn record(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One decision an input brings: the wait it names, and what it says.
pub(super) struct Entry {
    wait_id: String,
    cancelled: bool,
    payload: Value,
    /// From an `answer` input: only a question may take it.
    answer: bool,
}

impl Entry {
    /// The decision of an `answer` input.
    pub(super) fn answer(question_id: &str, value: Option<&Json>) -> Entry {
        Entry {
            wait_id: question_id.to_owned(),
            cancelled: false,
            payload: value.map_or(Value::Null, Json::to_value),
            answer: true,
        }
    }

    /// The decisions of a `resolve` input's `resume` (or of `POST run`'s).
    pub(super) fn resolve<'a>(entries: impl IntoIterator<Item = &'a ResumeEntry>) -> Vec<Entry> {
        entries
            .into_iter()
            .map(|e| Entry {
                wait_id: e.interrupt_id.clone(),
                cancelled: e.status != ResumeStatus::Resolved,
                payload: e.payload.as_ref().map_or(Value::Null, Json::to_value),
                answer: false,
            })
            .collect()
    }
}

/// What a `resolve` did.
pub(super) enum Resolved {
    /// It named a wait that is not open (`not_waiting`).
    NotWaiting,
    /// Its decisions would make the waits record larger than its bound (`too_large`).
    TooLarge,
    /// It settled its waits; the turn's other waits are still open (or it waited for
    /// nothing to drive).
    Settled,
    /// It settled the last waits of a parked turn, which now runs again as this run.
    Driven(String),
}

impl<L: EventLog> Host<L> {
    /// Parks the turn `op` that ended with `interrupted`: keeps its waits record, logs its
    /// questions and its `harness.wait.opened`. The interrupts for its `RUN_FINISHED`, or
    /// why it could not park (it then fails).
    pub(super) fn park(
        &mut self,
        now: Instant,
        key: &str,
        op: &str,
        kind: OperationKind,
        agent: Option<String>,
        interrupted: Interrupted,
    ) -> Result<Vec<Interrupt>, (String, &'static str)> {
        if interrupted.waits.is_empty() {
            return Err(("the turn was interrupted with no wait".into(), "internal"));
        }
        let parked = Parked {
            run_id: op.to_owned(),
            kind,
            agent,
            state: interrupted.state,
            open: interrupted.waits,
            decided: Vec::new(),
        };
        let record = parked.record();
        if record.len() > self.cfg.max_parked_bytes {
            return Err((
                format!(
                    "the turn cannot wait: what it keeps to go on is larger than {} bytes",
                    self.cfg.max_parked_bytes
                ),
                "too_large",
            ));
        }
        if let Err(e) = self.log.set_waits(key, Some(&record)) {
            return Err((e.to_string(), "internal"));
        }
        let interrupts = parked.open.iter().map(Wait::interrupt).collect();
        let opened: Vec<Wait> = parked.open.clone();
        if let Some(t) = self.threads.get_mut(key) {
            t.set_parked(Some(parked), record.len());
        }
        for w in opened {
            if let WaitFor::Question {
                question_id,
                schema,
                secret,
            } = &w.what
            {
                let q = HarnessEvent::Question(catalog::QuestionEvent {
                    question_id: question_id.clone(),
                    message: w.message.clone(),
                    schema: schema.as_ref().map(Json::from_value),
                    secret: secret.then_some(true),
                    ..catalog::QuestionEvent::default()
                });
                self.emit(now, key, op, q.to_event())
                    .map_err(|e| (e.to_string(), "internal"))?;
            }
            let ev = HarnessEvent::WaitOpened(catalog::WaitOpened {
                wait_id: w.wait_id.clone(),
                kind: w.kind(),
                run_id: op.to_owned(),
                message: Some(w.message.clone()),
                ..catalog::WaitOpened::default()
            });
            self.emit(now, key, op, ev.to_event())
                .map_err(|e| (e.to_string(), "internal"))?;
        }
        Ok(interrupts)
    }

    /// Applies the decisions of a `resolve` or `answer` input `input_id` (`op`, as its
    /// `harness.input.accepted` names it) to the thread `key`: every entry must name an open
    /// wait, else nothing changes. When the last wait of a parked turn settles, the turn runs
    /// again as the run `run_id` (a new id when `None`).
    pub(super) fn resolve_waits(
        &mut self,
        now: Instant,
        key: &str,
        input_id: &str,
        op: &str,
        entries: Vec<Entry>,
        run_id: Option<String>,
    ) -> Result<Resolved, Refusal> {
        let Some(mut parked) = self.threads.get(key).and_then(|t| t.parked.clone()) else {
            return Ok(Resolved::NotWaiting);
        };
        let mut seen = HashSet::new();
        let fits = !entries.is_empty()
            && entries.iter().all(|e| {
                seen.insert(e.wait_id.as_str())
                    && parked.open.iter().any(|w| {
                        w.wait_id == e.wait_id
                            && (!e.answer || matches!(w.what, WaitFor::Question { .. }))
                    })
            });
        if !fits {
            return Ok(Resolved::NotWaiting);
        }
        let mut settled = Vec::new();
        for e in entries {
            if let Some(i) = parked.open.iter().position(|w| w.wait_id == e.wait_id) {
                let wait = parked.open.remove(i);
                settled.push(Resolution {
                    wait,
                    cancelled: e.cancelled,
                    payload: e.payload,
                });
            }
        }
        parked.decided.extend(settled.iter().cloned());
        let drive = parked.open.is_empty() && parked.state.is_some();
        // Decisions kept while other waits are open count against the record's bound too.
        if !parked.open.is_empty() && parked.record().len() > self.cfg.max_parked_bytes {
            return Ok(Resolved::TooLarge);
        }
        // The record first: a crash before the log's events leaves waits the log still
        // opens and the record does not hold, which a restart settles `cancelled`.
        let keep = (!parked.open.is_empty()).then_some(parked.clone());
        self.keep_waits(key, keep)?;
        self.log_harness(
            now,
            key,
            "session",
            HarnessEvent::InputAccepted(catalog::InputAccepted {
                input_id: input_id.to_owned(),
                op: op.to_owned(),
                ..catalog::InputAccepted::default()
            }),
        )?;
        for r in &settled {
            self.log_settled(now, key, r)?;
        }
        if !drive {
            self.settle_input(now, key, input_id, InputOutcome::Completed)?;
            return Ok(Resolved::Settled);
        }
        let run = match run_id {
            Some(r) => r,
            None => self.new_op_id(key),
        };
        let resume = super::Resume {
            parent_run_id: parked.run_id.clone(),
            state: parked.state.clone().unwrap_or_default(),
            resolutions: parked.decided,
        };
        self.begin_run(
            now,
            key,
            &run,
            input_id,
            parked.kind,
            parked.agent,
            Message::user(""),
            None,
            Some(Box::new(resume)),
        )?;
        Ok(Resolved::Driven(run))
    }

    /// A `cancel` of the interrupted run of a parked turn: its waits settle `cancelled`, the
    /// turn is dropped, and the next waiting input runs. Whether `op` was that run.
    pub(super) fn cancel_parked(
        &mut self,
        now: Instant,
        key: &str,
        op: &str,
    ) -> Result<bool, Refusal> {
        let is_parked = self
            .threads
            .get(key)
            .and_then(|t| t.parked.as_ref())
            .is_some_and(|p| p.run_id == op);
        if !is_parked {
            return Ok(false);
        }
        self.drop_waits(now, key)?;
        if self.threads.get(key).is_some_and(|t| t.running.is_none()) {
            self.start_next(now, key)?;
        }
        Ok(true)
    }

    /// Settles every open wait of the thread `cancelled` and forgets them (a parked turn is
    /// dropped; a hand-off to a person ends as a new turn starts).
    pub(super) fn drop_waits(&mut self, now: Instant, key: &str) -> Result<(), Refusal> {
        let Some(parked) = self.threads.get(key).and_then(|t| t.parked.clone()) else {
            return Ok(());
        };
        self.keep_waits(key, None)?;
        for wait in parked.open {
            let r = Resolution {
                wait,
                cancelled: true,
                payload: Value::Null,
            };
            self.log_settled(now, key, &r)?;
        }
        Ok(())
    }

    /// Keeps (or drops) the thread's waits record, in the log and in memory.
    fn keep_waits(&mut self, key: &str, parked: Option<Parked>) -> Result<(), Refusal> {
        let record = parked.as_ref().map(Parked::record);
        self.log
            .set_waits(key, record.as_deref())
            .map_err(|e| Refusal::Internal(e.to_string()))?;
        if let Some(t) = self.threads.get_mut(key) {
            t.set_parked(parked, record.map_or(0, |r| r.len()));
        }
        Ok(())
    }

    /// `harness.question.answered` (an answered question) and `harness.wait.settled`.
    fn log_settled(&mut self, now: Instant, key: &str, r: &Resolution) -> Result<(), Refusal> {
        for ev in settled_events(r) {
            self.log_harness(now, key, "session", ev)?;
        }
        Ok(())
    }
}

/// What the log says of a decided wait: `harness.question.answered` for an answered
/// question, then `harness.wait.settled`.
fn settled_events(r: &Resolution) -> Vec<HarnessEvent> {
    let mut out = Vec::new();
    if let (WaitFor::Question { question_id, .. }, false) = (&r.wait.what, r.cancelled) {
        out.push(HarnessEvent::QuestionAnswered(catalog::QuestionAnswered {
            question_id: question_id.clone(),
            ..catalog::QuestionAnswered::default()
        }));
    }
    out.push(HarnessEvent::WaitSettled(catalog::WaitSettled {
        wait_id: r.wait.wait_id.clone(),
        outcome: if r.cancelled {
            WaitOutcome::Cancelled
        } else {
            WaitOutcome::Answered
        },
        ..catalog::WaitSettled::default()
    }));
    out
}

/// The waits a thread's log opened and did not settle (by id, with their run), and those it
/// settled after opening them, read record by record ([`restore`](super::thread::restore)).
#[derive(Debug, Default)]
pub(super) struct LogWaits {
    open: HashMap<String, String>,
    closed: HashSet<String>,
}

impl LogWaits {
    /// Takes one `harness.*` event of the log into account.
    pub(super) fn observe(&mut self, ev: &HarnessEvent) {
        match ev {
            HarnessEvent::WaitOpened(w) => {
                self.closed.remove(&w.wait_id);
                self.open.insert(w.wait_id.clone(), w.run_id.clone());
            }
            // A settled wait the log had opened is closed.
            HarnessEvent::WaitSettled(w) if self.open.remove(&w.wait_id).is_some() => {
                self.closed.insert(w.wait_id.clone());
            }
            _ => {}
        }
    }
}

/// Reads a thread's waits record back (see the [module docs](self) for what the log
/// overrules): the record to keep, and what to append to the log so that it says the same.
/// `unfinished`: the runs the log started and never finished.
pub(super) fn restore_waits<L: EventLog>(
    log: &mut L,
    key: &str,
    log_waits: LogWaits,
    unfinished: &[String],
    t: &mut Thread,
) -> Vec<AguiEvent> {
    let LogWaits { mut open, closed } = log_waits;
    let stored = log.waits(key).ok().flatten();
    let record: Option<Parked> = stored.as_deref().and_then(|s| serde_json::from_str(s).ok());
    let mut out = Vec::new();
    let kept = record.and_then(|mut p| {
        if unfinished.contains(&p.run_id) {
            return None;
        }
        p.open.retain(|w| !closed.contains(&w.wait_id));
        for d in std::mem::take(&mut p.decided) {
            if open.remove(&d.wait.wait_id).is_some() {
                out.extend(settled_events(&d).iter().map(HarnessEvent::to_event));
            }
            p.decided.push(d);
        }
        (!p.open.is_empty()).then_some(p)
    });
    for w in kept.iter().flat_map(|p| &p.open) {
        open.remove(&w.wait_id);
    }
    let mut stale: Vec<String> = open.into_keys().collect();
    stale.sort();
    for wait_id in stale {
        out.push(
            HarnessEvent::WaitSettled(catalog::WaitSettled {
                wait_id,
                outcome: WaitOutcome::Cancelled,
                ..catalog::WaitSettled::default()
            })
            .to_event(),
        );
    }
    let record = kept.as_ref().map(Parked::record);
    if record != stored {
        // ok: when it cannot be rewritten, the next restore reads the same and decides the
        // same.
        let _ = log.set_waits(key, record.as_deref());
    }
    t.set_parked(kept, record.map_or(0, |r| r.len()));
    out
}

/// Why a log could not keep a waits record, as a refusal.
impl From<LogError> for Refusal {
    fn from(e: LogError) -> Self {
        Refusal::Internal(e.to_string())
    }
}

/// The receipt of a `resolve` or `answer` input.
pub(super) fn receipt_of(input_id: String, r: Resolved) -> Receipt {
    let rejected = |reason: &str| Receipt {
        input_id: input_id.clone(),
        status: ReceiptStatus::Rejected,
        reason: Some(reason.to_owned()),
        ..Receipt::default()
    };
    match r {
        Resolved::NotWaiting => rejected("not_waiting"),
        Resolved::TooLarge => rejected("too_large"),
        Resolved::Settled => Receipt {
            input_id,
            status: ReceiptStatus::Accepted,
            ..Receipt::default()
        },
        Resolved::Driven(op) => Receipt {
            input_id,
            status: ReceiptStatus::Accepted,
            operation_id: Some(op),
            ..Receipt::default()
        },
    }
}

/// The `AG-UI` outcome of a run that ends waiting.
pub(super) fn interrupt_outcome(interrupts: Vec<Interrupt>) -> agui::RunFinishedOutcome {
    agui::RunFinishedOutcome::Interrupt(agui::InterruptOutcome {
        interrupts,
        ..agui::InterruptOutcome::default()
    })
}
