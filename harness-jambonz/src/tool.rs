//! The agent's tools, which jambonz runs: `tool:call` and `tool:result`.

use serde_json::{Map, Value};

use crate::turn::TurnId;
use harness_core::wire_struct;

wire_struct! {
    /// `tool:call`: `{call_id, turn_id, name, args}`: run one of the agent's tools.
    pub struct ToolCallMessage [as_given] [skip "type"] {
        /// The call, chosen by the harness, unique within the call.
        val call_id: String = "call_id",
        /// The turn it is for.
        val turn_id: Option<TurnId> = "turn_id",
        /// The tool.
        val name: String = "name",
        /// Its arguments.
        val args: Map<String, Value> = "args",
    }
}

wire_struct! {
    /// `tool:result`: `{call_id, result}`.
    ///
    /// The spec shows only the success form. A failed call is read from an `error` field
    /// (what the simulator sends: `{call_id, error: "unknown tool: x"}`); a `result` holding
    /// `{error}` is the tool's own answer and is passed on as a result.
    pub struct ToolResultMessage [as_given] [skip "type"] {
        /// The call's id (jambonz's `call_sid`).
        lenient call_sid: Option<String> = "call_sid",
        /// The tool call this answers.
        lenient call_id: String = "call_id",
        /// What the tool returned.
        lenient result: Option<Value> = "result",
        /// Why the tool could not be run.
        lenient error: Option<Value> = "error",
    }
}

impl ToolResultMessage {
    /// A successful result.
    pub fn ok(call_id: impl Into<String>, result: Value) -> Self {
        ToolResultMessage {
            call_id: call_id.into(),
            result: Some(result),
            ..Default::default()
        }
    }

    /// A failed call.
    pub fn error(call_id: impl Into<String>, error: impl Into<String>) -> Self {
        ToolResultMessage {
            call_id: call_id.into(),
            error: Some(Value::String(error.into())),
            ..Default::default()
        }
    }

    /// The error text, when the call failed.
    pub fn error_text(&self) -> Option<String> {
        match &self.error {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        }
    }

    /// As a [`harness_core`] tool result: an object result as the output (any other value
    /// wrapped as `{"result": value}`), or an error.
    pub fn to_tool_result(&self) -> harness_core::message::ToolResult {
        use harness_core::message::ToolResult;
        if let Some(e) = self.error_text() {
            return ToolResult::error(&self.call_id, e);
        }
        let output = match &self.result {
            Some(Value::Object(m)) => m.clone(),
            None => Map::new(),
            Some(v) => {
                let mut m = Map::new();
                m.insert("result".into(), v.clone());
                m
            }
        };
        ToolResult::ok(&self.call_id, output)
    }
}
