//! The harness side against the spec's "Commands": each gets a `command:result`; a
//! `hangup` that succeeded ends the call. Each rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_jambonz::harness_side::{ActionError, CallEvent, JambonzFrameError};
use serde_json::json;

mod common;
use common::{drain_events, sent, started, turn};

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
        Err(JambonzFrameError::UnknownCommandId("c77".into()))
    );
    c.handle_frame(
        now,
        &json!({"type":"command:result","command_id":id,"ok":true}).to_string(),
    )
    .unwrap();
    assert!(
        matches!(&drain_events(&mut c)[..], [CallEvent::CommandResult { name, result }] if name == "hangup" && result.ok)
    );
    // Hung up: nothing more goes out.
    assert_eq!(c.start_reply(Some(3)), Err(ActionError::NotActive));
    c.handle_frame(
        now,
        r#"{"type":"session:end","call_sid":"CA1","reason":"harness_hangup","duration_ms":41250}"#,
    )
    .unwrap();
    assert!(
        matches!(&drain_events(&mut c)[..], [CallEvent::SessionEnded(e)] if e.duration_ms == Some(41250))
    );
    assert!(c.is_over());
    assert_eq!(
        c.handle_frame(now, &turn(4)),
        Err(JambonzFrameError::Closed)
    );
}
