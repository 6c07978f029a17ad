//! The server's PostgreSQL store on a real server (features `postgres` and `axum`): the shared
//! store suite, and hosts starting together on one database.
//!
//! Needs `HARNESS_PG_URL` (scripts/interop/postgres/run.sh starts a throwaway server and sets
//! it); without it every test fails, saying so. Each test works in a schema of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod store_suite;

use std::sync::Arc;

use async_trait::async_trait;
use harness_core::pg::PgConfig;
use harness_uhp::server::Store;
use harness_uhp::server::postgres::PgStore;

/// A schema of this test's own; each open is a new pool (a restarted host).
struct Schema(PgConfig);

impl Schema {
    fn fresh() -> Schema {
        Schema(PgConfig::for_test("uhp").unwrap_or_else(|e| panic!("{e}")))
    }
}

#[async_trait]
impl store_suite::Backend for Schema {
    async fn open(&self) -> Arc<dyn Store> {
        let cfg = self.0.clone();
        // Connecting blocks (it migrates): off the async worker.
        let store = tokio::task::spawn_blocking(move || PgStore::with_config(&cfg))
            .await
            .unwrap()
            .unwrap();
        Arc::new(store)
    }
}

/// The shared store suite on PostgreSQL.
mod pg_store {
    use super::{Schema, store_suite};
    store_suite!(Schema::fresh());
}

/// Two hosts on one database: what one appends, the other loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_host_loads_what_the_first_wrote() {
    use store_suite::Backend;
    let schema = Schema::fresh();
    let (a, b) = (schema.open().await, schema.open().await);
    let rec = harness_uhp::server::StoreRecord::ResponseDeleted { id: "r".into() };
    a.append(vec![rec]).await.unwrap();
    assert!(
        b.load().await.unwrap().is_empty(),
        "a deletion stores nothing"
    );
    let up = store_suite::upload("file_z", b"z");
    a.append(vec![up.clone()]).await.unwrap();
    assert_eq!(b.load().await.unwrap(), vec![up]);
}
