//! # harness-core
//!
//! The sans-IO core that every harness-rs protocol crate builds on:
//!
//! - [`sse`]: the WHATWG server-sent events decoder and encoder (UHP streams, TanStack's
//!   `GET events`), exact to the spec's parsing rules and faster than the crates we measured.
//! - [`ndjson`]: one JSON value per line (the TanStack stdio worker).
//! - [`Cursor`]: an opaque stream position: compare, store, send back, never parse.
//! - [`Harness`] / [`EventSink`]: one agent, written once, served over jambonz, TanStack and
//!   agentsessions; [`message`] is the model they share, [`event`] the journal events a
//!   harness sees as history.
//! - [`model`]: the provider trait drivers call, and [`ScriptedModel`],
//!   a deterministic model for tests and demos; [`openai`]: a real one, the OpenAI Chat
//!   Completions wire format (OpenAI, vLLM, Ollama, llama.cpp…), its codec sans-IO and its
//!   HTTP transport behind the `openai` feature.
//! - [`tool`]: a [`Tool`] is its definition and its code; [`Tools`] is the one registry
//!   every host takes, and [`tool::rules`] the tool-call rules every host enforces
//!   (mediation, idempotency keys, approval gating).
//! - [`interaction`]: what an agent can do beyond model calls, text and tools where its host
//!   offers it (questions, hand-offs, platform commands, reasoning, state, steps), each
//!   answered [`SinkError::Unsupported`] where it does not.
//! - [`tape`]: park and drive again, so a turn waiting for an approval or an answer resumes
//!   without the agent knowing.
//! - [`clock`]: monotonic time for machines, wall-clock time for records: two names.
//! - [`testing`]: [`RecordingSink`](testing::RecordingSink), to unit-test an agent without
//!   any protocol, with the strictest host's rules; [`agent`]: a reference
//!   model-and-tools agent.
//! - [`wire`]: the JSON machinery of the protocol crates' wire types: open objects read in
//!   one pass with unknown keys kept ([`wire_struct!`]), raw JSON kept as written, unions read
//!   by their tag without buffering ([`wire_union!`], [`wire::Tagged`]).
//!
//! Nothing here opens a socket, spawns a task, sleeps or reads a clock: bytes come in
//! through `push`, events go out through `poll_*`, and you own the I/O. [`run_loop`] states
//! the contract every state machine of every harness-rs crate follows (the order of
//! `handle_*` and `poll_*`, time passed in and only moving forward, drain after every input).
//!
//! ```
//! use harness_core::sse::SseDecoder;
//!
//! // Bytes from any HTTP client, in whatever chunks it hands them over.
//! let body: &[&[u8]] = &[b"id: 1\r\ndata: {\"type\":\"response.created\",", b"\"sequence_number\":0}\r\n\r\n"];
//!
//! let mut dec = SseDecoder::new();
//! let mut events = Vec::new();
//! for chunk in body {
//!     dec.push(chunk);
//!     while let Some(ev) = dec.poll_event()? {
//!         events.push(ev);
//!     }
//! }
//! dec.finish()?;
//! let v: serde_json::Value = serde_json::from_str(events[0].data()).unwrap();
//! assert_eq!(v["type"], "response.created");
//! assert_eq!(dec.last_event_id(), Some("1")); // what to send as Last-Event-ID
//! # Ok::<(), harness_core::sse::SseError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agent;
mod buffer;
pub mod clock;
pub mod cursor;
pub mod event;
pub mod harness;
pub mod interaction;
pub mod message;
pub mod model;
pub mod ndjson;
pub mod openai;
#[cfg(feature = "postgres")]
pub mod pg;
mod proto_json;
pub mod run_loop;
pub mod sse;
pub mod tape;
pub mod testing;
pub mod tool;
pub mod wire;

pub use cursor::Cursor;
pub use event::{Event, EventBody};
pub use harness::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, History, IdentityContext,
    Resumability, SinkError, Start,
};
pub use interaction::{Command, CommandResult, Feature};
pub use message::{Message, ToolCall, ToolResult};
pub use model::{Model, ScriptedModel};
pub use proto_json::{Timestamp, TimestampError};
pub use tool::{Tool, Tools};

/// What the macros of [`wire`] name through `$crate`, so that a crate using them need not
/// depend on `serde` or `serde_json` itself. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use serde;
    pub use serde_json;
}
