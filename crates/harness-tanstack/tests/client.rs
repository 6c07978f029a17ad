//! The client against a hostile or buggy host: frame sequences the host of this crate never
//! sends, each checked against what the spec tells a client to do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use harness_core::Cursor;
use harness_tanstack::client::{Action, Client, ClientConfig, ClientEvent};
use harness_tanstack::frame::{ErrorCode, Input, close};

fn events(c: &mut Client) -> Vec<ClientEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// "`unsupported_version` | … | Yes [the stream closes]", "`slow_consumer` | … | Yes",
/// "`unauthorized` | … | Yes": these codes end the stream whatever their `requestId`. "A
/// frame with no `requestId` gets an id from the server" (the subscribe has none), and the
/// spec's own example of `unsupported_version` carries `"requestId": "req-1"`: the id of
/// the client's first input. The error must not read as the answer to that input ("go
/// on"), the input must stay unanswered (to send again), and the close after it (none on
/// SSE or stdio) must not say "reconnect" to a server that does not speak our version.
#[test]
fn a_closing_error_whose_request_id_is_a_pending_input_still_closes() {
    let t = Instant::now();
    for (code, close_code, want) in [
        ("unsupported_version", None, Action::Stop),
        (
            "unsupported_version",
            Some(close::UNSUPPORTED_VERSION),
            Action::Stop,
        ),
        ("unauthorized", Some(close::UNAUTHORIZED), Action::SignIn),
        (
            "slow_consumer",
            Some(close::SLOW_CONSUMER),
            Action::Resubscribe {
                from: Some(Cursor::new("7")),
            },
        ),
    ] {
        let mut c = Client::resume(ClientConfig::new("t"), Cursor::new("7"));
        c.connect(t);
        let req = c.send_input(Input::prompt("Hello").with_input_id("in-1"));
        assert_eq!(req, "req-1");
        c.handle_frame(
            t,
            &format!(
                r#"{{"type":"harness.error","message":"m","code":"{code}","requestId":"{req}"}}"#
            ),
        );
        let got: Vec<Action> = events(&mut c)
            .into_iter()
            .filter_map(|e| match e {
                ClientEvent::Error { action, .. } => Some(action),
                _ => None,
            })
            .collect();
        assert_eq!(got, [want.clone()], "{code}");
        assert!(!c.is_connected(), "{code}");
        assert_eq!(c.handle_close(t, close_code), want, "{code} {close_code:?}");
        // The input was never answered: it is still there to send again.
        assert_eq!(c.pending_inputs(), [("req-1", "in-1")], "{code}");
    }
    // `forbidden` and `internal` for one input do not close ("When the host refuses one
    // input, no."): they answer that input.
    for code in [ErrorCode::Forbidden, ErrorCode::Internal] {
        let mut c = Client::new(ClientConfig::new("t"));
        c.connect(t);
        let req = c.send_input(Input::prompt("Hello"));
        c.handle_frame(
            t,
            &format!(
                r#"{{"type":"harness.error","message":"m","code":"{code}","requestId":"{req}"}}"#
            ),
        );
        assert!(events(&mut c).iter().any(|e| matches!(
            e,
            ClientEvent::Error {
                action: Action::Continue,
                ..
            }
        )));
        assert!(c.is_connected());
        assert!(c.pending_inputs().is_empty());
    }
}
