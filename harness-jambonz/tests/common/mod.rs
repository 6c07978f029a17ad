//! The setup shared by the tests: for the simulator, a `Simulator` driven with raw harness
//! frames on a virtual clock, with what it sent kept as JSON ([`Rig`]); for the harness side,
//! a started `HarnessCall` and the frames jambonz sends it ([`started`], [`turn`],
//! [`cancel`]), with what it emits drained ([`drain_events`], [`sent`]); for the driver,
//! [`driver`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

pub mod driver;
#[cfg(feature = "tokio")]
pub mod server;

use std::time::{Duration, Instant};

use harness_jambonz::harness_side::{CallEvent, HarnessCall, Transmit};
use harness_jambonz::simulator::{Line, Script, SimConfig, Simulator};
use serde_json::{Value, json};

pub struct Rig {
    pub sim: Simulator,
    pub t0: Instant,
    pub now: Instant,
    pub got: Vec<(u64, Value)>,
    pub closed: bool,
}

impl Rig {
    pub fn new(script: Script) -> Self {
        Self::with(SimConfig::default(), script, |s| s)
    }

    pub fn with(cfg: SimConfig, script: Script, f: impl FnOnce(Simulator) -> Simulator) -> Self {
        let t0 = Instant::now();
        let mut sim = f(Simulator::new(t0, cfg, script));
        sim.start(t0);
        let mut r = Rig {
            sim,
            t0,
            now: t0,
            got: Vec::new(),
            closed: false,
        };
        r.collect();
        r
    }

    pub fn ms(&self) -> u64 {
        self.now.duration_since(self.t0).as_millis() as u64
    }

    pub fn collect(&mut self) {
        while let Some(t) = self.sim.poll_transmit() {
            match t {
                Transmit::Text(s) => {
                    let at = self.ms();
                    self.got.push((at, serde_json::from_str(&s).unwrap()));
                }
                Transmit::Close { .. } => self.closed = true,
            }
        }
    }

    pub fn send(&mut self, v: Value) {
        self.sim.handle_frame(self.now, &v.to_string());
        self.collect();
    }

    /// Advances to `ms` after the start, firing every timer on the way.
    pub fn until(&mut self, ms: u64) {
        let end = self.t0 + Duration::from_millis(ms);
        while let Some(t) = self.sim.poll_timeout() {
            if t > end {
                break;
            }
            self.now = t.max(self.now);
            self.sim.handle_timeout(self.now);
            self.collect();
        }
        self.now = end.max(self.now);
        self.sim.handle_timeout(self.now);
        self.collect();
    }

    /// Frames of a type received so far.
    pub fn of(&self, ty: &str) -> Vec<&Value> {
        self.got
            .iter()
            .map(|(_, v)| v)
            .filter(|v| v["type"] == ty)
            .collect()
    }

    pub fn events(&self, name: &str) -> Vec<&Value> {
        self.of("event")
            .into_iter()
            .filter(|v| v["name"] == name)
            .collect()
    }

    pub fn chunk(&mut self, reply: &str, turn: Option<u64>, text: &str) {
        let mut v = json!({"type":"reply:chunk","reply_id":reply,"chunk":{"choices":[{"delta":{"content":text}}]}});
        if let Some(t) = turn {
            v["turn_id"] = t.into();
        }
        self.send(v);
    }

    pub fn done(&mut self, reply: &str, turn: Option<u64>) {
        let mut v = json!({"type":"reply:done","reply_id":reply});
        if let Some(t) = turn {
            v["turn_id"] = t.into();
        }
        self.send(v);
    }

    pub fn agent_lines(&self) -> Vec<(String, String, bool, u64)> {
        self.sim
            .transcript()
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Agent {
                    reply_id,
                    heard,
                    cut_off,
                    at_ms,
                    ..
                } => Some((reply_id.clone(), heard.clone(), *cut_off, *at_ms)),
                _ => None,
            })
            .collect()
    }
}

// ---- the harness side -------------------------------------------------------------

pub const START: &str = r#"{"type":"session:start","call_sid":"CA1","protocol":1,"from":"+1555","to":"+1666","direction":"inbound","language":"en-US","metadata":{},"tools":[]}"#;

pub fn turn(id: u64) -> String {
    json!({"type":"turn:start","call_sid":"CA1","turn_id":id,"input":{"type":"speech","text":"hi"}})
        .to_string()
}
pub fn cancel(id: u64) -> String {
    json!({"type":"turn:cancel","call_sid":"CA1","turn_id":id,"reason":"barge_in"}).to_string()
}

pub fn started() -> (HarnessCall, Instant) {
    let now = Instant::now();
    let mut c = HarnessCall::new();
    c.handle_frame(now, START).unwrap();
    (c, now)
}

pub fn drain_events(c: &mut HarnessCall) -> Vec<CallEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

pub fn sent(c: &mut HarnessCall) -> Vec<Value> {
    std::iter::from_fn(|| c.poll_transmit())
        .map(|t| match t {
            Transmit::Text(s) => serde_json::from_str(&s).unwrap(),
            Transmit::Close { code, reason } => json!({"close": code, "reason": reason}),
        })
        .collect()
}
