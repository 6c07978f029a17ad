//! # harness-tanstack
//!
//! The TanStack AI harness wire protocol v2: harness.* frames and AG-UI events over SSE, WebSocket and stdio, client and host, sans-IO.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod wire;
pub mod agui;
pub mod catalog;
pub mod client;
pub mod driver;
pub mod frame;
pub mod host;
pub mod http;
pub mod log;
pub mod transport;

pub use harness_core;
pub use wire::{Extra, Json, MAX_SAFE_INTEGER, is_json_pointer};
