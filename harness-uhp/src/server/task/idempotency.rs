//! `Idempotency-Key`: a repeated key gets the first request's task, waited for if still
//! running, never a second run; the same key with another body is refused (tasks.md §6).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Task;
use super::response::final_reply;
use crate::protocol::IDEMPOTENCY_KEY_HEADER;
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::{Now, Reply, Request, UhpServer};

/// An idempotency key as stored with its task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKey {
    /// The key.
    pub key: String,
    /// SHA-256 of the request body, hex.
    pub fingerprint: String,
}

/// An idempotency entry.
#[derive(Clone, Debug)]
pub(crate) struct Idem {
    fingerprint: String,
    pub(crate) response_id: String,
    at: Instant,
}

/// The request's key with its body's fingerprint, if it has a key.
pub(super) fn request_key(req: &Request<'_>) -> Result<Option<StoredKey>, ApiError> {
    let key = match req.headers.get(IDEMPOTENCY_KEY_HEADER) {
        None => None,
        Some(v) => {
            let k = v.to_str().ok().filter(|k| !k.is_empty() && k.len() <= 255);
            Some(k.ok_or_else(|| {
                ApiError::invalid_input("`Idempotency-Key` must be 1 to 255 visible characters.")
                    .param(IDEMPOTENCY_KEY_HEADER)
            })?)
        }
    };
    let fingerprint = key.map(|_| hex(&Sha256::digest(req.body)));
    Ok(key.zip(fingerprint).map(|(k, fp)| StoredKey {
        key: k.to_owned(),
        fingerprint: fp,
    }))
}

impl UhpServer {
    /// A key seen before: the first request's task, or `422` for another body; `None` for a
    /// new key.
    pub(super) fn repeated_key(
        &mut self,
        now: Now,
        p: &Principal,
        k: &StoredKey,
        stream: bool,
        background: bool,
    ) -> Result<Option<Reply>, ApiError> {
        self.expire_keys(now.instant);
        if let Some(e) = self.idem.get(&(p.clone(), k.key.clone())).cloned() {
            if e.fingerprint != k.fingerprint {
                return Err(crate::server::shared::reused_key());
            }
            return self.replay(p, &e.response_id, stream, background).map(Some);
        }
        Ok(None)
    }

    /// Remembers a new task's key; past `max_idempotency_keys` the oldest is forgotten.
    pub(super) fn remember_key(&mut self, now: Now, p: &Principal, k: &StoredKey, rid: &str) {
        let entry = (p.clone(), k.key.clone());
        self.idem.insert(
            entry.clone(),
            Idem {
                fingerprint: k.fingerprint.clone(),
                response_id: rid.to_owned(),
                at: now.instant,
            },
        );
        self.idem_order.push_back(entry);
        while self.idem.len() > self.cfg.max_idempotency_keys {
            match self.idem_order.pop_front() {
                Some(old) => {
                    self.idem.remove(&old);
                }
                None => break,
            }
        }
    }

    /// A repeated idempotency key: the first request's task, never a second run.
    pub(crate) fn replay(
        &mut self,
        p: &Principal,
        rid: &str,
        stream: bool,
        background: bool,
    ) -> Result<Reply, ApiError> {
        let t = self.task(p, rid)?;
        if t.response.status.is_terminal() || background {
            return Ok(Reply::Full(final_reply(&t.response, stream)));
        }
        let w = self.new_wait(p, rid, stream);
        if let Some(t) = self.tasks.get_mut(rid) {
            t.waiters.push(w);
        }
        Ok(Reply::Wait(w))
    }

    fn expire_keys(&mut self, now: Instant) {
        while let Some(front) = self.idem_order.front() {
            let stale = match self.idem.get(front) {
                Some(e) => now.saturating_duration_since(e.at) > self.cfg.idempotency_ttl,
                None => true,
            };
            if !stale {
                break;
            }
            if let Some(k) = self.idem_order.pop_front() {
                if self
                    .idem
                    .get(&k)
                    .is_some_and(|e| now.saturating_duration_since(e.at) > self.cfg.idempotency_ttl)
                {
                    self.idem.remove(&k);
                }
            }
        }
    }
}

impl Task {
    pub(crate) fn idem_entry(&self, now: Instant) -> Option<((Principal, String), Idem)> {
        let k = self.idempotency.as_ref()?;
        Some((
            (self.principal.clone(), k.key.clone()),
            Idem {
                fingerprint: k.fingerprint.clone(),
                response_id: self.response.id.clone(),
                at: now,
            },
        ))
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
