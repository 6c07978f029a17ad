//! The runtime adapter (feature `axum`) over real loopback sockets: nested under a prefix,
//! an auth hook, the body limit answered before the body is read, a stream sent as it is
//! made, the header-read timeout, and the on-disk store across a restart.
#![cfg(feature = "axum")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod store_suite;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_uhp::server::Principal;
use harness_uhp::server::axum::{FileStore, RouterConfig, UhpServeConfig, router, serve};
use harness_uhp::server::driver::{CallerAuth, UhpService};
use harness_uhp::server::{Store, StoreRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// Says "first", waits to be told, says "second".
struct Stepper(Arc<Notify>);

#[async_trait]
impl Harness for Stepper {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("stepper", "1"))
    }
    async fn run(&self, _s: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        sink.output("first").await?;
        self.0.notified().await;
        sink.output("second").await?;
        Ok(())
    }
}

async fn start(go: Arc<Notify>, store: Option<FileStore>) -> (String, UhpService) {
    let mut b = UhpService::builder(ScriptedModel::new())
        .harness("stepper", "Stepper", Stepper(go))
        .models(["scripted"])
        .api_key("k", "alice")
        .configure(|c| c.max_upload_bytes = 1000);
    if let Some(s) = store {
        b = b.store(s);
    }
    let host = b.build(Instant::now, || 1_786_400_000_000).await.unwrap();
    tokio::spawn(host.run(tokio::time::sleep));
    let cfg = RouterConfig::default().with_auth(|parts| {
        match parts.headers.get("x-user").and_then(|v| v.to_str().ok()) {
            Some(u) => CallerAuth::Principal(Principal::new(u)),
            None if parts.headers.contains_key("authorization") => CallerAuth::Bearer,
            None => CallerAuth::Anonymous,
        }
    });
    let app = axum::Router::new().nest("/api/harness", router(host.clone(), cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut sc = UhpServeConfig::default();
    sc.header_timeout = Duration::from_millis(300);
    tokio::spawn(serve(listener, app, sc));
    (addr, host)
}

/// One HTTP/1.1 request on a fresh connection; the raw answer until the server closes.
async fn raw(addr: &str, head: &str, body: &[u8]) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn get(path: &str, extra: &str) -> String {
    format!("GET /api/harness{path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{extra}\r\n")
}

#[tokio::test]
async fn nested_with_an_auth_hook_and_a_body_limit() {
    let (addr, _host) = start(Arc::new(Notify::new()), None).await;
    let a = raw(&addr, &get("/v1/uhp", ""), b"").await;
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    assert!(a.to_ascii_lowercase().contains("uhp-version: 2026-08-11"));
    let a = raw(&addr, &get("/v1/harnesses", ""), b"").await;
    assert!(a.starts_with("HTTP/1.1 401"), "{a}");
    let a = raw(&addr, &get("/v1/harnesses", "x-user: bob\r\n"), b"").await;
    assert!(a.starts_with("HTTP/1.1 200"), "the hook's principal: {a}");
    let a = raw(
        &addr,
        &get("/v1/harnesses", "authorization: Bearer k\r\n"),
        b"",
    )
    .await;
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    // Declared too large: refused before a byte of the body is read.
    let head = "POST /api/harness/v1/files HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer k\r\ncontent-length: 99999999\r\n\r\n";
    let a = raw(&addr, head, b"").await;
    assert!(
        a.starts_with("HTTP/1.1 413") && a.contains("file_too_large"),
        "{a}"
    );
}

#[tokio::test]
async fn the_stream_leaves_as_it_is_made() {
    let go = Arc::new(Notify::new());
    let (addr, _host) = start(Arc::clone(&go), None).await;
    let body = br#"{"input":"go","stream":true}"#;
    let head = format!(
        "POST /api/harness/v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    // "first" arrives while the agent still waits: nothing is held back to the end.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"delta\":\"first\"") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(!String::from_utf8_lossy(&seen).contains("response.completed"));
    go.notify_one();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("\"delta\":\"second\"") && rest.contains("response.completed"),
        "{rest}"
    );
}

#[tokio::test]
async fn a_silent_client_is_cut_off() {
    let (addr, _host) = start(Arc::new(Notify::new()), None).await;
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"GET /api/harness/v1/uhp HTTP/1.1\r\n")
        .await
        .unwrap(); // and then nothing
    let mut out = Vec::new();
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    assert!(r.is_ok(), "the server closed the connection");
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn the_file_store_survives_a_restart_and_stays_compact() {
    let dir = std::env::temp_dir().join(format!("uhp-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let go = Arc::new(Notify::new());
    go.notify_one();
    let (addr, host) = start(Arc::clone(&go), Some(FileStore::open(&dir).await.unwrap())).await;
    let body = br#"{"input":"keep me"}"#;
    let head = format!(
        "POST /api/harness/v1/responses HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer k\r\nidempotency-key: kk\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let a = raw(&addr, &head, body).await;
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    let id = a
        .split("\"id\":\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(host);
    // A torn line at the end (a crash mid-write) is skipped.
    let log = dir.join("records.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"{\"record\":\"resp").unwrap();
    let store = FileStore::open(&dir).await.unwrap();
    let records = store.load().await.unwrap();
    assert!(
        records
            .iter()
            .any(|r| matches!(r, StoreRecord::Response { task, .. } if task.response.id == id))
    );
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(
        lines,
        records.len(),
        "compacted on open: one line per live object"
    );
    let (addr, _host) = start(Arc::new(Notify::new()), Some(store)).await;
    let a = raw(
        &addr,
        &get(
            &format!("/v1/responses/{id}"),
            "authorization: Bearer k\r\n",
        ),
        b"",
    )
    .await;
    assert!(
        a.starts_with("HTTP/1.1 200") && a.contains("\"status\":\"completed\""),
        "{a}"
    );
    let again = raw(&addr, &head, body).await;
    assert!(
        again.contains(&id),
        "the key still names the first task: {again}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder for the file store; each open a new `FileStore` on it (a restart).
struct Folder(std::path::PathBuf);

impl Folder {
    fn fresh() -> Folder {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("uhp-store-suite-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Folder(dir)
    }
}

#[async_trait]
impl store_suite::Backend for Folder {
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(FileStore::open(&self.0).await.unwrap())
    }
}

/// The shared store suite on the file store.
mod file_store {
    use super::{Folder, store_suite};
    store_suite!(Folder::fresh());
}
