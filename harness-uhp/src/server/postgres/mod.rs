//! [`PgStore`]: the server's records in PostgreSQL (feature `postgres`), shared by every host
//! serving from the database.
//!
//! | table | what |
//! | --- | --- |
//! | `harness_uhp_object` | one row per live object (`kind`, `id` as [`StoreRecord::key`]): the record as JSON, the order of its last write, the host that wrote it |
//! | `harness_uhp_idempotency` | one row per (principal, `Idempotency-Key`): the request's fingerprint, the task it made, when |
//!
//! - **An append** is one transaction: an upsert per record, a delete per deletion, and a
//!   `NOTIFY` on [`NOTIFY_CHANNEL`] per object (`<schema> <host> <kind> <id>`, delivered at
//!   commit), so that the other hosts read the object again ([`Store::watch`]).
//! - **A claim** ([`Store::claim`]) inserts the key and upserts the task's record in one
//!   transaction. A key already held (by a committed transaction: a concurrent one is waited
//!   for by the unique index) is not written; the holder's task is returned. A key older
//!   than the server's `idempotency_ttl` is taken over (tasks.md §6 keeps keys at least
//!   24 h: the default); expired keys are removed a few at a time as new ones are claimed.
//! - **Hosts.** Each store is a host with a random id. It holds one connection of its pool
//!   open under the `application_name` `harness-uhp <host>`: a host is alive while that
//!   connection is (a killed process's connection closes with it). A task stored
//!   `in_progress` by a host that is gone is read back [orphaned](crate::server::store::StoredTask::orphan)
//!   (`failed`, never run again), by every host alike.
//! - **Cancel.** [`Store::request_cancel`] notifies `<schema> <host> cancel <id>`; the host
//!   running the task cancels it and stores its end, which the asking host then reads.

mod watch;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use harness_core::pg::{Migration, Pg, PgClient, PgConfig, PgError};

use super::store::{Claimed, Fetched, KeyClaim, OnChange, Store, StoreError, StoreRecord, Watch};

/// The `LISTEN`/`NOTIFY` channel of every UHP host on the database (each payload names its
/// schema: a host keeps its own schema's).
pub const NOTIFY_CHANNEL: &str = "harness_uhp";

/// The `application_name` prefix of a host's marker connection.
const HOST_MARK: &str = "harness-uhp ";

/// Expired idempotency keys removed per claim.
const EXPIRED_PER_CLAIM: i64 = 64;

static MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "live objects",
        sql: include_str!("0001_uhp.sql"),
    },
    Migration {
        version: 2,
        name: "hosts and idempotency keys",
        sql: include_str!("0002_hosts.sql"),
    },
];

fn store_err(e: PgError) -> StoreError {
    StoreError::Io(e.to_string())
}

/// Records in PostgreSQL, shared by every host on the database (see the [module docs](self)).
#[derive(Clone)]
pub struct PgStore {
    pg: Pg,
    host: Arc<str>,
    /// The connection that says this host is alive; held, never returned to the pool.
    _marker: Arc<std::sync::Mutex<PgClient>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("pg", &self.pg)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to `url` and migrates the database (blocking: call it at start).
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        Self::with_config(&PgConfig::new(url))
    }

    /// Connects with `config` (pool size, schema) and migrates the database. One connection
    /// of the pool is held as the host's marker: give the pool at least 2.
    pub fn with_config(config: &PgConfig) -> Result<PgStore, StoreError> {
        Self::new(Pg::connect(config).map_err(store_err)?)
    }

    /// A store (a new host) on an open pool; migrates the database.
    pub fn new(pg: Pg) -> Result<PgStore, StoreError> {
        // The marker holds one connection for the store's life: with a pool of one, every
        // other statement would wait for ever.
        let size = pg.pool().status().max_size;
        if size < 2 {
            return Err(StoreError::Io(format!(
                "PgStore needs a pool of at least 2 connections (one is held as this host's \
                 liveness marker); this pool has {size}"
            )));
        }
        pg.migrate("uhp", MIGRATIONS).map_err(store_err)?;
        let host: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
        let pool = pg.pool().clone();
        let mark = format!("{HOST_MARK}{host}");
        let marker = pg
            .block_on(async move {
                let c = pool.get().await?;
                c.execute("SELECT set_config('application_name', $1, false)", &[&mark])
                    .await?;
                Ok(c)
            })
            .map_err(store_err)?;
        Ok(PgStore {
            pg,
            host,
            _marker: Arc::new(std::sync::Mutex::new(marker)),
        })
    }

    /// The pool.
    pub fn pg(&self) -> &Pg {
        &self.pg
    }

    /// This host's id (random per store).
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// A stored row as read: the record, and whether the host that wrote it is alive.
fn parse(json: &str, alive: bool) -> Result<StoreRecord, StoreError> {
    let mut r: StoreRecord = serde_json::from_str(json)
        .map_err(|e| StoreError::Io(format!("a stored record does not parse: {e}")))?;
    if let StoreRecord::Response { task, .. } = &mut r {
        if !alive {
            task.orphan();
        }
    }
    Ok(r)
}

const UPSERT: &str = "INSERT INTO harness_uhp_object (kind, id, ord, record, host) \
     VALUES ($1, $2, nextval('harness_uhp_order'), $3, $4) \
     ON CONFLICT (kind, id) DO UPDATE \
     SET ord = EXCLUDED.ord, record = EXCLUDED.record, host = EXCLUDED.host";
const DELETE: &str = "DELETE FROM harness_uhp_object WHERE kind = $1 AND id = $2";
const NOTIFY: &str =
    "SELECT pg_notify($1, current_schema() || ' ' || $2 || ' ' || $3 || ' ' || $4)";

/// One object written (or deleted, `json` `None`) and announced, inside `tx`; `ended`: a
/// task's final record, which frees its session.
async fn write(
    tx: &harness_core::pg::tokio_postgres::Transaction<'_>,
    host: &str,
    kind: &str,
    id: &str,
    json: Option<&str>,
    ended: bool,
) -> Result<(), PgError> {
    match json {
        Some(j) => tx.execute(UPSERT, &[&kind, &id, &j, &host]).await?,
        None => tx.execute(DELETE, &[&kind, &id]).await?,
    };
    if ended {
        tx.execute(
            "DELETE FROM harness_uhp_running WHERE response_id = $1",
            &[&id],
        )
        .await?;
    }
    tx.execute(NOTIFY, &[&NOTIFY_CHANNEL, &host, &kind, &id])
        .await?;
    Ok(())
}

/// What a claim's transaction found.
enum Claim {
    Won,
    Busy,
    Held((String, String, Option<String>, Option<bool>)),
}

/// A new task's record and its companions (its new session), inside `tx`, its session
/// taken: `false` (nothing written) when a task of another live host runs in the session.
/// This host's own slot is taken over: its machine already found the session idle (its last
/// task ended, whose final record may still be on its way to the database).
async fn store_new(
    tx: &harness_core::pg::tokio_postgres::Transaction<'_>,
    host: &str,
    session_id: &str,
    response_id: &str,
    json: &str,
    also: &[(String, String, String)],
) -> Result<bool, PgError> {
    let taken = tx
        .query_opt(
            "INSERT INTO harness_uhp_running (session_id, response_id, host) VALUES ($1, $2, $3) \
             ON CONFLICT (session_id) DO UPDATE \
             SET response_id = EXCLUDED.response_id, host = EXCLUDED.host \
             WHERE harness_uhp_running.host = EXCLUDED.host OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a \
                WHERE a.application_name = $4 || harness_uhp_running.host) \
             RETURNING response_id",
            &[&session_id, &response_id, &host, &HOST_MARK],
        )
        .await?
        .is_some();
    if !taken {
        return Ok(false);
    }
    write(tx, host, "response", response_id, Some(json), false).await?;
    for (kind, id, j) in also {
        write(tx, host, kind, id, Some(j), false).await?;
    }
    Ok(true)
}

fn to_json(r: &StoreRecord) -> Result<String, StoreError> {
    serde_json::to_string(r).map_err(|e| StoreError::Io(e.to_string()))
}

#[async_trait]
impl Store for PgStore {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        let pool = self.pg.pool().clone();
        let (rows, alive): (Vec<(String, Option<String>)>, HashSet<String>) = self
            .pg
            .run(async move {
                let c = pool.get().await?;
                let alive = c
                    .query(
                        "SELECT substr(application_name, $1) FROM pg_stat_activity \
                         WHERE starts_with(application_name, $2)",
                        &[&(HOST_MARK.len() as i32 + 1), &HOST_MARK],
                    )
                    .await?
                    .iter()
                    .map(|r| r.try_get::<_, String>(0).map_err(PgError::from))
                    .collect::<Result<HashSet<_>, _>>()?;
                let rows = c
                    .query(
                        "SELECT record, host FROM harness_uhp_object ORDER BY ord",
                        &[],
                    )
                    .await?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect::<Result<Vec<_>, PgError>>()?;
                Ok((rows, alive))
            })
            .await
            .map_err(store_err)?;
        rows.iter()
            .map(|(json, host)| parse(json, host.as_ref().is_some_and(|h| alive.contains(h))))
            .collect()
    }

    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(records.len());
        for r in &records {
            let (kind, id) = r.key();
            let json = if r.is_deletion() {
                None
            } else {
                Some(to_json(r)?)
            };
            let ended = matches!(r, StoreRecord::Response { task, .. } if task.response.status.is_terminal());
            ops.push((kind.to_owned(), id.to_owned(), json, ended));
        }
        let pool = self.pg.pool().clone();
        let host = Arc::clone(&self.host);
        self.pg
            .run(async move {
                let mut c = pool.get().await?;
                let tx = c.transaction().await?;
                for (kind, id, json, ended) in &ops {
                    write(&tx, &host, kind, id, json.as_deref(), *ended).await?;
                }
                tx.commit().await?;
                Ok(())
            })
            .await
            .map_err(store_err)
    }

    fn shared(&self) -> bool {
        true
    }

    async fn claim(&self, claim: KeyClaim) -> Result<Claimed, StoreError> {
        let json = to_json(&claim.record)?;
        let mut also = Vec::with_capacity(claim.also.len());
        for r in &claim.also {
            let (kind, id) = r.key();
            also.push((kind.to_owned(), id.to_owned(), to_json(r)?));
        }
        let pool = self.pg.pool().clone();
        let host = Arc::clone(&self.host);
        let held = self
            .pg
            .run(async move {
                let p = claim.principal.as_str().to_owned();
                let ttl = claim.ttl.as_secs_f64();
                let mut c = pool.get().await?;
                let tx = c.transaction().await?;
                let new = |tx| store_new(tx, &host, &claim.session_id, &claim.response_id, &json, &also);
                let Some(key) = &claim.key else {
                    if !new(&tx).await? {
                        tx.rollback().await?;
                        return Ok(Claim::Busy);
                    }
                    tx.commit().await?;
                    return Ok(Claim::Won);
                };
                tx.execute(
                    "DELETE FROM harness_uhp_idempotency WHERE (principal, key) IN \
                     (SELECT principal, key FROM harness_uhp_idempotency \
                      WHERE claimed_at < now() - make_interval(secs => $1) LIMIT $2)",
                    &[&ttl, &EXPIRED_PER_CLAIM],
                )
                .await?;
                // Waits for a concurrent claim of the key to commit or roll back.
                let won = tx
                    .query_opt(
                        "INSERT INTO harness_uhp_idempotency (principal, key, fingerprint, response_id) \
                         VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (principal, key) DO UPDATE \
                         SET fingerprint = EXCLUDED.fingerprint, response_id = EXCLUDED.response_id, \
                             claimed_at = now() \
                         WHERE harness_uhp_idempotency.claimed_at < now() - make_interval(secs => $5) \
                         RETURNING response_id",
                        &[&p, &key.key, &key.fingerprint, &claim.response_id, &ttl],
                    )
                    .await?
                    .is_some();
                if won {
                    if !new(&tx).await? {
                        tx.rollback().await?;
                        return Ok(Claim::Busy);
                    }
                    tx.commit().await?;
                    return Ok(Claim::Won);
                }
                let row = tx
                    .query_one(
                        "SELECT k.fingerprint, k.response_id, o.record, \
                         o.host IS NOT NULL AND EXISTS (SELECT 1 FROM pg_stat_activity a \
                            WHERE a.application_name = $3 || o.host) \
                         FROM harness_uhp_idempotency k \
                         LEFT JOIN harness_uhp_object o ON o.kind = 'response' AND o.id = k.response_id \
                         WHERE k.principal = $1 AND k.key = $2",
                        &[&p, &key.key, &HOST_MARK],
                    )
                    .await?;
                let held: (String, String, Option<String>, Option<bool>) =
                    (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?);
                tx.rollback().await?;
                Ok(Claim::Held(held))
            })
            .await
            .map_err(store_err)?;
        match held {
            Claim::Won => Ok(Claimed::Won),
            Claim::Busy => Ok(Claimed::SessionBusy),
            Claim::Held((fingerprint, response_id, record, alive)) => Ok(Claimed::Held {
                response_id,
                fingerprint,
                task: record
                    .map(|j| parse(&j, alive.unwrap_or(false)))
                    .transpose()?,
            }),
        }
    }

    async fn fetch(&self, kind: &str, id: &str) -> Result<Fetched, StoreError> {
        let pool = self.pg.pool().clone();
        let (kind, id) = (kind.to_owned(), id.to_owned());
        let host = Arc::clone(&self.host);
        let row: Option<(String, bool, bool)> = self
            .pg
            .run(async move {
                let c = pool.get().await?;
                let row = c
                    .query_opt(
                        "SELECT record, o.host IS NOT NULL AND EXISTS (SELECT 1 FROM pg_stat_activity a \
                            WHERE a.application_name = $3 || o.host), o.host IS NOT DISTINCT FROM $4 \
                         FROM harness_uhp_object o WHERE kind = $1 AND id = $2",
                        &[&kind, &id, &HOST_MARK, &&*host],
                    )
                    .await?;
                row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
                    .transpose()
            })
            .await
            .map_err(store_err)?;
        match row {
            None => Ok(Fetched::Gone),
            // This host's own last write: its memory is at least as new.
            Some((_, _, true)) => Ok(Fetched::Unchanged),
            Some((json, alive, false)) => parse(&json, alive).map(Fetched::Found),
        }
    }

    async fn request_cancel(&self, response_id: &str) -> Result<(), StoreError> {
        let pool = self.pg.pool().clone();
        let host = Arc::clone(&self.host);
        let id = response_id.to_owned();
        self.pg
            .run(async move {
                let c = pool.get().await?;
                c.execute(NOTIFY, &[&NOTIFY_CHANNEL, &&*host, &"cancel", &id])
                    .await?;
                Ok(())
            })
            .await
            .map_err(store_err)
    }

    fn watch(&self, on_change: OnChange) -> Result<Option<Box<dyn Watch>>, StoreError> {
        watch::start(&self.pg, &self.host, on_change).map(|w| Some(Box::new(w) as Box<dyn Watch>))
    }
}
