//! Journal storage: one append-only log of [`Record`]s per session, behind one trait.
//!
//! - [`MemoryJournal`]: in memory, for tests and short-lived hosts.
//! - [`FileJournal`]: the embedded default, one append-only file per session in a folder,
//!   crash-safe, with an explicit [`Durability`] policy.
//! - `PgJournal` (feature `postgres`): PostgreSQL, for several hosts on one database: a table
//!   of `(session, seq, prev_hash, content_hash, fence, event)` rows, a per-session fence and
//!   head, and a transaction per [`append`](Journal::append) that checks the fence and the
//!   head (see its module, `journal::postgres`).
//!
//! ## Storage and the sans-IO machines
//!
//! The trait is synchronous and is called by the [`Controller`](crate::Controller) (the
//! driver level), never by the harness or the codecs. A store does its I/O inside the call:
//! the file journal blocks the calling thread on the disk, the PostgreSQL journal on one
//! round trip to the server (its pool runs on a small runtime of its own,
//! `harness_core::pg::Pg`, so the call works from any thread, in or out of an async
//! runtime). Nothing above the trait changes with the store.

mod file;
mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;

use serde::{Deserialize, Serialize};

pub use file::{Durability, FileJournal, TornTail, verify_file_bytes, verify_file_bytes_head};
pub use memory::MemoryJournal;
#[cfg(feature = "postgres")]
pub use postgres::{PgJournal, PgReceipts};

pub use crate::journal_error::JournalError;
use crate::record::{Fence, Head, Record, Seq};
use crate::verify::{HeadPin, Verified, VerifyError, verify_records, verify_records_head};

/// Where a forked session came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The parent session.
    pub session: String,
    /// The last parent record copied into the child.
    pub seq: Seq,
}

/// What a journal keeps about a session besides its records.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session's stored default harness (a registry name).
    pub harness: String,
    /// The parent, for a forked session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ForkOrigin>,
}

/// Storage for session journals.
///
/// Every method takes `&self`: implementations serialize internally, so one journal can be
/// shared by the host's concurrent sessions. The file journal does file I/O; nothing here
/// reads a clock or spawns a thread.
pub trait Journal: Send + Sync {
    /// Creates an empty session. Fails with [`JournalError::AlreadyExists`].
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError>;

    /// The session's metadata.
    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError>;

    /// Every session, in no particular order.
    fn sessions(&self) -> Result<Vec<String>, JournalError>;

    /// The session's last record and newest fence.
    fn head(&self, session: &str) -> Result<Head, JournalError>;

    /// Mints a new fence for a new writer incarnation: one higher than any fence the session
    /// has seen, made durable before it is returned. Appends under older fences then fail
    /// with [`JournalError::Fenced`].
    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError>;

    /// Appends `records` if and only if the session's last seq is `expected_last_seq`
    /// (else [`JournalError::Conflict`]) and `fence` is the newest fence (a lower one is
    /// [`JournalError::Fenced`]). The records must continue the chain: seqs
    /// `expected_last_seq + 1, …`, each `prev_hash` the previous record's hash, each
    /// carrying `fence`. All or none are appended.
    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError>;

    /// The records with `from <= seq <= to` (`to = None`: to the head), in order.
    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError>;

    /// Creates `child` holding a verbatim copy of `parent`'s records `1..=at` (same seqs,
    /// hashes and fences), with `meta`. The child must not exist. Its fence starts at the
    /// highest fence copied, so the child's first [`acquire_fence`](Self::acquire_fence)
    /// mints a new one.
    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError>;

    /// A durability point: the host calls it when a turn ends (completed, failed or parked).
    /// What it does depends on the store's policy (the file journal fsyncs here by default).
    fn sync(&self, session: &str) -> Result<(), JournalError> {
        let _ = session;
        Ok(())
    }

    /// Recomputes the session's hash chain and names the first record that does not hold.
    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        let records = self.read(session, 1, None).map_err(VerifyError::Journal)?;
        verify_records(&records)
    }

    /// [`verify`](Self::verify), and the session still holds the pinned head `pin`: a
    /// journal cut after an earlier record is [`VerifyError::Truncated`], one whose record at
    /// `pin.seq` differs is [`VerifyError::NotPinnedHead`]. A journal that grew past the pin
    /// holds.
    fn verify_head(&self, session: &str, pin: &HeadPin) -> Result<Verified, VerifyError> {
        let records = self.read(session, 1, None).map_err(VerifyError::Journal)?;
        verify_records_head(&records, pin)
    }
}

impl<J: Journal + ?Sized> Journal for std::sync::Arc<J> {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        (**self).create(session, meta)
    }
    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        (**self).meta(session)
    }
    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        (**self).sessions()
    }
    fn head(&self, session: &str) -> Result<Head, JournalError> {
        (**self).head(session)
    }
    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        (**self).acquire_fence(session)
    }
    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        (**self).append(session, expected_last_seq, fence, records)
    }
    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        (**self).read(session, from, to)
    }
    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError> {
        (**self).fork(parent, at, child, meta)
    }
    fn sync(&self, session: &str) -> Result<(), JournalError> {
        (**self).sync(session)
    }
    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        (**self).verify(session)
    }
    fn verify_head(&self, session: &str, pin: &HeadPin) -> Result<Verified, VerifyError> {
        (**self).verify_head(session, pin)
    }
}

/// The checks every store makes before appending: fence, head, chain continuity.
pub(crate) fn check_append(
    session: &str,
    head: &Head,
    expected_last_seq: Seq,
    fence: Fence,
    records: &[Record],
) -> Result<(), JournalError> {
    if fence < head.fence {
        return Err(JournalError::Fenced {
            session: session.to_owned(),
            fence,
            current: head.fence,
        });
    }
    if fence > head.fence {
        return Err(JournalError::UnknownFence {
            session: session.to_owned(),
            fence,
            current: head.fence,
        });
    }
    if expected_last_seq != head.seq {
        return Err(JournalError::Conflict {
            session: session.to_owned(),
            expected: expected_last_seq,
            actual: head.seq,
        });
    }
    let mut prev = head.hash;
    let mut seq = head.seq;
    for r in records {
        seq = seq.checked_add(1).ok_or_else(|| {
            JournalError::BadRecords(format!("session {session} has no seq after {seq}"))
        })?;
        if r.seq != seq {
            return Err(JournalError::BadRecords(format!(
                "record seq {} where {seq} was expected",
                r.seq
            )));
        }
        if r.prev_hash != prev {
            return Err(JournalError::BadRecords(format!(
                "record {seq}: prev_hash does not match the previous record"
            )));
        }
        if r.fence != fence {
            return Err(JournalError::BadRecords(format!(
                "record {seq}: fence {} where {fence} was expected",
                r.fence
            )));
        }
        prev = Some(r.content_hash);
    }
    Ok(())
}
