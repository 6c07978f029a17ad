//! Inputs: `POST control`, receipts, `inputId` idempotency, and the inputs that wait for a turn.

use std::time::Instant;

use harness_core::message::{Message, Role};

use super::thread::Thread;
use super::wait::{Entry, receipt_of};
use super::{AccessPolicy, Host, HostEvent, Refusal, may_read};
use crate::Json;
use crate::catalog::{self, Delivery, HarnessEvent, InputOutcome};
use crate::frame::{ControlRequest, Input, Receipt, ReceiptStatus};
use crate::http::HttpAnswer;
use crate::log::EventLog;

/// An input that waits behind the running turn.
#[derive(Clone, Debug)]
pub(super) struct Waiting {
    pub(super) input_id: String,
    pub(super) delivery: Delivery,
    pub(super) input: Input,
    pub(super) traceparent: Option<String>,
    /// The bytes of its message (see [`input_bytes`]).
    pub(super) bytes: usize,
}

impl<L: EventLog> Host<L> {
    /// `POST control`: the body `{ threadId, input }`, the user `getUser` returned, the
    /// request id (see [`http::request_id`](crate::http::request_id)) and the `traceparent`
    /// header. The answer: `200` receipt, `400 {error}`, `401`, `403 {error:'forbidden'}`.
    /// Past a limit of the host the receipt is `rejected` with its reason ("A `rejected`
    /// receipt is still `200`. Its `reason` says why"): `too_large`
    /// ([`max_input_bytes`](super::HostConfig::max_input_bytes)), `thread_limit`
    /// ([`max_threads`](super::HostConfig::max_threads),
    /// [`max_threads_per_user`](super::HostConfig::max_threads_per_user)), `queue_full`
    /// ([`max_waiting_inputs`](super::HostConfig::max_waiting_inputs),
    /// [`max_waiting_bytes`](super::HostConfig::max_waiting_bytes)); on a log several hosts
    /// share, `not_owner` while another host holds the thread's lease (not kept, nothing
    /// written: [`control_routed`](Self::control_routed) forwards the input to that host
    /// instead).
    pub fn control(
        &mut self,
        now: Instant,
        user: Option<&str>,
        body: &[u8],
        request_id: &str,
        traceparent: Option<&str>,
    ) -> HttpAnswer {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return HttpAnswer::error(401, "unauthorized", request_id);
        }
        if let Some(e) = lone_surrogate(body) {
            return HttpAnswer::error(400, &e, request_id);
        }
        let req: ControlRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            // "`400`: `{ error }`. The input has a bad shape, or `threadId` is missing."
            Err(e) => return HttpAnswer::error(400, &e.to_string(), request_id),
        };
        if let Some(e) = self.thread_id_error(&req.thread_id) {
            return HttpAnswer::error(400, &e, request_id);
        }
        if let Some(e) = req.input.shape_error() {
            return HttpAnswer::error(400, &e, request_id);
        }
        let tp = if req.input.is_message() {
            crate::http::traceparent(traceparent)
        } else {
            None
        };
        let key = self.thread_key(user, &req.thread_id);
        match self.apply_input(now, &key, &req.thread_id, user, req.input, tp) {
            Ok(r) => HttpAnswer::ok(serde_json::to_string(&r).unwrap_or_default(), request_id),
            Err(Refusal::Forbidden) => HttpAnswer::error(403, "forbidden", request_id),
            Err(Refusal::Internal(m)) => {
                // The log's own words (a database's error…) are the operator's, not the
                // client's.
                tracing::warn!(error = %m, "an input failed");
                HttpAnswer::error(500, "internal", request_id)
            }
        }
    }

    /// Applies one input to the thread `thread_id` of `user` and returns its receipt (the
    /// receipts and refusals of [`control`](Self::control)).
    pub fn input(
        &mut self,
        now: Instant,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<&str>,
    ) -> Result<Receipt, HttpAnswer> {
        self.clock(now);
        if let Some(e) = self.thread_id_error(thread_id) {
            return Err(HttpAnswer::error(400, &e, ""));
        }
        if let Some(e) = input.shape_error().or_else(|| {
            serde_json::to_vec(&input)
                .ok()
                .and_then(|j| lone_surrogate(&j))
        }) {
            return Err(HttpAnswer::error(400, &e, ""));
        }
        let tp = if input.is_message() {
            crate::http::traceparent(traceparent)
        } else {
            None
        };
        let key = self.thread_key(user, thread_id);
        self.apply_input(now, &key, thread_id, user, input, tp)
            .map_err(|r| match r {
                Refusal::Forbidden => HttpAnswer::error(403, "forbidden", ""),
                Refusal::Internal(m) => HttpAnswer::error(500, &m, ""),
            })
    }

    /// Applies an input on this host when it owns the thread (or takes it: see
    /// [`lease`](super::lease)); a thread that another host owns gets a `rejected` receipt
    /// with reason `not_owner`, kept nowhere (a transient refusal: the same input may be
    /// sent again, to that host or later).
    pub(super) fn apply_input(
        &mut self,
        now: Instant,
        key: &str,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<String>,
    ) -> Result<Receipt, Refusal> {
        let creates = creates_thread(&input);
        let known = self.threads.contains_key(key) || self.log.contains(key);
        // Only an input that writes takes the lease (a refusal that makes no thread
        // writes nothing).
        let writes = known
            || (creates
                && input_bytes(&input) <= self.cfg.max_input_bytes
                && !self.at_thread_limit(user));
        if writes {
            match self.claim(now, key, thread_id) {
                Ok(super::lease::Claim::Mine) => {}
                Ok(super::lease::Claim::Elsewhere(holder)) => {
                    tracing::debug!(
                        threadId = thread_id,
                        holder,
                        "input for a thread another host owns"
                    );
                    // `control_routed`: the input goes to the owner, which answers it.
                    if let Some(mut f) = self.forwarding.take() {
                        f.key = key.to_owned();
                        if f.body.is_empty() {
                            // A socket input: the owner runs it as a `POST control`.
                            f.body = super::forward::control_body(thread_id, &input);
                        }
                        match self.log.forward(&holder, &f) {
                            Ok(Some(id)) => self.forwarded = Some((id, f)),
                            Ok(None) => {}
                            Err(e) => return Err(Refusal::Internal(e.to_string())),
                        }
                    }
                    let id = self.input_id_of(key, &input);
                    return Ok(rejected(&id, "not_owner"));
                }
                Err(e) => return Err(Refusal::Internal(e.to_string())),
            }
        }
        let r = self.apply_owned(now, key, thread_id, user, input, traceparent);
        if writes {
            self.release_if_idle(key);
        }
        r
    }

    fn apply_owned(
        &mut self,
        now: Instant,
        key: &str,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<String>,
    ) -> Result<Receipt, Refusal> {
        let exists = self.ensure(key, Some(thread_id));
        if let Some(t) = self.threads.get(key) {
            if !may_read(&self.cfg.access, t, user) {
                return Err(Refusal::Forbidden);
            }
        }
        // Idempotency: "A `prompt`, `command`, `agent`, or `append` input with the same
        // `inputId` runs once. The `inputId` of its receipt is the id that you sent."
        if input.is_idempotent() {
            if let Some(id) = input.input_id() {
                if let Some(r) = self.threads.get(key).and_then(|t| t.receipt(id)) {
                    return Ok(r.clone());
                }
            }
        }
        let idempotent = input.is_idempotent();
        let input_id = self.input_id_of(key, &input);
        let creates = creates_thread(&input);
        // Past a limit: "A `rejected` receipt is still `200`. Its `reason` says why."
        let bytes = input_bytes(&input);
        if bytes > self.cfg.max_input_bytes {
            let r = rejected(&input_id, "too_large");
            return if exists {
                self.finish_input(now, key, r, false)
            } else {
                Ok(r)
            };
        }
        if !exists {
            if !creates {
                return Ok(rejected(&input_id, reason_for_missing(&input)));
            }
            if self.at_thread_limit(user) {
                // No thread is made, so nothing is logged; a transient refusal, not kept.
                return Ok(rejected(&input_id, "thread_limit"));
            }
            // "The first prompt also makes the thread."
            self.make_thread(key, thread_id, user)
                .map_err(|e| Refusal::Internal(e.to_string()))?;
        }
        let receipt = match input {
            Input::Prompt(_) | Input::FollowUp(_) | Input::Steer(_) | Input::Agent(_) => {
                if let Input::Agent(a) = &input {
                    if !self.cfg.agents.contains(&a.agent) {
                        let r = rejected(&input_id, "unknown_agent");
                        return self.finish_input(now, key, r, idempotent);
                    }
                }
                // An input to an empty queue always fits.
                let full = self.threads.get(key).is_some_and(|t| {
                    t.blocks_inputs()
                        && (t.waiting().len() >= self.cfg.max_waiting_inputs.max(1)
                            || (!t.waiting().is_empty()
                                && t.waiting_bytes + bytes > self.cfg.max_waiting_bytes))
                });
                if full {
                    // No room to wait: a transient refusal, so its receipt is not kept for
                    // idempotency (the same inputId may be sent again later).
                    let r = rejected(&input_id, "queue_full");
                    return self.finish_input(now, key, r, false);
                }
                let message = input_message(&input);
                self.log_harness(
                    now,
                    key,
                    "session",
                    HarnessEvent::InputAccepted(catalog::InputAccepted {
                        input_id: input_id.clone(),
                        op: input.op().to_owned(),
                        message: Some(message_json(&message)),
                        // "It stores the value on the `harness.input` record of the log."
                        traceparent: traceparent.clone(),
                        ..catalog::InputAccepted::default()
                    }),
                )?;
                let delivery = if matches!(input, Input::Steer(_)) {
                    Delivery::Steer
                } else {
                    Delivery::Queue
                };
                // Behind a running turn, the inputs before it, or a turn that waits for a
                // person.
                let busy = self.threads.get(key).is_some_and(Thread::blocks_inputs);
                if busy {
                    if let Some(t) = self.threads.get_mut(key) {
                        t.push_waiting(Waiting {
                            input_id: input_id.clone(),
                            delivery: delivery.clone(),
                            input,
                            traceparent,
                            bytes,
                        });
                    }
                    // "The owner of the log stored the input, and it waits behind the running turn"
                    self.log_harness(
                        now,
                        key,
                        "session",
                        HarnessEvent::InputQueued(catalog::InputQueued {
                            input_id: input_id.clone(),
                            delivery,
                            ..catalog::InputQueued::default()
                        }),
                    )?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Queued,
                        ..Receipt::default()
                    }
                } else {
                    let op = self.start_turn(now, key, &input_id, &input, traceparent)?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: Some(op),
                        ..Receipt::default()
                    }
                }
            }
            Input::Append(_) => {
                let message = input_message(&input);
                self.log_harness(
                    now,
                    key,
                    "session",
                    HarnessEvent::InputAccepted(catalog::InputAccepted {
                        input_id: input_id.clone(),
                        op: "append".into(),
                        message: Some(message_json(&message)),
                        ..catalog::InputAccepted::default()
                    }),
                )?;
                Receipt {
                    input_id,
                    status: ReceiptStatus::Accepted,
                    ..Receipt::default()
                }
            }
            Input::Cancel(c) => {
                let running = self
                    .threads
                    .get(key)
                    .and_then(|t| t.running.as_ref())
                    .map(|r| r.operation_id.clone());
                if running.as_deref() == Some(c.operation_id.as_str()) {
                    self.events.push_back(HostEvent::CancelTurn {
                        thread_id: key.to_owned(),
                        operation_id: c.operation_id.clone(),
                    });
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: Some(c.operation_id),
                        ..Receipt::default()
                    }
                } else if self.cancel_parked(now, key, &c.operation_id)? {
                    // The run waits for a person: its waits settle `cancelled`.
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: Some(c.operation_id),
                        ..Receipt::default()
                    }
                } else {
                    rejected(&input_id, "not_running")
                }
            }
            Input::CancelInput(_) | Input::SetDelivery(_) => {
                let pos = self
                    .threads
                    .get(key)
                    .and_then(|t| t.waiting().iter().position(|w| w.input_id == input_id));
                match (pos, input) {
                    (Some(i), Input::CancelInput(_)) => {
                        if let Some(t) = self.threads.get_mut(key) {
                            t.take_waiting(i);
                        }
                        self.settle_input(now, key, &input_id, InputOutcome::Aborted)?;
                        Receipt {
                            input_id,
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        }
                    }
                    (Some(i), Input::SetDelivery(s)) => {
                        if let Some(w) = self.threads.get_mut(key).and_then(|t| t.waiting_mut(i)) {
                            w.delivery = s.delivery.clone();
                        }
                        self.log_harness(
                            now,
                            key,
                            "session",
                            HarnessEvent::InputDelivery(catalog::InputDelivery {
                                input_id: input_id.clone(),
                                delivery: s.delivery,
                                ..catalog::InputDelivery::default()
                            }),
                        )?;
                        Receipt {
                            input_id,
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        }
                    }
                    _ => rejected(&input_id, "not_waiting"),
                }
            }
            Input::Continue(_) => {
                let idle = self
                    .threads
                    .get(key)
                    .map(|t| {
                        t.running.is_none()
                            && !t.waiting().is_empty()
                            && !t.parked.as_ref().is_some_and(|p| p.blocks())
                    })
                    .unwrap_or(false);
                if idle {
                    let op = self.start_next(now, key)?;
                    Receipt {
                        input_id,
                        status: ReceiptStatus::Accepted,
                        operation_id: op,
                        ..Receipt::default()
                    }
                } else {
                    rejected(&input_id, "nothing_to_continue")
                }
            }
            Input::Reset(r) => {
                if let Some(t) = self.threads.get_mut(key) {
                    t.clear_history();
                }
                self.log_harness(
                    now,
                    key,
                    "session",
                    HarnessEvent::Reset(catalog::Reset {
                        input_id: input_id.clone(),
                        note: r.note,
                        ..catalog::Reset::default()
                    }),
                )?;
                Receipt {
                    input_id,
                    status: ReceiptStatus::Accepted,
                    ..Receipt::default()
                }
            }
            // "Answer it with the answer input"; `resolve` answers interrupts. A decision
            // for no open wait changes nothing: `not_waiting`.
            Input::Answer(a) => {
                let entry = Entry::answer(&a.question_id, a.value.as_ref());
                let r = self.resolve_waits(now, key, &input_id, "answer", vec![entry], None)?;
                receipt_of(input_id, r)
            }
            Input::Resolve(r) => {
                let entries: Vec<crate::agui::ResumeEntry> =
                    r.resume.iter().filter_map(|j| j.parse().ok()).collect();
                let r = self.resolve_waits(
                    now,
                    key,
                    &input_id,
                    "resolve",
                    Entry::resolve(&entries),
                    None,
                )?;
                receipt_of(input_id, r)
            }
            _ => rejected(&input_id, "not_exposed"),
        };
        self.finish_input(now, key, receipt, idempotent)
    }

    fn finish_input(
        &mut self,
        now: Instant,
        key: &str,
        r: Receipt,
        idempotent: bool,
    ) -> Result<Receipt, Refusal> {
        if r.status == ReceiptStatus::Rejected {
            self.log_harness(
                now,
                key,
                "session",
                HarnessEvent::InputRejected(catalog::InputRejected {
                    input_id: r.input_id.clone(),
                    reason: r.reason.clone().unwrap_or_default(),
                    ..catalog::InputRejected::default()
                }),
            )?;
        }
        if idempotent {
            if let Some(t) = self.threads.get_mut(key) {
                t.remember_receipt(r.clone());
            }
        }
        Ok(r)
    }

    pub(super) fn log_harness(
        &mut self,
        now: Instant,
        thread: &str,
        op: &str,
        h: HarnessEvent,
    ) -> Result<(), Refusal> {
        self.emit(now, thread, op, h.to_event())
            .map(|_| ())
            .map_err(|e| Refusal::Internal(e.to_string()))
    }

    /// `harness.input.settled` of an input that ran no turn.
    pub(super) fn settle_input(
        &mut self,
        now: Instant,
        key: &str,
        input_id: &str,
        outcome: InputOutcome,
    ) -> Result<(), Refusal> {
        let settled = HarnessEvent::InputSettled(catalog::InputSettled {
            input_id: input_id.to_owned(),
            outcome,
            ..catalog::InputSettled::default()
        });
        self.log_harness(now, key, "session", settled)
    }

    /// The id of `input`: the one it carries, else a new host-made one.
    fn input_id_of(&mut self, key: &str, input: &Input) -> String {
        match input.input_id() {
            Some(id) => id.to_owned(),
            None => self.new_input_id(key),
        }
    }

    /// A host-made input id (`in-N`) that no input of the thread has had: past the highest
    /// the thread has had, and not one it knows.
    pub(super) fn new_input_id(&mut self, key: &str) -> String {
        if let Some(t) = self.threads.get(key) {
            self.next_input = self.next_input.max(t.max_input);
        }
        loop {
            self.next_input = self.next_input.wrapping_add(1);
            let id = format!("in-{}", self.next_input);
            if !self.threads.get(key).is_some_and(|t| t.knows_input(&id)) {
                return id;
            }
        }
    }
}

/// Why a JSON text is not Unicode text, if it is not: a `\u` escape of a lone surrogate
/// (`"\ud800 lone"`: a high surrogate not followed by the escape of a low one, or a low one
/// alone). A JSON parser may take it (serde_json's raw values do) and then read the
/// string as nothing, so a prompt carrying one would run as an empty message; the host
/// refuses the input instead, the same on every transport: `400` on `POST control` ("The
/// input has a bad shape"), `invalid_frame` on the socket and the stdio worker ("a bad
/// `input`"). (`POST run` reads its messages as strings, which refuse it already.)
pub(super) fn lone_surrogate(json: &[u8]) -> Option<String> {
    let hex = |i: usize| -> Option<u32> {
        let h = json.get(i..i + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let high = |c: u32| (0xD800..=0xDBFF).contains(&c);
    let low = |c: u32| (0xDC00..=0xDFFF).contains(&c);
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        // Outside an escape, or an escape of one character (`\"`, `\\`, …).
        if b != b'\\' || json.get(i + 1) != Some(&b'u') {
            i += if b == b'\\' { 2 } else { 1 };
            continue;
        }
        // `\uXXXX`; one that does not read is the parser's to refuse.
        let code = hex(i + 2)?;
        i += 6;
        let paired =
            high(code) && json.get(i..i + 2) == Some(b"\\u") && hex(i + 2).is_some_and(low);
        if paired {
            i += 6;
        } else if high(code) || low(code) {
            return Some(format!(
                "the input holds a lone surrogate (\\u{code:04x}), which is not Unicode text"
            ));
        }
    }
    None
}

fn rejected(input_id: &str, reason: &str) -> Receipt {
    Receipt {
        input_id: input_id.to_owned(),
        status: ReceiptStatus::Rejected,
        reason: Some(reason.to_owned()),
        ..Receipt::default()
    }
}

fn reason_for_missing(input: &Input) -> &'static str {
    match input {
        Input::Cancel(_) => "not_running",
        Input::CancelInput(_) | Input::SetDelivery(_) | Input::Answer(_) | Input::Resolve(_) => {
            "not_waiting"
        }
        Input::Continue(_) => "nothing_to_continue",
        _ => "not_exposed",
    }
}

/// The bytes an input carries: the JSON of its message (or of an `agent` input's `input`, an
/// `answer`'s `value`, a `resolve`'s `resume`), what
/// [`max_input_bytes`](super::HostConfig::max_input_bytes) bounds.
pub(super) fn input_bytes(input: &Input) -> usize {
    match input {
        Input::Prompt(p) => p.message.get().len(),
        Input::Steer(p) => p.message.get().len(),
        Input::FollowUp(p) => p.message.get().len(),
        Input::Append(p) => p.message.get().len(),
        Input::AgentMessage(p) => p.message.get().len(),
        Input::Agent(a) => a.input.as_ref().map_or(0, |j| j.get().len()),
        // A decision is kept with the thread until the turn runs again: its answer counts.
        Input::Answer(a) => a.value.as_ref().map_or(0, |j| j.get().len()),
        Input::Resolve(r) => r.resume.iter().map(|j| j.get().len()).sum(),
        _ => 0,
    }
}

pub(super) fn input_message(input: &Input) -> Message {
    let text = input.message_text().unwrap_or_else(|| match input {
        Input::Agent(a) => a
            .input
            .as_ref()
            .map(|j| match j.as_string() {
                Some(s) => s,
                None => j.get().to_owned(),
            })
            .unwrap_or_default(),
        _ => String::new(),
    });
    Message::with_text(Role::User, text)
}

pub(super) fn message_json(m: &Message) -> Json {
    Json::string(&m.text())
}

/// Whether `input` may create the thread it names (a message or an agent run; every other
/// input needs a thread that exists).
fn creates_thread(input: &Input) -> bool {
    matches!(
        input,
        Input::Prompt(_)
            | Input::FollowUp(_)
            | Input::Steer(_)
            | Input::Append(_)
            | Input::Agent(_)
    )
}
