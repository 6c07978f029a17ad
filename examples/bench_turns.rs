//! A turn through each host, N times, deterministic: the program `scripts/bench/turns.sh`
//! runs under callgrind to count the instructions of one turn (no timing here; a shared
//! machine makes wall time useless for a few-percent comparison).
//!
//! `cargo run --release --example bench_turns -- MODE N`, MODE one of:
//! - `agent`: `ToolLoopAgent` on a `RecordingSink`: a model call asking for a tool, the tool
//!   run, a second model call answering (no host);
//! - `jambonz`: a whole simulated call (greeting, a question answered after a tool call, a
//!   barge-in, the agent hanging up) through the driver against the simulator, every frame
//!   encoded and decoded on both sides;
//! - `tanstack`: a `prompt` through `Service::control`, the turn run by `run_turns` (a tool
//!   call, a streamed reply) into a memory log;
//! - `sessions`: an `exec` turn through the agentsessions `Controller` on a memory journal (a
//!   tool call and a reply, every event sealed and appended), one fresh session per turn.
//!
//! The same program is built at an older commit by `scripts/bench/turns.sh --at REV`, with
//! only the few API names that changed adapted (the `compat` functions at the top).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use futures::executor::{LocalPool, block_on};
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::{Message, ToolDefinition, ToolResult};
use harness_core::model::ScriptedModel;
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::{Harness, Start};
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::simulator::{Script, SimConfig, Simulator};
use harness_jambonz::testing::simulate_call;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::journal::MemoryJournal;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::MemoryLog;

const REPLY: &str = "Sunny in Paris, twenty-one degrees, a light wind from the west.";

// ---- compat: the only code that differs between the two builds -------------------------

use harness_core::tool::{Tool, Tools};

fn weather_tools() -> Tools {
    Tools::new().with(Tool::sync("get_weather", "weather", |call| {
        ToolResult::ok_json(&call.id, serde_json::json!({"celsius": 21}))
    }))
}

fn weather_agent() -> ToolLoopAgent {
    ToolLoopAgent::new("weather").with_tools(&weather_tools())
}

fn recording_sink(model: ScriptedModel) -> RecordingSink {
    RecordingSink::new(model).with_tools(weather_tools())
}

fn faq_agent() -> ToolLoopAgent {
    ToolLoopAgent::new("faq")
        .with_tool(ToolDefinition::new("get_hours", "hours"))
        .with_command_tool(ToolDefinition::new("hangup", "end"), "hangup")
}

fn with_hours(sim: Simulator) -> Simulator {
    sim.with_tool(Tool::json("get_hours", "hours", |_| {
        Ok(serde_json::json!({"weekdays": "8am to 6pm"}))
    }))
}

fn call(agent: ToolLoopAgent, model: ScriptedModel, sim: Simulator, start: Instant) -> usize {
    let call = simulate_call(
        agent,
        model,
        Tools::new(),
        sim,
        start,
        ServeConfig::default(),
    );
    assert_eq!(call.transcript.ended.as_ref().unwrap().0, "harness_hangup");
    call.frames.len()
}

fn service() -> Service<MemoryLog> {
    Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    )
}

fn spawn_turns(pool: &LocalPool, service: Service<MemoryLog>, model: ScriptedModel) {
    pool.spawner()
        .spawn_local(run_turns(service, weather_agent(), model, weather_tools()))
        .unwrap();
}

fn controller(model: ScriptedModel) -> Controller {
    Controller::builder(MemoryJournal::new())
        .model(model)
        .tools(weather_tools())
        .harness("weather", weather_agent())
        .build()
}

// ---- the paths ----------------------------------------------------------------------------

fn weather_script(n: usize) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for _ in 0..n {
        model = model
            .tool_call("get_weather", serde_json::json!({"city": "Paris"}))
            .reply(REPLY);
    }
    model
}

fn agent(n: usize) {
    let agent = weather_agent();
    for _ in 0..n {
        let mut sink = recording_sink(weather_script(1));
        let start = Start {
            execution_id: "0123456789abcdef".into(),
            session_uid: "s".into(),
            inputs: vec![Message::user("Weather in Paris?")],
            ..Start::default()
        };
        block_on(agent.run(start, &mut sink)).unwrap();
        let tools = sink
            .calls()
            .iter()
            .filter(|c| matches!(c, SinkCall::ToolCall { result, .. } if !result.is_error))
            .count();
        assert_eq!(tools, 1, "{:?}", sink.calls());
        black_box(sink.calls().len());
    }
}

fn jambonz(n: usize) {
    for _ in 0..n {
        let model = ScriptedModel::new()
            .reply("Thanks for calling Acme.")
            .tool_call("get_hours", serde_json::json!({}))
            .reply("We're open eight to six on weekdays.")
            .tool_call("hangup", serde_json::json!({"reason": "resolved"}));
        let start = Instant::now();
        let sim = with_hours(Simulator::new(
            start,
            SimConfig::default(),
            Script::new()
                .greeting()
                .say("When are you open")
                .barge_in(Duration::from_millis(1100), "Thanks, bye"),
        ));
        black_box(call(faq_agent(), model, sim, start));
    }
}

fn tanstack(n: usize) {
    let service = service();
    let mut pool = LocalPool::new();
    spawn_turns(&pool, service.clone(), weather_script(n));
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

fn sessions(n: usize) {
    let host = controller(weather_script(n));
    for i in 0..n {
        let session = format!("s{i}");
        host.create_session(&session, None).unwrap();
        block_on(host.exec(ExecRequest::text(&session, "Weather in Paris?"))).unwrap();
        black_box(host.records(&session).unwrap().len());
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    match mode.as_str() {
        "agent" => agent(n),
        "jambonz" => jambonz(n),
        "tanstack" => tanstack(n),
        "sessions" => sessions(n),
        _ => {
            eprintln!("usage: bench_turns agent|jambonz|tanstack|sessions N");
            std::process::exit(2);
        }
    }
}
