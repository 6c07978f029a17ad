//! `verify`: recompute a session's hash chain and name the first record that does not hold.

use crate::hash::{ContentHash, content_hash_bytes};
use crate::journal_error::JournalError;
use crate::record::{Fence, Record, Seq};

/// A chain that holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// How many records were checked.
    pub records: u64,
    /// The last record's content hash (`None` for an empty journal): anchor it elsewhere to
    /// make the whole history tamper-evident.
    pub head: Option<ContentHash>,
}

/// The first record that does not hold, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The record's stored `content_hash` is not the hash of its event, `prev_hash` and seq:
    /// the record was changed after it was written.
    #[error("record {seq}: content_hash {stored} does not match the recomputed {computed}")]
    HashMismatch {
        /// The record.
        seq: Seq,
        /// What the record says.
        stored: ContentHash,
        /// What its content hashes to.
        computed: ContentHash,
    },
    /// The record's `prev_hash` is not the previous record's `content_hash`.
    #[error("record {seq}: prev_hash does not match record {prev}'s content_hash", prev = seq.saturating_sub(1))]
    BrokenLink {
        /// The record.
        seq: Seq,
    },
    /// Records are missing, repeated or out of order.
    #[error("record {expected}: found seq {found} instead")]
    SeqGap {
        /// The seq that should come next.
        expected: Seq,
        /// The seq found.
        found: Seq,
    },
    /// The record's fence breaks the single-writer order (lower than an earlier record's,
    /// zero, or not the fence its writer acquired).
    #[error("record {seq}: fence {fence} where {expected} was expected")]
    Fence {
        /// The record.
        seq: Seq,
        /// Its fence.
        fence: Fence,
        /// The fence it should carry.
        expected: Fence,
    },
    /// The stored record cannot be read at all.
    #[error("record {seq} (line {line}): malformed: {reason}")]
    Malformed {
        /// The seq the record would have.
        seq: Seq,
        /// 1-based line in the session's file.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// The last record is incomplete (no terminating newline): a torn write. A writer
    /// opening the session sets it aside; a read-only journal leaves it in place.
    #[error("record {seq} (line {line}): torn (incomplete last record)")]
    Torn {
        /// The seq the record would have.
        seq: Seq,
        /// 1-based line in the session's file.
        line: u64,
    },
    /// The journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl VerifyError {
    /// The seq of the record that does not hold, when the failure is about one.
    pub fn seq(&self) -> Option<Seq> {
        match self {
            VerifyError::HashMismatch { seq, .. }
            | VerifyError::BrokenLink { seq }
            | VerifyError::Fence { seq, .. }
            | VerifyError::Malformed { seq, .. }
            | VerifyError::Torn { seq, .. } => Some(*seq),
            VerifyError::SeqGap { expected, .. } => Some(*expected),
            VerifyError::Journal(_) => None,
        }
    }
}

/// Incremental chain checker: feed records in order.
#[derive(Debug, Default)]
pub(crate) struct ChainCheck {
    pub(crate) last_seq: Seq,
    pub(crate) last_hash: Option<ContentHash>,
    pub(crate) last_fence: Fence,
}

impl ChainCheck {
    /// Checks one record given as its stored parts.
    pub(crate) fn check(
        &mut self,
        seq: Seq,
        prev_hash: Option<&ContentHash>,
        content_hash: &ContentHash,
        fence: Fence,
        canonical_event: &[u8],
    ) -> Result<(), VerifyError> {
        let expected = self.last_seq + 1;
        if seq != expected {
            return Err(VerifyError::SeqGap {
                expected,
                found: seq,
            });
        }
        if prev_hash != self.last_hash.as_ref() {
            return Err(VerifyError::BrokenLink { seq });
        }
        let computed = content_hash_bytes(canonical_event, prev_hash, seq);
        if computed != *content_hash {
            return Err(VerifyError::HashMismatch {
                seq,
                stored: *content_hash,
                computed,
            });
        }
        if fence == 0 || fence < self.last_fence {
            return Err(VerifyError::Fence {
                seq,
                fence,
                expected: self.last_fence.max(1),
            });
        }
        self.last_seq = seq;
        self.last_hash = Some(*content_hash);
        self.last_fence = fence;
        Ok(())
    }

    pub(crate) fn finish(self) -> Verified {
        Verified {
            records: self.last_seq,
            head: self.last_hash,
        }
    }
}

/// Verifies records in memory: seqs 1, 2, …; each `prev_hash` the previous `content_hash`;
/// each `content_hash` recomputed from the stored canonical event; fences never decrease.
pub fn verify_records(records: &[Record]) -> Result<Verified, VerifyError> {
    let mut c = ChainCheck::default();
    for r in records {
        c.check(
            r.seq,
            r.prev_hash.as_ref(),
            &r.content_hash,
            r.fence,
            r.canonical().as_bytes(),
        )?;
    }
    Ok(c.finish())
}
