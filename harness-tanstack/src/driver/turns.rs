//! Running the host's turns with a harness: [`run_turns`], and the sink of a turn.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{AbortHandle, Abortable};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use harness_core::event::{Event, EventBody};
use harness_core::interaction::{
    Answer, Feature, Handoff, HandoffTarget, Question, StateUpdate, Step,
};
use harness_core::message::{ModelRequest, ModelResponse, Role, ToolCall, ToolResult, Usage};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::tape::{Tape, Taped};
use harness_core::tool::rules::{self, Gate};
use harness_core::tool::{ToolContext, Tools};
use harness_core::{EventSink, Harness, SinkError, Start};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use super::service::Service;
use crate::Json;
use crate::agui::{
    self, AguiEvent, Content, PatchOp, ReasoningEnd, ReasoningMessageContent, ReasoningMessageEnd,
    ReasoningMessageStart, ReasoningStart, StateDelta, StateSnapshot, StepFinished, StepStarted,
    TextMessageEnd, TextMessageStart, ToolCallArgs, ToolCallEnd, ToolCallResult, ToolCallStart,
};
use crate::catalog::{self, HandoffBy, HarnessEvent, UsageEvent};
use crate::host::{HostEvent, Interrupted, Resolution, TurnOutcome, TurnRequest, Wait, WaitFor};
use crate::log::EventLog;

/// Runs the turns the host asks for, with `harness` (it never returns on its own: spawn it).
///
/// `model` answers the harness's `sink.model`; `tools` is the one registry of harness-core
/// the harness's `sink.tool_call` runs (the same the agent offers its model, see
/// [`ToolLoopAgent::with_tools`](harness_core::agent::ToolLoopAgent::with_tools)). Every
/// call goes through the rules every host applies ([`rules::check_call`], then
/// [`rules::gate`]). Pass an `Arc` of the harness or the model to share one.
///
/// Run one per [`Service`]: the turns to start are a single queue with a single waiter, so
/// a second loop on the same service would take turns from the first (or never wake).
pub async fn run_turns<L>(
    service: Service<L>,
    harness: impl Harness + 'static,
    model: impl Model + 'static,
    tools: Tools,
) where
    L: EventLog + 'static,
{
    let env = Arc::new(Env {
        harness: Arc::new(harness),
        model: Arc::new(model),
        tools,
    });
    let mut running = FuturesUnordered::new();
    let mut aborts: HashMap<String, AbortHandle> = HashMap::new();
    loop {
        futures::select_biased! {
            ev = service.next_turn_event().fuse() => match ev {
                HostEvent::StartTurn(t) => {
                    let (handle, reg) = AbortHandle::new_pair();
                    aborts.insert(t.operation_id.clone(), handle);
                    let svc = service.clone();
                    let thread = t.thread_id.clone();
                    let op = t.operation_id.clone();
                    // spec "Traces": the turn's `harness.operation` span, linked to the
                    // traceparent of the input that started it.
                    let span = crate::telemetry::operation_span(&t);
                    let turn = run_one(svc, Arc::clone(&env), t).instrument(span.clone());
                    let fut = Abortable::new(turn, reg);
                    running.push(async move { (thread, op, span, fut.await) });
                }
                HostEvent::CancelTurn { operation_id, .. } => {
                    if let Some(h) = aborts.get(&operation_id) {
                        // Drops the turn's future at its next poll.
                        h.abort();
                    }
                }
                _ => {}
            },
            done = running.select_next_some() => {
                let (thread, op, span, result) = done;
                aborts.remove(&op);
                let outcome = match result {
                    Err(_aborted) => TurnOutcome::Cancelled,
                    Ok(o) => o,
                };
                span.record("outcome", crate::telemetry::outcome_name(&outcome));
                drop(span);
                service.finish(&thread, &op, outcome);
            }
        }
    }
}

/// What every turn runs with.
struct Env {
    harness: Arc<dyn Harness>,
    model: Arc<dyn Model>,
    tools: Tools,
}

/// The token counts of a `harness.usage` event (`usage`, `total`), in the order its JSON
/// has them: keys sorted, as a JSON object built from them was (the log's bytes unchanged).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenCounts {
    input_tokens: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
    total_tokens: u64,
}

/// What the driver keeps of a turn that waits for a person: the host stores it as the
/// turn's [`Interrupted::state`] and hands it back in [`Resume::state`](crate::host::Resume).
#[derive(Serialize, Deserialize)]
struct Saved {
    /// The turn's own start (its inputs and history): the same when it is driven again.
    start: Start,
    /// What it did so far: served again, not shown again.
    tape: Tape,
}

/// The decisions a turn driven again finds, by tool call and by question.
#[derive(Default)]
struct Decisions {
    approvals: HashMap<String, Resolution>,
    answers: HashMap<String, Resolution>,
}

impl Decisions {
    fn of(resolutions: &[Resolution]) -> Self {
        let mut d = Decisions::default();
        for r in resolutions {
            match &r.wait.what {
                WaitFor::Approval { tool_call_id, .. } => {
                    d.approvals.insert(tool_call_id.clone(), r.clone());
                }
                WaitFor::Question { question_id, .. } => {
                    d.answers.insert(question_id.clone(), r.clone());
                }
                _ => {}
            }
        }
        d
    }
}

/// The start of a new turn, from the host's request.
fn start_of(t: &TurnRequest) -> Start {
    let history = t
        .history
        .iter()
        .map(|m| {
            let body = if m.role == Role::Assistant {
                EventBody::Output(m.clone())
            } else {
                EventBody::Input(m.clone())
            };
            Event::new(t.operation_id.clone(), body)
        })
        .collect();
    Start {
        execution_id: t.operation_id.clone(),
        session_uid: t.thread_id.clone(),
        history,
        inputs: vec![t.message.clone()],
        ..Start::default()
    }
}

/// Runs one turn through a [`Taped`] sink: a new turn on a new tape, a turn driven again
/// (after a `resolve` or an `answer`) on the tape it parked with, so that what it did before
/// is served, not shown again, and its gated call or question finds its decision.
async fn run_one<L: EventLog + 'static>(
    service: Service<L>,
    env: Arc<Env>,
    t: TurnRequest,
) -> TurnOutcome {
    let (start, mut tape, decisions) = match &t.resume {
        None => (start_of(&t), Tape::new(), Decisions::default()),
        Some(r) => match serde_json::from_str::<Saved>(&r.state) {
            Ok(saved) => (saved.start, saved.tape, Decisions::of(&r.resolutions)),
            Err(e) => {
                return TurnOutcome::Failed {
                    message: format!("the waiting turn does not read back: {e}"),
                    code: Some("internal".into()),
                };
            }
        },
    };
    let mut sink = TanStackSink {
        service,
        thread: t.thread_id.clone(),
        op: t.operation_id.clone(),
        agent: t.agent.clone(),
        model: Arc::clone(&env.model),
        tools: env.tools.clone(),
        // Stable when the turn is driven again: with the call's key, what a tool dedups on.
        context: ToolContext::new(t.thread_id.clone(), start.execution_id.clone()),
        execution_id: start.execution_id.clone(),
        decisions,
        waits: Vec::new(),
        open: None,
        next_message: 0,
    };
    let result = {
        let mut taped = Taped::new(&mut sink, &mut tape);
        env.harness.run(start.clone(), &mut taped).await
    };
    sink.close_open();
    let waits = std::mem::take(&mut sink.waits);
    let parks = waits.iter().any(Wait::parks);
    match result {
        Ok(()) if waits.is_empty() => TurnOutcome::Completed,
        Ok(()) if !parks => TurnOutcome::Interrupted(Interrupted::completed(waits)),
        Err(e) if e.is_parked() && waits.is_empty() => TurnOutcome::Failed {
            message: format!("the turn parked on nothing this host opened: {e}"),
            code: None,
        },
        Ok(())
        | Err(harness_core::HarnessError::Sink(SinkError::ApprovalParked { .. }))
        | Err(harness_core::HarnessError::Sink(SinkError::AwaitingAnswer { .. })) => {
            match serde_json::to_string(&Saved { start, tape }) {
                Ok(state) => TurnOutcome::Interrupted(Interrupted::parked(waits, state)),
                Err(e) => TurnOutcome::Failed {
                    message: format!("the turn cannot wait: {e}"),
                    code: Some("internal".into()),
                },
            }
        }
        Err(e) if e.is_cancelled() => TurnOutcome::Cancelled,
        Err(e) => TurnOutcome::Failed {
            message: e.to_string(),
            code: None,
        },
    }
}

/// The [`EventSink`] of a turn on a TanStack thread (what each call becomes: the
/// [module docs](super)).
struct TanStackSink<L: EventLog> {
    service: Service<L>,
    thread: String,
    op: String,
    /// The agent of an `agent` input (`from` of a hand-off).
    agent: Option<String>,
    model: Arc<dyn Model>,
    tools: Tools,
    /// Where the turn's tool calls run (the thread and the turn).
    context: ToolContext,
    /// The turn's execution id: the first run's id, the same when it is driven again.
    execution_id: String,
    /// What a `resolve` or `answer` decided, when the turn is driven again.
    decisions: Decisions,
    /// The waits this run opened.
    waits: Vec<Wait>,
    /// The text message or the reasoning open, and its id.
    open: Option<(Block, String)>,
    next_message: u64,
}

/// What streams in pieces between a start and an end: a text message, or reasoning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Text,
    Reasoning,
}

impl Block {
    fn id_part(self) -> &'static str {
        match self {
            Block::Text => "msg",
            Block::Reasoning => "reasoning",
        }
    }

    /// `TEXT_MESSAGE_START`; `REASONING_START` and `REASONING_MESSAGE_START` (one id).
    fn starts(self, id: &str) -> Vec<AguiEvent> {
        let message_id = id.to_owned();
        match self {
            Block::Text => {
                let role = Some(agui::TextMessageRole::Assistant);
                let start = TextMessageStart {
                    message_id,
                    role,
                    ..Default::default()
                };
                vec![AguiEvent::TextMessageStart(start)]
            }
            Block::Reasoning => {
                let phase = ReasoningStart {
                    message_id: message_id.clone(),
                    ..Default::default()
                };
                let role = agui::ReasoningRole::Reasoning;
                let message = ReasoningMessageStart {
                    message_id,
                    role,
                    ..Default::default()
                };
                vec![
                    AguiEvent::ReasoningStart(phase),
                    AguiEvent::ReasoningMessageStart(message),
                ]
            }
        }
    }

    /// `TEXT_MESSAGE_END`; `REASONING_MESSAGE_END` and `REASONING_END`.
    fn ends(self, message_id: String) -> Vec<AguiEvent> {
        if self == Block::Text {
            return vec![AguiEvent::TextMessageEnd(TextMessageEnd {
                message_id,
                ..Default::default()
            })];
        }
        let message = ReasoningMessageEnd {
            message_id: message_id.clone(),
            ..Default::default()
        };
        let phase = ReasoningEnd {
            message_id,
            ..Default::default()
        };
        vec![
            AguiEvent::ReasoningMessageEnd(message),
            AguiEvent::ReasoningEnd(phase),
        ]
    }
}

/// Ends a tool call's span with its outcome (`ok` or `error`), and counts it.
fn tool_outcome(span: &tracing::Span, result: &ToolResult) {
    let outcome = if result.is_error { "error" } else { "ok" };
    span.record("outcome", outcome);
    crate::telemetry::tool_call(outcome);
}

impl<L: EventLog + 'static> TanStackSink<L> {
    /// The span of a tool call: `harness.tool`, with how the host mediated it (`run`,
    /// `approved`, `denied`, `approval_required`).
    fn tool_span(&self, call: &ToolCall, mediation: &'static str) -> tracing::Span {
        tracing::info_span!(
            "harness.tool",
            operationId = %self.op,
            tool_call_id = %call.id,
            name = %call.tool,
            mediation,
            outcome = tracing::field::Empty,
        )
    }

    fn emit(&self, ev: AguiEvent) -> Result<(), SinkError> {
        self.service.emit(&self.thread, &self.op, ev)
    }

    fn new_id(&mut self, kind: &str) -> String {
        self.next_message += 1;
        format!("{}-{kind}-{}", self.op, self.next_message)
    }

    /// The block of `kind` open, or a new one (the other kind of block closes first).
    fn open(&mut self, kind: Block) -> Result<String, SinkError> {
        if let Some((k, id)) = &self.open {
            if *k == kind {
                return Ok(id.clone());
            }
        }
        self.close_open();
        let id = self.new_id(kind.id_part());
        for ev in kind.starts(&id) {
            self.emit(ev)?;
        }
        self.open = Some((kind, id.clone()));
        Ok(id)
    }

    /// Ends the text message or the reasoning open, before anything else is shown.
    fn close_open(&mut self) {
        if let Some((kind, id)) = self.open.take() {
            for ev in kind.ends(id) {
                let _ = self.emit(ev);
            }
        }
    }

    /// `TOOL_CALL_START` / `ARGS` / `END` of a call.
    fn show_call(&mut self, call: &ToolCall) -> Result<(), SinkError> {
        self.emit(AguiEvent::ToolCallStart(ToolCallStart {
            tool_call_id: call.id.clone(),
            tool_call_name: call.tool.clone(),
            ..ToolCallStart::default()
        }))?;
        self.emit(AguiEvent::ToolCallArgs(ToolCallArgs {
            tool_call_id: call.id.clone(),
            delta: serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into()),
            ..ToolCallArgs::default()
        }))?;
        self.emit(AguiEvent::ToolCallEnd(ToolCallEnd {
            tool_call_id: call.id.clone(),
            ..ToolCallEnd::default()
        }))
    }

    fn usage_event(&self, u: &Usage, source: Option<&str>) -> Result<(), SinkError> {
        let total = self.service.add_usage(&self.thread, u);
        let as_json = |u: &Usage| {
            // Written straight into its JSON, with no map built first.
            Json::new(&TokenCounts {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                reasoning_tokens: u.reasoning_tokens,
                total_tokens: u.input_tokens.saturating_add(u.output_tokens),
            })
            .unwrap_or_else(|_| Json::null())
        };
        let ev = HarnessEvent::Usage(UsageEvent {
            model: u.model.clone(),
            source: source.map(str::to_owned),
            usage: as_json(u),
            total: as_json(&total),
            ..UsageEvent::default()
        });
        self.emit(ev.to_event())
    }

    fn result_event(&mut self, r: &ToolResult) -> Result<(), SinkError> {
        let content = if r.is_error {
            format!("error: {}", r.error)
        } else {
            serde_json::to_string(&r.output).unwrap_or_default()
        };
        let id = self.new_id("tool");
        self.emit(AguiEvent::ToolCallResult(ToolCallResult {
            message_id: id,
            tool_call_id: r.id.clone(),
            content: Content::Text(content),
            role: Some(agui::ToolRole::Tool),
            ..ToolCallResult::default()
        }))
    }
}

#[async_trait]
impl<L: EventLog + 'static> EventSink for TanStackSink<L> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        let span = tracing::info_span!(
            "harness.model",
            operationId = %self.op,
            first_token_ms = tracing::field::Empty,
            input_tokens = tracing::field::Empty,
            output_tokens = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let asked = self.service.now();
        let mut first = true;
        let model = Arc::clone(&self.model);
        let mut stream = model.stream(&req);
        let mut response = Err(SinkError::Model(ModelError::Incomplete));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ModelEvent::TextDelta(d)) => {
                    if std::mem::take(&mut first) {
                        let latency = self.service.now().saturating_duration_since(asked);
                        span.record("first_token_ms", latency.as_secs_f64() * 1e3);
                        crate::telemetry::first_chunk(latency);
                    }
                    let id = self.open(Block::Text)?;
                    self.emit(AguiEvent::text_content(id, d))?;
                }
                Ok(ModelEvent::Completed(r)) => {
                    response = Ok(r);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    response = Err(SinkError::Model(e));
                    break;
                }
            }
        }
        drop(stream);
        self.close_open();
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
        let r = response?;
        if r.usage != Usage::default() {
            self.usage_event(&r.usage, None)?;
        }
        Ok(r)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        let id = self.open(Block::Text)?;
        self.emit(AguiEvent::text_content(id, delta))
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        // The rules every host applies, before anything is shown or run.
        rules::check_call(&call)?;
        let call = match rules::gate(call, &self.tools) {
            Gate::Run(call) => {
                self.close_open();
                self.show_call(&call)?;
                let span = self.tool_span(&call, "run");
                let result = self
                    .tools
                    .call(call, self.context.clone())
                    .instrument(span.clone())
                    .await;
                tool_outcome(&span, &result);
                self.result_event(&result)?;
                return Ok(result);
            }
            Gate::NeedsApproval(call) => call,
        };
        // A call the registry gated is held to the gated call's rules too (its id names it).
        rules::check_call(&call)?;
        self.close_open();
        if let Some(decision) = self.decisions.approvals.remove(&call.id) {
            // Driven again after the `resolve`: the call was shown in the interrupted run;
            // it runs now, once, or never when denied (the agent gets the denial).
            let result = if decision.approves() {
                let span = self.tool_span(&call, "approved");
                let result = self
                    .tools
                    .call(call, self.context.clone())
                    .instrument(span.clone())
                    .await;
                tool_outcome(&span, &result);
                result
            } else {
                let span = self.tool_span(&call, "denied");
                span.record("outcome", "denied");
                crate::telemetry::tool_call("denied");
                ToolResult::denied(&call.id, &decision.denial_reason())
            };
            self.result_event(&result)?;
            return Ok(result);
        }
        // No decision yet: shown, and the run ends waiting for one (no result).
        let span = self.tool_span(&call, "approval_required");
        span.record("outcome", "awaiting_approval");
        crate::telemetry::tool_call("awaiting_approval");
        drop(span);
        self.show_call(&call)?;
        self.waits.push(Wait::approval(&call));
        Err(SinkError::ApprovalParked {
            tool_call_id: call.id,
            request_seq: 0,
        })
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.close_open();
        self.result_event(&result)
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.usage_event(&usage, None)
    }

    /// Approvals, questions, hand-offs, reasoning, state and steps: everything but platform
    /// commands.
    fn supports(&self, feature: Feature) -> bool {
        feature != Feature::Commands
    }

    async fn ask(&mut self, question: Question) -> Result<Answer, SinkError> {
        self.close_open();
        // The tape gives the question its place in the turn (`q<pos>`), the same when the
        // turn is driven again; the turn's execution id makes it the thread's own.
        let id = format!("{}-{}", self.execution_id, question.id);
        if let Some(decision) = self.decisions.answers.remove(&id) {
            if decision.cancelled {
                return Err(SinkError::Cancelled);
            }
            return Ok(Answer::new(id, decision.payload));
        }
        let schema = question.schema.map(Value::Object);
        self.waits.push(Wait::question(
            id.clone(),
            question.message,
            schema,
            question.secret,
        ));
        Err(SinkError::AwaitingAnswer { question_id: id })
    }

    async fn handoff(&mut self, handoff: Handoff) -> Result<(), SinkError> {
        self.close_open();
        let (to, wait_id) = match &handoff.to {
            HandoffTarget::Human => (
                serde_json::json!({"human": true}),
                Some(self.new_id("human")),
            ),
            HandoffTarget::Agent(name) => (Value::String(name.clone()), None),
            _ => return Err(SinkError::Unsupported(Feature::Handoff)),
        };
        // `from`: "an agent name, null for the main model".
        let from = self.agent.clone().map_or(Value::Null, Value::String);
        self.emit(
            HarnessEvent::Handoff(catalog::HandoffEvent {
                from: Json::from_value(&from),
                to: Json::from_value(&to),
                note: handoff.note.clone(),
                run_id: self.op.clone(),
                by: HandoffBy::Code,
                wait_id: wait_id.clone(),
                ..catalog::HandoffEvent::default()
            })
            .to_event(),
        )?;
        if let Some(id) = wait_id {
            let message = handoff
                .note
                .unwrap_or_else(|| "The conversation is handed off to a person.".into());
            self.waits.push(Wait::human(id, message));
        }
        Ok(())
    }

    async fn reasoning(&mut self, delta: &str) -> Result<(), SinkError> {
        if delta.is_empty() {
            return Ok(());
        }
        let id = self.open(Block::Reasoning)?;
        self.emit(AguiEvent::ReasoningMessageContent(
            ReasoningMessageContent {
                message_id: id,
                delta: delta.to_owned(),
                ..ReasoningMessageContent::default()
            },
        ))
    }

    async fn state(&mut self, update: StateUpdate) -> Result<(), SinkError> {
        let ev = match update {
            StateUpdate::Snapshot(v) => AguiEvent::StateSnapshot(StateSnapshot {
                snapshot: Json::from_value(&v),
                ..StateSnapshot::default()
            }),
            StateUpdate::Delta(ops) => {
                // Each one a JSON Patch operation AG-UI takes (RFC 6902 `op`, a JSON Pointer
                // `path` / `from`, a `value` where the op has one), or nothing is sent.
                let delta = ops
                    .iter()
                    .map(|op| {
                        Json::from_value(op).parse::<PatchOp>().map_err(|e| {
                            SinkError::Rejected(format!("not a JSON Patch operation: {op} ({e})"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                AguiEvent::StateDelta(StateDelta {
                    delta,
                    ..StateDelta::default()
                })
            }
            _ => return Err(SinkError::Unsupported(Feature::State)),
        };
        self.close_open();
        self.emit(ev)
    }

    async fn step(&mut self, step: Step) -> Result<(), SinkError> {
        let ev = match step {
            Step::Started(name) => AguiEvent::StepStarted(StepStarted {
                step_name: name,
                ..StepStarted::default()
            }),
            Step::Finished(name) => AguiEvent::StepFinished(StepFinished {
                step_name: name,
                ..StepFinished::default()
            }),
            _ => return Err(SinkError::Unsupported(Feature::Steps)),
        };
        self.close_open();
        self.emit(ev)
    }
}
