//! The harness side against the spec's "A whole call": ids made here and unique within the
//! call, `turn:cancel` (nothing more sent for the turn), the turns remembered, and
//! `session:end` (nothing sent after it). Each rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Instant;

use harness_jambonz::command::JambonzCommand;
use harness_jambonz::harness_side::{
    ActionError, CallEvent, HarnessCall, HarnessConfig, JambonzFrameError,
};
use serde_json::{Map, Value, json};

mod common;
use common::{START, cancel, drain_events, sent, started, turn};

/// "Ids (reply_id, call_id, command_id) are yours to choose and must be unique within the call."
#[test]
fn ids_are_made_here_and_unique_within_the_call() {
    let (mut c, now) = started();
    let mut ids = HashSet::new();
    for t in 1..=20 {
        c.handle_frame(now, &turn(t)).unwrap();
        let r = c.start_reply(Some(t)).unwrap();
        c.push_chunk(&r, "x").unwrap();
        c.finish_reply(&r, None).unwrap();
        let u = c.start_reply(None).unwrap();
        c.push_chunk(&u, "y").unwrap();
        let tc = c.call_tool(t, "get_hours", Map::new()).unwrap();
        let cm = c.send_command(JambonzCommand::Play(Map::new())).unwrap();
        for id in [r, u, tc, cm] {
            assert!(ids.insert(id.clone()), "{id} reused");
        }
    }
    for v in sent(&mut c) {
        for k in ["reply_id", "call_id", "command_id"] {
            if let Some(id) = v.get(k) {
                assert!(ids.contains(id.as_str().unwrap()));
            }
        }
    }
}

/// turn:cancel: nothing more is sent for the turn; the app is told and chunks are dropped.
#[test]
fn nothing_more_is_sent_for_a_cancelled_turn() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(2)).unwrap();
    let r = c.start_reply(Some(2)).unwrap();
    c.push_chunk(&r, "We're open").unwrap();
    assert_eq!(sent(&mut c).len(), 1);
    c.handle_frame(now, &cancel(2)).unwrap();
    assert!(
        drain_events(&mut c)
            .iter()
            .any(|e| matches!(e, CallEvent::TurnCancelled(t) if t.turn_id == Some(2)))
    );
    assert_eq!(
        c.push_chunk(&r, " eight to six"),
        Err(ActionError::TurnCancelled(2))
    );
    assert_eq!(c.finish_reply(&r, None), Err(ActionError::TurnCancelled(2)));
    assert_eq!(c.start_reply(Some(2)), Err(ActionError::TurnCancelled(2)));
    assert_eq!(
        c.call_tool(2, "get_hours", Map::new()),
        Err(ActionError::TurnCancelled(2))
    );
    assert!(sent(&mut c).is_empty());
    assert!(c.is_turn_cancelled(2));
}

/// turn:cancel under any interleaving: frames made for the turn but not yet taken from
/// `poll_transmit` when the cancel arrives are never sent ("Send nothing more for the turn"),
/// and a `tool:call` dropped that way waits for no `tool:result`. Frames of other turns and
/// unprompted replies still go, in order.
#[test]
fn frames_still_queued_when_their_turn_is_cancelled_are_not_sent() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(2)).unwrap();
    c.handle_frame(now, &turn(3)).unwrap();
    let r2 = c.start_reply(Some(2)).unwrap();
    c.push_chunk(&r2, "We're open").unwrap();
    let t2 = c.call_tool(2, "get_hours", Map::new()).unwrap();
    let u = c.start_reply(None).unwrap();
    c.push_chunk(&u, "One moment.").unwrap();
    let r3 = c.start_reply(Some(3)).unwrap();
    c.push_chunk(&r3, "Yes.").unwrap();
    c.finish_reply(&r3, None).unwrap();
    assert_eq!(c.pending_transmits(), 5);
    assert_eq!(c.pending_tool_calls(), 1);
    // jambonz cancels turn 2 before the app drained what it queued.
    c.handle_frame(now, &cancel(2)).unwrap();
    let out = sent(&mut c);
    assert!(
        out.iter().all(|v| v["turn_id"] != 2),
        "sent for cancelled turn 2: {out:?}"
    );
    let kinds: Vec<(&str, &Value)> = out
        .iter()
        .map(|v| (v["type"].as_str().unwrap(), &v["reply_id"]))
        .collect();
    assert_eq!(
        kinds,
        [
            ("reply:chunk", &json!(u)),
            ("reply:chunk", &json!(r3)),
            ("reply:done", &json!(r3)),
        ]
    );
    // The tool:call never went out: no tool:result is awaited for it.
    assert_eq!(c.pending_tool_calls(), 0);
    assert_eq!(
        c.handle_frame(
            now,
            &json!({"type":"tool:result","call_id":t2,"result":{}}).to_string()
        ),
        Err(JambonzFrameError::UnknownCallId(t2))
    );
    // A tool:call already taken from poll_transmit (sent) still gets its result after the
    // cancel.
    c.handle_frame(now, &turn(4)).unwrap();
    let t4 = c.call_tool(4, "get_hours", Map::new()).unwrap();
    assert_eq!(sent(&mut c).len(), 1);
    c.handle_frame(now, &cancel(4)).unwrap();
    assert_eq!(c.pending_tool_calls(), 1);
    c.handle_frame(
        now,
        &json!({"type":"tool:result","call_id":t4,"result":{}}).to_string(),
    )
    .unwrap();
}

/// A peer that starts turn after turn never grows the call without bound.
#[test]
fn turns_are_bounded() {
    let now = Instant::now();
    let mut cfg = HarnessConfig::default();
    cfg.max_turns = 8;
    let mut c = HarnessCall::with_config(cfg);
    c.handle_frame(now, START).unwrap();
    for t in 1..=100 {
        c.handle_frame(now, &turn(t)).unwrap();
    }
    assert!(c.is_turn_open(100));
    assert!(c.is_turn_open(93));
    assert!(!c.is_turn_open(92), "forgotten");
    assert_eq!(c.start_reply(Some(1)), Err(ActionError::TurnNotStarted(1)));
}

/// A turn forgotten past `max_turns` (the longest remembered, not the smallest id) takes
/// its open replies with it: if jambonz ever
/// started that turn id again, a reply opened before (perhaps for the cancelled turn) is
/// not revived, so nothing is sent on it.
#[test]
fn a_forgotten_turn_takes_its_open_replies_with_it() {
    let now = Instant::now();
    let mut cfg = HarnessConfig::default();
    cfg.max_turns = 2;
    let mut c = HarnessCall::with_config(cfg);
    c.handle_frame(now, START).unwrap();
    c.handle_frame(now, &turn(1)).unwrap();
    let r = c.start_reply(Some(1)).unwrap();
    c.push_chunk(&r, "We're open").unwrap();
    c.handle_frame(now, &cancel(1)).unwrap();
    c.handle_frame(now, &turn(2)).unwrap();
    c.handle_frame(now, &turn(3)).unwrap();
    assert!(!c.is_turn_cancelled(1), "forgotten");
    sent(&mut c);
    // The same turn id again: a new turn (the turn just seen is not the one forgotten,
    // whatever its id); the old reply stays dead.
    c.handle_frame(now, &turn(1)).unwrap();
    assert!(c.is_turn_open(1));
    assert!(c.is_turn_open(3));
    assert!(!c.is_turn_open(2), "the longest remembered is forgotten");
    assert_eq!(
        c.push_chunk(&r, " eight to six"),
        Err(ActionError::UnknownReply(r.clone()))
    );
    assert_eq!(c.finish_reply(&r, None), Err(ActionError::UnknownReply(r)));
    assert!(sent(&mut c).is_empty());
}

/// `session:end` is the last message of "A whole call"; after it (and after a `hangup`
/// whose `command:result` is ok, which `session:end {reason: "harness_hangup"}` follows)
/// the harness side sends nothing more. Frames the app made before the call ended and had
/// not taken from `poll_transmit` yet are dropped, as they are for a cancelled turn: sent,
/// they reached jambonz after the call was over.
#[test]
fn frames_still_queued_when_the_call_ends_are_not_sent() {
    // session:end
    let (mut c, now) = started();
    c.handle_frame(now, &turn(1)).unwrap();
    let r = c.start_reply(None).unwrap();
    c.push_chunk(&r, "Still there?").unwrap();
    let t = c.call_tool(1, "get_hours", Map::new()).unwrap();
    c.send_command(JambonzCommand::Other {
        name: "transfer".into(),
        args: Map::new(),
    })
    .unwrap();
    assert_eq!(c.pending_transmits(), 3);
    c.handle_frame(
        now,
        r#"{"type":"session:end","call_sid":"CA1","reason":"caller_hangup","duration_ms":900}"#,
    )
    .unwrap();
    assert_eq!(sent(&mut c), Vec::<Value>::new());
    assert_eq!(c.pending_transmits(), 0);
    assert_eq!(c.pending_tool_calls(), 0, "{t} awaits no result");

    // a hangup that succeeded
    let (mut c, now) = started();
    c.handle_frame(now, &turn(3)).unwrap();
    let id = c.hang_up(Some("resolved")).unwrap();
    assert_eq!(sent(&mut c).len(), 1);
    // the app goes on before the result arrives
    let r = c.start_reply(Some(3)).unwrap();
    c.push_chunk(&r, "Goodbye!").unwrap();
    let t = c.call_tool(3, "log_call", Map::new()).unwrap();
    c.handle_frame(
        now,
        &json!({"type":"command:result","command_id":id,"ok":true}).to_string(),
    )
    .unwrap();
    assert_eq!(sent(&mut c), Vec::<Value>::new());
    assert_eq!(c.pending_tool_calls(), 0, "{t} awaits no result");

    // a hangup that failed changes nothing
    let (mut c, now) = started();
    c.handle_frame(now, &turn(3)).unwrap();
    let id = c.hang_up(None).unwrap();
    assert_eq!(sent(&mut c).len(), 1);
    let r = c.start_reply(Some(3)).unwrap();
    c.push_chunk(&r, "Let me check.").unwrap();
    c.handle_frame(
        now,
        &json!({"type":"command:result","command_id":id,"ok":false}).to_string(),
    )
    .unwrap();
    assert_eq!(sent(&mut c).len(), 1);
}

/// `turn:cancel {turn_id, reason: "barge_in"}`: a turn is cancelled once. A repeated
/// `turn:cancel` is reported as an error and gives no second `TurnCancelled` (an app
/// counting cancelled turns, or the driver's `CallReport::cancelled`, counted it twice).
#[test]
fn a_repeated_turn_cancel_is_an_error_not_a_second_cancel() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(1)).unwrap();
    c.handle_frame(now, &cancel(1)).unwrap();
    assert_eq!(
        c.handle_frame(now, &cancel(1)),
        Err(JambonzFrameError::DuplicateCancel(1))
    );
    let cancels = drain_events(&mut c)
        .into_iter()
        .filter(|e| matches!(e, CallEvent::TurnCancelled(_)))
        .count();
    assert_eq!(cancels, 1);
    assert!(c.is_turn_cancelled(1));
}
