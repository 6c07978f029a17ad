//! Chapter: harness-tanstack. One agent served as a TanStack harness host, sans-IO: a
//! `POST control` prompt, the `GET events` SSE bytes it produces, a client that reads them,
//! loses the connection, resumes from its cursor, and follows the gap procedure when the
//! host's memory evicted what it missed.

use std::time::Instant;

use futures::StreamExt;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::Cursor;
use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::client::{Client, ClientConfig, ClientEvent};
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::MemoryLog;

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    // A host whose memory keeps 12 events per thread, serving the echo agent.
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::new(12, 1 << 20)),
        Instant::now,
    );
    let mut pool = LocalPool::new();
    let agent = ToolLoopAgent::new("acme/assistant");
    pool.spawner().spawn_local(run_turns(
        svc.clone(),
        agent,
        ScriptedModel::echo(),
        Tools::new(),
    ))?;

    let body = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#;
    let answer = svc.control(None, body, "req-1", None);
    println!("  POST control -> {} {}", answer.status, answer.body);
    pool.run_until_stalled();

    // GET events with a client that stops after five frames (a dropped connection).
    let mut client = Client::new(ClientConfig::new("thread-1"));
    let (query, last_id) = client.connect_sse(Instant::now());
    println!("  GET events?{query}  (Last-Event-ID: {last_id:?})");
    let mut stream = svc
        .open_sse(
            Some("thread-1"),
            Some("2"),
            None,
            last_id.as_deref(),
            None,
            "req-2",
        )
        .map_err(|a| a.body)?;
    for _ in 0..5 {
        let Some(bytes) = pool.run_until(stream.next()) else {
            break;
        };
        for line in String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| !l.is_empty())
        {
            let cut: String = line.chars().take(110).collect();
            println!("    | {cut}");
        }
        client.handle_sse_bytes(Instant::now(), &bytes);
    }
    drop(stream);
    client.handle_close(Instant::now(), None);
    let cursor = client.last_cursor().cloned().unwrap_or_default();
    println!("  connection lost at cursor {cursor}; another turn runs meanwhile");
    svc.control(
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Are you there?"}}"#,
        "req-3",
        None,
    );
    pool.run_until_stalled();

    // Reconnect with Last-Event-ID: the host evicted events after our cursor, so the stream
    // starts with harness.gap, and the client turns it into an instruction.
    let mut client = Client::resume(ClientConfig::new("thread-1"), cursor);
    let (_, last_id) = client.connect_sse(Instant::now());
    let mut stream = svc
        .open_sse(
            Some("thread-1"),
            Some("2"),
            None,
            last_id.as_deref(),
            None,
            "req-4",
        )
        .map_err(|a| a.body)?;
    let mut text = String::new();
    while let Some(bytes) = pool.run_until(futures::future::poll_fn(|cx| {
        match stream.poll_next_unpin(cx) {
            std::task::Poll::Pending => std::task::Poll::Ready(None),
            other => other,
        }
    })) {
        client.handle_sse_bytes(Instant::now(), &bytes);
    }
    while let Some(ev) = client.poll_event() {
        match ev {
            ClientEvent::Gap(g) => println!(
                "  harness.gap from {} (reason {}): reload snapshot + transcript, continue after {}",
                g.from, g.reason, g.resume_at
            ),
            ClientEvent::Event(e) => {
                if let harness_tanstack::agui::Event::TextMessageContent(c) = &e.event {
                    text.push_str(&c.delta);
                }
            }
            _ => {}
        }
    }
    println!("  after the gap, the text streamed: {text:?}");
    let transcript = svc.transcript("thread-1", None, "req-5");
    println!("  GET transcript -> {}", transcript.body);
    println!(
        "  last cursor: {}",
        client.last_cursor().map(Cursor::as_str).unwrap_or("")
    );
    Ok(())
}
