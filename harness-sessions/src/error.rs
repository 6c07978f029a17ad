//! The controller's errors, each mapped to the gRPC status code agentsessions returns.

use harness_core::{HarnessError, SinkError};

use crate::journal::JournalError;
use crate::record::Seq;
use crate::verify::VerifyError;

/// The gRPC status an error maps to (what agentsessions' Sessions service would return).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `CANCELLED` (1): the turn was cancelled.
    Cancelled,
    /// `INVALID_ARGUMENT` (3).
    InvalidArgument,
    /// `NOT_FOUND` (5).
    NotFound,
    /// `ALREADY_EXISTS` (6).
    AlreadyExists,
    /// `FAILED_PRECONDITION` (9).
    FailedPrecondition,
    /// `ABORTED` (10): a concurrent writer (fence or head conflict, or the session is held
    /// by another writer).
    Aborted,
    /// `INTERNAL` (13).
    Internal,
    /// `UNAVAILABLE` (14): the harness did not answer Describe; nothing was journaled, so
    /// the call is safe to retry.
    Unavailable,
    /// `UNKNOWN` (2): the harness failed.
    Unknown,
    /// `DATA_LOSS` (15): the journal does not hold (a record changed, missing or unreadable
    /// after it was written, or cut off below a pinned head).
    ///
    /// gRPC defines it as "Unrecoverable data loss or corruption" (grpc/grpc
    /// `doc/statuscodes.md`; `codes.DataLoss` in grpc-go). agentsessions itself has no
    /// distinct code here: its Sessions service (`session/service.go`, `execError` and the
    /// `read:`/`head:` paths) returns `INTERNAL` for every journal failure but a fence or
    /// head conflict, and `agentctl verify` is a client-side check with no status. A corrupt
    /// journal is not a host fault a retry may fix, so it gets the code gRPC reserves for it.
    DataLoss,
}

impl Code {
    /// The numeric gRPC code.
    pub fn grpc(self) -> i32 {
        match self {
            Code::Cancelled => 1,
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::NotFound => 5,
            Code::AlreadyExists => 6,
            Code::FailedPrecondition => 9,
            Code::Aborted => 10,
            Code::Internal => 13,
            Code::Unavailable => 14,
            Code::DataLoss => 15,
        }
    }

    /// The canonical gRPC name, e.g. `DATA_LOSS`.
    pub fn name(self) -> &'static str {
        match self {
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
        }
    }
}

/// Why a controller operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No session UID was given (agentsessions `ErrMissingSessionUID`).
    #[error("missing session uid")]
    MissingSessionUid,
    /// The requested harness name is not registered.
    #[error("unknown harness {0:?}")]
    UnknownHarness(String),
    /// An input the journal cannot hold (e.g. nested deeper than
    /// [`MAX_EVENT_DEPTH`](crate::hash::MAX_EVENT_DEPTH) levels of JSON): the request is
    /// refused before anything is journaled.
    #[error("input {index}: {reason}")]
    InvalidInput {
        /// Its position in the request's inputs, from 0.
        index: usize,
        /// Why.
        reason: String,
    },
    /// The harness that recorded an execution is not served here (`ErrHarnessMismatch`).
    #[error("harness {recorded:?} that recorded execution {execution_id} is not served")]
    HarnessMismatch {
        /// The execution.
        execution_id: String,
        /// The recorded registry name.
        recorded: String,
    },
    /// The served harness advertises another version than the one recorded
    /// (`ErrHarnessVersionMismatch`).
    #[error(
        "harness {harness:?} serves version {served:?}, execution {execution_id} recorded {recorded:?}"
    )]
    HarnessVersionMismatch {
        /// The execution.
        execution_id: String,
        /// The harness name.
        harness: String,
        /// The recorded version.
        recorded: String,
        /// The served version.
        served: String,
    },
    /// The harness cannot run on this runtime (CanPlace refused), before anything was
    /// journaled.
    #[error("harness {harness:?} requires a memory snapshot, which this runtime cannot take")]
    CannotPlace {
        /// The harness name.
        harness: String,
    },
    /// A memory-snapshot harness's execution cannot be resumed, replayed or forked here: the
    /// host does not snapshot process memory, and rebuilding it from history would break I4.
    #[error(
        "harness {harness:?} keeps state in memory: {operation} needs a memory snapshot this host does not take"
    )]
    NeedsMemorySnapshot {
        /// The harness name.
        harness: String,
        /// What was refused.
        operation: &'static str,
    },
    /// The journal does not describe a valid execution (`ErrInvalidExecutionLog`), e.g. an
    /// invocation whose inputs did not all commit. Nothing was called or appended.
    #[error("invalid execution log: {0}")]
    InvalidExecutionLog(String),
    /// An inherited tool intent has no result at the journal head (`ErrInheritedToolIntent`):
    /// fork at or after its TOOL_RESULT, or exec a new turn. Nothing was called or appended.
    #[error(
        "execution {execution_id}: inherited tool intent {tool_call_id} (record {seq}) has no result"
    )]
    InheritedToolIntent {
        /// The execution.
        execution_id: String,
        /// The unresolved call.
        tool_call_id: String,
        /// Its TOOL_CALL record.
        seq: Seq,
    },
    /// The turn waits for an approval decision; approve or deny, then resume.
    #[error(
        "execution {execution_id}: tool call {tool_call_id} awaits an approval decision (request {request_seq})"
    )]
    ApprovalPending {
        /// The execution.
        execution_id: String,
        /// The gated call.
        tool_call_id: String,
        /// Its APPROVAL_REQUEST record.
        request_seq: Seq,
    },
    /// No pending approval request for that call.
    #[error("no pending approval for tool call {0:?}")]
    NoPendingApproval(String),
    /// Replay (or recovery of a recorded prefix) found the harness doing something other than
    /// what the journal recorded (`ErrReplayDiverged`, I0, I5).
    #[error("execution {execution_id} diverged: {detail}")]
    Diverged {
        /// The execution.
        execution_id: String,
        /// What differed.
        detail: String,
    },
    /// The harness failed the turn; an ERROR record was written (best effort). Its code is
    /// `INVALID_ARGUMENT` for a rejected config, `CANCELLED` for a cancelled turn,
    /// `INTERNAL` when the harness's transport broke (a remote harness went away mid-turn:
    /// resume re-drives the interrupted turn), else `UNKNOWN`.
    #[error("execution {execution_id} failed: {error}")]
    TurnFailed {
        /// The execution.
        execution_id: String,
        /// What the harness returned.
        error: HarnessError,
    },
    /// The harness's `describe` failed: it is unavailable (`UNAVAILABLE`). Nothing was
    /// journaled, so the call is safe to retry.
    #[error("describe failed: {0}")]
    Describe(HarnessError),
    /// A journal this operation cannot go on with for want of what v0.1.2-era writers did
    /// not record: a v0.1.2 turn cut after its MODEL_CALL (`resume: recorded completion
    /// missing`: a v0.1.2 model call is not re-driven), or records with execution ids but
    /// no start marker of theirs (a pre-marker journal). Nothing was called or appended.
    #[error("legacy journal: {0}")]
    Legacy(&'static str),
    /// A fork point that is not a record of the parent.
    #[error("fork point {at} is past the head {head}")]
    ForkPoint {
        /// Requested.
        at: Seq,
        /// The parent's last seq.
        head: Seq,
    },
    /// The journal failed (including [`JournalError::Fenced`] and [`JournalError::Conflict`]
    /// when another writer took over).
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The chain does not verify.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// The status of a turn the harness failed (also the code of its journaled ERROR): a rejected
/// config is the caller's `INVALID_ARGUMENT`, a cancelled turn `CANCELLED`, anything else
/// `UNKNOWN`.
pub(crate) fn turn_failure_code(error: &HarnessError) -> Code {
    match error {
        HarnessError::Config(_) => Code::InvalidArgument,
        HarnessError::Sink(SinkError::Cancelled) => Code::Cancelled,
        // The harness's transport broke mid-turn (a remote harness went away, or broke the
        // Harness.Connect exchange): "the call fails with INTERNAL and the session is left
        // with an interrupted turn".
        HarnessError::Sink(SinkError::Transport(_)) => Code::Internal,
        _ => Code::Unknown,
    }
}

impl Error {
    /// The gRPC status code agentsessions maps this error to.
    pub fn code(&self) -> Code {
        match self {
            Error::MissingSessionUid
            | Error::UnknownHarness(_)
            | Error::InvalidInput { .. }
            | Error::ForkPoint { .. } => Code::InvalidArgument,
            Error::HarnessMismatch { .. }
            | Error::HarnessVersionMismatch { .. }
            | Error::CannotPlace { .. }
            | Error::NeedsMemorySnapshot { .. }
            | Error::InvalidExecutionLog(_)
            | Error::InheritedToolIntent { .. }
            | Error::ApprovalPending { .. }
            | Error::Legacy(_)
            | Error::Diverged { .. } => Code::FailedPrecondition,
            Error::NoPendingApproval(_) => Code::NotFound,
            Error::TurnFailed { error, .. } => turn_failure_code(error),
            Error::Describe(_) => Code::Unavailable,
            // `verify` fails on the journal like any other operation (an unknown session is
            // NOT_FOUND there too); a chain that does not hold is DATA_LOSS.
            Error::Journal(e) | Error::Verify(VerifyError::Journal(e)) => journal_code(e),
            Error::Verify(_) => Code::DataLoss,
        }
    }
}

fn journal_code(e: &JournalError) -> Code {
    match e {
        JournalError::NotFound(_) => Code::NotFound,
        JournalError::AlreadyExists(_) => Code::AlreadyExists,
        JournalError::InvalidSession(_) => Code::InvalidArgument,
        JournalError::ReadOnly { .. } => Code::FailedPrecondition,
        JournalError::Fenced { .. } | JournalError::Conflict { .. } | JournalError::Busy(_) => {
            Code::Aborted
        }
        // Stored data that does not read back or does not hold: corruption, not a host fault.
        JournalError::Corrupt { .. } => Code::DataLoss,
        _ => Code::Internal,
    }
}
