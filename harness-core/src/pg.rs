//! PostgreSQL plumbing shared by the protocol crates' PostgreSQL stores (feature `postgres`).
//!
//! This is where the sans-IO crates meet a database, and the only place: the machines never
//! see it. A [`Pg`] is a connection pool ([`deadpool_postgres`] over [`tokio_postgres`]) on a
//! small tokio runtime of its own, so that a store can serve the crates' **synchronous**
//! storage traits (a journal append, a receipt lookup) from any thread, inside or outside the
//! caller's async runtime: [`Pg::block_on`] runs a query future on the pool's runtime and
//! waits for its answer, blocking the calling thread for one round trip, as a file store
//! blocks it for a write. Async callers can use [`Pg::pool`] directly.
//!
//! [`Pg::migrate`] applies a component's versioned migrations (SQL embedded in the binary)
//! exactly once per database schema: in one transaction, under an advisory lock, recorded in
//! `harness_schema_version`, so that two hosts starting together do not race and a database
//! migrated by a newer build is refused rather than misread.
//!
//! Connections are plain TCP (`NoTls`): put the database on a private network or a local
//! socket proxy. A [`PgConfig::schema`] confines every table to one schema (created if
//! missing), so several stores (or tests) share a database without sharing tables.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc;

pub use deadpool_postgres::{Object as PgClient, Pool};
pub use tokio_postgres;

/// Why a PostgreSQL operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// A bad database URL or schema name.
    #[error("postgres config: {0}")]
    Config(String),
    /// No connection could be had (the server is down, refuses us, or the pool timed out).
    #[error("postgres connection: {0}")]
    Connect(String),
    /// The server answered an error. `code` is the SQLSTATE (`23505`: unique violation).
    #[error("postgres: {message}")]
    Db {
        /// The SQLSTATE, when the server sent one.
        code: Option<String>,
        /// The server's message (or the client's, for a closed connection).
        message: String,
    },
    /// The database's schema is newer than this build knows.
    #[error("postgres schema of {component} is at version {found}, this build knows up to {known}")]
    SchemaTooNew {
        /// The component (`sessions`, `uhp`, `tanstack`).
        component: String,
        /// The version found in `harness_schema_version`.
        found: i32,
        /// The highest version this build ships.
        known: i32,
    },
    /// The pool's runtime is gone.
    #[error("postgres runtime: {0}")]
    Runtime(String),
}

impl PgError {
    /// Whether this is a unique-constraint violation (SQLSTATE 23505).
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, PgError::Db { code: Some(c), .. } if c == "23505")
    }
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => PgError::Db {
                code: Some(db.code().code().to_owned()),
                message: db.message().to_owned(),
            },
            None => PgError::Db {
                code: e.code().map(|c| c.code().to_owned()),
                message: e.to_string(),
            },
        }
    }
}

impl From<deadpool_postgres::PoolError> for PgError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => PgError::Connect(e.to_string()),
            e => PgError::Connect(e.to_string()),
        }
    }
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct PgConfig {
    url: String,
    schema: Option<String>,
    pool_size: usize,
    connect_timeout: std::time::Duration,
}

impl PgConfig {
    /// A `postgres://user@host:port/db` URL (or a libpq `key=value` string), with a pool of 8
    /// connections and a 10 s connect timeout.
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            schema: None,
            pool_size: 8,
            connect_timeout: std::time::Duration::from_secs(10),
        }
    }

    /// Keeps every table in `schema` (created if missing): lowercase ASCII letters, digits and
    /// `_`, at most 63 bytes, not starting with a digit.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The pool's maximum number of connections (at least 1).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// How long opening one connection may take.
    pub fn connect_timeout(mut self, t: std::time::Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// A configuration for one test: the server named by `HARNESS_PG_URL` (what
    /// `scripts/pg.sh start` prints), a schema of its own that no other call in any process
    /// gets (`t_{prefix}_{pid}_{n}`), and a pool of 2. Without the variable, an error that says
    /// how to get a server: a test that needs PostgreSQL fails, it never passes silently.
    pub fn for_test(prefix: &str) -> Result<Self, PgError> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let url = match std::env::var("HARNESS_PG_URL") {
            Ok(u) if !u.is_empty() => u,
            _ => {
                return Err(PgError::Config(
                    "HARNESS_PG_URL is not set: the `postgres` feature's tests need a PostgreSQL \
                     server. Run `bash scripts/interop/postgres/run.sh`, or `scripts/pg.sh start` \
                     and export the URL it prints as HARNESS_PG_URL."
                        .into(),
                ));
            }
        };
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(PgConfig::new(url)
            .schema(format!("t_{prefix}_{}_{n}", std::process::id()))
            .pool_size(2))
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema, if one was set.
    pub fn schema_name(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    fn client_config(&self) -> Result<tokio_postgres::Config, PgError> {
        let mut c = tokio_postgres::Config::from_str(&self.url)
            .map_err(|e| PgError::Config(format!("database url: {e}")))?;
        c.connect_timeout(self.connect_timeout);
        if c.get_application_name().is_none() {
            c.application_name("harness-rs");
        }
        if let Some(s) = &self.schema {
            valid_schema(s)?;
            c.options(format!("-c search_path={s}"));
        }
        Ok(c)
    }
}

fn valid_schema(s: &str) -> Result<(), PgError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(PgError::Config(format!("invalid schema name {s:?}")))
    }
}

/// Shuts the runtime down without blocking when the last handle goes (dropping a runtime
/// inside another one's async context would panic).
struct Rt(Option<tokio::runtime::Runtime>);

impl Drop for Rt {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A connection pool on a runtime of its own. Cheap to clone (shared).
#[derive(Clone)]
pub struct Pg {
    pool: Pool,
    handle: tokio::runtime::Handle,
    _rt: Arc<Rt>,
    schema: Option<String>,
    client_config: tokio_postgres::Config,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("schema", &self.schema)
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

/// A `LISTEN` connection ([`Pg::listen`]); dropping it closes the connection.
#[derive(Debug)]
pub struct PgListener {
    task: tokio::task::JoinHandle<()>,
}

impl PgListener {
    /// Whether the connection has ended (the server went away): listen again.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for PgListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One versioned migration: embedded SQL, applied once.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// 1, 2, 3, … in order; never renumbered once released.
    pub version: i32,
    /// A short name, recorded beside the version.
    pub name: &'static str,
    /// The SQL (several statements allowed).
    pub sql: &'static str,
}

impl Pg {
    /// Connects: starts the pool's runtime (one worker thread), creates the schema if one is
    /// set, and checks that a connection can be had. Blocks the calling thread until then.
    pub fn connect(config: &PgConfig) -> Result<Pg, PgError> {
        let client_config = config.client_config()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("harness-pg")
            .enable_all()
            .build()
            .map_err(|e| PgError::Runtime(e.to_string()))?;
        let handle = rt.handle().clone();
        let rt = Arc::new(Rt(Some(rt)));
        if let Some(schema) = &config.schema {
            // The pool's connections put the schema first on their search_path; it must exist.
            let mut plain = client_config.clone();
            plain.options("");
            let schema = schema.clone();
            run_on(&handle, async move {
                let (client, conn) = plain.connect(tokio_postgres::NoTls).await?;
                let task = tokio::spawn(conn);
                let r = client
                    .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                    .await;
                drop(client);
                let _ = task.await;
                match r.map_err(PgError::from) {
                    // Two hosts creating the schema together: one of them loses the race.
                    Err(e) if !e.is_unique_violation() => Err(e),
                    _ => Ok(()),
                }
            })?;
        }
        let mgr = deadpool_postgres::Manager::from_config(
            client_config.clone(),
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = {
            let _guard = handle.enter();
            Pool::builder(mgr)
                .max_size(config.pool_size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(config.connect_timeout))
                .create_timeout(Some(config.connect_timeout))
                .build()
                .map_err(|e| PgError::Config(e.to_string()))?
        };
        let pg = Pg {
            pool,
            handle,
            _rt: rt,
            schema: config.schema.clone(),
            client_config,
        };
        pg.block_on({
            let pool = pg.pool.clone();
            async move {
                let c = pool.get().await?;
                c.simple_query("SELECT 1").await?;
                Ok(())
            }
        })?;
        Ok(pg)
    }

    /// The pool, for async callers (any tokio runtime).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The schema every connection uses first, if one was set.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The schema the pool's statements work in (`current_schema()`), as a statement that
    /// names it (a `NOTIFY` payload, say) sees it. Blocking: call it at start.
    pub fn current_schema(&self) -> Result<String, PgError> {
        let pool = self.pool.clone();
        self.block_on(async move {
            let c = pool.get().await?;
            Ok(c.query_one("SELECT current_schema()", &[])
                .await?
                .try_get(0)?)
        })
    }

    /// A handle to the pool's runtime (to spawn long-lived tasks such as a LISTEN loop).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs `fut` on the pool's runtime and blocks the calling thread until it answers.
    /// Callable from any thread, including a worker of another tokio runtime (it blocks that
    /// worker for the duration, as file I/O would).
    pub fn block_on<T, F>(&self, fut: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        run_on(&self.handle, fut)
    }

    /// Runs `fut` on the pool's runtime and awaits its answer from any async context (any
    /// runtime: the connections live on the pool's own), never blocking a thread.
    pub async fn run<T, F>(&self, fut: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        self.handle
            .spawn(fut)
            .await
            .map_err(|e| PgError::Runtime(e.to_string()))?
    }

    /// `LISTEN`s on `channel` on a connection of its own (outside the pool) and calls
    /// `on_notify` with each notification's payload, on the pool's runtime, until the returned
    /// [`PgListener`] is dropped or the connection fails ([`PgListener::is_finished`]). The
    /// listener is ready (subscribed) when this returns; nothing polls. `on_notify` runs on
    /// the pool's runtime: it must not block (nor wait on anything that queries through this
    /// pool); hand the payload to another thread or task.
    pub fn listen(
        &self,
        channel: &str,
        on_notify: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<PgListener, PgError> {
        if !channel
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            || channel.is_empty()
        {
            return Err(PgError::Config(format!("invalid channel name {channel:?}")));
        }
        let config = self.client_config.clone();
        let listen = format!("LISTEN {channel}");
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), PgError>>(1);
        let task = self.handle.spawn(async move {
            let (client, mut conn) = match config.connect(tokio_postgres::NoTls).await {
                Ok(x) => x,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.into()));
                    return;
                }
            };
            // The connection delivers notifications as it is polled; the LISTEN is sent by
            // the client, answered through the same connection. The client lives (borrowed by
            // the LISTEN future) until the loop ends.
            let mut listened = std::pin::pin!(client.batch_execute(&listen));
            let mut ready = Some(ready_tx);
            std::future::poll_fn(|cx| {
                use std::task::Poll;
                if ready.is_some() {
                    if let Poll::Ready(r) = listened.as_mut().poll(cx) {
                        if let Some(tx) = ready.take() {
                            let failed = r.is_err();
                            let _ = tx.send(r.map_err(PgError::from));
                            if failed {
                                return Poll::Ready(());
                            }
                        }
                    }
                }
                loop {
                    match conn.poll_message(cx) {
                        Poll::Ready(Some(Ok(tokio_postgres::AsyncMessage::Notification(n)))) => {
                            on_notify(n.payload())
                        }
                        Poll::Ready(Some(Ok(_))) => {}
                        Poll::Ready(Some(Err(_))) | Poll::Ready(None) => return Poll::Ready(()),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            })
            .await;
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(PgListener { task }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(PgError::Runtime(
                "the listener stopped before it listened".into(),
            )),
        }
    }

    /// Applies `component`'s migrations newer than the database's, in order, in one
    /// transaction under an advisory lock (per schema), and records each in
    /// `harness_schema_version`. Returns the component's version afterwards. A database at a
    /// version higher than any in `migrations` is [`PgError::SchemaTooNew`].
    pub fn migrate(
        &self,
        component: &str,
        migrations: &'static [Migration],
    ) -> Result<i32, PgError> {
        let pool = self.pool.clone();
        let component = component.to_owned();
        self.block_on(async move { migrate(&pool, &component, migrations).await })
    }
}

/// A fixed first key for the migrations' advisory lock ("hr" + "mg"); the second is the
/// schema's hash, so that separate schemas migrate independently.
const MIGRATION_LOCK: i32 = 0x6872_6d67;

async fn migrate(pool: &Pool, component: &str, migrations: &[Migration]) -> Result<i32, PgError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))",
        &[&MIGRATION_LOCK],
    )
    .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS harness_schema_version (
            component text NOT NULL,
            version integer NOT NULL,
            name text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (component, version)
        )",
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM harness_schema_version WHERE component = $1",
            &[&component],
        )
        .await?;
    let mut current: i32 = row.try_get(0)?;
    let known = migrations.iter().map(|m| m.version).max().unwrap_or(0);
    if current > known {
        return Err(PgError::SchemaTooNew {
            component: component.to_owned(),
            found: current,
            known,
        });
    }
    let mut pending: Vec<&Migration> = migrations.iter().filter(|m| m.version > current).collect();
    pending.sort_by_key(|m| m.version);
    for m in pending {
        tx.batch_execute(m.sql).await?;
        tx.execute(
            "INSERT INTO harness_schema_version (component, version, name) VALUES ($1, $2, $3)",
            &[&component, &m.version, &m.name],
        )
        .await?;
        current = m.version;
    }
    tx.commit().await?;
    Ok(current)
}

fn run_on<T, F>(handle: &tokio::runtime::Handle, fut: F) -> Result<T, PgError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, PgError>> + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| PgError::Runtime("the pool's runtime stopped".into()))?
}
