//! The tool-call rules every host enforces, written once.
//!
//! `sink.tool_call(call)` asks the host to run a tool. Before anything runs, every host —
//! the agentsessions controller, the jambonz and TanStack drivers, the UHP server and
//! [`RecordingSink`](crate::testing::RecordingSink) — applies:
//!
//! 1. [`check_call`]: the call says the host runs it
//!    ([`ControllerMediated`](Mediation::ControllerMediated) or
//!    [`RequiresApproval`](Mediation::RequiresApproval)), carries an idempotency key (the host
//!    deduplicates a re-driven call on session + key), and, when gated, a call id (the
//!    approval names the call). Otherwise it is refused with [`SinkError::Rejected`] and
//!    nothing is recorded or run. These are agentsessions' rules, with its words.
//! 2. [`gate`]: a call is gated when the call *or the tool* requires approval. A tool
//!    registered with [`Tool::requires_approval`](super::Tool::requires_approval) is gated
//!    even when the agent's call says only `ControllerMediated`, so an agent cannot skip the
//!    gate by accident. A gated call runs only after an approval: the host asks a person
//!    where its protocol can (agentsessions parks the turn; TanStack opens a wait), and
//!    otherwise applies its [`ApprovalPolicy`] (jambonz: deny by default). A denied call
//!    never runs, and the agent gets [`ToolResult::denied`](crate::message::ToolResult::denied), which it can speak about.
//!
//! A gated tool never runs silently on any host.
//!
//! ```
//! use harness_core::message::{JsonObject, Mediation, ToolCall, ToolResult};
//! use harness_core::tool::rules::{self, ApprovalPolicy, Gate};
//! use harness_core::tool::{Tool, Tools};
//!
//! let tools = Tools::new()
//!     .with(Tool::sync("refund", "Refund an order", |c| ToolResult::ok(&c.id, JsonObject::new()))
//!         .requires_approval());
//! let call = ToolCall::new("call_1", "refund", JsonObject::new()).controller_mediated("x1");
//! rules::check_call(&call).unwrap();
//! let gated = match rules::gate(call, &tools) {
//!     Gate::NeedsApproval(c) => c, // the tool is gated even though the call did not say so
//!     Gate::Run(_) => unreachable!(),
//! };
//! assert_eq!(gated.mediation, Mediation::RequiresApproval);
//! // A host with no way to ask a person: its policy decides, deny by default.
//! let denial = match ApprovalPolicy::default().decide(&gated) {
//!     Err(reason) => ToolResult::denied(&gated.id, &reason),
//!     Ok(()) => unreachable!(),
//! };
//! assert!(denial.is_error);
//! ```

use std::fmt;
use std::sync::Arc;

use super::Tools;
use crate::harness::SinkError;
use crate::message::{Mediation, ToolCall};

/// Checks the rules every host applies to `sink.tool_call` before anything is recorded or
/// run (see the [module docs](self)).
pub fn check_call(call: &ToolCall) -> Result<(), SinkError> {
    if !call.mediation.is_host_executed() {
        return Err(SinkError::Rejected(
            "unmediated tool call: sink.tool_call needs CONTROLLER_MEDIATED or REQUIRES_APPROVAL (run it yourself and sink.report it)".into(),
        ));
    }
    if call.idempotency_key.is_empty() {
        return Err(SinkError::Rejected("missing idempotency key".into()));
    }
    if call.mediation == Mediation::RequiresApproval && call.id.is_empty() {
        return Err(SinkError::Rejected(
            "an approval-gated call needs a call id".into(),
        ));
    }
    Ok(())
}

/// What a host does with a checked call.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    /// Run it now.
    Run(ToolCall),
    /// Run it only after an approval; the call's mediation is
    /// [`RequiresApproval`](Mediation::RequiresApproval) (as the host records it).
    NeedsApproval(ToolCall),
}

/// Whether `call` must be approved before it runs: when the call or the registered tool of
/// its name requires approval. The stronger of the two wins.
pub fn gate(mut call: ToolCall, tools: &Tools) -> Gate {
    let tool_gated = tools.mediation_of(&call.tool) == Some(Mediation::RequiresApproval);
    if call.mediation == Mediation::RequiresApproval || tool_gated {
        call.mediation = Mediation::RequiresApproval;
        Gate::NeedsApproval(call)
    } else {
        Gate::Run(call)
    }
}

/// A policy's decision function: `Ok(())` approves the call, `Err(reason)` denies it.
pub type Decider = Arc<dyn Fn(&ToolCall) -> Result<(), String> + Send + Sync>;

/// How a host with no way to ask a person decides a gated call. The default denies.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum ApprovalPolicy {
    /// Deny every gated call (the default): the tool never runs, the agent is told.
    #[default]
    Deny,
    /// Approve every gated call. Only for tests and demos.
    Approve,
    /// Decide each call: `Ok(())` approves, `Err(reason)` denies.
    Decide(Decider),
}

impl ApprovalPolicy {
    /// A policy that decides each call with `f`: `Ok(())` approves, `Err(reason)` denies.
    pub fn decide_with(
        f: impl Fn(&ToolCall) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        ApprovalPolicy::Decide(Arc::new(f))
    }

    /// The decision for `call`: `Ok(())` to run it, `Err(reason)` to deny it.
    pub fn decide(&self, call: &ToolCall) -> Result<(), String> {
        match self {
            ApprovalPolicy::Deny => Err(format!(
                "{} needs an approval, and this host has no one to ask",
                call.tool
            )),
            ApprovalPolicy::Approve => Ok(()),
            ApprovalPolicy::Decide(f) => f(call),
        }
    }
}

impl fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApprovalPolicy::Deny => f.write_str("Deny"),
            ApprovalPolicy::Approve => f.write_str("Approve"),
            ApprovalPolicy::Decide(_) => f.write_str("Decide(..)"),
        }
    }
}
