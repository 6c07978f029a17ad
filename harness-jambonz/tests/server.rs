//! The server adapter (feature `tokio`) on loopback: a whole call, the upgrade refusals (401,
//! 400, 503 past the cap), the handshake timeout against a client that trickles its
//! request, the `session:start` deadline, the message limit, the graceful shutdown, and the
//! accept loop under a low descriptor limit (a subprocess with `ulimit -n`).
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{
    Running, assert_short_call_passed, close_of, connect, short_call, start_call,
};
use futures::SinkExt;
use harness_jambonz::client::{Caller, ClientError};
use harness_jambonz::server::JambonzServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

#[tokio::test]
async fn a_whole_call_over_a_socket() {
    let server = Running::start(JambonzServerConfig::default().with_secret("s3cret")).await;
    let t = Caller::new()
        .with_secret("s3cret")
        .call(&server.url(), short_call())
        .await
        .unwrap();
    assert_short_call_passed(&t);
    let report = server.stop().await;
    assert_eq!((report.accepted, report.calls), (1, 1));
}

/// "A harness that requires one should refuse the upgrade with HTTP 401"; a client that does
/// not offer the subprotocol gets 400.
#[tokio::test]
async fn the_upgrade_check_refuses_with_401_and_400() {
    let server = Running::start(JambonzServerConfig::default().with_secret("s3cret")).await;
    let no_secret = Caller::new().call(&server.url(), short_call()).await;
    assert_eq!(no_secret.unwrap_err(), ClientError::Refused { status: 401 });
    let wrong = Caller::new()
        .with_secret("nope")
        .call(&server.url(), short_call())
        .await;
    assert_eq!(wrong.unwrap_err(), ClientError::Refused { status: 401 });
    // No Sec-WebSocket-Protocol: a plain WebSocket client.
    let req = tokio_tungstenite::tungstenite::http::Request::builder()
        .uri(server.url())
        .header("host", server.addr.to_string())
        .header("authorization", "Bearer s3cret")
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .body(())
        .unwrap();
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 400),
        other => panic!("{other:?}"),
    }
    let report = server.stop().await;
    assert_eq!(
        (report.refused_unauthorized, report.refused_bad_request),
        (2, 1)
    );
    assert_eq!(report.calls, 0);
}

/// Past `max_calls` calls in progress the upgrade is refused with 503; once a call ends, a
/// new one is served.
#[tokio::test]
async fn the_cap_refuses_the_call_past_it() {
    let server = Running::start(JambonzServerConfig::default().with_max_calls(2)).await;
    let url = server.url();
    let mut first = connect(&url, None).await.unwrap();
    start_call(&mut first, "CA1").await;
    let mut second = connect(&url, None).await.unwrap();
    start_call(&mut second, "CA2").await;
    assert_eq!(connect(&url, None).await.unwrap_err(), "HTTP 503");

    // The first call ends: its slot is free again.
    let end = r#"{"type":"session:end","call_sid":"CA1","reason":"caller_hangup"}"#;
    first.send(WsMessage::text(end)).await.unwrap();
    assert_eq!(close_of(&mut first).await.map(|c| c.0), Some(1000));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut third = loop {
        match connect(&url, None).await {
            Ok(ws) => break ws,
            Err(e) if Instant::now() < deadline => {
                assert_eq!(e, "HTTP 503");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no call after one ended: {e}"),
        }
    };
    start_call(&mut third, "CA3").await;
    drop((second, third));
    let report = server.stop().await;
    assert!(report.refused_busy >= 1);
    assert_eq!(report.calls, 3);
}

/// A client that trickles its HTTP upgrade request, a byte at a time, is dropped at the
/// handshake timeout; a real call on the same server meanwhile is served.
#[tokio::test]
async fn a_trickling_client_is_dropped_in_time_while_a_call_works() {
    let config = JambonzServerConfig::default().with_handshake_timeout(Duration::from_millis(600));
    let server = Running::start(config).await;
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        let request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for b in request {
            if slow.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            // Dropped: the server closed its end (the next read sees the end, or a reset).
            let mut buf = [0u8; 64];
            if let Ok(Ok(0) | Err(_)) =
                tokio::time::timeout(Duration::from_millis(1), slow.read(&mut buf)).await
            {
                break;
            }
        }
        started.elapsed()
    });
    // Meanwhile a real call goes through.
    let t = Caller::new()
        .call(&server.url(), short_call())
        .await
        .unwrap();
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    let dropped_after = trickle.await.unwrap();
    assert!(
        dropped_after >= Duration::from_millis(500) && dropped_after < Duration::from_millis(2_000),
        "dropped after {dropped_after:?}"
    );
    let report = server.stop().await;
    assert_eq!(report.handshake_timeouts, 1);
    assert_eq!(report.calls, 1);
}

/// No `session:start` within the deadline after the upgrade: closed with 1008.
#[tokio::test]
async fn a_socket_without_session_start_is_closed() {
    let config =
        JambonzServerConfig::default().with_session_start_timeout(Duration::from_millis(300));
    let server = Running::start(config).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    let t0 = Instant::now();
    let close = tokio::time::timeout(Duration::from_secs(3), close_of(&mut ws))
        .await
        .unwrap();
    assert_eq!(close.map(|c| c.0), Some(1008));
    assert!(t0.elapsed() >= Duration::from_millis(250));
    // A call that started in time is not closed at the deadline.
    let mut ok = connect(&server.url(), None).await.unwrap();
    start_call(&mut ok, "CA2").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let turn = r#"{"type":"turn:start","call_sid":"CA2","turn_id":2,"input":{"type":"speech","text":"open?"}}"#;
    ok.send(WsMessage::text(turn)).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(3), futures::StreamExt::next(&mut ok))
        .await
        .unwrap();
    assert!(matches!(next, Some(Ok(WsMessage::Text(t))) if t.contains("reply:chunk")));
    drop(ok);
    let report = server.stop().await;
    assert_eq!(report.no_session_start, 1);
}

/// A message over `max_message_bytes`: closed with 1009.
#[tokio::test]
async fn a_message_over_the_limit_closes_the_socket() {
    let server = Running::start(JambonzServerConfig::default().with_max_message_bytes(1024)).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    start_call(&mut ws, "CA1").await;
    let big = format!(
        r#"{{"type":"transcript","call_sid":"CA1","turn_id":2,"text":"{}"}}"#,
        "a".repeat(2000)
    );
    ws.send(WsMessage::text(big)).await.unwrap();
    assert_eq!(close_of(&mut ws).await.map(|c| c.0), Some(1009));
    server.stop().await;
}

/// Shutdown: the listener closes at once; a call that ends within the grace period ends as
/// usual, and `serve` returns as soon as it has.
#[tokio::test]
async fn a_call_finishes_within_the_grace_period() {
    let config = JambonzServerConfig::default().with_shutdown_grace(Duration::from_secs(30));
    let mut server = Running::start(config).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    start_call(&mut ws, "CA1").await;
    server.begin_stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tokio::net::TcpStream::connect(server.addr).await.is_err());
    // The call goes on: a turn, then the caller hangs up.
    let turn = r#"{"type":"turn:start","call_sid":"CA1","turn_id":2,"input":{"type":"speech","text":"open?"}}"#;
    ws.send(WsMessage::text(turn)).await.unwrap();
    let next = futures::StreamExt::next(&mut ws).await;
    assert!(matches!(next, Some(Ok(WsMessage::Text(t))) if t.contains("reply:chunk")));
    let end = r#"{"type":"session:end","call_sid":"CA1","reason":"caller_hangup"}"#;
    ws.send(WsMessage::text(end)).await.unwrap();
    let report = server.ended_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!((report.calls, report.ended_by_shutdown), (1, 0));
}

/// Shutdown: a call still in progress after the grace period is closed with 1001.
#[tokio::test]
async fn a_call_past_the_grace_period_is_closed() {
    let config = JambonzServerConfig::default().with_shutdown_grace(Duration::from_millis(300));
    let mut server = Running::start(config).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    start_call(&mut ws, "CA1").await;
    let t0 = Instant::now();
    server.begin_stop();
    let close = tokio::time::timeout(Duration::from_secs(3), close_of(&mut ws))
        .await
        .unwrap();
    assert_eq!(close.map(|c| c.0), Some(1001));
    assert!(t0.elapsed() >= Duration::from_millis(250));
    let report = server.ended_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(report.ended_by_shutdown, 1);
}

/// The child of [`the_accept_loop_pauses_when_out_of_descriptors`], run under `ulimit -n 64`
/// (it does nothing in an ordinary test run): a server on a loopback port, printed on
/// stdout, until stdin closes; then its report.
#[tokio::test]
async fn fd_limit_child() {
    if std::env::var_os("HARNESS_JAMBONZ_FD_CHILD").is_none() {
        return;
    }
    let config = JambonzServerConfig::default().with_handshake_timeout(Duration::from_secs(60));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("port {}", listener.local_addr().unwrap().port());
    let stop = async {
        let mut buf = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut buf).await;
    };
    let (agent, model) = common::server::agent();
    let server = harness_jambonz::server::JambonzServer::new(config);
    let report = server
        .serve(listener, agent, model, harness_core::Tools::new(), stop)
        .await;
    println!("accept_pauses {}", report.accept_pauses);
}

/// CPU time (user + system) of a process, from /proc.
#[cfg(target_os = "linux")]
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (in parentheses): utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    let tck = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Duration::from_millis((f[0] + f[1]) * 1000 / tck)
}

/// With 64 descriptors, a flood of connections runs the server out of them (`EMFILE`): the
/// accept loop pauses instead of spinning a core, and once the flood stops a real call is
/// served.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_accept_loop_pauses_when_out_of_descriptors() {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 64 && exec "$0" --exact fd_limit_child --nocapture --test-threads 1"#)
        .arg(&exe)
        .env("HARNESS_JAMBONZ_FD_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let port = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended");
        // After libtest's "test fd_limit_child ... " on the same line.
        if let Some((_, p)) = line.trim().rsplit_once("port ") {
            break p.parse::<u16>().unwrap();
        }
    };
    let addr = format!("127.0.0.1:{port}");

    // The flood: more connections than the server has descriptors, each holding one.
    let mut flood = Vec::new();
    for _ in 0..120 {
        if let Ok(s) = tokio::net::TcpStream::connect(&addr).await {
            flood.push(s);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_time(child.id());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spent = cpu_time(child.id()) - before;
    // A loop spinning on EMFILE burns the whole second; pausing, it uses a few ms.
    assert!(
        spent < Duration::from_millis(300),
        "{spent:?} of CPU in 1 s"
    );

    // The flood stops; a real call is served (the freed descriptors first go to the flood's
    // connections still in the backlog, which end at once).
    drop(flood);
    let url = format!("ws://{addr}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let t = loop {
        match Caller::new()
            .with_connect_timeout(Duration::from_secs(2))
            .call(&url, short_call())
            .await
        {
            Ok(t) => break t,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no call after the flood: {e}"),
        }
    };
    assert!(t.problems().is_empty(), "{:?}", t.problems());

    drop(child.stdin.take());
    let mut rest = String::new();
    line.clear();
    while out.read_line(&mut line).unwrap_or(0) > 0 {
        rest.push_str(&line);
        line.clear();
    }
    let _ = child.wait();
    let pauses: u64 = rest
        .lines()
        .find_map(|l| l.trim().rsplit_once("accept_pauses ").map(|(_, n)| n))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(pauses > 0, "the accept loop never paused: {rest}");
    let _ = std::io::stdout().flush();
}
