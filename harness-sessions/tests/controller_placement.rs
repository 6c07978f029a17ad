//! Placement (Rule 3 and "Capability matching"; "Running out of process"): what is refused
//! before anything is journaled. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use harness_sessions::capabilities::RuntimeCapabilities;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::harnesses::CounterHarness;
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::{Code, Error};

/// Rule 3 / capability matching: "A REQUIRES_MEMORY_SNAPSHOT harness on a filesystem-only
/// backend is refused up front with a FailedPrecondition"; "refuses a
/// REQUIRES_MEMORY_SNAPSHOT harness with FAILED_PRECONDITION before anything is journaled".
#[test]
fn can_place_refuses_a_memory_snapshot_harness_before_journaling() {
    let journal = Arc::new(MemoryJournal::new());
    let counter = Arc::new(CounterHarness::new());
    let host = Controller::builder(journal.clone())
        .harness("counter", counter.clone())
        .runtime(RuntimeCapabilities::filesystem_only())
        .build();
    host.create_session("s", Some("counter")).unwrap();
    let err = block(host.exec(ExecRequest::text("s", "tick"))).unwrap_err();
    assert!(matches!(err, Error::CannotPlace { .. }), "{err}");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        journal.head("s").unwrap(),
        Default::default(),
        "no record, no fence"
    );
    assert_eq!(counter.count(), 0);
}

/// "If nothing answers at the address when an exec, resume, or fork is admitted (the
/// connection is refused, or the harness has not answered Describe ...), the call fails with
/// UNAVAILABLE and nothing is journaled, so it is safe to retry".
#[test]
fn a_harness_that_does_not_describe_itself_is_unavailable_and_nothing_is_journaled() {
    let journal = Arc::new(MemoryJournal::new());
    let host = Controller::builder(journal.clone())
        .harness("silent", Silent)
        .build();
    host.create_session("s", None).unwrap();
    let head = journal.head("s").unwrap();
    let err = block(host.exec(ExecRequest::text("s", "hi"))).unwrap_err();
    assert!(matches!(err, Error::Describe(_)), "{err}");
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(err.code().grpc(), 14);
    let err = block(host.fork("s", 0, "c")).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(
        journal.head("s").unwrap(),
        head,
        "nothing journaled, no fence"
    );
    assert!(journal.meta("c").is_err(), "no child created");
}
