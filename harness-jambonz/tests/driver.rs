//! The driver serving a `Harness` over a call, driven by the simulator on a virtual clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::Command;
use harness_core::message::{Message, ModelRequest, ToolCall, ToolDefinition, ToolResult, Usage};
use harness_core::model::{ModelError, ScriptedModel};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start, Tool, Tools};
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::harness_side::Transmit;
use harness_jambonz::simulator::{Script, SimConfig};
use harness_jambonz::testing::Direction;
use serde_json::{Value, json};

mod common;
use common::driver::{Call, Live, call, sent};

/// "sink.output and streamed model deltas become reply:chunks as they arrive."
#[test]
fn model_deltas_become_reply_chunks_as_they_arrive() {
    let model = ScriptedModel::new().reply("Thanks for calling Acme.");
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        Script::new().greeting(),
        ServeConfig::default(),
    );
    let chunks: Vec<String> = sent(&c, "reply:chunk")
        .iter()
        .map(|v| {
            v["chunk"]["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(chunks, ["Thanks ", "for ", "calling ", "Acme."]);
    let done = &sent(&c, "reply:done")[0];
    assert_eq!(done["reply_id"], "r1");
    let mc = &done["turn_record"]["model_calls"][0];
    assert_eq!(mc["first_token_ms"], 0);
    assert_eq!(mc["ms"], 0);
    assert!(mc["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(mc["output_tokens"], 6);
    assert_eq!(c.transcript.heard(), ["Thanks for calling Acme."]);
}

/// An agent exercising every sink method, with a virtual delay inside (so `ms` is real).
struct Probe {
    log: Arc<Mutex<Vec<String>>>,
    dropped: Arc<AtomicBool>,
}

struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Harness for Probe {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("probe", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let _flag = DropFlag(self.dropped.clone());
        let said = start.inputs[0].text();
        let history: Vec<String> = start.history_messages().iter().map(Message::text).collect();
        self.log
            .lock()
            .unwrap()
            .push(format!("run {said:?} history={history:?}"));
        match said.as_str() {
            "(call connected)" => {
                sink.output("Hello, ").await?;
                sink.output("this is Acme.").await?;
                sink.report(ToolResult::ok("lookup_account", serde_json::Map::new()))
                    .await?;
                sink.usage(Usage {
                    model: "own-llm".into(),
                    input_tokens: 10,
                    output_tokens: 3,
                    ..Default::default()
                })
                .await?;
            }
            "When are you open" => {
                let r = sink
                    .tool_call(
                        ToolCall::new("x1", "get_hours", serde_json::Map::new())
                            .controller_mediated(&start.execution_id),
                    )
                    .await?;
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("tool id={} out={}", r.id, json!(r.output)));
                sink.output("We're open eight to six on weekdays.").await?;
                // Wait for a tool that never answers in time: the barge-in comes first.
                let r = sink
                    .tool_call(
                        ToolCall::new("x2", "slow", serde_json::Map::new())
                            .controller_mediated(&start.execution_id),
                    )
                    .await;
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("slow returned {r:?}"));
            }
            "Thanks, bye" => {
                let r = sink.command(Command::hangup("resolved")).await?;
                self.log.lock().unwrap().push(format!("hangup ok={}", r.ok));
                let after = sink.output("Bye!").await;
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("after hangup: {after:?}"));
            }
            _ => {}
        }
        Ok(())
    }
}

#[test]
fn sink_calls_tool_calls_reports_cancel_and_history() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let dropped = Arc::new(AtomicBool::new(false));
    let probe = Probe {
        log: log.clone(),
        dropped: dropped.clone(),
    };
    let script = Script::new()
        .greeting()
        .say("When are you open")
        .barge_in(Duration::from_millis(1100), "Thanks, bye");
    let c = Call::default().run_with(probe, ScriptedModel::new(), script, |s| {
        s.with_slow_tool(
            Tool::json("slow", "", |_| Ok(json!({}))),
            Duration::from_secs(8),
        )
    });
    let log = log.lock().unwrap().clone();
    assert_eq!(log[0], r#"run "(call connected)" history=[]"#);
    // sink.tool_call → tool:call, waits for tool:result; the result carries the agent's id.
    assert_eq!(log[2], r#"tool id=x1 out={"weekdays":"8am to 6pm"}"#);
    // turn:cancel dropped turn 2's future while it waited for the slow tool.
    assert!(dropped.load(Ordering::SeqCst));
    assert!(
        !log.iter().any(|l| l.starts_with("slow returned")),
        "{log:?}"
    );
    // History per call, trimmed to what the caller heard after user_interruption.
    assert_eq!(
        log[3],
        r#"run "Thanks, bye" history=["(call connected)", "Hello, this is Acme.", "When are you open", "We're open eight"]"#
    );
    // A hangup through `sink.command`; after it, sink calls fail Cancelled.
    assert_eq!(log[4], "hangup ok=true");
    assert_eq!(log[5], "after hangup: Err(Cancelled)");
    let cmd = &sent(&c, "command")[0];
    assert_eq!(cmd["name"], "hangup");
    assert_eq!(cmd["args"], json!({"reason": "resolved"}));
    // The turn record: own_tools from sink.report, model_calls from sink.usage, steps from
    // tool calls.
    let dones = sent(&c, "reply:done");
    let rec = &dones[0]["turn_record"];
    assert_eq!(
        rec["own_tools"],
        json!([{"name": "lookup_account", "ok": true}])
    );
    assert_eq!(
        rec["model_calls"],
        json!([{"model": "own-llm", "input_tokens": 10, "output_tokens": 3}])
    );
    // Nothing was sent for turn 2 after its turn:cancel.
    let cancel_at = c
        .frames
        .iter()
        .position(|f| matches!(&f.frame, Transmit::Text(t) if t.contains("turn:cancel")))
        .unwrap();
    for f in &c.frames[cancel_at..] {
        if let (Direction::ToJambonz, Transmit::Text(t)) = (f.direction, &f.frame) {
            let v: Value = serde_json::from_str(t).unwrap();
            assert_ne!(v["turn_id"], 2, "{t}");
        }
    }
    assert!(
        c.transcript.violations.is_empty(),
        "{:?}",
        c.transcript.violations
    );
    let report = c.report.unwrap();
    assert_eq!((report.turns, report.cancelled, report.failed), (3, 1, 0));
    assert_eq!(c.transcript.ended.as_ref().unwrap().0, "harness_hangup");
}

#[test]
fn tool_call_steps_are_recorded() {
    let agent = ToolLoopAgent::new("faq")
        .with_tool(ToolDefinition::new("get_hours", "hours"))
        .reporting_usage();
    let model = ScriptedModel::new()
        .tool_call("get_hours", json!({}))
        .reply("Eight to six.");
    let c = call(
        agent,
        model,
        Script::new().greeting(),
        ServeConfig::default(),
    );
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(rec["steps"][0]["name"], "tool_call");
    assert_eq!(
        rec["steps"][0]["detail"],
        json!({"tool": "get_hours", "ok": true})
    );
    // Usage reported for mediated calls is not counted twice.
    assert_eq!(rec["model_calls"].as_array().unwrap().len(), 2);
}

/// An agent that runs the model's tool calls itself and reports them (`sink.report`).
struct OwnTools;

#[async_trait]
impl Harness for OwnTools {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("own-tools", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let resp = sink.model(ModelRequest::new(start.inputs.clone())).await?;
        for call in resp.message.tool_calls() {
            let mut out = serde_json::Map::new();
            out.insert("plan".into(), "gold".into());
            let result = if call.tool == "lookup_account" {
                ToolResult::ok(&call.id, out)
            } else {
                ToolResult::error(&call.id, "no such tool")
            };
            sink.report(result).await?;
        }
        sink.output("Your plan is gold.").await?;
        Ok(())
    }
}

/// The turn record's `own_tools`: `[{ "name": "lookup_account", "ok": true, "ms": 220 }]`:
/// the name is the tool's (learned from the model's tool call with the reported result's
/// id), not the call id.
#[test]
fn own_tools_are_recorded_by_tool_name() {
    let model = ScriptedModel::new().reply_with(Message {
        role: harness_core::message::Role::Assistant,
        parts: vec![
            harness_core::message::Part::ToolCall(ToolCall::new(
                "call_a",
                "lookup_account",
                serde_json::Map::new(),
            )),
            harness_core::message::Part::ToolCall(ToolCall::new(
                "call_b",
                "check_outage",
                serde_json::Map::new(),
            )),
        ],
    });
    let c = call(
        OwnTools,
        model,
        Script::new().greeting(),
        ServeConfig::default(),
    );
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(
        rec["own_tools"],
        json!([
            {"name": "lookup_account", "ok": true},
            {"name": "check_outage", "ok": false}
        ])
    );
    assert_eq!(c.transcript.heard(), ["Your plan is gold."]);
}

/// The SDK's `greeting`: "spoken when the call connects, without a model call".
#[test]
fn a_configured_greeting_needs_no_model_call() {
    let model = Arc::new(ScriptedModel::new());
    let mut cfg = ServeConfig::default();
    cfg.greeting = Some("Thanks for calling Acme.".into());
    let c = call(
        ToolLoopAgent::new("faq"),
        model.clone(),
        Script::new().greeting(),
        cfg,
    );
    assert_eq!(model.calls(), 0);
    assert_eq!(c.transcript.heard(), ["Thanks for calling Acme."]);
    assert_eq!(
        sent(&c, "reply:done")[0]["turn_record"],
        json!({"route": "greeting"})
    );
}

/// "Up to 16 KB" for turn_record, and "a reply that starts while another is playing is
/// queued behind it": a configured route so long that even the trimmed record is over 16 KB
/// must not leave the reply open (holding every later reply behind it); it ends without a
/// record.
#[test]
fn a_route_over_16_kb_still_ends_every_reply() {
    let model = ScriptedModel::new().reply("We open at 8.");
    let mut cfg = ServeConfig::default();
    cfg.greeting = Some("Thanks for calling Acme.".into());
    cfg.route = Some("r".repeat(17 * 1024));
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        Script::new().greeting().say("When do you open?"),
        cfg,
    );
    let done = sent(&c, "reply:done");
    assert_eq!(done.len(), 2, "greeting and the turn both end");
    assert!(done.iter().all(|d| d.get("turn_record").is_none()));
    assert_eq!(
        c.transcript.heard(),
        ["Thanks for calling Acme.", "We open at 8."]
    );
}

/// A turn that fails says the error reply and marks the record.
#[test]
fn a_failed_turn_speaks_the_error_reply() {
    let model = ScriptedModel::new().fail(ModelError::Unavailable("down".into()));
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        Script::new().greeting(),
        ServeConfig::default(),
    );
    assert_eq!(c.transcript.heard(), ["Sorry, something went wrong."]);
    let rec = &sent(&c, "reply:done")[0]["turn_record"];
    assert_eq!(rec["flags"], json!(["harness_error"]));
    assert!(rec["note"].as_str().unwrap().contains("down"));
    assert_eq!(c.report.unwrap().failed, 1);
}

/// "session:start carries protocol: 1. A harness that cannot speak it closes the socket with
/// code 4000 and a reason."
#[test]
fn the_driver_closes_4000_on_another_protocol() {
    let mut cfg = SimConfig::default();
    cfg.protocol = json!(2);
    let c = Call {
        sim: cfg,
        ..Call::default()
    }
    .run(
        ToolLoopAgent::new("faq"),
        ScriptedModel::new(),
        Script::new().greeting(),
    );
    let (code, reason) = c.transcript.closed_by_harness.clone().unwrap();
    assert_eq!(code, 4000);
    assert!(reason.contains("protocol"));
    assert_eq!(c.report.unwrap().closed.unwrap().0, 4000);
}

/// Bad frames from a peer never crash or corrupt a call.
#[test]
fn bad_frames_are_reported_and_the_call_goes_on() {
    let model = ScriptedModel::new().reply("Hi.").reply("We open at eight.");
    let script = Script::new()
        .greeting()
        .raw("{not json")
        .raw(r#"{"type":"turn:start","turn_id":"two"}"#)
        .raw(r#"{"type":"tool:result","call_id":"t404","result":{}}"#)
        .raw(r#"{"type":"hologram","x":1}"#)
        .say("When do you open");
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        script,
        ServeConfig::default(),
    );
    let report = c.report.unwrap();
    assert_eq!(report.frame_errors.len(), 3, "{:?}", report.frame_errors);
    assert_eq!(c.transcript.heard(), ["Hi.", "We open at eight."]);
    assert!(c.transcript.violations.is_empty());
}

/// With a tiny outgoing queue the agent waits (back-pressure) and nothing is lost.
#[test]
fn back_pressure_loses_nothing() {
    let text = "one two three four five six seven eight nine ten eleven twelve";
    let model = ScriptedModel::new().reply(text);
    let mut cfg = ServeConfig::default();
    cfg.max_pending_frames = 1;
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        Script::new().greeting(),
        cfg,
    );
    assert_eq!(sent(&c, "reply:chunk").len(), 12);
    assert_eq!(c.transcript.heard(), [text]);
}

/// An agent that asks the model with the call's history: ToolLoopAgent sees the trimmed
/// conversation too.
#[test]
fn the_model_sees_the_trimmed_history() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let model = ScriptedModel::new()
        .reply("Hi.")
        .reply("We're open eight to six on weekdays.")
        .otherwise(move |req: &ModelRequest| {
            s2.lock()
                .unwrap()
                .push(req.messages.iter().map(Message::text).collect::<Vec<_>>());
            Ok(Message::assistant("Bye."))
        });
    let script = Script::new()
        .greeting()
        .say("When are you open")
        .barge_in(Duration::from_millis(1100), "Thanks");
    let c = call(
        ToolLoopAgent::new("faq"),
        model,
        script,
        ServeConfig::default(),
    );
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        [
            "(call connected)",
            "Hi.",
            "When are you open",
            "We're open eight",
            "Thanks"
        ]
    );
    assert_eq!(c.transcript.heard().last().copied(), Some("Bye."));
    let _ = SinkError::Cancelled;
}

struct Waits {
    dropped: Arc<Mutex<Vec<String>>>,
}

struct NoteDrop(Arc<Mutex<Vec<String>>>, String);
impl Drop for NoteDrop {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(self.1.clone());
    }
}

#[async_trait]
impl Harness for Waits {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("waits", "1"))
    }
    async fn run(&self, start: Start, _sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let _n = NoteDrop(self.dropped.clone(), start.execution_id.clone());
        futures::future::pending::<()>().await;
        Ok(())
    }
}

/// Turns that pile up (a peer starting turn after turn) never run without bound: past
/// `max_concurrent_turns` the oldest turn's future is dropped.
#[test]
fn concurrent_turns_are_bounded() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let mut script = Script::new();
    for t in 101..=104 {
        script = script.raw(json!({"type":"turn:start","call_sid":"CA1","turn_id":t,"input":{"type":"speech","text":"x"}}).to_string());
    }
    let mut cfg = ServeConfig::default();
    cfg.max_concurrent_turns = 2;
    let c = call(
        Waits {
            dropped: dropped.clone(),
        },
        ScriptedModel::new(),
        script,
        cfg,
    );
    let d = dropped.lock().unwrap().clone();
    // 101 and 102 were dropped when 103 and 104 started; 103 and 104 when the call ended.
    assert_eq!(
        &d[..2],
        [
            "CA00000000000000000000000000000001:101",
            "CA00000000000000000000000000000001:102"
        ]
    );
    assert_eq!(d.len(), 4);
    assert_eq!(c.report.unwrap().turns, 4);
}

/// An agent whose turn 2 streams, then waits for the test to let it go on (a model stream
/// that yields later), then streams more; turn 3 notes the history it was given.
struct Gated {
    gate: Mutex<Option<futures::channel::oneshot::Receiver<()>>>,
    histories: Arc<Mutex<Vec<Vec<String>>>>,
}

#[async_trait]
impl Harness for Gated {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("gated", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let history: Vec<String> = start.history_messages().iter().map(Message::text).collect();
        self.histories.lock().unwrap().push(history);
        if start.inputs[0].text() == "When are you open" {
            sink.output("We're open eight to six").await?;
            let gate = self.gate.lock().unwrap().take();
            if let Some(g) = gate {
                let _ = g.await;
            }
            sink.output(" on weekdays.").await?;
            futures::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// "keep only what the caller heard": text the turn streams after its `user_interruption`
/// arrived (and before its `turn:cancel` did) was not heard either, so it never joins the
/// history the next turn is given.
#[test]
fn text_streamed_between_user_interruption_and_turn_cancel_is_not_in_the_history() {
    let (gate_tx, gate_rx) = futures::channel::oneshot::channel();
    let histories = Arc::new(Mutex::new(Vec::new()));
    let agent = Gated {
        gate: Mutex::new(Some(gate_rx)),
        histories: histories.clone(),
    };
    let mut live = Live::new(agent, Tools::new(), ServeConfig::default());
    live.turn(2, "When are you open");
    live.poll();
    live.feed(
        json!({"type":"event","name":"user_interruption","turn_id":2,"reply_id":"r1","spoken":"We're open eight","unspoken":" to six"}),
    );
    live.poll();
    // The model yields more text before jambonz's turn:cancel arrives.
    gate_tx.send(()).unwrap();
    live.poll();
    live.feed(json!({"type":"turn:cancel","turn_id":2,"reason":"barge_in"}));
    live.turn(3, "Thanks");
    live.poll();
    assert!(live.report.is_none(), "the call goes on");
    let chunks: Vec<Value> = live
        .sent()
        .into_iter()
        .filter(|v| v["type"] == "reply:chunk" && v["turn_id"] == 2)
        .collect();
    assert_eq!(
        chunks.len(),
        2,
        "both chunks went out while turn 2 was open"
    );
    let h = histories.lock().unwrap();
    assert_eq!(
        h[1],
        ["When are you open", "We're open eight"],
        "turn 3's history holds only what was heard"
    );
}

/// Past `max_concurrent_turns` the turn running longest is dropped, whatever the ids (a
/// turn just started is never the one dropped).
#[test]
fn the_longest_running_turn_is_dropped_first() {
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let mut script = Script::new();
    for t in [109, 103, 105] {
        script = script.raw(json!({"type":"turn:start","call_sid":"CA1","turn_id":t,"input":{"type":"speech","text":"x"}}).to_string());
    }
    let mut cfg = ServeConfig::default();
    cfg.max_concurrent_turns = 2;
    call(
        Waits {
            dropped: dropped.clone(),
        },
        ScriptedModel::new(),
        script,
        cfg,
    );
    let d = dropped.lock().unwrap().clone();
    assert_eq!(d[0], "CA00000000000000000000000000000001:109");
}

/// An agent that returns `Cancelled` on its own, while jambonz never cancelled the turn.
struct GivesUp;

#[async_trait]
impl Harness for GivesUp {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::default())
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        if start.inputs[0].text() == "(call connected)" {
            sink.output("Hello, ").await?;
            // e.g. a sub-agent's own sink was cancelled: not this turn.
            return Err(SinkError::Cancelled.into());
        }
        sink.output("Bye.").await?;
        Ok(())
    }
}

/// "jambonz speaks one reply at a time; a reply that starts while another is playing is
/// queued behind it." A turn the agent gave up on with `Cancelled` while jambonz had not
/// cancelled it still ends its reply with `reply:done` (as a failure): left open, it held
/// the call until jambonz's reply deadline failed the turn.
#[test]
fn an_agent_returning_cancelled_on_an_open_turn_still_ends_its_reply() {
    let c = call(
        GivesUp,
        ScriptedModel::new(),
        Script::new().greeting().say("Thanks, bye"),
        ServeConfig::default(),
    );
    let dones = sent(&c, "reply:done");
    assert_eq!(dones.len(), 2, "{dones:?}");
    assert_eq!(dones[0]["turn_id"], 1);
    assert_eq!(dones[0]["turn_record"]["flags"], json!(["harness_error"]));
    let t1 = c.transcript.turn(1).unwrap();
    assert_ne!(t1.completion_reason, "harness_failure", "{t1:?}");
    assert_eq!(
        c.transcript.heard(),
        ["Hello, Sorry, something went wrong.", "Bye."]
    );
    assert_eq!(c.report.unwrap().failed, 1);
}
