//! The server store conformance suite, run on every durable store (the file store, PostgreSQL)
//! by [`store_suite!`]: records fold by object, in the order last written, across a reopen;
//! and a server restarted on the store still knows its tasks and their `Idempotency-Key`s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_uhp::server::Principal;
use harness_uhp::server::axum::{RouterConfig, UhpServeConfig, router, serve};
use harness_uhp::server::driver::UhpService;
use harness_uhp::server::file::StoredFile;
use harness_uhp::server::{StoreRecord, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One storage location of a store.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A store on this location (each call a new handle: a restart).
    async fn open(&self) -> Arc<dyn Store>;
}

/// Generates one `#[tokio::test]` per suite function for `$backend` (evaluated per test).
macro_rules! store_suite {
    ($backend:expr) => {
        store_suite!(@tests $backend;
            later_records_replace_earlier_and_deletions_remove,
            a_restarted_server_keeps_its_tasks_and_idempotency_keys,
        );
    };
    (@tests $backend:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                store_suite::$name(&$backend).await;
            }
        )*
    };
}

pub fn upload(id: &str, bytes: &[u8]) -> StoreRecord {
    StoreRecord::Upload {
        principal: Principal::new("alice"),
        file: Box::new(StoredFile {
            id: id.into(),
            filename: format!("{id}.txt"),
            media_type: "text/plain; charset=utf-8".into(),
            created_at: 1_786_400_000,
            bytes: bytes.to_vec(),
        }),
    }
}

/// harness-uhp server/store.rs (the Store contract): "later records of one object replace
/// earlier ones, deletions remove", and `load` returns them in order.
pub async fn later_records_replace_earlier_and_deletions_remove(b: &dyn Backend) {
    let s = b.open().await;
    assert!(s.durable());
    assert!(s.load().await.unwrap().is_empty());
    s.append(vec![upload("file_a", b"one"), upload("file_b", b"two")])
        .await
        .unwrap();
    s.append(vec![
        upload("file_a", b"one, again"),
        StoreRecord::ResponseDeleted {
            id: "resp_never".into(),
        },
        upload("file_c", b"three"),
        StoreRecord::SessionDeleted {
            id: "sess_x".into(),
            expired: true,
        },
    ])
    .await
    .unwrap();
    // One append holding two writes of one object: the last wins.
    s.append(vec![upload("file_d", b"d1"), upload("file_d", b"d2")])
        .await
        .unwrap();
    drop(s);
    let s = b.open().await;
    let want = vec![
        upload("file_b", b"two"),
        upload("file_a", b"one, again"),
        upload("file_c", b"three"),
        upload("file_d", b"d2"),
    ];
    assert_eq!(s.load().await.unwrap(), want);
    // A loaded store keeps taking records.
    s.append(vec![upload("file_e", b"e")]).await.unwrap();
    assert_eq!(b.open().await.load().await.unwrap().len(), 5);
}

async fn start(store: Arc<dyn Store>) -> (String, UhpService) {
    let host = UhpService::builder(ScriptedModel::new())
        .harness("echo", "Echo", Echo)
        .models(["scripted"])
        .api_key("k", "alice")
        .store(store)
        .build(Instant::now, || 1_786_400_000_000)
        .await
        .unwrap();
    tokio::spawn(host.clone().run(tokio::time::sleep));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(serve(
        listener,
        router(host.clone(), RouterConfig::default()),
        UhpServeConfig::default(),
    ));
    (addr, host)
}

/// Echoes its inputs.
struct Echo;

#[async_trait]
impl Harness for Echo {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("echo", "1"))
    }
    async fn run(&self, s: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let text = s.inputs.iter().map(|m| m.text()).collect::<String>();
        sink.output(&text).await?;
        Ok(())
    }
}

async fn raw(addr: &str, head: &str, body: &[u8]) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// UHP tasks.md: a retried `POST /v1/responses` with the same `Idempotency-Key` names the
/// first task; the store keeps that across a restart, and the task itself.
pub async fn a_restarted_server_keeps_its_tasks_and_idempotency_keys(b: &dyn Backend) {
    let (addr, host) = start(b.open().await).await;
    let body = br#"{"input":"keep me"}"#;
    let post = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer k\r\nidempotency-key: kk\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let a = raw(&addr, &post, body).await;
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    let id = a
        .split("\"id\":\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    // The task ends and its record is written.
    let get = format!(
        "GET /v1/responses/{id} HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer k\r\n\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !raw(&addr, &get, b"")
        .await
        .contains("\"status\":\"completed\"")
    {
        assert!(Instant::now() < deadline, "the task never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(host);
    let (addr, _host) = start(b.open().await).await;
    let a = raw(&addr, &get, b"").await;
    assert!(
        a.starts_with("HTTP/1.1 200") && a.contains("\"status\":\"completed\""),
        "{a}"
    );
    let again = raw(&addr, &post, body).await;
    assert!(
        again.contains(&id),
        "the key still names the first task: {again}"
    );
}
