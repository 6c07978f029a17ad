//! The sans-IO task client: it builds the HTTP requests of one task (create, with the
//! idempotency key and the version header; retrieve; cancel), consumes their answers and the
//! stream's bytes, retries by the protocol's table, and recovers from a dropped stream by
//! fetching the stored response — never by running the task again.
//!
//! The run loop (after quinn and str0m): call an input method, then drain
//! [`poll_transmit`](TaskClient::poll_transmit) (requests to send, in order) and
//! [`poll_event`](TaskClient::poll_event), and arm a timer for
//! [`poll_timeout`](TaskClient::poll_timeout) that calls
//! [`handle_timeout`](TaskClient::handle_timeout), as [`harness_core::run_loop`] states for
//! every machine.
//!
//! [`requests`] builds each request on its own, for a driver of its own; [`TaskClient`] is the
//! state machine that sends them for one task. The types here are what passes between the
//! machine and its driver.

use std::time::Instant;

use crate::error::ErrorObject;
use crate::event::StreamEvent;
use crate::finding::Finding;
use crate::retry::GiveUpReason;

/// The HTTP driver (feature `client-hyper`): [`HttpTaskClient`].
#[cfg(feature = "client-hyper")]
pub mod driver;
/// The requests: [`TaskClientConfig`], [`CreateRequest`] and the [`requests`] builders.
mod request;
/// The state machine: [`TaskClient`].
mod task;

pub use request::{CreateRequest, RequestError, TaskClientConfig, requests};
pub use task::TaskClient;

#[cfg(feature = "client-hyper")]
pub use driver::{HttpClientConfig, HttpClientError, HttpTaskClient, TaskRun};

/// Identifies one request of a [`TaskClient`]; pass it back with its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `POST /v1/responses` (streaming).
    Create,
    /// `GET /v1/responses/{id}`.
    Retrieve,
    /// `POST /v1/responses/{id}/cancel`.
    Cancel,
}

/// A request the [`TaskClient`] wants sent (from [`TaskClient::poll_transmit`]); its answer
/// goes back with its [`id`](Self::id).
#[derive(Debug)]
pub struct ClientRequest {
    /// Pass it back with the answer.
    pub id: RequestId,
    /// What it is for.
    pub kind: RequestKind,
    /// The request.
    pub request: http::Request<Vec<u8>>,
}

/// Why a task could not be finished.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The server refused, and the retry table or the budget says stop.
    #[error("HTTP {status}: {} ({reason:?})", error.as_ref().and_then(|e| e.message.as_deref()).unwrap_or("no error body"))]
    Http {
        /// The status.
        status: u16,
        /// The error object, when the body was an envelope.
        error: Option<ErrorObject>,
        /// Why no retry.
        reason: GiveUpReason,
    },
    /// The connection kept failing.
    #[error("transport failures ({reason:?})")]
    Transport {
        /// Why no retry.
        reason: GiveUpReason,
    },
    /// The stored response is still `in_progress` and the policy's deadline comes before
    /// the next read. The task itself goes on running on the server: cancel it if it must
    /// stop.
    #[error("task {response_id} still in progress; stopped following it ({reason:?})")]
    StillInProgress {
        /// The task.
        response_id: String,
        /// Why no further read.
        reason: GiveUpReason,
    },
    /// A body that should be a response object was not one.
    #[error("malformed response body: {0}")]
    BadBody(String),
    /// A request could not be built.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The driver found nothing to send and nothing to wait for before the task ended (a
    /// driver that lost a request's answer without reporting it).
    #[error("the task stalled: nothing to send and nothing to wait for")]
    Stalled,
}

/// Something the application should know.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TaskEvent {
    /// A streamed event, for live rendering (already applied to the accumulator).
    Event(StreamEvent),
    /// A message of the stream that did not decode (recorded in the accumulator too).
    Finding(Finding),
    /// The stream ended or stalled before its terminal event; the stored response is being
    /// fetched (the task is not run again). Drop that connection.
    StreamLost {
        /// The task whose stored response is fetched.
        response_id: String,
    },
    /// A request failed and will be sent again at `at`, with the same idempotency key.
    Retrying {
        /// What failed.
        kind: RequestKind,
        /// When it is sent again.
        at: Instant,
        /// Failed attempts so far.
        failures: u32,
    },
    /// The cancel request could not be delivered: the server refused it for good, or the
    /// retries ran out. The task goes on (its stream or stored response still ends it);
    /// call [`TaskClient::cancel`] again to try anew.
    CancelFailed(TaskError),
    /// The task reached a terminal state; see [`TaskClient::accumulator`].
    Finished,
    /// The task could not be finished.
    Failed(TaskError),
}
