//! The server against lifecycle.md (spec/uhp-2026-08-11): §1 version negotiation, §2
//! capability discovery, §3 task states, §4 sessions, §5 concurrency.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use std::time::Duration;

use http::HeaderMap;
use serde_json::json;
use server_rig::{ALICE, Rig};

/// §2: "a server MUST serve this endpoint without a bearer token"; "MUST NOT contain anything
/// principal-specific"; "MUST report false for a capability it does not implement, rather
/// than omitting it"; the class agrees with the capabilities.
#[test]
fn discovery_is_served_without_a_token_and_is_the_same_for_everyone() {
    let mut r = Rig::new();
    let anon = r.send_with("GET", "/v1/uhp", &HeaderMap::new(), b"").now();
    assert_eq!(anon.status, 200);
    let alice = r.call("GET", "/v1/uhp", None);
    assert_eq!(anon.body, alice.body, "nothing principal-specific");
    let d = anon.json();
    assert_eq!(d["object"], "uhp.discovery");
    assert_eq!(d["protocol"], "uhp");
    assert!(
        d["versions"]
            .as_array()
            .unwrap()
            .contains(&d["default_version"])
    );
    let caps = d["capabilities"].as_object().unwrap();
    for c in harness_uhp::protocol::CAPABILITIES {
        assert!(caps[*c].is_boolean(), "{c} reported");
    }
    let doc: harness_uhp::protocol::Discovery = serde_json::from_value(d).unwrap();
    assert!(doc.check().is_empty(), "{:?}", doc.check());
}

/// §1: absent header → the server's default, stated; a served version honoured; any other
/// refused 400 `unsupported_protocol_version` with `detail.supported`; "Every response,
/// including errors, MUST carry the version actually used".
#[test]
fn version_negotiation() {
    let mut r = Rig::new();
    let a = r.send_with("GET", "/v1/uhp", &HeaderMap::new(), b"").now();
    assert_eq!(a.header("uhp-version"), "2026-08-11");
    let mut h = HeaderMap::new();
    h.insert("uhp-version", "2026-08-11".parse().unwrap());
    let a = r.send_with("GET", "/v1/uhp", &h, b"").now();
    assert_eq!((a.status, a.header("uhp-version")), (200, "2026-08-11"));
    for bad in ["1999-01-01", "2026-10-04", "", "garbage"] {
        h.insert("uhp-version", bad.parse().unwrap());
        let a = r.send_with("GET", "/v1/harnesses", &h, b"").now();
        assert_eq!(a.status, 400, "{bad}");
        assert_eq!(a.code(), "unsupported_protocol_version");
        assert_eq!(
            a.json()["error"]["detail"]["supported"],
            json!(["2026-08-11"])
        );
        assert_eq!(a.header("uhp-version"), "2026-08-11", "errors carry it too");
    }
    // Every other answer too: a 401, a 404, a 200.
    for (token, target) in [
        ("nope", "/v1/harnesses"),
        (ALICE, "/v1/responses/resp_x"),
        (ALICE, "/v1/models"),
    ] {
        let a = r.send_as(token, "GET", target, None).now();
        assert_eq!(a.header("uhp-version"), "2026-08-11", "{target}");
    }
}

/// §3: "A server MUST NOT transition out of a terminal state"; a cancelled task reports
/// `cancelled`, not `failed`; output produced before the end is retained.
#[test]
fn terminal_states_never_change_and_keep_their_output() {
    let mut r = Rig::new();
    let (id, _) = r.start(json!({"input": "count"}));
    r.text(&id, "1\n2\n");
    let c = r.call("POST", &format!("/v1/responses/{id}/cancel"), None);
    assert_eq!(c.json()["status"], "cancelled");
    assert_eq!(r.stops, vec![id.clone()], "the turn is stopped");
    // The agent's late deltas and its end change nothing.
    let now = r.now();
    assert!(r.server.turn_text(now, &id, "3\n").is_err());
    r.end(&id);
    let got = r.call("GET", &format!("/v1/responses/{id}"), None).json();
    assert_eq!(got["status"], "cancelled");
    assert_eq!(
        got["output"][0]["content"][0]["text"], "1\n2\n",
        "partial output kept"
    );
    assert_eq!(got["output"][0]["status"], "incomplete");
    assert!(got["error"].is_null(), "a cancel is not an error");
}

/// §3: "`incomplete` MUST be used when a budget stopped the work"; tasks.md §1.1
/// `timeout_seconds` / `max_step`: "MUST report incomplete".
#[test]
fn budgets_end_a_task_incomplete() {
    let mut r = Rig::new();
    let (id, _) = r.start(json!({"input": "slow", "timeout_seconds": 5}));
    r.text(&id, "partial");
    r.advance(Duration::from_secs(4));
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).json()["status"],
        "in_progress"
    );
    r.advance(Duration::from_secs(2));
    let got = r.call("GET", &format!("/v1/responses/{id}"), None).json();
    assert_eq!(got["status"], "incomplete");
    assert_eq!(got["incomplete_details"]["reason"], "timeout_seconds");
    assert!(r.stops.contains(&id));

    let (id, _) = r.start(json!({"input": "loop", "max_step": 2}));
    let now = r.now();
    assert!(r.server.turn_step(now, &id).is_ok());
    assert!(r.server.turn_step(now, &id).is_ok());
    assert!(
        r.server.turn_step(now, &id).is_err(),
        "the third step is past the budget"
    );
    r.drain();
    let got = r.call("GET", &format!("/v1/responses/{id}"), None).json();
    assert_eq!(
        (
            got["status"].as_str(),
            got["incomplete_details"]["reason"].as_str()
        ),
        (Some("incomplete"), Some("max_step"))
    );

    // The server's own bound on any task (security.md §5).
    let mut cfg = server_rig::config();
    cfg.max_task_duration = Duration::from_secs(60);
    let mut r = Rig::with(cfg);
    let (id, _) = r.start(json!({"input": "forever"}));
    r.advance(Duration::from_secs(61));
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).json()["status"],
        "incomplete"
    );
}

/// §4: the session id is reported; the same configured harness is kept ("MUST fail such a
/// request with 409 harness_mismatch"); §5: "A second task for a busy session MUST fail with
/// 409 and code session_busy", while different sessions run concurrently.
#[test]
fn sessions_keep_their_harness_and_run_one_task_at_a_time() {
    let mut r = Rig::new();
    let harnesses = r.call("GET", "/v1/harnesses", None).json();
    let faq = harnesses["harnesses"][0]["id"].as_str().unwrap().to_owned();
    let echo = harnesses["harnesses"][1]["id"].as_str().unwrap().to_owned();
    let (first, _) = r.start(json!({"input": "one", "metadata": {"harness_id": faq}}));
    let (other, _) = r.start(json!({"input": "another session"}));
    assert_eq!(
        r.server.running_tasks(),
        2,
        "different sessions run concurrently"
    );
    let busy = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "two", "previous_response_id": first})),
    );
    assert_eq!((busy.status, busy.code().as_str()), (409, "session_busy"));
    assert!(
        busy.json()["error"]["detail"]
            .get("retry_after_ms")
            .is_none(),
        "omitted, not guessed"
    );
    r.end(&first);
    r.end(&other);
    let mismatch = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "two", "previous_response_id": first, "metadata": {"harness_id": echo}})),
    );
    assert_eq!(
        (mismatch.status, mismatch.code().as_str()),
        (409, "harness_mismatch")
    );
    let (second, turn) = r.start(json!({"input": "two", "previous_response_id": first}));
    let a = r
        .call("GET", &format!("/v1/responses/{first}"), None)
        .json();
    let b = r
        .call("GET", &format!("/v1/responses/{second}"), None)
        .json();
    assert_eq!(a["metadata"]["session_id"], b["metadata"]["session_id"]);
    assert_eq!(b["metadata"]["harness_id"], faq.as_str());
    assert_eq!(turn.base, "faq");
}

/// §4: "A server that expires sessions MUST report 404 with code: session_expired on
/// continuation, distinguishable from session_not_found."
#[test]
fn an_expired_session_says_so() {
    let mut cfg = server_rig::config();
    cfg.max_sessions_per_principal = 2;
    let mut r = Rig::with(cfg);
    let a = r.task(json!({"input": "a"}), "x");
    r.advance(Duration::from_secs(1));
    let _b = r.task(json!({"input": "b"}), "x");
    r.advance(Duration::from_secs(1));
    let _c = r.task(json!({"input": "c"}), "x"); // the least recently used, a, expires
    let e = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "more", "previous_response_id": a["id"]})),
    );
    assert_eq!((e.status, e.code().as_str()), (404, "session_expired"));
    // Its responses stay readable; a deleted session's do not (sessions.md §6).
    assert_eq!(
        r.call(
            "GET",
            &format!("/v1/responses/{}", a["id"].as_str().unwrap()),
            None
        )
        .status,
        200
    );
    let sid = a["metadata"]["session_id"].as_str().unwrap();
    assert_eq!(
        r.call("GET", &format!("/v1/sessions/{sid}"), None).status,
        404
    );
}
