//! The message model: every message of the spec with its exact wire names, unknown types
//! and fields kept, the turn record's limit; proptests for the codec.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_jambonz::command::{CommandMessage, JambonzCommand};
use harness_jambonz::event::JambonzEvent;
use harness_jambonz::frame::{DecodeError, HarnessMessage, JambonzMessage, peek_type};
use harness_jambonz::reply::Chunk;
use harness_jambonz::turn::InputKind;
use harness_jambonz::turn_record::{TURN_RECORD_MAX_BYTES, TurnRecord};
use proptest::prelude::*;
use serde_json::{Value, json};

fn j(m: &JambonzMessage) -> Value {
    serde_json::from_str(&m.encode()).unwrap()
}
fn h(m: &HarnessMessage) -> Value {
    serde_json::from_str(&m.encode()).unwrap()
}

/// Every jambonz → harness message of "A whole call", decoded, typed, and encoded back to
/// the same JSON.
#[test]
fn jambonz_messages_of_the_whole_call_decode_and_round_trip() {
    let frames = [
        json!({"type":"session:start","call_sid":"CA1","protocol":1,"from":"+15551234567","to":"+15557654321","direction":"inbound","language":"en-US","metadata":{"plan":"gold"},"tools":[{"name":"get_hours","description":"Opening hours","parameters":{"type":"object"}}]}),
        json!({"type":"turn:start","call_sid":"CA1","turn_id":1,"input":{"type":"greeting"}}),
        json!({"type":"speech:start","call_sid":"CA1","turn_id":2}),
        json!({"type":"transcript","call_sid":"CA1","turn_id":2,"text":"When are you","final":false}),
        json!({"type":"transcript","call_sid":"CA1","turn_id":2,"text":"When are you open","final":true}),
        json!({"type":"turn:start","call_sid":"CA1","turn_id":2,"input":{"type":"speech","text":"When are you open","language":"en-US"}}),
        json!({"type":"tool:result","call_sid":"CA1","call_id":"t1","result":{"weekdays":"8am to 6pm"}}),
        json!({"type":"event","call_sid":"CA1","name":"user_interruption","turn_id":2,"reply_id":"r2","spoken":"We're open eight","unspoken":" to six on weekdays."}),
        json!({"type":"turn:cancel","call_sid":"CA1","turn_id":2,"reason":"barge_in"}),
        json!({"type":"turn:start","call_sid":"CA1","turn_id":3,"input":{"type":"speech","text":"Thanks, bye"}}),
        json!({"type":"command:result","call_sid":"CA1","command_id":"c1","ok":true}),
        json!({"type":"session:end","call_sid":"CA1","reason":"harness_hangup","duration_ms":41250}),
    ];
    let mut kinds = Vec::new();
    for f in &frames {
        let m = JambonzMessage::decode(&f.to_string()).unwrap();
        assert!(!matches!(m, JambonzMessage::Unknown(_)), "{f}");
        assert_eq!(&j(&m), f, "round trip");
        kinds.push(m.kind().to_owned());
    }
    assert_eq!(kinds[0], "session:start");
    let JambonzMessage::SessionStart(s) = JambonzMessage::decode(&frames[0].to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(s.protocol_version(), Some(1));
    assert_eq!(s.from.as_deref(), Some("+15551234567"));
    assert_eq!(s.tool_definitions()[0].name, "get_hours");
    let JambonzMessage::TurnStart(t) = JambonzMessage::decode(&frames[5].to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(t.input.kind(), InputKind::Speech);
    assert_eq!(t.input.speech_text(), Some("When are you open"));
    assert_eq!(t.input.language.as_deref(), Some("en-US"));
    let JambonzMessage::Transcript(tr) = JambonzMessage::decode(&frames[4].to_string()).unwrap()
    else {
        panic!()
    };
    assert!(tr.is_final);
    let JambonzMessage::Event(JambonzEvent::UserInterruption(u)) =
        JambonzMessage::decode(&frames[7].to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(u.spoken, "We're open eight");
    assert_eq!(u.unspoken, " to six on weekdays.");
    let JambonzMessage::SessionEnd(e) = JambonzMessage::decode(&frames[11].to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(e.duration_ms, Some(41250));
}

#[test]
fn harness_messages_of_the_whole_call_decode_and_round_trip() {
    let frames = [
        json!({"type":"reply:chunk","reply_id":"r1","turn_id":1,"chunk":{"choices":[{"delta":{"content":"Thanks for calling Acme."}}]}}),
        json!({"type":"reply:done","reply_id":"r1","turn_id":1,"turn_record":{"route":"chat"}}),
        json!({"type":"tool:call","call_id":"t1","turn_id":2,"name":"get_hours","args":{}}),
        json!({"type":"reply:chunk","reply_id":"r2","turn_id":2,"chunk":{"choices":[{"delta":{"content":"We're open eight to six on weekdays."}}]}}),
        json!({"type":"command","command_id":"c1","name":"hangup","args":{"reason":"resolved"}}),
        json!({"type":"reply:chunk","reply_id":"r3","chunk":{"choices":[{"delta":{"content":"Still there?"}}]},"interrupt":true}),
    ];
    for f in &frames {
        let m = HarnessMessage::decode(&f.to_string()).unwrap();
        assert!(!matches!(m, HarnessMessage::Unknown(_)), "{f}");
        assert_eq!(&h(&m), f, "round trip");
    }
    let HarnessMessage::Command(c) = HarnessMessage::decode(&frames[4].to_string()).unwrap() else {
        panic!()
    };
    assert_eq!(
        c.command(),
        JambonzCommand::Hangup {
            reason: Some("resolved".into())
        }
    );
    let HarnessMessage::ReplyChunk(c) = HarnessMessage::decode(&frames[5].to_string()).unwrap()
    else {
        panic!()
    };
    assert_eq!(c.turn_id, None, "a reply without a turn_id is unprompted");
    assert_eq!(c.interrupt, Some(true));
}

/// "Ignore message types and fields you do not recognize. New ones are added without
/// changing the protocol version." Ignore = never an error; they are kept as given.
#[test]
fn unknown_types_and_fields_are_kept_not_errors() {
    let f = json!({"type":"dtmf","call_sid":"CA1","digit":"5","nested":{"a":[1,2]}});
    let m = JambonzMessage::decode(&f.to_string()).unwrap();
    assert!(matches!(&m, JambonzMessage::Unknown(u) if u.kind == "dtmf"));
    assert_eq!(j(&m), f);

    let f = json!({"type":"turn:start","call_sid":"CA1","turn_id":4,"input":{"type":"dtmf","digits":"12#"},"confidence":0.9});
    let m = JambonzMessage::decode(&f.to_string()).unwrap();
    let JambonzMessage::TurnStart(t) = &m else {
        panic!()
    };
    assert_eq!(t.input.kind(), InputKind::Other("dtmf"));
    assert_eq!(t.input.extra["digits"], "12#");
    assert_eq!(t.extra["confidence"], 0.9);
    assert_eq!(j(&m), f);

    let f = json!({"type":"event","call_sid":"CA1","name":"dtmf","digit":"7"});
    let m = JambonzMessage::decode(&f.to_string()).unwrap();
    assert!(
        matches!(&m, JambonzMessage::Event(JambonzEvent::Other { name, fields }) if name == "dtmf" && fields["digit"] == "7")
    );
    assert_eq!(j(&m), f);

    // Events the spec names without detail decode typed, their fields kept.
    for (name, field) in [
        ("silence", "duration_ms"),
        ("reply_dropped", "reason"),
        ("error", "message"),
    ] {
        let f = json!({"type":"event","call_sid":"CA1","name":name, field: 3000});
        let m = JambonzMessage::decode(&f.to_string()).unwrap();
        assert!(
            !matches!(&m, JambonzMessage::Event(JambonzEvent::Other { .. })),
            "{name} is typed"
        );
        assert_eq!(j(&m), f, "{name}");
    }

    let f = json!({"type":"reply:chunk","reply_id":"r1","chunk":{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}]},"x":1});
    let m = HarnessMessage::decode(&f.to_string()).unwrap();
    let HarnessMessage::ReplyChunk(c) = &m else {
        panic!()
    };
    assert_eq!(c.chunk.content(), "Hi");
    assert_eq!(h(&m)["chunk"]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(h(&m)["x"], 1);

    let f = json!({"type":"play","command_id":"c9"});
    assert!(matches!(
        HarnessMessage::decode(&f.to_string()).unwrap(),
        HarnessMessage::Unknown(_)
    ));
}

#[test]
fn commands_the_spec_names_are_typed() {
    for (name, typed) in [
        ("play", JambonzCommand::Play(serde_json::Map::new())),
        ("listen", JambonzCommand::Listen(serde_json::Map::new())),
    ] {
        let c = CommandMessage {
            command_id: "c1".into(),
            name: name.into(),
            ..Default::default()
        };
        assert_eq!(c.command(), typed);
    }
    let c = CommandMessage {
        command_id: "c1".into(),
        name: "transfer".into(),
        ..Default::default()
    };
    assert!(matches!(c.command(), JambonzCommand::Other { name, .. } if name == "transfer"));
}

/// "Every message is a JSON text frame with a type."
#[test]
fn frames_that_are_not_messages_are_errors() {
    assert!(matches!(
        JambonzMessage::decode("not json"),
        Err(DecodeError::NotAnObject(_))
    ));
    assert!(matches!(
        JambonzMessage::decode("[1,2]"),
        Err(DecodeError::NotAnObject(_))
    ));
    assert_eq!(
        JambonzMessage::decode(r#"{"turn_id":1}"#),
        Err(DecodeError::MissingType)
    );
    assert_eq!(
        JambonzMessage::decode(r#"{"type":7}"#),
        Err(DecodeError::MissingType)
    );
    // A known type whose fields have another shape: kept as given, never an error (the
    // harness side then says the turn id is missing).
    let m = JambonzMessage::decode(r#"{"type":"turn:start","turn_id":"one"}"#).unwrap();
    assert!(
        matches!(&m, JambonzMessage::TurnStart(t) if t.turn_id.is_none() && t.extra["turn_id"] == "one")
    );
    assert_eq!(
        JambonzMessage::decode(&m.encode()).unwrap(),
        m,
        "kept as given, encoded back as given"
    );
    // What a harness sends is checked strictly (the simulator reports it).
    assert!(matches!(
        HarnessMessage::decode(r#"{"type":"reply:chunk","reply_id":7}"#),
        Err(DecodeError::Malformed { kind, .. }) if kind == "reply:chunk"
    ));
    assert!(matches!(
        JambonzMessage::decode(r#"{"type":"event"}"#),
        Err(DecodeError::Malformed { .. })
    ));
}

#[test]
fn the_type_is_found_wherever_it_is() {
    assert_eq!(
        peek_type(r#"{"type":"transcript","text":"a"}"#).unwrap(),
        "transcript"
    );
    assert_eq!(
        peek_type(r#" { "type" : "transcript" } "#).unwrap(),
        "transcript"
    );
    assert_eq!(
        peek_type(r#"{"text":"a","type":"transcript"}"#).unwrap(),
        "transcript"
    );
    assert_eq!(
        peek_type(r#"{"type":"tr\u0061nscript"}"#).unwrap(),
        "transcript"
    );
    let m = JambonzMessage::decode(r#"{"turn_id":2,"text":"hi","final":true,"type":"transcript"}"#)
        .unwrap();
    assert!(matches!(m, JambonzMessage::Transcript(t) if t.text == "hi" && t.is_final));
}

/// A repeated `type` key: the first one decides, whether or not it is the frame's first key
/// (the fast path reads the first key only; the other path must agree with it, and must not
/// call a frame that has a string `type` "without a string `type`").
#[test]
fn a_repeated_type_key_the_first_one_decides_wherever_it_is() {
    for (frame, want) in [
        (
            r#"{"type":"transcript","text":"a","type":"turn:start"}"#,
            "transcript",
        ),
        (
            r#"{"turn_id":1,"type":"transcript","text":"a","type":"turn:start"}"#,
            "transcript",
        ),
        (r#"{"turn_id":1,"type":"dtmf","type":"transcript"}"#, "dtmf"),
    ] {
        assert_eq!(peek_type(frame).unwrap(), want, "{frame}");
        let m = JambonzMessage::decode(frame).unwrap();
        assert_eq!(m.kind(), want, "{frame}");
    }
    // The first `type` is not a string: no string type, wherever a later one is.
    for frame in [
        r#"{"type":7,"type":"transcript"}"#,
        r#"{"a":1,"type":[1,{"b":2}],"type":"transcript"}"#,
    ] {
        assert_eq!(peek_type(frame), Err(DecodeError::MissingType), "{frame}");
    }
    assert!(matches!(
        peek_type(r#"{"a":1,"type":"x""#),
        Err(DecodeError::NotAnObject(_))
    ));
}

/// "Every field is optional, and anything else you add is kept as given."
#[test]
fn the_turn_record_keeps_everything_as_given() {
    let spec = json!({
      "route": "procedure",
      "procedures": ["outage_report"],
      "steps": [
        { "name": "retrieve", "ms": 120, "detail": { "documents": 4 } },
        { "name": "router", "ms": 310 }
      ],
      "model_calls": [
        { "model": "gpt-4.1-mini", "purpose": "router", "input_tokens": 812, "output_tokens": 14, "ms": 310 },
        { "model": "gpt-4.1", "purpose": "reply", "input_tokens": 2240, "output_tokens": 61, "first_token_ms": 420, "ms": 900 }
      ],
      "own_tools": [{ "name": "lookup_account", "ok": true, "ms": 220 }],
      "flags": ["identity_verified"],
      "note": "free text",
      "custom": {"anything": [1, "two"]}
    });
    let r: TurnRecord = serde_json::from_value(spec.clone()).unwrap();
    assert_eq!(r.route.as_deref(), Some("procedure"));
    assert_eq!(r.model_calls.as_ref().unwrap()[1].first_token_ms, Some(420));
    assert_eq!(r.own_tools.as_ref().unwrap()[0].ok, Some(true));
    assert_eq!(r.extra["custom"], json!({"anything": [1, "two"]}));
    assert_eq!(serde_json::to_value(&r).unwrap(), spec);

    // The spec's own minimal harness sends `model_calls: 1`: kept as given, not an error.
    let odd = json!({"model_calls": 1, "steps": "n/a", "route": "chat"});
    let r: TurnRecord = serde_json::from_value(odd.clone()).unwrap();
    assert_eq!(r.model_calls, None);
    assert_eq!(serde_json::to_value(&r).unwrap(), odd);
    let m = HarnessMessage::decode(
        r#"{"type":"reply:done","reply_id":"r1","turn_id":1,"turn_record":{"model_calls":1}}"#,
    )
    .unwrap();
    assert_eq!(h(&m)["turn_record"]["model_calls"], 1);
}

/// "Up to 16 KB": checked on the serialized size.
#[test]
fn the_turn_record_limit_is_on_serialized_size() {
    let mut r = TurnRecord::default();
    let overhead = serde_json::to_string(&TurnRecord {
        note: Some(String::new()),
        ..Default::default()
    })
    .unwrap()
    .len();
    r.note = Some("x".repeat(TURN_RECORD_MAX_BYTES - overhead));
    assert_eq!(r.serialized_size(), TURN_RECORD_MAX_BYTES);
    assert!(r.check_size().is_ok());
    r.note = Some("x".repeat(TURN_RECORD_MAX_BYTES - overhead + 1));
    let e = r.check_size().unwrap_err();
    assert_eq!(e.size, TURN_RECORD_MAX_BYTES + 1);
    // Escapes count as they are written: 3000 quotes serialize as 6000 bytes.
    r.note = Some("\"".repeat(9000));
    assert!(r.serialized_size() > 18000);
    assert!(r.check_size().is_err());
}

#[test]
fn tool_calls_in_chunks_are_seen() {
    let c: Chunk = serde_json::from_value(
        json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"x"}}]}}]}),
    )
    .unwrap();
    assert!(c.has_tool_calls());
    assert_eq!(c.content(), "");
    assert!(!Chunk::text("hi").has_tool_calls());
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[a-zA-Z \\\\\"\\n\u{e9}\u{1F600}]{0,20}"]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        arb_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const KINDS: &[&str] = &[
    "session:start",
    "turn:start",
    "speech:start",
    "transcript",
    "tool:result",
    "event",
    "turn:cancel",
    "command:result",
    "session:end",
    "reply:chunk",
    "reply:done",
    "tool:call",
    "command",
    "mystery",
];
const FIELDS: &[&str] = &[
    "call_sid",
    "protocol",
    "turn_id",
    "input",
    "text",
    "final",
    "call_id",
    "result",
    "error",
    "name",
    "reason",
    "command_id",
    "ok",
    "duration_ms",
    "reply_id",
    "chunk",
    "interrupt",
    "turn_record",
    "args",
    "spoken",
    "unspoken",
    "tools",
    "metadata",
];

fn arb_frame() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(KINDS),
        prop::collection::vec((prop::sample::select(FIELDS), arb_json()), 0..6),
    )
        .prop_map(|(kind, fields)| {
            let mut m = serde_json::Map::new();
            m.insert("type".into(), kind.into());
            for (k, v) in fields {
                m.insert(k.into(), v);
            }
            Value::Object(m)
        })
}

proptest! {
    /// Arbitrary text never panics either decoder.
    #[test]
    fn arbitrary_text_never_panics(s in any::<String>()) {
        let _ = JambonzMessage::decode(&s);
        let _ = HarnessMessage::decode(&s);
        let _ = peek_type(&s);
    }

    /// Any frame that decodes encodes back to a frame that decodes to the same message, and
    /// every field of the original is written back as given (a `null` for an optional field
    /// reads as unset and may be left out; a missing `text`/`final` is written as its
    /// default).
    #[test]
    fn decode_encode_round_trips(f in arb_frame()) {
        let text = f.to_string();
        if let Ok(m) = JambonzMessage::decode(&text) {
            let again = JambonzMessage::decode(&m.encode()).unwrap();
            prop_assert_eq!(&again, &m);
            prop_assert!(kept(&f, &j(&m)), "{} -> {}", f, m.encode());
        }
        if let Ok(m) = HarnessMessage::decode(&text) {
            let again = HarnessMessage::decode(&m.encode()).unwrap();
            prop_assert_eq!(&again, &m);
            prop_assert!(kept(&f, &h(&m)), "{} -> {}", f, m.encode());
        }
    }
}

/// Every field of `original` is in `encoded` with the same value, nulls aside.
fn kept(original: &Value, encoded: &Value) -> bool {
    match (original, encoded) {
        (Value::Object(x), Value::Object(y)) => x.iter().all(|(k, v)| match y.get(k) {
            Some(w) => kept(v, w),
            None => v.is_null(),
        }),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| kept(a, b))
        }
        _ => original == encoded,
    }
}

/// A repeated key: the last one wins, whether it has the typed shape or not, and the message
/// re-encodes to itself (found by the fuzz target's round trip).
#[test]
fn repeated_keys_last_wins_and_round_trip() {
    for text in [
        r#"{"type":"command:result","command_id":"c1","ok":true,"ok":"yes"}"#,
        r#"{"type":"command:result","command_id":"c1","ok":"yes","ok":true}"#,
        r#"{"type":"transcript","text":"a","text":"b","final":true}"#,
    ] {
        let m = JambonzMessage::decode(text).unwrap();
        assert_eq!(JambonzMessage::decode(&m.encode()).unwrap(), m, "{text}");
    }
    let JambonzMessage::CommandResult(r) = JambonzMessage::decode(
        r#"{"type":"command:result","command_id":"c1","ok":"yes","ok":true}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert!(r.ok && r.extra.is_empty());
}
