//! The server against sessions.md (spec/uhp-2026-08-11): §1 continuing, §2 listing, §3
//! inspecting, §4 cancelling, §5 sharing, §6 deleting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use harness_core::event::EventBody;
use serde_json::json;
use server_rig::{BOB, Rig};

/// §1: the same session and `session_id`, the earlier tasks as the harness's context, the
/// response continued named in `previous_response_id`; an unknown one is `404
/// response_not_found`.
#[test]
fn continuing_gives_the_agent_the_conversation() {
    let mut r = Rig::new();
    let first = r.task(json!({"input": "My name is Ada."}), "Hello Ada.");
    let rid = first["id"].as_str().unwrap();
    let (second, turn) = r.start(json!({"input": "What is my name?", "previous_response_id": rid}));
    let history: Vec<String> = turn
        .start
        .history
        .iter()
        .map(|e| match &e.body {
            EventBody::Input(m) | EventBody::Output(m) => format!("{}: {}", m.role, m.text()),
            _ => String::new(),
        })
        .collect();
    assert_eq!(history, ["user: My name is Ada.", "assistant: Hello Ada."]);
    assert_eq!(
        turn.start.session_uid,
        first["metadata"]["session_id"].as_str().unwrap()
    );
    r.end(&second);
    let v = r
        .call("GET", &format!("/v1/responses/{second}"), None)
        .json();
    assert_eq!(v["previous_response_id"], rid);
    let a = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "x", "previous_response_id": "resp_nope"})),
    );
    assert_eq!((a.status, a.code().as_str()), (404, "response_not_found"));
    assert_eq!(a.json()["error"]["param"], "previous_response_id");
}

/// §2: cursor pagination, "MUST return next_cursor: null on the last page" — also when the
/// last page is exactly full.
#[test]
fn listing_pages_end_with_a_null_cursor() {
    let mut r = Rig::new();
    for i in 0..4 {
        r.task(json!({"input": format!("task {i}")}), "ok");
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = r
            .call(
                "GET",
                &format!("/v1/sessions?limit=2&cursor={cursor}"),
                None,
            )
            .json();
        let sessions = page["sessions"].as_array().unwrap();
        assert!(sessions.len() <= 2);
        for s in sessions {
            assert_eq!(s["object"], "session");
            seen.push(s["title"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => {
                assert!(page["next_cursor"].is_null());
                break;
            }
        }
    }
    assert_eq!(
        seen,
        ["task 3", "task 2", "task 1", "task 0"],
        "newest first, each once"
    );
    let bad = r.call("GET", "/v1/sessions?limit=0", None);
    assert_eq!(bad.status, 400);
    assert_eq!(
        r.send_as(BOB, "GET", "/v1/sessions", None).now().json()["sessions"],
        json!([])
    );
}

/// §3: a session and its ordered turns, each naming its response.
#[test]
fn inspecting_a_session() {
    let mut r = Rig::new();
    let a = r.task(json!({"input": "one"}), "1");
    let b = r.task(
        json!({"input": "two", "previous_response_id": a["id"]}),
        "2",
    );
    let sid = a["metadata"]["session_id"].as_str().unwrap();
    let s = r.call("GET", &format!("/v1/sessions/{sid}"), None).json();
    assert_eq!(
        (s["id"].as_str(), s["status"].as_str()),
        (Some(sid), Some("completed"))
    );
    let turns = r
        .call("GET", &format!("/v1/sessions/{sid}/turns"), None)
        .json();
    let ids: Vec<&str> = turns["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["response_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a["id"].as_str().unwrap(), b["id"].as_str().unwrap()]);
    assert_eq!(turns["turns"][1]["output_text"], "2");
}

/// §4: cancelling the session stops what runs there, succeeds when nothing does, and leaves
/// the session continuable; "Cancelling an already-terminal task MUST succeed and change
/// nothing".
#[test]
fn cancelling() {
    let mut r = Rig::new();
    let (id, _) = r.start(json!({"input": "long"}));
    let sid = r.call("GET", &format!("/v1/responses/{id}"), None).json()["metadata"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = r.call("POST", &format!("/v1/sessions/{sid}/cancel"), None);
    assert_eq!(c.status, 200);
    assert_eq!(c.json()["cancelled"], json!([id]));
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).json()["status"],
        "cancelled"
    );
    let again = r.call("POST", &format!("/v1/sessions/{sid}/cancel"), None);
    assert_eq!(
        (again.status, again.json()["cancelled"].clone()),
        (200, json!([]))
    );
    let before = r.call("GET", &format!("/v1/responses/{id}"), None).body;
    assert_eq!(
        r.call("POST", &format!("/v1/responses/{id}/cancel"), None)
            .status,
        200
    );
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).body,
        before,
        "nothing changed"
    );
    let (_, turn) = r.start(json!({"input": "again", "previous_response_id": id}));
    assert_eq!(turn.session_id, sid, "still continuable");
}

/// §5: a read-only view, revocable, holding nothing of the owner; it cannot continue, cancel
/// or upload (it is a GET of its own); another principal cannot share Alice's session.
#[test]
fn sharing() {
    let mut r = Rig::new();
    let a = r.task(json!({"input": "share me"}), "shared text");
    let sid = a["metadata"]["session_id"].as_str().unwrap();
    assert_eq!(
        r.call("GET", &format!("/v1/sessions/{sid}/share"), None)
            .json()["active"],
        false
    );
    let s = r
        .call("POST", &format!("/v1/sessions/{sid}/share"), None)
        .json();
    let url = s["url"].as_str().unwrap().to_owned();
    assert_eq!(
        r.call("POST", &format!("/v1/sessions/{sid}/share"), None)
            .json()["url"],
        url.as_str(),
        "one share"
    );
    let view = r.send_as(BOB, "GET", &url, None).now();
    assert_eq!(view.status, 200);
    let text = String::from_utf8_lossy(&view.body).to_string();
    assert!(text.contains("shared text") && text.contains("\"read_only\":true"));
    assert!(
        !text.contains("alice") && !text.contains("harness_id"),
        "{text}"
    );
    for (m, p) in [
        ("POST", format!("{url}/cancel")),
        ("POST", url.clone()),
        ("DELETE", url.clone()),
    ] {
        assert_ne!(r.send_as(BOB, m, &p, None).now().status, 200, "{m} {p}");
    }
    assert_eq!(
        r.send_as(BOB, "POST", &format!("/v1/sessions/{sid}/share"), None)
            .now()
            .status,
        404
    );
    let revoked = r.call("DELETE", &format!("/v1/sessions/{sid}/share"), None);
    assert_eq!(revoked.json()["active"], false);
    assert_eq!(r.send_as(BOB, "GET", &url, None).now().status, 404);
}

/// §6: "MUST cancel any in-flight task in the session first, and MUST make the session
/// unreadable afterwards" — its responses and artifacts too (files.md §5, security.md §6).
#[test]
fn deleting() {
    let mut r = Rig::new();
    let a = r.task(json!({"input": "one"}), "1");
    let sid = a["metadata"]["session_id"].as_str().unwrap().to_owned();
    let (running, _) = r.start(json!({"input": "two", "previous_response_id": a["id"]}));
    let now = r.now();
    let file = r
        .server
        .turn_write_file(now, &running, "a.txt", b"x".to_vec())
        .unwrap();
    let d = r.call("DELETE", &format!("/v1/traces/{sid}"), None);
    assert_eq!(d.status, 200);
    assert!(r.stops.contains(&running), "the in-flight task is stopped");
    assert!(r.server.turn_text(now, &running, "late").is_err());
    for p in [
        format!("/v1/sessions/{sid}"),
        format!("/v1/sessions/{sid}/turns"),
        format!("/v1/sessions/{sid}/files"),
        format!("/v1/responses/{}", a["id"].as_str().unwrap()),
        format!("/v1/responses/{running}"),
        format!(
            "/v1/containers/{}/files/{}/content",
            file["container_id"].as_str().unwrap(),
            file["id"].as_str().unwrap()
        ),
    ] {
        assert_eq!(r.call("GET", &p, None).status, 404, "{p}");
    }
    let cont = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "x", "previous_response_id": a["id"]})),
    );
    assert_eq!(cont.status, 404);
    assert_eq!(
        r.call("DELETE", &format!("/v1/sessions/{sid}"), None)
            .status,
        404
    );
}

/// §6 with a client attached: the deleted session's running task ends as a cancel does — its
/// stream gets the terminal event, a request waiting for it gets its answer — and only then
/// does the session go.
#[test]
fn deleting_answers_whoever_follows_the_running_task() {
    let mut r = Rig::new();
    let server_rig::Got::Stream(_, sid) = r.send_as(
        server_rig::ALICE,
        "POST",
        "/v1/responses",
        Some(json!({"input": "a", "stream": true})),
    ) else {
        panic!()
    };
    let rid = r.turns.remove(0).response_id;
    let session =
        r.call("GET", &format!("/v1/responses/{rid}"), None).json()["metadata"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let mut h = http::HeaderMap::new();
    h.insert(
        "authorization",
        format!("Bearer {}", server_rig::ALICE).parse().unwrap(),
    );
    h.insert("idempotency-key", "k".parse().unwrap());
    let server_rig::Got::Wait(w) = r.send_with("POST", "/v1/responses", &h, br#"{"input":"b"}"#)
    else {
        panic!()
    };
    let other = r.turns.remove(0).response_id;
    let other_session = r
        .call("GET", &format!("/v1/responses/{other}"), None)
        .json()["metadata"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    r.call("DELETE", &format!("/v1/sessions/{session}"), None);
    r.call("DELETE", &format!("/v1/traces/{other_session}"), None);
    let (body, done) = r.read_stream(sid);
    assert!(done);
    let last = server_rig::values(&body).pop().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["response"]["status"].as_str()),
        (Some("response.failed"), Some("cancelled"))
    );
    let answer = r.server.poll_wait(w).expect("answered");
    let v: serde_json::Value = serde_json::from_slice(answer.body()).unwrap();
    assert_eq!(v["status"], "cancelled");
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{other}"), None)
            .status,
        404
    );
}
