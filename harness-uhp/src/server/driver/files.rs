//! [`FileTools`]: `write_file` and `read_file` over the task's session folder — an artifact
//! of the task's container, and the harness's skills (files.md §2).

use std::sync::{Arc, OnceLock, Weak};

use base64::Engine;
use harness_core::message::{ToolCall, ToolResult};
use harness_core::tool::{Tool, ToolContext, Tools};
use serde_json::{Value, json};

use super::Shared;

/// `write_file` and `read_file`: host tools over the task's session folder (see the
/// [module docs](super)). Put [`tools`](Self::tools) in the agent's and the host's registry,
/// and bind the handle with [`ServiceBuilder::file_tools`](super::ServiceBuilder::file_tools).
#[derive(Clone, Default)]
pub struct FileTools {
    host: Arc<OnceLock<Weak<Shared>>>,
}

impl std::fmt::Debug for FileTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTools")
            .field("bound", &self.host.get().is_some())
            .finish()
    }
}

impl FileTools {
    /// Unbound tools (bound by [`ServiceBuilder::file_tools`](super::ServiceBuilder::file_tools)).
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds the tools to `host` (to its first host only).
    pub(super) fn bind(&self, host: &Arc<Shared>) {
        let _ = self.host.set(Arc::downgrade(host)); // ok: bound to its first host only
    }

    /// The two tools.
    pub fn tools(&self) -> Tools {
        let write = host_tool(
            &self.host,
            "write_file",
            "Write a file in the session's folder; it becomes an artifact the user can download.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative path in the session's folder"},
                    "content": {"type": "string", "description": "Text content"},
                    "content_b64": {"type": "string", "description": "Binary content, base64"}
                },
                "required": ["path"]
            }),
            write_file,
        );
        let read = host_tool(
            &self.host,
            "read_file",
            "Read a file of the session's folder, or skills/<skill>/<path> of the harness's skills.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
            read_file,
        );
        Tools::new().with(write).with(read)
    }
}

type HostToolFn = fn(&Shared, &ToolCall, &ToolContext, &str) -> ToolResult;

/// A tool whose code runs on the host it is bound to, with the call's `path`.
fn host_tool(
    host: &Arc<OnceLock<Weak<Shared>>>,
    name: &'static str,
    description: &str,
    input_schema: Value,
    run: HostToolFn,
) -> Tool {
    let h = Arc::clone(host);
    Tool::new(name, description, move |call: ToolCall, cx: ToolContext| {
        let host = h.get().and_then(Weak::upgrade);
        async move {
            let Some(host) = host else {
                return ToolResult::error(&call.id, format!("{name} runs only inside a UHP host"));
            };
            let path = call.args.get("path").and_then(Value::as_str).unwrap_or("");
            run(&host, &call, &cx, path)
        }
    })
    .with_input_schema(schema(input_schema))
}

fn write_file(host: &Shared, call: &ToolCall, cx: &ToolContext, path: &str) -> ToolResult {
    let bytes = match (call.args.get("content"), call.args.get("content_b64")) {
        (Some(Value::String(t)), _) => t.as_bytes().to_vec(),
        (_, Some(Value::String(b))) => match base64::engine::general_purpose::STANDARD.decode(b) {
            Ok(b) => b,
            Err(_) => return ToolResult::error(&call.id, "content_b64 is not base64"),
        },
        _ => return ToolResult::error(&call.id, "write_file needs `path` and `content`"),
    };
    match host.call(|s, now| s.turn_write_file(now, &cx.execution_id, path, bytes)) {
        Ok(file) => ToolResult::ok_json(&call.id, file),
        Err(e) => ToolResult::error(&call.id, e.to_string()),
    }
}

fn read_file(host: &Shared, call: &ToolCall, cx: &ToolContext, path: &str) -> ToolResult {
    match host.call(|s, _| s.turn_read_file(&cx.execution_id, path)) {
        Some(b) => match String::from_utf8(b) {
            Ok(t) => ToolResult::ok_json(&call.id, json!({"path": path, "content": t})),
            Err(e) => ToolResult::ok_json(
                &call.id,
                json!({"path": path, "content_b64":
                    base64::engine::general_purpose::STANDARD.encode(e.into_bytes())}),
            ),
        },
        None => ToolResult::error(&call.id, format!("no such file: {path}")),
    }
}

fn schema(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}
