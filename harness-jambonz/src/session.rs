//! `session:start` and `session:end`: the first and last messages jambonz sends on a call.

use harness_core::message::ToolDefinition;
use serde_json::{Map, Value};

use harness_core::wire_struct;

/// The protocol version this crate speaks: `session:start` carries `protocol: 1`.
pub const PROTOCOL_VERSION: u64 = 1;

/// The WebSocket close code for "cannot speak this protocol": "A harness that cannot speak it
/// closes the socket with code 4000 and a reason."
pub const CLOSE_UNSUPPORTED_PROTOCOL: u16 = 4000;

/// Known `session:end` reasons.
pub mod end_reason {
    /// The harness hung up with the `hangup` command.
    pub const HARNESS_HANGUP: &str = "harness_hangup";
    /// The caller hung up. The spec names no reason for it; this is what the simulator sends.
    pub const CALLER_HANGUP: &str = "caller_hangup";
}

wire_struct! {
    /// `session:start`: `{call_sid, protocol: 1, from, to, direction, language, metadata, tools}`.
    pub struct SessionStart [as_given] [skip "type"] {
        /// The call's id; on every message from jambonz.
        lenient call_sid: Option<String> = "call_sid",
        /// The protocol version; `1`. Kept as any JSON so a harness can answer a version it
        /// cannot speak (a string, a 2) with the spec's close.
        lenient protocol: Option<Value> = "protocol",
        /// The calling party.
        lenient from: Option<String> = "from",
        /// The called party.
        lenient to: Option<String> = "to",
        /// `inbound` or `outbound`.
        lenient direction: Option<String> = "direction",
        /// The call's language, e.g. `en-US`.
        lenient language: Option<String> = "language",
        /// The agent's metadata, as configured.
        lenient metadata: Option<Value> = "metadata",
        /// The agent's tools, which jambonz runs on `tool:call`. Their shape is not given by
        /// the spec; see [`SessionStart::tool_definitions`].
        lenient tools: Option<Vec<Value>> = "tools",
    }
}

impl SessionStart {
    /// A `session:start` for protocol 1.
    pub fn new(call_sid: impl Into<String>) -> Self {
        SessionStart {
            call_sid: Some(call_sid.into()),
            protocol: Some(Value::from(PROTOCOL_VERSION)),
            ..Default::default()
        }
    }

    /// The protocol version when it is a non-negative integer.
    pub fn protocol_version(&self) -> Option<u64> {
        self.protocol.as_ref().and_then(Value::as_u64)
    }

    /// The agent's tools as definitions for a model. Reads both the flat form
    /// `{name, description, parameters}` and the OpenAI form
    /// `{type: "function", function: {name, description, parameters}}`; entries without a
    /// name are skipped.
    pub fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let mut out = Vec::new();
        for t in self.tools.iter().flatten() {
            let Some(obj) = t.as_object() else { continue };
            let f = obj
                .get("function")
                .and_then(Value::as_object)
                .unwrap_or(obj);
            let Some(name) = f.get("name").and_then(Value::as_str) else {
                continue;
            };
            let mut def = ToolDefinition::new(
                name,
                f.get("description").and_then(Value::as_str).unwrap_or(""),
            );
            def.input_schema = f
                .get("parameters")
                .or_else(|| f.get("input_schema"))
                .and_then(Value::as_object)
                .cloned();
            out.push(def);
        }
        out
    }

    /// The metadata as an object, if it is one.
    pub fn metadata_object(&self) -> Option<&Map<String, Value>> {
        self.metadata.as_ref().and_then(Value::as_object)
    }
}

wire_struct! {
    /// `session:end`: `{reason, duration_ms}`, the last message of a call.
    pub struct SessionEnd [as_given] [skip "type"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
        /// Why the call ended, e.g. [`end_reason::HARNESS_HANGUP`].
        lenient reason: Option<String> = "reason",
        /// How long the call lasted.
        lenient duration_ms: Option<u64> = "duration_ms",
    }
}
