//! The bytes a turn leaves in the log and sends on SSE, pinned: two turns (a tool call with
//! arguments and a result, a reply streamed in fragments with quotes, a backslash, a control
//! character and non-ASCII text) on a memory log, the thread's whole SSE stream compared with
//! `tests/fixtures/turn_log.sse`, captured before the per-event path was rewritten (the log
//! renders each record once; a change of the record's bytes is a change of the wire: spec
//! tanstack-harness.md "Cursors", "the stream sends … `harness.event`").
//! `PIN_UPDATE=1 cargo test -p harness-tanstack --test log_bytes` writes the fixture again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::ToolResult;
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_tanstack::driver::run_turns;
use harness_tanstack::log::EventLog;

mod support;
use support::driver::{drain, service};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/turn_log.sse");

#[test]
fn a_turns_log_and_sse_bytes_are_pinned() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    let tools = Tools::new().with(Tool::sync("get_weather", "weather", |call| {
        ToolResult::ok_json(
            &call.id,
            serde_json::json!({"celsius": 21, "sky": "clear \"blue\""}),
        )
    }));
    let model = ScriptedModel::new()
        .tool_call(
            "get_weather",
            serde_json::json!({"city": "Paris", "when": "now\n"}),
        )
        .reply("Sunny in \"Paris\" \\ 21 °C\u{1}, a light wind — from the west.")
        .reply("Again: sunny.");
    let agent = ToolLoopAgent::new("weather").with_tools(&tools);
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, model, tools))
        .unwrap();
    for (i, message) in ["Weather?", "And now \u{1f600}?"].iter().enumerate() {
        let body = serde_json::json!({
            "threadId": "thread-1",
            "input": {"op": "prompt", "message": message, "inputId": format!("in-{i}")},
        });
        let a = svc.control(None, body.to_string().as_bytes(), "req", None);
        assert_eq!(a.status, 200, "{:?}", a);
        pool.run_until_stalled();
    }
    let mut s = svc
        .open_sse(Some("thread-1"), Some("2"), None, None, None, "r")
        .unwrap();
    let sse: String = drain(&mut pool, &mut s).concat();
    // The log holds the same records the stream sent, byte for byte.
    let logged: Vec<u8> = svc.with_host(|h, _| {
        let head = h.log().head_seq("thread-1");
        (1..=head)
            .flat_map(|seq| {
                h.log_mut()
                    .get("thread-1", seq)
                    .unwrap()
                    .unwrap()
                    .sse()
                    .to_vec()
            })
            .collect()
    });
    assert!(logged.len() > 2000, "{}", logged.len());
    assert!(
        sse.ends_with(std::str::from_utf8(&logged).unwrap()),
        "{sse}"
    );
    if std::env::var_os("PIN_UPDATE").is_some() {
        std::fs::write(FIXTURE, &sse).unwrap();
    }
    let pinned = std::fs::read_to_string(FIXTURE).unwrap();
    assert_eq!(sse, pinned);
}
