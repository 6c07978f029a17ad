//! # harness-sessions
//!
//! The agentsessions Bring-Your-Own-Harness journal: record-before-effect, exact replay, resume, fork, approvals and a tamper-evident hash chain.
//!
//! This crate is being built; its issue fills it in. It depends on
//! [`harness_core`] for the shared codecs, cursors and the `Harness` trait.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;
