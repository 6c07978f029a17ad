//! The three reference harnesses of the spec: [`EchoHarness`] (stateless replay),
//! [`ChatHarness`] (conversation with a per-execution system prompt) and [`CounterHarness`]
//! (memory snapshot; never reads History); and, re-exported from harness-core, the tour's FAQ agent
//! ([`FaqAgent`], with its tools and scripted model), the one every example and test serves.

mod chat;
mod counter;
mod echo;

pub use chat::{ChatHarness, ConfigError, parse_system_prompt};
pub use counter::CounterHarness;
pub use echo::EchoHarness;
/// The tour's FAQ agent, written once in harness-core ([`harness_core::agent::faq`]).
pub use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
