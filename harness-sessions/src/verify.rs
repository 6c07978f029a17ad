//! `verify`: recompute a session's hash chain and name the first record that does not hold.
//!
//! Each record's hash covers the one before it, so a chain that holds vouches for everything
//! up to its last record, but not for records cut off after it: a journal cut after a whole
//! record verifies. Pin the head elsewhere ([`HeadPin`], the seq and content hash of the last
//! record, e.g. as printed after a turn) and check against it
//! ([`Journal::verify_head`](crate::journal::Journal::verify_head),
//! [`Controller::verify_head`](crate::Controller::verify_head)) to catch that too.

use std::fmt;
use std::str::FromStr;

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

impl Verified {
    /// The head as a pin (`None` for an empty journal).
    pub fn head_pin(&self) -> Option<HeadPin> {
        HeadPin::of(self.records, self.head)
    }
}

/// A session's head kept outside its journal: the seq and content hash of what was its last
/// record. Checked against it, a journal must still hold that record at that seq: one cut
/// after an earlier record fails ([`VerifyError::Truncated`]), and so does one whose history
/// up to it was replaced ([`VerifyError::NotPinnedHead`]); one that grew past it holds.
///
/// Its text form is `SEQ:HASH`, the seq in decimal and the 64 lowercase hex digits of the
/// content hash:
///
/// ```
/// use harness_sessions::verify::HeadPin;
///
/// let text = "7:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
/// let pin: HeadPin = text.parse().unwrap();
/// assert_eq!(pin.seq, 7);
/// assert_eq!(pin.to_string(), text);
/// assert!("0:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".parse::<HeadPin>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeadPin {
    /// The record's seq (from 1).
    pub seq: Seq,
    /// Its content hash.
    pub hash: ContentHash,
}

impl HeadPin {
    /// The pin of a head at `seq` whose record hashes to `hash` (`None` without a record).
    pub fn of(seq: Seq, hash: Option<ContentHash>) -> Option<Self> {
        hash.map(|hash| HeadPin { seq, hash })
    }
}

impl fmt::Display for HeadPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

/// Why a string is not a head pin `SEQ:HASH`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeadPinError {
    /// No `:` between the seq and the hash.
    #[error("a head pin is SEQ:HASH, with a colon")]
    NoColon,
    /// The seq is not a record's: decimal digits, from 1.
    #[error("the seq of a head pin is a record's, in decimal from 1")]
    Seq,
    /// The hash is not 64 lowercase hex digits.
    #[error("the hash of a head pin is 64 lowercase hex digits")]
    Hash,
}

impl FromStr for HeadPin {
    type Err = HeadPinError;

    fn from_str(text: &str) -> Result<Self, HeadPinError> {
        let (seq, hash) = text.split_once(':').ok_or(HeadPinError::NoColon)?;
        let seq = Some(seq)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<Seq>().ok())
            .filter(|&s| s > 0)
            .ok_or(HeadPinError::Seq)?;
        let hash = ContentHash::from_hex(hash.as_bytes()).ok_or(HeadPinError::Hash)?;
        Ok(HeadPin { seq, hash })
    }
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
    /// The journal ends before a pinned head: records `last + 1 ..= pinned` were cut off
    /// its tail (the chain of what is left holds, so only the pin tells).
    #[error(
        "records {first}..={pinned} are missing: the journal ends at record {last}, the pinned head is record {pinned} (records were cut off its tail)",
        first = last.saturating_add(1)
    )]
    Truncated {
        /// The pinned head's seq.
        pinned: Seq,
        /// The journal's last seq (0 when it is empty).
        last: Seq,
    },
    /// The record at a pinned head's seq is not the pinned record: the history up to it was
    /// replaced (by a chain that holds on its own).
    #[error(
        "record {seq}: content_hash {found} is not the pinned head's {pinned}: the history up to it was replaced"
    )]
    NotPinnedHead {
        /// The pinned seq.
        seq: Seq,
        /// The pinned content hash.
        pinned: ContentHash,
        /// The content hash of the journal's record at that seq.
        found: ContentHash,
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
            VerifyError::NotPinnedHead { seq, .. } => Some(*seq),
            // The first record missing.
            VerifyError::Truncated { last, .. } => Some(last.saturating_add(1)),
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
    /// A head the chain must reach and hold.
    pub(crate) pin: Option<HeadPin>,
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
        if let Some(pin) = &self.pin
            && pin.seq == seq
            && pin.hash != *content_hash
        {
            return Err(VerifyError::NotPinnedHead {
                seq,
                pinned: pin.hash,
                found: *content_hash,
            });
        }
        self.last_seq = seq;
        self.last_hash = Some(*content_hash);
        self.last_fence = fence;
        Ok(())
    }

    /// The chain that held, once it reached the pinned head (if any).
    pub(crate) fn finish(self) -> Result<Verified, VerifyError> {
        if let Some(pin) = &self.pin
            && self.last_seq < pin.seq
        {
            return Err(VerifyError::Truncated {
                pinned: pin.seq,
                last: self.last_seq,
            });
        }
        Ok(Verified {
            records: self.last_seq,
            head: self.last_hash,
        })
    }
}

/// Verifies records in memory: seqs 1, 2, …; each `prev_hash` the previous `content_hash`;
/// each `content_hash` recomputed from the stored canonical event; fences never decrease.
pub fn verify_records(records: &[Record]) -> Result<Verified, VerifyError> {
    check_records(records, None)
}

/// [`verify_records`], and the records reach `pin` and hold it: the record at `pin.seq` has
/// `pin.hash` ([`VerifyError::Truncated`] if there is none, [`VerifyError::NotPinnedHead`]
/// if it differs). Records after the pin are fine: the journal grew.
pub fn verify_records_head(records: &[Record], pin: &HeadPin) -> Result<Verified, VerifyError> {
    check_records(records, Some(*pin))
}

fn check_records(records: &[Record], pin: Option<HeadPin>) -> Result<Verified, VerifyError> {
    let mut c = ChainCheck {
        pin,
        ..ChainCheck::default()
    };
    for r in records {
        c.check(
            r.seq,
            r.prev_hash.as_ref(),
            &r.content_hash,
            r.fence,
            r.canonical().as_bytes(),
        )?;
    }
    c.finish()
}
