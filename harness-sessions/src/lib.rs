//! # harness-sessions
//!
//! The agentsessions Bring-Your-Own-Harness SPI, host side: a journal with
//! record-before-effect, exact replay, resume, fork, tool mediation, approvals, capability
//! matching and a tamper-evident hash chain. Any [`harness_core::Harness`] runs on it.
//!
//! - [`journal`]: the storage trait ([`Journal`]) with CAS on the expected last seq and a
//!   fence, and two stores: [`MemoryJournal`] and the embedded default [`FileJournal`] (one
//!   append-only file per session, torn tails set aside by a writer and only reported by a
//!   read-only journal, fsync per turn by default); with the `postgres` feature, `PgJournal`
//!   and `PgReceipts`, for several hosts on one PostgreSQL (see [`journal`] for how storage
//!   meets the sans-IO controller).
//! - [`record`] and [`hash`]: records and their `content_hash`, computed exactly as
//!   agentsessions does (RFC 8785 canonical JSON of `{event, prev_hash, seq}`, SHA-256), so
//!   its golden vectors reproduce; [`verify`] names the first record that does not hold.
//! - [`input_hash`]: the model-input hash (I0), Go `encoding/json` of the request, as
//!   agentsessions computes it.
//! - [`controller`]: [`Controller`] runs turns: `exec`, `replay` (never calls the provider),
//!   `resume` (at most one extra provider call, no deduplicated tool effect repeated),
//!   `fork`, `approve`; the agent's tools are a [`harness_core::Tools`] registry, run through
//!   the [`tools`] layer ([`ToolExecutor`](tools::ToolExecutor), receipts with
//!   [`DedupExecutor`](tools::DedupExecutor)) and gated by the same rules as on every host;
//!   [`capabilities`] is placement.
//! - [`telemetry`]: `tracing` spans (`sessions.exec` / `resume` / `replay`, `connect.stream`;
//!   fields `session`, `execution_id`) and `metrics` (turns, journal appends, fences refused,
//!   open Connect streams); facades, no I/O.
//! - [`harnesses`]: the spec's reference harnesses echo, chat and counter.
//!
//! Nothing here opens a socket, spawns a thread or reads a clock (the journal's timestamps
//! are wall-clock time from a [`WallClock`](harness_core::clock::WallClock) the host passes
//! in; the default writes none); the file journal is the one place that does file I/O.
//!
//! ```
//! use std::sync::Arc;
//! use harness_core::model::ScriptedModel;
//! use harness_sessions::{Controller, ExecRequest, MemoryJournal};
//! use harness_sessions::harnesses::ChatHarness;
//!
//! let model = Arc::new(ScriptedModel::new()
//!     .reply("A prime has exactly two divisors.")
//!     .reply("2, 3 and 5."));
//! let host = Controller::builder(MemoryJournal::new())
//!     .model(model.clone()) // by value; an Arc keeps a handle (model.calls() below)
//!     .harness("chat", ChatHarness::new("my-model"))
//!     .build();
//!
//! futures::executor::block_on(async {
//!     host.create_session("s1", Some("chat"))?;
//!     host.exec(ExecRequest::text("s1", "What is a prime number?")
//!         .with_config(r#"{"system_prompt":"Answer concisely."}"#)).await?;
//!     let turn = host.exec(ExecRequest::text("s1", "Give me three examples.")).await?;
//!     assert_eq!(turn.output, "2, 3 and 5.");
//!
//!     // Replay re-runs both turns from the journal: byte-identical, no provider call.
//!     let report = host.replay("s1").await?;
//!     assert_eq!((report.executions, report.provider_calls), (2, 0));
//!
//!     // Fork after the first turn, verify both chains.
//!     host.fork("s1", 5, "s2").await?;
//!     assert_eq!(host.verify("s1")?.records, 10);
//!     assert_eq!(host.verify("s2")?.records, 6);
//!     Ok::<(), harness_sessions::Error>(())
//! }).unwrap();
//! assert_eq!(model.calls(), 2);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capabilities;
pub mod connect;
pub mod controller;
mod depth;
mod envelope;
mod error;
pub mod execution;
pub mod harnesses;
pub mod hash;
pub mod input_hash;
mod jcs;
pub mod journal;
mod journal_error;
mod observer;
pub mod record;
pub mod telemetry;
pub mod testing;
pub mod tools;
pub mod verify;

pub use connect::{
    HarnessConnect, HarnessConnectEvent, HostConnect, HostConnectEvent, RemoteConnection,
    RemoteHarness, SinkReply,
};
pub use controller::{Controller, ExecRequest, TurnReport, TurnStatus};
pub use error::{Code, Error};
pub use journal::{Durability, FileJournal, Journal, JournalError, MemoryJournal};
pub use record::{Record, Seq};

pub use harness_core;
