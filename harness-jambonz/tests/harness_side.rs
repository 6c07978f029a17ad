//! The harness side's rules, each with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Instant;

use harness_jambonz::command::Command;
use harness_jambonz::early_start::{EarlyStart, Verdict};
use harness_jambonz::event::UserInterruption;
use harness_jambonz::frame::{DecodeError, HarnessMessage};
use harness_jambonz::harness_side::{
    ActionError, FrameError, HarnessCall, HarnessConfig, HarnessEvent, Transmit,
};
use harness_jambonz::history::History;
use harness_jambonz::turn::InputKind;
use harness_jambonz::turn_record::TurnRecord;
use harness_jambonz::upgrade::{SUBPROTOCOL, check_upgrade};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const START: &str = r#"{"type":"session:start","call_sid":"CA1","protocol":1,"from":"+1555","to":"+1666","direction":"inbound","language":"en-US","metadata":{},"tools":[]}"#;

fn turn(id: u64) -> String {
    json!({"type":"turn:start","call_sid":"CA1","turn_id":id,"input":{"type":"speech","text":"hi"}})
        .to_string()
}
fn cancel(id: u64) -> String {
    json!({"type":"turn:cancel","call_sid":"CA1","turn_id":id,"reason":"barge_in"}).to_string()
}

fn started() -> (HarnessCall, Instant) {
    let now = Instant::now();
    let mut c = HarnessCall::new();
    c.handle_frame(now, START).unwrap();
    (c, now)
}

fn drain_events(c: &mut HarnessCall) -> Vec<HarnessEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn sent(c: &mut HarnessCall) -> Vec<Value> {
    std::iter::from_fn(|| c.poll_transmit())
        .map(|t| match t {
            Transmit::Text(s) => serde_json::from_str(&s).unwrap(),
            Transmit::Close { code, reason } => json!({"close": code, "reason": reason}),
        })
        .collect()
}

/// "session:start carries protocol: 1. A harness that cannot speak it closes the socket with
/// code 4000 and a reason."
#[test]
fn a_protocol_other_than_1_is_closed_with_4000_and_a_reason() {
    for protocol in [json!(2), json!("1"), json!(null), json!(1.5)] {
        let now = Instant::now();
        let mut c = HarnessCall::new();
        let f = json!({"type":"session:start","call_sid":"CA1","protocol":protocol});
        c.handle_frame(now, &f.to_string()).unwrap();
        let out: Vec<Transmit> = std::iter::from_fn(|| c.poll_transmit()).collect();
        assert_eq!(out.len(), 1, "{protocol}");
        let Transmit::Close { code, reason } = &out[0] else {
            panic!()
        };
        assert_eq!(*code, 4000);
        assert!(!reason.is_empty());
        assert!(matches!(
            drain_events(&mut c)[..],
            [HarnessEvent::UnsupportedProtocol { .. }]
        ));
        assert!(c.is_over());
        assert_eq!(c.handle_frame(now, &turn(1)), Err(FrameError::Closed));
    }
    let (mut c, _) = started();
    assert!(matches!(
        drain_events(&mut c)[..],
        [HarnessEvent::SessionStarted(_)]
    ));
    assert!(sent(&mut c).is_empty());
    assert_eq!(c.call_sid(), Some("CA1"));
}

/// Frames before session:start and malformed JSON are reported; the call state stays intact.
#[test]
fn frames_before_session_start_and_malformed_json_change_nothing() {
    let now = Instant::now();
    let mut c = HarnessCall::new();
    assert!(
        matches!(c.handle_frame(now, &turn(1)), Err(FrameError::BeforeSessionStart { kind }) if kind == "turn:start")
    );
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"dtmf"}"#),
        Err(FrameError::BeforeSessionStart { .. })
    ));
    assert_eq!(c.start_reply(None), Err(ActionError::NotActive));
    assert!(drain_events(&mut c).is_empty());
    c.handle_frame(now, START).unwrap();
    c.handle_frame(now, &turn(1)).unwrap();
    drain_events(&mut c);
    for bad in ["{", "null", "[]", r#"{"no":"type"}"#] {
        let e = c.handle_frame(now, bad).unwrap_err();
        assert!(matches!(e, FrameError::Decode(_)), "{bad}: {e:?}");
    }
    // A turn id that is not a number: no turn to start.
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"turn:start","turn_id":"x"}"#),
        Err(FrameError::MissingTurnId { .. })
    ));
    // "There are no binary frames."
    assert_eq!(c.handle_binary(now), Err(FrameError::Binary));
    assert_eq!(
        c.handle_frame(now, START),
        Err(FrameError::DuplicateSessionStart)
    );
    assert_eq!(
        c.handle_frame(now, &turn(1)),
        Err(FrameError::DuplicateTurn(1))
    );
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"turn:start","input":{"type":"greeting"}}"#),
        Err(FrameError::MissingTurnId { .. })
    ));
    assert!(drain_events(&mut c).is_empty());
    // Turn 1 is still open and answerable.
    let r = c.start_reply(Some(1)).unwrap();
    c.push_chunk(&r, "still here").unwrap();
    assert_eq!(
        sent(&mut c)[0]["chunk"]["choices"][0]["delta"]["content"],
        "still here"
    );
}

#[test]
fn frames_over_the_limit_are_refused() {
    let now = Instant::now();
    let mut cfg = HarnessConfig::default();
    cfg.max_frame_bytes = 64;
    let mut c = HarnessCall::with_config(cfg);
    let big =
        json!({"type":"session:start","protocol":1,"metadata":{"x":"y".repeat(100)}}).to_string();
    assert!(matches!(
        c.handle_frame(now, &big),
        Err(FrameError::TooLarge { limit: 64, .. })
    ));
    assert!(!c.is_active());
}

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
        let cm = c.send_command(Command::Play(Map::new())).unwrap();
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
            .any(|e| matches!(e, HarnessEvent::TurnCancelled(t) if t.turn_id == Some(2)))
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
        Err(FrameError::UnknownCallId(t2))
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

/// "Ignore message types and fields you do not recognize. New ones are added without
/// changing the protocol version." A turn:cancel or turn:start whose other fields have a
/// shape this version does not expect still cancels or starts its turn (the odd fields are
/// kept as given): a dropped turn:cancel would let the harness talk on for a cancelled turn.
#[test]
fn turn_messages_with_fields_of_another_shape_still_count() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(2)).unwrap();
    let r = c.start_reply(Some(2)).unwrap();
    c.push_chunk(&r, "We're open").unwrap();
    drain_events(&mut c);
    c.handle_frame(
        now,
        r#"{"type":"turn:cancel","call_sid":"CA1","turn_id":2,"reason":{"code":"barge_in","confidence":0.9}}"#,
    )
    .unwrap();
    let evs = drain_events(&mut c);
    let [HarnessEvent::TurnCancelled(tc)] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(tc.turn_id, Some(2));
    assert_eq!(
        tc.extra["reason"],
        json!({"code":"barge_in","confidence":0.9})
    );
    assert_eq!(
        c.push_chunk(&r, " eight"),
        Err(ActionError::TurnCancelled(2))
    );
    assert!(sent(&mut c).is_empty(), "the queued chunk is dropped too");

    c.handle_frame(
        now,
        r#"{"type":"turn:start","call_sid":"CA1","turn_id":3,"input":{"type":"speech","text":{"alternatives":["hi"]}}}"#,
    )
    .unwrap();
    let evs = drain_events(&mut c);
    let [HarnessEvent::TurnStarted(ts)] = &evs[..] else {
        panic!("{evs:?}")
    };
    assert_eq!(ts.turn_id, Some(3));
    assert_eq!(ts.input.kind(), InputKind::Speech);
    assert_eq!(ts.input.text, None);
    assert_eq!(ts.input.extra["text"], json!({"alternatives":["hi"]}));
    assert!(c.start_reply(Some(3)).is_ok());

    for f in [
        r#"{"type":"speech:start","turn_id":4,"channel":{"a":1},"call_sid":7}"#,
        r#"{"type":"transcript","turn_id":4,"text":null,"final":"yes"}"#,
    ] {
        c.handle_frame(now, f).unwrap();
    }
    let evs = drain_events(&mut c);
    assert!(matches!(&evs[0], HarnessEvent::SpeechStarted(s) if s.turn_id == Some(4)));
    assert!(
        matches!(&evs[1], HarnessEvent::Transcript(t) if t.turn_id == Some(4) && t.text.is_empty() && t.extra["final"] == "yes")
    );
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
        Err(FrameError::UnknownCallId("t99".into()))
    );
    let f = json!({"type":"tool:result","call_sid":"CA1","call_id":id,"result":{"weekdays":"8am to 6pm"}});
    c.handle_frame(now, &f.to_string()).unwrap();
    let evs = drain_events(&mut c);
    let [
        HarnessEvent::ToolResult {
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
    let [HarnessEvent::ToolResult { result, .. }] = &evs[..] else {
        panic!()
    };
    assert!(result.to_tool_result().is_error);
}

/// "Sent as {type: "command", command_id, name, args}; each gets a command:result."
#[test]
fn commands_get_results_and_a_hangup_ends_the_call() {
    let (mut c, now) = started();
    c.handle_frame(now, &turn(3)).unwrap();
    drain_events(&mut c);
    let id = c.hang_up(Some("resolved")).unwrap();
    assert_eq!(
        sent(&mut c)[0],
        json!({"type":"command","command_id":id,"name":"hangup","args":{"reason":"resolved"}})
    );
    assert_eq!(
        c.handle_frame(
            now,
            r#"{"type":"command:result","command_id":"c77","ok":true}"#
        ),
        Err(FrameError::UnknownCommandId("c77".into()))
    );
    c.handle_frame(
        now,
        &json!({"type":"command:result","command_id":id,"ok":true}).to_string(),
    )
    .unwrap();
    assert!(
        matches!(&drain_events(&mut c)[..], [HarnessEvent::CommandResult { name, result }] if name == "hangup" && result.ok)
    );
    // Hung up: nothing more goes out.
    assert_eq!(c.start_reply(Some(3)), Err(ActionError::NotActive));
    c.handle_frame(
        now,
        r#"{"type":"session:end","call_sid":"CA1","reason":"harness_hangup","duration_ms":41250}"#,
    )
    .unwrap();
    assert!(
        matches!(&drain_events(&mut c)[..], [HarnessEvent::SessionEnded(e)] if e.duration_ms == Some(41250))
    );
    assert!(c.is_over());
    assert_eq!(c.handle_frame(now, &turn(4)), Err(FrameError::Closed));
}

/// Events and unknown types reach the app; unknown is kept, not an error.
#[test]
fn events_and_unknown_messages_reach_the_app() {
    let (mut c, now) = started();
    drain_events(&mut c);
    for f in [
        r#"{"type":"event","name":"silence","call_sid":"CA1"}"#,
        r#"{"type":"event","name":"reply_dropped","reply_id":"r1","reason":"replaced"}"#,
        r#"{"type":"event","name":"error","reply_id":"r1","turn_id":9,"message":"early"}"#,
        r#"{"type":"event","name":"user_interruption","turn_id":2,"reply_id":"r2","spoken":"a","unspoken":"b"}"#,
        r#"{"type":"speech:start","turn_id":2}"#,
        r#"{"type":"transcript","turn_id":2,"text":"When","final":false}"#,
        r#"{"type":"sparkle","x":1}"#,
    ] {
        c.handle_frame(now, f).unwrap();
    }
    let evs = drain_events(&mut c);
    assert!(matches!(evs[0], HarnessEvent::Event(_)));
    assert!(
        matches!(&evs[1], HarnessEvent::ReplyDropped(d) if d.reason.as_deref() == Some("replaced"))
    );
    assert!(matches!(evs[2], HarnessEvent::Error(_)));
    assert!(matches!(&evs[3], HarnessEvent::Interrupted(u) if u.spoken == "a"));
    assert!(matches!(evs[4], HarnessEvent::SpeechStarted(_)));
    assert!(matches!(&evs[5], HarnessEvent::Transcript(t) if !t.is_final));
    assert!(matches!(&evs[6], HarnessEvent::Unknown(u) if u.kind == "sparkle"));
}

/// "keep only what the caller heard".
#[test]
fn history_keeps_only_what_the_caller_heard() {
    let mut h = History::new();
    h.user(1, "(call connected)");
    h.assistant_delta("r1", Some(1), "Thanks for ");
    h.assistant_delta("r1", Some(1), "calling.");
    h.user(2, "When are you open");
    h.assistant_delta("r2", Some(2), "We're open eight to six.");
    h.user(3, "Hello?");
    h.assistant_delta("r3", None, "Still there?");
    assert!(h.interrupted(&UserInterruption {
        reply_id: Some("r2".into()),
        spoken: "We're open eight".into(),
        unspoken: " to six.".into(),
        ..Default::default()
    }));
    assert!(h.interrupted(&UserInterruption {
        reply_id: Some("r3".into()),
        spoken: String::new(),
        unspoken: "Still there?".into(),
        ..Default::default()
    }));
    assert!(!h.interrupted(&UserInterruption {
        reply_id: Some("r9".into()),
        ..Default::default()
    }));
    let texts: Vec<String> = h.messages().iter().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        [
            "(call connected)",
            "Thanks for calling.",
            "When are you open",
            "We're open eight",
            "Hello?"
        ]
    );
    // The interrupted replies stream on until their turn:cancel: that was not heard.
    h.assistant_delta("r2", Some(2), " And Saturdays.");
    h.assistant_delta("r3", None, " Hello?");
    let again: Vec<String> = h.messages().iter().map(|m| m.text()).collect();
    assert_eq!(again, texts);
    let j = h.journal("CA1");
    assert_eq!(j.len(), 5);
    assert_eq!(j[3].execution_id, "CA1:2");
    let mut small = History::with_max_entries(2);
    for i in 0..5 {
        small.user(i, format!("{i}"));
    }
    assert_eq!(small.len(), 2);
}

/// "compare the turn's text with what you started from: if it matches, stream the draft at
/// once; if the caller said more, redo it."
#[test]
fn early_start_matches_or_redoes() {
    let mut e = EarlyStart::new();
    e.speech_started(2);
    assert_eq!(e.final_transcript(2, "When are you", false), None);
    let text = e.final_transcript(2, "When are you open", true).unwrap();
    e.insert_draft(2, &text, "draft A");
    assert_eq!(
        e.final_transcript(2, "when are you open.", true),
        None,
        "same text, no second draft"
    );
    assert!(e.has_draft(2));
    assert_eq!(
        e.turn_started(2, "When are you OPEN?"),
        Verdict::Matches("draft A")
    );

    e.speech_started(3);
    let text = e.final_transcript(3, "When are you open", true).unwrap();
    e.insert_draft(3, &text, "draft B");
    assert_eq!(
        e.turn_started(3, "When are you open on Sunday"),
        Verdict::Redo {
            drafted_from: vec!["When are you open".into()]
        }
    );
    assert_eq!(e.turn_started(4, "anything"), Verdict::<&str>::NoDraft);
    // A draft for another turn is dropped.
    e.speech_started(5);
    e.insert_draft(4, "x", "stale");
    assert!(!e.has_draft(5));
}

/// "When the agent has a secret, the upgrade request carries Authorization: Bearer <secret>.
/// With none, there is no Authorization header. A harness that requires one should refuse
/// the upgrade with HTTP 401."
#[test]
fn the_upgrade_check() {
    let proto = ("Sec-WebSocket-Protocol", SUBPROTOCOL.as_bytes());
    let ok = |h: Vec<(&'static str, &'static [u8])>, s: Option<&str>| check_upgrade(h, s);
    assert_eq!(
        ok(
            vec![proto, ("Authorization", b"Bearer s3cret")],
            Some("s3cret")
        )
        .unwrap()
        .subprotocol,
        SUBPROTOCOL
    );
    assert!(
        ok(
            vec![proto, ("authorization", b"bearer s3cret")],
            Some("s3cret")
        )
        .is_ok()
    );
    assert_eq!(
        ok(
            vec![proto, ("Authorization", b"Bearer wrong")],
            Some("s3cret")
        )
        .unwrap_err()
        .status,
        401
    );
    assert_eq!(
        ok(
            vec![proto, ("Authorization", b"Bearer s3cre")],
            Some("s3cret")
        )
        .unwrap_err()
        .status,
        401
    );
    assert_eq!(
        ok(
            vec![proto, ("Authorization", b"Basic s3cret")],
            Some("s3cret")
        )
        .unwrap_err()
        .status,
        401
    );
    assert_eq!(ok(vec![proto], Some("s3cret")).unwrap_err().status, 401);
    assert_eq!(
        ok(
            vec![
                proto,
                ("Authorization", b"Bearer s3cret"),
                ("Authorization", b"Bearer x")
            ],
            Some("s3cret")
        )
        .unwrap_err()
        .status,
        401
    );
    // No secret configured: no header required.
    assert!(ok(vec![proto], None).is_ok());
    // An empty secret is not "no secret": nothing presents it, not even an empty bearer.
    for auth in [&b"Bearer "[..], b"Bearer", b""] {
        assert_eq!(
            ok(vec![proto, ("Authorization", auth)], Some(""))
                .unwrap_err()
                .status,
            401
        );
    }
    assert_eq!(ok(vec![proto], Some("")).unwrap_err().status, 401);
    // The subprotocol must be offered.
    assert_eq!(ok(vec![], None).unwrap_err().status, 400);
    assert_eq!(
        ok(vec![("Sec-WebSocket-Protocol", b"chat")], None)
            .unwrap_err()
            .status,
        400
    );
    assert!(
        ok(
            vec![("sec-websocket-protocol", b"chat, harness.jambonz.org")],
            None
        )
        .is_ok()
    );
    // A refusal never echoes the secret.
    let e = ok(
        vec![proto, ("Authorization", b"Bearer wrong")],
        Some("s3cret"),
    )
    .unwrap_err();
    assert!(!e.to_string().contains("s3cret"));
}

/// "Use wss://; ws:// is accepted only for a private address on the same network as jambonz."
#[test]
fn ws_is_only_for_private_addresses() {
    use harness_jambonz::upgrade::{UrlRefusal, check_harness_url};
    for ok in [
        "wss://agent.example.com/h",
        "WSS://1.2.3.4",
        "ws://10.1.2.3:8080/x",
        "ws://172.16.0.9",
        "ws://192.168.1.20:80",
        "ws://127.0.0.1:8080",
        "ws://localhost:8080",
        "ws://[::1]:8080/h",
        "ws://[fd00::5]/h",
        "ws://user@10.0.0.1/",
    ] {
        assert_eq!(check_harness_url(ok), Ok(()), "{ok}");
    }
    for public in [
        "ws://203.0.113.7:8080",
        "ws://8.8.8.8",
        "ws://172.32.0.1",
        "ws://agent.example.com",
        "ws://[2001:db8::1]:80",
    ] {
        assert!(
            matches!(check_harness_url(public), Err(UrlRefusal::PlainToPublic(_))),
            "{public}"
        );
    }
    assert!(matches!(
        check_harness_url("http://10.0.0.1"),
        Err(UrlRefusal::NotWebSocket(_))
    ));
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
                    HarnessEvent::TurnStarted(t) => { started.insert(t.turn_id.unwrap()); }
                    HarnessEvent::TurnCancelled(t) => { cancelled.insert(t.turn_id.unwrap()); }
                    _ => {}
                }
            }
            for a in acts {
                match a {
                    Act::Reply(t) => { if let Ok(r) = c.start_reply(t.map(u64::from)) { replies.push(r); } }
                    Act::Chunk(i) => { if let Some(r) = replies.get(usize::from(i)) { let _ = c.push_chunk(&r.clone(), "x"); } }
                    Act::Finish(i) => { if let Some(r) = replies.get(usize::from(i)) { let _ = c.finish_reply(&r.clone(), None); } }
                    Act::Tool(t) => { let _ = c.call_tool(u64::from(t), "x", Map::new()); }
                    Act::Command => { let _ = c.send_command(Command::Play(Map::new())); }
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

#[test]
fn decode_errors_are_typed() {
    let (mut c, now) = started();
    assert!(matches!(
        c.handle_frame(now, "{"),
        Err(FrameError::Decode(DecodeError::NotAnObject(_)))
    ));
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
    c.send_command(Command::Other {
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
        Err(FrameError::DuplicateCancel(1))
    );
    let cancels = drain_events(&mut c)
        .into_iter()
        .filter(|e| matches!(e, HarnessEvent::TurnCancelled(_)))
        .count();
    assert_eq!(cancels, 1);
    assert!(c.is_turn_cancelled(1));
}

/// "compare the turn's text with what you started from: if it matches, stream the draft at
/// once". A draft made from text with no words (`"?!"`, `""`) was started from nothing: it
/// is not held, so it never "matches" a turn whose text has no words either (a
/// `turn:start` without text, or a greeting passed as `""`).
#[test]
fn a_draft_from_no_words_is_not_held_and_matches_nothing() {
    let mut e = EarlyStart::new();
    e.speech_started(4);
    e.insert_draft(4, "?!", "draft from nothing");
    assert!(!e.has_draft(4));
    assert_eq!(e.turn_started(4, ""), Verdict::NoDraft);
}
