//! errors.md §5 "Timeouts" (spec/uhp-2026-08-11): an inactivity timeout, not a total one, over the
//! whole connection; a client that gives up has not stopped the task. Quotes: [spec] is
//! spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{answer_json, client, created_with_id, events, json_head, server, sse_head};
use harness_uhp::accumulator::ProtocolFinding;
use harness_uhp::client::{
    CreateRequest, RequestKind, TaskClient, TaskClientConfig, TaskError, TaskEvent,
};
use harness_uhp::response::ResponseStatus;
use harness_uhp::retry::{GiveUpReason, RetryPolicy};
use serde_json::json;

/// [S] "clients use an inactivity timeout, not a total timeout": a silent stream is given up
/// on and the stored response fetched; keep-alive comments keep it alive.
#[test]
fn inactivity_timeout() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    let body = server().to_sse();
    let first = body.iter().position(|&b| b == b'\n').unwrap() + 2;
    c.handle_data(now, t.id, &body[..first]);
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(75)));
    let later = now + Duration::from_secs(60);
    c.handle_data(later, t.id, b": keep-alive\n\n");
    assert_eq!(c.poll_timeout(), Some(later + Duration::from_secs(75)));
    c.handle_timeout(later + Duration::from_secs(74));
    assert!(c.poll_transmit().is_none());
    c.handle_timeout(later + Duration::from_secs(75));
    assert!(
        events(&mut c)
            .iter()
            .any(|e| matches!(e, TaskEvent::StreamLost { .. }))
    );
    assert_eq!(c.poll_transmit().unwrap().kind, RequestKind::Retrieve);
    // Late bytes of the abandoned stream are ignored.
    c.handle_data(later, t.id, &body[first..]);
    assert!(!c.is_finished());
}

/// [S] "clients use an inactivity timeout, not a total timeout": the timeout covers the whole
/// connection, including the wait for the answer's head. A create (or a read of the stored
/// response) that the server accepts and never answers used to wait forever; it is now a
/// transport failure after the inactivity timeout, retried with the same key.
#[test]
fn a_request_never_answered_times_out() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t1 = c.poll_transmit().unwrap();
    let limit = now + Duration::from_secs(75);
    assert_eq!(c.poll_timeout(), Some(limit));
    c.handle_timeout(limit - Duration::from_millis(1));
    assert!(events(&mut c).is_empty());
    c.handle_timeout(limit);
    let at = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                kind: RequestKind::Create,
                at,
                failures: 1,
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    c.handle_timeout(at);
    let t2 = c.poll_transmit().unwrap();
    assert_eq!(
        t2.request.headers()["idempotency-key"],
        t1.request.headers()["idempotency-key"]
    );
    // [S] "Repeated key ⇒ first request's result …; if first still running server MUST
    // wait and return its result": the repeated create's head may take the whole task, so
    // it has no head timeout.
    assert_eq!(c.poll_timeout(), None);
    // The abandoned request's late answer is ignored.
    c.handle_head(at, t1.id, 200, &sse_head());
    c.handle_data(at, t1.id, &server().to_sse());
    assert!(!c.is_finished());
    // An answered request's timeout is over: only the retry timer (none here) remains.
    c.handle_head(at, t2.id, 200, &json_head());
    c.handle_data(at, t2.id, &serde_json::to_vec(server().response()).unwrap());
    c.handle_end(at, t2.id);
    assert!(c.is_finished());
    assert_eq!(c.poll_timeout(), None);

    // The same for the read of the stored response.
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id);
    let get = c.poll_transmit().unwrap();
    assert_eq!(get.kind, RequestKind::Retrieve);
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(75)));
    c.handle_timeout(now + Duration::from_secs(75));
    assert!(events(&mut c).iter().any(|e| matches!(
        e,
        TaskEvent::Retrying {
            kind: RequestKind::Retrieve,
            ..
        }
    )));
    assert_eq!(c.creates_sent(), 1);
}

/// A task whose stream was lost and whose stored response stays `in_progress`: [S]
/// "GET /v1/responses/{id} is the source of truth", read again every `poll_interval` — but
/// the policy's deadline ("No attempt starts after this instant") bounds the polls too, and
/// the client gives up with an error naming the task that is still running ([S] "giving up
/// ≠ task stopped (cancel explicitly)"). Polls used to go on past the deadline forever.
#[test]
fn polling_a_running_task_stops_at_the_deadline() {
    let now = Instant::now();
    let mut cfg = TaskClientConfig::new("http://h");
    cfg.poll_interval = Duration::from_secs(1);
    let policy = RetryPolicy::new()
        .with_seed(3)
        .with_deadline(now + Duration::from_millis(10_500));
    let mut c = TaskClient::with_policy(cfg, CreateRequest::new("x"), policy);
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id);
    let running =
        json!({"id": "resp_1", "object": "response", "status": "in_progress", "output": []});
    let mut t_now = now;
    let mut polls = 0;
    while let Some(get) = c.poll_transmit() {
        assert_eq!(get.kind, RequestKind::Retrieve);
        assert!(
            t_now <= now + Duration::from_millis(10_500),
            "a poll after the deadline"
        );
        polls += 1;
        answer_json(&mut c, t_now, &get, 200, &json_head(), &running);
        match c.poll_timeout() {
            Some(at) => {
                t_now = at;
                c.handle_timeout(at);
            }
            None => break,
        }
        assert!(polls < 100, "polled without end");
    }
    assert_eq!(polls, 11); // at 0 s, 1 s, … 10 s
    assert!(c.is_failed());
    assert!(events(&mut c).iter().any(|e| matches!(
        e,
        TaskEvent::Failed(TaskError::StillInProgress {
            response_id,
            reason: GiveUpReason::DeadlinePassed,
        }) if response_id == "resp_1"
    )));
    assert_eq!(c.creates_sent(), 1);
}

/// lifecycle.md: the terminal statuses are `completed`, `failed`, `incomplete` and `cancelled`
/// ("Terminal? yes"); `in_progress` is not. Servers also answer `GET /v1/responses/{id}` with
/// statuses the protocol does not define while a task is in flight (the reference server says
/// `running`). A stored response that is not terminal means "read it again", whatever its
/// status, with a finding for the unknown ones — it used to end the task "finished" with
/// status `running` and no text, and the output was lost.
#[test]
fn a_stored_response_with_a_status_it_does_not_know_is_polled_until_terminal() {
    let now = Instant::now();
    let mut cfg = TaskClientConfig::new("http://h");
    cfg.poll_interval = Duration::from_secs(1);
    let mut c = TaskClient::new(cfg, CreateRequest::new("x"));
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id); // the stream is cut part-way
    let mut t_now = now;
    let statuses = ["running", "queued", "thinking_hard", "in_progress"];
    for status in statuses {
        let get = c.poll_transmit().expect("the task is read again");
        assert_eq!(get.kind, RequestKind::Retrieve);
        let stored = json!({"id": "resp_1", "object": "response", "status": status, "output": []});
        answer_json(&mut c, t_now, &get, 200, &json_head(), &stored);
        assert!(!c.is_finished(), "ended on status {status}");
        assert!(!c.is_failed(), "failed on status {status}");
        let at = c.poll_timeout().expect("a poll is scheduled");
        t_now = at;
        c.handle_timeout(at);
    }
    let get = c.poll_transmit().unwrap();
    let done = json!({"id": "resp_1", "object": "response", "status": "completed",
        "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Forty-two.", "annotations": []}]}]});
    answer_json(&mut c, t_now, &get, 200, &json_head(), &done);
    assert!(c.is_finished());
    let task = c.accumulator();
    assert_eq!(task.status(), &ResponseStatus::Completed);
    assert_eq!(task.text(), "Forty-two.");
    let unknown: Vec<_> = task
        .findings()
        .iter()
        .filter_map(|f| match f {
            ProtocolFinding::UnknownStatus { status } => Some(status.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(unknown, ["running", "queued", "thinking_hard"]);
    assert_eq!(c.creates_sent(), 1, "never re-created");
}
