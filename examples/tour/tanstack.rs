//! Chapter: harness-tanstack. One agent served as a TanStack harness host, sans-IO: a
//! `POST control` prompt, the `GET events` SSE bytes it produces, a client that reads them,
//! loses the connection, resumes from its cursor, and follows the gap procedure when the
//! host's memory evicted what it missed. It ends with the FAQ agent's gated refund: the run
//! ends waiting for an approval, and a `resolve` input drives the turn again, the refund
//! running once.

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

use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};

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
    for bytes in ready_bytes(&mut pool, &mut stream) {
        client.handle_sse_bytes(Instant::now(), &bytes);
    }
    while let Some(ev) = client.poll_event() {
        match ev {
            ClientEvent::Gap(g) => println!(
                "  harness.gap from {} (reason {}): reload snapshot + transcript, continue after {}",
                g.from, g.reason, g.resume_at
            ),
            ClientEvent::Event(e) => {
                if let harness_tanstack::agui::AguiEvent::TextMessageContent(c) = &e.event {
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
    gated_refund()
}

/// What a stream has ready now (it does not wait for more).
fn ready_bytes(
    pool: &mut LocalPool,
    stream: &mut (impl futures::Stream<Item = bytes::Bytes> + Unpin),
) -> Vec<bytes::Bytes> {
    let mut out = Vec::new();
    while let Some(b) = pool.run_until(futures::future::poll_fn(|cx| {
        match stream.poll_next_unpin(cx) {
            std::task::Poll::Pending => std::task::Poll::Ready(None),
            other => other,
        }
    })) {
        out.push(b);
    }
    out
}

/// The events of `thread` so far: `(type or CUSTOM name, event)`.
fn thread_events(
    svc: &Service<MemoryLog>,
    pool: &mut LocalPool,
    thread: &str,
) -> Result<Vec<(String, serde_json::Value)>, Box<dyn std::error::Error>> {
    let mut stream = svc
        .open_sse(Some(thread), Some("2"), None, None, None, "req-r")
        .map_err(|a| a.body)?;
    let mut out = Vec::new();
    for bytes in ready_bytes(pool, &mut stream) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Some(data) = text.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        let frame: serde_json::Value = serde_json::from_str(data)?;
        let event = frame["event"].clone();
        let name = event["name"].as_str().or(event["type"].as_str());
        if let Some(name) = name {
            out.push((name.to_owned(), event));
        }
    }
    Ok(out)
}

/// The tour's FAQ agent (`harness_core::agent::faq`), as the `tanstack_host` example serves it, its tools one registry for the agent and the
/// host: the refund is gated, so the run ends waiting for an approval (`harness.wait.opened`
/// kind `approval`, the interrupt in `RUN_FINISHED`), and nothing ran; the `resolve` input
/// drives the turn again (`parentRunId`), and the refund runs once.
fn gated_refund() -> Result<(), Box<dyn std::error::Error>> {
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    );
    let mut pool = LocalPool::new();
    let refunds = Refunds::default();
    let tools = faq_tools(&refunds);
    let agent = FaqAgent::new();
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, faq_model(), tools))?;
    let body = br#"{"threadId":"shop","input":{"op":"prompt","message":"Please refund order 42"}}"#;
    svc.control(None, body, "req-r1", None);
    pool.run_until_stalled();
    let events = thread_events(&svc, &mut pool, "shop")?;
    let Some((_, wait)) = events.iter().find(|(n, _)| n == "harness.wait.opened") else {
        return Err("the refund opened no wait".into());
    };
    let wait_id = wait["value"]["waitId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    println!("  refund: harness.wait.opened {}", wait["value"]);
    if let Some((_, fin)) = events.iter().find(|(n, _)| n == "RUN_FINISHED") {
        println!("  RUN_FINISHED outcome {}", fin["outcome"]);
    }
    println!("  the refund ran {} times so far", refunds.count());
    let resolve = serde_json::json!({"threadId": "shop", "input": {"op": "resolve",
        "resume": [{"interruptId": wait_id, "status": "resolved", "payload": {"approved": true}}]}});
    let answer = svc.control(None, resolve.to_string().as_bytes(), "req-r2", None);
    println!("  POST control resolve -> {}", answer.body);
    pool.run_until_stalled();
    let events = thread_events(&svc, &mut pool, "shop")?;
    let mut said = String::new();
    for (name, ev) in &events {
        match name.as_str() {
            "RUN_STARTED" if ev.get("parentRunId").is_some() => println!(
                "  RUN_STARTED {} (parentRunId {}): the turn, driven again",
                ev["runId"], ev["parentRunId"]
            ),
            "TOOL_CALL_RESULT" => println!("  TOOL_CALL_RESULT {}", ev["content"]),
            "TEXT_MESSAGE_CONTENT" => said.push_str(ev["delta"].as_str().unwrap_or_default()),
            _ => {}
        }
    }
    println!("  the agent said: {said:?}");
    let ran = refunds.count();
    println!("  the refund ran {ran} time(s)");
    if ran != 1 {
        return Err(format!("the refund ran {ran} times").into());
    }
    Ok(())
}
