//! What survives a restart, and where it goes.
//!
//! The machine never does I/O. With [`UhpServerConfig::persist`](super::UhpServerConfig::persist)
//! it emits a [`StoreRecord`] for each change worth keeping ([`ServerEvent::Persist`](super::ServerEvent::Persist));
//! the driver hands them to a [`Store`], an async trait at the driver level. At start the
//! driver [`load`](Store::load)s the records and feeds each to
//! [`UhpServer::restore`](super::UhpServer::restore), in order; later records of one object replace
//! earlier ones, deletions remove. A store compacts its log from
//! [`UhpServer::snapshot`](super::UhpServer::snapshot).
//!
//! Records are upserts keyed by object ([`StoreRecord::key`]): a task (when created — so that its
//! `Idempotency-Key` survives a crash — and when it ends), a session (its turns,
//! conversation, artifacts and share), a configured harness, an upload, and each deletion.
//! [`MemoryStore`] keeps nothing (the machine's memory is the store); the `axum` feature's
//! `FileStore` writes them to disk, and the `postgres` feature's `PgStore` to PostgreSQL.
//!
//! A store several hosts serve from at once says so ([`Store::shared`]) and does four more
//! things (each with a single-host default, so the memory and file stores are unchanged):
//! [`claim`](Store::claim) stores a new task with its idempotency key and its session's turn
//! slot atomically, [`fetch`](Store::fetch) reads one object as another host left it,
//! [`watch`](Store::watch) reports other hosts' writes as they commit, and
//! [`request_cancel`](Store::request_cancel) asks the host running a task to stop it. See
//! [the server's docs](super#several-hosts-on-one-store).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::UhpServer;
use super::auth::Principal;
use super::file::StoredFile;
use super::harness::HarnessObject;
use super::session::{Session, StoredSession};
use super::task::{StoredKey, Task};
use crate::response::Response;

/// A task as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredTask {
    /// The response object.
    pub response: Response,
    /// What `input_items` returns.
    pub input_items: Vec<Value>,
    /// The user's text.
    #[serde(default)]
    pub input_text: String,
    /// Its session.
    pub session_id: String,
    /// Its configured harness.
    pub harness_id: String,
    /// Its idempotency key.
    #[serde(default)]
    pub idempotency: Option<StoredKey>,
}

/// One change to persist.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoreRecord {
    /// A configured harness, created or updated.
    Harness {
        /// Its owner.
        principal: Principal,
        /// The harness.
        harness: Box<HarnessObject>,
    },
    /// A configured harness deleted.
    HarnessDeleted {
        /// Its owner.
        principal: Principal,
        /// Its id.
        id: String,
    },
    /// A task, created or ended.
    Response {
        /// Its owner.
        principal: Principal,
        /// The task.
        task: Box<StoredTask>,
    },
    /// A stored response deleted.
    ResponseDeleted {
        /// Its id.
        id: String,
    },
    /// A session, changed.
    Session {
        /// Its owner.
        principal: Principal,
        /// The session.
        session: Box<StoredSession>,
    },
    /// A session deleted (or expired).
    SessionDeleted {
        /// Its id.
        id: String,
        /// Expired by the server rather than deleted by its owner.
        expired: bool,
    },
    /// An upload forgotten.
    UploadDeleted {
        /// Its id.
        id: String,
    },
    /// An upload.
    Upload {
        /// Its owner.
        principal: Principal,
        /// The file.
        file: Box<StoredFile>,
    },
}

impl StoreRecord {
    /// The object the record is about (`kind`, `id`): a later record with the same key
    /// replaces or deletes it.
    pub fn key(&self) -> (&'static str, &str) {
        match self {
            StoreRecord::Harness { harness, .. } => ("harness", &harness.id),
            StoreRecord::HarnessDeleted { id, .. } => ("harness", id),
            StoreRecord::Response { task, .. } => ("response", &task.response.id),
            StoreRecord::ResponseDeleted { id } => ("response", id),
            StoreRecord::Session { session, .. } => ("session", &session.id),
            StoreRecord::SessionDeleted { id, .. } => ("session", id),
            StoreRecord::Upload { file, .. } => ("upload", &file.id),
            StoreRecord::UploadDeleted { id } => ("upload", id),
        }
    }

    /// Whether the record deletes its object.
    pub fn is_deletion(&self) -> bool {
        matches!(
            self,
            StoreRecord::HarnessDeleted { .. }
                | StoreRecord::ResponseDeleted { .. }
                | StoreRecord::SessionDeleted { .. }
        )
    }
}

impl StoredTask {
    /// The host that ran the task is gone while it still ran: the task ends `failed` (it is
    /// never run a second time). A store shared by several hosts applies it to a running
    /// task whose host it knows to be gone; a single host to every running task at start.
    pub fn orphan(&mut self) {
        if !self.response.status.is_terminal() {
            self.response.status = crate::response::ResponseStatus::Failed;
            self.response.error = Some(
                crate::error::ErrorObject::new(
                    "harness_error",
                    "The server running the task stopped before it ended.",
                )
                .with_type("harness_error"),
            );
        }
    }
}

/// A new task in a store several hosts share ([`ServerEvent::Claim`](super::ServerEvent::Claim)):
/// its `Idempotency-Key`, its first record and its new session's, stored together or not at
/// all, before anyone is answered (so that every host can read the task at once).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyClaim {
    /// The caller the key belongs to (keys are scoped per principal).
    pub principal: Principal,
    /// The key and the request's fingerprint, if the request had a key.
    pub key: Option<StoredKey>,
    /// The new task.
    pub response_id: String,
    /// Its session: one task runs in a session at a time (lifecycle.md §5), across hosts.
    pub session_id: String,
    /// The new task's record ([`StoreRecord::Response`]).
    pub record: StoreRecord,
    /// Written with it: the task's new session.
    pub also: Vec<StoreRecord>,
    /// How long a key is held ([`UhpServerConfig::idempotency_ttl`](super::UhpServerConfig::idempotency_ttl)):
    /// an older claim is expired and taken over.
    pub ttl: std::time::Duration,
}

/// What a [`KeyClaim`] found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Claimed {
    /// The key is the new task's; its record is stored.
    Won,
    /// An earlier task holds the key (through this host or another).
    Held {
        /// That task.
        response_id: String,
        /// The fingerprint of the request that made it.
        fingerprint: String,
        /// Its record, if it is still stored.
        task: Option<StoreRecord>,
    },
    /// A task runs in the session already (on another host): nothing was written.
    SessionBusy,
}

/// What [`Store::fetch`] found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fetched {
    /// The object as another host last wrote it.
    Found(StoreRecord),
    /// No record: deleted (or never stored).
    Gone,
    /// Nothing newer than this host's own last write of it.
    Unchanged,
}

/// Something another host did to a store several hosts share ([`Store::watch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// An object (`kind`, `id` as [`StoreRecord::key`]) was written or deleted: read it again
    /// ([`Store::fetch`]).
    Object {
        /// `response`, `session`, `harness` or `upload`.
        kind: String,
        /// Its id.
        id: String,
    },
    /// A host asks whoever runs this task to cancel it.
    Cancel {
        /// The task.
        response_id: String,
    },
    /// Changes may have been missed (the watch reconnected or fell behind): read everything
    /// again ([`Store::load`]).
    Resync,
}

/// A running [`Store::watch`]; dropping it stops it.
pub trait Watch: Send + Sync {
    /// Whether it stopped on its own (the connection ended): watch again.
    fn is_finished(&self) -> bool;
}

/// What [`Store::watch`] calls with each change; it must not block.
pub type OnChange = Box<dyn Fn(Change) + Send + Sync>;

/// Why a store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The storage failed.
    #[error("store: {0}")]
    Io(String),
}

/// Where records go (see the [module docs](self)). Async, at the driver level: the machine
/// never calls it.
#[async_trait]
pub trait Store: Send + Sync {
    /// Every record written so far (or an equivalent compacted list), in order.
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError>;
    /// Appends records, in order.
    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError>;
    /// Whether records are kept at all (the driver sets
    /// [`UhpServerConfig::persist`](super::UhpServerConfig::persist) from it).
    fn durable(&self) -> bool {
        true
    }
    /// Whether other hosts serve from this store at the same time (default `false`). A shared
    /// store must also implement [`claim`](Self::claim), [`fetch`](Self::fetch),
    /// [`watch`](Self::watch) and [`request_cancel`](Self::request_cancel); the driver then
    /// claims idempotency keys through it and reads other hosts' objects from it.
    fn shared(&self) -> bool {
        false
    }
    /// Stores a new task with its `Idempotency-Key`, atomically: unless the key is already
    /// held (then nothing is written and the holder is returned). The default (one host: the
    /// machine's own memory already decided) appends the record.
    async fn claim(&self, claim: KeyClaim) -> Result<Claimed, StoreError> {
        let mut records = vec![claim.record];
        records.extend(claim.also);
        self.append(records).await?;
        Ok(Claimed::Won)
    }
    /// The stored record of one object (`kind`, `id` as [`StoreRecord::key`]). A running
    /// task whose host is gone comes back [orphaned](StoredTask::orphan). The default (one
    /// host: its memory is the newest) finds nothing new.
    async fn fetch(&self, _kind: &str, _id: &str) -> Result<Fetched, StoreError> {
        Ok(Fetched::Unchanged)
    }
    /// Asks the host running `response_id` to cancel it ([`Change::Cancel`] there). The default
    /// (one host) has no other host to ask.
    async fn request_cancel(&self, _response_id: &str) -> Result<(), StoreError> {
        Ok(())
    }
    /// Calls `on_change` with what other hosts do, until the returned [`Watch`] is dropped;
    /// `None` when no other host writes (the default).
    fn watch(&self, _on_change: OnChange) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(None)
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        (**self).load().await
    }
    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError> {
        (**self).append(records).await
    }
    fn durable(&self) -> bool {
        (**self).durable()
    }
    fn shared(&self) -> bool {
        (**self).shared()
    }
    async fn claim(&self, claim: KeyClaim) -> Result<Claimed, StoreError> {
        (**self).claim(claim).await
    }
    async fn fetch(&self, kind: &str, id: &str) -> Result<Fetched, StoreError> {
        (**self).fetch(kind, id).await
    }
    async fn request_cancel(&self, response_id: &str) -> Result<(), StoreError> {
        (**self).request_cancel(response_id).await
    }
    fn watch(&self, on_change: OnChange) -> Result<Option<Box<dyn Watch>>, StoreError> {
        (**self).watch(on_change)
    }
}

/// No persistence: the machine's memory is the only copy.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryStore;

#[async_trait]
impl Store for MemoryStore {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        Ok(Vec::new())
    }
    async fn append(&self, _records: Vec<StoreRecord>) -> Result<(), StoreError> {
        Ok(())
    }
    fn durable(&self) -> bool {
        false
    }
}

pub(crate) fn restore(s: &mut UhpServer, record: StoreRecord) {
    let now = std::time::Instant::now();
    if s.cfg.shared {
        // Other hosts' objects, as they are now (a running task stays theirs).
        let at = super::Now::new(now, 0);
        return s.refresh(at, record);
    }
    match record {
        StoreRecord::Harness { principal, harness } => s.registry.restore(principal, *harness),
        StoreRecord::HarnessDeleted { principal, id } => {
            let _ = s.registry.delete(&principal, &id);
        }
        StoreRecord::Response { principal, task } => {
            let t = Task::restored(principal, *task, now, false);
            if let Some((k, e)) = t.idem_entry(now) {
                s.idem_order.push_back(k.clone());
                s.idem.insert(k, e);
            }
            let id = t.response.id.clone();
            if s.tasks.insert(id.clone(), t).is_none() {
                s.stored_order.push_back(id);
            }
            while s.stored_order.len() > s.cfg.max_stored_responses {
                if let Some(old) = s.stored_order.pop_front() {
                    s.tasks.remove(&old);
                }
            }
        }
        StoreRecord::ResponseDeleted { id } => {
            s.tasks.remove(&id);
        }
        StoreRecord::Session { principal, session } => {
            let seq = s.new_handle();
            let sess = Session::from_stored(principal, *session, now, seq);
            if let Some(sh) = &sess.share {
                s.shares.insert(sh.token.clone(), sess.id.clone());
            }
            s.containers
                .insert(sess.container_id.clone(), sess.id.clone());
            s.sessions.insert(sess.id.clone(), sess);
        }
        StoreRecord::SessionDeleted { id, expired } => {
            let persist = std::mem::replace(&mut s.cfg.persist, false);
            s.remove_session(&id, expired);
            s.cfg.persist = persist;
        }
        StoreRecord::UploadDeleted { id } => {
            s.uploads.remove(&id);
        }
        StoreRecord::Upload { principal, file } => {
            s.upload_order.push_back(file.id.clone());
            s.uploads.insert(file.id.clone(), (principal, *file));
        }
    }
}

pub(crate) fn snapshot(s: &UhpServer) -> Vec<StoreRecord> {
    let mut out = Vec::new();
    for (p, h) in s.registry.owned() {
        out.push(StoreRecord::Harness {
            principal: p.clone(),
            harness: Box::new(h.clone()),
        });
    }
    let mut sessions: Vec<_> = s.sessions.values().collect();
    sessions.sort_by_key(|x| x.seq);
    for x in sessions {
        out.push(StoreRecord::Session {
            principal: x.principal.clone(),
            session: Box::new(x.stored()),
        });
    }
    for id in &s.stored_order {
        if let Some(t) = s.tasks.get(id) {
            out.push(StoreRecord::task(t));
        }
    }
    for id in &s.upload_order {
        if let Some((p, f)) = s.uploads.get(id) {
            out.push(StoreRecord::Upload {
                principal: p.clone(),
                file: Box::new(f.clone()),
            });
        }
    }
    out
}
