//! # harness-uhp
//!
//! The client half of the Unified Harness Protocol (UHP), sans-IO: decoding the event
//! stream, noticing a dropped event, assembling a task out of deltas, idempotency keys and
//! retries, and a task client that builds the HTTP requests and consumes their answers, while
//! you own the sockets.
//!
//! WIP.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accumulator;
pub mod builder;
pub mod client;
pub mod decoder;
pub mod error;
pub mod event;
pub mod protocol;
pub mod response;
pub mod retry;
pub mod sequence;
mod tagged;

pub use accumulator::{
    ProtocolFinding, SequenceSummary, TaskAccumulator, TaskSummary, TerminalSource,
};
pub use client::{ClientConfig, CreateRequest, TaskClient, TaskEvent};
pub use decoder::{Finding, StreamDecoder};
pub use error::{ErrorEnvelope, ErrorObject};
pub use event::{Event, EventKind, EventType};
pub use response::{
    Annotation, ContainerFileCitation, ContentPart, FunctionCall, FunctionCallOutput, Message,
    OutputItem, OutputText, Reasoning, Response, ResponseStatus, SummaryText, Usage,
};
pub use retry::{IdempotencyKey, RetryPolicy, idempotency_key, is_retryable};
pub use sequence::{Arrival, SequenceCheck, SequenceReport};

pub use harness_core;
