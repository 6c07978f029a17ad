//! A virtual network between a sans-IO host and its clients: no sockets, no clock; and the
//! setup the host tests share.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod driver;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::host::{ConnId, Host, HostConfig, HostEvent, TurnOutcome, TurnRequest};
use harness_tanstack::http::StreamOptions;
use harness_tanstack::log::{EventLog, MemoryLog};
use serde_json::Value;

/// What one connection received, and whether it was closed.
#[derive(Debug, Default)]
pub struct Wire {
    pub received: VecDeque<Bytes>,
    pub closed: Option<u16>,
}

/// Drives a host: routes transmits to per-connection buffers (optionally without acking
/// them: a slow reader), and collects turns to start and cancels.
pub struct Net<L: EventLog> {
    pub host: Host<L>,
    pub now: Instant,
    pub wires: HashMap<ConnId, Wire>,
    pub turns: Vec<TurnRequest>,
    pub cancels: Vec<String>,
    /// Connections whose reader does not read: bytes stay unacknowledged.
    pub stalled: Vec<ConnId>,
    /// Connections whose writer is stuck: their wakes are ignored (no `poll_transmit`).
    pub deaf: Vec<ConnId>,
}

impl<L: EventLog> Net<L> {
    pub fn new(host: Host<L>) -> Self {
        Net {
            host,
            now: Instant::now(),
            wires: HashMap::new(),
            turns: Vec::new(),
            cancels: Vec::new(),
            stalled: Vec::new(),
            deaf: Vec::new(),
        }
    }

    /// Drains every host event and transmit (the str0m rule: after each mutation).
    pub fn pump(&mut self) {
        let now = self.now;
        while let Some(ev) = self.host.poll_event() {
            match ev {
                HostEvent::Wake(c) if self.deaf.contains(&c) => {}
                HostEvent::Wake(c) => {
                    while let Some(b) = self.host.poll_transmit(now, c) {
                        if !self.stalled.contains(&c) {
                            self.host.sent(now, c, b.len());
                        }
                        self.wires.entry(c).or_default().received.push_back(b);
                    }
                }
                HostEvent::Close { conn, code, .. } => {
                    self.wires.entry(conn).or_default().closed = Some(code);
                    self.host.disconnect(conn);
                }
                HostEvent::StartTurn(t) => self.turns.push(t),
                HostEvent::CancelTurn { operation_id, .. } => self.cancels.push(operation_id),
                _ => {}
            }
        }
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        if let Some(t) = self.host.poll_timeout() {
            if t <= self.now {
                self.host.handle_timeout(self.now);
            }
        }
        self.pump();
    }

    /// Everything a connection received, as text, and forgets it.
    pub fn take(&mut self, c: ConnId) -> Vec<String> {
        self.wires
            .get_mut(&c)
            .map(|w| {
                w.received
                    .drain(..)
                    .map(|b| String::from_utf8(b.to_vec()).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn closed(&self, c: ConnId) -> Option<u16> {
        self.wires.get(&c).and_then(|w| w.closed)
    }
}

/// The first prompt of `thread-1`, as the body of `POST control`.
pub const PROMPT: &[u8] = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}"#;

/// A host over a memory log, with the defaults.
pub fn net() -> Net<MemoryLog> {
    Net::new(Host::new(HostConfig::default(), MemoryLog::default()))
}

/// Parses JSON text.
pub fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

/// Runs the turn the host asked for: a text message, then completed.
pub fn reply<L: harness_tanstack::log::EventLog>(n: &mut Net<L>, text: &str) -> String {
    let t = n.turns.remove(0);
    let now = n.now;
    let op = t.operation_id.clone();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            AguiEvent::TextMessageStart(harness_tanstack::agui::TextMessageStart {
                message_id: format!("{op}-m"),
                ..Default::default()
            }),
        )
        .unwrap();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            AguiEvent::text_content(format!("{op}-m"), text),
        )
        .unwrap();
    n.host
        .emit(
            now,
            &t.thread_id,
            &op,
            AguiEvent::TextMessageEnd(harness_tanstack::agui::TextMessageEnd {
                message_id: format!("{op}-m"),
                ..Default::default()
            }),
        )
        .unwrap();
    n.host
        .finish_turn(now, &t.thread_id, &op, TurnOutcome::Completed)
        .unwrap();
    n.pump();
    op
}

/// The `data:` JSON of each SSE event received.
pub fn data_frames(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .filter_map(|t| t.lines().find_map(|l| l.strip_prefix("data: ")).map(json))
        .collect()
}

/// The default host configuration with this `sseQueueBytes`.
pub fn sse_cfg(sse_queue_bytes: f64) -> HostConfig {
    HostConfig {
        stream: StreamOptions {
            sse_queue_bytes: Some(sse_queue_bytes),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        ..HostConfig::default()
    }
}

/// The body of `POST control` with a prompt.
pub fn prompt(thread: &str, text: &str) -> Vec<u8> {
    serde_json::json!({ "threadId": thread, "input": { "op": "prompt", "message": text } })
        .to_string()
        .into_bytes()
}

/// The default host configuration under `membersOnly()`.
pub fn members() -> HostConfig {
    HostConfig {
        access: harness_tanstack::host::AccessPolicy::MembersOnly,
        ..HostConfig::default()
    }
}

/// A fresh folder for a durable log, named for the test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `GET events` of a thread as `user` (from the cursor `from`): the frames it sent at
/// once, or the status it was refused with.
pub fn events<L: EventLog>(
    n: &mut Net<L>,
    thread: &str,
    from: Option<&str>,
    user: Option<&str>,
) -> Result<Vec<Value>, u16> {
    let now = n.now;
    let c = n
        .host
        .open_sse(now, Some(thread), Some("2"), from, None, user, "r")
        .map_err(|a| a.status)?;
    n.pump();
    Ok(data_frames(&n.take(c)))
}

/// A WebSocket of `user` subscribed to a thread, and the frames it got at once.
pub fn socket<L: EventLog>(
    n: &mut Net<L>,
    user: Option<&str>,
    thread: &str,
) -> (harness_tanstack::host::ConnId, Vec<Value>) {
    let now = n.now;
    let c = n.host.connect(
        now,
        harness_tanstack::host::Transport::WebSocket,
        user,
        "up",
    );
    let sub = serde_json::json!({ "type": "harness.subscribe", "threadId": thread, "v": 2 });
    n.host.handle_frame(now, c, &sub.to_string());
    n.pump();
    let got = n.take(c).iter().map(|s| json(s)).collect();
    (c, got)
}

/// A host over a memory log, with this configuration.
pub fn net_with(cfg: HostConfig) -> Net<MemoryLog> {
    Net::new(Host::new(cfg, MemoryLog::default()))
}

/// A host over the durable log in `dir`, with this configuration.
pub fn durable(cfg: HostConfig, dir: &std::path::Path) -> Net<harness_tanstack::log::FileLog> {
    Net::new(Host::new(
        cfg,
        harness_tanstack::log::FileLog::open(dir).unwrap(),
    ))
}
