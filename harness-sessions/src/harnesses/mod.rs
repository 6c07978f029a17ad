//! The three reference harnesses of the spec: [`EchoHarness`] (stateless replay),
//! [`ChatHarness`] (conversation with a per-execution system prompt) and [`CounterHarness`]
//! (memory snapshot; never reads History).

mod chat;
mod counter;
mod echo;

pub use chat::{ChatHarness, ConfigError, parse_system_prompt};
pub use counter::CounterHarness;
pub use echo::EchoHarness;
