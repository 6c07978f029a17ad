//! Traces and metrics: what an operator can watch.
//!
//! **Why `tracing` and `metrics`.** Both are facades: a call site does no I/O, starts no
//! thread and reads no clock; the application installs a subscriber (a `fmt` layer,
//! `tracing-opentelemetry`, …) and a recorder (Prometheus, OpenTelemetry, …). With none
//! installed a span or an event costs one relaxed atomic load of the call site's interest,
//! so the sans-IO host keeps them in its default build. `tracing` is a plain dependency (the
//! spans are at the host's entry points and in the driver, never in the codecs); `metrics` is
//! behind the default feature `metrics`, every metric going through the functions of this
//! module, so a build without it has none. OpenTelemetry metrics were not chosen: the
//! `metrics` facade has exporters for every backend (OpenTelemetry's among them), and its
//! no-recorder cost is the smallest.
//!
//! **Spans** (field names are the protocol's own ids):
//!
//! | span | where | fields |
//! | --- | --- | --- |
//! | `harness.operation` | one per turn, by [`run_turns`](crate::driver::run_turns) | `threadId`, `operationId`, `inputId`, `kind`, `traceparent`, `outcome` |
//! | `harness.model` | a model call of a turn (child) | `operationId`, `first_token_ms`, `input_tokens`, `output_tokens`, `outcome` |
//! | `harness.tool` | a tool call of a turn (child) | `operationId`, `tool_call_id`, `name`, `mediation`, `outcome` |
//! | `harness.connection` | one per connection of the [`Host`](crate::host::Host) | `transport`, `request_id`, `threadId`, `close_code` |
//!
//! A protocol error a peer causes (a bad frame, a slow consumer) is an event at `debug` level
//! inside its connection's span: it cannot flood a log at the usual `info` level under attack.
//!
//! **The traceparent link** (spec "Traces": "When the input starts a turn, the server that
//! runs the turn gives its `harness.operation` span a link to the value. A link is not a
//! parent"). `tracing` has no links; with the feature `opentelemetry`, the span gets an
//! OpenTelemetry link (through `tracing-opentelemetry`) to the input's traceparent. Without
//! it the value is the span's field `traceparent`.
//!
//! The value is kept on the input's `harness.input.accepted` record of the log (this log's
//! `harness.input` record, spec: "It stores the value on the `harness.input` record of the
//! log"), so an input that waits behind a running turn starts its own turn with it, and the
//! log read after a restart still has it. "When another server owns the thread, the value
//! goes to that server with the input": a host here owns every thread it serves (there is no
//! routing of an input to another server); a server that reads the same log reads the value
//! on the record.
//!
//! **Metrics** (names in [`names`]): open threads and connections (gauges), turns by outcome,
//! the first-chunk latency of model calls (histogram, seconds), tool calls by outcome, bytes
//! and events out (counted in batches: the fan-out path adds to two integers), slow-consumer
//! closes.

use std::time::Duration;

use tracing::Span;

use crate::host::{Transport, TurnOutcome, TurnRequest};

/// The metric names.
pub mod names {
    /// Gauge: threads the host holds in memory.
    pub const THREADS_OPEN: &str = "harness_tanstack_threads_open";
    /// Gauge: open connections, label `transport` (`sse`, `websocket`, `stdio`).
    pub const CONNECTIONS_OPEN: &str = "harness_tanstack_connections_open";
    /// Counter: finished turns, label `outcome` (`completed`, `failed`, `cancelled`,
    /// `interrupted`).
    pub const TURNS: &str = "harness_tanstack_turns_total";
    /// Histogram: seconds from a model call to its first text chunk.
    pub const FIRST_CHUNK_SECONDS: &str = "harness_tanstack_first_chunk_seconds";
    /// Counter: tool calls, label `outcome` (`ok`, `error`, `denied`, `awaiting_approval`).
    pub const TOOL_CALLS: &str = "harness_tanstack_tool_calls_total";
    /// Counter: bytes handed to transports.
    pub const BYTES_OUT: &str = "harness_tanstack_bytes_out_total";
    /// Counter: frames and events handed to transports.
    pub const EVENTS_OUT: &str = "harness_tanstack_events_out_total";
    /// Counter: connections closed as slow consumers.
    pub const SLOW_CONSUMER_CLOSES: &str = "harness_tanstack_slow_consumer_closes_total";
}

/// The span of a turn: `harness.operation`, linked to the input's traceparent.
pub(crate) fn operation_span(t: &TurnRequest) -> Span {
    let span = tracing::info_span!(
        "harness.operation",
        threadId = %t.thread_id,
        operationId = %t.operation_id,
        inputId = %t.input_id,
        kind = %t.kind,
        traceparent = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    if let Some(tp) = &t.traceparent {
        span.record("traceparent", tp.as_str());
        link(&span, tp);
    }
    span
}

#[cfg(feature = "opentelemetry")]
fn link(span: &Span, traceparent: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if let Some(cx) = span_context(traceparent) {
        span.add_link(cx);
    }
}

#[cfg(not(feature = "opentelemetry"))]
fn link(_span: &Span, _traceparent: &str) {}

/// The OpenTelemetry span context of a valid W3C `traceparent` (remote, its flags kept).
#[cfg(feature = "opentelemetry")]
pub fn span_context(traceparent: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    if !crate::http::is_valid_traceparent(traceparent) {
        return None;
    }
    let mut parts = traceparent.split('-');
    let (_version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let trace = TraceId::from_hex(trace).ok()?;
    let parent = SpanId::from_hex(parent).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(SpanContext::new(
        trace,
        parent,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

/// The word of a turn's outcome (the `outcome` field and label).
pub(crate) fn outcome_name(o: &TurnOutcome) -> &'static str {
    match o {
        TurnOutcome::Completed => "completed",
        TurnOutcome::Failed { .. } => "failed",
        TurnOutcome::Cancelled => "cancelled",
        TurnOutcome::Interrupted(_) => "interrupted",
    }
}

pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Sse => "sse",
        Transport::WebSocket => "websocket",
        Transport::Stdio => "stdio",
    }
}

/// The span of a connection (a root: it outlives any request).
pub(crate) fn connection_span(t: Transport, request_id: &str) -> Span {
    tracing::info_span!(
        parent: None,
        "harness.connection",
        transport = transport_name(t),
        request_id = %request_id,
        threadId = tracing::field::Empty,
        close_code = tracing::field::Empty,
    )
}

/// A turn finished.
pub(crate) fn turn_finished(o: &TurnOutcome) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::TURNS, "outcome" => outcome_name(o)).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = o;
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

/// The number of threads in memory.
pub(crate) fn threads_open(n: usize) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(names::THREADS_OPEN).set(n as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// A connection opened (`+1.0`) or went away (`-1.0`).
pub(crate) fn connections(t: Transport, delta: f64) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(names::CONNECTIONS_OPEN, "transport" => transport_name(t)).increment(delta);
    #[cfg(not(feature = "metrics"))]
    let _ = (t, delta);
}

/// A connection is closed as a slow consumer.
pub(crate) fn slow_consumer() {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::SLOW_CONSUMER_CLOSES).increment(1);
}

/// Bytes and events out, counted by the fan-out path in two plain integers and handed to
/// the recorder in batches ([`Self::FLUSH_EVERY`] events, at each
/// [`handle_timeout`](crate::host::Host::handle_timeout), and when a connection goes away).
#[derive(Debug, Default)]
pub(crate) struct Outflow {
    bytes: u64,
    events: u64,
}

impl Outflow {
    const FLUSH_EVERY: u64 = 256;

    /// One frame or event of `len` bytes handed out.
    #[inline]
    pub(crate) fn add(&mut self, len: usize) {
        self.bytes += len as u64;
        self.events += 1;
        if self.events >= Self::FLUSH_EVERY {
            self.flush();
        }
    }

    /// Hands what was counted to the recorder.
    pub(crate) fn flush(&mut self) {
        if self.events == 0 {
            return;
        }
        #[cfg(feature = "metrics")]
        {
            ::metrics::counter!(names::BYTES_OUT).increment(self.bytes);
            ::metrics::counter!(names::EVENTS_OUT).increment(self.events);
        }
        self.bytes = 0;
        self.events = 0;
    }
}
