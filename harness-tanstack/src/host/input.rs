//! Inputs: `POST control`, receipts, `inputId` idempotency, and the inputs that wait for a turn.

use std::time::Instant;

use harness_core::message::{Message as CoreMessage, Role};

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
}

impl<L: EventLog> Host<L> {
    /// `POST control`: the body `{ threadId, input }`, the user `getUser` returned, the
    /// request id (see [`http::request_id`](crate::http::request_id)) and the `traceparent`
    /// header. The answer: `200` receipt, `400 {error}`, `401`, `403 {error:'forbidden'}`.
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
        match self.apply_input(now, &req.thread_id, user, req.input, tp) {
            Ok(r) => HttpAnswer::ok(serde_json::to_string(&r).unwrap_or_default(), request_id),
            Err(Refusal::Forbidden) => HttpAnswer::error(403, "forbidden", request_id),
            Err(Refusal::Internal(m)) => HttpAnswer::error(500, &m, request_id),
        }
    }

    /// Applies one input to a thread and returns its receipt.
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
        self.apply_input(now, thread_id, user, input, tp)
            .map_err(|r| match r {
                Refusal::Forbidden => HttpAnswer::error(403, "forbidden", ""),
                Refusal::Internal(m) => HttpAnswer::error(500, &m, ""),
            })
    }

    pub(super) fn apply_input(
        &mut self,
        now: Instant,
        thread_id: &str,
        user: Option<&str>,
        input: Input,
        traceparent: Option<String>,
    ) -> Result<Receipt, Refusal> {
        if let Some(t) = self.threads.get(thread_id) {
            if !may_read(&self.cfg.access, t, user) {
                return Err(Refusal::Forbidden);
            }
        }
        // Idempotency: "A `prompt`, `command`, `agent`, or `append` input with the same
        // `inputId` runs once. The `inputId` of its receipt is the id that you sent."
        if input.is_idempotent() {
            if let Some(id) = input.input_id() {
                if let Some(r) = self.threads.get(thread_id).and_then(|t| t.receipts.get(id)) {
                    return Ok(r.clone());
                }
            }
        }
        let idempotent = input.is_idempotent();
        let input_id = match input.input_id() {
            Some(id) => id.to_owned(),
            None => self.new_input_id(thread_id),
        };
        let creates = matches!(
            input,
            Input::Prompt(_)
                | Input::FollowUp(_)
                | Input::Steer(_)
                | Input::Append(_)
                | Input::Agent(_)
        );
        if !self.threads.contains_key(thread_id) {
            if !creates {
                return Ok(rejected(&input_id, reason_for_missing(&input)));
            }
            // "The first prompt also makes the thread."
            self.make_thread(thread_id, user)
                .map_err(|e| Refusal::Internal(e.to_string()))?;
        }
        let receipt = match input {
            Input::Prompt(_) | Input::FollowUp(_) | Input::Steer(_) | Input::Agent(_) => {
                if let Input::Agent(a) = &input {
                    if !self.cfg.agents.contains(&a.agent) {
                        let r = rejected(&input_id, "unknown_agent");
                        return self.finish_input(now, thread_id, r, idempotent);
                    }
                }
                let full = self.threads.get(thread_id).is_some_and(|t| {
                    (t.running.is_some() || !t.waiting.is_empty())
                        && t.waiting.len() >= self.cfg.max_waiting_inputs.max(1)
                });
                if full {
                    // No room to wait: a transient refusal, so its receipt is not kept for
                    // idempotency (the same inputId may be sent again later).
                    let r = rejected(&input_id, "queue_full");
                    return self.finish_input(now, thread_id, r, false);
                }
                let message = input_message(&input);
                self.log_harness(
                    now,
                    thread_id,
                    "session",
                    HarnessEvent::InputAccepted(catalog::InputAccepted {
                        input_id: input_id.clone(),
                        op: input.op().to_owned(),
                        message: Some(message_json(&message)),
                        ..catalog::InputAccepted::default()
                    }),
                )?;
                let delivery = if matches!(input, Input::Steer(_)) {
                    Delivery::Steer
                } else {
                    Delivery::Queue
                };
                let busy = self
                    .threads
                    .get(thread_id)
                    .map(|t| t.running.is_some() || !t.waiting.is_empty())
                    .unwrap_or(false);
                if busy {
                    if let Some(t) = self.threads.get_mut(thread_id) {
                        t.waiting.push_back(Waiting {
                            input_id: input_id.clone(),
                            delivery: delivery.clone(),
                            input,
                            traceparent,
                        });
                    }
                    // "The owner of the log stored the input, and it waits behind the running turn"
                    self.log_harness(
                        now,
                        thread_id,
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
                    let op = self.start_turn(now, thread_id, &input_id, &input, traceparent)?;
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
                    thread_id,
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
                    .get(thread_id)
                    .and_then(|t| t.running.as_ref())
                    .map(|r| r.operation_id.clone());
                if running.as_deref() == Some(c.operation_id.as_str()) {
                    self.events.push_back(HostEvent::CancelTurn {
                        thread_id: thread_id.to_owned(),
                        operation_id: c.operation_id.clone(),
                    });
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
                    .get(thread_id)
                    .and_then(|t| t.waiting.iter().position(|w| w.input_id == input_id));
                match (pos, input) {
                    (Some(i), Input::CancelInput(_)) => {
                        if let Some(t) = self.threads.get_mut(thread_id) {
                            t.waiting.remove(i);
                        }
                        self.log_harness(
                            now,
                            thread_id,
                            "session",
                            HarnessEvent::InputSettled(catalog::InputSettled {
                                input_id: input_id.clone(),
                                outcome: InputOutcome::Aborted,
                                ..catalog::InputSettled::default()
                            }),
                        )?;
                        Receipt {
                            input_id,
                            status: ReceiptStatus::Accepted,
                            ..Receipt::default()
                        }
                    }
                    (Some(i), Input::SetDelivery(s)) => {
                        if let Some(w) = self
                            .threads
                            .get_mut(thread_id)
                            .and_then(|t| t.waiting.get_mut(i))
                        {
                            w.delivery = s.delivery.clone();
                        }
                        self.log_harness(
                            now,
                            thread_id,
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
                    .get(thread_id)
                    .map(|t| t.running.is_none() && !t.waiting.is_empty())
                    .unwrap_or(false);
                if idle {
                    let op = self.start_next(now, thread_id)?;
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
                if let Some(t) = self.threads.get_mut(thread_id) {
                    t.history.clear();
                }
                self.log_harness(
                    now,
                    thread_id,
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
            Input::Answer(_) | Input::Resolve(_) => rejected(&input_id, "not_waiting"),
            _ => rejected(&input_id, "not_exposed"),
        };
        self.finish_input(now, thread_id, receipt, idempotent)
    }

    fn finish_input(
        &mut self,
        now: Instant,
        thread_id: &str,
        r: Receipt,
        idempotent: bool,
    ) -> Result<Receipt, Refusal> {
        if r.status == ReceiptStatus::Rejected {
            self.log_harness(
                now,
                thread_id,
                "session",
                HarnessEvent::InputRejected(catalog::InputRejected {
                    input_id: r.input_id.clone(),
                    reason: r.reason.clone().unwrap_or_default(),
                    ..catalog::InputRejected::default()
                }),
            )?;
        }
        if idempotent {
            let max = self.cfg.max_receipts.max(1);
            if let Some(t) = self.threads.get_mut(thread_id) {
                t.remember_receipt(r.clone(), max);
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

    /// A host-made input id (`in-N`) that no input of the thread has.
    pub(super) fn new_input_id(&mut self, thread_id: &str) -> String {
        loop {
            self.next_input = self.next_input.wrapping_add(1);
            let id = format!("in-{}", self.next_input);
            if !self
                .threads
                .get(thread_id)
                .is_some_and(|t| t.knows_input(&id))
            {
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

pub(super) fn input_message(input: &Input) -> CoreMessage {
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
    CoreMessage::with_text(Role::User, text)
}

pub(super) fn message_json(m: &CoreMessage) -> Json {
    Json::string(&m.text())
}
