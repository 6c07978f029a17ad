//! The PostgreSQL journal (feature `postgres`): several hosts, one database.
//!
//! ## Tables (migration 1 of component `sessions`)
//!
//! - `harness_session(session, meta, fence, head_seq, head_hash)`: one row per session, its
//!   metadata, its newest fence and its head.
//! - `harness_record(session, seq, prev_hash, content_hash, fence, event)`, primary key
//!   `(session, seq)`: the records; `event` is the canonical JSON the hash covers, stored as
//!   text so that `verify` hashes the exact stored bytes.
//! - `harness_receipt(session, key, result)`: [`PgReceipts`].
//!
//! ## Append: compare-and-set on the head, fence in the same statement
//!
//! An append is one statement, so one implicit transaction, and one round trip (the statement
//! is prepared once per pooled connection): it locks the session's row (`SELECT … FOR
//! UPDATE`, so concurrent appenders, on any host, queue on it), compares the row's fence and
//! head with the writer's, and only when they match inserts the records (all of them, in
//! one `INSERT … SELECT FROM unnest(…)`) and moves the head; it returns the row as it was,
//! and the same checks as every store say why a refused append was refused (fence lower:
//! [`JournalError::Fenced`]; higher: [`JournalError::UnknownFence`]; head moved:
//! [`JournalError::Conflict`]; records that do not chain: [`JournalError::BadRecords`],
//! checked among themselves before the statement is sent). The primary key `(session, seq)`
//! is the backstop: two records for one seq can never both commit. Acquiring a fence is one
//! `UPDATE … SET fence = fence + 1 RETURNING fence`, committed before it is returned, so a
//! zombie writer on another host is fenced by its next append.
//!
//! ## Durability
//!
//! Every append is a committed transaction, visible to every host when `append` returns,
//! whatever the policy; what the policy ([`PgJournal::with_durability`], the file journal's
//! [`Durability`]) decides is whether the commit waits for its WAL to reach the disk (most of
//! an append's cost: the server's `fsync`):
//!
//! - [`Durability::EveryRecord`]: every commit waits, as the server's
//!   `synchronous_commit` says (`on` by default). A record survives a crash of the server or
//!   its machine once `append` returns, before the effect it precedes runs.
//! - [`Durability::EveryTurn`], the default (as for the file journal): an append sets `synchronous_commit = off` for its own
//!   transaction (`set_config(…, true)` inside the statement: still one round trip; the
//!   pooled connection keeps the server's setting), and [`sync`](Journal::sync), which the
//!   host calls when a turn ends, commits a no-op update of the session's row that does wait:
//!   the WAL is one sequence, so that flush covers every append committed before it. The
//!   guarantees are the file journal's with the same policy: a crash of a *host* (the
//!   process, even SIGKILL) loses nothing, the server has every committed append; a crash
//!   of the *server* (PostgreSQL or its machine) can lose the latest appends not yet flushed
//!   (PostgreSQL's WAL writer flushes them within about `3 × wal_writer_delay`, 600 ms by
//!   default), never those before a returned `sync`, and always a suffix: the WAL replays in
//!   order and each append (records and head) is one transaction, so the chain of what is
//!   left holds and its head is its last record. The turn in flight is then cut short (or
//!   gone), as by a power loss under the file journal: resume re-drives it, and its effects
//!   may have run, which idempotency keys and receipts answer (a [`PgReceipts`] put commits
//!   synchronously, flushing every append before it, the tool's intent included).
//! - [`Durability::Never`]: no commit waits; `sync` does nothing.
//!
//! ## Limits
//!
//! Seqs and fences are PostgreSQL `bigint`s: a seq or fence past `i64::MAX` is refused
//! ([`JournalError::BadRecords`] for a record, [`JournalError::Corrupt`] for a fence that
//! cannot grow). Session UIDs are 1 to 256 bytes without NUL.

mod receipts;

use std::sync::Arc;

use harness_core::pg::{Migration, Pg, PgConfig, PgError, Pool};

pub use self::receipts::PgReceipts;
use super::{Durability, Journal, JournalError, SessionMeta, check_append};
use crate::hash::ContentHash;
use crate::record::{Fence, Head, Record, Seq};

/// The sessions component's migrations, in order.
pub(crate) static MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions, records, receipts",
    sql: include_str!("0001_sessions.sql"),
}];

impl From<PgError> for JournalError {
    fn from(e: PgError) -> Self {
        JournalError::Io(e.to_string())
    }
}

/// The append, one statement (so one implicit transaction): lock the session's row, compare
/// its fence and head with the writer's (`$2`, `$3`, `$4`), and only when they match insert
/// the records (`$5`..`$9`, in arrays) and move the head (`$10`, `$11`). It returns the row as
/// it was and whether it appended.
macro_rules! append_sql {
    ($extra:literal) => {
        concat!(
            "WITH s AS ( \
               SELECT fence, head_seq, head_hash FROM harness_session \
               WHERE session = $1 FOR UPDATE), \
             ok AS ( \
               SELECT 1 FROM s WHERE fence = $2 AND head_seq = $3 \
                 AND head_hash IS NOT DISTINCT FROM $4), \
             ins AS ( \
               INSERT INTO harness_record (session, seq, prev_hash, content_hash, fence, event) \
               SELECT $1, * FROM unnest($5::bigint[], $6::text[], $7::text[], $8::bigint[], $9::text[]) \
               WHERE EXISTS (SELECT 1 FROM ok)), \
             upd AS ( \
               UPDATE harness_session SET head_seq = $10, head_hash = $11 \
               WHERE session = $1 AND EXISTS (SELECT 1 FROM ok)) \
             SELECT fence, head_seq, head_hash, EXISTS (SELECT 1 FROM ok)",
            $extra,
            " FROM s"
        )
    };
}

/// The append whose commit waits for its WAL flush (as the server's `synchronous_commit`
/// says, `on` by default).
const APPEND: &str = append_sql!("");

/// The append whose commit does not wait for its WAL flush: `synchronous_commit` set to
/// `off` for its own transaction only (`set_config(…, true)` is `SET LOCAL`).
const APPEND_ASYNC_COMMIT: &str = append_sql!(", set_config('synchronous_commit', 'off', true)");

/// The longest session UID the PostgreSQL journal stores.
pub const MAX_SESSION_LEN: usize = 256;

fn validate(session: &str) -> Result<(), JournalError> {
    if session.is_empty() || session.len() > MAX_SESSION_LEN || session.contains('\0') {
        return Err(JournalError::InvalidSession(session.to_owned()));
    }
    Ok(())
}

fn to_db(v: u64, what: &str) -> Result<i64, JournalError> {
    i64::try_from(v).map_err(|_| JournalError::BadRecords(format!("{what} {v} is past i64::MAX")))
}

fn from_db(session: &str, v: i64, line: u64, what: &str) -> Result<u64, JournalError> {
    u64::try_from(v).map_err(|_| JournalError::Corrupt {
        session: session.to_owned(),
        line,
        reason: format!("negative {what} {v}"),
    })
}

fn parse_hash(session: &str, line: u64, s: &str) -> Result<ContentHash, JournalError> {
    ContentHash::from_hex(s.as_bytes()).ok_or_else(|| JournalError::Corrupt {
        session: session.to_owned(),
        line,
        reason: format!("bad content hash {s:?}"),
    })
}

/// The head of a session as stored in its row.
fn head_of(
    session: &str,
    fence: i64,
    seq: i64,
    hash: Option<String>,
) -> Result<Head, JournalError> {
    Ok(Head {
        seq: from_db(session, seq, 0, "head seq")?,
        hash: hash.map(|h| parse_hash(session, 0, &h)).transpose()?,
        fence: from_db(session, fence, 0, "fence")?,
    })
}

fn row_to_record(session: &str, row: &tokio_postgres::Row) -> Result<Record, JournalError> {
    let seq: i64 = row.try_get(0).map_err(PgError::from)?;
    let line = u64::try_from(seq).unwrap_or(0);
    let prev: Option<String> = row.try_get(1).map_err(PgError::from)?;
    let hash: String = row.try_get(2).map_err(PgError::from)?;
    let fence: i64 = row.try_get(3).map_err(PgError::from)?;
    let event: String = row.try_get(4).map_err(PgError::from)?;
    Record::from_stored(
        from_db(session, seq, line, "seq")?,
        prev.map(|p| parse_hash(session, line, &p)).transpose()?,
        parse_hash(session, line, &hash)?,
        from_db(session, fence, line, "fence")?,
        Arc::from(event),
    )
    .map_err(|e| JournalError::Corrupt {
        session: session.to_owned(),
        line,
        reason: e.to_string(),
    })
}

use harness_core::pg::tokio_postgres;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// `query_opt` with the statement prepared once per pooled connection (one round trip).
async fn q_opt(
    c: &harness_core::pg::PgClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, PgError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&stmt, params).await?)
}

/// `query` with the statement prepared once per pooled connection (one round trip).
async fn q(
    c: &harness_core::pg::PgClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, PgError> {
    let stmt = c.prepare_cached(sql).await?;
    Ok(c.query(&stmt, params).await?)
}

/// Session journals in PostgreSQL, shared by every host on the database: see the
/// [module docs](self) for the tables and the append transaction.
///
/// ```no_run
/// use harness_sessions::journal::PgJournal;
/// use harness_sessions::Controller;
///
/// let journal = PgJournal::connect("postgres://postgres@127.0.0.1:5432/postgres")?;
/// let host = Controller::builder(journal).build();
/// # Ok::<(), harness_sessions::JournalError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PgJournal {
    pg: Pg,
    durability: Durability,
}

impl PgJournal {
    /// Connects to `url` with a default pool and migrates the database.
    pub fn connect(url: &str) -> Result<Self, JournalError> {
        Self::with_config(&PgConfig::new(url))
    }

    /// Connects with `config` (pool size, schema) and migrates the database.
    pub fn with_config(config: &PgConfig) -> Result<Self, JournalError> {
        Self::new(Pg::connect(config)?)
    }

    /// A journal on an open pool (shared with [`PgReceipts`], say); migrates the database.
    pub fn new(pg: Pg) -> Result<Self, JournalError> {
        pg.migrate("sessions", MIGRATIONS)?;
        Ok(PgJournal {
            pg,
            durability: Durability::default(),
        })
    }

    /// When an append's commit waits for its WAL flush (see the [module docs](self)):
    /// [`Durability::EveryRecord`] (every append), [`Durability::EveryTurn`] (the default,
    /// as for the file journal: the appends of a turn commit without waiting, and
    /// [`sync`](Journal::sync), at the turn's end, waits for the flush of all of them) or
    /// [`Durability::Never`].
    #[must_use]
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The durability policy.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The pool.
    pub fn pg(&self) -> &Pg {
        &self.pg
    }

    /// Runs `f` with the pool on the pool's runtime, blocking until it answers.
    fn run<T, F, Fut>(&self, f: F) -> Result<T, JournalError>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: std::future::Future<Output = Result<T, JournalError>> + Send + 'static,
    {
        let fut = f(self.pg.pool().clone());
        self.pg.block_on(async move { Ok(fut.await) })?
    }
}

impl Journal for PgJournal {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        validate(session)?;
        let meta = serde_json::to_string(meta).map_err(|e| JournalError::Io(e.to_string()))?;
        let session = session.to_owned();
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let n = c
                .execute(
                    "INSERT INTO harness_session (session, meta) VALUES ($1, $2) \
                     ON CONFLICT (session) DO NOTHING",
                    &[&session, &meta],
                )
                .await
                .map_err(PgError::from)?;
            if n == 0 {
                return Err(JournalError::AlreadyExists(session));
            }
            Ok(())
        })
    }

    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        let session = session.to_owned();
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let row = q_opt(
                &c,
                "SELECT meta FROM harness_session WHERE session = $1",
                &[&session],
            )
            .await?
            .ok_or_else(|| JournalError::NotFound(session.clone()))?;
            let meta: String = row.try_get(0).map_err(PgError::from)?;
            serde_json::from_str(&meta).map_err(|e| JournalError::Corrupt {
                session,
                line: 0,
                reason: format!("meta: {e}"),
            })
        })
    }

    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let rows = c
                .query("SELECT session FROM harness_session", &[])
                .await
                .map_err(PgError::from)?;
            rows.iter()
                .map(|r| r.try_get(0).map_err(|e| PgError::from(e).into()))
                .collect()
        })
    }

    fn head(&self, session: &str) -> Result<Head, JournalError> {
        let session = session.to_owned();
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let row = q_opt(
                &c,
                "SELECT fence, head_seq, head_hash FROM harness_session WHERE session = $1",
                &[&session],
            )
            .await?
            .ok_or_else(|| JournalError::NotFound(session.clone()))?;
            head_of(
                &session,
                row.try_get(0).map_err(PgError::from)?,
                row.try_get(1).map_err(PgError::from)?,
                row.try_get(2).map_err(PgError::from)?,
            )
        })
    }

    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        let session = session.to_owned();
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let row = q_opt(
                &c,
                "UPDATE harness_session SET fence = fence + 1 \
                     WHERE session = $1 AND fence < 9223372036854775807 RETURNING fence",
                &[&session],
            )
            .await?;
            match row {
                Some(row) => {
                    let f: i64 = row.try_get(0).map_err(PgError::from)?;
                    from_db(&session, f, 0, "fence")
                }
                None => {
                    let exists = q_opt(
                        &c,
                        "SELECT 1 FROM harness_session WHERE session = $1",
                        &[&session],
                    )
                    .await?
                    .is_some();
                    Err(if exists {
                        JournalError::Corrupt {
                            session,
                            line: 0,
                            reason: "the stored fence is i64::MAX: no fence left".into(),
                        }
                    } else {
                        JournalError::NotFound(session)
                    })
                }
            }
        })
    }

    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        let mut seqs = Vec::with_capacity(records.len());
        let mut prevs = Vec::with_capacity(records.len());
        let mut hashes = Vec::with_capacity(records.len());
        let mut fences = Vec::with_capacity(records.len());
        let mut events = Vec::with_capacity(records.len());
        for r in records {
            seqs.push(to_db(r.seq, "seq")?);
            prevs.push(r.prev_hash.map(|h| h.to_string()));
            hashes.push(r.content_hash.to_string());
            fences.push(to_db(r.fence, "fence")?);
            events.push(r.canonical().to_owned());
        }
        let Some(last) = records.last() else {
            // Nothing to append: the checks alone.
            return check_append(
                session,
                &self.head(session)?,
                expected_last_seq,
                fence,
                records,
            );
        };
        // The records among themselves (seqs, chain, fence), against the head the writer
        // expects; only the head itself is left for the database to compare. Records that do
        // not hold together are reported against the real head, in the order every store
        // reports (Fenced, UnknownFence, Conflict, then BadRecords).
        let expected = Head {
            seq: expected_last_seq,
            hash: records[0].prev_hash,
            fence,
        };
        if let Err(e) = check_append(session, &expected, expected_last_seq, fence, records) {
            check_append(
                session,
                &self.head(session)?,
                expected_last_seq,
                fence,
                records,
            )?;
            return Err(e);
        }
        let first_prev = records[0].prev_hash.map(|h| h.to_string());
        let last_seq = to_db(last.seq, "seq")?;
        let last_hash = last.content_hash.to_string();
        let (fence_db, expected_db) = (to_db(fence, "fence")?, to_db(expected_last_seq, "seq")?);
        let session_owned = session.to_owned();
        let async_commit = self.durability != Durability::EveryRecord;
        // One statement, one implicit transaction: lock the session's row, compare its fence
        // and head with the writer's, and only then insert the records and move the head.
        // The row as it was is returned, so a refusal says exactly why.
        let before = self.run(|pool| async move {
            let session = session_owned;
            let c = pool.get().await.map_err(PgError::from)?;
            // Prepared once per connection: one round trip per append from then on.
            let stmt = c
                .prepare_cached(if async_commit {
                    APPEND_ASYNC_COMMIT
                } else {
                    APPEND
                })
                .await
                .map_err(PgError::from)?;
            let row = c
                .query_opt(
                    &stmt,
                    &[
                        &session,
                        &fence_db,
                        &expected_db,
                        &first_prev,
                        &seqs,
                        &prevs,
                        &hashes,
                        &fences,
                        &events,
                        &last_seq,
                        &last_hash,
                    ],
                )
                .await;
            let row = match row.map_err(PgError::from) {
                Err(e) if e.is_unique_violation() => {
                    // Only a writer that bypassed the head could get here.
                    return Err(JournalError::Conflict {
                        session,
                        expected: expected_last_seq,
                        actual: expected_last_seq.saturating_add(1),
                    });
                }
                r => r?.ok_or_else(|| JournalError::NotFound(session.clone()))?,
            };
            let appended: bool = row.try_get(3).map_err(PgError::from)?;
            let head = head_of(
                &session,
                row.try_get(0).map_err(PgError::from)?,
                row.try_get(1).map_err(PgError::from)?,
                row.try_get(2).map_err(PgError::from)?,
            )?;
            Ok((appended, head))
        })?;
        match before {
            (true, _) => Ok(()),
            (false, head) => {
                check_append(session, &head, expected_last_seq, fence, records)?;
                // The checks pass against the row as it was, yet the database refused: a
                // stored head that does not parse back as it was written.
                Err(JournalError::Corrupt {
                    session: session.to_owned(),
                    line: 0,
                    reason: "the session's head does not compare as stored".into(),
                })
            }
        }
    }

    fn sync(&self, session: &str) -> Result<(), JournalError> {
        if self.durability != Durability::EveryTurn {
            // EveryRecord: every append already waited for its flush; Never: no waiting.
            return Ok(());
        }
        // A commit waits for the WAL flush (with the server's `synchronous_commit`) only when
        // its transaction wrote WAL under a transaction id: a row version does. The WAL is one
        // sequence, so the flush up to this commit covers every append committed before it,
        // by any connection. The row is the session's own (a no-op update of its head).
        let session = session.to_owned();
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let stmt = c
                .prepare_cached("UPDATE harness_session SET head_seq = head_seq WHERE session = $1")
                .await
                .map_err(PgError::from)?;
            c.execute(&stmt, &[&session]).await.map_err(PgError::from)?;
            Ok(())
        })
    }

    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        let session = session.to_owned();
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let to = to.map_or(i64::MAX, |t| i64::try_from(t).unwrap_or(i64::MAX));
        self.run(|pool| async move {
            let c = pool.get().await.map_err(PgError::from)?;
            let rows = q(
                &c,
                "SELECT seq, prev_hash, content_hash, fence, event FROM harness_record \
                     WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
                &[&session, &from, &to],
            )
            .await?;
            if rows.is_empty() {
                let exists = q_opt(
                    &c,
                    "SELECT 1 FROM harness_session WHERE session = $1",
                    &[&session],
                )
                .await?
                .is_some();
                if !exists {
                    return Err(JournalError::NotFound(session));
                }
            }
            rows.iter().map(|r| row_to_record(&session, r)).collect()
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
        let meta = serde_json::to_string(meta).map_err(|e| JournalError::Io(e.to_string()))?;
        let parent = parent.to_owned();
        let child = child.to_owned();
        self.run(|pool| async move {
            let mut c = pool.get().await.map_err(PgError::from)?;
            let tx = c.transaction().await.map_err(PgError::from)?;
            let row = tx
                .query_opt(
                    "SELECT head_seq FROM harness_session WHERE session = $1 FOR SHARE",
                    &[&parent],
                )
                .await
                .map_err(PgError::from)?
                .ok_or_else(|| JournalError::NotFound(parent.clone()))?;
            let head = from_db(&parent, row.try_get(0).map_err(PgError::from)?, 0, "head seq")?;
            if at > head {
                return Err(JournalError::ForkPoint {
                    session: parent,
                    at,
                    head,
                });
            }
            let at_db = to_db(at, "seq")?;
            let n = tx
                .execute(
                    "INSERT INTO harness_session (session, meta) VALUES ($1, $2) \
                     ON CONFLICT (session) DO NOTHING",
                    &[&child, &meta],
                )
                .await
                .map_err(PgError::from)?;
            if n == 0 {
                return Err(JournalError::AlreadyExists(child));
            }
            tx.execute(
                "INSERT INTO harness_record (session, seq, prev_hash, content_hash, fence, event) \
                 SELECT $1, seq, prev_hash, content_hash, fence, event FROM harness_record \
                 WHERE session = $2 AND seq <= $3",
                &[&child, &parent, &at_db],
            )
            .await
            .map_err(PgError::from)?;
            // The child's fence starts at the highest fence copied; its head is record `at`.
            tx.execute(
                "UPDATE harness_session SET \
                   fence = coalesce((SELECT max(fence) FROM harness_record WHERE session = $1), 0), \
                   head_seq = $2, \
                   head_hash = (SELECT content_hash FROM harness_record WHERE session = $1 AND seq = $2) \
                 WHERE session = $1",
                &[&child, &at_db],
            )
            .await
            .map_err(PgError::from)?;
            tx.commit().await.map_err(PgError::from)?;
            Ok(())
        })
    }
}
