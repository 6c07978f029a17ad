//! [`PgReceipts`]: tool receipts in PostgreSQL, shared by every host.

use harness_core::message::ToolResult;
use harness_core::pg::{Pg, PgConfig, PgError};

use super::MIGRATIONS;
use crate::journal::JournalError;
use crate::tools::ReceiptStore;

/// Receipts of executed tool calls in the `harness_receipt` table, keyed by session UID and
/// idempotency key: a [`DedupExecutor`](crate::tools::DedupExecutor) on any host sees a
/// receipt another host stored. Each put is a committed transaction. The first receipt
/// stored for a key wins: a second put of the same key (two hosts that both ran the effect
/// before either stored it) keeps the first, so every later lookup answers the same.
#[derive(Clone, Debug)]
pub struct PgReceipts {
    pg: Pg,
}

impl PgReceipts {
    /// Connects to `url` and migrates the database.
    pub fn connect(url: &str) -> Result<Self, JournalError> {
        Self::new(Pg::connect(&PgConfig::new(url))?)
    }

    /// Receipts on an open pool (the journal's, say); migrates the database.
    pub fn new(pg: Pg) -> Result<Self, JournalError> {
        pg.migrate("sessions", MIGRATIONS)?;
        Ok(PgReceipts { pg })
    }
}

impl ReceiptStore for PgReceipts {
    fn get(&self, session: &str, key: &str) -> Result<Option<ToolResult>, JournalError> {
        let pool = self.pg.pool().clone();
        let (s, k) = (session.to_owned(), key.to_owned());
        let stored: Option<String> = self.pg.block_on(async move {
            let c = pool.get().await?;
            let row = c
                .query_opt(
                    "SELECT result FROM harness_receipt WHERE session = $1 AND key = $2",
                    &[&s, &k],
                )
                .await?;
            Ok(match row {
                Some(r) => Some(r.try_get::<_, String>(0).map_err(PgError::from)?),
                None => None,
            })
        })?;
        stored
            .map(|json| {
                serde_json::from_str(&json).map_err(|e| JournalError::Corrupt {
                    session: session.to_owned(),
                    line: 0,
                    reason: format!("receipt {key:?}: {e}"),
                })
            })
            .transpose()
    }

    fn put(&self, session: &str, key: &str, result: &ToolResult) -> Result<(), JournalError> {
        let json = serde_json::to_string(result).map_err(|e| JournalError::Io(e.to_string()))?;
        let pool = self.pg.pool().clone();
        let (s, k) = (session.to_owned(), key.to_owned());
        self.pg.block_on(async move {
            let c = pool.get().await?;
            c.execute(
                "INSERT INTO harness_receipt (session, key, result) VALUES ($1, $2, $3) \
                 ON CONFLICT (session, key) DO NOTHING",
                &[&s, &k, &json],
            )
            .await?;
            Ok(())
        })?;
        Ok(())
    }
}
