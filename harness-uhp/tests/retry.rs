//! Retry mechanics and protocol data. Quotes: [spec] spec/uhp-harnessclientprotocol.txt,
//! [S] research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use harness_uhp::ErrorObject;
use harness_uhp::error::{ERROR_CODES, error_code, error_type_statuses};
use harness_uhp::protocol::{
    Discovery, ObjectKind, PROTOCOL_VERSION, VERSIONS, endpoints, object_kind,
};
use harness_uhp::retry::{
    Backoff, Decision, Failure, GiveUpReason, IdempotencyKey, IdempotencyKeyError, RetryAfter,
    RetryClass, RetryPolicy, backoff_seconds, idempotency_key, is_retryable, retry_class,
};
use serde_json::json;

/// [S] "Idempotency-Key: <string ≤255>"; [spec] "key = idempotency_key()  # attach to every
/// attempt of the same task".
#[test]
fn idempotency_keys() {
    let keys: HashSet<String> = (0..1000).map(|_| idempotency_key().to_string()).collect();
    assert_eq!(keys.len(), 1000, "fresh keys are distinct");
    for k in &keys {
        assert!(k.starts_with("uhp-") && k.len() == 40, "{k}");
    }
    let long = IdempotencyKey::generate(&"p".repeat(1000));
    assert_eq!(long.as_str().len(), 255);
    let custom = IdempotencyKey::generate("acme");
    assert!(custom.as_str().starts_with("acme-"));
    let det = IdempotencyKey::from_random("t", [7; 16]);
    assert_eq!(det, IdempotencyKey::from_random("t", [7; 16]));
    assert_eq!(
        IdempotencyKey::new("x".repeat(256)),
        Err(IdempotencyKeyError::TooLong { len: 256 })
    );
    assert_eq!(
        IdempotencyKey::new("a b"),
        Err(IdempotencyKeyError::InvalidCharacter)
    );
    assert_eq!(
        IdempotencyKey::new(""),
        Err(IdempotencyKeyError::InvalidCharacter)
    );
    assert!(IdempotencyKey::new("x".repeat(255)).is_ok());
}

/// [S] retry table: "server_error (500,502,503,504) yes …; rate_limited yes after Retry-After;
/// quota_exhausted no; session_busy yes once in-flight task is terminal; invalid_request_error
/// no; authentication_error no; … preview_failed (502) worth retrying, preview_unavailable
/// (501) not". [spec] "is_retryable(code="quota_exhausted")  # False".
#[test]
fn the_retry_table() {
    use RetryClass::*;
    type Case = (
        Option<&'static str>,
        Option<&'static str>,
        Option<u16>,
        RetryClass,
    );
    let cases: &[Case] = &[
        (Some("session_busy"), None, None, WhenSessionIdle),
        (
            Some("session_busy"),
            Some("invalid_request_error"),
            Some(409),
            WhenSessionIdle,
        ),
        (
            Some("rate_limited"),
            Some("rate_limit_error"),
            Some(429),
            AfterRetryAfter,
        ),
        (
            Some("quota_exhausted"),
            Some("rate_limit_error"),
            Some(429),
            Never,
        ),
        (Some("quota_exhausted"), None, None, Never),
        (
            Some("harness_unavailable"),
            Some("server_error"),
            Some(503),
            Backoff,
        ),
        (
            Some("preview_failed"),
            Some("server_error"),
            Some(502),
            Backoff,
        ),
        (
            Some("preview_unavailable"),
            Some("server_error"),
            Some(501),
            Never,
        ),
        (
            Some("invalid_input"),
            Some("invalid_request_error"),
            Some(400),
            Never,
        ),
        (
            Some("invalid_credential"),
            Some("authentication_error"),
            Some(401),
            Never,
        ),
        (
            Some("insufficient_scope"),
            Some("permission_error"),
            Some(403),
            Never,
        ),
        (
            Some("provider_error"),
            Some("harness_error"),
            Some(200),
            Never,
        ),
        (Some("cancelled"), None, None, Never),
        (
            Some("acme_overloaded"),
            Some("server_error"),
            Some(500),
            Backoff,
        ),
        (Some("acme_thing"), None, Some(400), Never),
        (None, Some("server_error"), None, Backoff),
        (None, None, Some(500), Backoff),
        (None, None, Some(502), Backoff),
        (None, None, Some(503), Backoff),
        (None, None, Some(504), Backoff),
        (None, None, Some(501), Never),
        (None, None, Some(505), Never),
        (None, None, Some(429), AfterRetryAfter),
        (None, None, Some(409), Never),
        // "server_error (500,502,503,504) yes": the row names its statuses; a server_error
        // answered with 501 (not implemented) is not in it, whatever its code.
        (
            Some("acme_not_built"),
            Some("server_error"),
            Some(501),
            Never,
        ),
        (None, Some("server_error"), Some(501), Never),
        (None, Some("server_error"), Some(503), Backoff),
        (None, None, None, Never),
    ];
    for (code, ty, status, want) in cases {
        assert_eq!(
            retry_class(*code, *ty, *status),
            *want,
            "{code:?} {ty:?} {status:?}"
        );
        assert_eq!(is_retryable(*code, *ty, *status), *want != Never);
    }
}

/// [spec] "backoff_seconds(2, retry_after=30)  # 30.0 — the server's own answer wins"; full
/// jitter within min(cap, base·2^n); infinite, negative or absurd values clamped, no panic.
#[test]
fn backoff_with_full_jitter_and_clamping() {
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(backoff_seconds(2, Some(30.0), &mut rng), 30.0);
    assert_eq!(backoff_seconds(2, Some(f64::INFINITY), &mut rng), 900.0);
    assert_eq!(backoff_seconds(2, Some(-5.0), &mut rng), 0.0);
    assert_eq!(backoff_seconds(2, Some(f64::NEG_INFINITY), &mut rng), 0.0);
    assert!(backoff_seconds(2, Some(f64::NAN), &mut rng) <= 2.0); // NaN says nothing: backoff
    for attempt in [0, 1, 5, 31, 32, 63, 64, 1100, u32::MAX] {
        let d = backoff_seconds(attempt, None, &mut rng);
        let ceiling = (0.5 * 2f64.powi(attempt.min(1000) as i32)).min(30.0);
        assert!(
            (0.0..ceiling).contains(&d) || d == 0.0,
            "attempt {attempt}: {d}"
        );
    }
    // Full jitter: spread over [0, ceiling), deterministic for a given source.
    let b = Backoff::default();
    let mut src = fastrand::Rng::with_seed(9);
    let draws: Vec<f64> = (0..2000)
        .map(|_| b.delay(3, None, &mut src).as_secs_f64())
        .collect();
    assert!(draws.iter().all(|d| (0.0..4.0).contains(d)));
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    assert!((1.7..2.3).contains(&mean), "mean {mean}");
    let mut fixed = || 0.5;
    assert_eq!(b.delay(3, None, &mut fixed), Duration::from_secs(2));
    let mut broken = || 7.0; // a source outside [0, 1) cannot stretch the delay
    assert_eq!(b.delay(3, None, &mut broken), Duration::ZERO);

    // A zero base means no wait, at every attempt (0 · 2^n is 0, not NaN read as the cap).
    let none = Backoff {
        base: Duration::ZERO,
        ..Backoff::default()
    };
    for attempt in [0, 3, 1023, 1024, 5000, u32::MAX] {
        assert_eq!(
            none.delay(attempt, None, &mut fixed),
            Duration::ZERO,
            "{attempt}"
        );
    }
    // The largest cap: the ceiling is reached, never wrapped to zero.
    let huge = Backoff {
        cap: Duration::MAX,
        ..Backoff::default()
    };
    let mut almost_one = || 0.999_999_999_999;
    assert!(huge.delay(u32::MAX, None, &mut almost_one) > Duration::from_secs(1 << 62));
}

/// RFC 9110 Retry-After: delay-seconds or an HTTP-date.
#[test]
fn retry_after_header() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_786_400_000);
    assert_eq!(
        RetryAfter::parse("120"),
        Some(RetryAfter::Delay(Duration::from_secs(120)))
    );
    assert_eq!(
        RetryAfter::parse("99999999999999999999999")
            .unwrap()
            .delay_from(now),
        Duration::from_secs(u64::MAX)
    );
    let date = httpdate::fmt_http_date(now + Duration::from_secs(42));
    assert_eq!(
        RetryAfter::parse(&date).unwrap().delay_from(now),
        Duration::from_secs(42)
    );
    let past = httpdate::fmt_http_date(now - Duration::from_secs(42));
    assert_eq!(
        RetryAfter::parse(&past).unwrap().delay_from(now),
        Duration::ZERO
    );
    for bad in ["", "-1", "1.5", "soon", "Fri, 99 Foo 2026"] {
        assert_eq!(RetryAfter::parse(bad), None, "{bad}");
    }
}

/// The policy: the same key on every attempt; the server's delay wins; give-up reasons.
#[test]
fn retry_policy() {
    let now = Instant::now();
    let mut p = RetryPolicy::new().with_seed(3).with_max_attempts(4);
    let key = p.idempotency_key().clone();
    let s503 = Failure::Http {
        status: 503,
        error: None,
        retry_after: None,
    };
    for _ in 0..3 {
        match p.on_failure(now, &s503) {
            Decision::RetryAt(at) => assert!(at >= now && at < now + Duration::from_secs(30)),
            d => panic!("{d:?}"),
        }
        assert_eq!(p.idempotency_key(), &key);
    }
    assert_eq!(
        p.on_failure(now, &s503),
        Decision::GiveUp(GiveUpReason::AttemptsExhausted)
    );

    let mut p = RetryPolicy::new();
    let quota = Failure::Http {
        status: 429,
        error: Some(
            ErrorObject::new("quota_exhausted", "Quota exhausted.").with_type("rate_limit_error"),
        ),
        retry_after: Some(Duration::from_secs(1)),
    };
    assert_eq!(
        p.on_failure(now, &quota),
        Decision::GiveUp(GiveUpReason::NotRetryable)
    );

    // session_busy: detail.retry_after_ms when the server knows; Retry-After wins over it.
    let mut busy_err = ErrorObject::new("session_busy", "Busy.");
    busy_err.detail = Some(json!({"retry_after_ms": 1500}));
    let busy = Failure::Http {
        status: 409,
        error: Some(busy_err.clone()),
        retry_after: None,
    };
    let mut p = RetryPolicy::new();
    assert_eq!(
        p.on_failure(now, &busy),
        Decision::RetryAt(now + Duration::from_millis(1500))
    );
    let both = Failure::Http {
        status: 409,
        error: Some(busy_err),
        retry_after: Some(Duration::from_secs(3)),
    };
    assert_eq!(
        p.on_failure(now, &both),
        Decision::RetryAt(now + Duration::from_secs(3))
    );

    let mut p = RetryPolicy::new().with_deadline(now + Duration::from_secs(10));
    let late = Failure::Http {
        status: 429,
        error: None,
        retry_after: Some(Duration::from_secs(60)),
    };
    assert_eq!(
        p.on_failure(now, &late),
        Decision::GiveUp(GiveUpReason::DeadlinePassed)
    );
    // "Retry-After always wins", clamped to max_server_delay; when even that cannot be
    // represented as an instant (max_server_delay = Duration::MAX, Retry-After saturated),
    // the answer is never "retry now".
    let mut p = RetryPolicy::new().with_backoff(Backoff {
        max_server_delay: Duration::MAX,
        ..Backoff::default()
    });
    let forever = Failure::Http {
        status: 429,
        error: None,
        retry_after: RetryAfter::parse("99999999999999999999999")
            .map(|r| r.delay_from(SystemTime::UNIX_EPOCH)),
    };
    assert_eq!(
        p.on_failure(now, &forever),
        Decision::GiveUp(GiveUpReason::DelayTooLong)
    );
    // A transport failure (no answer) is retried: with the key, safely.
    assert!(matches!(
        RetryPolicy::new().on_failure(now, &Failure::Transport),
        Decision::RetryAt(_)
    ));
}

/// [S] error codes and the statuses they are reported under; 501 is not a server_error status.
#[test]
fn error_codes_and_types() {
    assert_eq!(error_code("session_busy").unwrap().status, 409);
    assert_eq!(error_code("preview_unavailable").unwrap().status, 501);
    assert_eq!(error_code("quota_exhausted").unwrap().status, 429);
    assert_eq!(error_code("environment_busy").unwrap().since, "2026-09-28");
    assert!(error_code("acme_x").is_none());
    assert_eq!(
        error_type_statuses("server_error"),
        Some(&[500u16, 502, 503, 504][..])
    );
    assert!(!error_type_statuses("server_error").unwrap().contains(&501));
    let names: HashSet<_> = ERROR_CODES.iter().map(|c| c.code).collect();
    assert_eq!(names.len(), ERROR_CODES.len());
    assert_eq!(
        ERROR_CODES
            .iter()
            .filter(|c| c.since == "2026-08-11")
            .count(),
        24
    );
    let e: ErrorObject = serde_json::from_value(
        json!({"type": "invalid_request_error", "code": "unsupported_protocol_version",
        "message": "m", "param": null, "detail": {"supported": ["2026-08-11", "2026-09-12"]}}),
    )
    .unwrap();
    assert_eq!(e.supported_versions(), ["2026-08-11", "2026-09-12"]);
}

fn discovery(class: &str, caps: serde_json::Value) -> Discovery {
    serde_json::from_value(
        json!({"object": "uhp.discovery", "protocol": "uhp", "versions": ["2026-08-11"],
        "default_version": "2026-08-11", "conformance_class": class, "capabilities": caps,
        "implementation": {"name": "x", "version": "1"}}),
    )
    .unwrap()
}

/// [S] discovery: "Class ⇒ capabilities: core {streaming, sessions, cancellation}; extended +
/// {files_input, files_output, session_listing}; full + {harness_management,
/// session_sharing}"; "absent key = false"; default_version ∈ versions.
#[test]
fn discovery_document_check() {
    let full = json!({"streaming": true, "sessions": true, "cancellation": true, "files_input": true,
        "files_output": true, "session_listing": true, "harness_management": true,
        "session_sharing": true, "idempotency": true});
    assert!(discovery("full", full.clone()).check().is_empty());
    let core = json!({"streaming": true, "sessions": true, "cancellation": true});
    assert!(discovery("core", core.clone()).check().is_empty());
    let d = discovery("extended", core);
    assert_eq!(d.check().len(), 3, "{:?}", d.check());
    assert!(!d.has("files_input") && !d.has("idempotency"));
    let mut d = discovery("full", full);
    d.default_version = "2026-09-12".into();
    assert_eq!(d.check().len(), 1);
    d.versions = vec!["2026-08-11".into(), "2026-09-12".into()];
    assert!(d.check().is_empty());
    assert_eq!(d.negotiate(VERSIONS), Some("2026-09-12"));
    assert_eq!(d.negotiate(&[PROTOCOL_VERSION]), Some("2026-08-11"));
    assert_eq!(discovery("platinum", json!({})).check().len(), 1);
    let mut bad = discovery(
        "core",
        json!({"streaming": true, "sessions": true, "cancellation": "yes"}),
    );
    assert!(bad.check().len() >= 2);
    bad.protocol = "mcp".into();
    assert!(bad.check().iter().any(|p| p.contains("protocol")));
}

#[test]
fn endpoints_and_id_prefixes() {
    assert_eq!(endpoints::DISCOVERY, "/v1/uhp");
    assert_eq!(endpoints::response("resp_1"), "/v1/responses/resp_1");
    assert_eq!(
        endpoints::response_cancel("resp_1"),
        "/v1/responses/resp_1/cancel"
    );
    assert_eq!(endpoints::session_delete("hsess1"), "/v1/traces/hsess1");
    assert_eq!(
        endpoints::file_content("cntr_1", "file_2"),
        "/v1/containers/cntr_1/files/file_2/content"
    );
    assert_eq!(object_kind("resp_7f3a"), Some(ObjectKind::Response));
    assert_eq!(object_kind("hsess7e78"), Some(ObjectKind::Session));
    assert_eq!(object_kind("chrn_1"), Some(ObjectKind::Harness));
    assert_eq!(object_kind("msg_1"), None);
}
