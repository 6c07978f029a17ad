//! [`PgLog`]: every thread's event log in PostgreSQL (feature `postgres`), one cursor space
//! per thread shared by every host on the database.

use std::collections::HashMap;
use std::sync::Mutex;

use harness_core::pg::{Migration, Pg, PgConfig, PgError};

use super::{EventLog, Forward, Lease, LogError, LogRecord};
use crate::agui::AguiEvent;
use crate::catalog::GapReason;

static MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "threads and events",
        sql: include_str!("0001_tanstack.sql"),
    },
    Migration {
        version: 2,
        name: "thread leases",
        sql: include_str!("0002_lease.sql"),
    },
    Migration {
        version: 3,
        name: "forwarded runs",
        sql: include_str!("0003_forward_kind.sql"),
    },
    Migration {
        version: 4,
        name: "inbox sweep index",
        sql: include_str!("0004_inbox_created.sql"),
    },
];

/// How long a thread's lease lives without a renewal, by default: 10 s (renewed every
/// TTL/3 by [`PgLog::keep_leases`]).
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The channel [`PgLog`] notifies on each append, with the payload
/// `<schema> <seq> <holder> <key>` (`-` for a log without leases; notifications are per
/// database: a listener keeps its own schema's, and skips its own appends).
pub const NOTIFY_CHANNEL: &str = "harness_tanstack";

/// How many records a read past the window fetches at once.
const READ_AHEAD: i64 = 256;
/// How many threads keep a read window (then all windows are dropped).
const MAX_WINDOWS: usize = 64;

fn log_err(e: PgError) -> LogError {
    LogError::Io(e.to_string())
}

/// Every thread's event log in PostgreSQL: `harness_tanstack_thread` (a thread's head,
/// first kept record, owner and waits record) and `harness_tanstack_event` (its records,
/// primary key `(key, seq)`).
///
/// **One cursor space per thread, shared.** An append is one statement: it bumps the thread's
/// `head` under the row's lock and inserts the record at that number, so two hosts appending
/// to one thread get distinct, gapless cursors, and a reader on any host reads any cursor
/// back (a client resumes on another host with the `Last-Event-ID` of the first). The same
/// statement notifies [`NOTIFY_CHANNEL`] (delivered at commit): a host can tail what others
/// append with `LISTEN` instead of polling ([`PgLog::listen`]).
///
/// [`truncate`](Self::truncate) drops the oldest records; a client behind them gets
/// `harness.gap` with reason `truncated`, as with the file log.
///
/// **One writer per thread: a lease.** Several hosts on one database run each thread's
/// turns on one of them: a host takes the thread's lease before it writes
/// ([`EventLog::lease`]), renews it while it runs turns ([`PgLog::keep_leases`]), lets it go
/// when the thread is idle ([`EventLog::release`]) or on a graceful shutdown
/// ([`EventLog::release_all`]); an append by a host that does not hold it is
/// [`LogError::Fenced`], checked in the appending statement itself. The first record of
/// every new holder is `harness.ownership.changed {epoch, reason}`. See [`lease`] for the
/// rules, and [`Host`](crate::host::Host) for what the host does on a takeover. A tool that
/// is the only writer of its database may turn leases off
/// ([`without_leases`](Self::without_leases)).
///
/// Reads fetch up to 256 records at once into a small window per thread, records being
/// immutable once written; the head, the first kept record, the owner and the waits record
/// are read from the database each time, so what another host wrote is seen at once.
#[derive(Debug)]
pub struct PgLog {
    pg: Pg,
    windows: Mutex<HashMap<String, Vec<LogRecord>>>,
    /// `None`: no leases ([`without_leases`](Self::without_leases)).
    leases: Option<lease::Leases>,
}

fn render(key_thread: &str, seq: i64, op: &str, event: &str) -> Option<LogRecord> {
    let seq = u64::try_from(seq).ok()?;
    Some(LogRecord::render_raw(key_thread, seq, op, event))
}

impl PgLog {
    /// Connects to `url` and migrates the database.
    pub fn connect(url: &str) -> Result<PgLog, LogError> {
        Self::with_config(&PgConfig::new(url))
    }

    /// Connects with `config` (pool size, schema) and migrates the database.
    pub fn with_config(config: &PgConfig) -> Result<PgLog, LogError> {
        Self::new(Pg::connect(config).map_err(log_err)?)
    }

    /// A log on an open pool; migrates the database.
    pub fn new(pg: Pg) -> Result<PgLog, LogError> {
        pg.migrate("tanstack", MIGRATIONS).map_err(log_err)?;
        Ok(PgLog {
            pg,
            windows: Mutex::new(HashMap::new()),
            leases: Some(lease::Leases::new(DEFAULT_LEASE_TTL)),
        })
    }

    /// The lease TTL (default [`DEFAULT_LEASE_TTL`]; at least 1 ms): how long after its last
    /// renewal a host that stopped keeps a thread before another host may take it over.
    pub fn with_lease_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.leases = Some(lease::Leases::new(ttl));
        self
    }

    /// No leases: every append lands, whoever makes it (the log of one writer, or a test
    /// of the shared cursor space). Hosts that share a database must keep leases on.
    pub fn without_leases(mut self) -> Self {
        self.leases = None;
        self
    }

    /// The pool.
    pub fn pg(&self) -> &Pg {
        &self.pg
    }

    /// Drops the records of a thread up to and including `through` (capped at its head).
    /// Clients whose cursor is behind the new first record get `harness.gap` with reason
    /// `truncated`.
    pub fn truncate(&mut self, thread_id: &str, through: u64) -> Result<(), LogError> {
        let through = i64::try_from(through).unwrap_or(i64::MAX);
        let key = thread_id.to_owned();
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let mut c = pool.get().await?;
                let tx = c.transaction().await?;
                let row = tx
                    .query_opt(
                        "UPDATE harness_tanstack_thread \
                         SET first_seq = greatest(first_seq, least($2, head) + 1) \
                         WHERE key = $1 RETURNING first_seq",
                        &[&key, &through],
                    )
                    .await?;
                if let Some(row) = row {
                    let first: i64 = row.try_get(0)?;
                    tx.execute(
                        "DELETE FROM harness_tanstack_event WHERE key = $1 AND seq < $2",
                        &[&key, &first],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            })
            .map_err(log_err)?;
        if let Ok(mut w) = self.windows.lock() {
            w.remove(thread_id);
        }
        Ok(())
    }

    /// Listens for appends on the database (by any host): `on_append(key, seq)` runs on the
    /// pool's runtime for each committed record, until the returned handle is dropped or the
    /// connection fails. One connection of its own, outside the pool; nothing polls.
    /// `on_append` must not block: hand the key to a thread or task that calls
    /// [`Service::handle_appended`](crate::driver::Service::handle_appended) (which reads
    /// the log through this pool).
    pub fn listen(
        &self,
        on_append: impl Fn(&str, u64) + Send + Sync + 'static,
    ) -> Result<Listener, LogError> {
        listen::start(&self.pg, self.holder().map(str::to_owned), on_append)
    }

    /// One row of a thread: (head, first_seq, owner).
    fn thread_row(&self, key: &str) -> Result<Option<(i64, i64, Option<String>)>, PgError> {
        let key = key.to_owned();
        let pool = self.pg.pool().clone();
        self.pg.block_on(async move {
            let c = pool.get().await?;
            let row = c
                .query_opt(
                    "SELECT head, first_seq, owner FROM harness_tanstack_thread WHERE key = $1",
                    &[&key],
                )
                .await?;
            Ok(match row {
                Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
                None => None,
            })
        })
    }
}

mod forward;
pub mod lease;
mod listen;

pub use forward::{ANSWER_CHANNEL, ForwardListener, INBOX_CHANNEL};
pub use lease::LeaseKeeper;
pub use listen::Listener;

impl EventLog for PgLog {
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        let event_json = event.to_json();
        let (k, t, op, ev) = (
            key.to_owned(),
            thread_id.to_owned(),
            operation_id.to_owned(),
            event_json.clone(),
        );
        let pool = self.pg.pool().clone();
        // Fencing: with leases, the append names the holder and the epoch it holds, checked
        // under the thread row's lock (a takeover that committed first is seen).
        let fence = match &self.leases {
            None => None,
            Some(l) => match l.epoch(key) {
                Some(e) => Some((l.holder.clone(), e)),
                None => return Err(LogError::Fenced),
            },
        };
        let seq: Option<i64> = self
            .pg
            .block_on(async move {
                let c = pool.get().await?;
                // Each statement is prepared once per pooled connection: one round trip per
                // append after that.
                let row = match fence {
                    None => {
                        let stmt = c
                            .prepare_cached(
                                "WITH t AS ( \
                                   INSERT INTO harness_tanstack_thread AS t (key, head) VALUES ($1, 1) \
                                   ON CONFLICT (key) DO UPDATE SET head = t.head + 1 \
                                   RETURNING head), \
                                 e AS ( \
                                   INSERT INTO harness_tanstack_event (key, seq, operation_id, thread_id, event) \
                                   SELECT $1, head, $2, $3, $4 FROM t RETURNING seq) \
                                 SELECT seq, pg_notify($5, current_schema() || ' ' || seq::text || ' - ' || $1) FROM e",
                            )
                            .await?;
                        Some(c.query_one(&stmt, &[&k, &op, &t, &ev, &NOTIFY_CHANNEL]).await?)
                    }
                    Some((holder, epoch)) => {
                        let stmt = c
                            .prepare_cached(
                                "WITH t AS ( \
                                   UPDATE harness_tanstack_thread SET head = head + 1 \
                                   WHERE key = $1 AND lease_holder = $6 AND lease_epoch = $7 \
                                   RETURNING head), \
                                 e AS ( \
                                   INSERT INTO harness_tanstack_event (key, seq, operation_id, thread_id, event) \
                                   SELECT $1, head, $2, $3, $4 FROM t RETURNING seq) \
                                 SELECT seq, pg_notify($5, current_schema() || ' ' || seq::text || ' ' || $6 || ' ' || $1) FROM e",
                            )
                            .await?;
                        c.query_opt(&stmt, &[&k, &op, &t, &ev, &NOTIFY_CHANNEL, &holder, &epoch])
                            .await?
                    }
                };
                Ok(match row {
                    Some(r) => Some(r.try_get(0)?),
                    None => None,
                })
            })
            .map_err(log_err)?;
        let Some(seq) = seq else {
            // Taken over: this host holds the thread no more.
            if let Some(l) = &self.leases {
                l.set(key, None);
            }
            return Err(LogError::Fenced);
        };
        let seq = u64::try_from(seq).map_err(|_| LogError::Corrupt(format!("seq {seq}")))?;
        Ok(LogRecord::render_raw(
            thread_id,
            seq,
            operation_id,
            &event_json,
        ))
    }

    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        if let Ok(w) = self.windows.lock() {
            if let Some(win) = w.get(thread_id) {
                if let Some(first) = win.first() {
                    if seq >= first.seq {
                        let i = usize::try_from(seq - first.seq).unwrap_or(usize::MAX);
                        if let Some(r) = win.get(i) {
                            return Ok(Some(r.clone()));
                        }
                    }
                }
            }
        }
        let Ok(from) = i64::try_from(seq) else {
            return Ok(None);
        };
        let key = thread_id.to_owned();
        let pool = self.pg.pool().clone();
        let rows: Vec<(i64, String, String, String)> = self
            .pg
            .block_on(async move {
                let c = pool.get().await?;
                let rows = c
                    .query(
                        "SELECT e.seq, e.operation_id, e.thread_id, e.event \
                         FROM harness_tanstack_event e JOIN harness_tanstack_thread t USING (key) \
                         WHERE e.key = $1 AND e.seq >= $2 AND e.seq >= t.first_seq \
                         ORDER BY e.seq LIMIT $3",
                        &[&key, &from, &READ_AHEAD],
                    )
                    .await?;
                rows.iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
                    .collect()
            })
            .map_err(log_err)?;
        let mut win = Vec::with_capacity(rows.len());
        for (s, op, t, ev) in &rows {
            // Only a gapless run from `seq` is a window.
            let expected = seq + win.len() as u64;
            match render(t, *s, op, ev) {
                Some(r) if r.seq == expected => win.push(r),
                _ => break,
            }
        }
        let first = win.first().cloned();
        if let Ok(mut w) = self.windows.lock() {
            if w.len() >= MAX_WINDOWS {
                w.clear();
            }
            w.insert(thread_id.to_owned(), win);
        }
        Ok(first)
    }

    fn head_seq(&self, thread_id: &str) -> u64 {
        match self.thread_row(thread_id) {
            Ok(Some((head, _, _))) => u64::try_from(head).unwrap_or(0),
            _ => 0,
        }
    }

    fn first_seq(&self, thread_id: &str) -> u64 {
        match self.thread_row(thread_id) {
            Ok(Some((_, first, _))) => u64::try_from(first).unwrap_or(1),
            _ => 1,
        }
    }

    fn gap_reason(&self) -> GapReason {
        GapReason::Truncated
    }

    fn threads(&self) -> Vec<String> {
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                let rows = c
                    .query("SELECT key FROM harness_tanstack_thread", &[])
                    .await?;
                rows.iter()
                    .map(|r| r.try_get(0).map_err(PgError::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn contains(&self, thread_id: &str) -> bool {
        matches!(self.thread_row(thread_id), Ok(Some((head, _, owner))) if head > 0 || owner.is_some())
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        let (k, o) = (thread_id.to_owned(), owner.to_owned());
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                c.execute(
                    "INSERT INTO harness_tanstack_thread (key, owner) VALUES ($1, $2) \
                     ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner",
                    &[&k, &o],
                )
                .await?;
                Ok(())
            })
            .map_err(log_err)
    }

    fn owner(&self, thread_id: &str) -> Option<String> {
        self.thread_row(thread_id).ok().flatten().and_then(|r| r.2)
    }

    fn set_waits(&mut self, thread_id: &str, record: Option<&str>) -> Result<(), LogError> {
        let (k, w) = (thread_id.to_owned(), record.map(str::to_owned));
        let pool = self.pg.pool().clone();
        // With leases the waits record is the owner's, fenced as an append is.
        if let Some(l) = &self.leases {
            let Some(epoch) = l.epoch(thread_id) else {
                return Err(LogError::Fenced);
            };
            let holder = l.holder.clone();
            let n = self
                .pg
                .block_on(async move {
                    let c = pool.get().await?;
                    Ok(c.execute(
                        "UPDATE harness_tanstack_thread SET waits = $2 \
                         WHERE key = $1 AND lease_holder = $3 AND lease_epoch = $4",
                        &[&k, &w, &holder, &epoch],
                    )
                    .await?)
                })
                .map_err(log_err)?;
            if n == 0 {
                l.set(thread_id, None);
                return Err(LogError::Fenced);
            }
            return Ok(());
        }
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                match w {
                    Some(w) => {
                        c.execute(
                            "INSERT INTO harness_tanstack_thread (key, waits) VALUES ($1, $2) \
                             ON CONFLICT (key) DO UPDATE SET waits = EXCLUDED.waits",
                            &[&k, &w],
                        )
                        .await?
                    }
                    None => {
                        c.execute(
                            "UPDATE harness_tanstack_thread SET waits = NULL WHERE key = $1",
                            &[&k],
                        )
                        .await?
                    }
                };
                Ok(())
            })
            .map_err(log_err)
    }

    fn lease(&mut self, key: &str, thread_id: &str) -> Result<Lease, LogError> {
        self.take_lease(key, thread_id)
    }

    fn release(&mut self, key: &str) -> Result<(), LogError> {
        self.release_lease(key)
    }

    fn release_all(&mut self) -> Result<(), LogError> {
        self.release_every_lease()
    }

    fn forward(&mut self, holder: &str, input: &Forward) -> Result<Option<u64>, LogError> {
        self.forward_to(holder, input)
    }

    fn take_forwarded(&mut self) -> Result<Vec<(u64, Forward)>, LogError> {
        self.take_inbox()
    }

    fn answer_forwarded(&mut self, id: u64, status: u16, body: &str) -> Result<(), LogError> {
        self.answer(id, status, body)
    }

    fn forwarded_answer(&mut self, id: u64) -> Result<Option<(u16, String)>, LogError> {
        self.answer_of(id)
    }

    fn withdraw_forwarded(&mut self, id: u64) -> Result<bool, LogError> {
        self.withdraw(id)
    }

    fn waits(&mut self, thread_id: &str) -> Result<Option<String>, LogError> {
        let k = thread_id.to_owned();
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                let row = c
                    .query_opt(
                        "SELECT waits FROM harness_tanstack_thread WHERE key = $1",
                        &[&k],
                    )
                    .await?;
                Ok(match row {
                    Some(r) => r.try_get(0)?,
                    None => None,
                })
            })
            .map_err(log_err)
    }
}
