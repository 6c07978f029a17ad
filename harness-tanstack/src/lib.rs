//! # harness-tanstack
//!
//! The TanStack AI harness wire protocol, version 2: `harness.*` frames and AG-UI 1.0 events
//! over SSE, a WebSocket and stdio NDJSON, both sides, sans-IO. Nothing here opens a socket,
//! spawns a task, sleeps or reads a clock: bytes and frames come in through methods, time
//! comes in as `now: Instant`, and what to send goes out through `poll_*`.
//!
//! - [`agui`]: the 31 AG-UI 1.0 events and their types, strict to the reference schemas,
//!   unknown keys kept; [`catalog`]: the `harness.*` CUSTOM events, typed.
//! - [`frame`], [`transport`]: the frames both ways, and their SSE / WebSocket / NDJSON forms.
//! - [`host`]: the host state machine over an [`log::EventLog`] ([`log::MemoryLog`], the
//!   durable [`log::FileLog`], or, with the `postgres` feature, `log::PgLog`, one log shared
//!   by several hosts: the log is the one place the host's storage does I/O); [`client`]: the
//!   client state machine.
//! - [`driver`]: serve any [`harness_core::Harness`] as a host (futures only), with the core
//!   `Tools` and their rules; a turn that waits for a person (an approval, a question, a
//!   hand-off) ends with its interrupt, and a `resolve` or `answer` drives it again
//!   ([`host::Wait`], kept durably with the thread by a [`log::FileLog`]).
//! - `server` (feature `axum`): the runtime adapter, an axum `Router` carrying every route
//!   of the spec and a hyper server bounded against hostile clients; `stdio` (feature
//!   `tokio`): the stdio worker runner.
//!
//! - [`telemetry`]: `tracing` spans (`harness.operation` per turn, linked to the input's
//!   W3C `traceparent` with the feature `opentelemetry`; `harness.model`, `harness.tool`,
//!   `harness.connection`) and `metrics` (threads, connections, turns, first-chunk latency,
//!   tool calls, bytes and events out, slow consumers); facades, no I/O.
//!
//! **Several hosts, one thread owner.** On a log that several hosts share (`log::PgLog`), one
//! host at a time runs a thread's turns: it holds the thread's *lease* (holder, epoch,
//! expiry on the database's clock). The storage decides and the machine reacts, so the host
//! stays sans-IO: before it writes an input's records the host asks the log
//! ([`log::EventLog::lease`]); the log answers `Held`, `Acquired {epoch, reason}` (it just
//! appended `harness.ownership.changed`, and the host reads the thread again from the log,
//! closing as `interrupted` what a dead owner left open) or `HeldBy {holder}` (the input is
//! forwarded to that host through the log and answered with its receipt,
//! [`host::Host::control_routed`], [`driver::Service::control_forwarding`]; a `POST run` is
//! started there with no stream attached and streamed here from the log,
//! [`host::Host::run_routed`], [`driver::Service::run_forwarding`]). Every append is
//! fenced by the epoch in the appending statement, so a paused, taken-over host writes
//! nothing more ([`log::LogError::Fenced`]). Renewing (every TTL/3) is a task of the adapter
//! (`PgLog::keep_leases`); the host releases a thread's lease when the thread goes idle, and
//! `release_all` on a graceful shutdown. A memory or file log is one process: its lease is
//! always `Held`, and nothing changes for it.
//!
//! The types named first are at the root too: [`Host`], [`HostConfig`], [`Client`],
//! [`ClientConfig`], [`Service`], [`AguiEvent`], [`HarnessEvent`], [`MemoryLog`], …
//!
//! A host and a client, talking over a "socket" that is two function calls:
//!
//! ```
//! use std::time::Instant;
//! use harness_tanstack::{
//!     AguiEvent, Client, ClientConfig, ClientEvent, Host, HostConfig, HostEvent, Input, MemoryLog,
//!     Transport, TurnOutcome,
//! };
//!
//! let now = Instant::now();
//! let mut host = Host::new(HostConfig::default(), MemoryLog::default());
//! let mut client = Client::new(ClientConfig::new("thread-1"));
//! let conn = host.connect(now, Transport::WebSocket, None, "upgrade-1");
//!
//! client.connect(now);                               // harness.subscribe
//! client.send_input(Input::prompt("Hello"));   // harness.input with a requestId and an inputId
//! while let Some(frame) = client.poll_transmit() {
//!     host.handle_frame(now, conn, &frame);
//! }
//!
//! // The host asks the application to run the turn; its events go to the log.
//! let mut turn = None;
//! let mut to_client = Vec::new();
//! while let Some(ev) = host.poll_event() {
//!     match ev {
//!         HostEvent::StartTurn(t) => turn = Some(t),
//!         HostEvent::Wake(c) => while let Some(b) = host.poll_transmit(now, c) { to_client.push(b) },
//!         _ => {}
//!     }
//! }
//! let turn = turn.unwrap();
//! host.emit(now, "thread-1", &turn.operation_id, AguiEvent::text_content("m-1", "Hi")).unwrap();
//! host.finish_turn(now, "thread-1", &turn.operation_id, TurnOutcome::Completed).unwrap();
//! while let Some(b) = host.poll_transmit(now, conn) { to_client.push(b) }
//!
//! for b in &to_client {
//!     client.handle_frame(now, std::str::from_utf8(b).unwrap());
//! }
//! let text: String = std::iter::from_fn(|| client.poll_event())
//!     .filter_map(|e| match e {
//!         ClientEvent::Event(d) => match d.event { AguiEvent::TextMessageContent(c) => Some(c.delta), _ => None },
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(text, "Hi");
//! assert!(client.last_cursor().is_some()); // what to send back after a reconnect
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agui;
pub mod catalog;
pub mod client;
pub mod driver;
pub mod frame;
pub mod host;
pub mod http;
pub mod log;
mod lru;
#[cfg(feature = "axum")]
pub mod server;
#[cfg(feature = "tokio")]
pub mod stdio;
pub mod telemetry;
pub mod transport;
mod wire;

// The types a user names first, at the root; everything else stays in its module.
pub use agui::{AguiEvent, AguiMessage};
pub use catalog::HarnessEvent;
pub use client::{Client, ClientConfig, ClientEvent, DeliveredEvent};
pub use driver::{Service, run_turns};
pub use frame::{ClientFrame, FrameError, HostFrame, Input};
pub use host::{Host, HostConfig, HostError, HostEvent, Transport, TurnOutcome, TurnRequest};
pub use log::{EventLog, FileLog, MemoryLog};
pub use transport::SseFrameDecoder;

pub use harness_core;
pub use harness_core::wire::{Extra, Json, UnknownObject};
pub use wire::{MAX_SAFE_INTEGER, is_json_pointer};
