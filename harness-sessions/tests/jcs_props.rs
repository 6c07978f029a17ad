//! The crate's RFC 8785 writer (behind `hash::canonical_event` and `hash::canonical_value`)
//! writes, byte for byte, what `serde_json_canonicalizer` writes: a journal's records, and so
//! their hash chain, are what they were when that crate wrote them. The content hash is
//! "SHA-256 of the RFC 8785 (JCS) canonical JSON" (spec/agentsessions.md, "Hash chain"),
//! computed as agentsessions' `canon/canon.go` does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_core::Timestamp;
use harness_core::agent::ToolLoopAgent;
use harness_core::event::{Event, EventBody, IdentityRef};
use harness_core::message::{
    DataPart, JsonObject, Message, Part, ReasoningPart, Role, ToolCall, ToolResult,
};
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::hash::{canonical_event, canonical_value};
use harness_sessions::journal::MemoryJournal;
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Characters that make key order and escaping hard: a prefix and its extensions, controls,
/// quote, backslash, solidus, DEL, the last BMP code points below and above the surrogates
/// (U+E000.. sorts after an astral character in UTF-8 but before it in UTF-16), astral ones.
const CHARS: &[char] = &[
    'a',
    'b',
    'B',
    '_',
    ' ',
    '!',
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{8}',
    '\u{1f}',
    '\n',
    '\t',
    '\u{7f}',
    'é',
    '\u{2028}',
    '\u{d7ff}',
    '\u{e000}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10000}',
    '\u{1f600}',
];

fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(CHARS), 0..max).prop_map(String::from_iter)
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::from),
        any::<u64>().prop_map(Number::from),
        (-1000i64..1000).prop_map(Number::from),
        any::<f64>().prop_filter_map("finite", Number::from_f64),
        prop::sample::select(vec![
            0.0,
            -0.0,
            1e21,
            1e-7,
            123e-20,
            2.0f64.powi(53) + 1.0,
            0.1
        ])
        .prop_filter_map("finite", Number::from_f64),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        text(6).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(4), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn object() -> impl Strategy<Value = JsonObject> {
    prop::collection::vec((text(4), value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        text(12).prop_map(Part::text),
        object().prop_map(|data| Part::Data(DataPart { data })),
        (text(4), text(4), object())
            .prop_map(|(id, tool, args)| Part::ToolCall(ToolCall::new(id, tool, args))),
        (text(4), prop::option::of(object()), any::<bool>(), text(6)).prop_map(
            |(id, output, is_error, error)| Part::ToolResult(ToolResult {
                id,
                output,
                is_error,
                error,
                ..ToolResult::default()
            })
        ),
        (
            text(4),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..8))
        )
            .prop_map(|(provider, opaque)| Part::Reasoning(ReasoningPart {
                provider,
                opaque,
                summary: vec![Part::text("s")],
                ..ReasoningPart::default()
            })),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop::sample::select(vec![Role::User, Role::Assistant, Role::System, Role::Tool]),
        prop::collection::vec(part(), 0..4),
    )
        .prop_map(|(role, parts)| Message { role, parts })
}

/// Envelope keys among an unknown event's members: a key twice in one object, of which the
/// reference keeps the first.
fn unknown_fields() -> impl Strategy<Value = JsonObject> {
    let key = prop_oneof![
        Just("kind".to_owned()),
        Just("execution_id".to_owned()),
        Just("ts".to_owned()),
        Just("actor".to_owned()),
        text(4),
    ];
    prop::collection::vec((key, value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

fn event() -> impl Strategy<Value = Event> {
    let body = prop_oneof![
        message().prop_map(EventBody::Input),
        message().prop_map(EventBody::Output),
        (text(6), unknown_fields()).prop_map(|(kind, fields)| EventBody::Unknown { kind, fields }),
    ];
    (
        text(8),
        prop::option::of((any::<i64>(), 0i32..1_000_000_000)),
        any::<i32>(),
        prop::option::of(text(4)),
        body,
    )
        .prop_map(|(execution_id, ts, schema_version, actor, body)| Event {
            execution_id,
            timestamp: ts.map(|(seconds, nanos)| Timestamp { seconds, nanos }),
            schema_version,
            actor: actor.map(|principal| IdentityRef {
                principal,
                ..IdentityRef::default()
            }),
            body,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any JSON value: the reference's bytes (key order by UTF-16 code units, ECMAScript
    /// numbers, JSON.stringify escapes).
    #[test]
    fn any_value_is_the_references(v in value()) {
        let reference = serde_json_canonicalizer::to_string(&v).unwrap();
        prop_assert_eq!(canonical_value(&v).unwrap(), reference);
    }

    /// Any event of a message or of an unknown kind (whose members may repeat an envelope
    /// key): the reference's bytes, or refused alike.
    #[test]
    fn any_event_is_the_references(ev in event()) {
        let reference = serde_json_canonicalizer::to_string(&ev);
        match canonical_event(&ev) {
            Ok(ours) => prop_assert_eq!(ours, reference.unwrap()),
            // Refused for depth only, which the reference does not check.
            Err(e) => prop_assert!(e.0.contains("deep"), "{e}"),
        }
    }
}

/// Every record of real turns (start, inputs, model calls, a tool call and result, output,
/// usage, end) is stored as the reference canonicalizes its event.
#[test]
fn a_turns_records_are_the_references() {
    let tools = Tools::new().with(Tool::sync("get_weather", "weather", |call| {
        ToolResult::ok_json(
            &call.id,
            serde_json::json!({"celsius": 21.5, "wind": [1e21, -0.0]}),
        )
    }));
    let model = ScriptedModel::new()
        .tool_call(
            "get_weather",
            serde_json::json!({"city": "Paris \u{1f600}\n"}),
        )
        .reply("Sunny \"in\" Paris.");
    let host = Controller::builder(MemoryJournal::new())
        .model(model)
        .tools(tools.clone())
        .harness("weather", ToolLoopAgent::new("weather").with_tools(&tools))
        .build();
    host.create_session("s", None).unwrap();
    futures::executor::block_on(host.exec(ExecRequest::text("s", "Weather in Paris?"))).unwrap();
    let records = host.records("s").unwrap();
    assert!(records.len() >= 6, "{}", records.len());
    for r in &records {
        let reference = serde_json_canonicalizer::to_string(&r.event).unwrap();
        assert_eq!(r.canonical(), reference);
    }
}
