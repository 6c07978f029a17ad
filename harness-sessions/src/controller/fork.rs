//! `fork`: a new session from a prefix of another, and the intents it inherits.

use harness_core::event::{EventBody, LifecycleKind};

use super::Controller;
use super::turn::lifecycle;
use crate::error::Error;
use crate::execution::Execution;
use crate::hash::ContentHash;
use crate::journal::{ForkOrigin, SessionMeta};
use crate::record::{Record, Seq};
use crate::verify::HeadPin;

/// A fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkOutcome {
    /// The new session.
    pub child: String,
    /// Its LIFECYCLE FORK record.
    pub fork_seq: Seq,
    /// That record's content hash: with `fork_seq`, the child's head.
    pub fork_hash: ContentHash,
}

impl ForkOutcome {
    /// The child's head (its FORK record) as a pin, for
    /// [`Controller::verify_head`](super::Controller::verify_head).
    pub fn head_pin(&self) -> HeadPin {
        HeadPin {
            seq: self.fork_seq,
            hash: self.fork_hash,
        }
    }
}

impl Controller {
    /// Forks `parent` at `at` into a new session `child`: copies records `1..=at` verbatim
    /// (same hashes), then appends LIFECYCLE FORK (`parent@<at>`) chained onto
    /// `parent@at`. The child is a new dedup namespace: an inherited tool intent without a
    /// result is refused on resume.
    pub async fn fork(&self, parent: &str, at: Seq, child: &str) -> Result<ForkOutcome, Error> {
        if parent.is_empty() || child.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        let meta = self.journal.meta(parent)?;
        let head = self.journal.head(parent)?;
        if at > head.seq {
            return Err(Error::ForkPoint { at, head: head.seq });
        }
        // Placement and the harness's resumability, checked before anything is written.
        self.prepare(&meta.harness)
            .await?
            .journal_rebuildable("fork")?;
        let child_meta = SessionMeta {
            harness: meta.harness,
            parent: Some(ForkOrigin {
                session: parent.to_owned(),
                seq: at,
            }),
        };
        self.journal.fork(parent, at, child, &child_meta)?;
        let body = lifecycle(LifecycleKind::Fork, format!("parent@{at}"));
        let rec = self.append_host_record(child, String::new(), body)?;
        Ok(ForkOutcome {
            child: child.to_owned(),
            fork_seq: rec.seq,
            fork_hash: rec.content_hash,
        })
    }

    /// An inherited (pre-fork) host-executed tool intent of `x` without a result at the head.
    pub(super) fn inherited_intent(
        records: &[Record],
        x: &Execution,
        fork_seq: Seq,
    ) -> Option<(String, Seq)> {
        if fork_seq == 0 {
            return None;
        }
        for (n, &i) in x.effects.iter().enumerate() {
            let r = &records[i];
            let EventBody::ToolCall(c) = &r.event.body else {
                continue;
            };
            if r.seq >= fork_seq || !c.mediation.is_host_executed() {
                continue;
            }
            let resolved = x.effects[n + 1..].iter().any(
                |&j| matches!(&records[j].event.body, EventBody::ToolResult(res) if res.id == c.id),
            );
            if !resolved {
                return Some((c.id.clone(), r.seq));
            }
        }
        None
    }
}
