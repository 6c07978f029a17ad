//! Shared by the `tanstack_host` example: the tour's FAQ agent (`harness_core::agent::faq`,
//! the one every host serves) as the example wires it. Nothing of the agent lives here.
//!
//! - "What are your hours on Saturday?" answers at once through `get_hours`.
//! - "What are your hours?" (no day named) asks "Which day?" (`harness.question`); the
//!   `answer` input drives the turn on.
//! - "Please refund order 42" calls `refund(order_id)`, gated: the run ends waiting for an
//!   approval (`harness.wait.opened` kind `approval`), and the tool runs once after a
//!   `resolve` that approves it, never after one that does not.
//! - "... a person ..." hands the conversation to a person (`harness.handoff`, a wait of kind
//!   `human`); "bye" tries the platform's `hangup` command, which a chat host does not have.
//! - Anything else: "You said: ...".
#![allow(dead_code)]

use std::sync::Arc;

use harness_core::Tools;
pub use harness_core::agent::faq::{FaqAgent, Refunds, faq_model};

/// The agent's tools, one registry for the agent and the host, paying refunds through
/// `refunds` (`harness_core::agent::faq::faq_tools`).
pub fn faq_tools(refunds: Arc<Refunds>) -> Tools {
    harness_core::agent::faq::faq_tools(&refunds)
}

/// The FAQ agent offering the FAQ tools as registered (it calls `refund` gated).
pub fn faq_agent(_tools: &Tools) -> FaqAgent {
    FaqAgent::new()
}
