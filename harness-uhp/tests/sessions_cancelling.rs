//! sessions.md §4 "Cancelling" (spec/uhp-2026-08-11; tasks.md §5): the task client's cancel
//! request, sent once the task's id is known, sent again when it can be, and reported when it
//! cannot be delivered. Quotes: [spec] is spec/uhp-harnessclientprotocol.txt; [S] is the protocol
//! digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use common::{answer_json, client, created_with_id, events, json_head, server, sse_head};
use harness_uhp::ResponseStatus;
use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{RequestKind, TaskError, TaskEvent};
use harness_uhp::retry::GiveUpReason;
use serde_json::json;

/// Cancel: sent once the response id is known; the stream then ends `cancelled`.
#[test]
fn cancel() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.cancel(now); // id not known yet
    assert!(c.poll_transmit().is_none());
    c.handle_head(now, t.id, 200, &sse_head());
    let mut b = StreamBuilder::new("resp_1");
    b.created();
    c.handle_data(now, t.id, &b.to_sse());
    let cancel = c.poll_transmit().unwrap();
    assert_eq!(cancel.kind, RequestKind::Cancel);
    assert_eq!(
        cancel.request.uri().path(),
        "/api/v1/responses/resp_1/cancel"
    );
    answer_json(
        &mut c,
        now,
        &cancel,
        200,
        &json_head(),
        &serde_json::to_value(b.response()).unwrap(),
    );
    b.cancelled();
    let last = b.events().last().unwrap().clone();
    c.handle_data(now, t.id, &StreamBuilder::sse_event(&last));
    assert!(c.is_finished());
    assert_eq!(c.accumulator().status(), &ResponseStatus::Cancelled);
}

/// The cancel endpoint "Idempotent. Cancelling an already-terminal task succeeds and changes
/// nothing — a client retrying a cancel after a dropped connection must not be punished for
/// having succeeded" (OpenAPI). So a cancel whose connection drops, or that meets a server
/// error, is sent again (backoff); one the server refuses for good is reported, not
/// swallowed: the application asked for a stop and must learn it did not happen.
#[test]
fn a_failed_cancel_is_retried_then_reported() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    events(&mut c);
    c.cancel(now);
    let cancel = c.poll_transmit().unwrap();
    c.handle_transport_error(now, cancel.id);
    let at = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                kind: RequestKind::Cancel,
                at,
                ..
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    assert!(c.poll_timeout().unwrap() <= at);
    c.handle_timeout(at);
    let again = c.poll_transmit().unwrap();
    assert_eq!(again.kind, RequestKind::Cancel);
    assert_eq!(again.request.method(), http::Method::POST);
    assert_eq!(
        again.request.uri().path(),
        "/api/v1/responses/resp_1/cancel"
    );

    // A 503 is retried too; a 404 is final and reported.
    let env = json!({"error": {"type": "server_error", "code": "harness_unavailable", "message": "down", "param": null}});
    answer_json(&mut c, at, &again, 503, &json_head(), &env);
    let at2 = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                kind: RequestKind::Cancel,
                at,
                ..
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    c.handle_timeout(at2);
    let third = c.poll_transmit().unwrap();
    let gone = json!({"error": {"type": "invalid_request_error", "code": "response_not_found", "message": "gone", "param": null}});
    answer_json(&mut c, at2, &third, 404, &json_head(), &gone);
    match events(&mut c).as_slice() {
        [
            TaskEvent::CancelFailed(TaskError::Http {
                status: 404,
                error: Some(e),
                reason: GiveUpReason::NotRetryable,
            }),
        ] => assert_eq!(e.code.as_deref(), Some("response_not_found")),
        e => panic!("{e:?}"),
    }
    // The task itself goes on: its stream is still open.
    assert!(!c.is_failed() && !c.is_finished());
    assert!(c.poll_transmit().is_none());

    // A successful cancel answer ends the cancel; the stream then ends the task.
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.cancel(now);
    let cancel = c.poll_transmit().unwrap();
    let mut r = server().response().clone();
    r.status = ResponseStatus::InProgress;
    answer_json(
        &mut c,
        now,
        &cancel,
        200,
        &json_head(),
        &serde_json::to_value(&r).unwrap(),
    );
    assert!(
        events(&mut c)
            .iter()
            .all(|e| matches!(e, TaskEvent::Event(_)))
    );
    assert!(c.poll_transmit().is_none());
}

/// Found by `never_runs_the_task_twice`: a cancel asked for before the id was known was
/// sent when the answer that told the id also ended the task (a JSON answer, or a stream
/// chunk holding `response.created` and the terminal event) — a request for a task already
/// over. The task ends first; nothing is sent after it.
#[test]
fn no_cancel_is_sent_for_a_task_that_just_ended() {
    let now = Instant::now();
    // A JSON answer with the finished task.
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.cancel(now);
    answer_json(
        &mut c,
        now,
        &t,
        200,
        &json_head(),
        &serde_json::to_value(server().response()).unwrap(),
    );
    assert!(c.is_finished());
    assert!(c.poll_transmit().is_none());
    // One stream chunk with the whole task.
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.cancel(now);
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &server().to_sse());
    assert!(c.is_finished());
    assert!(c.poll_transmit().is_none());
}
