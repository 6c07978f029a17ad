//! Running turns (operations): how they start, their events, how they end, and the next input.

use std::time::Instant;

use harness_core::Cursor;
use harness_core::message::Message;

use super::input::input_message;
use super::thread::{Caps, Thread};
use super::wait::interrupt_outcome;
use super::{HOST_EVENTS, Host, HostError, HostEvent, Refusal, Resume, TurnOutcome, TurnRequest};
use crate::Json;
use crate::agui::{
    self, AguiEvent, Custom, RunError, RunFinished, RunFinishedOutcome, RunStarted, TextMessageEnd,
};
use crate::catalog::{self, Delivery, HarnessEvent, InputOutcome, OperationKind};
use crate::frame::Input;
use crate::log::{EventLog, LogError, LogRecord};

/// The turn a thread runs.
#[derive(Clone, Debug)]
pub(super) struct Running {
    pub(super) operation_id: String,
    pub(super) input_id: String,
    pub(super) kind: OperationKind,
    /// The agent of an `agent` input.
    agent: Option<String>,
    /// The text message the run has open (a cancel closes it).
    open_message: Option<String>,
}

impl<L: EventLog> Host<L> {
    /// A host-made run id (`op-N`) that no run of the thread has had: past the highest the
    /// thread has had, and not one it knows.
    pub(super) fn new_op_id(&mut self, thread_id: &str) -> String {
        if let Some(t) = self.threads.get(thread_id) {
            self.next_op = self.next_op.max(t.max_op);
        }
        loop {
            self.next_op = self.next_op.wrapping_add(1);
            let id = format!("op-{}", self.next_op);
            if !self
                .threads
                .get(thread_id)
                .is_some_and(|t| t.knows_run(&id))
            {
                return id;
            }
        }
    }

    pub(super) fn start_turn(
        &mut self,
        now: Instant,
        thread_id: &str,
        input_id: &str,
        input: &Input,
        traceparent: Option<String>,
    ) -> Result<String, Refusal> {
        let op = self.new_op_id(thread_id);
        let (kind, agent) = match input {
            Input::Agent(a) => (OperationKind::Agent, Some(a.agent.clone())),
            _ => (OperationKind::Chat, None),
        };
        // A new turn: a hand-off to a person that waits ends (the agent has the
        // conversation back). A parked turn never gets here: inputs wait behind it.
        self.drop_waits(now, thread_id)?;
        self.begin_run(
            now,
            thread_id,
            &op,
            input_id,
            kind,
            agent,
            input_message(input),
            traceparent,
            None,
        )?;
        Ok(op)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn begin_run(
        &mut self,
        now: Instant,
        thread_id: &str,
        op: &str,
        input_id: &str,
        kind: OperationKind,
        agent: Option<String>,
        message: Message,
        traceparent: Option<String>,
        resume: Option<Box<Resume>>,
    ) -> Result<(), Refusal> {
        let owner = self.threads.get(thread_id).and_then(|t| t.owner.as_deref());
        let scope = super::resume::index_scope(&self.cfg.access, owner);
        self.runs.insert(scope, owner, op, thread_id);
        let (history, wire) = match self.threads.get_mut(thread_id) {
            Some(t) => {
                t.running = Some(Running {
                    operation_id: op.to_owned(),
                    input_id: input_id.to_owned(),
                    kind: kind.clone(),
                    agent: agent.clone(),
                    open_message: None,
                });
                // A turn driven again has its own history in its state.
                let history = if resume.is_some() {
                    Vec::new()
                } else {
                    t.history()
                };
                (history, t.thread_id.clone())
            }
            None => return Err(Refusal::Internal("no thread".into())),
        };
        self.host_status(thread_id, "running");
        let started = AguiEvent::RunStarted(RunStarted {
            thread_id: wire,
            run_id: op.to_owned(),
            protocol_version: Some(agui::PROTOCOL_VERSION.to_owned()),
            parent_run_id: resume.as_ref().map(|r| r.parent_run_id.clone()),
            ..RunStarted::default()
        });
        self.emit(now, thread_id, op, started)
            .map_err(|e| Refusal::Internal(e.to_string()))?;
        self.log_harness(
            now,
            thread_id,
            op,
            HarnessEvent::OperationStarted(catalog::OperationStarted {
                operation_id: op.to_owned(),
                kind: kind.clone(),
                agent: agent.clone(),
                ..catalog::OperationStarted::default()
            }),
        )?;
        self.log_harness(
            now,
            thread_id,
            op,
            HarnessEvent::InputApplied(catalog::InputApplied {
                input_id: input_id.to_owned(),
                operation_id: op.to_owned(),
                ..catalog::InputApplied::default()
            }),
        )?;
        self.events.push_back(HostEvent::StartTurn(TurnRequest {
            thread_id: thread_id.to_owned(),
            operation_id: op.to_owned(),
            input_id: input_id.to_owned(),
            kind,
            agent,
            message,
            history,
            traceparent,
            resume,
        }));
        Ok(())
    }

    pub(super) fn start_next(
        &mut self,
        now: Instant,
        thread_id: &str,
    ) -> Result<Option<String>, Refusal> {
        let next = self.threads.get_mut(thread_id).and_then(|t| {
            // Nothing runs while a turn waits for a person: its decision drives it again.
            if t.parked.as_ref().is_some_and(|p| p.blocks()) {
                return None;
            }
            // A steering input goes first.
            let i = t
                .waiting()
                .iter()
                .position(|w| w.delivery == Delivery::Steer)
                .unwrap_or(0);
            t.take_waiting(i)
        });
        match next {
            Some(w) => self
                .start_turn(now, thread_id, &w.input_id, &w.input, w.traceparent)
                .map(Some),
            None => Ok(None),
        }
    }

    /// Appends an event of a run to the log of the thread stored under `thread_id` (its
    /// key: the `thread_id` of the [`TurnRequest`], see [`thread_key`](Self::thread_key))
    /// and wakes its subscribers. Returns the event's cursor.
    pub fn emit(
        &mut self,
        now: Instant,
        thread_id: &str,
        operation_id: &str,
        event: AguiEvent,
    ) -> Result<Cursor, HostError> {
        self.emit_seq(now, thread_id, operation_id, event)
            .map(|seq| Cursor::new(seq.to_string()))
    }

    /// [`emit`](Self::emit), returning the event's sequence number (a caller that does not
    /// hand the cursor on makes no string of it).
    pub(crate) fn emit_seq(
        &mut self,
        now: Instant,
        thread_id: &str,
        operation_id: &str,
        event: AguiEvent,
    ) -> Result<u64, HostError> {
        self.clock(now);
        // One lookup of the thread for the append and what follows (an event is the hot
        // path of a turn); a thread not in memory is read back or made first.
        let rec = match self.threads.get_mut(thread_id) {
            Some(t) => {
                self.resident.touch(thread_id);
                append_observed(&mut self.log, t, thread_id, operation_id, &event)
            }
            None => {
                if !self.ensure(thread_id, None) {
                    let t = Thread::new(thread_id, None, Caps::of(&self.cfg));
                    self.insert_thread(thread_id, t, None);
                }
                match self.threads.get_mut(thread_id) {
                    Some(t) => append_observed(&mut self.log, t, thread_id, operation_id, &event),
                    None => self.log.append(thread_id, operation_id, &event),
                }
            }
        };
        let rec = match rec {
            Ok(r) => r,
            Err(LogError::Fenced) => {
                // Another host took the thread over: this host's turn of it ends here,
                // and what it kept of the thread is stale (see `lease`).
                tracing::warn!(
                    threadId = thread_id,
                    "append fenced: another host owns the thread"
                );
                self.forget_thread(thread_id);
                return Err(LogError::Fenced.into());
            }
            Err(e) => return Err(e.into()),
        };
        self.wake_thread(thread_id);
        Ok(rec.seq)
    }

    /// Ends a turn: closes its open text message, sends `RUN_FINISHED` (with
    /// `outcome: {type:'cancelled'}` when cancelled) or `RUN_ERROR`, then
    /// `harness.operation.finished` and `harness.input.settled`, and starts the next waiting
    /// input.
    ///
    /// A turn that waits for a person ([`TurnOutcome::Interrupted`]) first has its waits
    /// record kept with the thread ([`EventLog::set_waits`]), then its `harness.question`s
    /// and a `harness.wait.opened` per wait, and its `RUN_FINISHED` carries `outcome:
    /// {type: "interrupt", interrupts}`; a parked turn lets no waiting input start (they
    /// wait for the decision, see [`Interrupted`](super::Interrupted)). One whose record
    /// is over [`max_parked_bytes`](super::HostConfig::max_parked_bytes), or that the log
    /// cannot keep, fails instead (`RUN_ERROR` code `too_large` or `internal`).
    pub fn finish_turn(
        &mut self,
        now: Instant,
        thread_id: &str,
        operation_id: &str,
        outcome: TurnOutcome,
    ) -> Result<(), HostError> {
        self.clock(now);
        let running = match self.threads.get_mut(thread_id) {
            Some(t)
                if t.running.as_ref().map(|r| r.operation_id.as_str()) == Some(operation_id) =>
            {
                t.running.take()
            }
            _ => None,
        };
        let Some(running) = running else {
            return Ok(());
        };
        crate::telemetry::turn_finished(&outcome);
        let wire = self
            .threads
            .get(thread_id)
            .map_or_else(|| thread_id.to_owned(), |t| t.thread_id.clone());
        // "Before it, a cancelled turn ends its open text message and sends `RUN_FINISHED`
        // with `outcome: { type: 'cancelled' }`."
        if let Some(m) = &running.open_message {
            self.emit(
                now,
                thread_id,
                operation_id,
                AguiEvent::TextMessageEnd(TextMessageEnd {
                    message_id: m.clone(),
                    ..TextMessageEnd::default()
                }),
            )?;
        }
        // A turn that waits for a person: its waits are kept and opened, and it ends with
        // their interrupts (or, when it cannot wait, it fails).
        let mut interrupts = None;
        let outcome = match outcome {
            TurnOutcome::Interrupted(i) => {
                let kind = running.kind.clone();
                let agent = running.agent.clone();
                match self.park(now, thread_id, operation_id, kind, agent, i) {
                    Ok(list) => {
                        interrupts = Some(list);
                        TurnOutcome::Completed
                    }
                    Err((message, code)) => TurnOutcome::Failed {
                        message,
                        code: Some(code.to_owned()),
                    },
                }
            }
            other => other,
        };
        let (status, settled, error) = match &outcome {
            TurnOutcome::Completed | TurnOutcome::Interrupted(_) => (
                catalog::OperationStatus::Completed,
                InputOutcome::Completed,
                None,
            ),
            TurnOutcome::Cancelled => (
                catalog::OperationStatus::Cancelled,
                InputOutcome::Aborted,
                None,
            ),
            TurnOutcome::Failed { message, code } => (
                catalog::OperationStatus::Failed,
                InputOutcome::Failed,
                Some(catalog::InputError {
                    message: message.clone(),
                    code: code.clone(),
                    ..catalog::InputError::default()
                }),
            ),
        };
        let end = match &outcome {
            TurnOutcome::Failed { message, code } => AguiEvent::RunError(RunError {
                message: message.clone(),
                code: code.clone(),
                ..RunError::default()
            }),
            TurnOutcome::Cancelled => AguiEvent::RunFinished(RunFinished {
                thread_id: wire.clone(),
                run_id: operation_id.to_owned(),
                outcome: Some(RunFinishedOutcome::cancelled()),
                ..RunFinished::default()
            }),
            TurnOutcome::Completed | TurnOutcome::Interrupted(_) => {
                AguiEvent::RunFinished(RunFinished {
                    thread_id: wire,
                    run_id: operation_id.to_owned(),
                    outcome: interrupts.map(interrupt_outcome),
                    ..RunFinished::default()
                })
            }
        };
        self.emit(now, thread_id, operation_id, end)?;
        let fin = HarnessEvent::OperationFinished(catalog::OperationFinished {
            operation_id: operation_id.to_owned(),
            status,
            ..catalog::OperationFinished::default()
        });
        self.emit(now, thread_id, operation_id, fin.to_event())?;
        let settle = HarnessEvent::InputSettled(catalog::InputSettled {
            input_id: running.input_id.clone(),
            operation_id: Some(operation_id.to_owned()),
            outcome: settled,
            error,
            ..catalog::InputSettled::default()
        });
        self.emit(now, thread_id, operation_id, settle.to_event())?;
        let _ = running.kind;
        self.host_status(thread_id, "idle");
        self.start_next(now, thread_id).map_err(|r| match r {
            Refusal::Internal(m) => HostError::Log(LogError::Io(m)),
            Refusal::Forbidden => HostError::Log(LogError::Io("forbidden".into())),
        })?;
        // Idle now: the lease goes (another host may take the thread at once), and past
        // the limits of memory, threads that idle longest leave it.
        self.release_if_idle(thread_id);
        self.trim(thread_id);
        Ok(())
    }

    /// A status change of a thread, for the `GET host-events` readers who may read it
    /// (its owner's stream under `membersOnly()`).
    pub(super) fn host_status(&mut self, key: &str, status: &str) {
        let (wire, owner) = match self.threads.get(key) {
            Some(t) => (t.thread_id.clone(), t.owner.clone()),
            None => (key.to_owned(), self.log.owner(key)),
        };
        let ev = AguiEvent::Custom(Custom {
            name: "harness.session.status".into(),
            value: Json::from_value(&serde_json::json!({ "threadId": wire, "status": status })),
            ..Custom::default()
        });
        let stream = self.host_events_key(owner.as_deref());
        if self
            .host_log
            .append_as(&stream, HOST_EVENTS, "host", &ev)
            .is_ok()
        {
            self.wake_thread(&stream);
        }
    }
}

/// Appends `event` to the log of the thread `t` (stored under `key`; its frame names the
/// thread by the id its clients use) and, once appended, lets the thread observe it.
fn append_observed<L: EventLog>(
    log: &mut L,
    t: &mut Thread,
    key: &str,
    operation_id: &str,
    event: &AguiEvent,
) -> Result<LogRecord, LogError> {
    let rec = log.append_as(key, &t.thread_id, operation_id, event);
    if rec.is_ok() {
        t.observe(event);
        if let Some(r) = t
            .running
            .as_mut()
            .filter(|r| r.operation_id == operation_id)
        {
            match event {
                AguiEvent::TextMessageStart(s) => {
                    r.open_message = Some(s.message_id.clone());
                }
                AguiEvent::TextMessageEnd(_) => r.open_message = None,
                _ => {}
            }
        }
    }
    rec
}
