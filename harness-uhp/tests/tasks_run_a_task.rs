//! tasks.md §1 "Run a task" (spec/uhp-2026-08-11), as the task client does it: the create request,
//! its headers and body, and its answer, streamed or one JSON response; and the builders of the
//! other requests. Quotes: [spec] is spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest
//! in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use common::{answer_json, client, created_with_id, events, headers, json_head, server, sse_head};
use harness_uhp::client::{
    CreateRequest, RequestKind, TaskClient, TaskClientConfig, TaskError, TaskEvent, requests,
};
use harness_uhp::retry::idempotency_key;
use serde_json::{Value, json};

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
    let cfg = TaskClientConfig::new("http://h");
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
    assert!(requests::retrieve(&TaskClientConfig::new("not a url\n"), "x").is_err());
}

/// Ids are opaque strings chosen by the server; in a path they are one segment (RFC 3986
/// §3.3), so `/`, `?`, `#` and dot-segments in an id are escaped: an id cannot steer a
/// cancel (`POST /v1/responses/{id}/cancel`) to another endpoint, such as
/// `/v1/sessions/{id}/cancel`, which cancels a whole session.
#[test]
fn ids_are_escaped_as_one_path_segment() {
    let cfg = TaskClientConfig::new("http://h");
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

/// An over-large JSON body is refused, not buffered without bound.
#[test]
fn body_limit() {
    let now = Instant::now();
    let mut cfg = TaskClientConfig::new("http://h");
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
