//! A virtual network between a sans-IO host and its clients: no sockets, no clock.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness_tanstack::host::{ConnId, Host, HostEvent, TurnRequest};
use harness_tanstack::log::EventLog;

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
