//! # harness-uhp
//!
//! The client half of the Unified Harness Protocol: SSE stream decoding, task accumulation, dropped-event detection, idempotent retries, sans-IO.
//!
//! This crate is being built; its issue fills it in. It depends on
//! [`harness_core`] for the shared codecs, cursors and the `Harness` trait.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;
