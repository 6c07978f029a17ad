//! Per-thread state: transcript, run tree and receipts, made new or rebuilt from the log.

use std::collections::{HashMap, HashSet, VecDeque};

use harness_core::message::Message as CoreMessage;

use super::input::Waiting;
use super::turn::Running;
use super::{ConnId, Host, may_read};
use crate::agui::{self, Content, Event, RunError};
use crate::catalog::{self, HarnessEvent, InputOutcome};
use crate::frame::{ErrorCode, Receipt, ReceiptStatus, close};
use crate::log::{EventLog, LogError};

/// What the host keeps of one thread besides its log.
#[derive(Debug, Default)]
pub(super) struct Thread {
    pub(super) owner: Option<String>,
    pub(super) running: Option<Running>,
    pub(super) waiting: VecDeque<Waiting>,
    /// Receipts of idempotent inputs, by `inputId`.
    pub(super) receipts: HashMap<String, Receipt>,
    /// The order the receipts came in (to forget the oldest).
    receipt_order: VecDeque<String>,
    pub(super) transcript: Vec<agui::Message>,
    pub(super) history: Vec<CoreMessage>,
    /// The user message of each accepted input, until it is applied.
    pending: HashMap<String, String>,
    /// The text of assistant messages being streamed, by message id.
    streaming: HashMap<String, String>,
    /// Runs whose `RUN_STARTED` had a `parentRunId`: the run tree.
    pub(super) parents: HashMap<String, Option<String>>,
    /// Tool calls whose arguments still stream: where they are in the transcript (the
    /// message, and the call in its `toolCalls`), by `toolCallId`.
    open_calls: HashMap<String, (usize, usize)>,
}

impl<L: EventLog> Host<L> {
    /// A new thread, owned by the user whose input made it (kept in the log, so that a
    /// durable host keeps it over a restart). A socket that subscribed to the thread id
    /// before, as another user, "cannot read the thread": 4403.
    pub(super) fn make_thread(
        &mut self,
        thread_id: &str,
        user: Option<&str>,
    ) -> Result<(), LogError> {
        if let Some(u) = user {
            self.log.set_owner(thread_id, u)?;
        }
        let t = Thread {
            owner: user.map(str::to_owned),
            ..Thread::default()
        };
        let refused: Vec<ConnId> = self
            .watchers
            .get(thread_id)
            .map(|w| {
                w.iter()
                    .copied()
                    .filter(|id| {
                        self.conns
                            .get(id)
                            .is_some_and(|c| !may_read(&self.cfg.access, &t, c.user.as_deref()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.threads.insert(thread_id.to_owned(), t);
        for id in refused {
            let rid = self
                .conns
                .get(&id)
                .map(|c| c.request_id.clone())
                .unwrap_or_default();
            self.error(
                id,
                ErrorCode::Forbidden,
                "You cannot read this thread.",
                &rid,
            );
            self.close_conn(id, close::FORBIDDEN, "forbidden");
            // It reads nothing more of this thread.
            self.unwatch(id);
        }
        self.host_status(thread_id, "idle");
        Ok(())
    }
}

/// Rebuilds a thread from the records the log already has (a durable log after a restart):
/// its transcript, the run tree and the receipts of idempotent inputs; raises `next_op` and
/// `next_input` past the host-made ids it has. What the restart cut off is closed in the log.
pub(super) fn restore<L: EventLog>(
    log: &mut L,
    id: &str,
    max_receipts: usize,
    next_op: &mut u64,
    next_input: &mut u64,
) -> Thread {
    let num = |s: &str, prefix: &str| s.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
    let mut t = Thread {
        owner: log.owner(id),
        ..Thread::default()
    };
    // Runs that started and never ended: the host stopped during them.
    let mut open: Vec<(String, Option<String>)> = Vec::new();
    // Inputs accepted and neither applied nor settled: they waited behind a turn.
    let mut unapplied: Vec<String> = Vec::new();
    let mut queued: HashSet<String> = HashSet::new();
    let (first, head) = (log.first_seq(id), log.head_seq(id));
    for seq in first..=head {
        let Ok(Some(rec)) = log.get(id, seq) else {
            continue;
        };
        *next_op = (*next_op).max(num(&rec.operation_id, "op-").unwrap_or(0));
        let Ok(ev) = rec.event() else { continue };
        match &ev {
            Event::RunStarted(r) => open.push((r.run_id.clone(), None)),
            Event::RunFinished(_) | Event::RunError(_) => {
                open.retain(|(op, _)| *op != *rec.operation_id)
            }
            Event::Custom(c) => match HarnessEvent::from_custom(&c.name, &c.value) {
                Ok(HarnessEvent::InputAccepted(a)) => {
                    *next_input = (*next_input).max(num(&a.input_id, "in-").unwrap_or(0));
                    // Accepted again (sent again after it never ran): what it was
                    // the first time no longer counts.
                    queued.remove(&a.input_id);
                    let idempotent =
                        matches!(a.op.as_str(), "prompt" | "command" | "agent" | "append");
                    if idempotent {
                        t.remember_receipt(
                            Receipt {
                                input_id: a.input_id.clone(),
                                status: ReceiptStatus::Accepted,
                                ..Receipt::default()
                            },
                            max_receipts,
                        );
                    }
                    if a.op != "append" {
                        unapplied.push(a.input_id);
                    }
                }
                Ok(HarnessEvent::InputQueued(q)) => {
                    if let Some(r) = t.receipts.get_mut(&q.input_id) {
                        r.status = ReceiptStatus::Queued;
                    }
                    queued.insert(q.input_id);
                }
                Ok(HarnessEvent::InputApplied(a)) => {
                    if let Some(o) = open.iter_mut().find(|(op, _)| *op == a.operation_id) {
                        o.1 = Some(a.input_id.clone());
                    }
                    if let Some(r) = t.receipts.get_mut(&a.input_id) {
                        // The receipt said what happened then: accepted with its
                        // run, or queued (a queued input's receipt has no run).
                        if !queued.contains(&a.input_id) {
                            r.operation_id = Some(a.operation_id.clone());
                        }
                    }
                    unapplied.retain(|i| *i != a.input_id);
                }
                Ok(HarnessEvent::InputSettled(a)) => {
                    unapplied.retain(|i| *i != a.input_id);
                }
                _ => {}
            },
            _ => {}
        }
        t.observe(&ev);
    }
    let mut closing: Vec<(String, Event)> = Vec::new();
    for (op, input_id) in open {
        closing.extend(
            interrupted(&op, input_id)
                .into_iter()
                .map(|e| (op.clone(), e)),
        );
    }
    for input_id in unapplied {
        // It never ran: its receipt goes, so that the same input sent again (the
        // same `inputId`, after a lost answer) runs, once, instead of getting back
        // `queued` for an input that no longer waits.
        t.forget_receipt(&input_id);
        let ev = HarnessEvent::InputSettled(catalog::InputSettled {
            input_id,
            outcome: InputOutcome::Interrupted,
            ..catalog::InputSettled::default()
        });
        closing.push(("session".to_owned(), ev.to_event()));
    }
    for (op, ev) in closing {
        if log.append(id, &op, &ev).is_ok() {
            t.observe(&ev);
        }
    }
    t
}

impl Thread {
    /// Keeps the receipt of an idempotent input; past `max`, the oldest is forgotten.
    pub(super) fn remember_receipt(&mut self, r: Receipt, max: usize) {
        if !self.receipts.contains_key(&r.input_id) {
            self.receipt_order.push_back(r.input_id.clone());
        }
        self.receipts.insert(r.input_id.clone(), r);
        while self.receipt_order.len() > max {
            if let Some(old) = self.receipt_order.pop_front() {
                self.receipts.remove(&old);
            }
        }
    }

    /// Forgets the receipt of an input that never ran.
    fn forget_receipt(&mut self, input_id: &str) {
        if self.receipts.remove(input_id).is_some() {
            self.receipt_order.retain(|i| i != input_id);
        }
    }

    /// Whether an input id names an input of this thread the host still knows.
    pub(super) fn knows_input(&self, id: &str) -> bool {
        self.receipts.contains_key(id)
            || self.pending.contains_key(id)
            || self.waiting.iter().any(|w| w.input_id == id)
            || self.running.as_ref().is_some_and(|r| r.input_id == id)
    }

    /// Whether a run id is taken in this thread.
    pub(super) fn knows_run(&self, id: &str) -> bool {
        self.parents.contains_key(id) || self.running.as_ref().is_some_and(|r| r.operation_id == id)
    }

    /// Keeps the transcript and the run tree up to date with an event of the thread.
    pub(super) fn observe(&mut self, ev: &Event) {
        match ev {
            Event::RunStarted(r) => {
                self.parents
                    .insert(r.run_id.clone(), r.parent_run_id.clone());
            }
            Event::TextMessageStart(s) => {
                self.streaming.insert(s.message_id.clone(), String::new());
            }
            Event::TextMessageContent(c) => {
                if let Some(t) = self.streaming.get_mut(&c.message_id) {
                    t.push_str(&c.delta);
                }
            }
            Event::TextMessageEnd(e) => {
                if let Some(text) = self.streaming.remove(&e.message_id) {
                    self.history.push(CoreMessage::assistant(text.clone()));
                    self.transcript
                        .push(agui::Message::assistant(e.message_id.clone(), text));
                }
            }
            Event::ToolCallStart(s) => {
                // As AG-UI's client applies it: the call goes on the assistant message
                // `parentMessageId` when there is one, else on a new assistant message with
                // the id `parentMessageId` (or `toolCallId`, with no parent or when that id
                // is a message of another role).
                if self.open_calls.contains_key(&s.tool_call_id) {
                    return;
                }
                let call = agui::ToolCall {
                    id: s.tool_call_id.clone(),
                    function: agui::FunctionCall {
                        name: s.tool_call_name.clone(),
                        arguments: String::new(),
                        ..agui::FunctionCall::default()
                    },
                    ..agui::ToolCall::default()
                };
                let parent = s.parent_message_id.as_deref();
                let found = parent.and_then(|p| self.transcript.iter().rposition(|m| m.id() == p));
                let place = match found.map(|i| (i, &mut self.transcript[i])) {
                    Some((i, agui::Message::Assistant(m))) => {
                        let calls = m.tool_calls.get_or_insert_with(Vec::new);
                        calls.push(call);
                        (i, calls.len() - 1)
                    }
                    other => {
                        let id = match (other, parent) {
                            (None, Some(p)) => p,
                            _ => &s.tool_call_id,
                        };
                        self.transcript
                            .push(agui::Message::Assistant(agui::AssistantMessage {
                                id: id.to_owned(),
                                tool_calls: Some(vec![call]),
                                ..agui::AssistantMessage::default()
                            }));
                        (self.transcript.len() - 1, 0)
                    }
                };
                self.open_calls.insert(s.tool_call_id.clone(), place);
            }
            Event::ToolCallArgs(a) => {
                if let Some(&(i, j)) = self.open_calls.get(&a.tool_call_id) {
                    if let Some(agui::Message::Assistant(m)) = self.transcript.get_mut(i) {
                        if let Some(c) = m.tool_calls.as_mut().and_then(|c| c.get_mut(j)) {
                            c.function.arguments.push_str(&a.delta);
                        }
                    }
                }
            }
            Event::ToolCallEnd(e) => {
                self.open_calls.remove(&e.tool_call_id);
            }
            Event::ToolCallResult(r) => {
                self.transcript.push(agui::Message::Tool(agui::ToolMessage {
                    id: r.message_id.clone(),
                    content: r.content.clone(),
                    tool_call_id: r.tool_call_id.clone(),
                    ..agui::ToolMessage::default()
                }));
            }
            Event::Custom(c) if c.name == "harness.input.accepted" => {
                if let Ok(a) = c.value.parse::<catalog::InputAccepted>() {
                    let text = a.message.and_then(|m| m.as_string()).unwrap_or_default();
                    if a.op == "append" {
                        self.user_message(&a.input_id, text);
                    } else {
                        self.pending.insert(a.input_id, text);
                    }
                }
            }
            Event::Custom(c) if c.name == "harness.input.applied" => {
                if let Ok(a) = c.value.parse::<catalog::InputApplied>() {
                    if let Some(text) = self.pending.remove(&a.input_id) {
                        self.user_message(&a.input_id, text);
                    }
                }
            }
            Event::Custom(c) if c.name == "harness.input.settled" => {
                if let Ok(a) = c.value.parse::<catalog::InputSettled>() {
                    self.pending.remove(&a.input_id);
                }
            }
            _ => {}
        }
    }

    fn user_message(&mut self, input_id: &str, text: String) {
        self.history.push(CoreMessage::user(text.clone()));
        self.transcript.push(agui::Message::User(agui::UserMessage {
            id: format!("{input_id}-msg"),
            content: Content::Text(text),
            ..agui::UserMessage::default()
        }));
    }
}

/// What closes a run the host was running when it stopped: `RUN_ERROR` with code
/// `interrupted`, `harness.operation.finished` with status `interrupted`, and
/// `harness.input.settled` with outcome `interrupted`.
fn interrupted(op: &str, input_id: Option<String>) -> Vec<Event> {
    let mut v = vec![
        Event::RunError(RunError {
            message: "The host stopped during this run.".into(),
            code: Some("interrupted".into()),
            ..RunError::default()
        }),
        HarnessEvent::OperationFinished(catalog::OperationFinished {
            operation_id: op.to_owned(),
            status: catalog::OperationStatus::Interrupted,
            ..catalog::OperationFinished::default()
        })
        .to_event(),
    ];
    if let Some(input_id) = input_id {
        v.push(
            HarnessEvent::InputSettled(catalog::InputSettled {
                input_id,
                operation_id: Some(op.to_owned()),
                outcome: InputOutcome::Interrupted,
                ..catalog::InputSettled::default()
            })
            .to_event(),
        );
    }
    v
}
