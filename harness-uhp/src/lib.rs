//! # harness-uhp
//!
//! Both halves of the Unified Harness Protocol (UHP), sans-IO. The server half is [`server`]:
//! a host state machine (HTTP requests in, responses and streamed SSE bytes out, agent turns
//! asked of a driver), a `futures`-only driver that serves any
//! [`Harness`](harness_core::Harness) for a task, and, behind the `axum` feature, a router,
//! an HTTP server and an on-disk store; `cargo run --example uhp_server` passes the official
//! conformance suite at class full.
//!
//! The client half, sans-IO: decoding a task's event
//! stream, noticing a dropped event, assembling the task out of deltas, idempotency keys and
//! retries, and a task client that builds the HTTP requests and consumes their answers, while
//! you own the sockets. Everything the Python `harnessclientprotocol` offers, as Rust, and
//! right where it is wrong (CRLF and CR framing, split UTF-8, BOM, unterminated final events,
//! non-object data, duplicates and reordering, the terminal event's authority, 501, `inf`).
//!
//! | module | what |
//! | --- | --- |
//! | [`decoder`] | [`StreamDecoder`]: bytes in (any chunking), typed [`StreamEvent`]s or [`Finding`]s out |
//! | [`event`] | [`StreamEvent`] (the schema's flat event, zero-copy strings) and its typed view [`StreamEventKind`] |
//! | [`accumulator`] | [`TaskAccumulator`]: status, text, reasoning, tool calls, annotations, error, findings |
//! | [`sequence`] | [`SequenceCheck`]: missing, duplicate and out-of-order numbers, in linear time, resumable |
//! | [`response`] | the response object and its output items; unknown types kept |
//! | [`retry`] | idempotency keys, the retry table, full-jitter backoff, `Retry-After`, [`RetryPolicy`] |
//! | [`client`] | request builders and the sans-IO [`TaskClient`] that recovers a dropped stream; its HTTP driver `client::HttpTaskClient` (feature `client-hyper`) |
//! | [`protocol`], [`error`] | versions, headers, capabilities and the discovery check, endpoints, id prefixes, error codes |
//! | [`builder`] | [`StreamBuilder`](builder::StreamBuilder): a server's event stream, for tests and examples |
//! | [`server`] | the server: [`UhpServer`] (sans-IO), [`UhpService`] (serves a `Harness`), `server::axum` (feature) |
//! | [`telemetry`] | `tracing` spans (`uhp.task` on both sides, `uhp.model`, `uhp.tool`; field `response_id`) and `metrics` (tasks, first-chunk latency, tool calls); facades, no I/O |
//!
//! The client half's main types are at the root ([`TaskClient`], [`TaskClientConfig`],
//! [`StreamDecoder`], [`StreamEvent`], [`TaskAccumulator`], [`Response`], …), and so are the
//! server's ([`UhpServer`], [`UhpServerConfig`], [`UhpService`], [`CallerAuth`], …).
//!
//! ## Decode a stream
//!
//! ```
//! use harness_uhp::{StreamEventKind, ResponseStatus, StreamDecoder, TaskAccumulator};
//!
//! // Body bytes from any HTTP client, in whatever chunks it hands them over (CRLF here).
//! let body = concat!(
//!     "data: {\"type\":\"response.created\",\"sequence_number\":0,",
//!     "\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\r\n\r\n",
//!     ": keep-alive\r\n\r\n",
//!     "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,",
//!     "\"output_index\":0,\"content_index\":0,\"delta\":\"Bonjour, \"}\r\n\r\n",
//!     "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,",
//!     "\"output_index\":0,\"content_index\":0,\"delta\":\"café\"}\r\n\r\n",
//! );
//! let mut dec = StreamDecoder::new();
//! let mut task = TaskAccumulator::new();
//! let mut shown = String::new();
//! for chunk in body.as_bytes().chunks(5) {           // splits "é" across pushes too
//!     dec.push(chunk);
//!     loop {
//!         match dec.poll_event() {
//!             Ok(Some(ev)) => {
//!                 if let StreamEventKind::OutputTextDelta { delta, .. } = ev.kind() {
//!                     shown.push_str(delta);         // render as it arrives
//!                 }
//!                 task.add(&ev);
//!             }
//!             Ok(None) => break,
//!             Err(finding) => task.add_finding(&finding), // e.g. `[DONE]`: reported, not fatal
//!         }
//!     }
//! }
//! // The end of the body can still complete an event (a CR held back in case an LF
//! // followed) or cut one short, which is reported and not used.
//! task.finish_decoder(&mut dec);
//! assert_eq!(shown, "Bonjour, café");
//! assert_eq!(task.status(), &ResponseStatus::InProgress); // no terminal event (yet)
//! assert!(task.sequence().ok);
//! assert_eq!(task.last_sequence_number(), Some(2));       // for Last-Event-ID
//! ```
//!
//! ## Retry without running the agent twice
//!
//! ```
//! use std::time::{Duration, Instant};
//! use harness_uhp::is_retryable;
//! use harness_uhp::retry::{Decision, Failure, RetryPolicy};
//!
//! assert!(is_retryable(Some("session_busy"), None, None));
//! assert!(!is_retryable(Some("quota_exhausted"), None, Some(429)));
//! assert!(!is_retryable(None, None, Some(501)));
//!
//! let now = Instant::now();
//! let mut policy = RetryPolicy::new();               // one idempotency key per task
//! let limited = Failure::Http { status: 429, error: None, retry_after: Some(Duration::from_secs(30)) };
//! assert_eq!(policy.on_failure(now, &limited), Decision::RetryAt(now + Duration::from_secs(30)));
//! ```
//!
//! [`TaskClient`] puts it together: see its example for a dropped stream finished from the
//! stored response. Behind the `client-hyper` feature, `client::HttpTaskClient` drives it
//! over HTTP(S) (hyper, rustls): a task run to its end, its events streamed; `cargo run
//! --example uhp_recover` shows a dropped stream recovered over real HTTP.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accumulator;
pub mod builder;
pub mod client;
pub mod decoder;
pub mod error;
pub mod event;
mod finding;
pub mod protocol;
pub mod response;
pub mod retry;
pub mod sequence;
pub mod server;
pub mod telemetry;

pub use accumulator::{
    ProtocolFinding, SequenceSummary, TaskAccumulator, TaskSummary, TerminalSource,
};
pub use client::{
    ClientRequest, CreateRequest, RequestError, RequestId, RequestKind, TaskClient,
    TaskClientConfig, TaskError, TaskEvent,
};
#[cfg(feature = "client-hyper")]
pub use client::{HttpClientConfig, HttpTaskClient, TaskRun};
pub use decoder::{Finding, StreamDecoder, StreamFeed};
pub use error::{ErrorEnvelope, ErrorObject};
pub use event::{EventType, StreamEvent, StreamEventKind, StreamEventRef};
pub use response::{
    Annotation, ContainerFileCitation, FunctionCallItem, FunctionCallOutput, OutputContent,
    OutputItem, OutputMessage, OutputText, Reasoning, Response, ResponseStatus, ResponseUsage,
    SummaryText,
};
pub use retry::{IdempotencyKey, RetryPolicy, idempotency_key, is_retryable};
pub use sequence::{Arrival, SequenceCheck, SequenceReport};
pub use server::driver::CallerAuth;
pub use server::{Reply, StoreRecord, UhpServer, UhpServerConfig, UhpService};

pub use harness_core;
