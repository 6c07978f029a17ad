//! errors.md §4 "Retrying" (spec/uhp-2026-08-11), as the task client applies it: the retry table,
//! `Retry-After`, and the budget of consecutive failures. Quotes: [spec] is
//! spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::{answer_json, client, created_with_id, events, headers, json_head, sse_head};
use harness_uhp::client::{CreateRequest, TaskClient, TaskClientConfig, TaskError, TaskEvent};
use harness_uhp::retry::{GiveUpReason, RetryPolicy};
use serde_json::json;

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

/// [S] "server_error (500,502,503,504) yes, exp. backoff + jitter": the attempt budget is
/// for one request's consecutive failures. A long task whose stored response is polled for
/// an hour, with a 503 now and then that the next read recovers from, used to fail after
/// its fifth hiccup in all (and each backoff grew as if the failures were consecutive).
#[test]
fn a_successful_read_resets_the_failure_budget() {
    let now = Instant::now();
    let mut cfg = TaskClientConfig::new("http://h");
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
