//! The futures-only driver serving a harness_core::Harness: a turn's sink calls become the
//! events the spec names, and a cancel drops the turn's future.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::field_reassign_with_default
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_tanstack::agui::AguiEvent;
use harness_tanstack::driver::run_turns;
use serde_json::Value;

mod support;
use support::driver::{FnHarness, drain, harness, names, read_all, serve, service};

#[test]
fn a_tool_loop_turn_becomes_tool_call_text_and_usage_events() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    let model = ScriptedModel::new()
        .tool_call("get_hours", serde_json::json!({"day": "mon"}))
        .reply("Open eight to six.");
    let tools = Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
        Ok(serde_json::json!({"hours": "8-18"}))
    }));
    let agent = ToolLoopAgent::new("faq").with_tools(&tools);
    pool.spawner()
        .spawn_local(run_turns(svc.clone(), agent, model, tools))
        .unwrap();
    let a = svc.control(
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"When are you open?"}}"#,
        "r",
        None,
    );
    assert_eq!(a.status, 200);
    pool.run_until_stalled();
    let frames = read_all(&mut pool, &svc);
    let n = names(&frames);
    let expect = [
        "harness.input.accepted",
        "RUN_STARTED",
        "harness.operation.started",
        "harness.input.applied",
        "harness.usage",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ];
    assert_eq!(&n[..expect.len()], &expect);
    let tail = [
        "TEXT_MESSAGE_END",
        "harness.usage",
        "RUN_FINISHED",
        "harness.operation.finished",
        "harness.input.settled",
    ];
    assert_eq!(&n[n.len() - tail.len()..], &tail);
    // Every event is valid AG-UI 1.0 and the text streams the model's reply.
    let text: String = frames[1..]
        .iter()
        .map(|f| AguiEvent::from_json_strict(&f["event"].to_string()).unwrap())
        .filter_map(|e| match e {
            AguiEvent::TextMessageContent(c) => Some(c.delta),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Open eight to six.");
    let args = frames
        .iter()
        .find(|f| f["event"]["type"] == "TOOL_CALL_ARGS")
        .unwrap();
    assert_eq!(args["event"]["delta"], r#"{"day":"mon"}"#);
    let fin = frames
        .iter()
        .find(|f| f["event"]["name"] == "harness.operation.finished")
        .unwrap();
    assert_eq!(fin["event"]["value"]["status"], "completed");
    // The usage total grows across the turn's two model calls.
    let usages: Vec<&Value> = frames
        .iter()
        .filter(|f| f["event"]["name"] == "harness.usage")
        .collect();
    assert!(
        usages[1]["event"]["value"]["total"]["inputTokens"].as_u64()
            > usages[0]["event"]["value"]["total"]["inputTokens"].as_u64()
    );
    // The transcript holds the user message and the answer.
    let t: Value = serde_json::from_str(&svc.transcript("thread-1", None, "r").body).unwrap();
    let msgs = t["messages"].as_array().unwrap();
    assert_eq!(msgs.first().unwrap()["content"], "When are you open?");
    assert_eq!(msgs.last().unwrap()["content"], "Open eight to six.");
}

/// Talks, then waits forever: only a cancel ends it.
struct Stuck;

#[async_trait]
impl Harness for Stuck {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("stuck", "1"))
    }
    async fn run(&self, _start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        sink.output("thinking").await?;
        futures::future::pending::<()>().await;
        Ok(())
    }
}

#[test]
fn cancel_drops_the_future_and_the_run_finishes_cancelled() {
    let (svc, clock) = service();
    let mut pool = LocalPool::new();
    serve(&svc, &pool, Stuck);
    let a: Value = serde_json::from_str(
        &svc.control(
            None,
            br#"{"threadId":"thread-1","input":{"op":"prompt","message":"go"}}"#,
            "r",
            None,
        )
        .body,
    )
    .unwrap();
    pool.run_until_stalled();
    *clock.lock().unwrap() += Duration::from_secs(1);
    let op = a["operationId"].as_str().unwrap();
    let c: Value = serde_json::from_str(
        &svc.control(
            None,
            format!(r#"{{"threadId":"thread-1","input":{{"op":"cancel","operationId":"{op}"}}}}"#)
                .as_bytes(),
            "r",
            None,
        )
        .body,
    )
    .unwrap();
    assert_eq!(c["status"], "accepted");
    pool.run_until_stalled();
    let frames = read_all(&mut pool, &svc);
    let n = names(&frames);
    let i = n.iter().position(|x| x == "TEXT_MESSAGE_END").unwrap();
    assert_eq!(
        &n[i..i + 4],
        [
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
            "harness.operation.finished",
            "harness.input.settled"
        ]
    );
    let fin = frames
        .iter()
        .find(|f| f["event"]["type"] == "RUN_FINISHED")
        .unwrap();
    assert_eq!(
        fin["event"]["outcome"],
        serde_json::json!({"type": "cancelled"})
    );
    let of = frames
        .iter()
        .find(|f| f["event"]["name"] == "harness.operation.finished")
        .unwrap();
    assert_eq!(of["event"]["value"]["status"], "cancelled");
    // The thread is idle again: a new prompt starts a new turn.
    let again: Value = serde_json::from_str(
        &svc.control(
            None,
            br#"{"threadId":"thread-1","input":{"op":"prompt","message":"again"}}"#,
            "r",
            None,
        )
        .body,
    )
    .unwrap();
    assert_eq!(again["status"], "accepted");
}

#[test]
fn post_run_streams_plain_agui_events_of_one_run() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    serve(&svc, &pool, ToolLoopAgent::new("echo"));
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(r#"{"threadId":"t-run","runId":"run-1","messages":[{"id":"u1","role":"user","content":"ping"}]}"#).unwrap();
    let mut s = svc.run_agui(&input, None, "r", None).unwrap();
    let mut events = Vec::new();
    pool.run_until(async {
        while let Some(b) = s.next().await {
            let text = String::from_utf8(b.to_vec()).unwrap();
            // "These routes send plain AG-UI events, with no harness.* frames around them."
            let d = text
                .strip_prefix("data: ")
                .unwrap()
                .strip_suffix("\n\n")
                .unwrap()
                .to_owned();
            events.push(AguiEvent::from_json_strict(&d).unwrap());
        }
    });
    assert!(
        matches!(&events[0], AguiEvent::RunStarted(r) if r.run_id == "run-1" && r.thread_id == "t-run")
    );
    assert!(matches!(events.last().unwrap(), AguiEvent::RunFinished(_)));
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            AguiEvent::TextMessageContent(c) => Some(c.delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "You said: ping");
}

/// "If the client does not read for this long, the server sends slow_consumer and closes."
/// Through the driver, a reader that stops reading stops polling its stream (the socket
/// write does not complete): after `slowConsumerMs` the host closes it with 4408, the
/// reader that comes back gets the error and the end, and nothing of it stays behind.
#[test]
fn a_stream_that_is_not_read_is_closed_4408_and_forgotten() {
    let (svc, clock) = service();
    let mut pool = LocalPool::new();
    svc.control(
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"go"}}"#,
        "r",
        None,
    );
    let mut s = svc
        .open_sse(Some("thread-1"), Some("2"), None, None, None, "r")
        .unwrap();
    let hello = pool.run_until(s.next()).unwrap();
    assert!(String::from_utf8_lossy(&hello).contains("harness.hello"));
    // The reader stops; the thread goes on.
    svc.with_host(|h, now| {
        for i in 0..3 {
            h.emit(
                now,
                "thread-1",
                "op-1",
                AguiEvent::text_content("m", format!("{i}")),
            )
            .unwrap();
        }
    });
    *clock.lock().unwrap() += Duration::from_secs(29);
    svc.tick();
    assert_eq!(s.close_code(), None);
    *clock.lock().unwrap() += Duration::from_secs(1);
    svc.tick();
    let rest = drain(&mut pool, &mut s);
    assert_eq!(rest.last().map(String::as_str), Some("<end>"), "{rest:?}");
    assert!(
        rest[rest.len() - 2].contains(r#""code":"slow_consumer""#),
        "{rest:?}"
    );
    assert_eq!(s.close_code(), Some(4408));
    drop(s);
    assert_eq!(svc.with_host(|h, _| h.stats().connections), 0);
}

/// The reader took one frame and never came back for the next (its write of that frame
/// never completed), and nothing new happened on the thread: after `slowConsumerMs` the
/// host closes the stream with 4408 all the same.
#[test]
fn a_frame_whose_write_never_completes_makes_a_slow_consumer() {
    let (svc, clock) = service();
    let mut pool = LocalPool::new();
    svc.control(
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"go"}}"#,
        "r",
        None,
    );
    let mut s = svc
        .open_sse(Some("thread-1"), Some("2"), None, None, None, "r")
        .unwrap();
    let _hello = pool.run_until(s.next()).unwrap();
    *clock.lock().unwrap() += Duration::from_secs(30);
    svc.tick();
    let rest = drain(&mut pool, &mut s);
    assert_eq!(rest.last().map(String::as_str), Some("<end>"), "{rest:?}");
    assert!(
        rest[rest.len() - 2].contains(r#""code":"slow_consumer""#),
        "{rest:?}"
    );
    assert_eq!(s.close_code(), Some(4408));
}

/// A connection has one stream. Before, a second `Connection::stream()` after dropping the
/// first (which disconnects) gave a stream that waited for ever with no error; now it is
/// `StreamError::Disconnected`, and a second one while the first lives is `Taken`.
#[test]
fn a_second_stream_of_a_connection_is_an_error_never_a_hang() {
    use harness_tanstack::driver::StreamError;
    use harness_tanstack::host::Transport;
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    let conn = svc.connect(Transport::WebSocket, None, "up");
    let first = conn.stream().unwrap();
    assert_eq!(conn.stream().unwrap_err(), StreamError::Taken);
    drop(first);
    assert_eq!(svc.with_host(|h, _| h.stats().connections), 0);
    assert_eq!(conn.stream().unwrap_err(), StreamError::Disconnected);
    // A frame on the gone connection changes nothing, and no stream of it waits for ever:
    // one polled after its connection went ends at once.
    conn.handle_text(r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#);
    let other = svc.connect(Transport::WebSocket, None, "up-2");
    let mut s = other.stream().unwrap();
    svc.with_host(|h, _| h.disconnect(other.id()));
    assert_eq!(drain(&mut pool, &mut s), ["<end>"]);
}

/// Calls a tool the way a model's tool call part comes (no mediation, no key), then as the
/// rules want it; says what each call got.
fn raw_caller() -> FnHarness {
    harness(|start, sink| {
        Box::pin(async move {
            use harness_core::message::{JsonObject, ToolCall};
            let raw = ToolCall::new("c1", "get_hours", JsonObject::new());
            let refused = sink.tool_call(raw.clone()).await;
            sink.output(&format!("{refused:?}|")).await?;
            let mediated = raw.controller_mediated(&start.execution_id);
            let ran = sink.tool_call(mediated).await?;
            Ok(sink.output(&format!("ran:{}", !ran.is_error)).await?)
        })
    })
}

/// "Before anything runs, every host … applies check_call" (harness-core tool rules): an
/// unmediated call, or one without an idempotency key, is refused with `Rejected` and
/// nothing is shown or run; the same call, mediated with its key, runs with the core
/// `Tools` registry.
#[test]
fn the_driver_applies_the_core_tool_rules() {
    let (svc, _) = service();
    let mut pool = LocalPool::new();
    let runs = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&runs);
    let tools = Tools::new().with(Tool::json("get_hours", "Opening hours", move |_| {
        *counter.lock().unwrap() += 1;
        Ok(serde_json::json!({"hours": "8-18"}))
    }));
    pool.spawner()
        .spawn_local(run_turns(
            svc.clone(),
            raw_caller(),
            ScriptedModel::echo(),
            tools,
        ))
        .unwrap();
    svc.control(
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"go"}}"#,
        "r",
        None,
    );
    pool.run_until_stalled();
    let frames = read_all(&mut pool, &svc);
    let text: String = frames
        .iter()
        .filter(|f| f["event"]["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|f| f["event"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        text.starts_with("Err(Rejected(\"unmediated tool call"),
        "{text}"
    );
    assert!(text.ends_with("ran:true"), "{text}");
    assert_eq!(*runs.lock().unwrap(), 1);
    let starts = frames
        .iter()
        .filter(|f| f["event"]["type"] == "TOOL_CALL_START")
        .count();
    assert_eq!(starts, 1, "the refused call is not shown");
}
