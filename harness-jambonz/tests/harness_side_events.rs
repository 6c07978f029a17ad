//! The harness side against the spec's "Events": every event reaches the app (unknown
//! types kept), and after a `user_interruption` the history keeps only what the caller
//! heard. Each rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_jambonz::event::UserInterruption;
use harness_jambonz::harness_side::CallEvent;
use harness_jambonz::history::CallHistory;

mod common;
use common::{drain_events, started};

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
    assert!(matches!(evs[0], CallEvent::Event(_)));
    assert!(
        matches!(&evs[1], CallEvent::ReplyDropped(d) if d.reason.as_deref() == Some("replaced"))
    );
    assert!(matches!(evs[2], CallEvent::Error(_)));
    assert!(matches!(&evs[3], CallEvent::Interrupted(u) if u.spoken == "a"));
    assert!(matches!(evs[4], CallEvent::SpeechStarted(_)));
    assert!(matches!(&evs[5], CallEvent::Transcript(t) if !t.is_final));
    assert!(matches!(&evs[6], CallEvent::Unknown(u) if u.kind == "sparkle"));
}

/// "keep only what the caller heard".
#[test]
fn history_keeps_only_what_the_caller_heard() {
    let mut h = CallHistory::new();
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
    let mut small = CallHistory::with_max_entries(2);
    for i in 0..5 {
        small.user(i, format!("{i}"));
    }
    // Bounded: past the bound the oldest half goes at once (trimming costs nothing per
    // turn on average), so 1 or 2 entries are kept, the newest last.
    assert!((1..=2).contains(&small.len()));
    assert_eq!(
        small.messages().last().map(|m| m.text()).as_deref(),
        Some("4")
    );
}
