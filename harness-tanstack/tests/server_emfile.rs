//! The accept loop out of descriptors (issue 18: "an accept loop that pauses on `EMFILE`
//! instead of spinning a core"). The test runs itself again as a child under
//! `ulimit -n 256` (so the process, not the machine, runs out), fills its descriptor
//! table, and connects: the server cannot accept. It must pause (a handful of pauses in a
//! second, not a spin of thousands), and serve the waiting client once descriptors are free.
#![cfg(feature = "axum")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::server::{TanstackRouterConfig, TanstackServeConfig, drive, router, serve};
use harness_tanstack::{Host, HostConfig, MemoryLog, Service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHILD: &str = "HARNESS_TANSTACK_EMFILE_CHILD";

#[test]
fn accept_loop_pauses_on_emfile_and_recovers() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" accept_loop_pauses_on_emfile_and_recovers --exact --nocapture --test-threads 1"#)
        .arg(exe)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains("emfile child: ok"), "{text}");
}

fn child() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let svc = Service::new(
            Host::new(HostConfig::default(), MemoryLog::default()),
            Instant::now,
        );
        tokio::spawn(drive(
            svc.clone(),
            ToolLoopAgent::new("a"),
            ScriptedModel::echo(),
            Tools::new(),
        ));
        let app = axum::Router::new().nest("/api", router(svc, TanstackRouterConfig::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(serve(
            listener,
            app,
            TanstackServeConfig::default(),
            async {
                let _ = rx.await;
            },
        ));
        // Fill the descriptor table, then free one for the client's socket.
        let mut hog = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            hog.push(f);
        }
        assert!(hog.len() > 100, "the table holds {} more", hog.len());
        hog.pop();
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET /api/capabilities HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        // The server cannot accept it for a second.
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(hog);
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut out))
            .await
            .expect("served once descriptors are free")
            .unwrap();
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        let _ = stop.send(());
        let report = done.await.unwrap();
        // 100 ms pauses over about a second: about 10, not a spin.
        assert!(
            (3..=30).contains(&report.accept_pauses),
            "{} accept pauses",
            report.accept_pauses
        );
        println!("emfile child: ok ({} pauses)", report.accept_pauses);
    });
}
