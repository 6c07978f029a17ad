//! Fork ("copies records 1..atSeq verbatim, and appends LIFECYCLE{FORK}"): the copied prefix,
//! a fork at a model call and inherited tool intents. Each test quotes the
//! words it checks (spec/agentsessions-writing-a-harness.txt).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;

use EventKind::*;
use common::*;
use harness_core::event::{EventBody, EventKind, LifecycleKind};
use harness_sessions::controller::ExecRequest;
use harness_sessions::journal::Journal;
use harness_sessions::{Code, Error};

/// Fork: "copies records 1..atSeq verbatim, and appends LIFECYCLE{FORK, detail
/// "parent@<atSeq>"}"; "The first new record (LIFECYCLE FORK) has prev_hash =
/// parent@atSeq.content_hash" (research §3, §7).
#[test]
fn fork_copies_the_prefix_and_chains_the_fork_marker() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "one"))).unwrap();
    block(h.host.exec(ExecRequest::text("s", "two"))).unwrap();
    let parent = h.host.records("s").unwrap();
    let out = block(h.host.fork("s", 5, "c")).unwrap();
    assert_eq!(out.fork_seq, 6);
    let child = h.host.records("c").unwrap();
    assert_eq!(&child[..5], &parent[..5]);
    assert_eq!(child[5].prev_hash, Some(parent[4].content_hash));
    let EventBody::Lifecycle(l) = &child[5].event.body else {
        panic!()
    };
    assert_eq!(
        (l.kind, l.detail.as_str()),
        (LifecycleKind::Fork, "parent@5")
    );
    assert!(child[5].event.execution_id.is_empty());
    assert_eq!(h.journal.meta("c").unwrap().parent.unwrap().session, "s");
    // The child's new turn sees the inherited conversation, and both replay independently.
    block(h.host.exec(ExecRequest::text("c", "three"))).unwrap();
    assert_eq!(block(h.host.replay("c")).unwrap().executions, 2);
    assert_eq!(block(h.host.replay("s")).unwrap().executions, 2);
    assert!(h.host.verify("c").is_ok());
    assert_eq!(
        block(h.host.fork("s", 99, "d")).unwrap_err().code(),
        Code::InvalidArgument
    );
}

/// "A fork whose fork point is a MODEL_CALL copies the call without any completion the parent
/// recorded later, so Resume on the child re-calls the provider once".
#[test]
fn fork_at_a_model_call_costs_one_provider_call() {
    let h = host(vec![Op::Model]);
    block(h.host.exec(ExecRequest::text("s", "one"))).unwrap();
    block(h.host.fork("s", 3, "c")).unwrap();
    let before = h.model.calls();
    let turn = block(h.host.resume("c")).unwrap().unwrap();
    assert_eq!(turn.provider_calls, 1);
    assert_eq!(h.model.calls(), before + 1);
    assert_eq!(
        kinds(&h.host, "c"),
        vec![ExecutionStart, Input, ModelCall, Lifecycle, Output, End]
    );
    assert_eq!(block(h.host.replay("c")).unwrap().executions, 1);
}

/// "Resume returns controller.ErrInheritedToolIntent before running the harness or appending
/// any event if the unfinished execution has inherited tool intents still unresolved at the
/// journal head"; "Completed inherited pairs are served from the journal without invoking the
/// executor"; "An intent first written by the child after the fork is not inherited and can
/// be re-driven under the child's UID."
#[test]
fn fork_refuses_inherited_unresolved_intents() {
    let h = host(vec![Op::Tool, Op::Tool]);
    block(h.host.exec(ExecRequest::text("s", "go"))).unwrap();
    // s: START INPUT TOOL_CALL(3) TOOL_RESULT(4) TOOL_CALL(5) TOOL_RESULT(6) END(7)
    block(h.host.fork("s", 5, "c")).unwrap();
    let runs = h.harness.runs.load(Ordering::SeqCst);
    let len = h.host.records("c").unwrap().len();
    let err = block(h.host.resume("c")).unwrap_err();
    match &err {
        Error::InheritedToolIntent {
            tool_call_id, seq, ..
        } => {
            assert_eq!((tool_call_id.as_str(), *seq), ("call-1", 5))
        }
        other => panic!("{other}"),
    }
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(h.harness.runs.load(Ordering::SeqCst), runs);
    assert_eq!(h.host.records("c").unwrap().len(), len);
    // Fork at the result instead: the completed inherited pair is served, and the second
    // intent, first written by the child, runs under the child's UID.
    block(h.host.fork("s", 4, "d")).unwrap();
    let effects = h.effects.count();
    let turn = block(h.host.resume("d")).unwrap().unwrap();
    assert_eq!(turn.executor_calls, 1);
    assert_eq!(h.effects.count(), effects + 1);
    assert_eq!(
        h.effects.keys().last().unwrap().0,
        "d",
        "a new dedup namespace"
    );
}
