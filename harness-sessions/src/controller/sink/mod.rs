//! The journaling [`EventSink`]: record-before-effect live, recorded effects served on replay
//! and recovery.
//!
//! One sink serves all three paths. It holds the execution's recorded effects (none for a
//! new execution) and a cursor into them. Each sink call first consumes the next recorded
//! effect, checking that the harness asked for exactly what was recorded (the model input
//! hash, I0, and the rebuilt event byte for byte, I5); past the recorded effects it goes live
//! (recovery) or reports divergence (replay).

mod calls;
mod journal_form;

use harness_core::SinkError;
use harness_core::clock::WallClock;
use harness_core::event::{ApprovalRequest, EventBody};
use harness_core::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, ToolResultCode};
use harness_core::model::Model;
use harness_core::tool::{ToolContext, Tools};

use self::journal_form::{journal_form_parts, journal_form_result};
use crate::envelope::envelope;
use crate::journal::{Journal, JournalError};
use crate::observer::Observer;
use crate::record::{Fence, Head, Record, Seq};
use crate::tools::ToolExecutor;

/// How the sink treats sink calls past the recorded effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A completed execution: everything must come from the journal; the provider and the
    /// executor are never called.
    Replay,
    /// A new or interrupted execution: recorded effects are served, then calls go live.
    Recover,
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
    pub clock: &'a dyn WallClock,
    pub model: Option<&'a dyn Model>,
    /// The agent's tools: a call of a tool registered `requires_approval` is gated.
    pub tools: &'a Tools,
    pub executor: Option<&'a dyn ToolExecutor>,
    pub observer: Option<&'a dyn Observer>,
    /// The harness requires a memory snapshot (approval gating is refused for it).
    pub memory_snapshot: bool,
    /// Records before this seq were inherited from a fork parent.
    pub fork_seq: Seq,
    /// A v0.1.2 turn: what the host appends to it keeps an empty execution id, its recorded
    /// model calls are not re-driven, and usage it did not journal is not asked of it.
    pub legacy: bool,
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
        let id = if session_scoped || self.ctx.legacy {
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
        let appended = self.ctx.journal.append(
            self.ctx.session,
            self.head.seq,
            self.ctx.fence,
            std::slice::from_ref(&rec),
        );
        crate::telemetry::appended(&appended, 1);
        if let Err(e) = appended {
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

    /// Serves the next recorded effect, which must be exactly `body`, or, past the recorded
    /// effects, records `body` live (where live calls are allowed).
    fn serve_or_record(&mut self, body: EventBody, what: &str) -> Result<Seq, SinkError> {
        if self.next().is_some() {
            self.expect_recorded(body, what)
        } else {
            self.live_allowed(what)?;
            self.append_body(body, false)
        }
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
        let cx = ToolContext::new(self.ctx.session, self.ctx.execution_id.as_str());
        Ok(exec.execute(&cx, call).await.map_err(|e| e.0))
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

    fn reject(&mut self, call: &ToolCall, why: SinkError) -> SinkError {
        // Replay and recorded-prefix recovery reproduce a handled rejection without consuming
        // the next recorded call, unless that call has this call's id.
        if let Some(rec) = self.next()
            && let EventBody::ToolCall(c) = &rec.event.body
            && c.id == call.id
        {
            let seq = rec.seq;
            return self.diverge(format!(
                "tool call {} was recorded at {seq} but is now {why}",
                call.id
            ));
        }
        why
    }

    /// The approval-gated part of `tool_call`, after the intent (recorded or served).
    async fn gated(&mut self, call: &ToolCall, intent_seq: Seq) -> Result<ToolResult, SinkError> {
        let request = ApprovalRequest {
            tool_call_id: call.id.clone(),
            reason: format!("tool {} requires approval", call.tool),
        };
        let request_seq =
            self.serve_or_record(EventBody::ApprovalRequest(request), "an approval request")?;
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
            // A denial never runs the executor: APPROVAL_DENIED, the words every host uses.
            ToolResult::denied(&call.id, &decision.reason)
        };
        receipt.approval_request_seq = to_i64(request_seq);
        receipt.approval_decision_seq = to_i64(decision_seq);
        self.record_result(call, receipt)
    }
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
