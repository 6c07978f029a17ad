//! [`PgStore`]: the server's records in PostgreSQL (feature `postgres`).

use async_trait::async_trait;
use harness_core::pg::{Migration, Pg, PgConfig, PgError};

use super::store::{StoreRecord, Store, StoreError};

static MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "live objects",
    sql: include_str!("0001_uhp.sql"),
}];

fn store_err(e: PgError) -> StoreError {
    StoreError::Io(e.to_string())
}

/// Records in PostgreSQL: one row per live object (`harness_uhp_object`, keyed by
/// [`StoreRecord::key`]), so the table is always compact. An append is one transaction: an upsert
/// per record (stamped with a sequence, the order [`load`](Store::load) returns them in), a
/// delete per deletion. A task's `Idempotency-Key` is part of its record, so a key used
/// before a restart names the same task after it, on this host or a replacement.
///
/// The server machine holds its state in memory and reads the store at start: one serving
/// process per database schema at a time (a standby takes over by starting on it), not
/// several serving the same objects at once.
#[derive(Clone, Debug)]
pub struct PgStore {
    pg: Pg,
}

impl PgStore {
    /// Connects to `url` and migrates the database (blocking: call it at start).
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        Self::with_config(&PgConfig::new(url))
    }

    /// Connects with `config` (pool size, schema) and migrates the database.
    pub fn with_config(config: &PgConfig) -> Result<PgStore, StoreError> {
        Self::new(Pg::connect(config).map_err(store_err)?)
    }

    /// A store on an open pool; migrates the database.
    pub fn new(pg: Pg) -> Result<PgStore, StoreError> {
        pg.migrate("uhp", MIGRATIONS).map_err(store_err)?;
        Ok(PgStore { pg })
    }

    /// The pool.
    pub fn pg(&self) -> &Pg {
        &self.pg
    }
}

#[async_trait]
impl Store for PgStore {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        let pool = self.pg.pool().clone();
        let rows: Vec<String> = self
            .pg
            .run(async move {
                let c = pool.get().await?;
                let rows = c
                    .query("SELECT record FROM harness_uhp_object ORDER BY ord", &[])
                    .await?;
                rows.iter()
                    .map(|r| r.try_get::<_, String>(0).map_err(PgError::from))
                    .collect()
            })
            .await
            .map_err(store_err)?;
        rows.iter()
            .map(|json| {
                serde_json::from_str(json)
                    .map_err(|e| StoreError::Io(format!("a stored record does not parse: {e}")))
            })
            .collect()
    }

    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(records.len());
        for r in &records {
            let (kind, id) = r.key();
            let json = if r.is_deletion() {
                None
            } else {
                Some(serde_json::to_string(r).map_err(|e| StoreError::Io(e.to_string()))?)
            };
            ops.push((kind.to_owned(), id.to_owned(), json));
        }
        let pool = self.pg.pool().clone();
        self.pg
            .run(async move {
                let mut c = pool.get().await?;
                let tx = c.transaction().await?;
                let upsert = tx
                    .prepare(
                        "INSERT INTO harness_uhp_object (kind, id, ord, record) \
                         VALUES ($1, $2, nextval('harness_uhp_order'), $3) \
                         ON CONFLICT (kind, id) DO UPDATE \
                         SET ord = EXCLUDED.ord, record = EXCLUDED.record",
                    )
                    .await?;
                let delete = tx
                    .prepare("DELETE FROM harness_uhp_object WHERE kind = $1 AND id = $2")
                    .await?;
                for (kind, id, json) in &ops {
                    match json {
                        Some(j) => tx.execute(&upsert, &[kind, id, j]).await?,
                        None => tx.execute(&delete, &[kind, id]).await?,
                    };
                }
                tx.commit().await?;
                Ok(())
            })
            .await
            .map_err(store_err)
    }
}
