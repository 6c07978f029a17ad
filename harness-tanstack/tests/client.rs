//! The client against a hostile or buggy host: frame sequences the host of this crate never
//! sends, each checked against what the spec tells a client to do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use harness_core::Cursor;
use harness_tanstack::client::{Action, Client, ClientConfig, ClientEvent, ControlFailure};
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
        assert_eq!(got, std::slice::from_ref(&want), "{code}");
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

/// "`threadId` is the thread that keeps the event. On the stream of a thread, it is that
/// thread." An event of another thread on our stream is not ours: delivering it puts
/// another thread's state in the app, and taking its cursor as ours makes the next
/// subscribe resume our thread from another thread's position.
#[test]
fn an_event_of_another_thread_is_neither_delivered_nor_its_cursor_kept() {
    let t = Instant::now();
    let mut c = Client::new(ClientConfig::new("thread-1"));
    c.connect(t);
    let ev = |cursor: &str, thread: &str| {
        format!(
            r#"{{"type":"harness.event","cursor":"{cursor}","threadId":"{thread}","operationId":"op-1","event":{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}}}}"#
        )
    };
    c.handle_frame(t, r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#);
    c.handle_frame(t, &ev("4", "thread-1"));
    c.handle_frame(t, &ev("900", "thread-2"));
    let evs = events(&mut c);
    let delivered: Vec<&str> = evs
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Event(d) => Some(d.cursor.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, ["4"]);
    assert!(evs.iter().any(|e| matches!(e, ClientEvent::BadFrame(_))));
    assert_eq!(c.last_cursor().map(Cursor::as_str), Some("4"));
    assert!(c.is_connected());
}

/// "The `harness.hello` frame gives the version that the server uses." … "The server
/// speaks one version. Use a client of that version." A hello of another version (a v1
/// server that ignored our `v: 2`) or of another thread is a stream this client cannot
/// read: the app is told to stop, as for `unsupported_version`, not to go on.
#[test]
fn a_hello_of_another_version_or_thread_says_stop() {
    let t = Instant::now();
    for hello in [
        r#"{"type":"harness.hello","v":1,"threadId":"thread-1"}"#,
        r#"{"type":"harness.hello","v":3,"threadId":"thread-1"}"#,
        r#"{"type":"harness.hello","v":2,"threadId":"thread-2"}"#,
    ] {
        let mut c = Client::new(ClientConfig::new("thread-1"));
        c.connect(t);
        c.handle_frame(t, hello);
        let evs = events(&mut c);
        assert!(
            evs.iter().any(|e| matches!(
                e,
                ClientEvent::Error {
                    action: Action::Stop,
                    ..
                }
            )),
            "{hello}: {evs:?}"
        );
        assert!(
            !evs.iter().any(|e| matches!(e, ClientEvent::Hello { .. })),
            "{hello}"
        );
        assert!(!c.is_connected());
        assert_eq!(c.handle_close(t, None), Action::Stop, "{hello}");
    }
    // The hello the spec shows, and one with no version (none to compare), go on.
    for hello in [
        r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#,
        r#"{"type":"harness.hello","threadId":"thread-1"}"#,
    ] {
        let mut c = Client::new(ClientConfig::new("thread-1"));
        c.connect(t);
        c.handle_frame(t, hello);
        assert!(matches!(events(&mut c)[..], [ClientEvent::Hello { .. }]));
        assert!(c.is_connected());
    }
}

/// "`harness.receipt` | … | The answer to one `harness.input`." and "Pick a new
/// `requestId` for each input. The receipt and any error frame repeat it." A receipt for a
/// request the client never sent (or already answered) answers nothing: handed to the app
/// it was an answer with an empty `inputId`, or a second, contradicting answer to one
/// input. It is reported as a bad frame. The answer names the `inputId` the client sent
/// ("The `inputId` of its receipt is the id that you sent").
#[test]
fn a_receipt_answers_one_pending_input_once() {
    let t = Instant::now();
    let mut c = Client::new(ClientConfig::new("t"));
    c.connect(t);
    let req = c.send_input(Input::prompt("x").with_input_id("in-1"));
    for f in [
        r#"{"type":"harness.receipt","requestId":"nope","status":"accepted"}"#.to_string(),
        format!(
            r#"{{"type":"harness.receipt","requestId":"{req}","status":"accepted","inputId":"in-1","operationId":"op-1"}}"#
        ),
        format!(
            r#"{{"type":"harness.receipt","requestId":"{req}","status":"rejected","reason":"x"}}"#
        ),
    ] {
        c.handle_frame(t, &f);
    }
    let evs = events(&mut c);
    let answers: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Receipt(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{evs:?}");
    assert_eq!(
        (answers[0].request_id.as_str(), answers[0].input_id.as_str()),
        (req.as_str(), "in-1")
    );
    assert_eq!(answers[0].operation_id.as_deref(), Some("op-1"));
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(e, ClientEvent::BadFrame(_)))
            .count(),
        2
    );
    // A host that names another inputId: the app keys its inputs by the id it sent.
    let req = c.send_input(Input::prompt("y").with_input_id("in-2"));
    c.handle_frame(
        t,
        &format!(r#"{{"type":"harness.receipt","requestId":"{req}","status":"accepted","inputId":"in-other"}}"#),
    );
    assert!(matches!(&events(&mut c)[..], [ClientEvent::Receipt(r)] if r.input_id == "in-2"));
}

/// `POST control` answers "`200`: the receipt, `{ inputId, status, operationId?, reason? }`",
/// "`400`: `{ error }`", "`401`: the request has no user", "`403`: `{ error: 'forbidden' }`";
/// and "send the same id again after a lost answer". Every other answer tells the app
/// something it can act on: a 5xx or an unreadable receipt is a lost answer (resend), a 400
/// is not (the same body fails the same way).
#[test]
fn every_answer_of_post_control_says_what_to_do() {
    let mut c = Client::new(ClientConfig::new("thread-1"));
    let (_, input_id) =
        c.control_body(serde_json::from_str::<Input>(r#"{"op":"prompt","message":"Hi"}"#).unwrap());
    let ok = c
        .handle_control_answer(
            200,
            &format!(r#"{{"inputId":"{input_id}","status":"accepted","operationId":"op-1"}}"#),
        )
        .unwrap();
    assert_eq!(ok.input_id, input_id);
    assert_eq!(ok.operation_id.as_deref(), Some("op-1"));
    assert_eq!(
        c.handle_control_answer(400, r#"{"error":"unknown op teleport"}"#),
        Err(ControlFailure::Invalid {
            status: 400,
            error: "unknown op teleport".into()
        })
    );
    assert_eq!(
        c.handle_control_answer(401, ""),
        Err(ControlFailure::SignIn)
    );
    assert_eq!(
        c.handle_control_answer(403, r#"{"error":"forbidden"}"#),
        Err(ControlFailure::Forbidden)
    );
    for (status, body) in [
        (500, "boom"),
        (502, ""),
        (503, r#"{"error":"busy"}"#),
        (429, r#"{"error":"slow down"}"#),
        (200, "<html>proxy</html>"),
        (200, r#"{"status":"accepted""#),
    ] {
        assert_eq!(
            c.handle_control_answer(status, body),
            Err(ControlFailure::Lost { status }),
            "{status} {body}"
        );
    }
}

/// A turn ends with `RUN_FINISHED` (outcome `cancelled` on a cancel) or `RUN_ERROR`; an app
/// waiting for its answer must stop on either, not only on `RUN_FINISHED`.
#[test]
fn a_run_ends_on_run_finished_or_run_error_only() {
    use harness_tanstack::agui::AguiEvent;
    use harness_tanstack::client::DeliveredEvent;
    let ev = |json: &str| DeliveredEvent {
        cursor: Cursor::new("1"),
        operation_id: "op-1".into(),
        parent_run_id: None,
        event: serde_json::from_str::<AguiEvent>(json).unwrap(),
    };
    assert!(ev(r#"{"type":"RUN_FINISHED","threadId":"t","runId":"op-1"}"#).ends_run());
    assert!(ev(r#"{"type":"RUN_FINISHED","threadId":"t","runId":"op-1","outcome":{"type":"cancelled"}}"#).ends_run());
    assert!(ev(r#"{"type":"RUN_ERROR","message":"boom"}"#).ends_run());
    assert!(!ev(r#"{"type":"RUN_STARTED","threadId":"t","runId":"op-1"}"#).ends_run());
    assert!(!ev(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}"#).ends_run());
}
