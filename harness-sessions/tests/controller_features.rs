//! What the agentsessions host offers an agent beyond model calls, text and tools
//! (`EventSink::supports` and the feature methods of harness-core): approvals and reasoning,
//! which the journal records; questions, hand-offs, platform commands, shared state and steps,
//! which it has no event for and refuses with a typed `Unsupported`, journaling nothing. Each
//! test quotes the words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use EventKind::*;
use async_trait::async_trait;
use common::*;
use harness_core::event::{EventBody, EventKind};
use harness_core::interaction::{Command, Feature, Handoff, Question, StateUpdate, Step};
use harness_core::message::{Message, ModelRequest, Part, Role};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Resumability, SinkError, Start};
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::journal::{FileJournal, Journal, MemoryJournal};
use serde_json::json;

/// Writes down what the host says it supports, then stops.
struct Asks {
    memory_snapshot: bool,
    seen: Arc<Mutex<Vec<(Feature, bool)>>>,
}

#[async_trait]
impl Harness for Asks {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        let mut d = Descriptor::new("asks", "1");
        if self.memory_snapshot {
            d.capabilities.resumability = Resumability::RequiresMemorySnapshot;
        }
        Ok(d)
    }
    async fn run(&self, _: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let seen = Feature::ALL.map(|f| (f, sink.supports(f)));
        self.seen.lock().unwrap().extend(seen);
        Ok(())
    }
}

/// "REQUIRES_APPROVAL | The host, after a human or policy approval gate" and "Opaque reasoning
/// parts are returned verbatim, with ReasoningReplay set": the host offers approvals and
/// reasoning, and nothing else the journal has no event for. "REQUIRES_APPROVAL uses the same
/// executor after a durable decision, for STATELESS_REPLAY only": a memory-snapshot harness is
/// not offered approvals.
#[test]
fn the_host_supports_approvals_and_reasoning() {
    for memory_snapshot in [false, true] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let host = Controller::builder(MemoryJournal::new())
            .harness(
                "asks",
                Asks {
                    memory_snapshot,
                    seen: seen.clone(),
                },
            )
            .runtime(RuntimeCapabilities {
                memory_snapshot: true,
                ..Default::default()
            })
            .build();
        host.create_session("s", None).unwrap();
        block(host.exec(ExecRequest::text("s", "go"))).unwrap();
        let supported: Vec<Feature> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, yes)| *yes)
            .map(|(f, _)| *f)
            .collect();
        if memory_snapshot {
            assert_eq!(supported, [Feature::Reasoning]);
        } else {
            assert_eq!(supported, [Feature::Approvals, Feature::Reasoning]);
        }
    }
}

/// What each feature method answered.
type Answers = Arc<Mutex<Vec<(Feature, Result<(), SinkError>)>>>;

/// Calls every feature method the journal has no event for, and writes down what it got.
struct Unsupported(Answers);

#[async_trait]
impl Harness for Unsupported {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("unsupported", "1"))
    }
    async fn run(&self, _: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let got = vec![
            (
                Feature::Questions,
                sink.ask(Question::new("Which day?")).await.map(|_| ()),
            ),
            (Feature::Handoff, sink.handoff(Handoff::to_human()).await),
            (
                Feature::Commands,
                sink.command(Command::hangup("done")).await.map(|_| ()),
            ),
            (
                Feature::State,
                sink.state(StateUpdate::Snapshot(json!({"step": 1}))).await,
            ),
            (
                Feature::Steps,
                sink.step(Step::Started("look up".into())).await,
            ),
        ];
        self.0.lock().unwrap().extend(got);
        Ok(())
    }
}

/// The spec's EventSink is "Model, Output, ToolCall, Report, Usage" and the journal's events
/// are those of research §1: a question, a hand-off, a platform command, shared state and a
/// step have none. Each is refused with `SinkError::Unsupported` (never a silent no-op), and
/// nothing is journaled for it: the turn is its start, its input and its END, and it replays.
#[test]
fn ask_handoff_command_state_and_step_are_refused_and_journal_nothing() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let host = Controller::builder(MemoryJournal::new())
        .harness("unsupported", Unsupported(got.clone()))
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", "go"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    for (feature, result) in got.lock().unwrap().iter() {
        assert_eq!(*result, Err(SinkError::Unsupported(*feature)), "{feature}");
    }
    assert_eq!(got.lock().unwrap().len(), 5);
    assert_eq!(kinds(&host, "s"), vec![ExecutionStart, Input, End]);
    let rep = block(host.replay("s")).unwrap();
    assert_eq!(rep.executions, 1);
}

/// Streams reasoning of its own around a model call whose completion carries an opaque
/// reasoning part, and keeps every completion it was handed.
struct Reasons(Arc<Mutex<Vec<Message>>>);

#[async_trait]
impl Harness for Reasons {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        let mut d = Descriptor::new("reasons", "1");
        d.capabilities.reasoning_replay = true;
        Ok(d)
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        sink.reasoning("Which primes are small?").await?;
        let resp = sink
            .model(ModelRequest::new(start.inputs).with_model("m"))
            .await?;
        self.0.lock().unwrap().push(resp.message);
        sink.reasoning("2, 3 and 5 are.").await?;
        sink.output(" Done.").await?;
        Ok(())
    }
}

/// Rule 5: "If your provider returns opaque reasoning parts, return them inside
/// ModelResponse.Message unchanged and set Capabilities.ReasoningReplay. The host records them
/// verbatim and replays them, so reasoning continuity survives resume and fork (I2)"; I5:
/// "Replay reproduces the recorded events byte-for-byte". `sink.reasoning` is journaled as an
/// OUTPUT whose one part is a reasoning part (the text in its summary, the execution as its
/// validity scope), not as output text. Replay from the file serves the provider's opaque
/// bytes and the harness's reasoning back byte for byte, with no provider call; a turn cut
/// after any of its records and resumed writes the same records, hash for hash.
#[test]
fn reasoning_is_journaled_as_reasoning_parts_and_served_byte_for_byte() {
    let dir = scratch_dir("reasoning");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let build = |j: Arc<dyn Journal>| {
        Controller::builder(j)
            .model(reasoning_model())
            .harness("reasons", Reasons(seen.clone()))
            .build()
    };
    let journal: Arc<dyn Journal> = Arc::new(FileJournal::open(&dir).unwrap());
    let host = build(journal.clone());
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::text("s", "Small primes?"))).unwrap();
    assert_eq!(turn.output, "answer to 1 messages Done.");
    assert_eq!(
        kinds(&host, "s"),
        vec![
            ExecutionStart,
            Input,
            Output,
            ModelCall,
            Output,
            Output,
            Output,
            End
        ]
    );
    let recs = host.records("s").unwrap();
    for (i, text) in [(2, "Which primes are small?"), (5, "2, 3 and 5 are.")] {
        let EventBody::Output(m) = &recs[i].event.body else {
            panic!("{i}")
        };
        assert_eq!(m.role, Role::Assistant);
        let [Part::Reasoning(r)] = m.parts.as_slice() else {
            panic!("{m:?}")
        };
        assert_eq!(r.summary, vec![Part::text(text)]);
        assert_eq!(r.validity_scope, turn.execution_id);
        assert!(r.opaque.is_none() && r.provider.is_empty());
    }
    let uncut = hashes(&*journal, "s");
    drop(host);
    drop(journal);

    // Replay from the file: no provider call, the completion handed over as it was live.
    let host = build(Arc::new(FileJournal::open(&dir).unwrap()));
    let rep = block(host.replay("s")).unwrap();
    assert_eq!((rep.executions, rep.provider_calls), (1, 0));
    let seen_now = seen.lock().unwrap().clone();
    assert_eq!(seen_now.len(), 2);
    assert_eq!(seen_now[0], seen_now[1], "served byte for byte");
    let Part::Reasoning(r) = &seen_now[1].parts[0] else {
        panic!()
    };
    assert_eq!(r.opaque.as_deref(), Some(&b"\x00opaque\xff"[..]));

    // Cut after each record of the turn, then resumed: the same records, hash for hash.
    for n in 2..uncut.len() - 1 {
        let journal = Arc::new(MemoryJournal::new());
        build(journal.clone()).create_session("s", None).unwrap();
        let cut = build(Arc::new(Crashing::new(journal.clone(), Some(n))));
        assert!(block(cut.exec(ExecRequest::text("s", "Small primes?"))).is_err());
        let host = build(journal.clone());
        let turn = block(host.resume("s")).unwrap().unwrap();
        assert_eq!(turn.output, "answer to 1 messages Done.", "cut after {n}");
        assert_eq!(hashes(&*journal, "s"), uncut, "cut after {n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
