//! A reference agent: the model-and-tools loop most agents are, written once against the
//! [`Harness`] trait and served unchanged over every protocol.

use std::collections::HashSet;

use async_trait::async_trait;

use crate::harness::{Descriptor, EventSink, Harness, HarnessError, Start};
use crate::message::{Mediation, Message, ModelRequest, ToolCall, ToolDefinition, ToolSpec, Usage};
use crate::tool::Tools;

/// A harness that sends the conversation to the model, runs the tool calls the model asks
/// for through the host (`sink.tool_call`, controller-mediated or gated as the tool is
/// offered, with an idempotency key made
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

    /// Offers the model every tool of a registry, each with its own mediation: the same
    /// [`Tools`] the host runs, so the names cannot drift. A tool that
    /// [requires approval](crate::tool::Tool::requires_approval) is called gated.
    #[must_use]
    pub fn with_tools(mut self, tools: &Tools) -> Self {
        for tool in tools.iter() {
            self = self.offer(tool.definition().clone(), tool.mediation());
        }
        self
    }

    /// Offers a tool to the model, run by the host ([`Mediation::ControllerMediated`]).
    #[must_use]
    pub fn with_tool(self, tool: ToolDefinition) -> Self {
        self.offer(tool, Mediation::ControllerMediated)
    }

    /// Offers a tool to the model that the host runs only after an approval
    /// ([`Mediation::RequiresApproval`]): the turn parks until a person decides (or the host's
    /// policy does), and a denied call never runs; the model gets the denial as the tool's
    /// result.
    #[must_use]
    pub fn with_gated_tool(self, tool: ToolDefinition) -> Self {
        self.offer(tool, Mediation::RequiresApproval)
    }

    fn offer(mut self, tool: ToolDefinition, mediation: Mediation) -> Self {
        let mediation = if mediation == Mediation::RequiresApproval {
            Mediation::RequiresApproval
        } else {
            Mediation::ControllerMediated
        };
        self.descriptor.tools.retain(|t| t.name != tool.name);
        self.descriptor.tools.push(ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            mediation,
        });
        self.tools.retain(|t| t.name != tool.name);
        self.tools.push(tool);
        self
    }

    fn mediation_of(&self, tool: &str) -> Mediation {
        self.descriptor
            .tools
            .iter()
            .find(|t| t.name == tool)
            .map_or(Mediation::ControllerMediated, |t| t.mediation)
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
                let mediation = self.mediation_of(&call.tool);
                let call = call
                    .controller_mediated(&start.execution_id)
                    .with_mediation(mediation);
                let call = unique_key(call, &mut keys);
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
