//! Traces and metrics of the driver: what an operator can watch of a call.
//!
//! `tracing` and `metrics` are facades (no I/O, no thread, no clock: a call site with no
//! subscriber or recorder installed costs one atomic load), so the sans-IO crate uses them
//! directly: the spans are in the [`driver`](crate::driver) (the state machines and the frame
//! codec have none, so the hot path stays as it was); the metrics go through the functions
//! of this module, behind the default feature `metrics`.
//!
//! | span | where | fields |
//! | --- | --- | --- |
//! | `jambonz.call` | one per call, [`serve`](crate::driver::serve) | `call_sid`, `turns`, `close_code` |
//! | `jambonz.turn` | one per `turn:start` (child of the call) | `call_sid`, `turn_id`, `input`, `outcome` |
//! | `jambonz.model` | a model call of a turn | `turn_id`, `first_token_ms`, `input_tokens`, `output_tokens`, `outcome` |
//! | `jambonz.tool` | a tool call of a turn | `turn_id`, `name`, `mediation` (`own`, `platform`, `approved`, `denied`), `outcome` |
//!
//! A frame jambonz sends that is not taken is an event at `debug` level in the call's span
//! (a peer flooding bad frames floods no log at `info`).
//!
//! Metrics (names in [`names`]): open calls (gauge), turns by outcome, first-chunk latency
//! of model calls (histogram, seconds), tool calls by outcome, bytes and frames out (counted
//! per flush of the socket, not per frame).

use std::time::Duration;

/// The metric names.
pub mod names {
    /// Gauge: calls being served.
    pub const CALLS_OPEN: &str = "harness_jambonz_calls_open";
    /// Counter: turns, label `outcome` (`completed`, `cancelled`, `failed`).
    pub const TURNS: &str = "harness_jambonz_turns_total";
    /// Histogram: seconds from a model call to its first text chunk.
    pub const FIRST_CHUNK_SECONDS: &str = "harness_jambonz_first_chunk_seconds";
    /// Counter: tool calls, label `outcome` (`ok`, `error`, `denied`).
    pub const TOOL_CALLS: &str = "harness_jambonz_tool_calls_total";
    /// Counter: bytes of text frames sent.
    pub const BYTES_OUT: &str = "harness_jambonz_bytes_out_total";
    /// Counter: frames sent.
    pub const FRAMES_OUT: &str = "harness_jambonz_frames_out_total";
}

/// Counts a call as open while it lives (a dropped serve future counts as closed).
#[derive(Debug)]
pub(crate) struct OpenCall(());

impl OpenCall {
    pub(crate) fn new() -> Self {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::CALLS_OPEN).increment(1.0);
        OpenCall(())
    }
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::CALLS_OPEN).decrement(1.0);
    }
}

/// A turn ended with `outcome`.
pub(crate) fn turn(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::TURNS, "outcome" => outcome).increment(1);
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

/// `frames` frames of `bytes` bytes went out in one flush.
pub(crate) fn sent(bytes: u64, frames: u64) {
    #[cfg(feature = "metrics")]
    if frames > 0 {
        ::metrics::counter!(names::BYTES_OUT).increment(bytes);
        ::metrics::counter!(names::FRAMES_OUT).increment(frames);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (bytes, frames);
}
