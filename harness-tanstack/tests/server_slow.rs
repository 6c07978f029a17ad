//! The runtime adapter (feature `axum`) and clients that stop reading, and its shutdown,
//! over loopback (issue 18): a write blocked for the write timeout closes the connection
//! (the host gave the slow consumer up after `slowConsumerMs`, spec
//! /work/shared/spec/tanstack-harness-wire-protocol.md:343, "the server sends
//! `slow_consumer` and closes", but the bytes already handed to the socket held it open),
//! while a reader of the same thread goes on; and the graceful shutdown sends WebSockets
//! the close 1001 and counts those it had to close.
#![cfg(feature = "axum")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::server::{
    ServeReport, TanstackRouterConfig, TanstackServeConfig, drive, router, serve,
};
use harness_tanstack::{Host, HostConfig, MemoryLog, Service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Server {
    addr: SocketAddr,
    svc: Service<MemoryLog>,
    stop: oneshot::Sender<()>,
    done: JoinHandle<ServeReport>,
}

async fn start(host: HostConfig, sc: TanstackServeConfig) -> Server {
    start_with_sndbuf(host, sc, None).await
}

/// With `sndbuf`, the accepted sockets' send buffer (inherited from the listener): small,
/// a client that stops reading blocks the server's writes after little data.
async fn start_with_sndbuf(
    host: HostConfig,
    sc: TanstackServeConfig,
    sndbuf: Option<u32>,
) -> Server {
    let svc = Service::new(Host::new(host, MemoryLog::default()), Instant::now);
    tokio::spawn(drive(
        svc.clone(),
        ToolLoopAgent::new("acme/assistant"),
        ScriptedModel::echo(),
        Tools::new(),
    ));
    let app = axum::Router::new().nest(
        "/api/harness",
        router(svc.clone(), TanstackRouterConfig::default()),
    );
    let sock = TcpSocket::new_v4().unwrap();
    if let Some(n) = sndbuf {
        sock.set_send_buffer_size(n).unwrap();
    }
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = sock.listen(1024).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(serve(listener, app, sc, async {
        let _ = rx.await;
    }));
    Server {
        addr,
        svc,
        stop,
        done,
    }
}

fn host_config(slow_consumer: Duration) -> HostConfig {
    let mut cfg = HostConfig::default();
    cfg.stream.slow_consumer = slow_consumer;
    // The floods below queue megabytes of inputs behind the running turn.
    cfg.max_waiting_bytes = 64 << 20;
    cfg
}

/// `POST control` with one input; the receipt.
async fn control(addr: SocketAddr, thread: &str, input: &str) -> String {
    let body = format!(r#"{{"threadId":"{thread}","input":{input}}}"#);
    let req = format!(
        "POST /api/harness/control HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("the receipt within 10 s")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// A connection with a small receive buffer (so that it fills fast) that asked for the
/// thread's events.
async fn open_events(addr: SocketAddr, thread: &str, rcvbuf: Option<u32>) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    if let Some(n) = rcvbuf {
        sock.set_recv_buffer_size(n).unwrap();
    }
    let mut s = sock.connect(addr).await.unwrap();
    let req = format!("GET /api/harness/events?threadId={thread}&v=2 HTTP/1.1\r\nhost: x\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Reads until `needle` has come, or `d` passes; all that came.
async fn read_until(s: &mut TcpStream, needle: &str, d: Duration) -> String {
    let end = tokio::time::Instant::now() + d;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !String::from_utf8_lossy(&got).contains(needle) {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A reader that stops reading while megabytes of events come is closed once its writes
/// stay blocked for the write timeout: what it reads afterwards ends early (no
/// `slow_consumer`, no end of the chunked body), the host holds no connection for it and
/// the report counts it. Meanwhile a normal reader of the same thread, on the same runtime,
/// gets every event, and new ones after the cut; the host's queue for the stuck reader
/// stays within `sseQueueBytes` (spec :341, "The server stops reading the log while this
/// much data waits for the client").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_is_closed_at_the_write_timeout_and_another_goes_on() {
    // Generous against a busy machine (a debug build on shared cores takes a while over a
    // 200 KB input): a normal reader must not look slow.
    let write_timeout = Duration::from_secs(8);
    let host = host_config(Duration::from_secs(5));
    let queue_limit = host.stream.sse_queue_bytes;
    let srv = start_with_sndbuf(
        host,
        TanstackServeConfig::default().with_write_timeout(write_timeout),
        Some(64 << 10),
    )
    .await;
    let t = "slow-thread";
    let receipt = control(srv.addr, t, r#"{"op":"prompt","message":"first"}"#).await;
    assert!(receipt.contains("accepted"), "{receipt}");

    let mut stuck = open_events(srv.addr, t, Some(4096)).await;
    let head = read_until(&mut stuck, "harness.hello", Duration::from_secs(5)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The normal reader reads everything, on a thread of its own (a client whose reads do
    // not wait for the server's runtime).
    let normal = std::net::TcpStream::connect(srv.addr).unwrap();
    let (seen_tx, seen_rx) = tokio::sync::watch::channel(String::new());
    let reader = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut normal = normal;
        let req = format!("GET /api/harness/events?threadId={t}&v=2 HTTP/1.1\r\nhost: x\r\n\r\n");
        normal.write_all(req.as_bytes()).unwrap();
        let mut tail = String::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match normal.read(&mut buf) {
                Ok(n) if n > 0 => {
                    tail.push_str(&String::from_utf8_lossy(&buf[..n]));
                    // Keep the end only: the markers are short.
                    if tail.len() > 1 << 16 {
                        tail.drain(..tail.len() - (1 << 15));
                    }
                    let _ = seen_tx.send(tail.clone());
                }
                _ => return tail,
            }
        }
    });

    // Megabytes of events: each followUp is logged with its 100 KB message and echoed back.
    let big = "x".repeat(100_000);
    let mut max_queued = 0;
    for i in 0..40 {
        let input = format!(r#"{{"op":"followUp","message":"{big}-end-{i}"}}"#);
        let receipt = control(srv.addr, t, &input).await;
        assert!(
            receipt.contains("\"status\":\"accepted\"")
                || receipt.contains("\"status\":\"queued\""),
            "{}",
            &receipt[receipt.len().saturating_sub(300)..]
        );
        max_queued = max_queued.max(srv.svc.with_host(|h, _| h.stats().queued_bytes));
    }
    let flooded = Instant::now();
    // Every event reaches the normal reader, to the end of the last followUp's turn.
    let mut seen = seen_rx.clone();
    let seen_last = tokio::time::timeout(
        Duration::from_secs(60),
        // The prompt was in-1: the 40th followUp, in-41, settled.
        seen.wait_for(|s| s.contains(r#""inputId":"in-41","operationId""#)),
    )
    .await
    .unwrap_or_else(|_| {
        let tail = seen_rx.borrow().clone();
        panic!(
            "no last echo: {:?}; {}",
            srv.svc.with_host(|h, _| h.stats()),
            &tail[tail.len().saturating_sub(600)..]
        )
    })
    .is_ok();
    if !seen_last {
        let tail = reader.join().unwrap();
        panic!(
            "the normal reader's stream ended: {}",
            &tail[tail.len().saturating_sub(400)..]
        );
    }
    // Bounded: what waits for the stuck reader is at most the SSE queue and a frame.
    for _ in 0..10 {
        max_queued = max_queued.max(srv.svc.with_host(|h, _| h.stats().queued_bytes));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        max_queued <= queue_limit + (512 << 10),
        "{max_queued} bytes queued, sseQueueBytes {queue_limit}"
    );

    // Past the write timeout (counted from the end of the flood at the latest), the stuck
    // reader's connection is gone: the host holds only the normal reader's.
    let deadline = flooded + write_timeout + Duration::from_secs(2);
    tokio::time::sleep_until(deadline.into()).await;
    let conns = srv.svc.with_host(|h, _| h.stats().connections);
    assert_eq!(
        conns, 1,
        "connections held by the host after the write timeout"
    );
    // What the stuck reader reads now is what its buffers held: it ends early, with no
    // `slow_consumer` and no last chunk (had the connection not been cut, reading again
    // would have got both: "A slow client loses no events" ... "sends slow_consumer").
    let mut rest = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(10), stuck.read_to_end(&mut rest)).await;
    assert!(
        end.is_ok(),
        "the cut connection ends once its buffers are read"
    );
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        !rest.contains("slow_consumer"),
        "not cut: it got slow_consumer"
    );
    assert!(!rest.ends_with("0\r\n\r\n"), "not cut: the body ended");

    // The normal reader still gets new events.
    control(
        srv.addr,
        t,
        r#"{"op":"followUp","message":"after-the-cut"}"#,
    )
    .await;
    tokio::time::timeout(
        Duration::from_secs(30),
        seen.wait_for(|s| s.contains("after-the-cut")),
    )
    .await
    .expect("the normal reader got an event after the cut")
    .unwrap();

    let _ = srv.stop.send(());
    let report = srv.done.await.unwrap();
    assert_eq!(report.write_timeouts, 1, "{report:?}");
    // The shutdown closed the normal reader's stream: its thread ends.
    reader.join().unwrap();
}

/// The default closes a stuck connection after 60 s, and a client that reads again sooner
/// than that still gets the spec's `slow_consumer` (spec :343): with the write timeout well
/// above `slowConsumerMs`, a reader that pauses past `slowConsumerMs` and reads again gets
/// the `slow_consumer` frame and the end of the stream, not a cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_reads_again_before_the_write_timeout_gets_slow_consumer() {
    let cfg = TanstackServeConfig::default();
    assert_eq!(cfg.write_timeout, Some(Duration::from_secs(60)));
    let srv = start(host_config(Duration::from_millis(300)), cfg).await;
    let t = "pause-thread";
    control(srv.addr, t, r#"{"op":"prompt","message":"first"}"#).await;
    let mut paused = open_events(srv.addr, t, Some(4096)).await;
    read_until(&mut paused, "harness.hello", Duration::from_secs(5)).await;
    let big = "y".repeat(200_000);
    for i in 0..30 {
        let input = format!(r#"{{"op":"followUp","message":"{big}{i}"}}"#);
        control(srv.addr, t, &input).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = read_until(&mut paused, "0\r\n\r\n", Duration::from_secs(20)).await;
    assert!(
        got.contains("\"code\":\"slow_consumer\""),
        "no slow_consumer"
    );
    assert!(got.ends_with("0\r\n\r\n"), "the stream did not end");
    let _ = srv.stop.send(());
    let report = srv.done.await.unwrap();
    assert_eq!(report.write_timeouts, 0, "{report:?}");
}

/// At shutdown, an upgraded WebSocket is counted and drained: it gets the close 1001
/// (RFC 6455 7.4.1, "going away, such as a server going down") and `serve` returns once it
/// is closed, within the grace; an SSE stream still open at the end of the grace is
/// closed and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_websockets_1001_and_counts_them() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let grace = Duration::from_millis(1_500);
    let srv = start(
        host_config(Duration::from_secs(30)),
        TanstackServeConfig::default().with_shutdown_grace(grace),
    )
    .await;
    let url = format!("ws://{}/api/harness/socket", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(Message::text(
        r#"{"type":"harness.subscribe","threadId":"t-ws","v":2}"#,
    ))
    .await
    .unwrap();
    let hello = ws.next().await.unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("harness.hello"));
    let mut sse = open_events(srv.addr, "t-sse", None).await;
    read_until(&mut sse, "harness.hello", Duration::from_secs(5)).await;

    let began = Instant::now();
    let _ = srv.stop.send(());
    let close = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(f))) => return f,
                Some(Ok(_)) => {}
                other => panic!("expected the close 1001, got {other:?}"),
            }
        }
    })
    .await
    .expect("the close within 5 s");
    assert_eq!(close.map(|f| u16::from(f.code)), Some(1001));
    drop(ws);
    let report = tokio::time::timeout(grace * 4, srv.done)
        .await
        .expect("serve returns")
        .unwrap();
    assert!(began.elapsed() < grace * 3, "{:?}", began.elapsed());
    assert_eq!(report.open_at_shutdown, 2, "{report:?}");
    // The stream runs until the grace ends; the WebSocket took its close.
    assert_eq!(report.ended_by_shutdown, 1, "{report:?}");
    assert!(closed(&mut sse).await, "the stream was not closed");
}

/// A WebSocket whose client does not read cannot take its close: at the end of the grace
/// it is closed too, counted in `ended_by_shutdown`, and `serve` returns (before, an
/// upgraded socket ran on with the runtime, uncounted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_and_counts_a_websocket_that_does_not_read() {
    let grace = Duration::from_millis(1_000);
    let srv = start_with_sndbuf(
        // The host would give it up after an hour: the shutdown must close it.
        host_config(Duration::from_secs(3_600)),
        TanstackServeConfig::default()
            .with_shutdown_grace(grace)
            .without_write_timeout(),
        Some(64 << 10),
    )
    .await;
    let t = "ws-stuck";
    control(srv.addr, t, r#"{"op":"prompt","message":"first"}"#).await;
    // A raw upgrade with a small receive buffer; it subscribes and never reads again.
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(srv.addr).await.unwrap();
    s.write_all(
        b"GET /api/harness/socket HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\
          sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    let head = read_until(&mut s, "\r\n\r\n", Duration::from_secs(5)).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // A masked text frame (client frames are masked, RFC 6455 5.3), mask 0.
    let sub = format!(r#"{{"type":"harness.subscribe","threadId":"{t}","v":2}}"#);
    let mut frame = vec![0x81, 0x80 | sub.len() as u8, 0, 0, 0, 0];
    frame.extend_from_slice(sub.as_bytes());
    s.write_all(&frame).await.unwrap();
    // Megabytes of events, more than the socket's buffers hold: its task is stuck in a
    // write once the turns are done.
    let big = "z".repeat(200_000);
    for i in 0..30 {
        let input = format!(r#"{{"op":"followUp","message":"{big}{i}"}}"#);
        let receipt = control(srv.addr, t, &input).await;
        assert!(!receipt.contains("rejected"), "{receipt}");
    }
    wait_idle(srv.addr, t).await;

    let began = Instant::now();
    let _ = srv.stop.send(());
    let report = tokio::time::timeout(grace * 5, srv.done)
        .await
        .expect("serve returns although the socket does not read")
        .unwrap();
    assert_eq!(report.open_at_shutdown, 1, "{report:?}");
    assert_eq!(report.ended_by_shutdown, 1, "{report:?}");
    assert!(began.elapsed() >= grace, "{:?}", began.elapsed());
    assert!(closed(&mut s).await, "the socket was not closed");
}

/// Waits (up to 60 s) until the thread has run every input.
async fn wait_idle(addr: SocketAddr, thread: &str) {
    for _ in 0..600 {
        let req = format!(
            "GET /api/harness/snapshot?threadId={thread} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        );
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out);
        if text.contains(r#""status":"idle""#) && text.contains(r#""waitingInputs":[]"#) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("thread {thread} never went idle");
}

/// Whether the peer closed: reading on gives the end (or a reset) within 10 s.
async fn closed(s: &mut TcpStream) -> bool {
    let mut buf = vec![0u8; 64 << 10];
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}
