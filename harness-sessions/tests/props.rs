//! Property tests: random agent scripts replay byte-identically with zero provider calls;
//! records round-trip through the file format; arbitrary bytes never panic a decoder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use harness_core::event::{Event, EventBody, EventKind};
use harness_core::message::{JsonObject, Message, ModelRequest, Part, TextPart, ToolCall};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::{ConfigError, parse_system_prompt};
use harness_sessions::input_hash::go_json;
use harness_sessions::journal::{
    Durability, FileJournal, Journal, MemoryJournal, SessionMeta, verify_file_bytes,
};
use harness_sessions::record::Record;
use harness_sessions::tools::MemoryReceipts;
use proptest::prelude::*;

static DIRS: AtomicUsize = AtomicUsize::new(0);

fn tmpdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harness-sessions-props-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Model),
        2 => "\\PC{0,10}".prop_map(Op::Output),
        2 => Just(Op::Tool),
        1 => Just(Op::Gated),
        1 => Just(Op::Report),
        1 => (0u64..10_000).prop_map(Op::Usage),
    ]
}

fn run_all(
    journal: Arc<dyn Journal>,
    ops: &[Op],
    inputs: &[String],
) -> (
    Controller,
    Arc<harness_core::model::ScriptedModel>,
    Arc<Effects>,
) {
    let model = counting_model();
    let effects = Arc::new(Effects::default());
    let host = Controller::builder(journal)
        .model(model.clone())
        .executor(dedup(&effects, &Arc::new(MemoryReceipts::default())))
        .harness("script", ScriptHarness::new(ops.to_vec()))
        .build();
    host.create_session("s", None).unwrap();
    for (n, i) in inputs.iter().enumerate() {
        let mut turn = block(host.exec(ExecRequest::text("s", i.clone()))).unwrap();
        // Approval-gated calls park the turn: decide (approve, then deny, alternately) and
        // resume until it completes.
        let mut k = n;
        while let TurnStatus::Parked { tool_call_id, .. } = &turn.status {
            host.approve("s", tool_call_id, k % 2 == 0, "decided")
                .unwrap();
            k += 1;
            turn = block(host.resume("s")).unwrap().unwrap();
        }
    }
    (host, model, effects)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Issue: "proptest over random agent scripts (model calls, tool calls, outputs): replay
    /// of any recorded journal is byte-identical and calls the provider zero times" (I1, I5);
    /// the scripts include approval-gated calls, approved or denied, then resumed.
    #[test]
    fn replay_of_any_script_is_byte_identical(
        ops in prop::collection::vec(op(), 0..7),
        inputs in prop::collection::vec("\\PC{0,12}", 1..4),
    ) {
        let mem = Arc::new(MemoryJournal::new());
        let (host, model, effects) = run_all(mem.clone(), &ops, &inputs);
        let (calls, fx) = (model.calls(), effects.count());
        let rep = block(host.replay("s")).unwrap();
        prop_assert_eq!(rep.executions, inputs.len());
        prop_assert_eq!(rep.provider_calls, 0);
        prop_assert_eq!((model.calls(), effects.count()), (calls, fx));
        // Every effect record and every END was reproduced (START, INPUTs and the session's
        // SUSPEND/RESUME lifecycle records are the host's).
        let records = host.records("s").unwrap();
        let host_owned = records
            .iter()
            .filter(|r| {
                matches!(
                    r.event.kind(),
                    EventKind::ExecutionStart | EventKind::Input | EventKind::Lifecycle
                )
            })
            .count();
        prop_assert_eq!(rep.records_reproduced, records.len() - host_owned);
        prop_assert!(host.verify("s").is_ok());

        // The same turns on the file journal write byte-identical records (same hashes), and
        // replay from the decoded file records holds too.
        let dir = tmpdir();
        let file = Arc::new(FileJournal::with_durability(&dir, Durability::Never).unwrap());
        let (fhost, fmodel, _) = run_all(file.clone(), &ops, &inputs);
        prop_assert_eq!(hashes(&*mem, "s"), hashes(&*file, "s"));
        let frep = block(fhost.replay("s")).unwrap();
        prop_assert_eq!(frep, rep);
        prop_assert_eq!(fmodel.calls(), calls);
        let bytes = fs::read(dir.join("s.journal")).unwrap();
        prop_assert_eq!(verify_file_bytes("s", &bytes).unwrap().records, records.len() as u64);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Records round-trip through the file format: what is read back is what was written,
    /// byte for byte.
    #[test]
    fn records_round_trip_through_the_file_format(
        texts in prop::collection::vec("\\PC{0,20}", 1..6),
        num in any::<f64>().prop_filter("finite", |f| f.is_finite()),
        int in any::<i64>(),
    ) {
        let dir = tmpdir();
        let j = FileJournal::with_durability(&dir, Durability::Never).unwrap();
        j.create("s", &SessionMeta::default()).unwrap();
        let fence = j.acquire_fence("s").unwrap();
        let mut written = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let mut args = JsonObject::new();
            args.insert(t.clone(), serde_json::json!(num));
            args.insert("i".into(), serde_json::json!(int));
            let body = if i % 2 == 0 {
                EventBody::Output(Message::assistant(t.clone()))
            } else {
                EventBody::ToolCall(ToolCall::new(t.clone(), "tool", args))
            };
            let h = j.head("s").unwrap();
            let r = Record::seal(Event::new("e", body), h.seq + 1, h.hash, fence).unwrap();
            j.append("s", h.seq, fence, std::slice::from_ref(&r)).unwrap();
            written.push(r);
        }
        drop(j);
        let j = FileJournal::open(&dir).unwrap();
        let read = j.read("s", 1, None).unwrap();
        prop_assert_eq!(&read, &written);
        for r in &read {
            prop_assert_eq!(r.recompute_hash(), r.content_hash);
        }
        let _ = fs::remove_dir_all(&dir);
    }

    /// Arbitrary bytes never panic `verify` or opening a session file; anything that is not
    /// a valid journal is reported, not accepted.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut file = br#"{"harness_rs_journal":1,"session":"s","meta":{"harness":"x"}}"#.to_vec();
        file.push(b'\n');
        file.extend_from_slice(&bytes);
        let _ = verify_file_bytes("s", &bytes);
        let _ = verify_file_bytes("s", &file);
        let dir = tmpdir();
        fs::write(dir.join("s.journal"), &file).unwrap();
        let j = FileJournal::open(&dir).unwrap();
        let _ = j.read("s", 1, None);
        let _ = j.verify("s");
        let _ = parse_system_prompt(&bytes);
        let _ = fs::remove_dir_all(&dir);
    }

    /// The Go JSON writer emits JSON that reads back to the same strings and numbers.
    #[test]
    fn go_json_reads_back(text in "\\PC{0,30}", key in "\\PC{0,8}", num in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let mut data = JsonObject::new();
        data.insert(key.clone(), serde_json::json!(num));
        let req = ModelRequest::new(vec![Message {
            role: harness_core::message::Role::User,
            parts: vec![Part::Text(TextPart { text: text.clone() }), Part::Data(harness_core::message::DataPart { data })],
        }]);
        let s = go_json(&req);
        prop_assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        prop_assert_eq!(v["Messages"][0]["Parts"][0]["Text"]["Text"].as_str().unwrap(), text.as_str());
        prop_assert_eq!(v["Messages"][0]["Parts"][1]["Data"][key.as_str()].as_f64().unwrap(), num);
    }
}

/// The chat config rules written with `serde_json`: right wherever `serde_json` reads the
/// config (well-formed UTF-8 JSON, nesting under 128, finite numbers, no lone surrogates).
fn system_prompt_by_serde(config: &[u8]) -> Option<Result<Option<String>, ConfigError>> {
    let v: serde_json::Value = serde_json::from_slice(config).ok()?;
    let serde_json::Value::Object(mut m) = v else {
        return Some(Err(ConfigError::NotAnObject));
    };
    Some(match m.remove("system_prompt") {
        None => Ok(None),
        Some(serde_json::Value::String(s)) => Ok((!s.is_empty()).then_some(s)),
        Some(_) => Err(ConfigError::SystemPromptNotString),
    })
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof!["\\PC{0,6}", Just("system_prompt".to_owned())],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// `parse_system_prompt` agrees with a `serde_json` reading of every config `serde_json`
    /// can read (random JSON values, pretty or compact, with random bytes around them), and
    /// never panics on any other.
    #[test]
    fn chat_config_agrees_with_serde_json(
        v in json_value(),
        pretty in any::<bool>(),
        before in prop::collection::vec(prop::sample::select(&b" \t\r\nx{}[],:\"0"[..]), 0..2),
        after in prop::collection::vec(prop::sample::select(&b" \t\r\nx{}[],:\"0"[..]), 0..2),
    ) {
        let body = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
        let config = [before, body, after].concat();
        let ours = parse_system_prompt(&config);
        match system_prompt_by_serde(&config) {
            Some(theirs) => prop_assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(&config)),
            None => prop_assert!(ours.is_err() || config.is_empty(), "{}", String::from_utf8_lossy(&config)),
        }
    }

    /// Any prompt the caller encodes as a JSON string comes back as that string.
    #[test]
    fn any_encoded_prompt_decodes_to_itself(prompt in "\\PC{0,40}|[\\x00-\\x1f\"\\\\/<>&\u{2028}]{0,10}") {
        let config = serde_json::to_vec(&serde_json::json!({"system_prompt": prompt.clone(), "x": [1, {"y": null}]})).unwrap();
        let want = (!prompt.is_empty()).then_some(prompt);
        prop_assert_eq!(parse_system_prompt(&config), Ok(want));
    }
}
