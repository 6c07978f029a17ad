//! One task's turn: the registered harness's `run`, with a sink whose every call is reported
//! to the machine as the task's output (the table in the [module docs](super)).

use std::sync::Arc;

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use harness_core::interaction::Feature;
use harness_core::message::{ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use harness_core::model::{ModelError, ModelEvent};
use harness_core::tool::ToolContext;
use harness_core::tool::rules::{self, Gate};
use harness_core::{EventSink, HarnessError, SinkError};

use super::Shared;
use crate::server::{TurnEnd, UhpTurnRequest};

pub(super) async fn run_turn(shared: Arc<Shared>, turn: UhpTurnRequest) {
    let span = tracing::info_span!(
        "uhp.task",
        side = "server",
        response_id = %turn.response_id,
        session = %turn.session_id,
        harness = %turn.base,
        model = %turn.model,
        outcome = tracing::field::Empty,
    );
    let running = crate::telemetry::Running::new();
    let outcome = tracing::Instrument::instrument(task(shared, turn), span.clone()).await;
    span.record("outcome", outcome);
    crate::telemetry::task(outcome);
    drop(running);
}

/// Runs a task's turn; the outcome it ended with (the `outcome` of its span).
async fn task(shared: Arc<Shared>, turn: UhpTurnRequest) -> &'static str {
    let rid = turn.response_id.clone();
    let Some(harness) = shared.harnesses.get(&turn.base).cloned() else {
        shared.call(|s, now| s.turn_end(now, &rid, TurnEnd::HarnessFailed));
        return "harness_failed";
    };
    let mut sink = TurnSink {
        shared: Arc::clone(&shared),
        rid: rid.clone(),
        session_id: turn.session_id.clone(),
        model: turn.model.clone(),
        disabled: turn.disabled_tools.clone(),
        max_output_tokens: turn.max_output_tokens,
        model_usage: false,
    };
    let start = turn.start;
    // A harness (or a tool) that panics fails its task, not the host.
    let (fut, handle) = futures::future::abortable(
        std::panic::AssertUnwindSafe(async move {
            let r = harness.run(start, &mut sink).await;
            drop(sink);
            r
        })
        .catch_unwind(),
    );
    {
        let mut st = shared.lock();
        if st.stopped.remove(&rid) || !st.server.running.contains(&rid) {
            return "cancelled"; // stopped before it started
        }
        st.aborts.insert(rid.clone(), handle);
    }
    let result = fut.await;
    {
        // A stop that raced the turn's own end finds nothing left to abort.
        let mut st = shared.lock();
        st.aborts.remove(&rid);
        st.stopped.remove(&rid);
    }
    let end = match result {
        Err(_aborted) => return "cancelled", // the machine already ended the task
        Ok(Ok(Ok(()))) => TurnEnd::Completed,
        Ok(Ok(Err(HarnessError::Sink(SinkError::Model(_))))) => TurnEnd::ProviderFailed,
        Ok(Ok(Err(_))) | Ok(Err(_)) => TurnEnd::HarnessFailed, // failed, or panicked
    };
    let outcome = match end {
        TurnEnd::Completed => "completed",
        TurnEnd::ProviderFailed => "provider_failed",
        TurnEnd::HarnessFailed => "harness_failed",
    };
    shared.call(|s, now| s.turn_end(now, &rid, end));
    outcome
}

/// The sink of one task's turn.
struct TurnSink {
    shared: Arc<Shared>,
    rid: String,
    session_id: String,
    model: String,
    disabled: Vec<String>,
    max_output_tokens: Option<u64>,
    model_usage: bool,
}

impl TurnSink {
    fn text(&self, delta: &str) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_text(now, &self.rid, delta))
            .map_err(|_| SinkError::Cancelled)
    }
}

#[async_trait]
impl EventSink for TurnSink {
    async fn model(&mut self, mut req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.shared
            .call(|s, now| s.turn_step(now, &self.rid))
            .map_err(|_| SinkError::Cancelled)?;
        // The task decides the model; a disabled tool is not even offered (a hard block).
        req.model.clone_from(&self.model);
        req.tools.retain(|t| !self.disabled.contains(&t.name));
        if let Some(n) = self.max_output_tokens {
            req.params.insert("max_output_tokens".into(), n.to_string());
        }
        let span = tracing::info_span!(
            "uhp.model",
            response_id = %self.rid,
            first_token_ms = tracing::field::Empty,
            input_tokens = tracing::field::Empty,
            output_tokens = tracing::field::Empty,
            outcome = "error",
        );
        let asked = self.shared.clock.now();
        let model = Arc::clone(&self.shared.model);
        let mut stream = model.stream(&req);
        let mut streamed = false;
        while let Some(ev) = stream.next().await {
            match ev.map_err(SinkError::Model)? {
                ModelEvent::TextDelta(d) => {
                    if !streamed {
                        let latency = self.shared.clock.now().saturating_duration_since(asked);
                        span.record("first_token_ms", latency.as_secs_f64() * 1e3);
                        crate::telemetry::first_chunk(latency);
                    }
                    streamed = true;
                    self.text(&d)?;
                }
                ModelEvent::Completed(resp) => {
                    span.record("input_tokens", resp.usage.input_tokens);
                    span.record("output_tokens", resp.usage.output_tokens);
                    span.record("outcome", "ok");
                    if !streamed {
                        let text = resp.message.text();
                        if !text.is_empty() {
                            self.text(&text)?;
                        }
                    }
                    if resp.usage != Usage::default() {
                        self.model_usage = true;
                        self.shared
                            .call(|s, _| s.turn_usage(&self.rid, &resp.usage))
                            .map_err(|_| SinkError::Cancelled)?;
                    }
                    return Ok(resp);
                }
                _ => {}
            }
        }
        Err(SinkError::Model(ModelError::Incomplete))
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.text(delta)
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        rules::check_call(&call)?;
        self.shared
            .call(|s, now| s.turn_tool_call(now, &self.rid, &call))
            .map_err(|_| SinkError::Cancelled)?;
        let cx = ToolContext::new(self.session_id.clone(), self.rid.clone());
        let span = tracing::info_span!(
            "uhp.tool",
            response_id = %self.rid,
            tool_call_id = %call.id,
            name = %call.tool,
            mediation = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let (result, outcome) = if self.disabled.contains(&call.tool) {
            span.record("mediation", "disabled");
            let r = ToolResult::denied(
                &call.id,
                &format!("{} is disabled by this harness's configuration", call.tool),
            );
            (r, "denied")
        } else {
            let ran = |r: ToolResult| {
                let o = if r.is_error { "error" } else { "ok" };
                (r, o)
            };
            match rules::gate(call, &self.shared.tools) {
                Gate::Run(c) => {
                    span.record("mediation", "run");
                    let call = self.shared.tools.call(c, cx);
                    ran(tracing::Instrument::instrument(call, span.clone()).await)
                }
                Gate::NeedsApproval(c) => match self.shared.policy.decide(&c) {
                    Ok(()) => {
                        span.record("mediation", "approved");
                        let call = self.shared.tools.call(c, cx);
                        ran(tracing::Instrument::instrument(call, span.clone()).await)
                    }
                    Err(reason) => {
                        span.record("mediation", "denied");
                        (ToolResult::denied(&c.id, &reason), "denied")
                    }
                },
            }
        };
        span.record("outcome", outcome);
        crate::telemetry::tool_call(outcome);
        drop(span);
        self.shared
            .call(|s, now| s.turn_tool_result(now, &self.rid, &result))
            .map_err(|_| SinkError::Cancelled)?;
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_tool_result(now, &self.rid, &result))
            .map_err(|_| SinkError::Cancelled)
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        if self.model_usage {
            return Ok(()); // already counted from the host's own model calls
        }
        self.shared
            .call(|s, _| s.turn_usage(&self.rid, &usage))
            .map_err(|_| SinkError::Cancelled)
    }

    fn supports(&self, feature: Feature) -> bool {
        feature == Feature::Reasoning
    }

    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        self.shared
            .call(|s, now| s.turn_reasoning(now, &self.rid, delta))
            .map_err(|_| SinkError::Cancelled)
    }
}
