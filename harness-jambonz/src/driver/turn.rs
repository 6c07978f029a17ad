//! One turn: the agent run with a sink that speaks, runs or sends tools, sends commands and
//! fills the turn record.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::BoxFuture;
use harness_core::interaction::{Command, CommandResult, Feature, Handoff};
use harness_core::message::{Message, ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use harness_core::model::{ModelError, ModelEvent};
use harness_core::tool::ToolContext;
use harness_core::tool::rules::{self, Gate};
use harness_core::{EventSink, HarnessError, SinkError, Start};
use serde_json::{Map, Value};

use super::{Env, Shared, Waiter, lock};
use crate::harness_side::ActionError;
use crate::turn::{InputKind, TurnId, TurnStart};
use crate::turn_record::{ModelCallRecord, OwnToolRecord, StepRecord, TurnRecord};

const GREETING_INPUT: &str = "(call connected)";

fn sink_error(e: ActionError) -> SinkError {
    match e {
        ActionError::TurnCancelled(_) | ActionError::NotActive => SinkError::Cancelled,
        other => SinkError::Rejected(other.to_string()),
    }
}

/// The sink of one turn.
struct TurnSink {
    shared: Arc<Mutex<Shared>>,
    env: Arc<Env>,
    turn_id: TurnId,
    /// Where the harness's own tools run: the call and this turn.
    context: ToolContext,
    reply: Option<String>,
    record: TurnRecord,
    last_model_usage: Option<Usage>,
    /// `(call id, tool name)` of the model's latest tool calls, so that a tool the harness
    /// runs itself is recorded in `own_tools` by its name (a [`ToolResult`] carries only
    /// the call id). Bounded by [`MAX_TOOL_NAMES`].
    tool_names: Vec<(String, String)>,
}

/// The most model tool calls a turn remembers the names of.
const MAX_TOOL_NAMES: usize = 64;

/// What the approval gate made of a call, as the turn record shows it: a gated call is never
/// run silently, so one that ran says it was approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gated {
    /// Not gated.
    No,
    /// Gated, and the policy approved it.
    Approved,
    /// Gated, and the policy denied it: nothing ran or was sent.
    Denied,
}

impl Gated {
    /// Adds `approved: true` or `denied: true` to a record entry.
    fn mark(self, entry: &mut Map<String, Value>) {
        match self {
            Gated::No => {}
            Gated::Approved => {
                entry.insert("approved".into(), true.into());
            }
            Gated::Denied => {
                entry.insert("denied".into(), true.into());
            }
        }
    }
}

/// A turn record step's `detail`: `{<what>: name, ok}`, marked by the gate.
fn detail(what: &str, name: &str, ok: bool, gated: Gated) -> Value {
    let mut d = Map::new();
    d.insert(what.into(), name.into());
    d.insert("ok".into(), ok.into());
    gated.mark(&mut d);
    d.into()
}

impl TurnSink {
    fn check(&self) -> Result<(), SinkError> {
        let s = lock(&self.shared);
        if s.call.is_turn_open(self.turn_id) {
            Ok(())
        } else {
            Err(SinkError::Cancelled)
        }
    }

    /// Waits until the outgoing queue has room.
    async fn room(&self) -> Result<(), SinkError> {
        futures::future::poll_fn(|cx: &mut Context<'_>| {
            let mut s = lock(&self.shared);
            if !s.call.is_turn_open(self.turn_id) {
                return Poll::Ready(Err(SinkError::Cancelled));
            }
            if s.call.pending_transmits() < s.max_pending {
                Poll::Ready(Ok(()))
            } else {
                s.space.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    fn speak(&mut self, delta: &str) -> Result<(), SinkError> {
        if delta.is_empty() {
            return Ok(());
        }
        let mut s = lock(&self.shared);
        let reply = match &self.reply {
            Some(r) => r,
            None => {
                let r = s.call.start_reply(Some(self.turn_id)).map_err(sink_error)?;
                self.reply.insert(r)
            }
        };
        s.call.push_chunk(reply, delta).map_err(sink_error)?;
        s.history.assistant_delta(reply, Some(self.turn_id), delta);
        Ok(())
    }

    fn now(&self) -> Instant {
        self.env.clock.now()
    }

    /// The span of a tool call: `jambonz.tool`, with how the driver mediated it.
    fn tool_span(&self, call: &ToolCall, mediation: &'static str) -> tracing::Span {
        tracing::info_span!(
            "jambonz.tool",
            turn_id = self.turn_id,
            tool_call_id = %call.id,
            name = %call.tool,
            mediation,
            outcome = tracing::field::Empty,
        )
    }

    fn ms_since(&self, t: Instant) -> u64 {
        u64::try_from(self.now().saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)
    }

    fn step(&mut self, name: &str, ms: Option<u64>, detail: Value) {
        self.record.steps_mut().push(StepRecord {
            name: Some(name.to_owned()),
            ms,
            detail: Some(detail),
            ..Default::default()
        });
    }

    fn own_tool(&mut self, name: String, ok: bool, ms: Option<u64>, gated: Gated) {
        let mut extra = Map::new();
        gated.mark(&mut extra);
        self.record.own_tools_mut().push(OwnToolRecord {
            name: Some(name),
            ok: Some(ok),
            ms,
            extra,
        });
    }

    /// A gated call the policy denied: nothing runs or is sent; the agent is told.
    fn denied(&mut self, call: &ToolCall, reason: &str) -> ToolResult {
        if self.env.tools.get(&call.tool).is_some() {
            self.own_tool(call.tool.clone(), false, None, Gated::Denied);
        } else {
            self.step(
                "tool_call",
                None,
                detail("tool", &call.tool, false, Gated::Denied),
            );
        }
        ToolResult::denied(&call.id, reason)
    }

    /// A tool of the harness's own: run here, never sent.
    async fn run_own(&mut self, call: ToolCall, gated: Gated) -> ToolResult {
        let started = self.now();
        let mut result = self.env.tools.call_ref(&call, &self.context).await;
        result.id = call.id;
        let ms = self.ms_since(started);
        self.own_tool(call.tool, !result.is_error, Some(ms), gated);
        result
    }

    /// Sends a frame made by `send` (it returns the frame's id) and waits for its answer.
    async fn ask_jambonz<T>(
        &self,
        send: impl FnOnce(&mut Shared) -> Result<String, ActionError>,
        waiter: impl FnOnce(oneshot::Sender<T>) -> Waiter,
    ) -> Result<T, SinkError> {
        let rx = {
            let mut s = lock(&self.shared);
            let id = send(&mut s).map_err(sink_error)?;
            let (tx, rx) = oneshot::channel();
            s.waiters.insert(id, (self.turn_id, waiter(tx)));
            rx
        };
        // Dropped unanswered: the turn was cancelled or the call ended.
        rx.await.map_err(|_| SinkError::Cancelled)
    }

    /// A tool of the platform's: `tool:call`, then its `tool:result`.
    async fn call_platform(
        &mut self,
        call: ToolCall,
        gated: Gated,
    ) -> Result<ToolResult, SinkError> {
        let started = self.now();
        let (turn_id, name, args) = (self.turn_id, call.tool.clone(), call.args);
        let answer = self
            .ask_jambonz(|s| s.call.call_tool(turn_id, name, args), Waiter::Tool)
            .await?;
        let mut result = answer.to_tool_result();
        result.id.clone_from(&call.id);
        let ms = self.ms_since(started);
        self.step(
            "tool_call",
            Some(ms),
            detail("tool", &call.tool, !result.is_error, gated),
        );
        Ok(result)
    }

    /// Ends the turn: `reply:done` with the record (an empty reply if nothing was said).
    fn finish(mut self, outcome: Result<(), HarnessError>) -> TurnOutcome {
        match outcome {
            Ok(()) => {}
            Err(e) => {
                // Cancelled by jambonz (or the call is over): nothing more for the turn. An
                // agent that says `Cancelled` while the turn is still open has given up on
                // it: a failure, and its reply still ends (an open reply would hold the
                // call, one reply at a time, until jambonz's deadline).
                if self.check().is_err() {
                    return TurnOutcome::Cancelled;
                }
                if let Some(text) = self.env.config.error_reply.clone() {
                    // Best effort: the turn may be closing.
                    let _ = self.speak(&text);
                }
                self.record.flags_mut().push("harness_error".into());
                let mut note = e.to_string();
                note.truncate(note.char_indices().nth(500).map_or(note.len(), |(i, _)| i));
                self.record.note = Some(note);
                self.done();
                return TurnOutcome::Failed;
            }
        }
        if self.done() {
            TurnOutcome::Completed
        } else {
            TurnOutcome::Cancelled
        }
    }

    fn done(&mut self) -> bool {
        let mut s = lock(&self.shared);
        let reply = match self.reply.take() {
            Some(r) => r,
            None => match s.call.start_reply(Some(self.turn_id)) {
                Ok(r) => r,
                Err(_) => return false,
            },
        };
        let record = std::mem::take(&mut self.record);
        let record = if record.check_size().is_ok() {
            record
        } else {
            // Over 16 KB: keep the summary fields, drop the detail.
            TurnRecord {
                route: record.route,
                flags: record.flags,
                note: Some("turn_record trimmed to 16 KB".into()),
                ..Default::default()
            }
        };
        // Even the summary can be over 16 KB (a huge route or flags): then the reply ends
        // without a record, rather than staying open and holding jambonz's reply queue.
        let record = (!record.is_empty() && record.check_size().is_ok()).then_some(record);
        s.call.finish_reply(&reply, record).is_ok()
    }
}

#[async_trait]
impl EventSink for TurnSink {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.check()?;
        let span = tracing::info_span!(
            "jambonz.model",
            turn_id = self.turn_id,
            first_token_ms = tracing::field::Empty,
            input_tokens = tracing::field::Empty,
            output_tokens = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let started = self.now();
        let mut first_token_ms = None;
        let model = Arc::clone(&self.env.model);
        let mut stream = model.stream(&req);
        let mut response: Result<ModelResponse, ModelError> = Err(ModelError::Incomplete);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ModelEvent::TextDelta(d)) => {
                    if first_token_ms.is_none() {
                        let latency = self.now().saturating_duration_since(started);
                        first_token_ms = Some(self.ms_since(started));
                        span.record("first_token_ms", latency.as_secs_f64() * 1e3);
                        crate::telemetry::first_chunk(latency);
                    }
                    self.room().await?;
                    self.speak(&d)?;
                }
                Ok(ModelEvent::Completed(r)) => {
                    response = Ok(r);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    response = Err(e);
                    break;
                }
            }
        }
        drop(stream);
        let ms = self.ms_since(started);
        let model_id = match &response {
            Ok(r) if !r.usage.model.is_empty() => r.usage.model.clone(),
            _ => req.model.clone(),
        };
        let mut entry = ModelCallRecord {
            model: (!model_id.is_empty()).then_some(model_id),
            first_token_ms,
            ms: Some(ms),
            ..Default::default()
        };
        match &response {
            Ok(r) => {
                span.record("input_tokens", r.usage.input_tokens);
                span.record("output_tokens", r.usage.output_tokens);
                span.record("outcome", "ok");
            }
            Err(e) => {
                span.record("outcome", "error");
                tracing::debug!(parent: &span, error = %e, "the model call failed");
            }
        }
        drop(span);
        if let Ok(r) = &response {
            entry.input_tokens = Some(r.usage.input_tokens);
            entry.output_tokens = Some(r.usage.output_tokens);
            self.last_model_usage = Some(r.usage.clone());
            for call in r.message.tool_calls() {
                if self.tool_names.len() == MAX_TOOL_NAMES {
                    self.tool_names.remove(0);
                }
                self.tool_names.push((call.id.clone(), call.tool.clone()));
            }
        }
        self.record.model_calls_mut().push(entry);
        Ok(response?)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.room().await?;
        self.speak(delta)
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.check()?;
        rules::check_call(&call)?;
        let (call, gated) = match rules::gate(call, &self.env.tools) {
            Gate::Run(call) => (call, Gated::No),
            // No approval channel on a call: the policy decides, and a gated call never
            // runs silently (the turn record says it was approved).
            Gate::NeedsApproval(call) => match self.env.config.approval_policy.decide(&call) {
                Ok(()) => (call, Gated::Approved),
                Err(reason) => {
                    let span = self.tool_span(&call, "denied");
                    span.record("outcome", "denied");
                    crate::telemetry::tool_call("denied");
                    return Ok(self.denied(&call, &reason));
                }
            },
        };
        let own = self.env.tools.get(&call.tool).is_some();
        let mediation = match (own, gated) {
            (_, Gated::Approved) => "approved",
            (true, _) => "own",
            (false, _) => "platform",
        };
        let span = self.tool_span(&call, mediation);
        let result = if own {
            Ok(tracing::Instrument::instrument(self.run_own(call, gated), span.clone()).await)
        } else {
            tracing::Instrument::instrument(self.call_platform(call, gated), span.clone()).await
        };
        let outcome = match &result {
            Ok(r) if !r.is_error => "ok",
            _ => "error",
        };
        span.record("outcome", outcome);
        crate::telemetry::tool_call(outcome);
        result
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.check()?;
        // The tool's name, from the model's call with this id; else the id as given.
        let name = match self.tool_names.iter().position(|(id, _)| *id == result.id) {
            Some(i) => self.tool_names.remove(i).1,
            None => result.id.clone(),
        };
        self.own_tool(name, !result.is_error, None, Gated::No);
        Ok(())
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.check()?;
        // Usage already recorded with the mediated model call it belongs to is not counted
        // twice.
        if self.last_model_usage.as_ref() == Some(&usage) {
            self.last_model_usage = None;
            return Ok(());
        }
        self.record.model_calls_mut().push(ModelCallRecord {
            model: (!usage.model.is_empty()).then(|| usage.model.clone()),
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            ..Default::default()
        });
        Ok(())
    }

    fn supports(&self, feature: Feature) -> bool {
        match feature {
            Feature::Commands => true,
            Feature::Handoff => self.env.config.handoff.is_some(),
            _ => false,
        }
    }

    async fn command(&mut self, command: Command) -> Result<CommandResult, SinkError> {
        self.check()?;
        let started = self.now();
        let name = command.name.clone();
        let answer = self
            .ask_jambonz(|s| s.call.send_command(command.into()), Waiter::Command)
            .await?;
        let result = answer.to_command_result();
        let ms = self.ms_since(started);
        self.step(
            "command",
            Some(ms),
            detail("command", &name, result.ok, Gated::No),
        );
        Ok(result)
    }

    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        self.check()?;
        let command = self
            .env
            .config
            .handoff
            .as_ref()
            .and_then(|h| h.command_for(&handoff))
            .ok_or(SinkError::Unsupported(Feature::Handoff))?;
        let name = command.name.clone();
        let result = self.command(command).await?;
        if result.ok {
            Ok(())
        } else {
            Err(SinkError::Rejected(match result.error {
                Some(e) => format!("the hand-off command {name} failed: {e}"),
                None => format!("the hand-off command {name} failed"),
            }))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnOutcome {
    Completed,
    Cancelled,
    Failed,
}

pub(super) fn greet(shared: &Mutex<Shared>, turn_id: TurnId, greeting: &str, route: Option<&str>) {
    let mut s = lock(shared);
    s.history.user(turn_id, GREETING_INPUT);
    let Ok(reply) = s.call.start_reply(Some(turn_id)) else {
        return;
    };
    if s.call.push_chunk(&reply, greeting).is_ok() {
        s.history.assistant_delta(&reply, Some(turn_id), greeting);
    }
    let record = TurnRecord {
        route: Some(route.unwrap_or("greeting").to_owned()),
        ..Default::default()
    };
    // A route over 16 KB: the greeting still ends, without a record.
    let record = record.check_size().is_ok().then_some(record);
    let _ = s.call.finish_reply(&reply, record);
}

pub(super) fn run_turn(
    env: Arc<Env>,
    shared: Arc<Mutex<Shared>>,
    t: TurnStart,
    turn_id: TurnId,
) -> BoxFuture<'static, (TurnId, TurnOutcome)> {
    let text = match t.input.kind() {
        InputKind::Speech => t.input.text.clone().unwrap_or_default(),
        InputKind::Greeting => GREETING_INPUT.to_owned(),
        InputKind::Other(k) => t.input.text.clone().unwrap_or_else(|| format!("({k})")),
    };
    let start = {
        let mut s = lock(&shared);
        let call_sid = s.call_sid.clone();
        let start = Start {
            execution_id: format!("{call_sid}:{turn_id}"),
            session_uid: call_sid.clone(),
            config: serde_json::to_vec(&t.input).unwrap_or_default(),
            history: s.history.journal(&call_sid),
            inputs: vec![Message::user(text.clone())],
            ..Default::default()
        };
        s.history.user(turn_id, text);
        start
    };
    let span = tracing::info_span!(
        "jambonz.turn",
        call_sid = %start.session_uid,
        turn_id,
        input = %t.input.kind,
        outcome = tracing::field::Empty,
    );
    let turn = async move {
        let mut sink = TurnSink {
            shared,
            context: ToolContext::new(start.session_uid.clone(), start.execution_id.clone()),
            turn_id,
            reply: None,
            record: TurnRecord {
                route: env.config.route.clone(),
                ..Default::default()
            },
            last_model_usage: None,
            tool_names: Vec::new(),
            env,
        };
        let harness = Arc::clone(&sink.env.harness);
        let outcome = harness.run(start, &mut sink).await;
        let outcome = sink.finish(outcome);
        let name = match outcome {
            TurnOutcome::Completed => "completed",
            TurnOutcome::Cancelled => "cancelled",
            TurnOutcome::Failed => "failed",
        };
        tracing::Span::current().record("outcome", name);
        crate::telemetry::turn(name);
        (turn_id, outcome)
    };
    Box::pin(tracing::Instrument::instrument(turn, span))
}
