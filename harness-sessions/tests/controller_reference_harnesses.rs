//! The reference harnesses on the controller ("Reference harness 1: stateless replay",
//! "Reference harness 3: memory snapshot"). Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use EventKind::*;
use common::*;
use harness_core::Resumability;
use harness_core::event::EventKind;
use harness_core::message::{Message, ModelRequest};
use harness_core::model::ScriptedModel;
use harness_sessions::Error;
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::harnesses::{CounterHarness, EchoHarness};
use harness_sessions::journal::MemoryJournal;

/// Reference harness 3 and I4: "it never reads s.History. The count is pure process RAM";
/// "Approval ... Memory-snapshot harnesses are refused before the effect."
#[test]
fn counter_runs_on_a_memory_runtime_and_is_never_replayed() {
    let journal = Arc::new(MemoryJournal::new());
    let counter = Arc::new(CounterHarness::new());
    let host = Controller::builder(journal.clone())
        .harness("counter", counter.clone())
        .runtime(RuntimeCapabilities {
            memory_snapshot: true,
            ..Default::default()
        })
        .build();
    host.create_session("s", Some("counter")).unwrap();
    let outs: Vec<String> = (0..3)
        .map(|_| {
            block(host.exec(ExecRequest::text("s", "tick")))
                .unwrap()
                .output
        })
        .collect();
    assert_eq!(outs, ["1", "2", "3"]);
    for (op, err) in [
        ("replay", block(host.replay("s")).unwrap_err()),
        ("fork", block(host.fork("s", 2, "c")).unwrap_err()),
    ] {
        assert!(
            matches!(err, Error::NeedsMemorySnapshot { .. }),
            "{op}: {err}"
        );
    }
    let desc = block(harness_core::Harness::describe(&*counter)).unwrap();
    assert_eq!(
        desc.capabilities.resumability,
        Resumability::RequiresMemorySnapshot
    );
    assert!(!desc.capabilities.fork_safe);
    assert_eq!(desc.version, "1");
}

/// Echo: "It sends the last input to the model through the sink and lets the recorded
/// completion be the output"; "It does not call sink.Output."
#[test]
fn echo_sends_the_last_input_and_never_outputs() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let model = Hooked {
        inner: ScriptedModel::echo(),
        hook: Box::new(move |req: &ModelRequest| s2.lock().unwrap().push(req.clone())),
    };
    let host = Controller::builder(Arc::new(MemoryJournal::new()))
        .model(model)
        .harness("echo", EchoHarness)
        .build();
    host.create_session("s", None).unwrap();
    let turn = block(host.exec(ExecRequest::new(
        "s",
        vec![Message::user("first"), Message::user("last")],
    )))
    .unwrap();
    assert_eq!(turn.output, "You said: last");
    let req = seen.lock().unwrap()[0].clone();
    assert_eq!(
        req,
        ModelRequest::new(vec![Message::user("last")]).with_model("echo")
    );
    assert_eq!(
        kinds(&host, "s"),
        vec![ExecutionStart, Input, Input, ModelCall, Output, End]
    );
}
