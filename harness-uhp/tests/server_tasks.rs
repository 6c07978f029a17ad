//! The server against tasks.md (spec/uhp-2026-08-11): §1 running a task, §1.2 selecting the
//! harness, §1.3 models, §2 input, §3 the response object, §4 reading back, §6 idempotency,
//! §7 deleting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use http::HeaderMap;
use serde_json::{Value, json};
use server_rig::{ALICE, Got, Rig};

fn post_with_key(r: &mut Rig, key: &str, body: &Value) -> Got {
    let mut h = HeaderMap::new();
    h.insert("authorization", format!("Bearer {ALICE}").parse().unwrap());
    h.insert("idempotency-key", key.parse().unwrap());
    r.send_with(
        "POST",
        "/v1/responses",
        &h,
        &serde_json::to_vec(body).unwrap(),
    )
}

/// §1 / streaming.md §6: a non-streaming task answers when it is terminal, with the response
/// object §3 describes (id `resp_`, `object`, `created_at`, `model`, `metadata.session_id`,
/// `previous_response_id`, `store`, `usage` null when nothing was counted).
#[test]
fn a_non_streaming_task_answers_its_terminal_response() {
    let mut r = Rig::new();
    let Got::Wait(w) = r.send_as(ALICE, "POST", "/v1/responses", Some(json!({"input": "hi"})))
    else {
        panic!("a non-streaming task waits for its end");
    };
    assert!(r.server.poll_wait(w).is_none(), "not before the end");
    let turn = r.turns.remove(0);
    r.text(&turn.response_id, "Hello");
    r.end(&turn.response_id);
    assert!(r.wakes.contains(&harness_uhp::server::Wake::Wait(w)));
    let resp = r.server.poll_wait(w).expect("answered");
    assert_eq!(resp.status(), 200);
    let v: Value = serde_json::from_slice(resp.body()).unwrap();
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert!(v["created_at"].is_i64());
    assert_eq!(v["model"], "scripted");
    assert!(
        v["metadata"]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("hsess")
    );
    assert!(v["previous_response_id"].is_null());
    assert_eq!(v["store"], true);
    assert!(
        v.get("usage").is_some() && v["usage"].is_null(),
        "null, never a made-up zero"
    );
    assert!(v["error"].is_null());
    assert_eq!(v["output"][0]["content"][0]["text"], "Hello");
}

/// §1.2: "If harness_id is absent, the server MUST use a default harness and MUST report
/// which one it used in the response metadata"; unknown → 404 `harness_not_found`;
/// §1.3: a model the server cannot serve → 422 `model_unavailable` (no silent substitute).
#[test]
fn harness_and_model_selection() {
    let mut r = Rig::new();
    let v = r.task(json!({"input": "hi"}), "x");
    let default = r.call("GET", "/v1/harnesses", None).json()["harnesses"][0]["id"].clone();
    assert_eq!(v["metadata"]["harness_id"], default);
    let a = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "hi", "metadata": {"harness_id": "chrn_nope"}})),
    );
    assert_eq!((a.status, a.code().as_str()), (404, "harness_not_found"));
    assert_eq!(a.json()["error"]["param"], "metadata.harness_id");
    let a = r.call(
        "POST",
        "/v1/responses",
        Some(json!({"input": "hi", "model": "gpt-9"})),
    );
    assert_eq!((a.status, a.code().as_str()), (422, "model_unavailable"));
    // A served model is honoured, per task (sessions.md §1: MAY differ between tasks).
    let (id, turn) = r.start(json!({"input": "hi", "model": "scripted-large"}));
    assert_eq!(turn.model, "scripted-large");
    r.end(&id);
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).json()["model"],
        "scripted-large"
    );
}

/// §1.1 "A server MUST ignore request fields it does not understand"; §2 input forms; bad
/// types are `400 invalid_input` with the field as `param`.
#[test]
fn input_forms_and_unknown_fields() {
    let mut r = Rig::new();
    let (_, t) = r.start(
        json!({"input": "plain", "x_unknown": {"deep": [1]}, "tools": [], "include": ["x"]}),
    );
    assert_eq!(t.start.inputs[0].text(), "plain");
    let (_, t) = r.start(json!({"input": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "input_text", "text": "loose"}
    ], "instructions": "Answer in French."}));
    assert_eq!(t.start.inputs.len(), 3);
    assert_eq!(t.start.inputs[1].text(), "ab");
    let cfg: Value = serde_json::from_slice(&t.start.config).unwrap();
    assert_eq!(cfg["instructions"], "Answer in French.");
    for (body, param) in [
        (json!({}), "input"),
        (json!({"input": ""}), "input"),
        (json!({"input": 7}), "input"),
        (json!({"input": "x", "stream": "yes"}), "stream"),
        (json!({"input": "x", "metadata": []}), "metadata"),
        (json!({"input": "x", "max_step": -1}), "max_step"),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_data": "http://x"}]}]}),
            "input[0].content[0].file_data",
        ),
    ] {
        let a = r.call("POST", "/v1/responses", Some(body.clone()));
        assert_eq!(
            (a.status, a.code().as_str()),
            (400, "invalid_input"),
            "{body}"
        );
        assert_eq!(a.json()["error"]["param"], param, "{body}");
    }
}

/// §4 read back, `input_items`; §7: "A server MUST NOT let this cancel a running task".
#[test]
fn read_back_input_items_and_delete() {
    let mut r = Rig::new();
    let (id, _) = r.start(json!({"input": "remember me"}));
    let items = r
        .call("GET", &format!("/v1/responses/{id}/input_items"), None)
        .json();
    assert_eq!(items["data"][0]["content"][0]["text"], "remember me");
    let d = r.call("DELETE", &format!("/v1/responses/{id}"), None);
    assert_eq!((d.status, d.json()["deleted"].as_bool()), (200, Some(true)));
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).status,
        404
    );
    assert!(r.stops.is_empty(), "deleting does not cancel");
    r.text(&id, "still running"); // the agent goes on
    assert_eq!(r.server.running_tasks(), 1);
    r.end(&id);
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{id}"), None).status,
        404
    );
    // store: false — "MAY return 404" after completion.
    let v = r.task(json!({"input": "x", "store": false}), "y");
    assert_eq!(v["error"]["code"], "response_not_found");
}

/// §6: for a repeated key the server MUST "return the result of the first request" and "not
/// start a second execution"; "If the first request is still running, the server MUST wait
/// for it and return its result". The same key with another body is refused.
#[test]
fn idempotency_keys_replay_and_never_run_twice() {
    let mut r = Rig::new();
    let body = json!({"input": "pay the invoice"});
    let Got::Wait(first) = post_with_key(&mut r, "k-1", &body) else {
        panic!()
    };
    assert_eq!(r.turns.len(), 1);
    // The retry while the first still runs: it waits, and no second turn starts.
    let Got::Wait(second) = post_with_key(&mut r, "k-1", &body) else {
        panic!("waits")
    };
    assert_eq!(r.turns.len(), 1, "never a second execution");
    let id = r.turns[0].response_id.clone();
    r.text(&id, "paid");
    r.end(&id);
    let a: Value = serde_json::from_slice(r.server.poll_wait(first).unwrap().body()).unwrap();
    let b: Value = serde_json::from_slice(r.server.poll_wait(second).unwrap().body()).unwrap();
    assert_eq!(a, b);
    // After the end: the stored result, at once; streamed when asked.
    let c = post_with_key(&mut r, "k-1", &body).now();
    assert_eq!(c.json(), a);
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    let different = post_with_key(&mut r, "k-1", &sbody).now();
    assert_eq!(
        (different.status, different.code().as_str()),
        (422, "harnessrs_idempotency_key_reused")
    );
    let s = post_with_key(&mut r, "k-2", &sbody);
    let Got::Stream(_, sid) = s else { panic!() };
    let id2 = r.turns.last().unwrap().response_id.clone();
    r.text(&id2, "ok");
    r.end(&id2);
    let (live, _) = r.read_stream(sid);
    let replay = post_with_key(&mut r, "k-2", &sbody).now();
    assert_eq!(replay.header("content-type"), "text/event-stream");
    let last = |b: &[u8]| server_rig::values(b).last().unwrap()["response"].clone();
    assert_eq!(
        last(&live),
        last(&replay.body),
        "the replayed stream ends with the same response"
    );
    assert_eq!(r.turns.len(), 2, "k-1 ran once, k-2 ran once");
    // Keys are per principal: Bob's "k-1" is his own task.
    let mut h = HeaderMap::new();
    h.insert(
        "authorization",
        format!("Bearer {}", server_rig::BOB).parse().unwrap(),
    );
    h.insert("idempotency-key", "k-1".parse().unwrap());
    let bob = r
        .send_with(
            "POST",
            "/v1/responses",
            &h,
            br#"{"input":"pay the invoice","background":true}"#,
        )
        .now();
    assert_ne!(bob.json()["id"], a["id"]);
    // A key too long is refused.
    let long = "k".repeat(256);
    let a = post_with_key(&mut r, &long, &body).now();
    assert_eq!((a.status, a.code().as_str()), (400, "invalid_input"));
}

/// streaming.md §6: "The two paths MUST produce identical results for identical input."
#[test]
fn streaming_and_not_build_the_same_output() {
    let run = |stream: bool| {
        let mut r = Rig::new();
        let mut s = None;
        match r.send_as(
            ALICE,
            "POST",
            "/v1/responses",
            Some(json!({"input": "x", "stream": stream})),
        ) {
            Got::Stream(_, id) => s = Some(id),
            Got::Wait(_) => {}
            Got::Now(_) => panic!(),
        }
        let id = r.turns[0].response_id.clone();
        r.text(&id, "Hel");
        r.tool(&id, "call_1", "get_hours");
        r.text(&id, "lo");
        r.end(&id);
        if let Some(s) = s {
            r.read_stream(s);
        }
        let mut v = r.call("GET", &format!("/v1/responses/{id}"), None).json();
        for k in ["id", "created_at", "metadata"] {
            v.as_object_mut().unwrap().remove(k);
        }
        serde_json::to_string(&v["output"])
            .unwrap()
            .replace(id.trim_start_matches("resp_"), "ID")
    };
    assert_eq!(run(true), run(false));
}
