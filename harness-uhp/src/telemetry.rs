//! Traces and metrics: what an operator can watch of UHP tasks, both sides.
//!
//! `tracing` and `metrics` are facades (no I/O, no thread, no clock: with no subscriber or
//! recorder installed a call site costs one atomic load), so this sans-IO crate uses them
//! directly. The stream decoder and the encoders have no spans (the hot path stays as it
//! was): the spans are on the [`TaskClient`](crate::client::TaskClient) (one per task,
//! opened with it, closed when it is dropped) and in the server's driver (one per turn of a
//! task). Metrics go through the functions here, behind the default feature `metrics`.
//!
//! | span | where | fields |
//! | --- | --- | --- |
//! | `uhp.task` (`side = "client"`) | a [`TaskClient`](crate::client::TaskClient) | `response_id`, `creates`, `outcome` |
//! | `uhp.task` (`side = "server"`) | a task the [`UhpService`](crate::server::driver::UhpService) runs | `response_id`, `session`, `harness`, `model`, `outcome` |
//! | `uhp.model` | a model call of a server task | `response_id`, `first_token_ms`, `input_tokens`, `output_tokens`, `outcome` |
//! | `uhp.tool` | a tool call of a server task | `response_id`, `name`, `mediation` (`run`, `approved`, `denied`, `disabled`), `outcome` |
//!
//! A stream finding (a malformed event the server sent) and a retry are events at `debug`
//! level in the client's task span.
//!
//! Metrics (names in [`names`]): tasks running on the server (gauge), server tasks by
//! outcome, first-chunk latency of model calls (histogram, seconds), tool calls by outcome,
//! client tasks by outcome.

use std::time::Duration;

/// The metric names.
pub mod names {
    /// Gauge: server tasks whose turn is running.
    pub const TASKS_RUNNING: &str = "harness_uhp_tasks_running";
    /// Counter: server tasks, label `outcome` (`completed`, `provider_failed`,
    /// `harness_failed`, `cancelled`).
    pub const TASKS: &str = "harness_uhp_tasks_total";
    /// Counter: client tasks, label `outcome` (`finished`, `failed`).
    pub const CLIENT_TASKS: &str = "harness_uhp_client_tasks_total";
    /// Histogram: seconds from a model call to its first text chunk.
    pub const FIRST_CHUNK_SECONDS: &str = "harness_uhp_first_chunk_seconds";
    /// Counter: tool calls, label `outcome` (`ok`, `error`, `denied`).
    pub const TOOL_CALLS: &str = "harness_uhp_tool_calls_total";
}

/// Counts a server task as running while it lives.
#[derive(Debug)]
pub(crate) struct Running(());

impl Running {
    pub(crate) fn new() -> Self {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::TASKS_RUNNING).increment(1.0);
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::TASKS_RUNNING).decrement(1.0);
    }
}

/// A server task ended with `outcome`.
pub(crate) fn task(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::TASKS, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}

/// A client task ended with `outcome`.
pub(crate) fn client_task(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::CLIENT_TASKS, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}

/// A model call's first text chunk came `d` after the call.
pub(crate) fn first_chunk(d: Duration) {
    #[cfg(feature = "metrics")]
    ::metrics::histogram!(names::FIRST_CHUNK_SECONDS).record(d.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = d;
}

/// A tool call ended with `outcome`.
pub(crate) fn tool_call(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::TOOL_CALLS, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}
