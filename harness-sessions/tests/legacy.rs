//! Journals written by the released v0.1.2 Go writer, and mixed journals: replay, resume and
//! verify with the historical behaviours agentsessions' `controller/v012_journal_test.go`
//! keeps. The fixtures are upstream's own files (`tests/fixtures/legacy/`, MIT, see its
//! LICENSE and README), read through a converter from Go's `encoding/json` form of
//! `eventlog.Record`; every hash must reproduce before a test uses a fixture.
//!
//! The spec's words (spec/agentsessions-writing-a-harness.txt, line 65): "Released v0.1.2
//! journals also omit execution IDs. Their controller Replay retains the old single
//! invocation with all legacy inputs and the entire legacy journal as History; it does not
//! infer per-turn boundaries, so multi-turn legacy replay retains its historical
//! limitations. Legacy Resume selects only the last INPUT and continues the invocation
//! without adding an execution ID to journal records. Start.ExecutionID instead carries a
//! stable legacy-<sha256> compatibility token, derived from session UID, original record
//! position and canonical content ... Retries of the same legacy turn reuse it, but
//! different sessions do not. It is never journaled as an event ID. ... A legacy END or
//! ERROR finishes the turn, making Resume a no-op. A new Exec may also supersede an
//! unfinished legacy tail without rewriting it: EXECUTION_START establishes the modern
//! boundary. Mixed Replay skips that abandoned tail while retaining whole-log replay of the
//! complete legacy prefix; modern History still contains the full original legacy events."
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{Crashing, block};
use harness_core::event::{Event, EventBody, EventKind, HarnessEnd};
use harness_core::message::{Message, ModelRequest, Usage};
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::EchoHarness;
use harness_sessions::journal::{Journal, MemoryJournal, SessionMeta};
use harness_sessions::{Error, Record};
use serde_json::{Map, Value, json};

const SESSION: &str = "v012-session";

// ---------------------------------------------------------------------------------------
// The converter: Go `encoding/json` of `eventlog.Record` → our records.

/// `ExecutionID` → `execution_id`, `InputHash` → `input_hash`, `ModelID` → `model_id`.
fn snake(go: &str) -> String {
    let chars: Vec<char> = go.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if prev.is_ascii_lowercase() || (prev.is_ascii_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A Go value as proto3-JSON: snake_case keys, nulls dropped, Go enum strings given their
/// proto prefix, a part's `Data` map under `data.data`.
fn proto_json(go: &Value, key: &str) -> Option<Value> {
    match go {
        Value::Null => None,
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let name = snake(k);
                let Some(mut v) = proto_json(v, &name) else {
                    continue;
                };
                if name == "data" && key == "parts" {
                    v = json!({ "data": v });
                }
                out.insert(name, v);
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(
            a.iter().filter_map(|v| proto_json(v, key)).collect(),
        )),
        Value::String(s) if key == "mediation" => Some(json!(format!("MEDIATION_{s}"))),
        Value::String(s) if key == "kind" => Some(json!(format!("LIFECYCLE_{s}"))),
        other => Some(other.clone()),
    }
}

/// The Go `api.Event` body fields and their proto oneof names.
const BODIES: [(&str, &str); 11] = [
    ("Message", "message"),
    ("ModelCall", "model"),
    ("ToolCall", "tool"),
    ("Result", "result"),
    ("Approval", "approval"),
    ("ApprovalResult", "approval_result"),
    ("Usage", "usage"),
    ("Lifecycle", "lifecycle"),
    ("End", "end"),
    ("Err", "error"),
    ("ExecutionStart", "execution_start"),
];

/// One Go `api.Event` as our event: the Go zero time and the all-empty actor are unset.
fn event_of(go: &Value) -> Event {
    let mut ev = Map::new();
    ev.insert("execution_id".into(), go["ExecutionID"].clone());
    if go["Timestamp"] != json!("0001-01-01T00:00:00Z") {
        ev.insert("ts".into(), go["Timestamp"].clone());
    }
    ev.insert("schema_version".into(), go["SchemaVersion"].clone());
    ev.insert(
        "kind".into(),
        json!(format!("EVENT_{}", go["Kind"].as_str().unwrap())),
    );
    for (field, name) in BODIES {
        if let Some(body) = go.get(field).and_then(|b| proto_json(b, name)) {
            ev.insert(name.into(), body);
        }
    }
    let actor = proto_json(&go["Actor"], "actor").unwrap_or_default();
    if actor
        .as_object()
        .is_some_and(|a| a.values().any(|v| v != ""))
    {
        ev.insert("actor".into(), actor);
    }
    serde_json::from_value(Value::Object(ev)).unwrap()
}

/// A fixture's records, each sealed from the converted event: its `Hash` must reproduce.
fn fixture(name: &str) -> Vec<Record> {
    let path = format!(
        "{}/tests/fixtures/legacy/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let go: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut prev = None;
    go.iter()
        .map(|r| {
            let seq = r["Seq"].as_u64().unwrap();
            let rec = Record::seal(
                event_of(&r["Event"]),
                seq,
                prev,
                r["Fence"].as_u64().unwrap(),
            )
            .unwrap();
            assert_eq!(
                rec.content_hash.to_string(),
                r["Hash"].as_str().unwrap(),
                "{name} record {seq}: the hash must reproduce"
            );
            assert_eq!(
                rec.prev_hash.map(|h| h.to_string()).unwrap_or_default(),
                r["PrevHash"].as_str().unwrap()
            );
            prev = Some(rec.content_hash);
            rec
        })
        .collect()
}

/// `records` as session `session` of `journal` (default harness `echo`), under their own fences.
fn load(journal: &MemoryJournal, session: &str, records: &[Record]) {
    journal
        .create(
            session,
            &SessionMeta {
                harness: "echo".into(),
                parent: None,
            },
        )
        .unwrap();
    let mut fence = 0;
    for r in records {
        while fence < r.fence {
            fence = journal.acquire_fence(session).unwrap();
        }
        let head = journal.head(session).unwrap();
        journal
            .append(session, head.seq, r.fence, std::slice::from_ref(r))
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// The host: echo (the v0.1.2 writer's harness), a model that answers `echo:<input>`, and a
// record of every Start.

/// The reference echo harness, recording each Start; with `usage`, it also reports usage
/// before and after its model call.
#[derive(Clone, Default)]
struct Echo {
    starts: Arc<Mutex<Vec<Start>>>,
    usage: bool,
}

impl Echo {
    fn starts(&self) -> Vec<Start> {
        self.starts.lock().unwrap().clone()
    }
}

#[async_trait]
impl Harness for Echo {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        EchoHarness.describe().await
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        self.starts.lock().unwrap().push(start.clone());
        let usage = Usage {
            model: "echo".into(),
            input_tokens: 1,
            output_tokens: 1,
            reasoning_tokens: 0,
        };
        if self.usage {
            sink.usage(usage.clone()).await?;
        }
        let text = start.inputs.last().map(Message::text).unwrap_or_default();
        sink.model(ModelRequest::new(vec![Message::user(text)]).with_model("echo"))
            .await?;
        if self.usage {
            sink.usage(usage).await?;
        }
        Ok(())
    }
}

struct Rig {
    journal: Arc<MemoryJournal>,
    model: Arc<ScriptedModel>,
    echo: Echo,
    host: Controller,
}

fn echo_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new().otherwise(|req: &ModelRequest| {
        Ok(Message::assistant(format!(
            "echo:{}",
            req.last_user_text().unwrap_or_default()
        )))
    }))
}

fn controller(
    journal: impl Journal + 'static,
    model: &Arc<ScriptedModel>,
    echo: &Echo,
) -> Controller {
    Controller::builder(journal)
        .model(Arc::clone(model))
        .harness("echo", echo.clone())
        .build()
}

/// A host over fixture `name` loaded as session `v012-session`.
fn rig_with(name: &str, echo: Echo) -> Rig {
    rig_over(&fixture(name), echo)
}

/// A host over `records` loaded as session `v012-session`.
fn rig_over(records: &[Record], echo: Echo) -> Rig {
    let journal = Arc::new(MemoryJournal::new());
    load(&journal, SESSION, records);
    let model = echo_model();
    let host = controller(Arc::clone(&journal), &model, &echo);
    Rig {
        journal,
        model,
        echo,
        host,
    }
}

fn rig(name: &str) -> Rig {
    rig_with(name, Echo::default())
}

impl Rig {
    fn replay(&self) -> Result<Vec<String>, Error> {
        block(self.host.replay(SESSION)).map(|r| {
            assert_eq!(
                (r.provider_calls, r.executor_calls),
                (0, 0),
                "replay never calls"
            );
            r.outputs
        })
    }
    fn resume(&self) -> Result<Option<harness_sessions::TurnReport>, Error> {
        block(self.host.resume(SESSION))
    }
    fn records(&self) -> Vec<Record> {
        self.host.records(SESSION).unwrap()
    }
    fn runs(&self) -> usize {
        self.echo.starts().len()
    }
    fn last_start(&self) -> Start {
        self.echo.starts().pop().unwrap()
    }
}

fn is_legacy_token(id: &str) -> bool {
    id.strip_prefix("legacy-").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

fn is_modern_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn texts(history: &[Event]) -> Vec<EventKind> {
    history.iter().map(Event::kind).collect()
}

// ---------------------------------------------------------------------------------------

/// Every fixture converts and every `Hash` reproduces (checked in `fixture`), and the loaded
/// journals verify: "a real journal written by the released v0.1.2 Go writer verifies".
#[test]
fn every_fixture_hash_reproduces_and_verifies() {
    for name in [
        "completed",
        "crashed-input",
        "crashed-model",
        "crashed-output",
        "mixed-completed",
        "mixed-interrupted",
        "multi-turn-crashed-output",
        "multi-turn",
        "upgraded-resume",
    ] {
        let r = rig(name);
        let n = r.records().len() as u64;
        assert_eq!(r.host.verify(SESSION).unwrap().records, n, "{name}");
    }
    // The first three records of the mixed journals are crashed-output's.
    let base = fixture("crashed-output");
    for name in ["mixed-completed", "mixed-interrupted", "upgraded-resume"] {
        assert_eq!(fixture(name)[..3], base[..], "{name}");
    }
}

/// completed.json: "Resume = (false, nil), a no-op ... Replay = ["echo:hello"] with one
/// harness Run. Start.History = all 4 records, Inputs = ["hello"]. The model is never
/// called, and the journal is unchanged." (spec line 65: whole-log replay.)
#[test]
fn completed_replays_as_one_whole_log_run_and_resume_is_a_no_op() {
    let r = rig("completed");
    let before = r.records();
    assert!(r.resume().unwrap().is_none());
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);
    assert_eq!(r.runs(), 1);
    let start = r.last_start();
    assert_eq!(start.history.len(), 4);
    assert_eq!(start.inputs, [Message::user("hello")]);
    assert!(
        is_legacy_token(&start.execution_id),
        "{}",
        start.execution_id
    );
    assert_eq!(start.session_uid, SESSION);
    assert!(start.config.is_empty());
    assert_eq!(start.resume_from_seq, 0);
    assert_eq!(r.model.calls(), 0);
    assert_eq!(r.records(), before);
}

/// The legacy token: "derived from session UID, original record position and canonical
/// content ... Retries of the same legacy turn reuse it, but different sessions do not. It
/// is never journaled as an event ID."
#[test]
fn the_legacy_token_is_stable_per_session_and_never_journaled() {
    let r = rig("completed");
    r.replay().unwrap();
    r.replay().unwrap();
    load(&r.journal, "another-session", &fixture("completed"));
    block(r.host.replay("another-session")).unwrap();
    let ids: Vec<String> = r
        .echo
        .starts()
        .iter()
        .map(|s| s.execution_id.clone())
        .collect();
    assert_eq!(ids[0], ids[1], "the same turn, the same token");
    assert_ne!(ids[0], ids[2], "another session, another token");
    assert!(
        r.records()
            .iter()
            .all(|rec| rec.event.execution_id.is_empty())
    );
}

/// crashed-input.json: "Resume = (true, nil) and calls the model once (nothing was
/// recorded). Start has empty History. New records keep ExecutionID == "" (no invented IDs),
/// and old records are not rewritten. A second Resume = (false, nil). Replay =
/// ["echo:hello"]. A new Exec ("new") after that gives mixed Replay
/// ["echo:hello","echo:new"] with 2 Runs, 0 model calls, and the modern Run gets the full
/// recovered legacy log as History."
#[test]
fn crashed_input_resumes_its_last_input_without_execution_ids() {
    let r = rig("crashed-input");
    let before = r.records();
    let turn = r.resume().unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(turn.output, "echo:hello");
    assert_eq!(r.model.calls(), 1);
    let start = r.last_start();
    assert!(start.history.is_empty());
    assert!(is_legacy_token(&start.execution_id));
    let after = r.records();
    assert_eq!(after[..1], before[..], "old records are not rewritten");
    assert_eq!(
        after.iter().map(|x| x.event.kind()).collect::<Vec<_>>(),
        [
            EventKind::Input,
            EventKind::ModelCall,
            EventKind::Output,
            EventKind::End
        ]
    );
    assert!(
        after.iter().all(|x| x.event.execution_id.is_empty()),
        "no invented ids"
    );
    assert!(r.resume().unwrap().is_none());
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);

    let exec = block(r.host.exec(ExecRequest::text(SESSION, "new"))).unwrap();
    assert!(is_modern_id(&exec.execution_id));
    let modern = r.last_start();
    assert_eq!(modern.history.len(), 4, "the full recovered legacy log");
    let calls = r.model.calls();
    let runs = r.runs();
    assert_eq!(r.replay().unwrap(), ["echo:hello", "echo:new"]);
    assert_eq!((r.runs() - runs, r.model.calls() - calls), (2, 0));
    assert_eq!(r.host.verify(SESSION).unwrap().records, 9);
}

/// crashed-model.json: "Replay fails ... Resume = (true, err) with "recorded completion
/// missing", and 0 model calls: a v0.1.2 MODEL_CALL is not re-driven." (spec Rule 1, line
/// 107: "a v0.1.2 journal without them is not re-driven, and Resume fails with “recorded
/// completion missing” without calling the provider.") Also: "a modern Exec interrupted
/// after it, then Resume, recovers the modern turn only (0 model calls, History = the 2
/// legacy records), and Replay = ["echo:new"]."
#[test]
fn crashed_model_is_not_re_driven_and_a_modern_turn_after_it_recovers() {
    let r = rig("crashed-model");
    let before = r.records();
    assert!(matches!(r.replay(), Err(Error::Diverged { .. })));
    let err = r.resume().unwrap_err();
    assert!(
        err.to_string().contains("recorded completion missing"),
        "{err}"
    );
    assert_eq!(r.model.calls(), 0);
    assert_eq!(r.records(), before, "nothing appended");

    // A modern turn cut after its OUTPUT (start, input, model call, output: 4 records).
    let crashing = controller(
        Crashing::new(Arc::clone(&r.journal), Some(4)),
        &r.model,
        &r.echo,
    );
    assert!(block(crashing.exec(ExecRequest::text(SESSION, "new"))).is_err());
    assert_eq!(r.model.calls(), 1);
    let turn = r.resume().unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(r.model.calls(), 1, "the recorded completion is served");
    let start = r.last_start();
    assert!(is_modern_id(&start.execution_id));
    assert_eq!(
        texts(&start.history),
        [EventKind::Input, EventKind::ModelCall]
    );
    assert_eq!(r.replay().unwrap(), ["echo:new"]);
}

/// crashed-output.json: "Replay = ["echo:hello"] (an unfinished legacy log still replays).
/// Resume = (true, nil) with 0 model calls: the recorded completion is served, then END is
/// appended (see upgraded-resume)."
#[test]
fn crashed_output_replays_and_resume_appends_the_legacy_end() {
    let r = rig("crashed-output");
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);
    let turn = r.resume().unwrap().unwrap();
    assert_eq!(
        (turn.status, turn.provider_calls, turn.appended),
        (TurnStatus::Completed, 0, 1)
    );
    let after = r.records();
    let upgraded = fixture("upgraded-resume");
    assert_eq!(after[..3], upgraded[..3]);
    let end = &after[3];
    assert_eq!(end.event.body, EventBody::End(HarnessEnd::completed()));
    assert!(
        end.event.execution_id.is_empty(),
        "the END has ExecutionID \"\""
    );
    assert_eq!(end.fence, upgraded[3].fence, "written under a new fence");
    assert!(r.resume().unwrap().is_none());
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);
    assert_eq!(r.model.calls(), 0);
}

/// crashed-output.json with a harness that reports usage before and after its model call:
/// "Replay still works; Resume appends USAGE then END (only the live tail after the served
/// prefix is new)."
#[test]
fn crashed_output_with_usage_resumes_with_only_the_live_tail_new() {
    let r = rig_with(
        "crashed-output",
        Echo {
            usage: true,
            ..Echo::default()
        },
    );
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);
    r.resume().unwrap().unwrap();
    let kinds: Vec<EventKind> = r.records().iter().map(|x| x.event.kind()).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Input,
            EventKind::ModelCall,
            EventKind::Output,
            EventKind::Usage,
            EventKind::End
        ]
    );
    assert!(r.records().iter().all(|x| x.event.execution_id.is_empty()));
    assert_eq!(r.model.calls(), 0);
}

/// multi-turn.json: "Replay fails with "model input hash mismatch" ... v0.1.2 replay is one
/// whole-log Run with all inputs, and echo picks the last input while the first MODEL_CALL
/// hashed "first". This limitation is kept on purpose. 0 model calls. Resume = (false, nil)."
#[test]
fn multi_turn_keeps_the_whole_log_limitation() {
    let r = rig("multi-turn");
    let err = r.replay().unwrap_err();
    assert!(
        err.to_string().contains("model input hash mismatch"),
        "{err}"
    );
    let start = r.last_start();
    assert_eq!(
        start.inputs,
        [Message::user("first"), Message::user("second")]
    );
    assert_eq!(start.history.len(), 8);
    assert_eq!(r.model.calls(), 0);
    assert!(r.resume().unwrap().is_none());
}

/// multi-turn-crashed-output.json: "Resume = (true, nil) with no model call. Start.Inputs =
/// ["second"] only (the released last-INPUT rule), and Start.History = records 1–4."
#[test]
fn multi_turn_crashed_output_resumes_the_last_input_only() {
    let r = rig("multi-turn-crashed-output");
    let turn = r.resume().unwrap().unwrap();
    assert_eq!(
        (turn.status, turn.output.as_str()),
        (TurnStatus::Completed, "echo:second")
    );
    let start = r.last_start();
    assert_eq!(start.inputs, [Message::user("second")]);
    let records = r.records();
    assert_eq!(
        start.history[..],
        records[..4]
            .iter()
            .map(|x| x.event.clone())
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(r.model.calls(), 0);
}

/// upgraded-resume.json: "The END has ExecutionID "" and is written under a new fence.
/// Resume = (false, nil). Replay = ["echo:hello"]."
#[test]
fn upgraded_resume_is_finished() {
    let r = rig("upgraded-resume");
    assert!(r.resume().unwrap().is_none());
    assert_eq!(r.replay().unwrap(), ["echo:hello"]);
}

/// mixed-completed.json: "Resume = (false, nil). Replay = ["echo:hello","echo:new"], the
/// model is never called, and the journal is unchanged."
#[test]
fn mixed_completed_replays_the_legacy_prefix_then_the_modern_turn() {
    let r = rig("mixed-completed");
    let before = r.records();
    assert!(r.resume().unwrap().is_none());
    assert_eq!(r.replay().unwrap(), ["echo:hello", "echo:new"]);
    let starts = r.echo.starts();
    assert!(is_legacy_token(&starts[0].execution_id));
    assert_eq!(starts[1].execution_id, "721cca6eababd5be");
    assert_eq!(
        starts[1].history.len(),
        4,
        "modern History holds the legacy events"
    );
    assert_eq!(r.model.calls(), 0);
    assert_eq!(r.records(), before);
}

/// mixed-interrupted.json: "Resume = (true, nil) with one Run. ExecutionID is not empty,
/// History = the 4 legacy records (everything before this EXECUTION_START), and there are 0
/// model calls. Replay after that = ["echo:hello","echo:new"]."
#[test]
fn mixed_interrupted_resumes_the_modern_turn() {
    let r = rig("mixed-interrupted");
    let turn = r.resume().unwrap().unwrap();
    assert_eq!(turn.execution_id, "d3594a8cff91d240");
    assert_eq!(r.runs(), 1);
    assert_eq!(r.last_start().history.len(), 4);
    assert_eq!(r.model.calls(), 0);
    assert_eq!(
        r.records().last().unwrap().event.execution_id,
        "d3594a8cff91d240"
    );
    assert_eq!(r.replay().unwrap(), ["echo:hello", "echo:new"]);
}

/// TestV012NewExecSupersedesAbandonedLegacyTail: "the modern Run receives all original
/// records as History, the model is called once, and EXECUTION_START is appended right after
/// the old records (nothing is rewritten); Replay then gives ["echo:new"], except for
/// multi-turn-crashed-output, which gives ["echo:first","echo:new"]. ... The modern Run still
/// sees the full prefix. 0 model calls. Resume afterwards = (false, nil)."
#[test]
fn a_new_exec_supersedes_an_abandoned_legacy_tail() {
    for (name, expected) in [
        ("crashed-input", vec!["echo:new"]),
        ("crashed-model", vec!["echo:new"]),
        ("crashed-output", vec!["echo:new"]),
        ("multi-turn-crashed-output", vec!["echo:first", "echo:new"]),
    ] {
        let r = rig(name);
        let before = r.records();
        block(r.host.exec(ExecRequest::text(SESSION, "new"))).unwrap();
        assert_eq!(r.model.calls(), 1, "{name}");
        assert_eq!(r.last_start().history.len(), before.len(), "{name}");
        let after = r.records();
        assert_eq!(
            after[..before.len()],
            before[..],
            "{name}: nothing rewritten"
        );
        assert_eq!(after[before.len()].event.kind(), EventKind::ExecutionStart);
        let runs = r.runs();
        assert_eq!(r.replay().unwrap(), expected, "{name}");
        if name == "multi-turn-crashed-output" {
            assert_eq!(
                r.echo.starts()[runs].history.len(),
                4,
                "up to the last legacy END"
            );
        }
        assert_eq!(r.model.calls(), 1, "{name}");
        assert!(r.resume().unwrap().is_none(), "{name}");
    }
}

/// A journal of `bodies`, each with its execution id (empty: legacy).
fn journal_of(bodies: Vec<(&str, EventBody)>) -> Rig {
    let mut prev = None;
    let records: Vec<Record> = bodies
        .into_iter()
        .enumerate()
        .map(|(i, (id, body))| {
            let r = Record::seal(Event::new(id, body), i as u64 + 1, prev, 1).unwrap();
            prev = Some(r.content_hash);
            r
        })
        .collect();
    rig_over(&records, Echo::default())
}

/// TestV012LegacyShapeAndUpgradeBoundaryFailClosed: "Replay and Resume both return
/// ErrInvalidExecutionLog, run no harness and append nothing for: EXECUTION_START with no
/// execution_id; ... an unknown kind or an APPROVAL_REQUEST in a legacy prefix; an unfinished
/// legacy INPUT followed by a modern event with no marker; an ID-less event after a modern
/// one." Spec line 65: "Modern turns still require execution IDs, and ID-bearing events
/// without a start marker need a finished legacy boundary."
#[test]
fn legacy_shapes_that_fail_closed() {
    use harness_core::event::{ApprovalRequest, ExecutionStart};
    let input = |t: &str| EventBody::Input(Message::user(t));
    let start = EventBody::ExecutionStart(ExecutionStart {
        input_count: Some(1),
        ..ExecutionStart::default()
    });
    let unknown: Event = serde_json::from_value(json!({"kind": "EVENT_SNAPSHOT"})).unwrap();
    let cases: Vec<(&str, Vec<(&str, EventBody)>)> = vec![
        (
            "a start marker with no execution_id",
            vec![("", start.clone()), ("", input("x"))],
        ),
        (
            "an APPROVAL_REQUEST in a legacy prefix",
            vec![
                ("", input("x")),
                ("", EventBody::ApprovalRequest(ApprovalRequest::default())),
            ],
        ),
        (
            "an unknown kind in a legacy prefix",
            vec![("", input("x")), ("", unknown.body)],
        ),
        (
            "an unfinished legacy INPUT, then a modern event with no marker",
            vec![("", input("x")), ("0123456789abcdef", input("y"))],
        ),
        (
            "an ID-less event after a modern one",
            vec![
                ("0123456789abcdef", start),
                ("0123456789abcdef", input("y")),
                ("", EventBody::End(HarnessEnd::completed())),
            ],
        ),
    ];
    for (what, bodies) in cases {
        let r = journal_of(bodies);
        let head = r.journal.head(SESSION).unwrap();
        assert!(
            matches!(r.replay(), Err(Error::InvalidExecutionLog(_))),
            "replay: {what}"
        );
        assert!(
            matches!(r.resume(), Err(Error::InvalidExecutionLog(_))),
            "resume: {what}"
        );
        assert_eq!(r.runs(), 0, "{what}");
        assert_eq!(
            r.journal.head(SESSION).unwrap(),
            head,
            "{what}: nothing appended"
        );
    }
}

/// "A lifecycle-only journal (fork at 0) replays to [] and resumes as (false, nil) without
/// running the harness."
#[test]
fn a_lifecycle_only_journal_replays_to_nothing() {
    let r = rig("completed");
    block(r.host.fork(SESSION, 0, "child")).unwrap();
    let report = block(r.host.replay("child")).unwrap();
    assert!(report.outputs.is_empty());
    assert!(block(r.host.resume("child")).unwrap().is_none());
    assert_eq!(r.runs(), 0);
}

/// A fork of a legacy journal keeps the legacy behaviour: the child replays the inherited
/// whole-log run and resumes the inherited unfinished turn.
#[test]
fn a_fork_of_a_legacy_journal_resumes_its_legacy_turn() {
    let r = rig("crashed-output");
    block(r.host.fork(SESSION, 3, "child")).unwrap();
    assert_eq!(
        block(r.host.replay("child")).unwrap().outputs,
        ["echo:hello"]
    );
    let turn = block(r.host.resume("child")).unwrap().unwrap();
    assert_eq!(
        (turn.status, turn.provider_calls),
        (TurnStatus::Completed, 0)
    );
    assert!(common::all_legacy_ids(&r.host, "child"));
}
