//! Admission: what `exec` refuses before anything is journaled (no record, no fence), so a
//! refused request leaves nothing behind. The spec's own cases ("refuses ... with
//! FAILED_PRECONDITION before anything is journaled"; "fails with UNAVAILABLE and nothing is
//! journaled, so it is safe to retry"; an unknown harness is INVALID_ARGUMENT) are checked in
//! controller_placement.rs and controller_exec.rs; here, inputs the journal cannot hold, and
//! `exec_new_session`, which creates its session only once the request is admitted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::sync::Arc;

use common::*;
use harness_core::message::{DataPart, JsonObject, Message, Part, Role};
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest, TurnStatus};
use harness_sessions::harnesses::{CounterHarness, EchoHarness};
use harness_sessions::journal::{FileJournal, Journal, JournalError, MemoryJournal};
use harness_sessions::{Code, Error};

/// A user message with one data part: `{"d": [[…[1]…]]}`, `depth` arrays deep.
fn nested_input(depth: usize) -> Message {
    let mut v = serde_json::json!(1);
    for _ in 0..depth {
        v = serde_json::Value::Array(vec![v]);
    }
    let mut data = JsonObject::new();
    data.insert("d".into(), v);
    Message {
        role: Role::User,
        parts: vec![Part::Data(DataPart { data })],
    }
}

fn echo_host(j: Arc<dyn Journal>) -> Controller {
    Controller::builder(j)
        .model(counting_model())
        .harness("echo", EchoHarness)
        .build()
}

/// An INPUT nested deeper than the journal reads back (its reader takes JSON nested at most
/// 127 levels) was journaled, and from then on every read of the session failed: exec,
/// resume and replay alike. It is refused now, as INVALID_ARGUMENT, before anything is
/// journaled; the session stays usable, and an input as deep as the journal holds is
/// accepted and reads back.
#[test]
fn an_input_the_journal_cannot_read_back_is_refused_before_anything_is_journaled() {
    let dir = scratch_dir("deep-input");
    let path = dir.join("s.journal");
    let host = echo_host(Arc::new(FileJournal::open(&dir).unwrap()));
    host.create_session("s", None).unwrap();
    let before = fs::read(&path).unwrap();
    let err = block(host.exec(ExecRequest::new(
        "s",
        vec![Message::user("fine"), nested_input(122)],
    )))
    .unwrap_err();
    assert_eq!(err.code().grpc(), 3, "{err}");
    assert!(err.to_string().contains("input 1"), "{err}");
    assert!(fs::read(&path).unwrap() == before, "the file changed");
    drop(host);

    // The deepest input the journal holds: {"event":{"message":{"parts":[{"data":{"data":
    // {"d": …}}}]}}} puts the arrays at level 7.
    let host = echo_host(Arc::new(FileJournal::open(&dir).unwrap()));
    block(host.exec(ExecRequest::new("s", vec![nested_input(121)]))).unwrap();
    drop(host);
    let host = echo_host(Arc::new(FileJournal::open(&dir).unwrap()));
    assert_eq!(host.records("s").unwrap().len(), 5);
    assert_eq!(block(host.replay("s")).unwrap().executions, 1);
    host.verify("s").unwrap();
    let _ = fs::remove_dir_all(&dir);
}

/// An input far deeper than the journal holds is refused the same way, without serializing
/// it (which recurses once per level and overflowed the stack before anything was refused).
#[test]
fn an_input_far_too_deep_is_refused_without_overflowing() {
    let (journal, host) = on_memory(echo_host);
    let err = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn_scoped(scope, || {
                block(host.exec(ExecRequest::new("s", vec![nested_input(5_000)]))).unwrap_err()
            })
            .unwrap()
            .join()
            .unwrap()
    });
    assert!(matches!(err, Error::InvalidInput { index: 0, .. }), "{err}");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(journal.head("s").unwrap().fence, 0, "no fence acquired");
    assert!(host.records("s").unwrap().is_empty());
}

/// `exec_new_session` creates the session only once the request is admitted: every request
/// `exec` refuses before anything is journaled creates nothing, where agentsessions' Exec
/// without a session leaves one behind ("An exec with no session still creates one ...
/// resending the session-less request creates another empty session"). Admitted, the
/// session's default harness is the one the request named.
#[test]
fn exec_new_session_creates_nothing_for_a_refused_request() {
    let journal = Arc::new(MemoryJournal::new());
    let host = Controller::builder(journal.clone())
        .model(counting_model())
        .harness("echo", EchoHarness)
        .harness("counter", CounterHarness::new())
        .harness("silent", Silent)
        .runtime(RuntimeCapabilities::default())
        .build();
    let refused = [
        (ExecRequest::text("", "hi"), Code::InvalidArgument),
        (
            ExecRequest::new("a", vec![nested_input(122)]),
            Code::InvalidArgument,
        ),
        (
            ExecRequest::text("b", "hi").with_harness("nope"),
            Code::InvalidArgument,
        ),
        (
            ExecRequest::text("c", "hi").with_harness("counter"),
            Code::FailedPrecondition,
        ),
        (
            ExecRequest::text("d", "hi").with_harness("silent"),
            Code::Unavailable,
        ),
    ];
    for (req, code) in refused {
        let what = format!("{:?} on {:?}", req.session, req.harness);
        let err = block(host.exec_new_session(req)).unwrap_err();
        assert_eq!(err.code(), code, "{what}: {err}");
        assert!(journal.sessions().unwrap().is_empty(), "{what}");
    }

    let turn = block(host.exec_new_session(ExecRequest::text("e", "hi"))).unwrap();
    assert_eq!(turn.status, TurnStatus::Completed);
    assert_eq!(journal.meta("e").unwrap().harness, "echo");
    // An existing session is not taken over.
    let err = block(host.exec_new_session(ExecRequest::text("e", "again"))).unwrap_err();
    assert!(
        matches!(err, Error::Journal(JournalError::AlreadyExists(_))),
        "{err}"
    );
    assert_eq!(host.records("e").unwrap().len(), turn.head_seq as usize);
}
