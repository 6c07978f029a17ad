//! The server rig: a [`UhpServer`] on a virtual clock, two principals, requests in and
//! responses out, turns run by hand (no network, no runtime).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_core::message::{JsonObject, ToolCall, ToolResult};
use harness_uhp::server::{
    Base, Now, Principal, Reply, Request, ServerEvent, StreamId, StreamPoll, TurnEnd, UhpServer,
    UhpServerConfig, UhpTurnRequest, Wake,
};
use harness_uhp::{StreamDecoder, StreamEvent};
use http::HeaderMap;
use serde_json::{Value, json};

/// Alice's token.
pub const ALICE: &str = "alice-token";
/// Bob's token.
pub const BOB: &str = "bob-token";

/// An answer, read.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// What a request was answered with, before its body is complete.
pub enum Got {
    Now(Answer),
    Stream(Answer, StreamId),
    Wait(harness_uhp::server::WaitId),
}

impl Got {
    pub fn now(self) -> Answer {
        match self {
            Got::Now(a) => a,
            Got::Stream(..) => panic!("a stream, not a whole answer"),
            Got::Wait(_) => panic!("a wait, not a whole answer"),
        }
    }
}

pub struct Rig {
    pub server: UhpServer,
    pub t0: Instant,
    pub elapsed: Duration,
    /// Events the rig set aside while reading: turns to run, stops, records.
    pub turns: Vec<UhpTurnRequest>,
    pub stops: Vec<String>,
    pub wakes: Vec<Wake>,
    pub records: Vec<harness_uhp::server::StoreRecord>,
}

pub fn config() -> UhpServerConfig {
    let mut c = UhpServerConfig::new(
        vec![
            Base {
                base: "faq".into(),
                label: "FAQ".into(),
            },
            Base {
                base: "echo".into(),
                label: "Echo".into(),
            },
        ],
        vec!["scripted".into(), "scripted-large".into()],
    );
    c.keep_alive = Duration::from_secs(15);
    c
}

impl Rig {
    pub fn new() -> Rig {
        Rig::with(config())
    }

    pub fn with(cfg: UhpServerConfig) -> Rig {
        let mut server = UhpServer::new(cfg);
        server.add_api_key(ALICE, Principal::new("alice"));
        server.add_api_key(BOB, Principal::new("bob"));
        Rig {
            server,
            t0: Instant::now(),
            elapsed: Duration::ZERO,
            turns: Vec::new(),
            stops: Vec::new(),
            wakes: Vec::new(),
            records: Vec::new(),
        }
    }

    pub fn now(&self) -> Now {
        Now::new(
            self.t0 + self.elapsed,
            1_786_400_000_000 + self.elapsed.as_millis() as i64,
        )
    }

    pub fn advance(&mut self, d: Duration) {
        self.elapsed += d;
        let now = self.now();
        self.server.handle_timeout(now);
        self.drain();
    }

    /// Drains the machine's events into the rig's lists.
    pub fn drain(&mut self) {
        while let Some(ev) = self.server.poll_event() {
            match ev {
                ServerEvent::StartTurn(t) => self.turns.push(*t),
                ServerEvent::StopTurn { response_id } => self.stops.push(response_id),
                ServerEvent::Wake(w) => self.wakes.push(w),
                ServerEvent::Persist(r) => self.records.push(*r),
                _ => {}
            }
        }
    }

    pub fn send_with(
        &mut self,
        method: &str,
        target: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Got {
        let now = self.now();
        let reply = self
            .server
            .handle_request(now, &Request::new(method, target, headers, body));
        self.drain();
        match reply {
            Reply::Full(r) => {
                let (p, b) = r.into_parts();
                Got::Now(Answer {
                    status: p.status.as_u16(),
                    headers: p.headers,
                    body: b,
                })
            }
            Reply::Stream(head, id) => {
                let (p, ()) = head.into_parts();
                Got::Stream(
                    Answer {
                        status: p.status.as_u16(),
                        headers: p.headers,
                        body: Vec::new(),
                    },
                    id,
                )
            }
            Reply::Wait(w) => Got::Wait(w),
        }
    }

    pub fn send_as(&mut self, token: &str, method: &str, target: &str, body: Option<Value>) -> Got {
        let mut h = HeaderMap::new();
        h.insert("authorization", format!("Bearer {token}").parse().unwrap());
        h.insert("content-type", "application/json".parse().unwrap());
        let body = body
            .map(|b| serde_json::to_vec(&b).unwrap())
            .unwrap_or_default();
        self.send_with(method, target, &h, &body)
    }

    /// Alice's request, answered now.
    pub fn call(&mut self, method: &str, target: &str, body: Option<Value>) -> Answer {
        self.send_as(ALICE, method, target, body).now()
    }

    /// Creates a task as Alice (background, so it answers at once); returns its id and turn.
    pub fn start(&mut self, body: Value) -> (String, UhpTurnRequest) {
        let mut body = body;
        body["background"] = json!(true);
        let a = self.call("POST", "/v1/responses", Some(body));
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        let id = a.json()["id"].as_str().unwrap().to_owned();
        let turn = self.take_turn(&id);
        (id, turn)
    }

    pub fn take_turn(&mut self, id: &str) -> UhpTurnRequest {
        let i = self
            .turns
            .iter()
            .position(|t| t.response_id == id)
            .expect("a turn for the task");
        self.turns.remove(i)
    }

    pub fn text(&mut self, id: &str, delta: &str) {
        let now = self.now();
        self.server.turn_text(now, id, delta).unwrap();
        self.drain();
    }

    pub fn end(&mut self, id: &str) {
        let now = self.now();
        self.server.turn_end(now, id, TurnEnd::Completed);
        self.drain();
    }

    pub fn tool(&mut self, id: &str, call_id: &str, name: &str) {
        let now = self.now();
        let call = ToolCall::new(call_id, name, JsonObject::new());
        self.server.turn_tool_call(now, id, &call).unwrap();
        self.server
            .turn_tool_result(now, id, &ToolResult::ok_json(call_id, json!({"ok": true})))
            .unwrap();
        self.drain();
    }

    /// A whole task: created, `text` streamed, completed; its final response.
    pub fn task(&mut self, body: Value, text: &str) -> Value {
        let (id, _) = self.start(body);
        self.text(&id, text);
        self.end(&id);
        self.call("GET", &format!("/v1/responses/{id}"), None)
            .json()
    }

    /// Everything the stream holds now.
    pub fn read_stream(&mut self, id: StreamId) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        loop {
            match self.server.poll_stream(id) {
                StreamPoll::Data(b) => out.extend(b),
                StreamPoll::Pending => return (out, false),
                StreamPoll::End => return (out, true),
            }
        }
    }
}

/// The events of an SSE body, decoded by harness-uhp's own client decoder.
pub fn decode(body: &[u8]) -> Vec<StreamEvent> {
    let mut dec = StreamDecoder::new();
    dec.push(body);
    let mut out = Vec::new();
    while let Ok(Some(ev)) = dec.poll_event() {
        out.push(ev);
    }
    out
}

/// The events as JSON values.
pub fn values(body: &[u8]) -> Vec<Value> {
    decode(body).iter().map(StreamEvent::to_value).collect()
}
