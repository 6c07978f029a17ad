//! The journaling [`EventSink`]: record-before-effect live, recorded effects served on replay
//! and recovery.
//!
//! One sink serves all three paths. It holds the execution's recorded effects (none for a
//! new execution) and a cursor into them. Each sink call first consumes the next recorded
//! effect, checking that the harness asked for exactly what was recorded (the model input
//! hash, I0, and the rebuilt event byte for byte, I5); past the recorded effects it goes live
//! (recovery) or reports divergence (replay).

use async_trait::async_trait;
use harness_core::event::{
    ApprovalRequest, EventBody, EventKind, ExecutionStart, Lifecycle, LifecycleKind, ModelCall,
};
use harness_core::message::{
    Mediation, Message, ModelRequest, ModelResponse, Part, ToolCall, ToolResult, ToolResultCode,
    Usage,
};
use harness_core::model::{Model, ModelError};
use harness_core::{EventSink, SinkError};
use sha2::{Digest, Sha256};

use crate::envelope::{Clock, envelope};
use crate::hash::hex;
use crate::input_hash::{matches_input_hash, model_input_hash};
use crate::journal::{Journal, JournalError};
use crate::observer::Observer;
use crate::record::{Fence, Head, Record, Seq};
use crate::tools::{ToolCallContext, ToolExecutor};

/// How the sink treats sink calls past the recorded effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A completed execution: everything must come from the journal; the provider and the
    /// executor are never called.
    Replay,
    /// A new or interrupted execution: recorded effects are served, then calls go live.
    Recover,
}

/// A 16-hex-digit id derived from a namespace and a position (execution and model call ids
/// are deterministic, so the same inputs write the same journal).
pub(crate) fn derive_id(kind: &str, scope: &str, seq: Seq) -> String {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(scope.as_bytes());
    h.update([0]);
    h.update(seq.to_be_bytes());
    hex(&h.finalize()[..8])
}

/// The id of a new execution: 16 hex digits of SHA-256 over the session, the position of its
/// start marker, the head it follows, and what it was invoked with (the marker and the
/// inputs). Deterministic, so the same journal and the same invocation write the same
/// records; and never shared by two different invocations of a session, even when a turn's
/// records were lost (a power loss under a lazy fsync policy) while the executor's durable
/// receipts, keyed by idempotency keys harnesses derive from this id, were not.
pub(crate) fn derive_execution_id(
    session: &str,
    head: &Head,
    marker: &ExecutionStart,
    inputs: &[Message],
) -> String {
    let mut h = Sha256::new();
    h.update(b"execution\0");
    h.update(session.as_bytes());
    h.update([0]);
    h.update(head.seq.wrapping_add(1).to_be_bytes());
    h.update(head.hash.map_or([0; 32], |c| c.0));
    // Serializing these types cannot fail; an error would only weaken the id, not break it.
    h.update(serde_json::to_vec(marker).unwrap_or_default());
    h.update([0]);
    h.update(serde_json::to_vec(inputs).unwrap_or_default());
    hex(&h.finalize()[..8])
}

/// Why the sink stopped taking calls.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    /// The harness did not do what the journal recorded (sticky).
    Diverged(String),
    /// The journal refused an append (fenced, conflict, i/o): nothing more can be recorded.
    Journal(JournalError),
    /// An approval-gated call parked the turn.
    Parked {
        tool_call_id: String,
        request_seq: Seq,
    },
}

/// Counters of one turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub provider_calls: usize,
    pub executor_calls: usize,
    pub served: usize,
    pub appended: usize,
}

/// What the sink needs from the host.
pub(crate) struct TurnCtx<'a> {
    pub journal: &'a dyn Journal,
    pub session: &'a str,
    pub execution_id: String,
    pub fence: Fence,
    pub clock: &'a dyn Clock,
    pub model: Option<&'a dyn Model>,
    pub executor: Option<&'a dyn ToolExecutor>,
    pub observer: Option<&'a dyn Observer>,
    /// The harness requires a memory snapshot (approval gating is refused for it).
    pub memory_snapshot: bool,
    /// Records before this seq were inherited from a fork parent.
    pub fork_seq: Seq,
}

pub(crate) struct JournalSink<'a> {
    ctx: TurnCtx<'a>,
    mode: Mode,
    /// The whole journal as read, and the indices of this execution's recorded effects.
    records: &'a [Record],
    effects: Vec<usize>,
    pos: usize,
    head: Head,
    pub stats: Stats,
    /// The text of every OUTPUT of the turn (served or live).
    pub output: String,
    pub failure: Option<Failure>,
    /// Scratch buffer for the I0 hash.
    scratch: String,
}

fn kind_name(r: &Record) -> &'static str {
    r.event.kind().as_str()
}

impl<'a> JournalSink<'a> {
    pub fn new(
        ctx: TurnCtx<'a>,
        mode: Mode,
        records: &'a [Record],
        effects: Vec<usize>,
        head: Head,
    ) -> Self {
        JournalSink {
            ctx,
            mode,
            records,
            effects,
            pos: 0,
            head,
            stats: Stats::default(),
            output: String::new(),
            failure: None,
            scratch: String::new(),
        }
    }

    /// Recorded effects not consumed yet.
    pub fn unconsumed(&self) -> usize {
        self.effects.len() - self.pos
    }

    pub fn head(&self) -> Head {
        self.head
    }

    /// Appends one event of this execution (or, with `session_scoped`, of the session).
    pub fn append_body(&mut self, body: EventBody, session_scoped: bool) -> Result<Seq, SinkError> {
        let id = if session_scoped {
            String::new()
        } else {
            self.ctx.execution_id.clone()
        };
        let ev = envelope(self.ctx.clock, id, body);
        let Some(seq) = self.head.next_seq() else {
            let e = JournalError::no_seq_left(self.ctx.session);
            return Err(self.fail(Failure::Journal(e)));
        };
        let rec = Record::seal(ev, seq, self.head.hash, self.ctx.fence)
            .map_err(|e| self.fail(Failure::Diverged(e.to_string())))?;
        if let Err(e) = self.ctx.journal.append(
            self.ctx.session,
            self.head.seq,
            self.ctx.fence,
            std::slice::from_ref(&rec),
        ) {
            return Err(self.fail(Failure::Journal(e)));
        }
        self.head.seq = seq;
        self.head.hash = Some(rec.content_hash);
        self.stats.appended += 1;
        if let Some(o) = self.ctx.observer {
            o.on_record(self.ctx.session, &rec);
        }
        Ok(seq)
    }

    fn fail(&mut self, f: Failure) -> SinkError {
        let e = failure_error(&f);
        if self.failure.is_none() {
            self.failure = Some(f);
        }
        e
    }

    fn diverge(&mut self, detail: String) -> SinkError {
        self.fail(Failure::Diverged(detail))
    }

    fn check(&self) -> Result<(), SinkError> {
        match &self.failure {
            Some(f) => Err(failure_error(f)),
            None => Ok(()),
        }
    }

    fn next(&self) -> Option<&'a Record> {
        let records = self.records;
        self.effects.get(self.pos).and_then(|&i| records.get(i))
    }

    /// Consumes the next recorded effect, which must be exactly `body` (I5).
    fn expect_recorded(&mut self, body: EventBody, what: &str) -> Result<Seq, SinkError> {
        let Some(rec) = self.next() else {
            return Err(self.diverge(format!(
                "the harness issued {what} beyond the recorded effects"
            )));
        };
        if !rec.holds_body(body) {
            let detail = format!(
                "{what} does not match record {} ({})",
                rec.seq,
                kind_name(rec)
            );
            return Err(self.diverge(detail));
        }
        self.pos += 1;
        self.stats.served += 1;
        Ok(rec.seq)
    }

    fn live_allowed(&mut self, what: &str) -> Result<(), SinkError> {
        match self.mode {
            Mode::Recover => Ok(()),
            Mode::Replay => Err(self.diverge(format!(
                "the harness issued {what} beyond the recorded effects (replay never goes live)"
            ))),
        }
    }

    async fn invoke_model(&mut self, req: &ModelRequest) -> Result<ModelResponse, SinkError> {
        let Some(model) = self.ctx.model else {
            return Err(self.diverge("no model provider on this path".into()));
        };
        self.stats.provider_calls += 1;
        let observer = self.ctx.observer;
        let session = self.ctx.session;
        let mut on_delta = |d: &str| {
            if let Some(o) = observer {
                o.on_delta(session, d);
            }
        };
        let mut resp = model.complete(req, &mut on_delta).await?;
        journal_form_parts(&mut resp.message.parts);
        Ok(resp)
    }

    async fn run_executor(
        &mut self,
        call: &ToolCall,
    ) -> Result<Result<ToolResult, String>, SinkError> {
        let Some(exec) = self.ctx.executor else {
            return Err(SinkError::Tool(
                "no tool executor is configured: the call fails closed".into(),
            ));
        };
        self.stats.executor_calls += 1;
        let scope = ToolCallContext {
            session_uid: self.ctx.session.to_owned(),
        };
        Ok(exec.execute(&scope, call).await.map_err(|e| e.0))
    }

    /// Records a receipt for `call` and returns it.
    fn record_result(
        &mut self,
        call: &ToolCall,
        mut result: ToolResult,
    ) -> Result<ToolResult, SinkError> {
        result.id.clone_from(&call.id);
        journal_form_result(&mut result);
        self.append_body(EventBody::ToolResult(result.clone()), false)?;
        Ok(result)
    }

    fn reject(&mut self, call: &ToolCall, why: &str) -> SinkError {
        // Replay and recorded-prefix recovery reproduce a handled rejection without consuming
        // the next recorded call, unless that call has this call's id.
        if let Some(rec) = self.next()
            && let EventBody::ToolCall(c) = &rec.event.body
            && c.id == call.id
        {
            let seq = rec.seq;
            return self.diverge(format!(
                "tool call {} was recorded at {seq} but is now rejected: {why}",
                call.id
            ));
        }
        SinkError::Rejected(why.to_owned())
    }

    /// The approval-gated part of `tool_call`, after the intent (recorded or served).
    async fn gated(&mut self, call: &ToolCall, intent_seq: Seq) -> Result<ToolResult, SinkError> {
        let request = ApprovalRequest {
            tool_call_id: call.id.clone(),
            reason: format!("tool {} requires approval", call.tool),
        };
        let request_seq = if self.next().is_some() {
            self.expect_recorded(EventBody::ApprovalRequest(request), "an approval request")?
        } else {
            self.live_allowed("an approval request")?;
            self.append_body(EventBody::ApprovalRequest(request), false)?
        };
        let _ = intent_seq;
        // The decision: host-owned, recorded by `approve`.
        let decision = match self.next() {
            Some(rec) => match &rec.event.body {
                EventBody::ApprovalResult(d) if d.tool_call_id == call.id => {
                    let d = (d.clone(), rec.seq);
                    self.pos += 1;
                    self.stats.served += 1;
                    d
                }
                _ => {
                    let detail = format!(
                        "record {} ({}) where the decision on {} was expected",
                        rec.seq,
                        kind_name(rec),
                        call.id
                    );
                    return Err(self.diverge(detail));
                }
            },
            None => {
                self.live_allowed("an approval wait")?;
                return Err(self.fail(Failure::Parked {
                    tool_call_id: call.id.clone(),
                    request_seq,
                }));
            }
        };
        let (decision, decision_seq) = decision;
        if let Some(rec) = self.next() {
            // The receipt was recorded: serve it.
            return match &rec.event.body {
                EventBody::ToolResult(r) if r.id == call.id => {
                    let r = r.clone();
                    self.pos += 1;
                    self.stats.served += 1;
                    Ok(r)
                }
                _ => {
                    let detail = format!(
                        "record {} ({}) where the receipt of {} was expected",
                        rec.seq,
                        kind_name(rec),
                        call.id
                    );
                    Err(self.diverge(detail))
                }
            };
        }
        self.live_allowed("an approved tool call")?;
        let to_i64 = |s: Seq| i64::try_from(s).unwrap_or(i64::MAX);
        let mut receipt = if decision.approved {
            match self.run_executor(call).await? {
                Ok(r) => r,
                Err(e) => ToolResult::error(&call.id, e).with_code(ToolResultCode::ExecutorError),
            }
        } else {
            // A denial never runs the executor.
            let reason = if decision.reason.is_empty() {
                "approval denied".to_owned()
            } else {
                format!("approval denied: {}", decision.reason)
            };
            ToolResult::error(&call.id, reason).with_code(ToolResultCode::ApprovalDenied)
        };
        receipt.approval_request_seq = to_i64(request_seq);
        receipt.approval_decision_seq = to_i64(decision_seq);
        self.record_result(call, receipt)
    }
}

/// What the journal will serve on replay of a value the host hands the harness live. The
/// journal holds events in canonical (RFC 8785) form: a number there is written as its
/// float64 value prints (`2.0` as `2`, `-0.0` as `0`, `1e21` as `1e+21`) and read back as
/// that. A completion or tool result is handed over in that form, so a harness that builds
/// its next request or its output from it does the same live and on replay from a file (the
/// I0 hash writes `-0` and `0` differently, as Go does; serde_json prints `2.0` and `2`).
fn journal_form_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(x) = serde_json_canonicalizer::to_string(&*n)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Number>(&s).ok())
            {
                *n = x;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(journal_form_value),
        serde_json::Value::Object(m) => m.values_mut().for_each(journal_form_value),
        _ => {}
    }
}

fn journal_form_parts(parts: &mut [Part]) {
    for p in parts {
        match p {
            Part::Data(d) => d.data.values_mut().for_each(journal_form_value),
            Part::ToolCall(c) => c.args.values_mut().for_each(journal_form_value),
            Part::ToolResult(r) => journal_form_result(r),
            Part::Reasoning(r) => journal_form_parts(&mut r.summary),
            _ => {}
        }
    }
}

fn journal_form_result(r: &mut ToolResult) {
    if let Some(out) = &mut r.output {
        out.values_mut().for_each(journal_form_value);
    }
    journal_form_parts(&mut r.content);
}

fn failure_error(f: &Failure) -> SinkError {
    match f {
        Failure::Diverged(d) => SinkError::Diverged(d.clone()),
        Failure::Journal(e) => SinkError::Transport(e.to_string()),
        Failure::Parked {
            tool_call_id,
            request_seq,
        } => SinkError::ApprovalParked {
            tool_call_id: tool_call_id.clone(),
            request_seq: i64::try_from(*request_seq).unwrap_or(i64::MAX),
        },
    }
}

#[async_trait]
impl EventSink for JournalSink<'_> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.check()?;
        if let Some(rec) = self.next() {
            let (recorded_id, input_hash) = match &rec.event.body {
                EventBody::ModelCall(mc) => {
                    if !matches_input_hash(&req, &mc.input_hash, &mut self.scratch) {
                        let seq = rec.seq;
                        return Err(self.diverge(format!(
                            "model input hash mismatch at record {seq}: harness violated STATELESS_REPLAY (I0)"
                        )));
                    }
                    (mc.id.clone(), mc.input_hash.clone())
                }
                _ => {
                    let detail =
                        format!("model call where record {} is {}", rec.seq, kind_name(rec));
                    return Err(self.diverge(detail));
                }
            };
            let call = ModelCall::journaled(&req, input_hash, recorded_id);
            self.expect_recorded(EventBody::ModelCall(call), "a model call")?;
            return match self.next() {
                Some(rec) if rec.event.kind() == EventKind::Output => {
                    let EventBody::Output(message) = rec.event.body.clone() else {
                        return Err(self.diverge("malformed OUTPUT record".into()));
                    };
                    self.pos += 1;
                    self.stats.served += 1;
                    self.output.push_str(&message.text());
                    // The completion's usage: the provider's usage is not journaled with
                    // the completion, only what the harness reports with sink.usage. Serve
                    // the first USAGE recorded after this completion and before the next
                    // model call, so a harness that reports each completion's usage replays.
                    let records = self.records;
                    let usage = self.effects[self.pos..]
                        .iter()
                        .filter_map(|&i| records.get(i))
                        .take_while(|r| r.event.kind() != EventKind::ModelCall)
                        .find_map(|r| match &r.event.body {
                            EventBody::Usage(u) => Some(u.clone()),
                            _ => None,
                        })
                        .unwrap_or_default();
                    Ok(ModelResponse { message, usage })
                }
                Some(_) => Err(SinkError::Model(ModelError::Provider(
                    "the recorded model call has no completion (it failed)".into(),
                ))),
                None => match self.mode {
                    Mode::Replay => Err(SinkError::Model(ModelError::Provider(
                        "the recorded model call has no completion (it failed)".into(),
                    ))),
                    Mode::Recover => {
                        // Re-drive the trailing MODEL_CALL once, after the I0 check above,
                        // and record the completion after that same MODEL_CALL.
                        let resp = self.invoke_model(&req).await?;
                        self.append_body(EventBody::Output(resp.message.clone()), false)?;
                        self.output.push_str(&resp.message.text());
                        Ok(resp)
                    }
                },
            };
        }
        self.live_allowed("a model call")?;
        let input_hash = model_input_hash(&req);
        let id = derive_id(
            "model_call",
            &self.ctx.execution_id,
            self.head.seq.wrapping_add(1),
        );
        self.append_body(
            EventBody::ModelCall(ModelCall::journaled(&req, input_hash, id)),
            false,
        )?;
        let resp = self.invoke_model(&req).await?;
        self.append_body(EventBody::Output(resp.message.clone()), false)?;
        self.output.push_str(&resp.message.text());
        Ok(resp)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.check()?;
        let body = EventBody::Output(Message::assistant(delta));
        if self.next().is_some() {
            self.expect_recorded(body, "an output")?;
        } else {
            self.live_allowed("an output")?;
            self.append_body(body, false)?;
            if let Some(o) = self.ctx.observer {
                o.on_delta(self.ctx.session, delta);
            }
        }
        self.output.push_str(delta);
        Ok(())
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.check()?;
        match call.mediation {
            Mediation::Unspecified | Mediation::InHarnessReported => {
                return Err(self.reject(
                    &call,
                    "unmediated tool call: sink.tool_call needs CONTROLLER_MEDIATED or REQUIRES_APPROVAL (run it yourself and sink.report it)",
                ));
            }
            Mediation::ControllerMediated | Mediation::RequiresApproval => {}
        }
        if call.idempotency_key.is_empty() {
            return Err(self.reject(&call, "missing idempotency key"));
        }
        if call.mediation == Mediation::RequiresApproval {
            if call.id.is_empty() {
                return Err(self.reject(&call, "an approval-gated call needs a call id"));
            }
            if self.ctx.memory_snapshot {
                return Err(self.reject(
                    &call,
                    "approval gating is for STATELESS_REPLAY harnesses only",
                ));
            }
        }
        let intent_seq = if self.next().is_some() {
            self.expect_recorded(EventBody::ToolCall(call.clone()), "a tool call")?
        } else {
            self.live_allowed("a tool call")?;
            self.append_body(EventBody::ToolCall(call.clone()), false)?
        };
        if call.mediation == Mediation::RequiresApproval {
            return self.gated(&call, intent_seq).await;
        }
        match self.next() {
            Some(rec) => match &rec.event.body {
                EventBody::ToolResult(r) if r.id == call.id => {
                    let r = r.clone();
                    self.pos += 1;
                    self.stats.served += 1;
                    Ok(r)
                }
                // The executor failed without a receipt: reproduce the failure.
                _ => Err(SinkError::Tool(
                    "the recorded tool call has no result (the executor failed)".into(),
                )),
            },
            None => {
                if self.mode == Mode::Replay {
                    return Err(SinkError::Tool(
                        "the recorded tool call has no result (the executor failed)".into(),
                    ));
                }
                if intent_seq < self.ctx.fork_seq {
                    return Err(self.diverge(format!(
                        "inherited tool intent {} (record {intent_seq}) cannot be re-driven in a fork",
                        call.id
                    )));
                }
                // Live, or the re-drive of an intent without result (same session, original
                // key: the executor deduplicates).
                match self.run_executor(&call).await? {
                    Ok(r) => self.record_result(&call, r),
                    Err(e) => Err(SinkError::Tool(e)),
                }
            }
        }
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.check()?;
        // The approval seqs and the receipt code (APPROVAL_DENIED, EXECUTOR_ERROR) are set by
        // the host on its receipts only.
        if result.approval_request_seq != 0
            || result.approval_decision_seq != 0
            || result.code != ToolResultCode::Unspecified
        {
            return Err(SinkError::Rejected(
                "sink.report cannot carry approval request/decision or host receipt fields".into(),
            ));
        }
        let body = EventBody::ToolResult(result);
        if self.next().is_some() {
            self.expect_recorded(body, "a reported tool result")?;
        } else {
            self.live_allowed("a reported tool result")?;
            self.append_body(body, false)?;
        }
        Ok(())
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.check()?;
        // The journal's Usage counts are proto int64: a larger count cannot be recorded
        // faithfully, so it is refused before anything is recorded.
        let limit = u64::try_from(i64::MAX).unwrap_or(u64::MAX);
        if [
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
        ]
        .iter()
        .any(|&n| n > limit)
        {
            return Err(SinkError::Rejected(
                "sink.usage: a token count beyond the journal's int64 range".into(),
            ));
        }
        let body = EventBody::Usage(usage);
        if self.next().is_some() {
            self.expect_recorded(body, "a usage report")?;
        } else {
            self.live_allowed("a usage report")?;
            self.append_body(body, false)?;
        }
        Ok(())
    }
}

/// A session-scoped lifecycle event body.
pub(crate) fn lifecycle(kind: LifecycleKind, detail: impl Into<String>) -> EventBody {
    EventBody::Lifecycle(Lifecycle {
        kind,
        detail: detail.into(),
        ..Lifecycle::default()
    })
}
