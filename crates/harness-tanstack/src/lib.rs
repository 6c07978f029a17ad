//! # harness-tanstack
//!
//! The TanStack AI harness wire protocol v2: harness.* frames and AG-UI events over SSE, WebSocket and stdio, client and host, sans-IO.
//!
//! This crate is being built; its issue fills it in. It depends on
//! [`harness_core`] for the shared codecs, cursors and the `Harness` trait.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;
