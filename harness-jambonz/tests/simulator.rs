//! The simulator enforces the spec's rules for jambonz. Each test drives it with raw harness
//! frames on a virtual clock and cites the rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_core::message::{ToolCall, ToolResult};
use harness_core::tool::ToolContext;
use harness_core::{Tool, Tools};
use harness_jambonz::simulator::{
    Deadlines, Script, SimConfig, SimEvent, ViolationKind, split_spoken,
};
use serde_json::{Value, json};

mod common;
use common::Rig;

/// "Messages from jambonz carry call_sid." "session:start {call_sid, protocol: 1, from, to,
/// direction, language, metadata, tools}" then "turn:start {turn_id: 1, input: {type: "greeting"}}".
#[test]
fn session_start_then_the_greeting_turn() {
    let r = Rig::with(SimConfig::default(), Script::new().greeting(), |s| {
        s.with_tool(Tool::json("get_hours", "", |_| Ok(json!({}))))
    });
    let s = r.of("session:start")[0];
    assert_eq!(s["protocol"], 1);
    for k in [
        "call_sid",
        "from",
        "to",
        "direction",
        "language",
        "metadata",
    ] {
        assert!(s.get(k).is_some(), "{k}");
    }
    assert_eq!(s["tools"][0]["name"], "get_hours");
    let t = r.of("turn:start")[0];
    assert_eq!(t["turn_id"], 1);
    assert_eq!(t["input"], json!({"type": "greeting"}));
    assert!(r.got.iter().all(|(_, v)| v["call_sid"] == s["call_sid"]));
}

/// "A reply with a turn_id answers that turn, and is accepted only after that turn's
/// turn:start; one sent earlier is refused with an error event."
#[test]
fn a_reply_before_its_turn_start_is_refused_with_an_error_event() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(2), "too early");
    r.done("r1", Some(2));
    let errs = r.events("error");
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0]["reply_id"], "r1");
    assert_eq!(errs[0]["turn_id"], 2);
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::ReplyBeforeTurnStart)
            .len(),
        1
    );
    r.until(5000);
    assert!(
        r.agent_lines().is_empty(),
        "a refused reply is never spoken"
    );
}

/// "jambonz speaks one reply at a time; a reply that starts while another is playing is
/// queued behind it."
#[test]
fn one_reply_at_a_time_the_next_is_queued() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "Thanks for calling."); // 19 chars: 1266 ms at 15/s
    r.chunk("r2", Some(1), "How can I help?");
    r.done("r1", Some(1));
    r.done("r2", Some(1));
    r.until(10_000);
    let lines = r.agent_lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        (lines[0].0.as_str(), lines[0].1.as_str(), lines[0].3),
        ("r1", "Thanks for calling.", 0)
    );
    assert_eq!(
        (lines[1].0.as_str(), lines[1].1.as_str()),
        ("r2", "How can I help?")
    );
    assert_eq!(lines[1].3, 1266, "r2 starts when r1 has been spoken");
}

/// "The floor is free (nothing playing, no turn open, the caller not speaking): spoken at
/// once."
#[test]
fn an_unprompted_reply_on_a_free_floor_is_spoken_at_once() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "Hi.");
    r.done("r1", Some(1));
    r.until(700);
    r.chunk("u1", None, "Are you still there?");
    r.done("u1", None);
    r.until(5000);
    let lines = r.agent_lines();
    assert_eq!(lines[1].0, "u1");
    assert_eq!(lines[1].3, 700);
}

/// "The floor is busy: held, and spoken as soon as the floor is free … One unprompted reply
/// is held at a time; a newer one replaces it (reply_dropped, reason replaced)."
#[test]
fn unprompted_replies_wait_for_the_floor_and_a_newer_one_replaces_the_held_one() {
    let mut r = Rig::new(Script::new().greeting());
    // Turn 1 is open: the floor is busy.
    r.chunk("u1", None, "First thought.");
    r.chunk("u2", None, "Second thought.");
    let dropped = r.events("reply_dropped");
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0]["reply_id"], "u1");
    assert_eq!(dropped[0]["reason"], "replaced");
    r.done("u2", None);
    r.until(300);
    assert!(r.agent_lines().is_empty(), "not over the open turn");
    r.chunk("r1", Some(1), "Hello!"); // 6 chars: 400 ms
    r.done("r1", Some(1));
    r.until(5000);
    let lines = r.agent_lines();
    assert_eq!(
        lines.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        ["r1", "u2"]
    );
    assert_eq!(lines[1].3, 700, "held until the turn's reply was spoken");
}

/// "interrupt: true on its first chunk: whatever is playing is cut off and this reply is
/// spoken now."
#[test]
fn interrupt_cuts_off_what_plays() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "We're open eight to six on weekdays.");
    r.done("r1", Some(1));
    r.until(1100);
    r.send(json!({"type":"reply:chunk","reply_id":"u1","chunk":{"choices":[{"delta":{"content":"Sorry, correction."}}]},"interrupt":true}));
    r.done("u1", None);
    r.until(5000);
    let lines = r.agent_lines();
    assert_eq!(lines[0], ("r1".into(), "We're open eight".into(), true, 0));
    assert_eq!(
        lines[1],
        ("u1".into(), "Sorry, correction.".into(), false, 1100)
    );
    assert!(
        r.events("user_interruption").is_empty(),
        "the caller did not interrupt"
    );
}

/// "interrupt: true on its first chunk: whatever is playing is cut off": when what plays is
/// a turn's reply still streaming, the harness did nothing wrong by finishing it. Its later
/// chunks are not played (it was cut off), and its reply:done still answers the turn: no
/// reply_done deadline, no harness_failure, the turn record is kept.
#[test]
fn a_reply_cut_off_by_an_interrupt_still_answers_its_turn() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "We're open eight to six on weekdays.");
    r.until(1100);
    r.send(json!({"type":"reply:chunk","reply_id":"u1","chunk":{"choices":[{"delta":{"content":"Sorry, correction."}}]},"interrupt":true}));
    r.done("u1", None);
    r.chunk("r1", Some(1), " And Saturdays.");
    r.send(json!({"type":"reply:done","reply_id":"r1","turn_id":1,"turn_record":{"route":"chat"}}));
    r.until(60_000);
    let t = r.sim.transcript();
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    let turn = t.turn(1).unwrap();
    assert_eq!(turn.harness_error, None);
    assert_eq!(turn.completion_reason, "completed");
    assert_eq!(
        turn.turn_record.as_ref().unwrap().route.as_deref(),
        Some("chat")
    );
    assert_eq!(t.heard(), ["We're open eight", "Sorry, correction."]);
    // A second reply:done for it is still a violation.
    let mut r2 = Rig::new(Script::new().greeting());
    r2.chunk("r1", Some(1), "We're open eight to six on weekdays.");
    r2.until(500);
    r2.send(json!({"type":"reply:chunk","reply_id":"u1","chunk":{"choices":[{"delta":{"content":"Now."}}]},"interrupt":true}));
    r2.done("r1", Some(1));
    r2.done("r1", Some(1));
    assert_eq!(
        r2.sim
            .transcript()
            .violations_of(ViolationKind::DeadReply)
            .len(),
        1
    );
}

/// "A caller in mid-utterance is still never talked over."
#[test]
fn interrupt_never_talks_over_a_caller_mid_utterance() {
    let mut r = Rig::new(Script::new().greeting().say("When are you open")); // 17 chars: 1133 ms
    r.chunk("r1", Some(1), "Hi.");
    r.done("r1", Some(1));
    r.until(1000); // Hi. ends at 200 ms; the caller starts at 700 ms
    assert_eq!(r.of("speech:start").len(), 1);
    r.send(json!({"type":"reply:chunk","reply_id":"u1","chunk":{"choices":[{"delta":{"content":"Now!"}}]},"interrupt":true}));
    r.done("u1", None);
    r.until(1800);
    assert!(
        r.agent_lines().iter().all(|l| l.0 != "u1"),
        "not while the caller speaks"
    );
    r.until(3000);
    let lines = r.agent_lines();
    let u1 = lines.iter().find(|l| l.0 == "u1").unwrap();
    assert_eq!(
        u1.3, 1833,
        "played when the caller finished (700 + 1133 ms)"
    );
}

/// Caller speech during playback: user_interruption with spoken/unspoken, then turn:cancel
/// reason barge_in.
#[test]
fn barge_in_gives_user_interruption_then_turn_cancel() {
    let mut r = Rig::new(
        Script::new()
            .greeting()
            .barge_in(Duration::from_millis(1100), "Thanks, bye"),
    );
    r.chunk("r1", Some(1), "We're open eight");
    r.until(500);
    r.chunk("r1", Some(1), " to six on weekdays.");
    r.until(1200);
    let ui = r.events("user_interruption");
    assert_eq!(ui.len(), 1);
    assert_eq!(ui[0]["turn_id"], 1);
    assert_eq!(ui[0]["reply_id"], "r1");
    assert_eq!(ui[0]["spoken"], "We're open eight");
    assert_eq!(ui[0]["unspoken"], " to six on weekdays.");
    let cancel = r.of("turn:cancel");
    assert_eq!(cancel[0]["turn_id"], 1);
    assert_eq!(cancel[0]["reason"], "barge_in");
    let order: Vec<&str> = r
        .got
        .iter()
        .map(|(_, v)| v["type"].as_str().unwrap())
        .collect();
    let i = order.iter().position(|t| *t == "event").unwrap();
    assert_eq!(&order[i..i + 3], ["event", "turn:cancel", "speech:start"]);
    // Chunks that were in flight are dropped without complaint.
    r.chunk("r1", Some(1), " More.");
    r.done("r1", Some(1));
    assert!(
        r.sim.transcript().violations.is_empty(),
        "{:?}",
        r.sim.transcript().violations
    );
    assert_eq!(
        r.sim.transcript().turn(1).unwrap().completion_reason,
        "barge_in"
    );
}

#[test]
fn the_spoken_split_is_at_a_word_boundary() {
    let t = "We're open eight to six on weekdays.";
    assert_eq!(
        split_spoken(t, 16),
        ("We're open eight", " to six on weekdays.")
    );
    assert_eq!(
        split_spoken(t, 17),
        ("We're open eight", " to six on weekdays.")
    );
    assert_eq!(
        split_spoken(t, 14),
        ("We're open", " eight to six on weekdays.")
    );
    assert_eq!(split_spoken(t, 0), ("", t));
    assert_eq!(split_spoken(t, 999), (t, ""));
    assert_eq!(split_spoken("héllo wörld", 7), ("héllo", " wörld"));
}

/// "Tool calls inside chunks (delta.tool_calls) are ignored. To run one of the agent's
/// tools, send tool:call."
#[test]
fn tool_calls_inside_chunks_are_ignored() {
    let mut r = Rig::with(SimConfig::default(), Script::new().greeting(), |s| {
        s.with_tool(Tool::json("get_hours", "", |_| {
            Ok(json!({"weekdays": "8am to 6pm"}))
        }))
    });
    r.send(json!({"type":"reply:chunk","reply_id":"r1","turn_id":1,"chunk":{"choices":[{"delta":{"content":"One moment.","tool_calls":[{"index":0,"id":"x","function":{"name":"get_hours","arguments":"{}"}}]}}]}}));
    r.done("r1", Some(1));
    r.until(3000);
    assert!(r.of("tool:result").is_empty());
    assert_eq!(r.agent_lines()[0].1, "One moment.");
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::ToolCallsInChunk)
            .len(),
        1
    );
}

/// tool:call is answered from the registered tools; an unknown tool gets an error result;
/// a tool slower than the deadline is answered with an error and the turn fails.
#[test]
fn tool_calls_are_answered_from_registered_tools() {
    let mut cfg = SimConfig::default();
    cfg.deadlines.tool_result = Some(Duration::from_secs(2));
    let mut r = Rig::with(cfg, Script::new().greeting(), |s| {
        s.with_tool(Tool::json("get_hours", "", |args| {
            Ok(json!({"weekdays": "8am to 6pm", "asked": args}))
        }))
        .with_slow_tool(
            Tool::json("slow", "", |_| Ok(json!({}))),
            Duration::from_secs(5),
        )
        .with_tool(Tool::json("broken", "", |_| Err("backend down".into())))
    });
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"get_hours","args":{"day":"mon"}}));
    r.send(json!({"type":"tool:call","call_id":"t2","turn_id":1,"name":"nope","args":{}}));
    r.send(json!({"type":"tool:call","call_id":"t3","turn_id":1,"name":"broken","args":{}}));
    let res = r.of("tool:result");
    assert_eq!(res[0]["call_id"], "t1");
    assert_eq!(
        res[0]["result"],
        json!({"weekdays": "8am to 6pm", "asked": {"day": "mon"}})
    );
    assert_eq!(res[1]["call_id"], "t2");
    assert_eq!(res[1]["error"], "unknown tool: nope");
    assert_eq!(res[2]["error"], "backend down");
    r.chunk("r1", Some(1), "Checking.");
    r.send(json!({"type":"tool:call","call_id":"t4","turn_id":1,"name":"slow","args":{}}));
    r.until(1900);
    assert_eq!(r.of("tool:result").len(), 3);
    r.until(2100);
    let res = r.of("tool:result");
    assert_eq!(res[3]["call_id"], "t4");
    assert_eq!(res[3]["error"], "tool timed out");
    let t = r.sim.transcript().turn(1).unwrap();
    assert_eq!(t.completion_reason, "harness_failure");
    assert_eq!(t.harness_error.as_deref(), Some("tool_result_timeout"));
}

/// The platform's tools are a core `Tools`: `session:start`'s `tools` declares each one's
/// definition (name, description, the JSON Schema of its arguments), and a `tool:call` runs
/// its code with the call (`call_id` as the call's id and idempotency key) in the context of
/// the call and turn.
#[test]
fn platform_tools_are_declared_and_run_with_the_call() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let mut schema = serde_json::Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), json!({"day": {"type": "string"}}));
    let hours = Tool::new(
        "get_hours",
        "Opening hours for a day",
        move |call: ToolCall, cx: ToolContext| {
            s2.lock().unwrap().push((call.clone(), cx));
            async move { ToolResult::ok_json(&call.id, json!({"weekdays": "8am to 6pm"})) }
        },
    )
    .with_input_schema(schema);
    let mut r = Rig::with(SimConfig::default(), Script::new().greeting(), |s| {
        s.with_tools(Tools::new().with(hours))
    });
    assert_eq!(
        r.of("session:start")[0]["tools"],
        json!([{
            "name": "get_hours",
            "description": "Opening hours for a day",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
        }])
    );
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"get_hours","args":{"day":"mon"}}));
    assert_eq!(
        r.of("tool:result")[0]["result"],
        json!({"weekdays": "8am to 6pm"})
    );
    let seen = seen.lock().unwrap();
    let (call, cx) = &seen[0];
    assert_eq!((call.id.as_str(), call.tool.as_str()), ("t1", "get_hours"));
    assert_eq!(call.args["day"], "mon");
    assert_eq!(call.idempotency_key, "t1");
    assert_eq!(
        (cx.session_uid.as_str(), cx.execution_id.as_str()),
        ("CA00000000000000000000000000000001", "1")
    );
}

/// The simulator runs on virtual time and has no waker: a tool whose code is still pending
/// when its answer is due is answered with an error (the harness is not left waiting), and
/// one that finishes by then is answered with its result.
#[test]
fn a_tool_still_running_when_its_answer_is_due_gets_an_error() {
    let never = Tool::new("never", "", |_call: ToolCall, _cx: ToolContext| {
        futures::future::pending::<ToolResult>()
    });
    let mut r = Rig::with(SimConfig::default(), Script::new().greeting(), |s| {
        s.with_slow_tool(never, Duration::from_secs(1))
    });
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"never","args":{}}));
    assert!(r.of("tool:result").is_empty());
    r.until(1000);
    let res = r.of("tool:result");
    assert_eq!(res.len(), 1);
    assert_eq!(res[0]["call_id"], "t1");
    assert!(
        res[0]["error"].as_str().unwrap().contains("did not finish"),
        "{:?}",
        res[0]
    );
}

/// "Commands … each gets a command:result." hangup → ok, then session:end harness_hangup
/// with duration_ms; "play, and listen with hints, are not supported yet: they get
/// command:result with ok: false."
#[test]
fn commands_hangup_play_listen() {
    let mut r = Rig::new(Script::new().greeting());
    r.until(2000);
    r.send(json!({"type":"command","command_id":"c1","name":"play","args":{"url":"x"}}));
    r.send(json!({"type":"command","command_id":"c2","name":"listen","args":{"hints":["a"]}}));
    r.send(json!({"type":"command","command_id":"c3","name":"transfer","args":{}}));
    let res = r.of("command:result");
    assert_eq!(
        res.iter()
            .map(|v| (v["command_id"].clone(), v["ok"].clone()))
            .collect::<Vec<_>>(),
        [
            (json!("c1"), json!(false)),
            (json!("c2"), json!(false)),
            (json!("c3"), json!(false))
        ]
    );
    r.until(2250);
    r.send(
        json!({"type":"command","command_id":"c4","name":"hangup","args":{"reason":"resolved"}}),
    );
    let tail: Vec<&Value> = r.got.iter().rev().take(2).map(|(_, v)| v).collect();
    assert_eq!(tail[1]["type"], "command:result");
    assert_eq!(tail[1]["command_id"], "c4");
    assert_eq!(tail[1]["ok"], true);
    assert_eq!(tail[0]["type"], "session:end");
    assert_eq!(tail[0]["reason"], "harness_hangup");
    assert_eq!(tail[0]["duration_ms"], 2250);
    assert!(r.closed && r.sim.is_ended());
    assert_eq!(
        r.sim.transcript().turn(1).unwrap().completion_reason,
        "call_ended"
    );
    r.chunk("r9", None, "late");
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::AfterEnd)
            .len(),
        1
    );
}

/// Deadlines: their expiry is recorded as completion_reason harness_failure with a
/// harness_error.
#[test]
fn deadlines_are_recorded_as_harness_failure() {
    let mut cfg = SimConfig::default();
    cfg.deadlines = Deadlines::default();
    cfg.deadlines.first_chunk = Some(Duration::from_secs(2));
    cfg.deadlines.reply_done = Some(Duration::from_secs(4));
    let mut r = Rig::with(
        cfg,
        Script::new().greeting().say("Hello").say("Anyone?"),
        |s| s,
    );
    r.until(2100);
    let t = r.sim.transcript().turn(1).unwrap().clone();
    assert_eq!(
        (t.completion_reason.as_str(), t.harness_error.as_deref()),
        ("harness_failure", Some("first_chunk_timeout"))
    );
    assert!(r.sim.transcript().turn(2).is_none());
    // The caller speaks once the failed turn no longer holds the floor; turn 2 starts.
    r.until(3500);
    assert_eq!(r.of("turn:start").len(), 2);
    let t2_start = r
        .got
        .iter()
        .find(|(_, v)| v["type"] == "turn:start" && v["turn_id"] == 2)
        .unwrap()
        .0;
    r.chunk("r2", Some(2), "Hi");
    r.until(t2_start + 4100);
    let t = r.sim.transcript().turn(2).unwrap().clone();
    assert_eq!(t.harness_error.as_deref(), Some("reply_done_timeout"));
    // turn:start came at a fractional millisecond; the latency is whole milliseconds.
    let latency = t.first_chunk_ms.unwrap();
    assert!(
        (3500 - t2_start - 1..=3500 - t2_start).contains(&latency),
        "{latency}"
    );
    let failed: Vec<_> = std::iter::from_fn(|| r.sim.poll_event())
        .filter(|e| matches!(e, SimEvent::TurnFailed { .. }))
        .collect();
    assert_eq!(failed.len(), 2);
    // A reply for a failed turn is not spoken.
    r.chunk("r3", Some(1), "late");
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::ClosedTurn)
            .len(),
        1
    );
}

/// The caller's speech: speech:start, partial transcripts word by word, the final one,
/// turn:start with the text and language; the transcript keeps first-chunk latency.
#[test]
fn caller_speech_and_first_chunk_latency() {
    let mut cfg = SimConfig::default();
    cfg.endpointing = Duration::from_millis(300);
    let mut r = Rig::with(
        cfg,
        Script::new().greeting().say("When are you open").hang_up(),
        |s| s,
    );
    r.until(250);
    r.chunk("r1", Some(1), "Hi.");
    r.done("r1", Some(1));
    r.until(60_000);
    let texts: Vec<(String, bool)> = r
        .of("transcript")
        .iter()
        .map(|v| {
            (
                v["text"].as_str().unwrap().to_owned(),
                v["final"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("When".into(), false),
            ("When are".into(), false),
            ("When are you".into(), false),
            ("When are you open".into(), true)
        ]
    );
    let speech = r
        .got
        .iter()
        .find(|(_, v)| v["type"] == "speech:start")
        .unwrap();
    assert_eq!(speech.1["turn_id"], 2);
    assert_eq!(
        speech.0,
        250 + 200 + 500,
        "after Hi. (200 ms) and a 500 ms pause"
    );
    let fin = r
        .got
        .iter()
        .find(|(_, v)| v["type"] == "transcript" && v["final"] == true)
        .unwrap()
        .0;
    let ts = r
        .got
        .iter()
        .find(|(_, v)| v["type"] == "turn:start" && v["turn_id"] == 2)
        .unwrap();
    assert_eq!(ts.0, fin + 300);
    assert_eq!(
        ts.1["input"],
        json!({"type":"speech","text":"When are you open","language":"en-US"})
    );
    assert_eq!(
        r.sim.transcript().turn(1).unwrap().first_chunk_ms,
        Some(250)
    );
    // No reply to turn 2: it fails at the first-chunk deadline, then the caller hangs up.
    let end = r.of("session:end")[0];
    assert_eq!(end["reason"], "caller_hangup");
    assert!(end["duration_ms"].as_u64().unwrap() > 5000);
}

/// Ids "must be unique within the call"; "There are no binary frames"; frames that are not
/// messages: recorded, the call goes on.
#[test]
fn rule_breaking_frames_are_recorded_and_the_call_goes_on() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "One.");
    r.done("r1", Some(1));
    r.chunk("r1", Some(1), "Again?");
    r.sim.handle_binary(r.now);
    r.sim.handle_frame(r.now, "{not json");
    r.send(json!({"type":"reply:flourish"}));
    r.send(json!({"type":"reply:chunk","reply_id":"r2","turn_id":1,"chunk":{"choices":[{"delta":{"content":"x"}}]},"interrupt":false}));
    r.send(json!({"type":"reply:chunk","reply_id":"r2","turn_id":1,"chunk":{"choices":[]},"interrupt":true}));
    let v = &r.sim.transcript().violations;
    let kinds: Vec<ViolationKind> = v.iter().map(|v| v.kind).collect();
    assert_eq!(
        kinds,
        [
            ViolationKind::DeadReply,
            ViolationKind::Binary,
            ViolationKind::Malformed,
            ViolationKind::UnknownType,
            ViolationKind::InterruptNotFirst
        ]
    );
    r.send(json!({"type":"reply:done","reply_id":"r3","turn_id":1}));
    r.send(json!({"type":"reply:done","reply_id":"r3","turn_id":1}));
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::DuplicateId)
            .len(),
        1
    );
    let big = "x".repeat(20_000);
    r.send(json!({"type":"reply:done","reply_id":"r2","turn_id":1,"turn_record":{"note":big}}));
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::TurnRecordTooLarge)
            .len(),
        1
    );
    r.until(5000);
    assert_eq!(r.sim.transcript().heard(), ["One.", "x"]);
}

/// The harness closing the socket ends the call; open turns fail.
#[test]
fn a_harness_that_closes_the_socket() {
    let mut r = Rig::new(Script::new().greeting());
    r.sim.handle_close(r.now, 4000, "unsupported protocol");
    assert!(r.sim.is_ended());
    let t = r.sim.transcript();
    assert_eq!(
        t.closed_by_harness,
        Some((4000, "unsupported protocol".into()))
    );
    assert_eq!(
        t.turn(1).unwrap().harness_error.as_deref(),
        Some("connection_closed")
    );
}

/// A reply:done with a turn record: kept in the turn's summary.
#[test]
fn the_turn_record_is_kept() {
    let mut r = Rig::new(Script::new().greeting());
    r.chunk("r1", Some(1), "Hi.");
    r.send(json!({"type":"reply:done","reply_id":"r1","turn_id":1,"turn_record":{"route":"chat","model_calls":1}}));
    let rec = r
        .sim
        .transcript()
        .turn(1)
        .unwrap()
        .turn_record
        .clone()
        .unwrap();
    assert_eq!(rec.route.as_deref(), Some("chat"));
    assert_eq!(rec.extra["model_calls"], 1);
}

/// Absurd configuration never panics the simulator.
#[test]
fn absurd_configuration_never_panics() {
    let mut cfg = SimConfig::default();
    cfg.caller_rate = 1e-300;
    cfg.speaking_rate = f64::NAN;
    cfg.max_call = Duration::MAX;
    cfg.idle_hangup = Duration::MAX;
    cfg.endpointing = Duration::MAX;
    cfg.deadlines.first_chunk = Some(Duration::MAX);
    cfg.deadlines.reply_done = Some(Duration::MAX);
    cfg.deadlines.tool_result = Some(Duration::MAX);
    let mut r = Rig::with(cfg, Script::new().greeting().say("hello there"), |s| {
        s.with_slow_tool(Tool::json("t", "", |_| Ok(json!({}))), Duration::MAX)
    });
    r.chunk("r1", Some(1), "Hi.");
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"t","args":{}}));
    r.done("r1", Some(1));
    r.until(10_000);
    assert!(!r.sim.is_ended());
}

/// A harness that floods the call with new ids (a new reply, tool call or command per
/// frame) never makes the simulator hold them without bound: past `max_ids` the caller
/// hangs up, and the flood is a violation.
#[test]
fn a_harness_flooding_new_ids_is_hung_up_on() {
    let mut cfg = SimConfig::default();
    cfg.max_ids = 50;
    let mut r = Rig::with(cfg, Script::new().greeting(), |s| s);
    for i in 0..40 {
        // Refused (turn 9 has not started): still an id the call must remember.
        r.chunk(&format!("x{i}"), Some(9), "no");
    }
    for i in 0..5 {
        r.send(json!({"type":"tool:call","call_id":format!("t{i}"),"turn_id":1,"name":"nope","args":{}}));
        r.send(json!({"type":"command","command_id":format!("c{i}"),"name":"play","args":{}}));
    }
    assert!(!r.sim.is_ended(), "50 ids are allowed");
    r.chunk("x50", Some(1), "one too many");
    assert!(r.sim.is_ended());
    let t = r.sim.transcript();
    assert_eq!(t.ended.as_ref().unwrap().0, "caller_hangup");
    assert_eq!(t.violations_of(ViolationKind::TooManyIds).len(), 1);
    assert_eq!(r.of("session:end").len(), 1);
}

/// The transcript keeps at most `MAX_VIOLATIONS` violations and counts the rest: a harness
/// that keeps sending garbage (or keeps sending after the call ended) cannot grow it
/// without bound.
#[test]
fn violations_are_bounded_and_counted() {
    use harness_jambonz::simulator::MAX_VIOLATIONS;
    let mut r = Rig::new(Script::new().greeting());
    let n = MAX_VIOLATIONS + 500;
    for _ in 0..n {
        r.sim.handle_frame(r.now, "{not json");
    }
    let t = r.sim.transcript();
    assert_eq!(t.violations.len(), MAX_VIOLATIONS);
    assert_eq!(t.violations_dropped, 500);
    assert!(t.to_string().contains("500 more violations"));
}

/// One reply's text is bounded (`max_reply_bytes`): what is past it is not kept (nor
/// spoken), and that is a violation, recorded once.
#[test]
fn a_reply_is_bounded() {
    let mut cfg = SimConfig::default();
    cfg.max_reply_bytes = 20;
    let mut r = Rig::with(cfg, Script::new().greeting(), |s| s);
    r.chunk("r1", Some(1), "Héllo there, ");
    for _ in 0..100 {
        r.chunk("r1", Some(1), "and more ");
    }
    r.done("r1", Some(1));
    r.until(30_000);
    let t = r.sim.transcript();
    assert_eq!(t.heard(), ["Héllo there, and mo"]);
    assert_eq!(t.violations_of(ViolationKind::ReplyTooLong).len(), 1);
    assert_eq!(t.turn(1).unwrap().completion_reason, "completed");
}

/// Long ids and long details do not make the bound on ids a bound on nothing: an id over
/// `MAX_ID_BYTES` is refused (a violation, the frame ignored, nothing kept), and what a
/// violation keeps of the frame is short.
#[test]
fn long_ids_are_refused_and_violations_stay_small() {
    use harness_jambonz::simulator::MAX_ID_BYTES;
    let mut r = Rig::new(Script::new().greeting());
    let long = "r".repeat(100_000);
    r.chunk(&long, Some(1), "Hi.");
    r.send(json!({"type":"tool:call","call_id":long,"turn_id":1,"name":"get_hours","args":{}}));
    r.send(json!({"type":"command","command_id":long,"name":"hangup","args":{}}));
    assert!(
        !r.sim.is_ended(),
        "a hangup with a refused id is not carried out"
    );
    assert!(r.of("tool:result").is_empty() && r.of("command:result").is_empty());
    r.chunk(&"r".repeat(MAX_ID_BYTES), Some(1), "Hello.");
    r.done(&"r".repeat(MAX_ID_BYTES), Some(1));
    r.until(5_000);
    let t = r.sim.transcript();
    assert_eq!(t.heard(), ["Hello."]);
    assert_eq!(t.violations.len(), 3, "{:?}", t.violations);
    for v in &t.violations {
        assert_eq!(v.kind, ViolationKind::Malformed);
        assert!(v.detail.len() <= 300, "{}", v.detail.len());
    }
    // Any violation's detail is bounded, whatever it quotes.
    r.sim
        .handle_frame(r.now, &format!("{{\"type\":\"{}\"}}", "x".repeat(100_000)));
    assert!(
        r.sim
            .transcript()
            .violations
            .iter()
            .all(|v| v.detail.len() <= 300)
    );
}

/// The whole call: "turn:start … tool:call … tool:result … reply:chunk": the turn's first
/// chunk naturally follows the agent's tool, which jambonz itself runs. The time jambonz
/// spends running it is not the harness's delay: the first-chunk deadline does not count
/// it (the turn's latency, what the caller waited, still does).
#[test]
fn the_first_chunk_deadline_does_not_count_the_time_jambonz_runs_a_tool() {
    let mut cfg = SimConfig::default();
    cfg.deadlines.first_chunk = Some(Duration::from_secs(2));
    let mut r = Rig::with(cfg.clone(), Script::new().greeting(), |s| {
        s.with_slow_tool(
            Tool::json("get_hours", "", |_| Ok(json!({"weekdays": "8am to 6pm"}))),
            Duration::from_secs(3),
        )
    });
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"get_hours","args":{}}));
    r.until(3000);
    assert_eq!(r.of("tool:result").len(), 1);
    r.until(3100);
    r.chunk("r1", Some(1), "We're open eight to six.");
    r.done("r1", Some(1));
    r.until(10_000);
    let t = r.sim.transcript();
    assert!(t.violations.is_empty(), "{:?}", t.violations);
    let turn = t.turn(1).unwrap();
    assert_eq!(turn.harness_error, None);
    assert_eq!(turn.completion_reason, "completed");
    assert_eq!(turn.first_chunk_ms, Some(3100));

    // The harness's own time still counts: 1.5 s before the tool, 0.6 s after it.
    let mut r = Rig::with(cfg, Script::new().greeting(), |s| {
        s.with_slow_tool(
            Tool::json("get_hours", "", |_| Ok(json!({}))),
            Duration::from_secs(3),
        )
    });
    r.until(1500);
    r.send(json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"get_hours","args":{}}));
    r.until(4999);
    assert_eq!(r.sim.transcript().turn(1).unwrap().harness_error, None);
    r.until(5001);
    assert_eq!(
        r.sim.transcript().turn(1).unwrap().harness_error.as_deref(),
        Some("first_chunk_timeout")
    );
}
