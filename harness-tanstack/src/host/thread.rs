//! Per-thread state: transcript, history, run tree and receipts, each bounded in bytes, made
//! new or rebuilt from the log (after a restart, or when an idle thread that left memory is
//! used again).

use std::collections::{HashMap, HashSet, VecDeque};

use harness_core::message::Message;
use serde::Serialize;

use super::input::Waiting;
use super::turn::Running;
use super::wait::{self, LogWaits, Parked};
use super::{ConnId, Host, HostConfig, may_read};
use crate::agui::{self, AguiEvent, Content, RunError};
use crate::catalog::{self, HarnessEvent, InputOutcome};
use crate::frame::{ErrorCode, Receipt, ReceiptStatus, close};
use crate::log::{EventLog, LogError};

/// What a thread may keep, in number and in bytes (from the [`HostConfig`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Caps {
    receipts: usize,
    receipt_bytes: usize,
    history_bytes: usize,
    transcript_bytes: usize,
}

impl Caps {
    pub(super) fn of(cfg: &HostConfig) -> Caps {
        Caps {
            receipts: cfg.max_receipts.max(1),
            receipt_bytes: cfg.max_receipt_bytes.max(1),
            history_bytes: cfg.max_history_bytes.max(1),
            transcript_bytes: cfg.max_transcript_bytes.max(1),
        }
    }
}

/// Ids kept in the order they came, the oldest forgotten past a number or a size in bytes.
#[derive(Debug, Default)]
struct Window<V> {
    map: HashMap<String, V>,
    order: VecDeque<String>,
    bytes: usize,
}

impl<V> Window<V> {
    fn insert(&mut self, key: String, value: V, max: usize, max_bytes: usize) {
        if !self.map.contains_key(&key) {
            self.bytes += key.len();
            self.order.push_back(key.clone());
        }
        self.map.insert(key, value);
        while self.order.len() > max || (self.bytes > max_bytes && self.order.len() > 1) {
            if let Some(old) = self.order.pop_front() {
                self.bytes -= old.len();
                self.map.remove(&old);
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if self.map.remove(key).is_some() {
            self.order.retain(|k| k != key);
            self.bytes -= key.len();
        }
    }
}

/// Messages kept newest last, each with its size in bytes, the oldest dropped past a
/// size (the newest always stays).
#[derive(Debug)]
struct Messages<M> {
    items: VecDeque<(usize, M)>,
    bytes: usize,
    /// How many were dropped from the front (the position of the first, counted from the
    /// thread's first message).
    dropped: usize,
}

impl<M> Default for Messages<M> {
    fn default() -> Self {
        Messages {
            items: VecDeque::new(),
            bytes: 0,
            dropped: 0,
        }
    }
}

impl<M: Serialize> Messages<M> {
    fn push(&mut self, m: M, max_bytes: usize) {
        let size = json_len(&m);
        self.bytes += size;
        self.items.push_back((size, m));
        self.trim(max_bytes);
    }

    /// Grows the size of the message at absolute position `at` by `n` bytes.
    fn grew(&mut self, at: usize, n: usize, max_bytes: usize) {
        if let Some(e) = at
            .checked_sub(self.dropped)
            .and_then(|i| self.items.get_mut(i))
        {
            e.0 += n;
            self.bytes += n;
        }
        self.trim(max_bytes);
    }

    fn trim(&mut self, max_bytes: usize) {
        while self.bytes > max_bytes && self.items.len() > 1 {
            if let Some((size, _)) = self.items.pop_front() {
                self.bytes -= size;
                self.dropped += 1;
            }
        }
    }

    fn clear(&mut self) {
        self.dropped += self.items.len();
        self.items.clear();
        self.bytes = 0;
    }

    fn get_mut(&mut self, at: usize) -> Option<&mut M> {
        let i = at.checked_sub(self.dropped)?;
        self.items.get_mut(i).map(|e| &mut e.1)
    }

    fn iter(&self) -> impl Iterator<Item = &M> {
        self.items.iter().map(|e| &e.1)
    }
}

/// The length of a value's JSON (`0` for one that does not serialize).
fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |j| j.len())
}

/// The number of a host-made id (`op-7`, `in-7`), when it is one.
fn id_number(id: &str, prefix: &str) -> u64 {
    id.strip_prefix(prefix)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
}

/// What the host keeps of one thread besides its log. Everything in it is bounded: the
/// transcript and the history in bytes, the receipts and the run tree in number and bytes,
/// the waiting inputs by the host's queue limits.
#[derive(Debug)]
pub(super) struct Thread {
    /// The id its clients use (the key of a user's thread is another string).
    pub(super) thread_id: String,
    pub(super) owner: Option<String>,
    pub(super) running: Option<Running>,
    waiting: VecDeque<Waiting>,
    /// The bytes of the messages of `waiting`.
    pub(super) waiting_bytes: usize,
    /// Receipts of idempotent inputs, by `inputId`.
    receipts: Window<Receipt>,
    transcript: Messages<agui::AguiMessage>,
    history: Messages<Message>,
    /// The user message of each accepted input, until it is applied.
    pending: HashMap<String, String>,
    /// The text of assistant messages being streamed, by message id.
    streaming: HashMap<String, String>,
    /// The parent of each run (from the `parentRunId` of its `RUN_STARTED`): the run tree.
    parents: Window<Option<String>>,
    /// Tool calls whose arguments still stream: where they are in the transcript (the
    /// message's position counted from the thread's first, and the call in its
    /// `toolCalls`), by `toolCallId`.
    open_calls: HashMap<String, (usize, usize)>,
    /// The highest `op-N` and `in-N` the thread has had: the host's new ids go past them,
    /// so they never collide with a run or an input the thread no longer remembers.
    pub(super) max_op: u64,
    pub(super) max_input: u64,
    /// The open waits of the thread and the turn they park (its waits record, as the log
    /// keeps it), and the bytes of that record.
    pub(super) parked: Option<Parked>,
    parked_bytes: usize,
    caps: Caps,
}

impl Thread {
    pub(super) fn new(thread_id: &str, owner: Option<String>, caps: Caps) -> Thread {
        Thread {
            thread_id: thread_id.to_owned(),
            owner,
            running: None,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            receipts: Window::default(),
            transcript: Messages::default(),
            history: Messages::default(),
            pending: HashMap::new(),
            streaming: HashMap::new(),
            parents: Window::default(),
            open_calls: HashMap::new(),
            max_op: 0,
            max_input: 0,
            parked: None,
            parked_bytes: 0,
            caps,
        }
    }

    /// Whether a turn runs or inputs wait: the thread stays in memory.
    pub(super) fn is_busy(&self) -> bool {
        self.running.is_some() || !self.waiting.is_empty()
    }

    /// Whether a new message input waits for its turn: a turn runs, inputs wait, or a turn
    /// is parked on a wait for a person. (A parked thread with nothing else going on may
    /// leave memory: its waits record is in the log.)
    pub(super) fn blocks_inputs(&self) -> bool {
        self.is_busy() || self.parked.as_ref().is_some_and(Parked::blocks)
    }

    /// Keeps the waits record (or none), whose JSON is `bytes` long.
    pub(super) fn set_parked(&mut self, parked: Option<Parked>, bytes: usize) {
        self.parked_bytes = if parked.is_some() { bytes } else { 0 };
        self.parked = parked;
    }

    /// The bytes its state holds (an estimate).
    pub(super) fn bytes(&self) -> usize {
        self.transcript.bytes
            + self.history.bytes
            + self.receipts.bytes
            + self.parents.bytes
            + self.waiting_bytes
            + self.parked_bytes
            + self.pending.values().map(String::len).sum::<usize>()
            + self.streaming.values().map(String::len).sum::<usize>()
    }

    /// The inputs that wait behind the running turn.
    pub(super) fn waiting(&self) -> &VecDeque<Waiting> {
        &self.waiting
    }

    /// An input waits.
    pub(super) fn push_waiting(&mut self, w: Waiting) {
        self.waiting_bytes += w.bytes;
        self.waiting.push_back(w);
    }

    /// An input stops waiting (it runs, or was cancelled).
    pub(super) fn take_waiting(&mut self, i: usize) -> Option<Waiting> {
        let w = self.waiting.remove(i)?;
        self.waiting_bytes -= w.bytes;
        Some(w)
    }

    /// A waiting input, to change its delivery.
    pub(super) fn waiting_mut(&mut self, i: usize) -> Option<&mut Waiting> {
        self.waiting.get_mut(i)
    }

    /// The receipt of an idempotent input, when the thread still keeps it.
    pub(super) fn receipt(&self, input_id: &str) -> Option<&Receipt> {
        self.receipts.map.get(input_id)
    }

    /// The saved messages (`GET transcript`), oldest first.
    pub(super) fn transcript(&self) -> Vec<agui::AguiMessage> {
        self.transcript.iter().cloned().collect()
    }

    /// The conversation a turn gets, oldest first.
    pub(super) fn history(&self) -> Vec<Message> {
        self.history.iter().cloned().collect()
    }

    /// "The next turn starts a fresh model context."
    pub(super) fn clear_history(&mut self) {
        self.history.clear();
    }

    /// The run tree.
    pub(super) fn parents(&self) -> HashMap<String, Option<String>> {
        self.parents.map.clone()
    }
}

impl<L: EventLog> Host<L> {
    /// A new thread, owned by the user whose input made it (kept in the log, so that a
    /// durable host keeps it over a restart). A socket that subscribed to the thread key
    /// before, as another user, "cannot read the thread": 4403.
    pub(super) fn make_thread(
        &mut self,
        key: &str,
        thread_id: &str,
        user: Option<&str>,
    ) -> Result<(), LogError> {
        if let Some(u) = user {
            self.log.set_owner(key, u)?;
        }
        let t = Thread::new(thread_id, user.map(str::to_owned), Caps::of(&self.cfg));
        let refused: Vec<ConnId> = self
            .watchers
            .get(key)
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
        self.insert_thread(key, t, user);
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
        self.host_status(key, "idle");
        Ok(())
    }
}

/// Rebuilds a thread from the records the log has (after a restart, or when an idle
/// thread that left memory is used again): its transcript and history (their newest
/// messages, within their bytes), the run tree and the receipts of idempotent inputs, and
/// the highest host-made ids it has. What a restart cut off is closed in the log (a thread
/// that left memory idle has nothing open).
pub(super) fn restore<L: EventLog>(
    log: &mut L,
    key: &str,
    thread_id: Option<&str>,
    caps: Caps,
) -> Thread {
    let mut t = Thread::new(thread_id.unwrap_or(key), log.owner(key), caps);
    let mut named = thread_id.is_some();
    // Runs that started and never ended: the host stopped during them.
    let mut open: Vec<(String, Option<String>)> = Vec::new();
    // Inputs accepted and neither applied nor settled: they waited behind a turn.
    let mut unapplied: Vec<String> = Vec::new();
    let mut queued: HashSet<String> = HashSet::new();
    let mut waits = LogWaits::default();
    let (first, head) = (log.first_seq(key), log.head_seq(key));
    for seq in first..=head {
        let Ok(Some(rec)) = log.get(key, seq) else {
            continue;
        };
        if !named {
            // The id its clients use, as its records name it.
            if let Some(id) = rec.thread_id() {
                t.thread_id = id;
            }
            named = true;
        }
        t.max_op = t.max_op.max(id_number(&rec.operation_id, "op-"));
        let Ok(ev) = rec.event() else { continue };
        match &ev {
            AguiEvent::RunStarted(r) => open.push((r.run_id.clone(), None)),
            AguiEvent::RunFinished(_) | AguiEvent::RunError(_) => {
                open.retain(|(op, _)| *op != *rec.operation_id)
            }
            AguiEvent::Custom(c) => match HarnessEvent::from_custom(&c.name, &c.value) {
                Ok(h @ (HarnessEvent::WaitOpened(_) | HarnessEvent::WaitSettled(_))) => {
                    waits.observe(&h);
                }
                Ok(HarnessEvent::InputAccepted(a)) => {
                    // Accepted again (sent again after it never ran): what it was
                    // the first time no longer counts.
                    queued.remove(&a.input_id);
                    let idempotent =
                        matches!(a.op.as_str(), "prompt" | "command" | "agent" | "append");
                    if idempotent {
                        t.remember_receipt(Receipt {
                            input_id: a.input_id.clone(),
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        });
                    }
                    if a.op != "append" {
                        unapplied.push(a.input_id);
                    }
                }
                Ok(HarnessEvent::InputQueued(q)) => {
                    if let Some(r) = t.receipts.map.get_mut(&q.input_id) {
                        r.status = ReceiptStatus::Queued;
                    }
                    queued.insert(q.input_id);
                }
                Ok(HarnessEvent::InputApplied(a)) => {
                    if let Some(o) = open.iter_mut().find(|(op, _)| *op == a.operation_id) {
                        o.1 = Some(a.input_id.clone());
                    }
                    if let Some(r) = t.receipts.map.get_mut(&a.input_id) {
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
    let unfinished: Vec<String> = open.iter().map(|(op, _)| op.clone()).collect();
    let mut closing: Vec<(String, AguiEvent)> = Vec::new();
    // A text message the stopped run left open ends first, as a cancelled turn's does
    // ("Before it, a cancelled turn ends its open text message").
    let mut open_messages: Vec<String> = t.streaming.keys().cloned().collect();
    open_messages.sort();
    if let Some((op, _)) = open.first() {
        for m in open_messages {
            closing.push((
                op.clone(),
                AguiEvent::TextMessageEnd(agui::TextMessageEnd {
                    message_id: m,
                    ..agui::TextMessageEnd::default()
                }),
            ));
        }
    }
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
        t.receipts.remove(&input_id);
        let ev = HarnessEvent::InputSettled(catalog::InputSettled {
            input_id,
            outcome: InputOutcome::Interrupted,
            ..catalog::InputSettled::default()
        });
        closing.push(("session".to_owned(), ev.to_event()));
    }
    // The waits record, as the log says it stands (see `wait`).
    for ev in wait::restore_waits(log, key, waits, &unfinished, &mut t) {
        closing.push(("session".to_owned(), ev));
    }
    for (op, ev) in closing {
        if log.append_as(key, &t.thread_id, &op, &ev).is_ok() {
            t.observe(&ev);
        }
    }
    t
}

impl Thread {
    /// Keeps the receipt of an idempotent input; past the number or the bytes the thread
    /// keeps, the oldest is forgotten.
    pub(super) fn remember_receipt(&mut self, r: Receipt) {
        let (max, max_bytes) = (self.caps.receipts, self.caps.receipt_bytes);
        self.receipts.insert(r.input_id.clone(), r, max, max_bytes);
    }

    /// Whether an input id names an input of this thread the host still knows.
    pub(super) fn knows_input(&self, id: &str) -> bool {
        self.receipts.map.contains_key(id)
            || self.pending.contains_key(id)
            || self.waiting.iter().any(|w| w.input_id == id)
            || self.running.as_ref().is_some_and(|r| r.input_id == id)
    }

    /// Whether a run id is taken in this thread.
    pub(super) fn knows_run(&self, id: &str) -> bool {
        self.parents.map.contains_key(id)
            || self.running.as_ref().is_some_and(|r| r.operation_id == id)
    }

    /// Keeps the transcript, the history and the run tree up to date with an event of the
    /// thread.
    pub(super) fn observe(&mut self, ev: &AguiEvent) {
        let caps = self.caps;
        match ev {
            AguiEvent::RunStarted(r) => {
                self.max_op = self.max_op.max(id_number(&r.run_id, "op-"));
                self.parents.insert(
                    r.run_id.clone(),
                    r.parent_run_id.clone(),
                    caps.receipts,
                    caps.receipt_bytes,
                );
            }
            AguiEvent::TextMessageStart(s) => {
                self.streaming.insert(s.message_id.clone(), String::new());
            }
            AguiEvent::TextMessageContent(c) => {
                if let Some(t) = self.streaming.get_mut(&c.message_id) {
                    // A message longer than the transcript keeps is kept cut.
                    if t.len() + c.delta.len() <= caps.transcript_bytes {
                        t.push_str(&c.delta);
                    }
                }
            }
            AguiEvent::TextMessageEnd(e) => {
                if let Some(text) = self.streaming.remove(&e.message_id) {
                    self.history
                        .push(Message::assistant(text.clone()), caps.history_bytes);
                    self.transcript.push(
                        agui::AguiMessage::assistant(e.message_id.clone(), text),
                        caps.transcript_bytes,
                    );
                }
            }
            AguiEvent::ToolCallStart(s) => {
                // As AG-UI's client applies it: the call goes on the assistant message
                // `parentMessageId` when there is one, else on a new assistant message with
                // the id `parentMessageId` (or `toolCallId`, with no parent or when that id
                // is a message of another role).
                if self.open_calls.contains_key(&s.tool_call_id) {
                    return;
                }
                let call = agui::AguiToolCall {
                    id: s.tool_call_id.clone(),
                    function: agui::FunctionCall {
                        name: s.tool_call_name.clone(),
                        arguments: String::new(),
                        ..agui::FunctionCall::default()
                    },
                    ..agui::AguiToolCall::default()
                };
                let size = json_len(&call);
                let parent = s.parent_message_id.as_deref();
                let found = parent.and_then(|p| {
                    let i = self.transcript.items.iter().rposition(|e| e.1.id() == p)?;
                    Some(i + self.transcript.dropped)
                });
                let onto = found.and_then(|at| match self.transcript.get_mut(at) {
                    Some(agui::AguiMessage::Assistant(m)) => {
                        let calls = m.tool_calls.get_or_insert_with(Vec::new);
                        calls.push(call.clone());
                        Some((at, calls.len() - 1))
                    }
                    _ => None,
                });
                let place = match onto {
                    Some((at, j)) => {
                        self.transcript.grew(at, size, caps.transcript_bytes);
                        (at, j)
                    }
                    None => {
                        let id = match (found, parent) {
                            (None, Some(p)) => p,
                            _ => &s.tool_call_id,
                        };
                        self.transcript.push(
                            agui::AguiMessage::Assistant(agui::AssistantMessage {
                                id: id.to_owned(),
                                tool_calls: Some(vec![call]),
                                ..agui::AssistantMessage::default()
                            }),
                            caps.transcript_bytes,
                        );
                        let last = self.transcript.dropped + self.transcript.items.len();
                        (last - 1, 0)
                    }
                };
                self.open_calls.insert(s.tool_call_id.clone(), place);
            }
            AguiEvent::ToolCallArgs(a) => {
                if let Some(&(at, j)) = self.open_calls.get(&a.tool_call_id) {
                    if let Some(agui::AguiMessage::Assistant(m)) = self.transcript.get_mut(at) {
                        if let Some(c) = m.tool_calls.as_mut().and_then(|c| c.get_mut(j)) {
                            c.function.arguments.push_str(&a.delta);
                            self.transcript
                                .grew(at, a.delta.len(), caps.transcript_bytes);
                        }
                    }
                }
            }
            AguiEvent::ToolCallEnd(e) => {
                self.open_calls.remove(&e.tool_call_id);
            }
            AguiEvent::ToolCallResult(r) => {
                self.transcript.push(
                    agui::AguiMessage::Tool(agui::ToolMessage {
                        id: r.message_id.clone(),
                        content: r.content.clone(),
                        tool_call_id: r.tool_call_id.clone(),
                        ..agui::ToolMessage::default()
                    }),
                    caps.transcript_bytes,
                );
            }
            AguiEvent::Custom(c) if c.name == "harness.input.accepted" => {
                if let Ok(a) = c.value.parse::<catalog::InputAccepted>() {
                    self.max_input = self.max_input.max(id_number(&a.input_id, "in-"));
                    // An input with no message (a `resolve`, an `answer`) adds none.
                    match a.message.map(|m| m.as_string().unwrap_or_default()) {
                        Some(text) if a.op == "append" => self.user_message(&a.input_id, text),
                        Some(text) => {
                            self.pending.insert(a.input_id, text);
                        }
                        None => {}
                    }
                }
            }
            AguiEvent::Custom(c) if c.name == "harness.input.applied" => {
                if let Ok(a) = c.value.parse::<catalog::InputApplied>() {
                    if let Some(text) = self.pending.remove(&a.input_id) {
                        self.user_message(&a.input_id, text);
                    }
                }
            }
            AguiEvent::Custom(c) if c.name == "harness.input.settled" => {
                if let Ok(a) = c.value.parse::<catalog::InputSettled>() {
                    self.pending.remove(&a.input_id);
                }
            }
            _ => {}
        }
    }

    fn user_message(&mut self, input_id: &str, text: String) {
        let caps = self.caps;
        self.history
            .push(Message::user(text.clone()), caps.history_bytes);
        self.transcript.push(
            agui::AguiMessage::User(agui::UserMessage {
                id: format!("{input_id}-msg"),
                content: Content::Text(text),
                ..agui::UserMessage::default()
            }),
            caps.transcript_bytes,
        );
    }
}

/// What closes a run the host was running when it stopped: `RUN_ERROR` with code
/// `interrupted`, `harness.operation.finished` with status `interrupted`, and
/// `harness.input.settled` with outcome `interrupted`.
fn interrupted(op: &str, input_id: Option<String>) -> Vec<AguiEvent> {
    let mut v = vec![
        AguiEvent::RunError(RunError {
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
