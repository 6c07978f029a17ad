//! Reference harness 2 (chat): its per-execution system prompt rules, every malformed case,
//! and its conversation context, as spec/agentsessions-writing-a-harness.txt words them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use harness_core::event::{EventBody, EventKind};
use harness_core::message::{Message, ModelRequest, Role};
use harness_core::model::ScriptedModel;
use harness_core::{Harness, HarnessError, Resumability};
use harness_sessions::Error;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::harnesses::{ChatHarness, ConfigError, parse_system_prompt};
use harness_sessions::journal::MemoryJournal;

/// "No config, zero-length config, {}, an omitted field, or "system_prompt":"" leaves the
/// model request unchanged. Unknown fields are ignored for forward compatibility; the field
/// name is case-sensitive."
#[test]
fn configs_that_leave_the_request_unchanged() {
    for cfg in [
        &b""[..],
        b"{}",
        br#"{"other":1}"#,
        br#"{"system_prompt":""}"#,
        br#"{"System_Prompt":"ignored","SYSTEM_PROMPT":"ignored"}"#,
        b" {} \n",
    ] {
        assert_eq!(
            parse_system_prompt(cfg),
            Ok(None),
            "{}",
            String::from_utf8_lossy(cfg)
        );
    }
}

/// "A non-empty system_prompt adds exactly one system text message ... Its string is used as
/// decoded from JSON, including whitespace and newlines."
#[test]
fn a_system_prompt_is_used_as_decoded() {
    assert_eq!(
        parse_system_prompt(
            br#"{"system_prompt":"Answer concisely and explain unfamiliar terms."}"#
        ),
        Ok(Some(
            "Answer concisely and explain unfamiliar terms.".into()
        ))
    );
    assert_eq!(
        parse_system_prompt(br#"{"system_prompt":"  two\nlines \u00e9\t ","x":[1]}"#),
        Ok(Some("  two\nlines é\t ".into()))
    );
    assert_eq!(
        parse_system_prompt(br#"{"system_prompt":" "}"#),
        Ok(Some(" ".into()))
    );
}

/// "Malformed JSON, trailing JSON or other tokens, non-object values (including top-level
/// null), and non-string system_prompt values (including null) fail the execution".
#[test]
fn every_malformed_config_is_rejected() {
    let cases: &[(&[u8], ConfigError)] = &[
        (b"{", ConfigError::Malformed),
        (b"not json", ConfigError::Malformed),
        (b"   ", ConfigError::Malformed),
        (br#"{"system_prompt":"a"} {}"#, ConfigError::Malformed),
        (br#"{"system_prompt":"a"} x"#, ConfigError::Malformed),
        (b"{} []", ConfigError::Malformed),
        (b"\xff\xfe", ConfigError::Malformed),
        (b"null", ConfigError::NotAnObject),
        (b"[]", ConfigError::NotAnObject),
        (br#""system_prompt""#, ConfigError::NotAnObject),
        (b"42", ConfigError::NotAnObject),
        (b"true", ConfigError::NotAnObject),
        (
            br#"{"system_prompt":null}"#,
            ConfigError::SystemPromptNotString,
        ),
        (
            br#"{"system_prompt":1}"#,
            ConfigError::SystemPromptNotString,
        ),
        (
            br#"{"system_prompt":["a"]}"#,
            ConfigError::SystemPromptNotString,
        ),
        (
            br#"{"system_prompt":{"text":"a"}}"#,
            ConfigError::SystemPromptNotString,
        ),
        (
            br#"{"system_prompt":false}"#,
            ConfigError::SystemPromptNotString,
        ),
    ];
    for (cfg, want) in cases {
        assert_eq!(
            parse_system_prompt(cfg),
            Err(*want),
            "{}",
            String::from_utf8_lossy(cfg)
        );
    }
}

/// "Unknown fields are ignored for forward compatibility": a config the reference host
/// (Go `encoding/json`) accepts must be accepted here too, whatever an unknown field holds:
/// a lone UTF-16 surrogate escape (what JavaScript's `JSON.stringify` writes for half an
/// emoji), a number too large for a float64, raw non-UTF-8 bytes in a string, or nesting up
/// to Go's limit of 10000 levels. Past that limit Go rejects the config ("exceeded max
/// depth"), and so does this, without exhausting the stack.
#[test]
fn unknown_fields_are_ignored_whatever_they_hold() {
    let deep = |n: usize| {
        let mut v = br#"{"other":"#.to_vec();
        v.extend(std::iter::repeat_n(b'[', n));
        v.extend(std::iter::repeat_n(b']', n));
        v.push(b'}');
        v
    };
    for cfg in [
        br#"{"other":"\ud800"}"#.to_vec(),
        br#"{"other":"\udc00\ud800x"}"#.to_vec(),
        br#"{"other":1e400,"more":-0.5E-999}"#.to_vec(),
        b"{\"other\":\"\xff\xfe\"}".to_vec(),
        deep(200),
        deep(9_999),
    ] {
        assert_eq!(
            parse_system_prompt(&cfg),
            Ok(None),
            "{}",
            String::from_utf8_lossy(&cfg)
        );
    }
    // 9,999 arrays inside the top-level object are 10,000 levels; one more is too deep.
    assert_eq!(
        parse_system_prompt(&deep(10_000)),
        Err(ConfigError::Malformed)
    );
    assert_eq!(
        parse_system_prompt(&deep(1_000_000)),
        Err(ConfigError::Malformed)
    );
}

/// "Its string is used as decoded from JSON": as the reference host's Go decoder decodes it.
/// A valid surrogate pair is one character; a lone surrogate escape, and each byte that is
/// not UTF-8, become U+FFFD; an escaped key is the key it decodes to.
#[test]
fn a_system_prompt_decodes_as_go_decodes_it() {
    let cases: &[(&[u8], &str)] = &[
        (br#"{"system_prompt":"\ud83d\ude00"}"#, "\u{1F600}"),
        (br#"{"system_prompt":"a\ud800b"}"#, "a\u{FFFD}b"),
        (br#"{"system_prompt":"\ude00"}"#, "\u{FFFD}"),
        (br#"{"system_prompt":"\ud83d\u0041"}"#, "\u{FFFD}A"),
        (
            br#"{"system_prompt":"\ud83d\ud83d\ude00"}"#,
            "\u{FFFD}\u{1F600}",
        ),
        (b"{\"system_prompt\":\"x\xe2\x82y\"}", "x\u{FFFD}\u{FFFD}y"),
        (
            b"{\"system_prompt\":\"\xed\xa0\x80\"}",
            "\u{FFFD}\u{FFFD}\u{FFFD}",
        ),
        (br#"{"system\u005fprompt":"escaped key"}"#, "escaped key"),
        (
            br#"{"system_prompt":"\/\"\\\b\f\n\r\t"}"#,
            "/\"\\\u{8}\u{c}\n\r\t",
        ),
    ];
    for (cfg, want) in cases {
        assert_eq!(
            parse_system_prompt(cfg),
            Ok(Some((*want).to_owned())),
            "{}",
            String::from_utf8_lossy(cfg)
        );
    }
    // And JSON that is not well formed stays malformed.
    for cfg in [
        &br#"{"system_prompt":"\ud80"}"#[..],
        br#"{"system_prompt":"\x41"}"#,
        br#"{"system_prompt":"\'"}"#,
        b"{\"system_prompt\":\"tab\there\"}",
        br#"{"a":01}"#,
        br#"{"a":-}"#,
        br#"{"a":1.}"#,
        br#"{"a":1e}"#,
        br#"{"a":tru}"#,
        br#"{"a":[1,]}"#,
        br#"{"a":1,}"#,
        br#"{"a" 1}"#,
        br#"{,}"#,
        b"\xef\xbb\xbf{}",
    ] {
        assert_eq!(
            parse_system_prompt(cfg),
            Err(ConfigError::Malformed),
            "{}",
            String::from_utf8_lossy(cfg)
        );
    }
}

struct Chat {
    host: Controller,
    model: Arc<ScriptedModel>,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
}

fn chat() -> Chat {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let model = Arc::new(
        ScriptedModel::new()
            .otherwise(|req| Ok(Message::assistant(format!("reply {}", req.messages.len())))),
    );
    let hooked = Hooked {
        inner: model.clone(),
        hook: Box::new(move |req: &ModelRequest| s2.lock().unwrap().push(req.clone())),
    };
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(hooked)
        .harness("chat", ChatHarness::new("gemma3:1b"))
        .build();
    host.create_session("s", None).unwrap();
    Chat { host, model, seen }
}

/// "Errors use fixed diagnostics, never the supplied config or prompt"; "fail the execution
/// before a model call"; "A rejected config leaves the turn incomplete. Every Resume retries
/// that turn with the same journaled config and fails again; recovery requires a new Exec
/// with valid config. The rejected turn's input remains in conversation history".
#[test]
fn a_rejected_config_fails_before_the_model_and_stays_failed() {
    let c = chat();
    let secret = r#"{"system_prompt": 12345, "token":"SECRET-VALUE"}"#;
    let err = block(
        c.host
            .exec(ExecRequest::text("s", "hello").with_config(secret)),
    )
    .unwrap_err();
    let Error::TurnFailed { error, .. } = &err else {
        panic!("{err}")
    };
    assert!(matches!(error, HarnessError::Config(_)));
    assert_eq!(c.model.calls(), 0);
    let recs = c.host.records("s").unwrap();
    let EventBody::Error(e) = &recs.last().unwrap().event.body else {
        panic!()
    };
    // A rejected config is the caller's error: INVALID_ARGUMENT, in the returned error and in
    // the journaled ERROR alike.
    assert_eq!(err.code(), harness_sessions::Code::InvalidArgument);
    assert_eq!(e.code, err.code().grpc());
    assert!(
        !e.description.contains("SECRET") && !e.description.contains("12345"),
        "{}",
        e.description
    );
    assert!(!err.to_string().contains("SECRET"));
    // Resume retries with the journaled config and fails again, without a model call.
    for _ in 0..2 {
        assert!(matches!(
            block(c.host.resume("s")),
            Err(Error::TurnFailed { .. })
        ));
    }
    assert_eq!(c.model.calls(), 0);
    // A new Exec with valid config supersedes it; the rejected input stays in history,
    // without an assistant reply.
    block(c.host.exec(ExecRequest::text("s", "again"))).unwrap();
    let req = c.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(
        req.messages,
        vec![Message::user("hello"), Message::user("again")]
    );
    assert!(block(c.host.resume("s")).unwrap().is_none());
    assert_eq!(block(c.host.replay("s")).unwrap().executions, 1);
}

/// "A non-empty system_prompt adds exactly one system text message before the prior
/// conversation and current inputs"; "retains the messages from prior EVENT_INPUT and
/// EVENT_OUTPUT events in Start.History, in journal order, then appends every current
/// Start.Inputs message exactly once"; "This is per execution, not a session default";
/// "Caller-supplied system messages in prior inputs or current inputs remain in place".
#[test]
fn the_conversation_is_prompt_then_history_then_inputs() {
    let c = chat();
    block(
        c.host.exec(
            ExecRequest::text("s", "What is a prime number?")
                .with_config(r#"{"system_prompt":"Answer concisely."}"#),
        ),
    )
    .unwrap();
    block(c.host.exec(ExecRequest::new(
        "s",
        vec![
            Message::system("caller system"),
            Message::user("Give me three examples."),
        ],
    )))
    .unwrap();
    block(c.host.exec(
        ExecRequest::text("s", "And a fourth?").with_config(r#"{"system_prompt":"Be brief."}"#),
    ))
    .unwrap();
    let seen = c.seen.lock().unwrap().clone();
    assert_eq!(
        seen[0],
        ModelRequest::new(vec![
            Message::system("Answer concisely."),
            Message::user("What is a prime number?"),
        ])
        .with_model("gemma3:1b")
    );
    // Turn 2: no config, so no system prompt reused from turn 1.
    assert_eq!(
        seen[1].messages,
        vec![
            Message::user("What is a prime number?"),
            Message::assistant("reply 2"),
            Message::system("caller system"),
            Message::user("Give me three examples."),
        ]
    );
    // Turn 3: exactly one config-derived system message, first; the caller's stays in place.
    assert_eq!(seen[2].messages[0], Message::system("Be brief."));
    assert_eq!(
        seen[2]
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .count(),
        2
    );
    assert_eq!(seen[2].messages.len(), 7);
    // "The config-derived message is not a separate conversation INPUT/OUTPUT event"
    let recs = c.host.records("s").unwrap();
    assert_eq!(
        recs.iter()
            .filter(|r| r.event.kind() == EventKind::Input)
            .count(),
        4
    );
    // Replay re-derives every request from the journaled configs: no provider call.
    let calls = c.model.calls();
    assert_eq!(block(c.host.replay("s")).unwrap().executions, 3);
    assert_eq!(c.model.calls(), calls);
    // "A fork's new turn likewise uses only that new execution's config."
    block(c.host.fork("s", 5, "f")).unwrap();
    block(c.host.exec(ExecRequest::text("f", "Forked?"))).unwrap();
    let last = c.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.messages[0], Message::user("What is a prime number?"));
}

/// "Inputs from failed turns are intentionally retained. If a model call fails before
/// producing an output, the next turn includes that prior user message without an assistant
/// reply".
#[test]
fn inputs_of_failed_model_calls_stay_in_context() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let model = Hooked {
        inner: ScriptedModel::new()
            .fail(harness_core::model::ModelError::Unavailable("down".into()))
            .reply("ok"),
        hook: Box::new(move |req: &ModelRequest| s2.lock().unwrap().push(req.clone())),
    };
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(model)
        .harness("chat", ChatHarness::new("m"))
        .build();
    host.create_session("s", None).unwrap();
    assert!(block(host.exec(ExecRequest::text("s", "first"))).is_err());
    block(host.exec(ExecRequest::text("s", "second"))).unwrap();
    assert_eq!(
        seen.lock().unwrap()[1].messages,
        vec![Message::user("first"), Message::user("second")]
    );
}

#[test]
fn chat_describes_itself_as_the_spec_says() {
    let d = block(ChatHarness::new("m").describe()).unwrap();
    assert_eq!((d.id.as_str(), d.version.as_str()), ("chat", "1"));
    assert_eq!(d.capabilities.resumability, Resumability::StatelessReplay);
    assert!(d.capabilities.fork_safe);
}
