//! The message model, the traits and the test utilities.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::executor::block_on;
use harness_core::agent::ToolLoopAgent;
use harness_core::event::{Event, EventBody, ExecutionStart};
use harness_core::message::{
    FilePart, Mediation, Message, ModelRequest, Part, ReasoningPart, Role, ToolCall,
    ToolDefinition, ToolResult, ToolResultCode, Usage,
};
use harness_core::model::{Model, ModelError, ScriptedModel, word_deltas};
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::tool::Tool;
use harness_core::{
    Cursor, Descriptor, EventSink, Harness, HarnessError, SinkError, Start, Timestamp,
};
use serde_json::json;

#[test]
fn messages_round_trip_through_json_with_every_part_kind() {
    let m = Message {
        role: Role::Assistant,
        parts: vec![
            Part::text("hi"),
            Part::File(FilePart {
                mime: "image/png".into(),
                bytes: Some(vec![1, 2]),
                name: "img".into(),
                ..Default::default()
            }),
            Part::Reasoning(ReasoningPart {
                provider: "p".into(),
                opaque: Some(b"r".to_vec()),
                summary: vec![Part::text("brief")],
                ordinal: 1,
                ..Default::default()
            }),
            Part::ToolCall(ToolCall::new(
                "c1",
                "get_hours",
                json!({"day": "mon"}).as_object().unwrap().clone(),
            )),
            Part::ToolResult(
                ToolResult::error("c1", "closed").with_code(ToolResultCode::ExecutorError),
            ),
        ],
    };
    let s = serde_json::to_string(&m).unwrap();
    // Bytes are base64, as proto3-JSON writes them; opaque reasoning survives verbatim.
    assert!(s.contains(r#""bytes":"AQI=""#), "{s}");
    assert!(s.contains(r#""opaque_bytes":"cg==""#), "{s}");
    assert!(s.contains(r#""code":"EXECUTOR_ERROR""#), "{s}");
    let back: Message = serde_json::from_str(&s).unwrap();
    assert_eq!(back, m);
}

#[test]
fn unknown_roles_are_kept() {
    let m: Message = serde_json::from_str(r#"{"role":"developer","parts":[]}"#).unwrap();
    assert_eq!(m.role, Role::Other("developer".into()));
    assert_eq!(
        serde_json::to_string(&m).unwrap(),
        r#"{"role":"developer"}"#
    );
}

#[test]
fn mediation_reads_go_and_proto_names_and_writes_proto_names() {
    let c: ToolCall = serde_json::from_str(
        r#"{"id":"1","tool":"t","mediation":"CONTROLLER_MEDIATED","idempotency_key":"k"}"#,
    )
    .unwrap();
    assert_eq!(c.mediation, Mediation::ControllerMediated);
    assert!(c.mediation.is_host_executed());
    assert!(
        serde_json::to_string(&c)
            .unwrap()
            .contains(r#""mediation":"MEDIATION_CONTROLLER_MEDIATED""#)
    );
    // Unset mediation is omitted (proto3-JSON omits enum zero values).
    let plain = ToolCall::new("1", "t", Default::default());
    assert_eq!(
        serde_json::to_string(&plain).unwrap(),
        r#"{"id":"1","tool":"t"}"#
    );
}

#[test]
fn int64_fields_are_strings_and_numbers_are_accepted() {
    let u = Usage {
        model: "m".into(),
        input_tokens: 12,
        output_tokens: 3,
        reasoning_tokens: 0,
    };
    assert_eq!(
        serde_json::to_string(&u).unwrap(),
        r#"{"model":"m","input_tokens":"12","output_tokens":"3"}"#
    );
    let back: Usage = serde_json::from_str(r#"{"input_tokens":12,"output_tokens":"3"}"#).unwrap();
    assert_eq!((back.input_tokens, back.output_tokens), (12, 3));
    assert!(serde_json::from_str::<Usage>(r#"{"input_tokens":"x"}"#).is_err());
    assert!(serde_json::from_str::<Usage>(r#"{"input_tokens":-1}"#).is_err());
}

#[test]
fn journal_events_serialize_as_proto3_json() {
    let ev = Event::new(
        "exec-config",
        EventBody::ExecutionStart(ExecutionStart {
            config: vec![0x00, 0xff, 0x20, 0x0a, 0x09],
            resume_from_seq: 9_007_199_254_740_993,
            input_count: Some(2),
            ..Default::default()
        }),
    );
    let v = serde_json::to_value(&ev).unwrap();
    assert_eq!(
        v,
        json!({
            "execution_id": "exec-config",
            "kind": "EVENT_EXECUTION_START",
            "execution_start": {"config": "AP8gCgk=", "input_count": "2", "resume_from_seq": "9007199254740993"}
        })
    );
    // An explicit zero input count is kept (proto3 `optional`).
    let zero = Event::new(
        "e",
        EventBody::ExecutionStart(ExecutionStart {
            input_count: Some(0),
            ..Default::default()
        }),
    );
    assert_eq!(
        serde_json::to_value(&zero).unwrap()["execution_start"],
        json!({"input_count": "0"})
    );
    let back: Event = serde_json::from_value(v).unwrap();
    assert_eq!(back, ev);
}

#[test]
fn timestamps_are_rfc3339_utc() {
    for (secs, nanos, text) in [
        (1_700_000_000, 0, "2023-11-14T22:13:20Z"),
        (0, 0, "1970-01-01T00:00:00Z"),
        (951_782_400, 1_000_000, "2000-02-29T00:00:00.001Z"),
        (-1, 999_999_999, "1969-12-31T23:59:59.999999999Z"),
        (253_402_300_799, 120_000, "9999-12-31T23:59:59.000120Z"),
    ] {
        let t = Timestamp::new(secs, nanos);
        assert_eq!(t.to_string(), text);
        assert_eq!(text.parse::<Timestamp>().unwrap(), t, "{text}");
    }
    assert_eq!(
        "2023-11-14T23:13:20+01:00".parse::<Timestamp>().unwrap(),
        Timestamp::new(1_700_000_000, 0)
    );
    for bad in [
        "",
        "2023-02-30T00:00:00Z",
        "2023-11-14 22:13:20Z",
        "2023-11-14T22:13:20",
        "2023-11-14T25:00:00Z",
        "2023-11-14T22:13:20.Z",
        "x023-11-14T22:13:20Z",
        "2023-11-14T22:13:20.1234567890Z",
    ] {
        assert!(bad.parse::<Timestamp>().is_err(), "{bad}");
    }
}

#[test]
fn cursors_are_opaque_strings() {
    let a = Cursor::new("4");
    let b: Cursor = serde_json::from_str("\"4\"").unwrap();
    assert_eq!(a, b);
    assert_eq!(a, "4");
    assert_eq!(a.to_string(), "4");
    assert_ne!(a, Cursor::new("04"), "never parsed as a number");
}

#[test]
fn word_deltas_split_after_whitespace_and_rejoin_exactly() {
    for text in [
        "",
        "one",
        "We open at eight.",
        "  lead and trail  ",
        "a\nb\tc",
        "東京 🚀 ok",
    ] {
        let d = word_deltas(text);
        assert_eq!(d.concat(), text);
    }
    assert_eq!(word_deltas("a b"), ["a ", "b"]);
}

#[test]
fn scripted_model_follows_its_script_then_its_fallback() {
    let model = ScriptedModel::new()
        .reply("first")
        .fail(ModelError::Provider("boom".into()))
        .otherwise(|req| {
            Ok(Message::assistant(format!(
                "echo {}",
                req.last_user_text().unwrap_or_default()
            )))
        });
    let req = ModelRequest::new(vec![Message::user("hi")]);
    let mut deltas = Vec::new();
    let r = block_on(model.complete(&req, &mut |d| deltas.push(d.to_owned()))).unwrap();
    assert_eq!(r.message.text(), "first");
    assert_eq!(r.usage.model, "scripted");
    assert_eq!(r.usage.input_tokens, 1);
    assert_eq!(
        block_on(model.complete(&req, &mut |_| {})),
        Err(ModelError::Provider("boom".into()))
    );
    assert_eq!(
        block_on(model.complete(&req, &mut |_| {}))
            .unwrap()
            .message
            .text(),
        "echo hi"
    );
    assert_eq!(model.calls(), 3);

    let empty = ScriptedModel::new();
    assert_eq!(
        block_on(empty.complete(&req, &mut |_| {})),
        Err(ModelError::ScriptExhausted { call: 1 })
    );
}

#[test]
fn tool_loop_agent_runs_tools_through_the_host_with_keys() {
    let model = Arc::new(
        ScriptedModel::new()
            .tool_call("get_hours", json!({"day": "sat"}))
            .tool_call("book", json!({}))
            .reply("Booked for Saturday."),
    );
    let mut sink = RecordingSink::new(model.clone()).with_tool(Tool::sync("get_hours", "", |c| {
        ToolResult::ok(&c.id, json!({"sat": "closed"}).as_object().unwrap().clone())
    }));
    let agent = ToolLoopAgent::new("faq")
        .with_system_prompt("Be brief.")
        .with_tool(ToolDefinition::new("get_hours", "Opening hours"))
        .reporting_usage();
    let mut start = Start::with_inputs(vec![Message::user("Book Saturday")]);
    start.execution_id = "x1".into();
    start.history = vec![
        Event::new("x0", EventBody::Input(Message::user("hello"))),
        Event::new("x0", EventBody::Output(Message::assistant("hi"))),
    ]
    .into();
    block_on(agent.run(start, &mut sink)).unwrap();
    assert_eq!(model.calls(), 3);
    let calls = sink.tool_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].mediation, Mediation::ControllerMediated);
    assert_eq!(calls[0].idempotency_key, "x1:call_1");
    // The unregistered tool got an error result, fed back to the model.
    let results: Vec<_> = sink
        .calls()
        .iter()
        .filter_map(|c| match c {
            SinkCall::ToolCall { result, .. } => Some(result),
            _ => None,
        })
        .collect();
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    // The first request: system prompt, history, then the input.
    let SinkCall::Model { request, .. } = &sink.calls()[0] else {
        panic!()
    };
    let roles: Vec<_> = request.messages.iter().map(|m| m.role.clone()).collect();
    assert_eq!(
        roles,
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    assert_eq!(request.tools.len(), 1);
    // The last request carries both tool results.
    let SinkCall::Model { request, .. } = sink
        .calls()
        .iter()
        .rfind(|c| matches!(c, SinkCall::Model { .. }))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        2
    );
    assert_eq!(sink.spoken_text(), "Booked for Saturday.");
    assert!(sink.reported_usage().output_tokens > 0);
}

#[test]
fn a_cancelled_sink_refuses_every_call() {
    let mut sink = RecordingSink::new(ScriptedModel::echo());
    sink.cancel();
    let err = block_on(
        ToolLoopAgent::new("a").run(Start::with_inputs(vec![Message::user("x")]), &mut sink),
    )
    .unwrap_err();
    assert_eq!(err, HarnessError::Sink(SinkError::Cancelled));
    assert!(err.is_cancelled());
    assert!(sink.calls().is_empty());
}

#[test]
fn an_agent_that_never_stops_calling_tools_fails_cleanly() {
    let model = ScriptedModel::new().otherwise(|_| {
        Ok(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(ToolCall::new(
                "c",
                "loop",
                Default::default(),
            ))],
        })
    });
    let mut sink = RecordingSink::new(model);
    let err = block_on(
        ToolLoopAgent::new("a")
            .with_max_steps(3)
            .run(Start::with_inputs(vec![Message::user("x")]), &mut sink),
    )
    .unwrap_err();
    assert!(matches!(err, HarnessError::Failed(_)));
    assert_eq!(sink.model_calls(), 3);
}

#[test]
fn descriptors_and_starts_serialize() {
    let d = block_on(ToolLoopAgent::new("faq").describe()).unwrap();
    let s = serde_json::to_string(&d).unwrap();
    assert!(s.contains(r#""resumability":"STATELESS_REPLAY""#), "{s}");
    let back: Descriptor = serde_json::from_str(&s).unwrap();
    assert_eq!(back, d);
    let start = Start {
        config: b"{\"system_prompt\":\"x\"}".to_vec(),
        ..Start::with_inputs(vec![Message::user("q")])
    };
    let back: Start = serde_json::from_str(&serde_json::to_string(&start).unwrap()).unwrap();
    assert_eq!(back, start);
}

// DESIGN principle 4, "Unknown is kept, not dropped": an event of a kind this version does
// not know decodes, and re-serializes to the same JSON (so it hashes the same).
#[test]
fn events_of_unknown_kinds_are_kept_and_reserialize_unchanged() {
    use harness_core::event::EventKind;
    let raw = json!({
        "execution_id": "e1",
        "ts": "2023-11-14T22:13:20Z",
        "schema_version": 1,
        "kind": "EVENT_SNAPSHOT",
        "snapshot": {"uri": "s3://x", "bytes": "12"},
        "message": {"role": "assistant", "parts": [{"text": {"text": "kept"}}]},
        "actor": {"principal": "agent://a"}
    });
    let ev: Event = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(ev.kind(), EventKind::Unknown);
    match &ev.body {
        EventBody::Unknown { kind, fields } => {
            assert_eq!(kind, "EVENT_SNAPSHOT");
            assert_eq!(fields["snapshot"]["uri"], "s3://x");
            assert_eq!(fields["message"]["parts"][0]["text"]["text"], "kept");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ev.execution_id, "e1");
    assert_eq!(serde_json::to_value(&ev).unwrap(), raw);
}

// proto3-JSON readers accept an enum by number and treat null as unset.
#[test]
fn event_kinds_by_number_and_null_members_are_read() {
    let ev: Event = serde_json::from_value(json!({
        "execution_id": null,
        "kind": 3,
        "message": {"role": "assistant", "parts": [{"text": {"text": "hi"}}]},
        "actor": null
    }))
    .unwrap();
    assert_eq!(ev.body, EventBody::Output(Message::assistant("hi")));
    assert_eq!(ev.execution_id, "");
    assert!(
        serde_json::from_value::<Event>(json!({"message": {}})).is_err(),
        "no kind"
    );
    assert!(serde_json::from_value::<Event>(json!([1])).is_err());
}

#[test]
fn recording_sink_holds_tool_calls_to_the_controller_rules() {
    use harness_core::message::JsonObject;
    let mut sink = RecordingSink::new(ScriptedModel::new()).with_tool(Tool::sync("t", "", |c| {
        ToolResult::ok_json(&c.id, json!("done"))
    }));
    let plain = ToolCall::new("c1", "t", JsonObject::new());
    // Unmediated, then mediated without a key: refused, nothing recorded.
    let err = block_on(sink.tool_call(plain.clone())).unwrap_err();
    assert!(matches!(err, SinkError::Rejected(ref m) if m.contains("unmediated")));
    let no_key = plain.clone().with_mediation(Mediation::ControllerMediated);
    let err = block_on(sink.tool_call(no_key)).unwrap_err();
    assert_eq!(err, SinkError::Rejected("missing idempotency key".into()));
    assert!(sink.calls().is_empty());
    // Mediated with a key: run.
    let r = block_on(sink.tool_call(plain.clone().controller_mediated("x1"))).unwrap();
    assert_eq!(r.output.unwrap()["result"], "done");
    assert_eq!(sink.tool_calls()[0].idempotency_key, "x1:c1");
    // Lenient: the unmediated call runs too.
    let mut lenient = RecordingSink::new(ScriptedModel::new()).lenient_tools();
    assert!(block_on(lenient.tool_call(plain)).is_ok());
}

#[test]
fn recording_sink_deltas_are_what_a_streaming_host_sends() {
    let mut sink = RecordingSink::new(ScriptedModel::new().reply("Sunny in Paris."));
    block_on(ToolLoopAgent::new("a").run(Start::with_inputs(vec![Message::user("x")]), &mut sink))
        .unwrap();
    block_on(sink.output(" Bye.")).unwrap();
    assert_eq!(sink.deltas(), ["Sunny ", "in ", "Paris.", " Bye."]);
    assert_eq!(sink.deltas().concat(), sink.spoken_text());
}
