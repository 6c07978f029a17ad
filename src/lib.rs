//! # harness-rs
//!
//! One dependency for every harness-rs crate: sans-IO state machines for the jambonz, TanStack
//! AI harness v2, UHP and agentsessions protocols, and the `Harness` trait that lets one agent
//! be served over all of them. Each crate is also usable on its own.
//!
//! | module | crate | protocol |
//! | --- | --- | --- |
//! | [`core`] | `harness-core` | SSE and NDJSON codecs, cursors, `Harness` / `EventSink`, the message model |
//! | [`jambonz`] | `harness-jambonz` | jambonz voice calls over a WebSocket |
//! | [`tanstack`] | `harness-tanstack` | TanStack AI harness wire protocol v2 |
//! | [`uhp`] | `harness-uhp` | Unified Harness Protocol clients |
//! | [`sessions`] | `harness-sessions` | agentsessions journal: replay, resume, fork, hash chain |
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core as core;
pub use harness_jambonz as jambonz;
pub use harness_sessions as sessions;
pub use harness_tanstack as tanstack;
pub use harness_uhp as uhp;

// The READMEs' Rust blocks are doc tests of this crate (it depends on every crate), so they
// stay compilable and right: `cargo test -p harness-rs --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeRoot;
#[cfg(doctest)]
#[doc = include_str!("../harness-core/README.md")]
struct ReadmeCore;
#[cfg(doctest)]
#[doc = include_str!("../harness-jambonz/README.md")]
struct ReadmeJambonz;
#[cfg(doctest)]
#[doc = include_str!("../harness-tanstack/README.md")]
struct ReadmeTanstack;
#[cfg(doctest)]
#[doc = include_str!("../harness-uhp/README.md")]
struct ReadmeUhp;
#[cfg(doctest)]
#[doc = include_str!("../harness-sessions/README.md")]
struct ReadmeSessions;
