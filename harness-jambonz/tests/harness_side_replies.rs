//! The harness side against the spec's "Replies": a reply for a turn only after its
//! `turn:start`, `interrupt` on a first chunk, `tool:call` and its result, and "The turn
//! record" that ends a reply (up to 16 KB). Each rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Instant;

use harness_jambonz::command::JambonzCommand;
use harness_jambonz::frame::HarnessMessage;
use harness_jambonz::harness_side::{
    ActionError, CallEvent, HarnessCall, JambonzFrameError, Transmit,
};
use harness_jambonz::turn_record::TurnRecord;
use proptest::prelude::*;
use serde_json::{Map, json};

mod common;
use common::{START, cancel, drain_events, sent, started, turn};

/// "A reply with a turn_id answers that turn, and is accepted only after that turn's
/// turn:start." "A reply without a turn_id is the harness speaking on its own initiative."
#[test]
fn no_reply_for_a_turn_before_its_turn_start() {
    let (mut c, now) = started();
    assert_eq!(c.start_reply(Some(1)), Err(ActionError::TurnNotStarted(1)));
    assert_eq!(
        c.call_tool(1, "get_hours", Map::new()),
        Err(ActionError::TurnNotStarted(1))
    );
    assert!(sent(&mut c).is_empty());
    let u = c.start_reply(None).unwrap();
    c.push_chunk(&u, "Are you still there?").unwrap();
    let out = sent(&mut c);
    assert_eq!(out[0]["type"], "reply:chunk");
    assert!(out[0].get("turn_id").is_none());
    c.handle_frame(now, &turn(1)).unwrap();
    assert!(c.start_reply(Some(1)).is_ok());
}

/// "interrupt: true on its first chunk".
#[test]
fn interrupt_goes_on_the_first_chunk_only() {
    let (mut c, _) = started();
    let r = c.start_interrupting_reply(None).unwrap();
    c.push_chunk(&r, "Sorry, ").unwrap();
    c.push_chunk(&r, "one more thing.").unwrap();
    assert_eq!(
        c.push_raw_chunk(&r, harness_jambonz::reply::Chunk::text("x"), true),
        Err(ActionError::InterruptNotFirst)
    );
    let out = sent(&mut c);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["interrupt"], true);
    assert!(out[1].get("interrupt").is_none());
    let r = c.start_reply(None).unwrap();
    c.push_raw_chunk(&r, harness_jambonz::reply::Chunk::text("x"), true)
        .unwrap();
    assert_eq!(sent(&mut c)[0]["interrupt"], true);
}

/// "Up to 16 KB": a larger turn record is refused and the reply stays open.
#[test]
fn a_turn_record_over_16_kb_is_refused_and_the_reply_stays_open() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(1)).unwrap();
    let r = c.start_reply(Some(1)).unwrap();
    c.push_chunk(&r, "hi").unwrap();
    sent(&mut c);
    let big = TurnRecord::default().with_note("x".repeat(17 * 1024));
    assert!(matches!(
        c.finish_reply(&r, Some(big)),
        Err(ActionError::TurnRecordTooLarge(_))
    ));
    assert!(sent(&mut c).is_empty());
    c.finish_reply(&r, Some(TurnRecord::default().with_route("chat")))
        .unwrap();
    let out = sent(&mut c);
    assert_eq!(
        out[0],
        json!({"type":"reply:done","reply_id":r,"turn_id":1,"turn_record":{"route":"chat"}})
    );
    assert_eq!(
        c.push_chunk(&r, "late"),
        Err(ActionError::UnknownReply(r.clone()))
    );
}

/// tool:call {call_id, turn_id, name, args} → tool:result {call_id, result}.
#[test]
fn tool_results_come_back_to_their_call() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(2)).unwrap();
    drain_events(&mut c);
    let id = c.call_tool(2, "get_hours", Map::new()).unwrap();
    assert_eq!(
        sent(&mut c)[0],
        json!({"type":"tool:call","call_id":id,"turn_id":2,"name":"get_hours","args":{}})
    );
    assert_eq!(
        c.handle_frame(now, r#"{"type":"tool:result","call_id":"t99","result":{}}"#),
        Err(JambonzFrameError::UnknownCallId("t99".into()))
    );
    let f = json!({"type":"tool:result","call_sid":"CA1","call_id":id,"result":{"weekdays":"8am to 6pm"}});
    c.handle_frame(now, &f.to_string()).unwrap();
    let evs = drain_events(&mut c);
    let [
        CallEvent::ToolResult {
            turn_id,
            name,
            result,
        },
    ] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    assert_eq!((*turn_id, name.as_str()), (Some(2), "get_hours"));
    assert_eq!(
        result.to_tool_result().output.unwrap()["weekdays"],
        "8am to 6pm"
    );
    assert_eq!(c.pending_tool_calls(), 0);
    // The simulator's error form.
    let id = c.call_tool(2, "nope", Map::new()).unwrap();
    c.handle_frame(
        now,
        &json!({"type":"tool:result","call_id":id,"error":"unknown tool: nope"}).to_string(),
    )
    .unwrap();
    let evs = drain_events(&mut c);
    let [CallEvent::ToolResult { result, .. }] = &evs[..] else {
        panic!()
    };
    assert!(result.to_tool_result().is_error);
}

#[derive(Clone, Debug)]
enum Input {
    Start(u8),
    Turn(u8),
    Cancel(u8),
    ToolResult(u8),
    CommandResult(u8, bool),
    Unknown,
    Malformed(String),
    Binary,
    End,
    Raw(String),
}

#[derive(Clone, Debug)]
enum Act {
    Reply(Option<u8>),
    Chunk(u8),
    Finish(u8),
    Tool(u8),
    Command,
}

fn arb_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        (0u8..3).prop_map(Input::Start),
        (0u8..4).prop_map(Input::Turn),
        (0u8..4).prop_map(Input::Cancel),
        (0u8..6).prop_map(Input::ToolResult),
        ((0u8..4), any::<bool>()).prop_map(|(a, b)| Input::CommandResult(a, b)),
        Just(Input::Unknown),
        "[{}\\[\\]\":a-z0-9 ]{0,20}".prop_map(Input::Malformed),
        Just(Input::Binary),
        Just(Input::End),
        any::<String>().prop_map(Input::Raw),
    ]
}

fn arb_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        prop::option::of(0u8..4).prop_map(Act::Reply),
        (0u8..8).prop_map(Act::Chunk),
        (0u8..8).prop_map(Act::Finish),
        (0u8..4).prop_map(Act::Tool),
        Just(Act::Command),
    ]
}

proptest! {
    /// Random sequences of inbound frames (valid, unknown, malformed, out of order) never
    /// panic and never make the harness side send a reply (or a tool call) for a turn not yet
    /// started or already cancelled.
    ///
    /// The app drains `poll_transmit` only at some steps (`drain`), so frames queued for a
    /// turn may still wait there when its `turn:cancel` arrives: "under any interleaving".
    #[test]
    fn never_a_reply_for_a_turn_not_started_or_cancelled(
        with_start in prop::bool::weighted(0.9),
        steps in prop::collection::vec((arb_input(), prop::collection::vec(arb_act(), 0..4), any::<bool>()), 0..40)
    ) {
        let now = Instant::now();
        let mut c = HarnessCall::new();
        // Mostly a started call, so that turns, replies and cancels meet often.
        if with_start {
            let _ = c.handle_frame(now, START);
        }
        let mut started: HashSet<u64> = HashSet::new();
        let mut cancelled: HashSet<u64> = HashSet::new();
        let mut replies: Vec<String> = Vec::new();
        for (input, acts, drain) in steps {
            let frame = match input {
                Input::Start(p) => Some(json!({"type":"session:start","protocol":p}).to_string()),
                Input::Turn(t) => Some(turn(u64::from(t))),
                Input::Cancel(t) => Some(cancel(u64::from(t))),
                Input::ToolResult(i) => Some(json!({"type":"tool:result","call_id":format!("t{i}"),"result":{}}).to_string()),
                Input::CommandResult(i, ok) => Some(json!({"type":"command:result","command_id":format!("c{i}"),"ok":ok}).to_string()),
                Input::Unknown => Some(r#"{"type":"zzz"}"#.to_owned()),
                Input::Malformed(s) | Input::Raw(s) => Some(s),
                Input::Binary => None,
                Input::End => Some(r#"{"type":"session:end","reason":"caller_hangup"}"#.to_owned()),
            };
            match frame {
                Some(f) => { let _ = c.handle_frame(now, &f); }
                None => { let _ = c.handle_binary(now); }
            }
            while let Some(ev) = c.poll_event() {
                match ev {
                    CallEvent::TurnStarted(t) => { started.insert(t.turn_id.unwrap()); }
                    CallEvent::TurnCancelled(t) => { cancelled.insert(t.turn_id.unwrap()); }
                    _ => {}
                }
            }
            for a in acts {
                match a {
                    Act::Reply(t) => { if let Ok(r) = c.start_reply(t.map(u64::from)) { replies.push(r); } }
                    Act::Chunk(i) => { if let Some(r) = replies.get(usize::from(i)) { let _ = c.push_chunk(&r.clone(), "x"); } }
                    Act::Finish(i) => { if let Some(r) = replies.get(usize::from(i)) { let _ = c.finish_reply(&r.clone(), None); } }
                    Act::Tool(t) => { let _ = c.call_tool(u64::from(t), "x", Map::new()); }
                    Act::Command => { let _ = c.send_command(JambonzCommand::Play(Map::new())); }
                }
            }
            if !drain {
                continue;
            }
            while let Some(t) = c.poll_transmit() {
                let Transmit::Text(s) = t else { continue };
                let m = HarnessMessage::decode(&s).unwrap();
                let turn_id = match &m {
                    HarnessMessage::ReplyChunk(x) => x.turn_id,
                    HarnessMessage::ReplyDone(x) => x.turn_id,
                    HarnessMessage::ToolCall(x) => x.turn_id,
                    _ => None,
                };
                if let Some(t) = turn_id {
                    prop_assert!(started.contains(&t), "sent for turn {} before its turn:start: {}", t, s);
                    prop_assert!(!cancelled.contains(&t), "sent for cancelled turn {}: {}", t, s);
                }
            }
        }
    }
}
