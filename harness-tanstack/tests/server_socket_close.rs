//! The WebSocket route's closes over loopback (feature `axum`): a client that breaks the
//! WebSocket protocol gets a close frame with the code of RFC 6455 7.4.1 before the TCP
//! connection ends (RFC 6455 7.1.7: "If _The WebSocket Connection is Established_ prior to
//! the point where the endpoint is required to _Fail the WebSocket Connection_, the
//! endpoint SHOULD send a Close frame with an appropriate status code (Section 7.4)"),
//! then the server ends the TCP connection (RFC 6455 7.1.1, "SHOULD be closed first by
//! the server"); a message that is not a valid frame is the host's `invalid_frame` and the
//! socket stays open (spec /work/shared/spec/tanstack-harness-wire-protocol.md:317,
//! `invalid_frame` … "The frame is not valid JSON …" | "Does the stream close? No.").
//!
//! The client is a raw TCP stream writing frames by hand, so that it can write what a
//! WebSocket library refuses to.
#![cfg(feature = "axum")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::server::{TanstackRouterConfig, TanstackServeConfig, drive, router, serve};
use harness_tanstack::{Host, HostConfig, MemoryLog, Service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The router's message limit in these tests.
const MAX: usize = 1024;

/// A server on loopback with a `MAX`-byte message limit; its address.
async fn start() -> SocketAddr {
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    );
    tokio::spawn(drive(
        svc.clone(),
        ToolLoopAgent::new("acme/assistant"),
        ScriptedModel::echo(),
        Tools::new(),
    ));
    let app = axum::Router::new().nest(
        "/api/harness",
        router(
            svc,
            TanstackRouterConfig::default().with_max_body_bytes(MAX),
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(
        listener,
        app,
        TanstackServeConfig::default(),
        std::future::pending(),
    ));
    addr
}

/// An upgraded raw connection.
async fn upgrade(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"GET /api/harness/socket HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\
          sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
            .await
            .expect("the upgrade answer within 5 s")
            .unwrap();
        assert_eq!(n, 1, "the server closed during the upgrade");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // RFC 6455 4.2.2: base64(SHA-1(key + GUID)) of the RFC's own example key.
    assert!(
        head.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    s
}

/// A client frame (masked, RFC 6455 5.3) with the first byte `b0`: FIN, RSV1-3, opcode.
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut f = vec![b0];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n <= 0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// What the server sent: its data frames (text) and its close code, if one came, and
/// whether the TCP connection ended afterwards.
#[derive(Debug, Default)]
struct Got {
    texts: Vec<String>,
    close: Option<u16>,
    ended: bool,
}

/// Reads server frames (unmasked) for up to `d`, until the close and the end of the TCP
/// connection, or `d` passes.
async fn read_frames(s: &mut TcpStream, d: Duration) -> Got {
    let end = tokio::time::Instant::now() + d;
    let mut got = Got::default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        // Every whole frame in the buffer.
        loop {
            if buf.len() < 2 {
                break;
            }
            let (len, at) = match buf[1] & 0x7f {
                126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
                127 if buf.len() >= 10 => (
                    u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
                    10,
                ),
                126 | 127 => break,
                n => (n as usize, 2),
            };
            if buf.len() < at + len {
                break;
            }
            let payload = buf[at..at + len].to_vec();
            match buf[0] & 0x0f {
                0x1 => got.texts.push(String::from_utf8(payload).unwrap()),
                0x8 => {
                    assert!(payload.len() >= 2, "a close without a code");
                    got.close = Some(u16::from_be_bytes([payload[0], payload[1]]));
                }
                _ => {}
            }
            buf.drain(..at + len);
        }
        match tokio::time::timeout_at(end, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                got.ended = true;
                return got;
            }
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => return got,
        }
    }
}

const SUBSCRIBE: &str = r#"{"type":"harness.subscribe","threadId":"t-close","v":2}"#;

/// Sends `bytes` on a fresh socket (after a subscribe when `subscribed`); what came back.
async fn send_raw(addr: SocketAddr, subscribed: bool, bytes: &[u8]) -> Got {
    let mut s = upgrade(addr).await;
    if subscribed {
        s.write_all(&frame(0x81, SUBSCRIBE.as_bytes()))
            .await
            .unwrap();
    }
    s.write_all(bytes).await.unwrap();
    read_frames(&mut s, Duration::from_secs(5)).await
}

/// Frames the WebSocket protocol does not allow: the close 1002 ("a protocol error"),
/// then the end of the TCP connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_the_protocol_forbids_get_1002() {
    let addr = start().await;
    let cases: [(&str, Vec<u8>); 7] = [
        // RFC 6455 5.2: RSV1 "MUST be 0 unless an extension is negotiated … the receiving
        // endpoint MUST _Fail the WebSocket Connection_".
        ("RSV1 set", frame(0xC1, SUBSCRIBE.as_bytes())),
        // RFC 6455 5.2: "If an unknown opcode is received, the receiving endpoint MUST
        // _Fail the WebSocket Connection_" (0x3 is a reserved data opcode).
        ("reserved opcode", frame(0x83, b"x")),
        // RFC 6455 5.4: a continuation with no message to continue.
        ("lone continuation", frame(0x80, b"x")),
        // RFC 6455 5.5: "All control frames MUST have a payload length of 125 bytes or
        // less and MUST NOT be fragmented."
        ("fragmented ping", frame(0x09, b"x")),
        // RFC 6455 5.4: a new data message inside a fragmented one.
        ("message inside a message", {
            let mut b = frame(0x01, b"{\"type\":");
            b.extend(frame(0x81, SUBSCRIBE.as_bytes()));
            b
        }),
        // RFC 6455 7.4.1: 1005 "MUST NOT be set as a status code in a Close control frame
        // by an endpoint"; the close answered is 1002.
        ("close with 1005", frame(0x88, &1005u16.to_be_bytes())),
        // RFC 6455 5.5.1: a close body, if any, starts with a two-byte code.
        ("close with a one-byte body", frame(0x88, &[3])),
    ];
    for (what, bytes) in cases {
        let got = send_raw(addr, true, &bytes).await;
        assert_eq!(got.close, Some(1002), "{what}: {got:?}");
        assert!(got.ended, "{what}: the TCP connection did not end: {got:?}");
    }
}

/// RFC 6455 8.1: "When an endpoint is to interpret a byte stream as UTF-8 but finds that
/// the byte stream is not, in fact, a valid UTF-8 stream, that endpoint MUST _Fail the
/// WebSocket Connection_"; 7.4.1: 1007, "non-UTF-8 [RFC3629] data within a text message".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_message_that_is_not_utf8_gets_1007() {
    let addr = start().await;
    let got = send_raw(addr, true, &frame(0x81, b"{\"type\":\"\xff\xfe\"}")).await;
    assert_eq!(got.close, Some(1007), "{got:?}");
    assert!(got.ended, "{got:?}");
    // Split over fragments, the check is on the whole message.
    let mut b = frame(0x01, b"{\"a\":\"\xe2\x82");
    b.extend(frame(0x80, b"\"}"));
    let got = send_raw(addr, false, &b).await;
    assert_eq!(got.close, Some(1007), "{got:?}");
}

/// RFC 6455 7.4.1: 1009, "a message that is too big for it to process": one frame over the
/// limit, and a message whose fragments add up past it. The rest of the big frame the
/// server does not read does not reset the connection before the close is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_the_limit_gets_1009() {
    let addr = start().await;
    let big = vec![b' '; MAX * 64];
    let got = send_raw(addr, true, &frame(0x81, &big)).await;
    assert_eq!(got.close, Some(1009), "{got:?}");
    assert!(got.ended, "{got:?}");

    let half = vec![b' '; MAX / 2 + 1];
    let mut b = frame(0x01, &half);
    b.extend(frame(0x00, &half));
    b.extend(frame(0x80, b"{}"));
    let got = send_raw(addr, true, &b).await;
    assert_eq!(got.close, Some(1009), "{got:?}");
    assert!(got.ended, "{got:?}");

    // Just under the limit is taken (an `invalid_frame`: spaces are not a frame).
    let fits = vec![b' '; MAX];
    let got = send_raw(addr, true, &frame(0x81, &fits)).await;
    assert_eq!(got.close, None, "{got:?}");
    assert!(!got.ended, "{got:?}");
}

/// Spec :317: a frame that "is not valid JSON" is `invalid_frame`, and the stream does not
/// close; so is a binary message that is not UTF-8 (JSON is UTF-8, RFC 8259 8.1). The
/// socket goes on: a subscribe after them gets its `harness.hello`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_json_is_invalid_frame_and_the_socket_stays() {
    let addr = start().await;
    let mut s = upgrade(addr).await;
    s.write_all(&frame(0x81, b"{not json")).await.unwrap();
    s.write_all(&frame(0x82, b"\xff\xfe\xfd")).await.unwrap();
    s.write_all(&frame(0x81, SUBSCRIBE.as_bytes()))
        .await
        .unwrap();
    let got = read_frames(&mut s, Duration::from_secs(2)).await;
    assert_eq!(got.close, None, "{got:?}");
    assert!(!got.ended, "{got:?}");
    let invalid = got
        .texts
        .iter()
        .filter(|t| t.contains(r#""code":"invalid_frame""#))
        .count();
    assert_eq!(invalid, 2, "{got:?}");
    assert!(
        got.texts.iter().any(|t| t.contains("harness.hello")),
        "{got:?}"
    );
}

/// The client's close gets its close back (RFC 6455 5.5.1: "the endpoint MUST send a Close
/// frame in response"), and then the server ends the TCP connection (7.1.1), although the
/// client keeps its end open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_close_is_answered_and_the_server_ends_tcp() {
    let addr = start().await;
    let got = send_raw(addr, true, &frame(0x88, &1000u16.to_be_bytes())).await;
    assert_eq!(got.close, Some(1000), "{got:?}");
    assert!(got.ended, "{got:?}");
    assert!(
        got.texts.iter().any(|t| t.contains("harness.hello")),
        "{got:?}"
    );
}
