//! A reference agent: the model-and-tools loop most agents are, written once against the
//! [`Harness`] trait and served unchanged over every protocol.

use std::collections::HashSet;

use async_trait::async_trait;

use crate::harness::{Descriptor, EventSink, Harness, HarnessError, Start};
use crate::message::{Mediation, Message, ModelRequest, ToolCall, ToolDefinition, ToolSpec, Usage};

/// A harness that sends the conversation to the model, runs the tool calls the model asks
/// for through the host (`sink.tool_call`, controller-mediated, with an idempotency key made
/// of the execution id and the call id, unique within the turn even when the model repeats
/// or omits call ids), feeds the results back, and stops when the model
/// answers without a tool call.
///
/// It is stateless (conversation from [`Start::history`]) and follows agentsessions' rules:
/// every model call through `sink.model`, the completion never re-sent through
/// `sink.output`, a model's tool call part copied before its mediation and key are set.
#[derive(Clone, Debug)]
pub struct ToolLoopAgent {
    descriptor: Descriptor,
    system_prompt: Option<String>,
    tools: Vec<ToolDefinition>,
    max_steps: usize,
    report_usage: bool,
}

impl ToolLoopAgent {
    /// An agent with this id, version `1`, no system prompt and no tools, at most 8 model
    /// calls per turn.
    pub fn new(id: impl Into<String>) -> Self {
        let mut descriptor = Descriptor::new(id, "1");
        descriptor.capabilities.fork_safe = true;
        descriptor.capabilities.streaming = true;
        ToolLoopAgent {
            descriptor,
            system_prompt: None,
            tools: Vec::new(),
            max_steps: 8,
            report_usage: false,
        }
    }

    /// Adds a system prompt before the conversation.
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Offers a tool to the model (run by the host).
    #[must_use]
    pub fn with_tool(mut self, tool: ToolDefinition) -> Self {
        self.descriptor.tools.push(ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            mediation: Mediation::ControllerMediated,
        });
        self.tools.push(tool);
        self
    }

    /// Caps the model calls of one turn.
    #[must_use]
    pub fn with_max_steps(mut self, n: usize) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// Reports each completion's usage with `sink.usage`.
    #[must_use]
    pub fn reporting_usage(mut self) -> Self {
        self.report_usage = true;
        self
    }
}

#[async_trait]
impl Harness for ToolLoopAgent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(self.descriptor.clone())
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let mut messages = Vec::new();
        if let Some(p) = &self.system_prompt {
            messages.push(Message::system(p.clone()));
        }
        messages.extend(start.history_messages());
        messages.extend(start.inputs.iter().cloned());
        // Every key this turn has used: the host dedups on session + key, so a key used
        // twice would hand the second call the first call's result without running it.
        let mut keys = HashSet::new();
        for _ in 0..self.max_steps {
            let req = ModelRequest::new(messages.clone()).with_tools(self.tools.clone());
            let resp = sink.model(req).await?;
            if self.report_usage && resp.usage != Usage::default() {
                sink.usage(resp.usage.clone()).await?;
            }
            let calls: Vec<_> = resp.message.tool_calls().cloned().collect();
            if calls.is_empty() {
                return Ok(());
            }
            messages.push(resp.message);
            for call in calls {
                let call = unique_key(call.controller_mediated(&start.execution_id), &mut keys);
                let result = sink.tool_call(call).await?;
                messages.push(Message::tool_result(result));
            }
        }
        Err(HarnessError::failed(format!(
            "no answer after {} model calls",
            self.max_steps
        )))
    }
}

/// Makes the call's key unique within the turn (and so within the session, as the key
/// starts with the turn's execution id). The key is `<execution id>:<call id>`; a model
/// that repeats a call id (some number their calls per response) or gives none gets
/// `#2`, `#3`, … appended, in call order, so a replay of the turn makes the same keys.
fn unique_key(mut call: ToolCall, keys: &mut HashSet<String>) -> ToolCall {
    if call.idempotency_key.is_empty() || keys.contains(&call.idempotency_key) {
        let base = std::mem::take(&mut call.idempotency_key);
        let mut n: u64 = 2;
        call.idempotency_key = loop {
            let key = format!("{base}#{n}");
            if !keys.contains(&key) {
                break key;
            }
            n += 1;
        };
    }
    keys.insert(call.idempotency_key.clone());
    call
}
