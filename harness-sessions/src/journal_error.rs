//! [`JournalError`], a leaf below `verify` and the stores, so `verify` stays pure over records.

use crate::record::{Fence, Seq};

/// Why a journal operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// No such session.
    #[error("session {0} not found")]
    NotFound(String),
    /// The session already exists (create, or fork into a non-empty child).
    #[error("session {0} already exists")]
    AlreadyExists(String),
    /// A session UID that this journal cannot store (empty, or not a safe file name).
    #[error("invalid session uid {0:?}")]
    InvalidSession(String),
    /// The append's fence is lower than the newest fence acquired for the session: another
    /// writer incarnation owns the log (agentsessions `eventlog.ErrFenced`).
    #[error("fenced: append under fence {fence}, session {session} is at fence {current}")]
    Fenced {
        /// The session.
        session: String,
        /// The fence the append carried.
        fence: Fence,
        /// The session's newest fence.
        current: Fence,
    },
    /// The append's fence was never acquired (higher than the session's newest).
    #[error("unknown fence {fence} for session {session} (newest is {current})")]
    UnknownFence {
        /// The session.
        session: String,
        /// The fence the append carried.
        fence: Fence,
        /// The session's newest fence.
        current: Fence,
    },
    /// The journal's head is not where the writer expected it (agentsessions
    /// `eventlog.ErrConflict`): someone else appended.
    #[error("conflict: expected last seq {expected}, session {session} is at {actual}")]
    Conflict {
        /// The session.
        session: String,
        /// The writer's expected last seq.
        expected: Seq,
        /// The journal's last seq.
        actual: Seq,
    },
    /// Another writer (another process, or another journal value on the same storage) holds
    /// the session: retry once it is done.
    #[error("session {0} is open by another writer")]
    Busy(String),
    /// The records handed to `append` do not continue the chain (wrong seq, prev_hash or
    /// fence).
    #[error("records do not continue the chain: {0}")]
    BadRecords(String),
    /// A fork point past the parent's head.
    #[error("fork point {at} is past the head {head} of session {session}")]
    ForkPoint {
        /// The parent session.
        session: String,
        /// The requested fork point.
        at: Seq,
        /// The parent's last seq.
        head: Seq,
    },
    /// Stored data could not be read back (a record that does not parse).
    #[error("session {session}: corrupt journal at line {line}: {reason}")]
    Corrupt {
        /// The session.
        session: String,
        /// 1-based line of the session's file (or record index for other stores).
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// The journal was opened read-only (`FileJournal::open_read_only`) and `operation`
    /// writes.
    #[error("session {session}: {operation} refused: the journal is open read-only")]
    ReadOnly {
        /// The session.
        session: String,
        /// What was refused.
        operation: &'static str,
    },
    /// The storage failed.
    #[error("journal i/o: {0}")]
    Io(String),
}

impl From<std::io::Error> for JournalError {
    fn from(e: std::io::Error) -> Self {
        JournalError::Io(e.to_string())
    }
}

impl JournalError {
    /// The store's head is at `u64::MAX`: no seq is left for another record.
    pub(crate) fn no_seq_left(session: &str) -> Self {
        JournalError::Corrupt {
            session: session.to_owned(),
            line: 0,
            reason: "the head seq is u64::MAX: no seq left".into(),
        }
    }
}
