//! The server against errors.md §1–§3 (the envelope, types, codes), architecture.md §5 and
//! security.md §1–§2, §8 (credentials, object scope, error hygiene), with hostile input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use harness_uhp::server::Principal;
use http::HeaderMap;
use serde_json::json;
use server_rig::{ALICE, BOB, Rig};

/// errors.md §1: "Every non-2xx response MUST have this body": `type`, `code`, `message`,
/// `param`, `detail`; `type` agrees with the status (§2); no stack trace or path in messages.
#[test]
fn every_refusal_is_an_envelope() {
    let mut r = Rig::new();
    let mut h = HeaderMap::new();
    h.insert("authorization", format!("Bearer {ALICE}").parse().unwrap());
    let cases: Vec<(&str, &str, &[u8], u16)> = vec![
        ("GET", "/v1/harnesses/chrn_nope", b"", 404),
        ("GET", "/v1/responses/resp_nope", b"", 404),
        ("GET", "/v1/nothing/here", b"", 404),
        ("GET", "/nothing", b"", 404),
        ("PATCH", "/v1/responses", b"", 405),
        ("POST", "/v1/responses", b"{not json", 400),
        ("POST", "/v1/responses", b"[1,2]", 400),
        ("POST", "/v1/responses", b"\xff\xfe", 400),
        ("POST", "/v1/harnesses", b"{\"base\":\"nope\"}", 422),
        ("GET", "/v1/sessions/hsess_nope", b"", 404),
    ];
    for (m, p, body, status) in cases {
        let a = r.send_with(m, p, &h, body).now();
        assert_eq!(a.status, status, "{m} {p}");
        let e = &a.json()["error"];
        for f in ["type", "code", "message", "param", "detail"] {
            assert!(e.get(f).is_some(), "{m} {p}: {f}");
        }
        let statuses = harness_uhp::error::error_type_statuses(e["type"].as_str().unwrap());
        assert!(
            statuses.is_none_or(|s| s.contains(&status)) || status == 405,
            "{m} {p}: {e}"
        );
        let msg = e["message"].as_str().unwrap();
        for leak in ["Traceback", "panicked", "/home", "/work", ".rs:", "\n"] {
            assert!(!msg.contains(leak), "{m} {p}: {msg}");
        }
        assert_eq!(a.header("content-type"), "application/json");
    }
    assert_eq!(
        r.send_with("PATCH", "/v1/responses", &h, b"")
            .now()
            .header("allow"),
        "POST"
    );
}

/// architecture.md §5 / security.md §1: "MUST reject an absent, malformed, or unknown token
/// with 401" — every endpoint but discovery — without telling the cases apart beyond
/// missing-vs-invalid; revocation takes effect for the next request.
#[test]
fn credentials() {
    let mut r = Rig::new();
    let anon = r
        .send_with("GET", "/v1/harnesses", &HeaderMap::new(), b"")
        .now();
    assert_eq!(
        (anon.status, anon.code().as_str()),
        (401, "missing_credential")
    );
    assert_eq!(anon.json()["error"]["type"], "authentication_error");
    assert_eq!(anon.header("www-authenticate"), "Bearer");
    let mut messages = Vec::new();
    for token in [
        "Bearer nope",
        "Bearer ",
        "Basic YWxpY2U6eA==",
        "bearer",
        "Bearer alice-token-x",
        "Bearer alice",
    ] {
        let mut h = HeaderMap::new();
        h.insert("authorization", token.parse().unwrap());
        let a = r.send_with("GET", "/v1/harnesses", &h, b"").now();
        assert_eq!(
            (a.status, a.code().as_str()),
            (401, "invalid_credential"),
            "{token}"
        );
        messages.push(a.json()["error"]["message"].clone());
    }
    messages.dedup();
    assert_eq!(messages.len(), 1, "one message whatever was wrong");
    // Every authenticated endpoint, even unknown paths, before anything is looked up.
    for (m, p) in [
        ("POST", "/v1/responses"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/containers/c/files/f/content"),
        ("GET", "/v1/zzz"),
    ] {
        assert_eq!(
            r.send_with(m, p, &HeaderMap::new(), b"{}").now().status,
            401,
            "{m} {p}"
        );
    }
    // Nothing echoes a credential.
    let a = r
        .send_as("Bearer-secret-123", "GET", "/v1/harnesses", None)
        .now();
    assert!(!String::from_utf8_lossy(&a.body).contains("secret-123"));
    assert!(r.server.revoke_api_key(ALICE));
    assert_eq!(r.call("GET", "/v1/harnesses", None).status, 401);
}

/// security.md §2: "A request for an object outside the caller's scope MUST return 404,
/// never 403" — on every operation: read, continue, cancel, delete, download, inspect.
#[test]
fn another_principals_objects_are_not_found() {
    let mut r = Rig::new();
    let done = r.task(json!({"input": "alice's secret"}), "alice's answer");
    let rid = done["id"].as_str().unwrap();
    let sid = done["metadata"]["session_id"].as_str().unwrap();
    let (running, _) = r.start(json!({"input": "alice's running task"}));
    let created = r
        .call(
            "POST",
            "/v1/harnesses",
            Some(json!({"base": "faq", "name": "alice's"})),
        )
        .json();
    let hid = created["id"].as_str().unwrap();
    let probes = [
        ("GET", format!("/v1/responses/{rid}")),
        ("GET", format!("/v1/responses/{rid}/input_items")),
        ("POST", format!("/v1/responses/{running}/cancel")),
        ("DELETE", format!("/v1/responses/{rid}")),
        ("GET", format!("/v1/sessions/{sid}")),
        ("GET", format!("/v1/sessions/{sid}/turns")),
        ("GET", format!("/v1/sessions/{sid}/files")),
        ("GET", format!("/v1/sessions/{sid}/files/archive")),
        ("POST", format!("/v1/sessions/{sid}/cancel")),
        ("POST", format!("/v1/sessions/{sid}/share")),
        ("DELETE", format!("/v1/traces/{sid}")),
        ("GET", format!("/v1/harnesses/{hid}")),
        ("PUT", format!("/v1/harnesses/{hid}")),
        ("DELETE", format!("/v1/harnesses/{hid}")),
    ];
    for (m, p) in &probes {
        let a = r.send_as(BOB, m, p, Some(json!({"name": "x"}))).now();
        assert_eq!(a.status, 404, "{m} {p}");
        let text = String::from_utf8_lossy(&a.body);
        assert!(!text.contains("alice"), "{m} {p}: {text}");
    }
    let cont = r
        .send_as(
            BOB,
            "POST",
            "/v1/responses",
            Some(json!({"input": "x", "previous_response_id": rid})),
        )
        .now();
    assert_eq!(cont.status, 404);
    let as_harness = r
        .send_as(
            BOB,
            "POST",
            "/v1/responses",
            Some(json!({"input": "x", "metadata": {"harness_id": hid}})),
        )
        .now();
    assert_eq!(as_harness.code(), "harness_not_found");
    // Alice's objects are untouched.
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{running}"), None)
            .json()["status"],
        "in_progress"
    );
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{rid}"), None).status,
        200
    );
}

/// security.md §5 "A server MUST bound …": request bodies (`413 file_too_large`), running
/// tasks (`503 harness_unavailable`), tasks per session (`429 quota_exhausted`).
#[test]
fn bounds() {
    let mut cfg = server_rig::config();
    cfg.max_body_bytes = 1024;
    cfg.max_running_tasks = 1;
    cfg.max_turns_per_session = 1;
    let mut r = Rig::with(cfg);
    let big = json!({"input": "x".repeat(2000)});
    let a = r.call("POST", "/v1/responses", Some(big));
    assert_eq!((a.status, a.code().as_str()), (413, "file_too_large"));
    assert_eq!(r.server.body_too_large().status(), 413);
    let (first, _) = r.start(json!({"input": "a"}));
    let a = r.call("POST", "/v1/responses", Some(json!({"input": "b"})));
    assert_eq!((a.status, a.code().as_str()), (503, "harness_unavailable"));
    assert_eq!(a.json()["error"]["type"], "server_error");
    r.end(&first);
    let a = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "c", "previous_response_id": first})),
    );
    assert_eq!((a.status, a.code().as_str()), (429, "quota_exhausted"));
}

/// security.md:90 "A server SHOULD rate-limit task creation per principal": one caller at its
/// share of running tasks is told `429 rate_limited` with `Retry-After` (errors.md:84 "`Retry-After`
/// SHOULD be set"), while another caller still runs; the host-wide cap still answers `503`; a
/// task that ends frees its caller's slot.
#[test]
fn one_caller_cannot_take_every_running_slot() {
    let mut cfg = server_rig::config();
    cfg.max_running_tasks = 3;
    cfg.max_running_tasks_per_principal = 2;
    let mut r = Rig::with(cfg);
    let task = json!({"input": "x", "background": true});
    let (a1, _) = r.start(json!({"input": "a1"}));
    let (_a2, _) = r.start(json!({"input": "a2"}));
    // Alice at her cap: refused, rate-limited, with Retry-After, nothing started.
    let a = r.call("POST", "/v1/responses", Some(task.clone()));
    assert_eq!((a.status, a.code().as_str()), (429, "rate_limited"));
    assert_eq!(a.json()["error"]["type"], "rate_limit_error");
    assert_eq!(a.json()["error"]["detail"]["max_running_tasks"], 2);
    assert!(a.header("retry-after").parse::<u64>().is_ok_and(|s| s >= 1));
    assert_eq!(r.server.running_tasks(), 2);
    // Bob is not Alice: his task runs.
    let b = r
        .send_as(BOB, "POST", "/v1/responses", Some(task.clone()))
        .now();
    assert_eq!(b.status, 200, "{}", String::from_utf8_lossy(&b.body));
    assert_eq!(r.server.running_tasks_of(&Principal::new("bob")), 1);
    // The host is full now: Bob, under his own share, gets the host-wide answer.
    let b = r
        .send_as(BOB, "POST", "/v1/responses", Some(task.clone()))
        .now();
    assert_eq!((b.status, b.code().as_str()), (503, "harness_unavailable"));
    // One of Alice's tasks ends: she may start another.
    r.end(&a1);
    assert_eq!(r.server.running_tasks_of(&Principal::new("alice")), 1);
    let a = r.call("POST", "/v1/responses", Some(task));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(r.server.running_tasks_of(&Principal::new("alice")), 2);
}
