//! The harness side against the spec's "Starting early (optional)": a draft from a final
//! transcript, streamed if the turn's text matches, redone if the caller said more. Each
//! rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_jambonz::early_start::{EarlyStart, Verdict};

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
