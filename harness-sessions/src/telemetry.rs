//! Traces and metrics: what an operator can watch of sessions, turns and Connect streams.
//!
//! `tracing` and `metrics` are facades (no I/O, no thread, no clock: with no subscriber or
//! recorder installed a call site costs one atomic load), so the crate uses them directly.
//! Spans are at the entry points (the controller's exec, resume and replay; each end of a
//! `Harness.Connect` stream), never in the codecs; metrics go through the functions here,
//! behind the default feature `metrics`.
//!
//! | span | where | fields |
//! | --- | --- | --- |
//! | `sessions.exec` | [`Controller::exec`](crate::controller::Controller::exec), [`exec_new_session`](crate::controller::Controller::exec_new_session) | `session`, `execution_id`, `harness`, `outcome` |
//! | `sessions.resume` | [`Controller::resume`](crate::controller::Controller::resume) | `session`, `execution_id`, `outcome` |
//! | `sessions.replay` | [`Controller::replay`](crate::controller::Controller::replay) | `session`, `outcome` |
//! | `connect.stream` | [`serve_connect`](crate::connect::serve_connect) (`side = "harness"`), [`drive_connect`](crate::connect::drive_connect) (`side = "host"`) | `session`, `execution_id`, `outcome` |
//!
//! A failed turn or a broken stream is an event at `debug` level in its span.
//!
//! Metrics (names in [`names`]): open Connect streams (gauge), turns by outcome, journal
//! appends, fences refused.

/// The metric names.
pub mod names {
    /// Gauge: `Harness.Connect` streams open, label `side` (`harness`, `host`).
    pub const CONNECT_STREAMS_OPEN: &str = "harness_sessions_connect_streams_open";
    /// Counter: turns run by exec or resume, label `outcome` (`completed`, `parked`,
    /// `error`).
    pub const TURNS: &str = "harness_sessions_turns_total";
    /// Counter: records the controller appended to journals.
    pub const JOURNAL_APPENDS: &str = "harness_sessions_journal_appends_total";
    /// Counter: appends a journal refused because a newer writer holds the session's fence.
    pub const FENCES_REFUSED: &str = "harness_sessions_fences_refused_total";
}

/// Counts a Connect stream as open while it lives.
#[derive(Debug)]
pub(crate) struct OpenStream(#[allow(dead_code)] &'static str);

impl OpenStream {
    pub(crate) fn new(side: &'static str) -> Self {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::CONNECT_STREAMS_OPEN, "side" => side).increment(1.0);
        OpenStream(side)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(names::CONNECT_STREAMS_OPEN, "side" => self.0).decrement(1.0);
    }
}

/// A turn ended with `outcome`.
pub(crate) fn turn(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(names::TURNS, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}

/// The result of a journal append the controller made.
pub(crate) fn appended(r: &Result<(), crate::JournalError>, records: usize) {
    #[cfg(feature = "metrics")]
    match r {
        Ok(()) => ::metrics::counter!(names::JOURNAL_APPENDS).increment(records as u64),
        Err(crate::JournalError::Fenced { .. }) => {
            ::metrics::counter!(names::FENCES_REFUSED).increment(1)
        }
        Err(_) => {}
    }
    if let Err(e @ crate::JournalError::Fenced { .. }) = r {
        tracing::debug!(error = %e, "journal append refused: fenced");
    }
    #[cfg(not(feature = "metrics"))]
    let _ = records;
}

/// Records a turn's result on the current span (`execution_id`, `outcome`) and counts it.
pub(crate) fn turn_result(
    r: &Result<crate::controller::TurnReport, crate::Error>,
) -> &'static str {
    let span = tracing::Span::current();
    let outcome = match r {
        Ok(o) => {
            span.record("execution_id", o.execution_id.as_str());
            match o.status {
                crate::controller::TurnStatus::Completed => "completed",
                crate::controller::TurnStatus::Parked { .. } => "parked",
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "the turn failed");
            "error"
        }
    };
    span.record("outcome", outcome);
    turn(outcome);
    outcome
}
