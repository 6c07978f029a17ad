//! Journal records: an [`Event`] with the host-assigned `seq`, `prev_hash`, `content_hash`
//! and `fence` (agentsessions `LogRecord`).

use std::sync::Arc;

use harness_core::event::{Event, EventBody};

use crate::hash::{CanonicalError, ContentHash, canonical_event, content_hash};

/// A record's position in its session's journal: 1, 2, 3, … (0 means "before the first").
pub type Seq = u64;

/// A writer incarnation's fence. The journal rejects appends under a fence lower than the
/// newest one acquired, so a zombie writer cannot extend the log.
pub type Fence = u64;

/// One journal record.
#[derive(Clone, Debug)]
pub struct Record {
    /// Position, from 1.
    pub seq: Seq,
    /// The previous record's content hash; `None` for seq 1.
    pub prev_hash: Option<ContentHash>,
    /// SHA-256 of the canonical `{event, prev_hash, seq}`.
    pub content_hash: ContentHash,
    /// The fence of the writer that appended it.
    pub fence: Fence,
    /// The event.
    pub event: Event,
    /// The RFC 8785 canonical JSON of the event: the exact bytes that were hashed.
    canonical: Arc<str>,
    /// Whether `event` is known to serialize back to `canonical` (true for records built
    /// here; records decoded from storage may hold fields this version does not model).
    built: bool,
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
            && self.prev_hash == other.prev_hash
            && self.content_hash == other.content_hash
            && self.fence == other.fence
            && self.canonical == other.canonical
    }
}

impl Record {
    /// Seals `event` as the record at `seq` after a record whose hash is `prev`.
    pub fn seal(
        event: Event,
        seq: Seq,
        prev: Option<ContentHash>,
        fence: Fence,
    ) -> Result<Self, CanonicalError> {
        let canonical = canonical_event(&event)?;
        let content_hash = content_hash(&canonical, prev.as_ref(), seq);
        Ok(Record {
            seq,
            prev_hash: prev,
            content_hash,
            fence,
            event,
            canonical: canonical.into(),
            built: true,
        })
    }

    /// A record read back from storage: its fields as stored and the stored canonical event
    /// text (which `verify` hashes), with `event` decoded from that text.
    pub fn from_stored(
        seq: Seq,
        prev_hash: Option<ContentHash>,
        content_hash: ContentHash,
        fence: Fence,
        canonical: Arc<str>,
    ) -> Result<Self, serde_json::Error> {
        let event: Event = serde_json::from_str(&canonical)?;
        Ok(Record {
            seq,
            prev_hash,
            content_hash,
            fence,
            event,
            canonical,
            built: false,
        })
    }

    /// The canonical JSON of the event, as hashed and stored.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// A shared handle to the canonical JSON (cheap to clone).
    pub fn canonical_arc(&self) -> Arc<str> {
        Arc::clone(&self.canonical)
    }

    /// Recomputes this record's content hash from its stored canonical event, seq and
    /// `prev_hash`.
    pub fn recompute_hash(&self) -> ContentHash {
        content_hash(&self.canonical, self.prev_hash.as_ref(), self.seq)
    }

    /// Whether this record's event, with its own envelope (execution id, timestamp, schema
    /// version, actor) and `body`, is byte-for-byte the stored event (I5).
    pub(crate) fn holds_body(&self, body: EventBody) -> bool {
        if self.built {
            // `canonical` was computed from `event`: equal bodies give equal bytes.
            self.event.body == body
        } else {
            let rebuilt = Event {
                execution_id: self.event.execution_id.clone(),
                timestamp: self.event.timestamp,
                schema_version: self.event.schema_version,
                actor: self.event.actor.clone(),
                body,
            };
            self.holds(&rebuilt)
        }
    }

    /// Whether `other` is byte-for-byte the event this record holds, once canonicalized (I5).
    pub(crate) fn holds(&self, other: &Event) -> bool {
        if self.built {
            // `canonical` was computed from `event`, so equal typed events have equal bytes.
            &self.event == other
        } else {
            canonical_event(other).is_ok_and(|c| *c == *self.canonical)
        }
    }
}

/// The last record of a session's journal, and its current fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Head {
    /// Seq of the last record (0 when the journal is empty).
    pub seq: Seq,
    /// Its content hash (`None` when the journal is empty).
    pub hash: Option<ContentHash>,
    /// The newest fence acquired for the session (0 when none).
    pub fence: Fence,
}

impl Head {
    /// The seq after the head; `None` when the head is already at `u64::MAX`.
    pub(crate) fn next_seq(&self) -> Option<Seq> {
        self.seq.checked_add(1)
    }
}
