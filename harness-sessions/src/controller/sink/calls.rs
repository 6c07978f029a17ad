//! The harness's sink calls ([`EventSink`]): served from the recorded effects, else recorded live.

use async_trait::async_trait;
use harness_core::event::{EventBody, EventKind, ModelCall};
use harness_core::interaction::Feature;
use harness_core::message::{
    Mediation, Message, ModelRequest, ModelResponse, Part, ReasoningPart, Role, ToolCall,
    ToolResult, ToolResultCode, Usage,
};
use harness_core::model::ModelError;
use harness_core::tool::rules::{self, Gate};
use harness_core::{EventSink, SinkError};

use super::{JournalSink, Mode, kind_name};
use crate::controller::ids::derive_id;
use crate::input_hash::{matches_input_hash, model_input_hash};

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
                    // "a v0.1.2 journal without them is not re-driven, and Resume fails
                    // with “recorded completion missing” without calling the provider".
                    Mode::Recover if self.ctx.legacy => Err(self.diverge(
                        "recorded completion missing: a v0.1.2 model call is not re-driven".into(),
                    )),
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
        let live = self.next().is_none();
        self.serve_or_record(body, "an output")?;
        if live && let Some(o) = self.ctx.observer {
            o.on_delta(self.ctx.session, delta);
        }
        self.output.push_str(delta);
        Ok(())
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.check()?;
        // The rules every host applies, written once in harness-core (agentsessions' own, with
        // its words): host-executed mediation and an idempotency key, before the intent.
        if let Err(why) = rules::check_call(&call) {
            return Err(self.reject(&call, why));
        }
        // A call is gated when the call or its registered tool requires approval, and is
        // journaled as REQUIRES_APPROVAL either way: the request is the spec's approval gate.
        let call = match rules::gate(call, self.ctx.tools) {
            Gate::Run(call) | Gate::NeedsApproval(call) => call,
        };
        if call.mediation == Mediation::RequiresApproval {
            // A gated call needs a call id (the approval names it), gated by the call or not.
            if let Err(why) = rules::check_call(&call) {
                return Err(self.reject(&call, why));
            }
            if self.ctx.memory_snapshot {
                let why = SinkError::Rejected(
                    "approval gating is for STATELESS_REPLAY harnesses only".into(),
                );
                return Err(self.reject(&call, why));
            }
        }
        let intent_seq = self.serve_or_record(EventBody::ToolCall(call.clone()), "a tool call")?;
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
        self.serve_or_record(body, "a reported tool result")?;
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
        // A v0.1.2 journal has no USAGE where its harness reported usage: within its
        // recorded effects (and on replay) a report it did not record is taken and not
        // recorded; past them, on resume, it is recorded as any live effect.
        if self.ctx.legacy
            && (self.mode == Mode::Replay || self.next().is_some())
            && self
                .next()
                .is_none_or(|r| r.event.kind() != EventKind::Usage)
        {
            return Ok(());
        }
        let body = EventBody::Usage(usage);
        self.serve_or_record(body, "a usage report")?;
        Ok(())
    }

    /// Approvals (a person decides a gated call: `APPROVAL_REQUEST`, park, `approve`; not for
    /// a memory-snapshot harness, whose gated calls are refused) and reasoning (journaled as
    /// reasoning parts). Questions, hand-offs, platform commands, shared state and steps have
    /// no event in the agentsessions journal: those methods answer
    /// [`SinkError::Unsupported`] and journal nothing.
    fn supports(&self, feature: Feature) -> bool {
        match feature {
            Feature::Approvals => !self.ctx.memory_snapshot,
            Feature::Reasoning => true,
            _ => false,
        }
    }

    /// Journals `delta` as an OUTPUT whose one part is a reasoning part, as the spec records
    /// reasoning ("The host records them verbatim and replays them, so reasoning continuity
    /// survives resume and fork (I2)"): the readable text is the part's `summary`, its
    /// `validity_scope` the execution. Replay and recovery serve it back byte for byte (I5);
    /// it is not the turn's output text.
    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.check()?;
        let part = ReasoningPart {
            summary: vec![Part::text(delta)],
            validity_scope: self.ctx.execution_id.clone(),
            ..ReasoningPart::default()
        };
        let body = EventBody::Output(Message {
            role: Role::Assistant,
            parts: vec![Part::Reasoning(part)],
        });
        self.serve_or_record(body, "reasoning")?;
        Ok(())
    }
}
