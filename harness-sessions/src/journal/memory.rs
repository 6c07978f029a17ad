//! An in-memory journal.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::{Journal, JournalError, SessionMeta, check_append};
use crate::record::{Fence, Head, Record, Seq};

#[derive(Debug, Default)]
struct Session {
    meta: SessionMeta,
    records: Vec<Record>,
    fence: Fence,
}

impl Session {
    fn head(&self) -> Head {
        Head {
            seq: self.records.last().map_or(0, |r| r.seq),
            hash: self.records.last().map(|r| r.content_hash),
            fence: self.fence,
        }
    }
}

/// A journal held in memory: every session's records in a `Vec`.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    sessions: Mutex<HashMap<String, Session>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, Session>>, JournalError> {
        self.sessions
            .lock()
            .map_err(|_| JournalError::Io("journal lock poisoned".into()))
    }

    /// Replaces a stored record's bytes, for tamper tests: the chain no longer holds and
    /// [`verify`](Journal::verify) must say where.
    pub fn tamper(&self, session: &str, seq: Seq, record: Record) -> Result<(), JournalError> {
        let mut s = self.lock()?;
        let sess = s
            .get_mut(session)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))?;
        let idx = usize::try_from(seq)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .filter(|&i| i < sess.records.len())
            .ok_or_else(|| JournalError::BadRecords(format!("no record {seq}")))?;
        sess.records[idx] = record;
        Ok(())
    }
}

fn validate(session: &str) -> Result<(), JournalError> {
    if session.is_empty() {
        return Err(JournalError::InvalidSession(session.to_owned()));
    }
    Ok(())
}

impl Journal for MemoryJournal {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        validate(session)?;
        let mut s = self.lock()?;
        if s.contains_key(session) {
            return Err(JournalError::AlreadyExists(session.to_owned()));
        }
        s.insert(
            session.to_owned(),
            Session {
                meta: meta.clone(),
                ..Session::default()
            },
        );
        Ok(())
    }

    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        let s = self.lock()?;
        s.get(session)
            .map(|x| x.meta.clone())
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))
    }

    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        Ok(self.lock()?.keys().cloned().collect())
    }

    fn head(&self, session: &str) -> Result<Head, JournalError> {
        let s = self.lock()?;
        s.get(session)
            .map(Session::head)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))
    }

    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        let mut s = self.lock()?;
        let sess = s
            .get_mut(session)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))?;
        sess.fence = sess
            .fence
            .checked_add(1)
            .ok_or_else(|| JournalError::Corrupt {
                session: session.to_owned(),
                line: 0,
                reason: "the stored fence is u64::MAX: no fence left".into(),
            })?;
        Ok(sess.fence)
    }

    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        let mut s = self.lock()?;
        let sess = s
            .get_mut(session)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))?;
        check_append(session, &sess.head(), expected_last_seq, fence, records)?;
        sess.records.extend_from_slice(records);
        Ok(())
    }

    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        let s = self.lock()?;
        let sess = s
            .get(session)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))?;
        let len = sess.records.len();
        let lo = usize::try_from(from.max(1) - 1)
            .unwrap_or(usize::MAX)
            .min(len);
        let hi = to
            .map(|t| usize::try_from(t).unwrap_or(usize::MAX).min(len))
            .unwrap_or(len);
        Ok(if lo < hi {
            sess.records[lo..hi].to_vec()
        } else {
            Vec::new()
        })
    }

    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError> {
        validate(child)?;
        let mut s = self.lock()?;
        let p = s
            .get(parent)
            .ok_or_else(|| JournalError::NotFound(parent.to_owned()))?;
        let head = p.head();
        if at > head.seq {
            return Err(JournalError::ForkPoint {
                session: parent.to_owned(),
                at,
                head: head.seq,
            });
        }
        if s.contains_key(child) {
            return Err(JournalError::AlreadyExists(child.to_owned()));
        }
        let n = usize::try_from(at)
            .unwrap_or(usize::MAX)
            .min(p.records.len());
        let records = p.records[..n].to_vec();
        let fence = records.iter().map(|r| r.fence).max().unwrap_or(0);
        s.insert(
            child.to_owned(),
            Session {
                meta: meta.clone(),
                records,
                fence,
            },
        );
        Ok(())
    }
}
