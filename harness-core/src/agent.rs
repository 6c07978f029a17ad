//! A reference agent: the model-and-tools loop most agents are, written once against the
//! [`Harness`] trait and served unchanged over every protocol; and [`faq`], the FAQ agent
//! every example, the tour and the every-host test serve.

pub mod faq;

use std::collections::HashSet;

use async_trait::async_trait;

use crate::harness::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use crate::interaction::{Command, Feature};
use crate::message::{
    Mediation, Message, ModelRequest, ToolCall, ToolDefinition, ToolResult, ToolSpec, Usage,
};
use crate::tool::Tools;

/// A harness that sends the conversation to the model, runs the tool calls the model asks
/// for through the host (`sink.tool_call`, controller-mediated or gated as the tool is
/// offered, with an idempotency key made
/// of the execution id and the call id, unique within the turn even when the model repeats
/// or omits call ids), feeds the results back, and stops when the model
/// answers without a tool call.
///
/// A tool offered with [`with_command_tool`](Self::with_command_tool) is carried out as a
/// platform command (`sink.command`) rather than run by the host as a tool.
///
/// It is stateless (conversation from [`Start::history`]) and follows agentsessions' rules:
/// every model call through `sink.model`, the completion never re-sent through
/// `sink.output`, a model's tool call part copied before its mediation and key are set.
#[derive(Clone, Debug)]
pub struct ToolLoopAgent {
    descriptor: Descriptor,
    system_prompt: Option<String>,
    tools: Vec<ToolDefinition>,
    /// `(tool name, command name)` of the tools carried out as platform commands.
    commands: Vec<(String, String)>,
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
            commands: Vec::new(),
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

    /// Offers the model a tool that is carried out as the platform command `command`
    /// ([`EventSink::command`]), with the call's arguments as the command's: on jambonz,
    /// `with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup")` lets the
    /// model hang up. The command's result is the tool's result (`{"ok": true, …}`, or an
    /// error result saying why not). On a host without platform commands
    /// ([`Feature::Commands`]) the model gets an error result saying the host cannot do it,
    /// and the turn goes on.
    ///
    /// It is not a tool the host runs, so it is not among the [`Descriptor`]'s tools.
    ///
    /// ```
    /// use harness_core::agent::ToolLoopAgent;
    /// use harness_core::interaction::Feature;
    /// use harness_core::message::{Message, ToolDefinition};
    /// use harness_core::model::ScriptedModel;
    /// use harness_core::testing::RecordingSink;
    /// use harness_core::{Harness, Start};
    /// use serde_json::json;
    ///
    /// let agent = ToolLoopAgent::new("faq")
    ///     .with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup");
    /// let model = || {
    ///     ScriptedModel::new()
    ///         .tool_call("hangup", json!({"reason": "resolved"}))
    ///         .reply("Goodbye.")
    /// };
    /// // A host with commands (jambonz): the command is sent.
    /// let mut phone = RecordingSink::new(model());
    /// let start = Start::with_inputs(vec![Message::user("Thanks, bye")]);
    /// futures::executor::block_on(agent.run(start.clone(), &mut phone)).unwrap();
    /// assert!(phone.tool_calls().is_empty()); // not a tool call
    /// // A host without: the model is told, and the turn goes on.
    /// let mut chat = RecordingSink::new(model()).without(Feature::Commands);
    /// futures::executor::block_on(agent.run(start, &mut chat)).unwrap();
    /// assert_eq!(chat.spoken_text(), "Goodbye.");
    /// ```
    #[must_use]
    pub fn with_command_tool(mut self, tool: ToolDefinition, command: impl Into<String>) -> Self {
        self.descriptor.tools.retain(|t| t.name != tool.name);
        self.commands.retain(|(t, _)| *t != tool.name);
        self.commands.push((tool.name.clone(), command.into()));
        self.tools.retain(|t| t.name != tool.name);
        self.tools.push(tool);
        self
    }

    fn offer(mut self, tool: ToolDefinition, mediation: Mediation) -> Self {
        self.commands.retain(|(t, _)| *t != tool.name);
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
                if let Some((_, command)) = self.commands.iter().find(|(t, _)| *t == call.tool) {
                    // Boxed: a command is rare in a turn, and its future inline would make every
                    // turn's future larger (past the allocator's fast sizes).
                    let result = Box::pin(run_command(sink, command, call)).await?;
                    messages.push(Message::tool_result(result));
                    continue;
                }
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

/// Carries out a model's call of a command tool as the platform command `name`, its
/// arguments the call's; the result answers the call. A host without commands is an error
/// result the model can speak about, not a failed turn.
async fn run_command(
    sink: &mut dyn EventSink,
    name: &str,
    call: ToolCall,
) -> Result<ToolResult, SinkError> {
    let command = Command {
        name: name.to_owned(),
        args: call.args,
    };
    match sink.command(command).await {
        Ok(r) if r.ok => {
            let mut output = r.data;
            output.insert("ok".into(), true.into());
            Ok(ToolResult::ok(call.id, output))
        }
        Ok(r) => Ok(ToolResult::error(
            call.id,
            match r.error {
                Some(e) => format!("{name} failed: {e}"),
                None => format!("{name} failed"),
            },
        )),
        Err(SinkError::Unsupported(Feature::Commands)) => Ok(ToolResult::error(
            call.id,
            format!("this host cannot {name}: it has no platform commands"),
        )),
        Err(e) => Err(e),
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
