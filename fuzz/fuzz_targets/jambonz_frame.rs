//! Arbitrary text frames never panic the jambonz decoders or either side's state machine;
//! a frame that decodes re-encodes to a frame that decodes to the same message; the harness
//! side never sends a reply for a turn it has not seen start (or saw cancelled).
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use harness_jambonz::frame::{HarnessMessage, JambonzMessage};
use harness_jambonz::harness_side::{CallEvent, HarnessCall, Transmit};
use harness_jambonz::simulator::{Script, SimConfig, Simulator};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = JambonzMessage::decode(&text) {
        assert_eq!(JambonzMessage::decode(&m.encode()).as_ref(), Ok(&m));
    }
    if let Ok(m) = HarnessMessage::decode(&text) {
        assert_eq!(HarnessMessage::decode(&m.encode()).as_ref(), Ok(&m));
    }

    // Frames split on newlines, fed to both sides.
    let now = Instant::now();
    let mut harness = HarnessCall::new();
    let _ = harness.handle_frame(now, r#"{"type":"session:start","protocol":1}"#);
    let mut sim = Simulator::new(now, SimConfig::default(), Script::new().greeting().say("hi"));
    sim.start(now);
    let (mut started, mut cancelled) = (HashSet::new(), HashSet::new());
    for (i, frame) in text.split('\n').enumerate() {
        let t = now + Duration::from_millis(i as u64 * 50);
        let _ = harness.handle_frame(t, frame);
        sim.handle_frame(t, frame);
        sim.handle_timeout(t);
        while let Some(ev) = harness.poll_event() {
            match ev {
                CallEvent::TurnStarted(s) => {
                    let id = s.turn_id.unwrap_or_default();
                    started.insert(id);
                    if let Ok(r) = harness.start_reply(Some(id)) {
                        let _ = harness.push_chunk(&r, "ok");
                    }
                }
                CallEvent::TurnCancelled(c) => {
                    cancelled.insert(c.turn_id.unwrap_or_default());
                }
                _ => {}
            }
        }
        while sim.poll_transmit().is_some() {}
        while sim.poll_event().is_some() {}
        // The app does not always drain before the next frame: frames queued for a turn
        // may wait in poll_transmit when its turn:cancel arrives (and must then never go).
        if frame.len() % 3 == 0 {
            continue;
        }
        while let Some(Transmit::Text(out)) = harness.poll_transmit() {
            if let Ok(HarnessMessage::ReplyChunk(c)) = HarnessMessage::decode(&out) {
                if let Some(id) = c.turn_id {
                    assert!(started.contains(&id) && !cancelled.contains(&id));
                }
            }
        }
    }
});
