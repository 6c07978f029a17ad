//! The simulator against a hostile or buggy harness: what the probes of `jambonz_call`
//! against `scripts/interop/jambonz/hostile_harness.mjs` found. Each test drives the
//! simulator with raw harness frames on a virtual clock and cites the spec.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use harness_core::Tool;
use harness_jambonz::simulator::{Script, SimConfig, ViolationKind};
use serde_json::{Value, json};

mod common;
use common::Rig;

/// The spec's whole call: a greeting, a question, a barge-in.
fn whole_call() -> Script {
    Script::new()
        .greeting()
        .say("When are you open")
        .barge_in(Duration::from_millis(1100), "Thanks, bye")
}

/// "jambonz speaks one reply at a time; a reply that starts while another is playing is
/// queued behind it." When the caller barges in, a queued reply is not played over the new
/// speech, so its turn ends like the one that was playing: turn:cancel reason barge_in
/// ("turn:cancel {turn_id: 2, reason: "barge_in"}"), even though its reply:done came. Before,
/// the turn stayed "completed" and the harness was never told that its answer went unheard.
#[test]
fn a_barge_in_cancels_an_answered_turn_whose_reply_was_still_queued() {
    let mut r = Rig::new(whole_call());
    r.chunk("r1", Some(1), "Hi.");
    r.done("r1", Some(1));
    r.until(800); // Hi. ends at 200 ms; the caller starts at 700 ms
    assert_eq!(r.of("speech:start").len(), 1);
    // An interrupting unprompted reply waits for the caller, then plays first.
    r.send(json!({"type":"reply:chunk","reply_id":"u1","chunk":{"choices":[{"delta":{"content":"One moment please, I am looking."}}]},"interrupt":true}));
    r.done("u1", None);
    r.until(1900); // the caller's turn 2 starts at 700 + 1133 ms
    assert_eq!(r.of("turn:start").len(), 2);
    r.chunk("r2", Some(2), "We're open eight to six.");
    r.done("r2", Some(2));
    r.until(4000); // u1 plays from 1833 ms; the caller barges in 1100 ms later
    assert_eq!(r.of("speech:start").len(), 2);
    assert!(
        r.agent_lines()
            .iter()
            .all(|l| l.0 != "r2" || l.1.is_empty()),
        "r2 was not heard"
    );
    let cancels: Vec<&Value> = r.of("turn:cancel");
    assert!(
        cancels
            .iter()
            .any(|c| c["turn_id"] == 2 && c["reason"] == "barge_in"),
        "turn 2's reply was dropped unheard: {cancels:?}"
    );
    assert_eq!(
        r.sim.transcript().turn(2).unwrap().completion_reason,
        "barge_in"
    );
}

/// A harness that never answers: "Each failure is in … the turn's record … (completion_reason:
/// "harness_failure" with a harness_error)", and the call goes on. The whole call's
/// barge-in step ("the caller says `text` `after` the next reply starts playing") has no reply
/// to speak over; the caller says it once the call is quiet instead of waiting for the
/// 10-minute `max_call` (what `jambonz_call` against a silent harness did).
#[test]
fn a_silent_harness_does_not_hold_the_call_until_max_call() {
    let mut r = Rig::new(whole_call());
    r.until(30_000);
    assert!(r.sim.is_ended(), "{}", r.sim.transcript());
    let t = r.sim.transcript();
    assert_eq!(t.turns.len(), 3, "{t}");
    for turn in &t.turns {
        assert_eq!(turn.completion_reason, "harness_failure", "{t}");
        assert_eq!(turn.harness_error.as_deref(), Some("first_chunk_timeout"));
    }
    assert_eq!(t.ended.as_ref().unwrap().0, "caller_hangup");
}

/// An unprompted reply on a free floor is "spoken at once"; one that never gets its
/// reply:done would hold the floor for ever (nothing else plays, the caller waits for
/// quiet). It is held to the reply deadline as a turn's reply is: cut off at expiry, a
/// violation, and the call goes on.
#[test]
fn an_unprompted_reply_that_never_finishes_is_cut_at_the_reply_deadline() {
    let mut r = Rig::new(Script::new().greeting().say("When are you open"));
    r.chunk("r1", Some(1), "Hi.");
    r.done("r1", Some(1));
    r.until(300); // Hi. ends at 200 ms: the floor is free
    r.chunk("u1", None, "And another thing");
    r.until(29_000);
    assert_eq!(r.of("speech:start").len(), 0, "u1 still holds the floor");
    r.until(30_400);
    let lines = r.agent_lines();
    let u1 = lines.iter().find(|l| l.0 == "u1").unwrap();
    assert!(u1.2, "cut off: {lines:?}");
    assert_eq!(u1.1, "And another thing");
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::ReplyDoneTimeout)
            .len(),
        1
    );
    // Its reply:done in flight changes nothing; later chunks are not played.
    r.chunk("u1", None, " more");
    r.done("u1", None);
    assert_eq!(
        r.sim.transcript().violations.len(),
        1,
        "{:?}",
        r.sim.transcript().violations
    );
    r.until(32_000);
    assert_eq!(r.of("speech:start").len(), 1, "the caller speaks after it");
}

/// A `tool:call` whose `args` are not an object is malformed, but its `call_id` is readable:
/// jambonz answers it with an error result ("tool:result {call_id, result}", the simulator's
/// error form `{call_id, error}`), as it does an unknown tool, instead of leaving the
/// harness waiting for a result that never comes.
#[test]
fn a_malformed_tool_call_still_gets_an_error_result() {
    let mut r = Rig::with(SimConfig::default(), Script::new().greeting(), |s| {
        s.with_tool(Tool::json("get_hours", "", |_| {
            Ok(json!({"weekdays": "8am to 6pm"}))
        }))
    });
    r.send(
        json!({"type":"tool:call","call_id":"t1","turn_id":1,"name":"get_hours","args":"a string"}),
    );
    r.send(json!({"type":"tool:call","call_id":"t2","turn_id":"1","name":"get_hours","args":{}}));
    r.send(json!({"type":"tool:call","call_id":7,"turn_id":1,"name":"get_hours","args":{}}));
    let results = r.of("tool:result");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["call_id"], "t1");
    assert!(results[0]["error"].is_string(), "{:?}", results[0]);
    assert!(results[0].get("result").is_none());
    assert_eq!(results[1]["call_id"], "t2");
    assert!(results[1]["error"].is_string());
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::Malformed)
            .len(),
        3
    );
}

/// "Commands: Sent as {type: "command", command_id, name, args}; each gets a
/// command:result." A command with a readable `command_id` but malformed fields gets
/// `ok: false` (a malformed hangup does not hang up).
#[test]
fn a_malformed_command_still_gets_a_command_result() {
    let mut r = Rig::new(Script::new().greeting());
    r.send(json!({"type":"command","command_id":"c1","name":"hangup","args":"now"}));
    r.send(json!({"type":"command","command_id":"c2","name":5,"args":{}}));
    let results = r.of("command:result");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["command_id"], "c1");
    assert_eq!(results[0]["ok"], false);
    assert_eq!(results[1]["command_id"], "c2");
    assert_eq!(results[1]["ok"], false);
    assert!(!r.sim.is_ended());
    // Its id is used: a well-formed command reusing it is a duplicate.
    r.send(json!({"type":"command","command_id":"c1","name":"play","args":{}}));
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::DuplicateId)
            .len(),
        1
    );
}

/// The turn record is optional ("Every field is optional"): a `reply:done` whose
/// `turn_record` is not an object still ends its reply and answers its turn (the record is
/// dropped, a violation). Before, the whole `reply:done` was thrown away: the reply never
/// ended, the call stalled for the 30 s reply deadline and the turn failed with
/// `reply_done_timeout`, which named the wrong fault.
#[test]
fn a_reply_done_with_a_turn_record_that_is_not_an_object_still_ends_the_reply() {
    let mut r = Rig::new(Script::new().greeting().say("When are you open"));
    r.chunk("r1", Some(1), "Hi.");
    r.send(json!({"type":"reply:done","reply_id":"r1","turn_id":1,"turn_record":"not an object"}));
    r.until(1000);
    let t = r.sim.transcript();
    let turn = t.turn(1).unwrap();
    assert_eq!(turn.completion_reason, "completed", "{t}");
    assert!(turn.turn_record.is_none());
    assert_eq!(r.agent_lines()[0].1, "Hi.");
    assert!(!r.agent_lines()[0].2, "not cut off");
    assert_eq!(r.of("speech:start").len(), 1, "the caller went on");
    assert_eq!(t.violations_of(ViolationKind::Malformed).len(), 1);
    // A reply:done whose reply_id is unreadable cannot be salvaged.
    r.send(json!({"type":"reply:done","reply_id":5,"turn_record":[1]}));
    assert_eq!(
        r.sim
            .transcript()
            .violations_of(ViolationKind::Malformed)
            .len(),
        2
    );
}
