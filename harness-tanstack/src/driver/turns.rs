//! Running the host's turns with a harness: [`run_turns`], and the sink of a turn.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{AbortHandle, Abortable};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use harness_core::event::{Event as CoreEvent, EventBody};
use harness_core::message::{ModelRequest, ModelResponse, Role, ToolCall, ToolResult, Usage};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::tool::rules::{self, ApprovalPolicy, Gate};
use harness_core::tool::{ToolContext, Tools};
use harness_core::{EventSink, Harness, SinkError, Start};

use super::service::Service;
use crate::Json;
use crate::agui::{
    self, Content, Event, TextMessageEnd, TextMessageStart, ToolCallArgs, ToolCallEnd,
    ToolCallResult, ToolCallStart,
};
use crate::catalog::{HarnessEvent, UsageEvent};
use crate::host::{HostEvent, TurnOutcome, TurnRequest};
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
    let harness: Arc<dyn Harness> = Arc::new(harness);
    let model: Arc<dyn Model> = Arc::new(model);
    let mut running = FuturesUnordered::new();
    let mut aborts: HashMap<String, AbortHandle> = HashMap::new();
    loop {
        futures::select_biased! {
            ev = service.next_turn_event().fuse() => match ev {
                HostEvent::StartTurn(t) => {
                    let (handle, reg) = AbortHandle::new_pair();
                    aborts.insert(t.operation_id.clone(), handle);
                    let svc = service.clone();
                    let harness = Arc::clone(&harness);
                    let model = Arc::clone(&model);
                    let tools = tools.clone();
                    let thread = t.thread_id.clone();
                    let op = t.operation_id.clone();
                    let fut = Abortable::new(run_one(svc, harness, model, tools, t), reg);
                    running.push(async move { (thread, op, fut.await) });
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
                let (thread, op, result) = done;
                aborts.remove(&op);
                let outcome = match result {
                    Err(_aborted) => TurnOutcome::Cancelled,
                    Ok(o) => o,
                };
                service.finish(&thread, &op, outcome);
            }
        }
    }
}

async fn run_one<L: EventLog + 'static>(
    service: Service<L>,
    harness: Arc<dyn Harness>,
    model: Arc<dyn Model>,
    tools: Tools,
    t: TurnRequest,
) -> TurnOutcome {
    let history = t
        .history
        .iter()
        .map(|m| {
            let body = if m.role == Role::Assistant {
                EventBody::Output(m.clone())
            } else {
                EventBody::Input(m.clone())
            };
            CoreEvent::new(t.operation_id.clone(), body)
        })
        .collect();
    let start = Start {
        execution_id: t.operation_id.clone(),
        session_uid: t.thread_id.clone(),
        history,
        inputs: vec![t.message.clone()],
        ..Start::default()
    };
    let mut sink = TanStackSink {
        service,
        thread: t.thread_id.clone(),
        op: t.operation_id.clone(),
        model,
        tools,
        context: ToolContext::new(t.thread_id.clone(), t.operation_id.clone()),
        open: None,
        next_message: 0,
    };
    let result = harness.run(start, &mut sink).await;
    sink.close_message();
    match result {
        Ok(()) => TurnOutcome::Completed,
        Err(e) if e.is_cancelled() => TurnOutcome::Cancelled,
        Err(e) => TurnOutcome::Failed {
            message: e.to_string(),
            code: None,
        },
    }
}

/// The [`EventSink`] of a turn on a TanStack thread.
struct TanStackSink<L: EventLog> {
    service: Service<L>,
    thread: String,
    op: String,
    model: Arc<dyn Model>,
    tools: Tools,
    /// Where the turn's tool calls run (the thread and the turn).
    context: ToolContext,
    open: Option<String>,
    next_message: u64,
}

impl<L: EventLog + 'static> TanStackSink<L> {
    fn emit(&self, ev: Event) -> Result<(), SinkError> {
        self.service.emit(&self.thread, &self.op, ev)
    }

    fn new_id(&mut self, kind: &str) -> String {
        self.next_message += 1;
        format!("{}-{kind}-{}", self.op, self.next_message)
    }

    fn open_message(&mut self) -> Result<String, SinkError> {
        if let Some(m) = &self.open {
            return Ok(m.clone());
        }
        let id = self.new_id("msg");
        self.emit(Event::TextMessageStart(TextMessageStart {
            message_id: id.clone(),
            role: Some(agui::TextMessageRole::Assistant),
            ..TextMessageStart::default()
        }))?;
        self.open = Some(id.clone());
        Ok(id)
    }

    fn close_message(&mut self) {
        if let Some(m) = self.open.take() {
            let _ = self.emit(Event::TextMessageEnd(TextMessageEnd {
                message_id: m,
                ..TextMessageEnd::default()
            }));
        }
    }

    fn usage_event(&self, u: &Usage, source: Option<&str>) -> Result<(), SinkError> {
        let total = self.service.add_usage(&self.thread, u);
        let as_json = |u: &Usage| {
            Json::from_value(&serde_json::json!({
                "inputTokens": u.input_tokens,
                "outputTokens": u.output_tokens,
                "totalTokens": u.input_tokens.saturating_add(u.output_tokens),
                "reasoningTokens": u.reasoning_tokens,
            }))
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
        self.emit(Event::ToolCallResult(ToolCallResult {
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
        let model = Arc::clone(&self.model);
        let mut stream = model.stream(&req);
        let mut response = Err(SinkError::Model(ModelError::Incomplete));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ModelEvent::TextDelta(d)) => {
                    let id = self.open_message()?;
                    self.emit(Event::text_content(id, d))?;
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
        self.close_message();
        let r = response?;
        if r.usage != Usage::default() {
            self.usage_event(&r.usage, None)?;
        }
        Ok(r)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        let id = self.open_message()?;
        self.emit(Event::text_content(id, delta))
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        // The rules every host applies, before anything is shown or run.
        rules::check_call(&call)?;
        let (call, gated) = match rules::gate(call, &self.tools) {
            Gate::Run(call) => (call, false),
            Gate::NeedsApproval(call) => {
                // A call the registry gated is held to the gated call's rules too.
                rules::check_call(&call)?;
                (call, true)
            }
        };
        self.close_message();
        self.emit(Event::ToolCallStart(ToolCallStart {
            tool_call_id: call.id.clone(),
            tool_call_name: call.tool.clone(),
            ..ToolCallStart::default()
        }))?;
        self.emit(Event::ToolCallArgs(ToolCallArgs {
            tool_call_id: call.id.clone(),
            delta: serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into()),
            ..ToolCallArgs::default()
        }))?;
        self.emit(Event::ToolCallEnd(ToolCallEnd {
            tool_call_id: call.id.clone(),
            ..ToolCallEnd::default()
        }))?;
        let result = if gated {
            match ApprovalPolicy::Deny.decide(&call) {
                Ok(()) => self.tools.call(call, self.context.clone()).await,
                Err(reason) => ToolResult::denied(&call.id, &reason),
            }
        } else {
            self.tools.call(call, self.context.clone()).await
        };
        self.result_event(&result)?;
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.close_message();
        self.result_event(&result)
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.usage_event(&usage, None)
    }
}
