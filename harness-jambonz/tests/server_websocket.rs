//! The server's WebSocket frames (RFC 6455) on loopback, after the upgrade: pings answered,
//! fragments joined, several frames in one read and one frame over several reads, a peer's
//! close echoed, and the frames a server must refuse closed with 1002 or 1007.
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::server::{Running, close_of, connect, start_call};
use futures::{SinkExt, StreamExt};
use harness_jambonz::server::JambonzServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};

const TURN: &str = r#"{"type":"turn:start","call_sid":"CA1","turn_id":2,"input":{"type":"speech","text":"open?"}}"#;
const START: &str = r#"{"type":"session:start","call_sid":"CA1","protocol":1}"#;

/// The next text frame, within 3 s.
async fn next_text(ws: &mut common::server::Ws) -> String {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(3), ws.next())
            .await
            .expect("a frame in time");
        match m {
            Some(Ok(WsMessage::Text(t))) => return t.as_str().to_owned(),
            Some(Ok(WsMessage::Pong(_) | WsMessage::Ping(_))) => continue,
            other => panic!("expected text, got {other:?}"),
        }
    }
}

/// RFC 6455 §5.5.2: "Upon receipt of a Ping frame, an endpoint MUST send a Pong frame in
/// response … with identical Application data"; §5.4: a fragmented message is one message,
/// and "Control frames MAY be injected in the middle of a fragmented message".
#[tokio::test]
async fn a_ping_gets_its_pong_and_fragments_make_one_message() {
    let server = Running::start(JambonzServerConfig::default()).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    start_call(&mut ws, "CA1").await;
    ws.send(WsMessage::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(3), ws.next())
        .await
        .unwrap();
    assert!(
        matches!(&pong, Some(Ok(WsMessage::Pong(p))) if p.as_ref() == b"are you there"),
        "{pong:?}"
    );
    // The turn in three fragments, a ping between the first two.
    let (a, rest) = TURN.split_at(20);
    let (b, c) = rest.split_at(30);
    let text = |s: &str, fin| Frame::message(s.as_bytes().to_vec(), OpCode::Data(Data::Text), fin);
    let cont =
        |s: &str, fin| Frame::message(s.as_bytes().to_vec(), OpCode::Data(Data::Continue), fin);
    ws.send(WsMessage::Frame(text(a, false))).await.unwrap();
    ws.send(WsMessage::Ping(b"mid".to_vec().into()))
        .await
        .unwrap();
    ws.send(WsMessage::Frame(cont(b, false))).await.unwrap();
    ws.send(WsMessage::Frame(cont(c, true))).await.unwrap();
    let first = next_text(&mut ws).await;
    assert!(
        first.contains("reply:chunk") && first.contains(r#""turn_id":2"#),
        "{first}"
    );
    drop(ws);
    server.stop().await;
}

/// §5.5.1: "If an endpoint receives a Close frame and did not previously send a Close frame,
/// the endpoint MUST send a Close frame in response", echoing the status code.
#[tokio::test]
async fn a_close_from_the_peer_is_echoed() {
    let server = Running::start(JambonzServerConfig::default()).await;
    let mut ws = connect(&server.url(), None).await.unwrap();
    start_call(&mut ws, "CA1").await;
    ws.send(WsMessage::Close(Some(CloseFrame {
        code: CloseCode::Away,
        reason: "bye".into(),
    })))
    .await
    .unwrap();
    assert_eq!(close_of(&mut ws).await.map(|c| c.0), Some(1001));
    let report = server.stop().await;
    assert_eq!(report.calls, 1);
}

/// The upgrade request of a raw client.
fn request(server: &Running) -> Vec<u8> {
    format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: harness.jambonz.org\r\n\r\n",
        server.addr
    )
    .into_bytes()
}

/// A raw socket, upgraded (the 101 read, up to its blank line).
async fn raw(server: &Running) -> TcpStream {
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(&request(server)).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(3), tcp.read_exact(&mut b))
            .await
            .unwrap()
            .unwrap();
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    tcp
}

/// A frame as a client sends it: masked (or not, to break the rule).
fn client_frame(opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mask = [0x11, 0x22, 0x33, 0x44];
    let mut out = vec![0x80 | opcode];
    let bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n @ 0..=125 => out.push(bit | n as u8),
        n => {
            out.push(bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

/// The server's next frame: its opcode and payload (server frames are not masked, §5.1).
async fn server_frame(tcp: &mut TcpStream) -> (OpCode, Vec<u8>) {
    let mut buf = Vec::new();
    loop {
        let mut cursor = std::io::Cursor::new(&buf);
        if let Some((header, len)) = FrameHeader::parse(&mut cursor).unwrap() {
            let at = cursor.position() as usize;
            if buf.len() >= at + len as usize {
                assert!(header.mask.is_none(), "a server frame is never masked");
                return (header.opcode, buf[at..at + len as usize].to_vec());
            }
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the server closed the connection without a frame");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The close code of the server's next frame, which must be a close.
async fn close_code(tcp: &mut TcpStream) -> u16 {
    let (op, body) = server_frame(tcp).await;
    assert_eq!(op, OpCode::Control(tungstenite_close()));
    u16::from_be_bytes([body[0], body[1]])
}

fn tungstenite_close() -> tokio_tungstenite::tungstenite::protocol::frame::coding::Control {
    tokio_tungstenite::tungstenite::protocol::frame::coding::Control::Close
}

/// Several frames in one write are each read; a frame split across writes waits for its
/// rest. Bytes sent with the upgrade request, before the 101, are refused (RFC 6455 §4.1:
/// the client "MUST wait for a response from the server before sending any further data").
#[tokio::test]
async fn frames_in_one_write_and_a_frame_over_two() {
    let server = Running::start(JambonzServerConfig::default()).await;
    let mut tcp = raw(&server).await;
    let mut both = client_frame(1, START.as_bytes(), true);
    both.extend(client_frame(1, TURN.as_bytes(), true));
    tcp.write_all(&both).await.unwrap();
    let (op, body) = server_frame(&mut tcp).await;
    assert_eq!(op, OpCode::Data(Data::Text));
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("reply:chunk") && text.contains(r#""turn_id":2"#),
        "{text}"
    );
    drop(tcp);

    let mut tcp = raw(&server).await;
    tcp.write_all(&client_frame(1, START.as_bytes(), true))
        .await
        .unwrap();
    let turn = client_frame(1, TURN.replace("CA1", "CA2").as_bytes(), true);
    tcp.write_all(&turn[..5]).await.unwrap();
    tcp.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    tcp.write_all(&turn[5..]).await.unwrap();
    let (_, body) = server_frame(&mut tcp).await;
    assert!(String::from_utf8(body).unwrap().contains("reply:chunk"));
    drop(tcp);

    let mut early = TcpStream::connect(server.addr).await.unwrap();
    let mut bytes = request(&server);
    bytes.extend(client_frame(1, START.as_bytes(), true));
    early.write_all(&bytes).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), early.read_to_end(&mut got)).await;
    assert!(
        !got.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    server.stop().await;
}

/// §5.1: "The server MUST close the connection upon receiving a frame that is not masked"
/// (1002); §5.2: RSV bits set without an extension (1002); §8.1: text that is not UTF-8,
/// "the endpoint MUST _Fail the WebSocket Connection_" (1007).
#[tokio::test]
async fn frames_a_server_must_refuse_close_the_socket() {
    let server = Running::start(JambonzServerConfig::default()).await;
    let start = client_frame(1, START.as_bytes(), true);
    let mut rsv = client_frame(1, b"{}", true);
    rsv[0] |= 0x40;
    let cases = [
        (client_frame(1, b"{}", false), 1002),
        (rsv, 1002),
        (client_frame(1, &[b'"', 0xff, b'"'], true), 1007),
    ];
    for (frame, code) in cases {
        let mut tcp = raw(&server).await;
        tcp.write_all(&start).await.unwrap();
        tcp.write_all(&frame).await.unwrap();
        assert_eq!(close_code(&mut tcp).await, code);
    }
    server.stop().await;
}
