//! The harness side against the spec's "Connection": `session:start`'s protocol (close
//! 4000), every message a JSON text frame (no binary frames; what is not a message, or comes
//! before `session:start`, changes nothing), unknown types and fields ignored, the upgrade's
//! Bearer secret and subprotocol, `wss://`. Each rule with the spec line it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use harness_jambonz::frame::DecodeError;
use harness_jambonz::harness_side::{
    ActionError, CallEvent, HarnessCall, HarnessConfig, JambonzFrameError, Transmit,
};
use harness_jambonz::turn::InputKind;
use harness_jambonz::upgrade::{SUBPROTOCOL, check_upgrade};
use serde_json::json;

mod common;
use common::{START, drain_events, sent, started, turn};

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
            [CallEvent::UnsupportedProtocol { .. }]
        ));
        assert!(c.is_over());
        assert_eq!(
            c.handle_frame(now, &turn(1)),
            Err(JambonzFrameError::Closed)
        );
    }
    let (mut c, _) = started();
    assert!(matches!(
        drain_events(&mut c)[..],
        [CallEvent::SessionStarted(_)]
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
        matches!(c.handle_frame(now, &turn(1)), Err(JambonzFrameError::BeforeSessionStart { kind }) if kind == "turn:start")
    );
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"dtmf"}"#),
        Err(JambonzFrameError::BeforeSessionStart { .. })
    ));
    assert_eq!(c.start_reply(None), Err(ActionError::NotActive));
    assert!(drain_events(&mut c).is_empty());
    c.handle_frame(now, START).unwrap();
    c.handle_frame(now, &turn(1)).unwrap();
    drain_events(&mut c);
    for bad in ["{", "null", "[]", r#"{"no":"type"}"#] {
        let e = c.handle_frame(now, bad).unwrap_err();
        assert!(matches!(e, JambonzFrameError::Decode(_)), "{bad}: {e:?}");
    }
    // A turn id that is not a number: no turn to start.
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"turn:start","turn_id":"x"}"#),
        Err(JambonzFrameError::MissingTurnId { .. })
    ));
    // "There are no binary frames."
    assert_eq!(c.handle_binary(now), Err(JambonzFrameError::Binary));
    assert_eq!(
        c.handle_frame(now, START),
        Err(JambonzFrameError::DuplicateSessionStart)
    );
    assert_eq!(
        c.handle_frame(now, &turn(1)),
        Err(JambonzFrameError::DuplicateTurn(1))
    );
    assert!(matches!(
        c.handle_frame(now, r#"{"type":"turn:start","input":{"type":"greeting"}}"#),
        Err(JambonzFrameError::MissingTurnId { .. })
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
        Err(JambonzFrameError::TooLarge { limit: 64, .. })
    ));
    assert!(!c.is_active());
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
    let [CallEvent::TurnCancelled(tc)] = &evs[..] else {
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
    let [CallEvent::TurnStarted(ts)] = &evs[..] else {
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
    assert!(matches!(&evs[0], CallEvent::SpeechStarted(s) if s.turn_id == Some(4)));
    assert!(
        matches!(&evs[1], CallEvent::Transcript(t) if t.turn_id == Some(4) && t.text.is_empty() && t.extra["final"] == "yes")
    );
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

#[test]
fn decode_errors_are_typed() {
    let (mut c, now) = started();
    assert!(matches!(
        c.handle_frame(now, "{"),
        Err(JambonzFrameError::Decode(DecodeError::NotAnObject(_)))
    ));
}
