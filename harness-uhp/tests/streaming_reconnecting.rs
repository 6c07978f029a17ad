//! streaming.md §5 "Reconnecting" (spec/uhp-2026-08-11): a dropped connection does not end the
//! task, and the stored response is the source of truth — the task client fetches it, the
//! accumulator applies it (that task's only); a stream resumed with `Last-Event-ID` is checked from
//! its resume point. Quotes: [spec] is spec/uhp-harnessclientprotocol.txt; [S] is the protocol
//! digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{
    answer_json, client, created, created_with_id, delta, events, json_head, response, run,
    run_chunked, server, sse, sse_head, terminal,
};
use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{RequestKind, TaskError, TaskEvent};
use harness_uhp::{
    ProtocolFinding, ResponseStatus, SequenceCheck, TaskAccumulator, TerminalSource,
};
use serde_json::json;

/// [S] "Dropped connection does not abort the task; stream is an optimisation, GET
/// /v1/responses/{id} is the source of truth." The task is finished from the stored
/// response, polled while in progress, and never created twice.
#[test]
fn a_dropped_stream_is_finished_from_the_stored_response() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    let body = server().to_sse();
    c.handle_data(now, t.id, &body[..body.len() / 2]);
    c.handle_end(now, t.id); // the server closed the stream early
    let ev = events(&mut c);
    assert!(
        ev.iter()
            .any(|e| matches!(e, TaskEvent::StreamLost { response_id } if response_id == "resp_1"))
    );
    let get = c.poll_transmit().unwrap();
    assert_eq!(get.kind, RequestKind::Retrieve);
    assert_eq!(get.request.uri().path(), "/api/v1/responses/resp_1");
    assert_eq!(get.request.headers()["uhp-version"], "2026-08-11");

    // Still running: read again after the poll interval, not before.
    let mut running = serde_json::to_value(server().response()).unwrap();
    running["status"] = json!("in_progress");
    answer_json(&mut c, now, &get, 200, &json_head(), &running);
    assert!(c.poll_transmit().is_none());
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_millis(500)));
    c.handle_timeout(now + Duration::from_millis(499));
    assert!(c.poll_transmit().is_none());
    c.handle_timeout(now + Duration::from_millis(500));
    let get2 = c.poll_transmit().unwrap();
    assert_eq!(get2.kind, RequestKind::Retrieve);
    let done = serde_json::to_value(server().response()).unwrap();
    answer_json(&mut c, now, &get2, 200, &json_head(), &done);
    assert!(c.is_finished());
    assert_eq!(c.accumulator().text(), "Hello");
    assert_eq!(c.accumulator().status(), &ResponseStatus::Completed);
    assert_eq!(
        c.accumulator().terminal_source(),
        Some(TerminalSource::StoredResponse)
    );
    assert_eq!(c.creates_sent(), 1);
}

/// A stored response that is gone: not retryable.
#[test]
fn response_not_found() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    let mut b = StreamBuilder::new("resp_1");
    b.created();
    c.handle_data(now, t.id, &b.to_sse());
    c.handle_transport_error(now, t.id);
    let get = c.poll_transmit().unwrap();
    let env = json!({"error": {"type": "invalid_request_error", "code": "response_not_found", "message": "gone", "param": null}});
    answer_json(&mut c, now, &get, 404, &json_head(), &env);
    assert!(c.is_failed());
}

/// [S] "GET /v1/responses/{id}" returns that task: an answer carrying another task's id
/// cannot finish this one (it used to, with the other task's text). The client stops with
/// a clear error rather than poll a server that answers for the wrong task.
#[test]
fn a_stored_response_of_another_task_is_refused() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id);
    let get = c.poll_transmit().unwrap();
    assert_eq!(get.request.uri().path(), "/api/v1/responses/resp_1");
    let mut other = serde_json::to_value(server().response()).unwrap();
    other["id"] = json!("resp_OTHER");
    answer_json(&mut c, now, &get, 200, &json_head(), &other);
    assert!(!c.is_finished());
    assert!(c.is_failed());
    assert!(events(&mut c).iter().any(|e| matches!(
        e,
        TaskEvent::Failed(TaskError::BadBody(m)) if m.contains("resp_OTHER")
    )));
    assert_eq!(c.creates_sent(), 1);
}

/// The stored response is read as leniently as the terminal event: a float `created_at`
/// does not turn a completed task into a malformed-body failure.
#[test]
fn a_stored_response_with_a_sloppy_field_finishes_the_task() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id);
    let get = c.poll_transmit().unwrap();
    let mut done = serde_json::to_value(server().response()).unwrap();
    done["created_at"] = json!(1786400000.5);
    answer_json(&mut c, now, &get, 200, &json_head(), &done);
    assert!(c.is_finished(), "{:?}", events(&mut c));
    assert_eq!(c.accumulator().text(), "Hello");
}

/// The stored response (GET /v1/responses/{id}) finishes a task whose stream was lost.
#[test]
fn a_stored_response_finishes_the_task() {
    let body = sse(&[created(0), delta(1, "Hel")]);
    let mut r = run(&body);
    assert_eq!(r.task.response_id(), Some("resp_1"));
    let stored: harness_uhp::Response =
        serde_json::from_value(response("completed", "Hello")).unwrap();
    r.task.apply_response(&stored);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "Hello");
    assert_eq!(
        r.task.terminal_source(),
        Some(TerminalSource::StoredResponse)
    );
    // Once terminal, it does not change; a disagreeing stored response is a finding.
    let other: harness_uhp::Response = serde_json::from_value(response("failed", "x")).unwrap();
    r.task.apply_response(&other);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert!(matches!(
        r.task.findings().last(),
        Some(ProtocolFinding::StoredResponseDisagrees { .. })
    ));
}

/// A stored response still in progress does not finish the task.
#[test]
fn an_in_progress_stored_response_does_not_finish() {
    let mut task = TaskAccumulator::new();
    task.apply_response(&serde_json::from_value(response("in_progress", "")).unwrap());
    assert!(!task.is_terminal());
    assert_eq!(task.response_id(), Some("resp_1"));
}

/// A task is one response: its stream's events and its stored response carry its `id`
/// (`resp_…`). [S] "GET /v1/responses/{id} … is the source of truth" — of *that* task: a
/// response object with another id (a buggy proxy or cache mixing up tasks) is reported
/// and not applied. It used to end the task with the other task's status and text.
#[test]
fn a_response_with_another_id_is_not_applied() {
    let mut other = terminal(
        "response.completed",
        2,
        "completed",
        "someone else's answer",
    );
    other["response"]["id"] = json!("resp_OTHER");
    let body = sse(&[created(0), delta(1, "mine"), other]);
    let mut r = run(&body);
    assert!(!r.task.is_terminal());
    assert_eq!(r.task.status(), &ResponseStatus::InProgress);
    assert_eq!(r.task.text(), "mine");
    assert_eq!(r.task.response_id(), Some("resp_1"));
    assert!(r.task.findings().iter().any(|f| matches!(
        f,
        ProtocolFinding::ResponseIdMismatch { expected, got } if expected == "resp_1" && got == "resp_OTHER"
    )));

    // The stored response of another task is not this task's either.
    let mut stored: harness_uhp::Response =
        serde_json::from_value(response("completed", "evil")).unwrap();
    stored.id = "resp_OTHER".into();
    r.task.apply_response(&stored);
    assert!(!r.task.is_terminal());
    assert_eq!(r.task.text(), "mine");

    // Its own terminal event still ends it; one without an id (sloppy, not another task's)
    // is taken as this task's.
    let mut own = terminal("response.completed", 3, "completed", "mine, all of it");
    own["response"]["id"] = json!("");
    let mut body = body.clone();
    body.extend(sse(&[own]));
    let r = run(&body);
    assert_eq!(r.task.status(), &ResponseStatus::Completed);
    assert_eq!(r.task.text(), "mine, all of it");
}

/// [S] "if supported the server resumes *after* the given sequence_number … and MUST NOT
/// replay": a resumed stream is checked from its resume point; a replay is a duplicate.
#[test]
fn resume_from_last_event_id() {
    let mut s = SequenceCheck::resumed_after(41);
    for n in [42, 43, 40, 44] {
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.start, 42);
    assert!(r.missing.is_empty());
    assert_eq!(r.duplicates, vec![40]);
    let mut s = SequenceCheck::resumed_after(41);
    s.record(Some(45));
    assert_eq!(s.report().missing, vec![42..=44]);
}

/// The accumulator keeps the last sequence number for `Last-Event-ID`.
#[test]
fn last_sequence_number_for_resumption() {
    let r = run(&sse(&[created(0), delta(1, "a"), delta(2, "b")]));
    assert_eq!(r.task.last_sequence_number(), Some(2));
    let r2 = run_chunked(&sse(&[created(0), delta(1, "a"), delta(2, "b")]), &[3]);
    assert_eq!(r2.task.summary(), r.task.summary());
}

/// A resumed stream that has delivered nothing yet still resumes from where it was: the
/// `Last-Event-ID` to send after a second drop is the first resume point, not nothing
/// (which would make the server replay the whole stream from 0).
#[test]
fn a_resumed_stream_keeps_its_resume_point_for_the_next_resume() {
    let task = TaskAccumulator::resumed_after(41);
    assert_eq!(task.last_sequence_number(), Some(41));
    assert_eq!(SequenceCheck::resumed_after(41).last_seen(), Some(41));
    assert_eq!(
        SequenceCheck::resumed_after(u64::MAX).last_seen(),
        Some(u64::MAX)
    );
    assert_eq!(TaskAccumulator::new().last_sequence_number(), None);
    let mut task = TaskAccumulator::resumed_after(41);
    task.add(&harness_uhp::StreamEvent::parse(delta(42, "x").to_string()).unwrap());
    assert_eq!(task.last_sequence_number(), Some(42));
}
