//! The three reference harnesses of the spec: [`EchoHarness`] (stateless replay),
//! [`ChatHarness`] (conversation with a per-execution system prompt) and [`CounterHarness`]
//! (memory snapshot; never reads History); and the tour's FAQ agent ([`FaqAgent`], with its
//! tools and scripted model), shared by the examples and the tests.

mod chat;
mod counter;
mod echo;
mod faq;

pub use chat::{ChatHarness, ConfigError, parse_system_prompt};
pub use counter::CounterHarness;
pub use echo::EchoHarness;
pub use faq::{DEFAULT_DAY, FaqAgent, NO_HANDOFF, faq_model, faq_tools};
