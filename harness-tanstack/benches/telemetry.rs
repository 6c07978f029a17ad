//! What the telemetry costs, counted in instructions under callgrind (stabler than time on
//! a shared machine): each mode runs a hot path a fixed number of times, and
//! `scripts/bench/telemetry.sh` runs it at two counts in two builds of this binary — the
//! default one (`tracing` call sites and the `metrics` feature compiled in, no subscriber,
//! no recorder) and one with neither (`--no-default-features --features
//! tracing/max_level_off`) — and prints the instructions per iteration of each, and their
//! ratio.
//!
//! Modes (`telemetry MODE N`):
//! - `sse`: `harness.event` frames read from SSE bytes (4 KiB chunks) into typed frames;
//! - `encode`: one `harness.event` record rendered (its SSE, WebSocket and NDJSON forms);
//! - `fanout`: one event emitted on a thread with 100 subscribers, each taking its bytes;
//! - `turn`: one whole turn (prompt, a tool call, a streamed reply) through the driver;
//! - `turn-fmt`: the same under a `tracing-subscriber` fmt layer (spans and their close
//!   events at `info`, written to nowhere): the cost of a turn with a subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::ToolResult;
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::frame::HostFrame;
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::{LogRecord, MemoryLog};
use harness_tanstack::transport::SseFrameDecoder;

fn sse_stream(events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        let delta = format!("word {i} of the café ☃ ");
        let ev = AguiEvent::text_content("op-17-msg-1", delta);
        out.extend_from_slice(&LogRecord::render("thread-1", (i + 1) as u64, "op-17", &ev).sse());
    }
    out
}

fn sse(n: usize) {
    let wire = sse_stream(100);
    for _ in 0..n {
        let mut dec = SseFrameDecoder::new();
        let mut count = 0;
        for c in wire.chunks(4096) {
            dec.push(c);
            while let Some(f) = dec.poll_frame().unwrap() {
                if let HostFrame::Event(e) = f {
                    count += usize::from(matches!(e.event, AguiEvent::TextMessageContent(_)));
                }
            }
        }
        black_box(count);
    }
}

fn encode(n: usize) {
    let ev = AguiEvent::text_content("op-1-msg-1", "Hello, wörld ☃ ");
    for i in 0..n {
        let rec = LogRecord::render("thread-1", i as u64 + 1, "op-1", black_box(&ev));
        black_box((rec.sse().len(), rec.json().len(), rec.ndjson().len()));
    }
}

fn fanout(n: usize) {
    let now = Instant::now();
    let mut host = Host::new(HostConfig::default(), MemoryLog::new(64, 1 << 20));
    let conns: Vec<_> = (0..100)
        .map(|_| {
            host.open_sse(now, Some("thread-1"), Some("2"), None, None, None, "r")
                .unwrap()
        })
        .collect();
    for &c in &conns {
        while host.poll_transmit(now, c).is_some() {}
    }
    let ev = AguiEvent::text_content("op-1-msg-1", "Hello, wörld ☃ ");
    for _ in 0..n {
        host.emit(now, "thread-1", "op-1", ev.clone()).unwrap();
        let mut total = 0;
        for &c in &conns {
            let bytes = host.poll_transmit(now, c).unwrap();
            total += bytes.len();
            host.sent(now, c, bytes.len());
        }
        while host.poll_event().is_some() {}
        black_box(total);
    }
}

fn turns(n: usize) {
    let tools = Tools::new().with(Tool::sync("get_weather", "weather", |call| {
        ToolResult::ok_json(&call.id, serde_json::json!({"celsius": 21}))
    }));
    let agent = ToolLoopAgent::new("weather").with_tools(&tools);
    let mut model = ScriptedModel::new();
    for _ in 0..n {
        model = model
            .tool_call("get_weather", serde_json::json!({"city": "Paris"}))
            .reply("Sunny in Paris, twenty-one degrees, a light wind from the west.");
    }
    let service = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    );
    let mut pool = LocalPool::new();
    pool.spawner()
        .spawn_local(run_turns(service.clone(), agent, model, tools))
        .unwrap();
    for i in 0..n {
        let body = format!(
            r#"{{"threadId":"thread-{}","input":{{"op":"prompt","message":"Weather?"}}}}"#,
            i % 8
        );
        let a = service.control(None, body.as_bytes(), "req", None);
        assert_eq!(a.status, 200);
        pool.run_until_stalled();
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "fanout".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    match mode.as_str() {
        "sse" => sse(n),
        "encode" => encode(n),
        "fanout" => fanout(n),
        "turn" => turns(n),
        "turn-fmt" => {
            let subscriber = tracing_subscriber::fmt()
                .with_writer(std::io::sink)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
                .with_max_level(tracing::Level::INFO)
                .finish();
            tracing::subscriber::with_default(subscriber, || turns(n));
        }
        // `cargo bench` passes `--bench`: a quick run of every mode.
        _ => {
            for (name, f) in [
                ("sse", sse as fn(usize)),
                ("encode", encode),
                ("fanout", fanout),
                ("turn", turns),
            ] {
                let t = Instant::now();
                f(100);
                println!("{name}: 100 iterations in {:?}", t.elapsed());
            }
        }
    }
}
