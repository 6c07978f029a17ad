//! # harness-jambonz
//!
//! The jambonz harness protocol: JSON text frames over one WebSocket per phone call
//! (subprotocol `harness.jambonz.org`, protocol 1), both sides, sans-IO.
//!
//! | layer | modules |
//! | --- | --- |
//! | codec | [`frame`] ([`JambonzMessage`], [`HarnessMessage`]: every message of the spec, unknown types and fields kept), [`session`], [`turn`], [`reply`], [`tool`], [`command`], [`event`], [`turn_record`] |
//! | harness side | [`harness_side::HarnessCall`] (one call: frames in, events out, actions in, frames out, the spec's rules enforced), [`history`] (what the caller heard), [`early_start`], [`upgrade`] (the Bearer-secret / subprotocol check) |
//! | jambonz side | [`simulator::Simulator`]: a scripted call with jambonz's floor, barge-in, tool and deadline rules, on explicit time |
//! | driver | [`driver::serve`]: any [`harness_core::Harness`] served over a `Stream`/`Sink` of frames, runtime-agnostic, with the harness's own tools run locally, the platform's sent as `tool:call`, gated calls decided by a policy, `sink.command` as `command`; [`testing::simulate_call`]: driver + simulator on a virtual clock |
//! | runtime (feature `tokio`; `tls` for `wss://`) | `server::JambonzServer`: an agent served on a TCP listener, one task per call, with the upgrade check, deadlines, limits and a graceful shutdown; `client::Caller`: the simulator calling a harness URL over a real socket |
//! | telemetry | [`telemetry`]: `tracing` spans of the driver (`jambonz.call`, `jambonz.turn`, `jambonz.model`, `jambonz.tool`; fields `call_sid`, `turn_id`) and `metrics` (open calls, turns by outcome, first-chunk latency, tool calls, bytes out); facades, no I/O |
//!
//! In the default build nothing here opens a socket, spawns a task, sleeps or reads the
//! clock: `now` comes in, frames go out through `poll_transmit`, and the app owns the
//! WebSocket. The optional `tokio` feature is the runtime half that puts it on a real one
//! (the examples `jambonz_server` and `jambonz_call` of the workspace use it).
//!
//! ## Test an agent as a phone call, without jambonz
//!
//! ```
//! use std::time::{Duration, Instant};
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::model::ScriptedModel;
//! use harness_core::{Tool, Tools};
//! use harness_jambonz::driver::ServeConfig;
//! use harness_jambonz::simulator::{Script, SimConfig, Simulator};
//! use harness_jambonz::testing::simulate_call;
//! use serde_json::json;
//!
//! // The platform's tools, which jambonz runs on tool:call (here, the simulator does).
//! let platform = Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
//!     Ok(json!({"weekdays": "8am to 6pm"}))
//! }));
//! let agent = ToolLoopAgent::new("faq").with_tools(&platform);
//! let model = ScriptedModel::new()
//!     .reply("Thanks for calling Acme.")
//!     .tool_call("get_hours", json!({}))
//!     .reply("We're open eight to six on weekdays.")
//!     .reply("You're welcome.");
//!
//! // The caller: the greeting, a question, then talking over the answer after 1.1 s.
//! let script = Script::new()
//!     .greeting()
//!     .say("When are you open")
//!     .barge_in(Duration::from_millis(1100), "Thanks");
//! let start = Instant::now();
//! let sim = Simulator::new(start, SimConfig::default(), script).with_tools(platform);
//! // The harness's own tools (none here) run in the driver and are never sent.
//! let call = simulate_call(agent, model, Tools::new(), sim, start, ServeConfig::default());
//!
//! let t = &call.transcript;
//! assert_eq!(t.heard(), ["Thanks for calling Acme.", "We're open eight", "You're welcome."]);
//! assert_eq!(t.turn(2).unwrap().completion_reason, "barge_in");
//! assert!(t.violations.is_empty());
//! ```
//!
//! ## The harness side by hand
//!
//! ```
//! use std::time::Instant;
//! use harness_jambonz::harness_side::{ActionError, HarnessCall, CallEvent, Transmit};
//!
//! let now = Instant::now();
//! let mut call = HarnessCall::new();
//! call.handle_frame(now, r#"{"type":"session:start","call_sid":"CA1","protocol":1}"#)?;
//! // A reply for a turn that has not started is refused, not sent.
//! assert_eq!(call.start_reply(Some(2)), Err(ActionError::TurnNotStarted(2)));
//! call.handle_frame(now, r#"{"type":"turn:start","call_sid":"CA1","turn_id":2,"input":{"type":"speech","text":"When are you open"}}"#)?;
//! let r = call.start_reply(Some(2))?;
//! call.push_chunk(&r, "We're open ")?;
//! let sent: Vec<Transmit> = std::iter::from_fn(|| call.poll_transmit()).collect();
//! assert_eq!(sent.len(), 1); // the app writes it to the socket
//! call.push_chunk(&r, "eight ")?; // queued, not yet taken
//! call.handle_frame(now, r#"{"type":"turn:cancel","call_sid":"CA1","turn_id":2,"reason":"barge_in"}"#)?;
//! // Nothing more goes out for a cancelled turn: not the queued chunk, not a new one.
//! assert_eq!(call.push_chunk(&r, "to six."), Err(ActionError::TurnCancelled(2)));
//! assert_eq!(call.poll_transmit(), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;

#[cfg(feature = "tokio")]
pub mod client;
pub mod command;
pub mod driver;
pub mod early_start;
pub mod event;
pub mod frame;
pub mod harness_side;
pub mod history;
mod lazy_map;
pub mod reply;
#[cfg(feature = "tokio")]
pub mod server;
pub mod session;
pub mod simulator;
pub mod telemetry;
pub mod testing;
pub mod tool;
pub mod turn;
pub mod turn_record;
pub mod upgrade;
#[cfg(feature = "tokio")]
mod ws;

// The types a user names first, at the root; everything else stays in its module.
#[cfg(feature = "tokio")]
pub use client::Caller;
pub use command::JambonzCommand;
pub use driver::{CallReport, ServeConfig, ServeError, serve};
pub use event::JambonzEvent;
pub use frame::{HarnessMessage, JambonzMessage};
pub use harness_side::{CallEvent, HarnessCall, HarnessConfig, JambonzFrameError, Transmit};
pub use history::CallHistory;
#[cfg(feature = "tokio")]
pub use server::{JambonzServer, JambonzServerConfig};
pub use simulator::{CallTranscript, Script, SimConfig, Simulator};
