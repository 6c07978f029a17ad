//! Tools with typed arguments (feature `schemars`): the arguments are read into a type, and
//! the JSON Schema the model is offered is derived from the same type.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Tool, ToolContext};
use crate::message::{JsonObject, ToolCall, ToolResult};

impl Tool {
    /// A tool whose arguments are read into `A` (arguments that do not fit are an error
    /// result, `invalid arguments: …`, and the code does not run) and whose input schema is
    /// `A`'s JSON Schema. The code gets the arguments and the call (for its idempotency key:
    /// pass it to any effect that must not happen twice), and returns a value (serialized as
    /// the output; an object is the output, any other value is wrapped as
    /// `{"result": value}`) or an error message.
    ///
    /// ```
    /// use harness_core::message::{JsonObject, ToolCall};
    /// use harness_core::tool::{Tool, ToolContext};
    /// use serde::Deserialize;
    /// use serde_json::json;
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Refund {
    ///     /// The order to refund.
    ///     order_id: u64,
    /// }
    ///
    /// let refund = Tool::typed("refund", "Refund an order", |args: Refund, call: ToolCall| async move {
    ///     Ok::<_, String>(json!({"refunded": args.order_id, "key": call.idempotency_key}))
    /// })
    /// .requires_approval();
    /// let schema = refund.definition().input_schema.clone().unwrap();
    /// assert_eq!(schema["properties"]["order_id"]["type"], "integer");
    ///
    /// let mut args = JsonObject::new();
    /// args.insert("order_id".into(), json!("forty-two"));
    /// let call = ToolCall::new("c1", "refund", args);
    /// let r = futures::executor::block_on(refund.run(call, ToolContext::default()));
    /// assert!(r.is_error && r.error.starts_with("invalid arguments"));
    /// ```
    pub fn typed<A, F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Serialize,
        E: std::fmt::Display,
    {
        let schema = match serde_json::to_value(schemars::schema_for!(A)) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => JsonObject::new(),
        };
        let f = std::sync::Arc::new(f);
        Tool::new(
            name,
            description,
            move |call: ToolCall, _cx: ToolContext| {
                let f = std::sync::Arc::clone(&f);
                async move {
                    let args = match serde_json::from_value::<A>(serde_json::Value::Object(
                        call.args.clone(),
                    )) {
                        Ok(a) => a,
                        Err(e) => {
                            return ToolResult::error(&call.id, format!("invalid arguments: {e}"));
                        }
                    };
                    let id = call.id.clone();
                    match f(args, call).await {
                        Ok(out) => match serde_json::to_value(out) {
                            Ok(v) => ToolResult::ok_json(id, v),
                            Err(e) => ToolResult::error(id, format!("the tool's output: {e}")),
                        },
                        Err(e) => ToolResult::error(id, e.to_string()),
                    }
                }
            },
        )
        .with_input_schema(schema)
    }
}
