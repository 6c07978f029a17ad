//! Tools: a tool is its definition and its code together, and [`Tools`] is the one registry
//! every host takes.
//!
//! The same [`Tools`] value is what an agent offers its model ([`Tools::definitions`], used
//! by [`ToolLoopAgent::with_tools`](crate::agent::ToolLoopAgent::with_tools)) and what a host
//! runs when the agent calls `sink.tool_call` ([`Tools::call`]): the [`RecordingSink`](crate::testing::RecordingSink) of a
//! unit test, the jambonz driver (the harness's own tools) and the jambonz simulator (the
//! platform's tools), the TanStack driver, and the agentsessions executor (with receipts as a
//! layer over it). A name is written once, so the definition and the code cannot drift.
//!
//! A tool's code is async ([`ToolHandler`]); [`Tool::sync`] and [`Tool::json`] take plain
//! closures, and `Tool::typed` (feature `schemars`) reads typed arguments and derives the
//! JSON Schema the model sees.
//!
//! Every host applies the same rules to a call before it runs anything: see [`rules`].
//!
//! ```
//! use harness_core::message::{JsonObject, Mediation, ToolCall, ToolResult};
//! use harness_core::tool::{Tool, ToolContext, Tools};
//! use serde_json::json;
//!
//! let tools = Tools::new()
//!     .with(Tool::json("get_hours", "Opening hours for a day", |args| {
//!         let day = args.get("day").and_then(|d| d.as_str()).unwrap_or("today");
//!         Ok(json!({"day": day, "hours": "8am to 6pm"}))
//!     }))
//!     .with(
//!         Tool::new("refund", "Refund an order", |call: ToolCall, _cx: ToolContext| async move {
//!             // A real effect takes the key, so that a re-driven call is not paid twice.
//!             let key = call.idempotency_key.clone();
//!             ToolResult::ok_json(&call.id, json!({"refunded": call.args["order_id"], "key": key}))
//!         })
//!         .requires_approval(),
//!     );
//! assert_eq!(tools.get("refund").unwrap().mediation(), Mediation::RequiresApproval);
//! assert_eq!(tools.definitions().len(), 2); // what the model is offered
//!
//! let mut args = JsonObject::new();
//! args.insert("day".into(), json!("Saturday"));
//! let call = ToolCall::new("call_1", "get_hours", args).controller_mediated("x1");
//! let result = futures::executor::block_on(tools.call(call, ToolContext::default()));
//! assert_eq!(result.output.unwrap()["day"], "Saturday");
//! ```

pub mod rules;
#[cfg(feature = "schemars")]
mod typed;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::message::{JsonObject, Mediation, ToolCall, ToolDefinition, ToolResult, ToolSpec};

/// Where a call runs, as the host binds it (never chosen by the harness).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolContext {
    /// The session (call, thread) the call belongs to: with the call's idempotency key, the
    /// scope an effect is deduplicated on.
    pub session_uid: String,
    /// The execution (turn) that made the call.
    pub execution_id: String,
}

impl ToolContext {
    /// The context of a call made in `session_uid` by the turn `execution_id`.
    pub fn new(session_uid: impl Into<String>, execution_id: impl Into<String>) -> Self {
        ToolContext {
            session_uid: session_uid.into(),
            execution_id: execution_id.into(),
        }
    }
}

/// A tool's code: runs one call and returns its result.
///
/// A tool that ran and failed returns a [`ToolResult`] with `is_error` (the agent reads it
/// and can say so); it never panics the host. The call carries its idempotency key: an
/// effect that must not happen twice (a payment, a mail) passes it to the service that
/// performs it, since a host can re-drive a call whose result it did not get to record.
///
/// Implemented for every `Fn(ToolCall, ToolContext) -> impl Future<Output = ToolResult>`.
pub trait ToolHandler: Send + Sync {
    /// Runs `call`.
    fn call(&self, call: ToolCall, cx: ToolContext) -> BoxFuture<'static, ToolResult>;
}

impl<F, Fut> ToolHandler for F
where
    F: Fn(ToolCall, ToolContext) -> Fut + Send + Sync,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    fn call(&self, call: ToolCall, cx: ToolContext) -> BoxFuture<'static, ToolResult> {
        self(call, cx).boxed()
    }
}

/// A synchronous tool's code: a function of the borrowed call.
type SyncFn = dyn Fn(&ToolCall) -> ToolResult + Send + Sync;

/// A tool's code as it was given: async (it takes the call), or synchronous (it borrows it,
/// so a host that keeps the call after running it never copies it).
#[derive(Clone)]
enum Code {
    Async(Arc<dyn ToolHandler>),
    Sync(Arc<SyncFn>),
}

/// A tool: its definition (what the model is offered), its default mediation (who runs it,
/// and whether a person must approve it) and its code. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    definition: ToolDefinition,
    mediation: Mediation,
    code: Code,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.definition.name)
            .field("mediation", &self.mediation)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool run by the host ([`Mediation::ControllerMediated`]) with async code.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl ToolHandler + 'static,
    ) -> Self {
        Tool {
            definition: ToolDefinition::new(name, description),
            mediation: Mediation::ControllerMediated,
            code: Code::Async(Arc::new(handler)),
        }
    }

    /// A tool whose code is a synchronous function of the call (it must not block: it runs
    /// inside the host's async driver).
    pub fn sync(
        name: impl Into<String>,
        description: impl Into<String>,
        f: impl Fn(&ToolCall) -> ToolResult + Send + Sync + 'static,
    ) -> Self {
        Tool {
            definition: ToolDefinition::new(name, description),
            mediation: Mediation::ControllerMediated,
            code: Code::Sync(Arc::new(f)),
        }
    }

    /// A tool whose code maps the arguments to a JSON value (an object is the output, any
    /// other value is wrapped as `{"result": value}`) or to an error message.
    pub fn json(
        name: impl Into<String>,
        description: impl Into<String>,
        f: impl Fn(&JsonObject) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Tool::sync(name, description, move |call| match f(&call.args) {
            Ok(v) => ToolResult::ok_json(&call.id, v),
            Err(e) => ToolResult::error(&call.id, e),
        })
    }

    /// Sets the JSON Schema of the arguments offered to the model.
    #[must_use]
    pub fn with_input_schema(mut self, schema: JsonObject) -> Self {
        self.definition.input_schema = Some(schema);
        self
    }

    /// Gates the tool: the host runs it only after a person (or the host's policy) approves
    /// the call ([`Mediation::RequiresApproval`]). A gated call never runs silently: see
    /// [`rules`].
    #[must_use]
    pub fn requires_approval(mut self) -> Self {
        self.mediation = Mediation::RequiresApproval;
        self
    }

    /// Sets who runs the tool.
    #[must_use]
    pub fn with_mediation(mut self, mediation: Mediation) -> Self {
        self.mediation = mediation;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// What the model is offered.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// Who runs it by default.
    pub fn mediation(&self) -> Mediation {
        self.mediation
    }

    /// Its declaration in a [`Descriptor`](crate::Descriptor).
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.definition.name.clone(),
            description: self.definition.description.clone(),
            mediation: self.mediation,
        }
    }

    /// Runs `call` with this tool's code. The result answers the call (its id is the call's
    /// when the code left it empty).
    pub fn run(&self, call: ToolCall, cx: ToolContext) -> ToolFuture {
        match &self.code {
            Code::Sync(f) => ToolFuture::ready(answer(f(&call), &call)),
            Code::Async(h) => {
                let id = call.id.clone();
                ToolFuture::running(id, h.call(call, cx))
            }
        }
    }

    /// [`run`](Self::run) for a host that keeps the call: synchronous code borrows it, and
    /// only async code (which takes it) gets a copy of the call and the context.
    pub fn run_ref(&self, call: &ToolCall, cx: &ToolContext) -> ToolFuture {
        match &self.code {
            Code::Sync(f) => ToolFuture::ready(answer(f(call), call)),
            Code::Async(h) => {
                ToolFuture::running(call.id.clone(), h.call(call.clone(), cx.clone()))
            }
        }
    }
}

/// `result` as the answer to `call`: its id is the call's when the code left it empty.
fn answer(mut result: ToolResult, call: &ToolCall) -> ToolResult {
    if result.id.is_empty() {
        result.id.clone_from(&call.id);
    }
    result
}

/// The run of one tool call ([`Tool::run`], [`Tools::call`]): a future of its result,
/// ready at once for synchronous code (nothing is boxed), the tool's own future for async
/// code.
#[must_use = "a tool run does nothing unless awaited"]
pub struct ToolFuture(Run);

enum Run {
    Ready(Option<ToolResult>),
    Running {
        id: String,
        fut: BoxFuture<'static, ToolResult>,
    },
}

impl ToolFuture {
    fn ready(result: ToolResult) -> Self {
        ToolFuture(Run::Ready(Some(result)))
    }

    fn running(id: String, fut: BoxFuture<'static, ToolResult>) -> Self {
        ToolFuture(Run::Running { id, fut })
    }

    /// The result, when the run is already over (synchronous code); otherwise the run
    /// itself, boxed, to await.
    pub fn ready_or_boxed(self) -> Result<ToolResult, BoxFuture<'static, ToolResult>> {
        match self.0 {
            Run::Ready(Some(r)) => Ok(r),
            run => Err(ToolFuture(run).boxed()),
        }
    }
}

impl fmt::Debug for ToolFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Run::Ready(r) => f.debug_tuple("Ready").field(r).finish(),
            Run::Running { id, .. } => f.debug_struct("Running").field("id", id).finish(),
        }
    }
}

impl Future for ToolFuture {
    type Output = ToolResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ToolResult> {
        match &mut self.get_mut().0 {
            Run::Ready(r) => match r.take() {
                Some(r) => Poll::Ready(r),
                // Polled again after it finished: a contract breach of the caller's, never
                // a panic of ours; it never finishes twice.
                None => Poll::Pending,
            },
            Run::Running { id, fut } => match fut.poll_unpin(cx) {
                Poll::Ready(mut r) => {
                    if r.id.is_empty() {
                        r.id = std::mem::take(id);
                    }
                    Poll::Ready(r)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Up to this many tools, [`Tools::get`] scans them instead of searching: most names differ
/// in length, and an equality test stops at the lengths.
const LINEAR_LOOKUP_MAX: usize = 8;

/// The tools of an agent, by name: one registry that every host takes. Cheap to clone
/// (the tools are shared, not copied: a host hands each turn the same registry).
#[derive(Clone, Debug, Default)]
pub struct Tools {
    /// Sorted by name, one tool per name (looked up by binary search, without allocating);
    /// `None` when there are none (an empty registry allocates nothing).
    by_name: Option<Arc<Vec<Tool>>>,
}

impl Tools {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool (replacing one of the same name).
    #[must_use]
    pub fn with(mut self, tool: Tool) -> Self {
        self.insert(tool);
        self
    }

    /// Adds a tool (replacing one of the same name).
    pub fn insert(&mut self, tool: Tool) {
        let Some(tools) = &mut self.by_name else {
            // The first tool: one allocation of exactly one slot (most registries hold a
            // few tools, and a host builds one per session or per test).
            self.by_name = Some(Arc::new(vec![tool]));
            return;
        };
        let tools = Arc::make_mut(tools);
        match tools.binary_search_by(|t| t.name().cmp(tool.name())) {
            Ok(i) => tools[i] = tool,
            Err(i) => tools.insert(i, tool),
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        let tools = self.as_slice();
        if tools.len() <= LINEAR_LOOKUP_MAX {
            // A few names: comparing for equality (lengths first) beats ordering them.
            return tools.iter().find(|t| t.name() == name);
        }
        tools
            .binary_search_by(|t| t.name().cmp(name))
            .ok()
            .and_then(|i| tools.get(i))
    }

    fn as_slice(&self) -> &[Tool] {
        self.by_name.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// The tools, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.as_slice().iter()
    }

    /// What the model is offered: each tool's definition, by name.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.iter().map(|t| t.definition.clone()).collect()
    }

    /// Each tool's declaration, for a [`Descriptor`](crate::Descriptor).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.iter().map(Tool::spec).collect()
    }

    /// The mediation a call of `name` needs at least: the tool's own (an unknown tool
    /// needs none).
    pub fn mediation_of(&self, name: &str) -> Option<Mediation> {
        self.get(name).map(Tool::mediation)
    }

    /// Runs `call` with the tool of its name; an unknown tool is an error result
    /// (`unknown tool: <name>`), never a panic. Apply [`rules::check_call`] first: this runs
    /// the code and nothing else.
    pub fn call(&self, call: ToolCall, cx: ToolContext) -> ToolFuture {
        match self.get(&call.tool) {
            Some(t) => t.run(call, cx),
            None => ToolFuture::ready(unknown(&call)),
        }
    }

    /// [`call`](Self::call) for a host that keeps the call (to record it with its result):
    /// synchronous code borrows it, async code gets a copy ([`Tool::run_ref`]).
    pub fn call_ref(&self, call: &ToolCall, cx: &ToolContext) -> ToolFuture {
        match self.get(&call.tool) {
            Some(t) => t.run_ref(call, cx),
            None => ToolFuture::ready(unknown(call)),
        }
    }
}

fn unknown(call: &ToolCall) -> ToolResult {
    ToolResult::error(&call.id, format!("unknown tool: {}", call.tool))
}

impl FromIterator<Tool> for Tools {
    fn from_iter<I: IntoIterator<Item = Tool>>(iter: I) -> Self {
        let mut t = Tools::new();
        for tool in iter {
            t.insert(tool);
        }
        t
    }
}
