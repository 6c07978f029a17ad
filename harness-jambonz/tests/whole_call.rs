//! The spec's "A whole call", end to end: our driver serving a ToolLoopAgent, our simulator
//! playing jambonz, on a virtual clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_core::agent::ToolLoopAgent;
use harness_core::message::ToolDefinition;
use harness_core::model::ScriptedModel;
use harness_core::{Tool, Tools};
use harness_jambonz::driver::ServeConfig;
use harness_jambonz::simulator::{Script, SimConfig, Simulator};
use harness_jambonz::testing::{Direction, simulate_call};
use serde_json::{Value, json};

/// The platform's tools: jambonz runs them.
fn platform_tools() -> Tools {
    Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
        Ok(json!({"weekdays": "8am to 6pm"}))
    }))
}

/// The agent hangs up with the `hangup` command ("command {command_id: "c1", name:
/// "hangup", args: {reason: "resolved"}}").
fn agent() -> ToolLoopAgent {
    ToolLoopAgent::new("faq")
        .with_system_prompt("You answer calls for Acme.")
        .with_tools(&platform_tools())
        .with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup")
}

fn model() -> ScriptedModel {
    ScriptedModel::new()
        .reply("Thanks for calling Acme.")
        .tool_call("get_hours", json!({}))
        .reply("We're open eight to six on weekdays.")
        .tool_call("hangup", json!({"reason": "resolved"}))
}

fn v(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn the_spec_whole_call_runs_end_to_end() {
    let start = Instant::now();
    let script = Script::new()
        .greeting()
        .say("When are you open")
        // 16 characters at 15 per second: "We're open eight" has been heard after 1.1 s.
        .barge_in(Duration::from_millis(1100), "Thanks, bye");
    let sim = Simulator::new(start, SimConfig::default(), script).with_tools(platform_tools());
    let call = simulate_call(
        agent(),
        model(),
        Tools::new(),
        sim,
        start,
        ServeConfig::default(),
    );

    // Collapse the frames into the spec's listing: (direction, type, key fields).
    let mut seq = Vec::new();
    for f in &call.frames {
        let harness_side::Transmit::Text(t) = &f.frame else {
            continue;
        };
        let m = v(t);
        let ty = m["type"].as_str().unwrap().to_owned();
        // Several word chunks of one reply read as one line.
        if ty == "reply:chunk"
            && seq
                .last()
                .is_some_and(|(_, t, _): &(Direction, String, Value)| t == "reply:chunk")
        {
            continue;
        }
        if ty == "transcript" && m["final"] == false {
            continue;
        }
        seq.push((f.direction, ty, m));
    }
    let types: Vec<&str> = seq.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "session:start",
            "turn:start",
            "reply:chunk",
            "reply:done",
            "speech:start",
            "transcript",
            "turn:start",
            "tool:call",
            "tool:result",
            "reply:chunk",
            "reply:done",
            "event",
            "turn:cancel",
            "speech:start",
            "transcript",
            "turn:start",
            "command",
            "command:result",
            "session:end",
        ]
    );
    let dir = |i: usize| seq[i].0;
    for i in [0, 1, 4, 5, 6, 8, 11, 12, 13, 14, 15, 17, 18] {
        assert_eq!(dir(i), Direction::ToHarness, "frame {i}");
    }
    for i in [2, 3, 7, 9, 10, 16] {
        assert_eq!(dir(i), Direction::ToJambonz, "frame {i}");
    }
    let m = |i: usize| &seq[i].2;
    // session:start {call_sid, protocol: 1, from, to, direction, language, metadata, tools}
    for k in [
        "call_sid",
        "from",
        "to",
        "direction",
        "language",
        "metadata",
        "tools",
    ] {
        assert!(m(0).get(k).is_some(), "session:start lacks {k}");
    }
    assert_eq!(m(0)["protocol"], 1);
    // turn:start {turn_id: 1, input: {type: "greeting"}}
    assert_eq!(m(1)["turn_id"], 1);
    assert_eq!(m(1)["input"], json!({"type": "greeting"}));
    // reply:chunk {reply_id: "r1", turn_id: 1, chunk: {choices: [{delta: {content: …}}]}}
    assert_eq!(m(2)["reply_id"], "r1");
    assert_eq!(m(2)["turn_id"], 1);
    assert_eq!(m(2)["chunk"]["choices"][0]["delta"]["content"], "Thanks ");
    assert_eq!(m(3)["reply_id"], "r1");
    assert_eq!(m(3)["turn_id"], 1);
    assert!(m(3)["turn_record"]["model_calls"].is_array());
    assert_eq!(m(4)["turn_id"], 2);
    assert_eq!(m(5)["text"], "When are you open");
    assert_eq!(m(5)["final"], true);
    assert_eq!(
        m(6)["input"],
        json!({"type": "speech", "text": "When are you open", "language": "en-US"})
    );
    // tool:call {call_id: "t1", turn_id: 2, name: "get_hours", args: {}}
    assert_eq!(m(7)["call_id"], "t1");
    assert_eq!(m(7)["turn_id"], 2);
    assert_eq!(m(7)["name"], "get_hours");
    assert_eq!(m(7)["args"], json!({}));
    assert_eq!(m(8)["call_id"], "t1");
    assert_eq!(m(8)["result"], json!({"weekdays": "8am to 6pm"}));
    assert_eq!(m(9)["reply_id"], "r2");
    assert_eq!(m(9)["turn_id"], 2);
    // event {name: "user_interruption", turn_id: 2, reply_id: "r2", spoken, unspoken}
    assert_eq!(m(11)["name"], "user_interruption");
    assert_eq!(m(11)["turn_id"], 2);
    assert_eq!(m(11)["reply_id"], "r2");
    assert_eq!(m(11)["spoken"], "We're open eight");
    assert_eq!(m(11)["unspoken"], " to six on weekdays.");
    // turn:cancel {turn_id: 2, reason: "barge_in"}
    assert_eq!(m(12)["turn_id"], 2);
    assert_eq!(m(12)["reason"], "barge_in");
    assert_eq!(m(15)["turn_id"], 3);
    assert_eq!(m(15)["input"]["text"], "Thanks, bye");
    // command {command_id: "c1", name: "hangup", args: {reason: "resolved"}}
    assert_eq!(m(16)["command_id"], "c1");
    assert_eq!(m(16)["name"], "hangup");
    assert_eq!(m(16)["args"], json!({"reason": "resolved"}));
    assert_eq!(m(17)["command_id"], "c1");
    assert_eq!(m(17)["ok"], true);
    assert_eq!(m(18)["reason"], "harness_hangup");
    assert!(m(18)["duration_ms"].as_u64().unwrap() > 0);
    // "Messages from jambonz carry call_sid."
    for (d, _, msg) in &seq {
        if *d == Direction::ToHarness {
            assert_eq!(msg["call_sid"], "CA00000000000000000000000000000001");
        }
    }

    // Every frame of the call, partial transcripts and word chunks included.
    assert_eq!(
        call.frames
            .iter()
            .filter(|f| matches!(f.frame, harness_side::Transmit::Text(_)))
            .count(),
        32
    );
    let t = &call.transcript;
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    assert_eq!(t.heard(), ["Thanks for calling Acme.", "We're open eight"]);
    assert_eq!(t.turn(1).unwrap().completion_reason, "completed");
    assert_eq!(t.turn(2).unwrap().completion_reason, "barge_in");
    assert_eq!(t.turn(1).unwrap().first_chunk_ms, Some(0));
    let report = call.report.unwrap();
    assert_eq!(report.turns, 3);
    assert_eq!(report.cancelled, 1);
    assert_eq!(
        report.end.unwrap().reason.as_deref(),
        Some("harness_hangup")
    );
}

use harness_jambonz::harness_side;
