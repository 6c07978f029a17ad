//! Serving a [`Harness`] as a TanStack host, runtime-agnostic (futures only).
//!
//! [`Service`] is the sans-IO [`Host`] behind a mutex, with the wakers of its connections:
//! HTTP handlers and socket loops call it, and read each connection as a
//! [`Stream`] of bytes ([`ConnStream`]), whose polling is the
//! back-pressure signal (bytes count as sent when the stream is polled again). [`run_turns`]
//! is the future that runs the turns the host asks for, with any harness:
//!
//! | the harness does | on the thread |
//! | --- | --- |
//! | `sink.model(req)` | the model streams: `TEXT_MESSAGE_START` / `CONTENT` / `END`, then `harness.usage` |
//! | `sink.output(delta)` | `TEXT_MESSAGE_CONTENT` (a message opened for it) |
//! | `sink.tool_call(call)` | after the core rules ([`check_call`], [`gate`]): `TOOL_CALL_START` / `ARGS` / `END`, the tool of the core [`Tools`] runs, `TOOL_CALL_RESULT` |
//! | `sink.tool_call` of a gated call (the call or the registry gates it) | `TOOL_CALL_START` / `ARGS` / `END`, then the run ends waiting: `harness.wait.opened` kind `approval` and `RUN_FINISHED` with its interrupt (`approval_required`), no result; a `resolve` drives the turn again: the tool runs once (`approved: true`) or never (the agent gets [`ToolResult::denied`]) |
//! | `sink.ask(question)` | the run ends waiting: `harness.question`, `harness.wait.opened` kind `question`; the `answer` input drives the turn again, and `ask` returns it |
//! | `sink.handoff(h)` | `harness.handoff` (`by: "code"`); to a person, a wait of kind `human` the run ends with |
//! | `sink.reasoning(delta)` | `REASONING_START` / `REASONING_MESSAGE_START` / `CONTENT` / `END` / `REASONING_END` around contiguous deltas |
//! | `sink.state(update)` | `STATE_SNAPSHOT`, or `STATE_DELTA` (an operation that is not JSON Patch: `Rejected`, nothing sent) |
//! | `sink.step(step)` | `STEP_STARTED` / `STEP_FINISHED` |
//! | `sink.command(c)` | `Unsupported` (no platform commands here) |
//! | `sink.report(result)` | `TOOL_CALL_RESULT` |
//! | `sink.usage(u)` | `harness.usage` |
//! | a `cancel` input | the turn's future is dropped; `RUN_FINISHED` with `outcome: {type:'cancelled'}` |
//!
//! **Driven again.** Every turn runs through [`Taped`], which keeps a tape of what it did.
//! A turn that waits for a person gives the host its tape and its start (the host keeps them
//! with the thread, durably on a [`FileLog`](crate::log::FileLog), see [`log`](crate::log));
//! once the waits are decided the host asks for a new run (`RUN_STARTED` with
//! `parentRunId`), and the driver runs the agent again with the same start on that tape:
//! everything the turn did before is served from the tape and shown nowhere again, and the
//! gated call or the question now finds its decision. A harness deterministic given its
//! inputs and what the host answered (agentsessions' I0) goes on exactly where it stopped;
//! the execution id (in the tools' [`ToolContext`] and the idempotency keys) stays the first
//! run's.
//!
//! [`check_call`]: harness_core::tool::rules::check_call
//! [`gate`]: harness_core::tool::rules::gate
//! [`Tools`]: harness_core::tool::Tools
//! [`ToolResult::denied`]: harness_core::message::ToolResult::denied
//! [`Taped`]: harness_core::tape::Taped
//! [`ToolContext`]: harness_core::tool::ToolContext
//!
//! Time: the service reads it from the clock function you give it (`Instant::now` in an
//! application, a virtual clock in a test); nothing here sleeps. Call [`Service::tick`] at
//! the instant [`Service::next_timeout`] returns (heartbeats, slow consumers).
//!
//! A harness served, and read by the [`Client`](crate::client::Client) over a connection
//! that is two function calls (no network, no runtime: `futures`' local executor; in an
//! application, `tokio::spawn(run_turns(…))` and the socket's read and write loops):
//!
//! ```
//! use std::time::Instant;
//! use futures::StreamExt;
//! use futures::task::LocalSpawnExt;
//! use harness_core::agent::ToolLoopAgent;
//! use harness_core::message::ToolResult;
//! use harness_core::model::ScriptedModel;
//! use harness_core::tool::{Tool, Tools};
//! use harness_tanstack::agui::AguiEvent;
//! use harness_tanstack::client::{Client, ClientConfig, ClientEvent};
//! use harness_tanstack::driver::{Service, run_turns};
//! use harness_tanstack::frame::Input;
//! use harness_tanstack::host::{Host, HostConfig, Transport};
//! use harness_tanstack::log::MemoryLog;
//! use serde_json::json;
//!
//! // One registry: the agent offers it to its model, the host runs it.
//! let tools = Tools::new().with(Tool::sync("get_weather", "Current weather in a city", |call| {
//!     ToolResult::ok_json(&call.id, json!({"celsius": 21}))
//! }));
//! let agent = ToolLoopAgent::new("weather").with_tools(&tools);
//! let model = ScriptedModel::new()
//!     .tool_call("get_weather", json!({"city": "Paris"}))
//!     .reply("Sunny in Paris.");
//! let service = Service::new(Host::new(HostConfig::default(), MemoryLog::default()), Instant::now);
//! let mut pool = futures::executor::LocalPool::new();
//! pool.spawner()
//!     .spawn_local(run_turns(service.clone(), agent, model, tools))
//!     .unwrap();
//!
//! let conn = service.connect(Transport::WebSocket, None, "upgrade-1");
//! let mut client = Client::new(ClientConfig::new("thread-1"));
//! client.connect(Instant::now());
//! client.send_input(Input::prompt("Weather in Paris?"));
//! while let Some(frame) = client.poll_transmit() {
//!     conn.handle_text(&frame); // client → host
//! }
//! let mut events = Vec::new();
//! pool.run_until(async {
//!     let mut to_client = conn.stream().unwrap(); // host → client (one stream per connection)
//!     while let Some(bytes) = to_client.next().await {
//!         client.handle_frame(Instant::now(), std::str::from_utf8(&bytes).unwrap());
//!         while let Some(ev) = client.poll_event() {
//!             if let ClientEvent::Event(d) = ev {
//!                 let done = d.ends_run(); // RUN_FINISHED or RUN_ERROR
//!                 events.push(d.event);
//!                 if done {
//!                     return;
//!                 }
//!             }
//!         }
//!     }
//! });
//! let text: String = events
//!     .iter()
//!     .filter_map(|e| match e {
//!         AguiEvent::TextMessageContent(c) => Some(c.delta.as_str()),
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(text, "Sunny in Paris.");
//! assert!(events.iter().any(|e| matches!(e, AguiEvent::ToolCallResult(_))));
//! ```
//!
//! [`Harness`]: harness_core::Harness
//! [`Host`]: crate::host::Host
//! [`Stream`]: futures::Stream

mod service;
mod turns;

pub use service::{Clock, ConnStream, Connection, Service, StreamError};
pub use turns::run_turns;
