//! Our harness side against our simulator, with an app acting at random: whatever the app
//! asks, what the harness side lets out never breaks a rule jambonz enforces ("accepted only
//! after that turn's turn:start", ids "unique within the call", `interrupt` on a first chunk,
//! nothing for a cancelled turn, "Up to 16 KB").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_core::Tool;
use harness_jambonz::command::JambonzCommand;
use harness_jambonz::harness_side::{CallEvent, HarnessCall, Transmit};
use harness_jambonz::simulator::{Deadlines, Script, SimConfig, Simulator, ViolationKind};
use harness_jambonz::turn_record::TurnRecord;
use proptest::prelude::*;
use serde_json::{Map, json};

#[derive(Clone, Debug)]
enum Act {
    /// Answer the n-th turn seen (a reply with a sentence), finishing it or not.
    Answer(u8, bool),
    /// Start a reply for the n-th turn seen (any state), or unprompted.
    Reply(Option<u8>, bool),
    Chunk(u8, bool),
    Finish(u8, bool),
    Tool(u8),
    Command(bool),
    /// Let time pass (ms).
    Wait(u16),
}

fn arb_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => (0u8..6, any::<bool>()).prop_map(|(t, f)| Act::Answer(t, f)),
        3 => (0u16..3000).prop_map(Act::Wait),
        1 => (prop::option::of(0u8..6), any::<bool>()).prop_map(|(t, i)| Act::Reply(t, i)),
        1 => (0u8..8, any::<bool>()).prop_map(|(r, i)| Act::Chunk(r, i)),
        1 => (0u8..8, any::<bool>()).prop_map(|(r, big)| Act::Finish(r, big)),
        1 => (0u8..6).prop_map(Act::Tool),
        1 => any::<bool>().prop_map(Act::Command),
    ]
}

fn script(steps: &[u8]) -> Script {
    let mut s = Script::new().greeting();
    for (i, k) in steps.iter().enumerate() {
        s = match k % 4 {
            0 => s.say(format!("question number {i}")),
            1 => s.barge_in(Duration::from_millis(u64::from(*k % 50) * 20), "wait"),
            2 => s.silence(Duration::from_millis(300)),
            _ => s.raw(r#"{"type":"sparkle"}"#),
        };
    }
    s
}

proptest! {
    #[test]
    fn what_the_harness_side_lets_out_never_breaks_jambonz_rules(
        steps in prop::collection::vec(any::<u8>(), 0..6),
        acts in prop::collection::vec((arb_act(), prop::bool::weighted(0.8)), 0..120),
    ) {
        let t0 = Instant::now();
        let mut cfg = SimConfig::default();
        // No deadlines: a turn failed by jambonz's clock is not the harness breaking a rule.
        let mut d = Deadlines::default();
        (d.first_chunk, d.reply_done, d.tool_result) = (None, None, None);
        cfg.deadlines = d;
        let mut sim = Simulator::new(t0, cfg, script(&steps))
            .with_tool(Tool::json("get_hours", "", |_| {
                Ok(json!({"weekdays": "8am to 6pm"}))
            }));
        let mut call = HarnessCall::new();
        let mut now = t0;
        let mut turns: Vec<u64> = Vec::new();
        let mut replies: Vec<String> = Vec::new();
        sim.start(now);
        for (act, send) in acts {
            // Lockstep: everything jambonz sent is read before the app acts.
            while let Some(t) = sim.poll_transmit() {
                if let Transmit::Text(f) = t {
                    let _ = call.handle_frame(now, &f);
                }
            }
            while let Some(ev) = call.poll_event() {
                if let CallEvent::TurnStarted(t) = ev {
                    turns.push(t.turn_id.unwrap());
                }
            }
            let turn = |i: u8| turns.get(usize::from(i)).copied().unwrap_or(u64::from(i) + 1);
            let reply = |i: u8| replies.get(usize::from(i)).cloned().unwrap_or_default();
            match act {
                Act::Answer(t, finish) => {
                    if let Ok(r) = call.start_reply(Some(turn(t))) {
                        let _ = call.push_chunk(&r, "We're open eight to six on weekdays.");
                        if finish {
                            let _ = call.finish_reply(&r, None);
                        }
                        replies.push(r);
                    }
                }
                Act::Reply(t, interrupt) => {
                    let t = t.map(turn);
                    let r = if interrupt { call.start_interrupting_reply(t) } else { call.start_reply(t) };
                    if let Ok(r) = r { replies.push(r); }
                }
                Act::Chunk(i, interrupt) => {
                    let _ = call.push_raw_chunk(&reply(i), harness_jambonz::reply::Chunk::text("word "), interrupt);
                }
                Act::Finish(i, big) => {
                    let rec = TurnRecord::default().with_note(if big { "x".repeat(20_000) } else { "ok".into() });
                    let _ = call.finish_reply(&reply(i), Some(rec));
                }
                Act::Tool(t) => { let _ = call.call_tool(turn(t), "get_hours", Map::new()); }
                Act::Command(hangup) => {
                    let _ = if hangup { call.hang_up(Some("resolved")) } else { call.send_command(JambonzCommand::Play(Map::new())) };
                }
                Act::Wait(ms) => {
                    let until = now + Duration::from_millis(u64::from(ms));
                    while let Some(t) = sim.poll_timeout() {
                        if t > until { break; }
                        now = now.max(t);
                        sim.handle_timeout(now);
                        while let Some(Transmit::Text(f)) = sim.poll_transmit() {
                            let _ = call.handle_frame(now, &f);
                        }
                        while let Some(ev) = call.poll_event() {
                            if let CallEvent::TurnStarted(t) = ev {
                                turns.push(t.turn_id.unwrap());
                            }
                        }
                    }
                    now = until.max(now);
                    sim.handle_timeout(now);
                }
            }
            // Sometimes the app writes to the socket only later: what it queued may still
            // wait when jambonz's next frames (a turn:cancel) are read.
            if !send {
                continue;
            }
            while let Some(t) = call.poll_transmit() {
                match t {
                    Transmit::Text(f) => sim.handle_frame(now, &f),
                    Transmit::Close { code, reason } => sim.handle_close(now, code, &reason),
                }
            }
        }
        // (A frame the harness sent before it read session:end arrives after the end: in
        // flight, not a rule broken; jambonz ignores it.)
        for v in &sim.transcript().violations {
            prop_assert!(
                !matches!(
                    v.kind,
                    ViolationKind::ReplyBeforeTurnStart
                        | ViolationKind::ClosedTurn
                        | ViolationKind::DuplicateId
                        | ViolationKind::InterruptNotFirst
                        | ViolationKind::TurnRecordTooLarge
                        | ViolationKind::DeadReply
                        | ViolationKind::Malformed
                ),
                "{:?}\n{}", v, sim.transcript()
            );
        }
    }
}
