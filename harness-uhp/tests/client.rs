//! The sans-IO task client, driven without a network. Quotes: [spec]
//! spec/uhp-harnessclientprotocol.txt, [S] research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant, SystemTime};

use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{
    ClientConfig, CreateRequest, RequestKind, TaskClient, TaskError, TaskEvent, Transmit, requests,
};
use harness_uhp::retry::{GiveUpReason, RetryPolicy, idempotency_key};
use harness_uhp::{ResponseStatus, TerminalSource};
use http::HeaderMap;
use serde_json::{Value, json};

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

fn sse_head() -> HeaderMap {
    headers(&[("content-type", "text/event-stream")])
}

fn json_head() -> HeaderMap {
    headers(&[("content-type", "application/json")])
}

fn server() -> StreamBuilder {
    let mut b = StreamBuilder::new("resp_1");
    b.created().message(&["Hel", "lo"], &[]).completed();
    b
}

fn client() -> TaskClient {
    let mut cfg = ClientConfig::new("http://uhp.test/api/").with_token("tok");
    cfg.poll_interval = Duration::from_millis(500);
    TaskClient::with_policy(
        cfg,
        CreateRequest::new("hi").harness("chrn_1"),
        RetryPolicy::new().with_seed(5),
    )
}

fn events(c: &mut TaskClient) -> Vec<TaskEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn answer_json(
    c: &mut TaskClient,
    now: Instant,
    t: &Transmit,
    status: u16,
    h: &HeaderMap,
    body: &Value,
) {
    c.handle_head(now, t.id, status, h);
    c.handle_data(now, t.id, body.to_string().as_bytes());
    c.handle_end(now, t.id);
}

/// [S] "`Idempotency-Key` on POST /v1/responses … Retries of POST /v1/responses MUST carry
/// one"; "`UHP-Version: YYYY-MM-DD` request header"; "Authorization: Bearer <token>".
#[test]
fn the_create_request() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    assert_eq!(t.kind, RequestKind::Create);
    let r = &t.request;
    assert_eq!(r.method(), http::Method::POST);
    assert_eq!(r.uri().to_string(), "http://uhp.test/api/v1/responses");
    let h = r.headers();
    assert_eq!(h["idempotency-key"], c.idempotency_key().as_str());
    assert_eq!(h["uhp-version"], "2026-08-11");
    assert_eq!(h["accept"], "text/event-stream");
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h["authorization"], "Bearer tok");
    let body: Value = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(
        body,
        json!({"input": "hi", "metadata": {"harness_id": "chrn_1"}, "stream": true})
    );
    assert!(c.poll_transmit().is_none());
}

#[test]
fn request_builders() {
    let cfg = ClientConfig::new("http://h");
    let key = idempotency_key();
    let r = requests::continue_session(&cfg, "resp_9", "more", &key).unwrap();
    let body: Value = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(body["previous_response_id"], "resp_9");
    assert_eq!(body["stream"], true);
    let r = requests::create(&cfg, &CreateRequest::new("x"), &key, false).unwrap();
    assert_eq!(r.headers()["accept"], "application/json");
    assert_eq!(
        serde_json::from_slice::<Value>(r.body()).unwrap()["stream"],
        false
    );
    let r = requests::retrieve(&cfg, "resp_9").unwrap();
    assert_eq!(
        (r.method().as_str(), r.uri().path()),
        ("GET", "/v1/responses/resp_9")
    );
    let r = requests::cancel(&cfg, "resp_9").unwrap();
    assert_eq!(
        (r.method().as_str(), r.uri().path()),
        ("POST", "/v1/responses/resp_9/cancel")
    );
    let r = requests::discovery(&cfg).unwrap();
    assert_eq!(r.uri().path(), "/v1/uhp");
    assert!(requests::retrieve(&ClientConfig::new("not a url\n"), "x").is_err());
}

/// A whole stream: events surface as they arrive, the task finishes, nothing else is sent.
#[test]
fn a_streamed_task() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    let body = server().to_sse();
    for chunk in body.chunks(9) {
        c.handle_data(now, t.id, chunk);
    }
    let ev = events(&mut c);
    assert!(matches!(ev.last(), Some(TaskEvent::Finished)));
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, TaskEvent::Event(_)))
            .count(),
        server().events().len()
    );
    assert!(c.is_finished());
    assert_eq!(c.accumulator().text(), "Hello");
    c.handle_end(now, t.id);
    assert!(c.poll_transmit().is_none() && c.poll_timeout().is_none());
}

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

/// Dropped before `response.created`: the id is unknown, so the create is sent again — with
/// the same key, so the server returns the first request's task instead of running another.
#[test]
fn dropped_before_created_resends_the_create_with_the_same_key() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t1 = c.poll_transmit().unwrap();
    c.handle_head(now, t1.id, 200, &sse_head());
    c.handle_data(now, t1.id, b": keep-alive\n\n");
    c.handle_transport_error(now, t1.id);
    let at = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                kind: RequestKind::Create,
                at,
                ..
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    c.handle_timeout(at);
    let t2 = c.poll_transmit().unwrap();
    assert_eq!(t2.kind, RequestKind::Create);
    assert_eq!(
        t2.request.headers()["idempotency-key"],
        t1.request.headers()["idempotency-key"]
    );
    assert_eq!(c.creates_sent(), 2);
}

/// [S] "server_error (500,502,503,504) yes, exp. backoff + jitter": a 503 is retried later
/// with the same key; the error envelope is read.
#[test]
fn a_server_error_is_retried_with_the_same_key() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t1 = c.poll_transmit().unwrap();
    let env = json!({"error": {"type": "server_error", "code": "harness_unavailable", "message": "down", "param": null}});
    answer_json(&mut c, now, &t1, 503, &json_head(), &env);
    let at = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                at, failures: 1, ..
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    assert!(at <= now + Duration::from_millis(500));
    assert_eq!(c.poll_timeout(), Some(at));
    c.handle_timeout(at);
    let t2 = c.poll_transmit().unwrap();
    assert_eq!(
        t2.request.headers()["idempotency-key"],
        t1.request.headers()["idempotency-key"]
    );
}

/// [S] "rate_limited yes after Retry-After" — seconds, or an HTTP-date measured from the
/// answer's own Date.
#[test]
fn retry_after_wins() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    let env = json!({"error": {"type": "rate_limit_error", "code": "rate_limited", "message": "slow down", "param": null}});
    answer_json(
        &mut c,
        now,
        &t,
        429,
        &headers(&[("content-type", "application/json"), ("retry-after", "7")]),
        &env,
    );
    assert!(matches!(
        events(&mut c).as_slice(),
        [TaskEvent::Retrying { .. }]
    ));
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(7)));

    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    let date = SystemTime::UNIX_EPOCH + Duration::from_secs(1_786_400_000);
    let h = headers(&[
        ("content-type", "application/json"),
        ("date", &httpdate::fmt_http_date(date)),
        (
            "retry-after",
            &httpdate::fmt_http_date(date + Duration::from_secs(90)),
        ),
    ]);
    answer_json(&mut c, now, &t, 429, &h, &env);
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(90)));
}

/// [spec] "is_retryable(code="quota_exhausted")  # False — nothing changes until the quota
/// does": the task fails, and nothing more is sent.
#[test]
fn quota_exhausted_gives_up() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    let env = json!({"error": {"type": "rate_limit_error", "code": "quota_exhausted", "message": "no", "param": null}});
    answer_json(
        &mut c,
        now,
        &t,
        429,
        &headers(&[("content-type", "application/json"), ("retry-after", "1")]),
        &env,
    );
    match events(&mut c).as_slice() {
        [
            TaskEvent::Failed(TaskError::Http {
                status: 429,
                error: Some(e),
                reason: GiveUpReason::NotRetryable,
            }),
        ] => {
            assert_eq!(e.code.as_deref(), Some("quota_exhausted"));
        }
        e => panic!("{e:?}"),
    }
    assert!(c.is_failed() && c.poll_transmit().is_none() && c.poll_timeout().is_none());
}

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

/// A server that answers the create with the finished response (not a stream).
#[test]
fn a_json_answer_to_create() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    answer_json(
        &mut c,
        now,
        &t,
        200,
        &json_head(),
        &serde_json::to_value(server().response()).unwrap(),
    );
    assert!(c.is_finished());
    assert_eq!(c.accumulator().text(), "Hello");
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

/// An over-large JSON body is refused, not buffered without bound.
#[test]
fn body_limit() {
    let now = Instant::now();
    let mut cfg = ClientConfig::new("http://h");
    cfg.max_body_bytes = 100;
    let mut c = TaskClient::new(cfg, CreateRequest::new("x"));
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &json_head());
    c.handle_data(now, t.id, &[b' '; 101]);
    assert!(matches!(
        events(&mut c).as_slice(),
        [TaskEvent::Failed(TaskError::BadBody(_))]
    ));
}

/// A `response.created` carrying this id, as SSE.
fn created_with_id(id: &str) -> Vec<u8> {
    let ev = json!({"type": "response.created", "sequence_number": 0,
        "response": {"id": id, "object": "response", "status": "in_progress", "output": []}});
    format!("data: {ev}\n\n").into_bytes()
}

/// Ids are opaque strings chosen by the server; in a path they are one segment (RFC 3986
/// §3.3), so `/`, `?`, `#` and dot-segments in an id are escaped: an id cannot steer a
/// cancel (`POST /v1/responses/{id}/cancel`) to another endpoint, such as
/// `/v1/sessions/{id}/cancel`, which cancels a whole session.
#[test]
fn ids_are_escaped_as_one_path_segment() {
    let cfg = ClientConfig::new("http://h");
    let hostile = "resp_1/../../sessions/hsess1";
    let r = requests::cancel(&cfg, hostile).unwrap();
    assert_eq!(
        r.uri().path(),
        "/v1/responses/resp_1%2F..%2F..%2Fsessions%2Fhsess1/cancel"
    );
    let r = requests::retrieve(&cfg, "resp_1?x=1#f").unwrap();
    assert_eq!(r.uri().path(), "/v1/responses/resp_1%3Fx%3D1%23f");
    assert_eq!(r.uri().query(), None);
    let r = requests::retrieve(&cfg, "..").unwrap();
    assert_eq!(r.uri().path(), "/v1/responses/%2E%2E");
    let r = requests::retrieve(&cfg, "resp_7f3a-._~").unwrap();
    assert_eq!(r.uri().path(), "/v1/responses/resp_7f3a-._~"); // unreserved: as is
    let r = requests::retrieve(&cfg, "resp_é 1").unwrap();
    assert_eq!(r.uri().path(), "/v1/responses/resp_%C3%A9%201");
    assert!(requests::retrieve(&cfg, "").is_err()); // no id is not `GET /v1/responses/`

    // The same in the task client, with the id the stream announced.
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id(hostile));
    c.cancel(now);
    let cancel = c.poll_transmit().unwrap();
    assert_eq!(
        cancel.request.uri().path(),
        "/api/v1/responses/resp_1%2F..%2F..%2Fsessions%2Fhsess1/cancel"
    );
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

/// `start` is the one way in: calling it again (a retry already scheduled, or a stream open)
/// sends nothing — the backoff the policy chose is not cut short by a second create.
#[test]
fn start_twice_sends_one_create() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    c.start(now);
    let t = c.poll_transmit().unwrap();
    assert!(c.poll_transmit().is_none());
    c.handle_transport_error(now, t.id); // a retry is scheduled
    let at = c.poll_timeout().unwrap();
    c.start(now);
    assert!(c.poll_transmit().is_none());
    assert_eq!(c.creates_sent(), 1);
    c.handle_timeout(at);
    assert_eq!(c.poll_transmit().unwrap().kind, RequestKind::Create);
    assert_eq!(c.creates_sent(), 2);
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

mod driven_by_anything {
    //! The task client driven by arbitrary answers in arbitrary order (to current, stale and
    //! cancel requests alike): [spec] "Retry without running the agent twice".
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Start,
        Cancel,
        Head(usize, u16, bool, Option<u8>),
        Data(usize, u8, usize, usize),
        End(usize),
        TransportError(usize),
        Advance(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        let status = prop::sample::select(vec![200u16, 200, 200, 404, 409, 429, 500, 501, 503]);
        prop_oneof![
            Just(Op::Start),
            Just(Op::Cancel),
            (
                any::<usize>(),
                status,
                any::<bool>(),
                prop::option::of(0u8..120)
            )
                .prop_map(|(r, s, sse, ra)| Op::Head(r, s, sse, ra)),
            (any::<usize>(), 0u8..5, any::<usize>(), 1usize..400)
                .prop_map(|(r, w, skip, n)| Op::Data(r, w, skip, n)),
            any::<usize>().prop_map(Op::End),
            any::<usize>().prop_map(Op::TransportError),
            (0u16..200).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the network does: no create once the task's id is known (a dropped
        /// stream is finished from the stored response), every create carries the one key,
        /// at most the policy's attempts are made, and nothing is sent or timed after the
        /// task finished or failed.
        #[test]
        fn never_runs_the_task_twice(ops in prop::collection::vec(op(), 1..60)) {
            let stream = server().to_sse();
            let done = serde_json::to_vec(server().response()).unwrap();
            let mut running = server().response().clone();
            running.status = ResponseStatus::InProgress;
            let running = serde_json::to_vec(&running).unwrap();
            let env = br#"{"error":{"type":"server_error","code":"harness_unavailable","message":"x","param":null}}"#.to_vec();
            let noise: Vec<u8> = (0..255u8).cycle().take(700).collect();
            let sources = [stream, done, running, env, noise];

            let mut now = Instant::now();
            let mut c = client();
            let mut sent: Vec<Transmit> = Vec::new();
            let mut key: Option<String> = None;
            let mut id_known = false;
            let mut cursors = std::collections::HashMap::new();
            for op in ops {
                let pick = |r: usize, sent: &[Transmit]| (!sent.is_empty()).then(|| sent[r % sent.len()].id);
                match op {
                    Op::Start => c.start(now),
                    Op::Cancel => c.cancel(now),
                    Op::Head(r, status, sse, ra) => if let Some(id) = pick(r, &sent) {
                        let mut h = if sse { sse_head() } else { json_head() };
                        if let Some(s) = ra {
                            h.insert("retry-after", s.to_string().parse().unwrap());
                        }
                        c.handle_head(now, id, status, &h);
                    },
                    // Each answer's body runs on from where it stopped (its source chosen
                    // by its first piece), now and then jumping ahead (a lost piece).
                    Op::Data(r, w, skip, n) => if let Some(id) = pick(r, &sent) {
                        let (src, pos) = cursors.entry(id).or_insert((usize::from(w), 0));
                        let src = &sources[*src];
                        if skip % 8 == 0 {
                            *pos = (*pos + skip % 200).min(src.len());
                        }
                        let end = (*pos + n).min(src.len());
                        c.handle_data(now, id, &src[*pos..end]);
                        *pos = end;
                    },
                    Op::End(r) => if let Some(id) = pick(r, &sent) { c.handle_end(now, id) },
                    Op::TransportError(r) => if let Some(id) = pick(r, &sent) { c.handle_transport_error(now, id) },
                    Op::Advance(s) => {
                        now += Duration::from_millis(u64::from(s) * 500);
                        c.handle_timeout(now);
                    }
                }
                let over = c.is_finished() || c.is_failed();
                while let Some(t) = c.poll_transmit() {
                    prop_assert!(!over, "sent {:?} after the task ended", t.kind);
                    if t.kind == RequestKind::Create {
                        prop_assert!(!id_known, "a create after the task's id was known");
                        let k = t.request.headers()["idempotency-key"].to_str().unwrap().to_owned();
                        prop_assert_eq!(key.get_or_insert(k.clone()), &k);
                    } else {
                        prop_assert!(c.accumulator().response_id().is_some());
                    }
                    sent.push(t);
                }
                while c.poll_event().is_some() {}
                id_known |= c.accumulator().response_id().is_some();
                prop_assert!(c.creates_sent() <= 5);
                if over {
                    prop_assert_eq!(c.poll_timeout(), None);
                }
            }
        }
    }
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

/// Found by `never_runs_the_task_twice`: a second head for one answer (a driver bug) turned
/// a live stream into a JSON body, and the connection's loss then re-sent the create for a
/// task whose id was known. A head is taken once; and a task whose id is known is read back,
/// never created again.
#[test]
fn a_second_head_for_one_answer_is_ignored() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_head(now, t.id, 503, &json_head());
    c.handle_data(now, t.id, b"data: {\"type\":\"response.in_progress\"");
    c.handle_transport_error(now, t.id);
    let next = c.poll_transmit().unwrap();
    assert_eq!(next.kind, RequestKind::Retrieve);
    assert_eq!(c.creates_sent(), 1);
}

/// Media types are case-insensitive (RFC 9110 §8.3.1): `Text/Event-Stream; charset=UTF-8`
/// is the stream, not a JSON body that fails to parse (which failed the task).
#[test]
fn the_stream_media_type_is_case_insensitive() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    let h = headers(&[("content-type", "Text/Event-Stream; charset=UTF-8")]);
    c.handle_head(now, t.id, 200, &h);
    c.handle_data(now, t.id, &server().to_sse());
    assert!(c.is_finished() && !c.is_failed());
    assert_eq!(c.accumulator().text(), "Hello");
}

/// A task whose stream was lost and whose stored response stays `in_progress`: [S]
/// "GET /v1/responses/{id} is the source of truth", read again every `poll_interval` — but
/// the policy's deadline ("No attempt starts after this instant") bounds the polls too, and
/// the client gives up with an error naming the task that is still running ([S] "giving up
/// ≠ task stopped (cancel explicitly)"). Polls used to go on past the deadline forever.
#[test]
fn polling_a_running_task_stops_at_the_deadline() {
    let now = Instant::now();
    let mut cfg = ClientConfig::new("http://h");
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

/// [S] "server_error (500,502,503,504) yes, exp. backoff + jitter": the attempt budget is
/// for one request's consecutive failures. A long task whose stored response is polled for
/// an hour, with a 503 now and then that the next read recovers from, used to fail after
/// its fifth hiccup in all (and each backoff grew as if the failures were consecutive).
#[test]
fn a_successful_read_resets_the_failure_budget() {
    let now = Instant::now();
    let mut cfg = ClientConfig::new("http://h");
    cfg.poll_interval = Duration::from_secs(1);
    let mut c = TaskClient::with_policy(
        cfg,
        CreateRequest::new("x"),
        RetryPolicy::new().with_seed(2),
    );
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_end(now, t.id);
    let running =
        json!({"id": "resp_1", "object": "response", "status": "in_progress", "output": []});
    let unavailable = json!({"error": {"type": "server_error", "code": "harness_unavailable", "message": "busy", "param": null}});
    let _ = events(&mut c);
    let mut t_now = now;
    for i in 0..30 {
        let get = c.poll_transmit().expect("the task is still followed");
        if i % 3 == 0 {
            answer_json(&mut c, t_now, &get, 503, &json_head(), &unavailable);
            match events(&mut c).as_slice() {
                [
                    TaskEvent::Retrying {
                        failures: 1, at, ..
                    },
                ] => {
                    assert!(*at <= t_now + Duration::from_millis(500)); // the first backoff
                }
                e => panic!("poll {i}: {e:?}"),
            }
        } else {
            answer_json(&mut c, t_now, &get, 200, &json_head(), &running);
        }
        t_now = c.poll_timeout().unwrap();
        c.handle_timeout(t_now);
    }
    assert!(!c.is_failed());
    // Consecutive failures still run out.
    for _ in 0..5 {
        let Some(get) = c.poll_transmit() else { break };
        answer_json(&mut c, t_now, &get, 503, &json_head(), &unavailable);
        if let Some(at) = c.poll_timeout() {
            t_now = at;
            c.handle_timeout(at);
        }
    }
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
