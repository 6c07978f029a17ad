//! `ToolLoopAgent` and `RecordingSink` against the hosts' rules, beyond the happy paths of
//! `tests/model.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use futures::executor::block_on;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Command, CommandResult, Feature};
use harness_core::message::{
    JsonObject, Mediation, Message, Part, Role, ToolCall, ToolDefinition, ToolResult,
};
use harness_core::model::ScriptedModel;
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::tool::Tool;
use harness_core::{EventSink, Harness, SinkError, Start};
use serde_json::json;

fn calls(ids_and_tools: &[(&str, &str)]) -> Message {
    Message {
        role: Role::Assistant,
        parts: ids_and_tools
            .iter()
            .map(|(id, tool)| Part::ToolCall(ToolCall::new(*id, *tool, JsonObject::new())))
            .collect(),
    }
}

/// agentsessions, Rule 4: "the harness chooses ToolCall.IdempotencyKey, unique only within its
/// session … the tool side dedups on session UID plus idempotency key" (and harness-sessions'
/// executor does: a second call with a used key gets the first call's receipt and never runs).
/// Models do not all give unique call ids: some number them per response (`call_0` every
/// step), some give none. The key is the agent's to make unique, not the model's.
#[test]
fn idempotency_keys_stay_unique_when_the_model_repeats_or_omits_call_ids() {
    let mut with_text = calls(&[("", "d"), ("", "e")]);
    with_text.parts.insert(0, Part::text("Let me check. "));
    let script = || {
        ScriptedModel::new()
            .reply_with(calls(&[("call_0", "a"), ("call_0", "b")]))
            .reply_with(calls(&[("call_0", "c")]))
            .reply_with(with_text.clone())
            .reply("Done.")
    };
    for exec in ["x1", ""] {
        let mut sink = RecordingSink::new(script()).with_tool(Tool::sync("a", "", |c| {
            ToolResult::ok_json(&c.id, json!(1))
        }));
        let mut start = Start::with_inputs(vec![Message::user("go")]);
        start.execution_id = exec.into();
        block_on(ToolLoopAgent::new("a").run(start, &mut sink))
            .unwrap_or_else(|e| panic!("execution id {exec:?}: {e}"));
        let keys: Vec<_> = sink
            .tool_calls()
            .iter()
            .map(|c| c.idempotency_key.clone())
            .collect();
        assert_eq!(keys.len(), 5, "{keys:?}");
        assert!(keys.iter().all(|k| !k.is_empty()), "{keys:?}");
        assert_eq!(keys.iter().collect::<HashSet<_>>().len(), 5, "{keys:?}");
        // A call id seen for the first time keeps the documented key.
        let want = if exec.is_empty() {
            "call_0"
        } else {
            "x1:call_0"
        };
        assert_eq!(keys[0], want);
        assert_eq!(sink.spoken_text(), "Let me check. Done.");
    }
}

/// The same script gives the same keys on every run: a replayed or re-driven turn must
/// present the keys its first run recorded.
#[test]
fn idempotency_keys_are_deterministic() {
    let run = || {
        let model = ScriptedModel::new()
            .reply_with(calls(&[("call_0", "a"), ("call_0", "a")]))
            .reply_with(calls(&[("call_0", "a")]))
            .reply("ok");
        let mut sink = RecordingSink::new(model);
        let mut start = Start::with_inputs(vec![Message::user("go")]);
        start.execution_id = "x9".into();
        block_on(ToolLoopAgent::new("a").run(start, &mut sink)).unwrap();
        sink.tool_calls()
            .iter()
            .map(|c| c.idempotency_key.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

/// agentsessions: "Set MediationRequiresApproval and a nonempty call ID/idempotency key before
/// sink.ToolCall" (harness-sessions refuses it: "an approval-gated call needs a call id").
/// `RecordingSink` promises "an agent that passes here runs on every host", so it refuses
/// the call too, before running or recording it. A gated call with an id parks until it is
/// approved ("a gated tool never runs silently on any host").
#[test]
fn recording_sink_refuses_an_approval_gated_call_without_a_call_id() {
    let gated = ToolCall::new("", "delete_account", JsonObject::new())
        .with_mediation(Mediation::RequiresApproval)
        .with_idempotency_key("x1:k");
    let mut sink =
        RecordingSink::new(ScriptedModel::new()).with_tool(Tool::sync("delete_account", "", |c| {
            ToolResult::ok_json(&c.id, json!("deleted"))
        }));
    let err = block_on(sink.tool_call(gated.clone())).unwrap_err();
    assert!(
        matches!(err, SinkError::Rejected(ref m) if m.contains("call id")),
        "{err:?}"
    );
    assert!(sink.calls().is_empty());
    // With a call id it is accepted, and gated: it parks, and runs only once approved.
    let mut with_id = gated.clone();
    with_id.id = "c1".into();
    let parked = block_on(sink.tool_call(with_id.clone())).unwrap_err();
    assert!(
        matches!(parked, SinkError::ApprovalParked { ref tool_call_id, .. } if tool_call_id == "c1"),
        "{parked:?}"
    );
    assert!(
        sink.tool_results().is_empty(),
        "a gated call ran without approval"
    );
    sink.approve("c1");
    assert!(!block_on(sink.tool_call(with_id)).unwrap().is_error);
    // Controller-mediated calls need no call id (only a key).
    let mediated = gated.clone().with_mediation(Mediation::ControllerMediated);
    assert!(block_on(sink.tool_call(mediated)).is_ok());
    // lenient_tools() turns the check off, never the gate.
    let mut lenient = RecordingSink::new(ScriptedModel::new()).lenient_tools();
    assert!(matches!(
        block_on(lenient.tool_call(gated)),
        Err(SinkError::ApprovalParked { .. })
    ));
}

/// The tool results the model was given, in order (from the requests of later model calls).
fn results_seen(sink: &RecordingSink) -> Vec<ToolResult> {
    let Some(SinkCall::Model { request, .. }) = sink
        .calls()
        .iter()
        .rev()
        .find(|c| matches!(c, SinkCall::Model { .. }))
    else {
        return Vec::new();
    };
    request
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn hangup_agent() -> ToolLoopAgent {
    ToolLoopAgent::new("faq")
        .with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup")
}

fn hangup_model() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("hangup", json!({"reason": "resolved"}))
        .reply("Goodbye.")
}

/// A command tool on a host with platform commands (jambonz): the model's call becomes
/// `sink.command` with the call's arguments, never a tool call, and the command's result
/// (with the platform's other fields) is the tool's result.
#[test]
fn a_command_tool_is_sent_as_a_platform_command() {
    let mut sink = RecordingSink::new(hangup_model()).on_command(|c| {
        let mut data = JsonObject::new();
        data.insert("at_ms".into(), json!(41250));
        CommandResult {
            ok: c.name == "hangup",
            error: None,
            data,
        }
    });
    let start = Start::with_inputs(vec![Message::user("Thanks, bye")]);
    block_on(hangup_agent().run(start, &mut sink)).unwrap();
    assert!(sink.tool_calls().is_empty());
    let sent: Vec<_> = sink
        .calls()
        .iter()
        .filter(|c| matches!(c, SinkCall::Command { .. }))
        .collect();
    assert_eq!(sent.len(), 1);
    assert!(
        matches!(sent[0], SinkCall::Command { command, .. } if *command == Command::hangup("resolved")),
        "{sent:?}"
    );
    let seen = results_seen(&sink);
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].is_error);
    assert_eq!(seen[0].id, "call_1");
    assert_eq!(
        serde_json::Value::Object(seen[0].output.clone().unwrap()),
        json!({"ok": true, "at_ms": 41250})
    );
    // Not among the tools the host runs.
    assert!(
        block_on(hangup_agent().describe())
            .unwrap()
            .tools
            .is_empty()
    );
}

/// A command the platform refuses is an error result with its reason.
#[test]
fn a_refused_command_is_an_error_result() {
    let mut sink = RecordingSink::new(hangup_model()).on_command(|_| CommandResult {
        ok: false,
        error: Some("not now".into()),
        data: JsonObject::new(),
    });
    let start = Start::with_inputs(vec![Message::user("Thanks, bye")]);
    block_on(hangup_agent().run(start, &mut sink)).unwrap();
    let seen = results_seen(&sink);
    assert!(seen[0].is_error);
    assert_eq!(seen[0].error, "hangup failed: not now");
}

/// On a host without platform commands (TanStack, agentsessions) the model gets an error
/// result saying the host cannot do it, and the turn goes on to its answer.
#[test]
fn a_command_tool_on_a_host_without_commands_tells_the_model() {
    let mut sink = RecordingSink::new(hangup_model()).without(Feature::Commands);
    let start = Start::with_inputs(vec![Message::user("Thanks, bye")]);
    block_on(hangup_agent().run(start, &mut sink)).unwrap();
    assert!(
        !sink
            .calls()
            .iter()
            .any(|c| matches!(c, SinkCall::Command { .. }))
    );
    let seen = results_seen(&sink);
    assert!(seen[0].is_error);
    assert!(seen[0].error.contains("cannot hangup"), "{}", seen[0].error);
    assert_eq!(sink.spoken_text(), "Goodbye.");
    assert_eq!(sink.model_calls(), 2);
}
