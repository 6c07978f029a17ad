//! The host's inputs, against the spec (tanstack-harness-wire-protocol.md, version 2): `POST
//! control` and its statuses, receipts, `inputId` idempotency, the inputs that wait for a turn,
//! bad shapes and thread ids, request ids and traces. Each test quotes the words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::field_reassign_with_default)]

mod support;

use harness_tanstack::host::{AccessPolicy, Host, HostConfig, Transport, TurnOutcome};
use harness_tanstack::http;
use harness_tanstack::log::{EventLog, MemoryLog};
use serde_json::Value;
use support::{Net, PROMPT, json, net, reply};

#[test]
fn post_control_answers_the_receipt_and_the_first_prompt_makes_the_thread() {
    let mut n = net();
    // "The command prints the receipt, for example {"inputId":"in-1","status":"accepted","operationId":"op-1"}. The first prompt also makes the thread."
    let a = n.host.control(n.now, None, PROMPT, "req-1", None);
    assert_eq!(a.status, 200);
    assert_eq!(
        json(&a.body),
        json(r#"{"inputId":"in-1","status":"accepted","operationId":"op-1"}"#)
    );
    assert!(n.host.has_thread("thread-1"));
    // "Every HTTP answer of the handler sends the id back in the X-Request-Id header."
    assert_eq!(a.request_id, "req-1");
}

#[test]
fn post_control_statuses() {
    let mut cfg = HostConfig::default();
    cfg.access = AccessPolicy::MembersOnly;
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    // "401: getUser returned null."
    assert_eq!(n.host.control(n.now, None, PROMPT, "r", None).status, 401);
    // "400: { error }. The input has a bad shape, or threadId is missing."
    let a = n.host.control(
        n.now,
        Some("ann"),
        br#"{"input":{"op":"prompt","message":"x"}}"#,
        "r",
        None,
    );
    assert_eq!(a.status, 400);
    assert!(json(&a.body)["error"].is_string());
    assert_eq!(
        n.host
            .control(
                n.now,
                Some("ann"),
                br#"{"threadId":"t","input":{"op":"fly"}}"#,
                "r",
                None
            )
            .status,
        400
    );
    assert_eq!(
        n.host
            .control(n.now, Some("ann"), b"not json", "r", None)
            .status,
        400
    );
    assert_eq!(
        n.host.control(n.now, Some("ann"), PROMPT, "r", None).status,
        200
    );
    // Another user's thread-1 is another thread (tests/host_access.rs): not refused, and
    // not queued behind ann's turn.
    let a = n.host.control(n.now, Some("bob"), PROMPT, "r", None);
    assert_eq!(
        (a.status, &json(&a.body)["status"]),
        (200, &json(r#""accepted""#))
    );
    // "403: { error: 'forbidden' }. The host refused the action.": a thread the log says
    // is another user's.
    let key = n.host.thread_key(Some("cy"), "thread-1");
    n.host.log_mut().set_owner(&key, "ann").unwrap();
    let a = n.host.control(n.now, Some("cy"), PROMPT, "r", None);
    assert_eq!(
        (a.status, json(&a.body)),
        (403, json(r#"{"error":"forbidden"}"#))
    );
    // "A rejected receipt is still 200. Its reason says why"
    let a = n.host.control(
        n.now,
        Some("ann"),
        br#"{"threadId":"thread-1","input":{"op":"cancel","operationId":"op-9"}}"#,
        "r",
        None,
    );
    assert_eq!(a.status, 200);
    assert_eq!(json(&a.body)["status"], "rejected");
    assert_eq!(json(&a.body)["reason"], "not_running");
}

#[test]
fn receipts_are_accepted_queued_or_rejected() {
    let mut n = net();
    // "The status of a receipt is accepted, queued, or rejected."
    let a = json(&n.host.control(n.now, None, PROMPT, "r", None).body);
    assert_eq!(a["status"], "accepted");
    let q = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"followUp","message":"more"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(q["status"], "queued");
    let r = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"agent","agent":"nobody"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(
        (r["status"].as_str(), r["reason"].as_str()),
        (Some("rejected"), Some("unknown_agent"))
    );
    // The queued follow-up runs when the turn ends.
    n.pump();
    assert_eq!(n.turns.len(), 1);
    reply(&mut n, "Hi");
    assert_eq!(n.turns.len(), 1);
    assert_eq!(n.turns[0].message.text(), "more");
}

#[test]
fn the_same_input_id_runs_once_and_the_receipt_repeats_it() {
    let mut n = net();
    // "A prompt, command, agent, or append input with the same inputId runs once. The inputId of its receipt is the id that you sent."
    let body =
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hello","inputId":"mine-1"}}"#;
    let a = n.host.control(n.now, None, body, "r1", None);
    let b = n.host.control(n.now, None, body, "r2", None);
    assert_eq!(a.body, b.body);
    assert_eq!(json(&a.body)["inputId"], "mine-1");
    n.pump();
    assert_eq!(n.turns.len(), 1);
    for body in [
        &br#"{"threadId":"thread-1","input":{"op":"command","command":"compact","inputId":"c-1"}}"#
            [..],
        br#"{"threadId":"thread-1","input":{"op":"agent","agent":"x","inputId":"g-1"}}"#,
        br#"{"threadId":"thread-1","input":{"op":"append","message":"note","inputId":"a-1"}}"#,
    ] {
        let a = n.host.control(n.now, None, body, "r", None);
        let b = n.host.control(n.now, None, body, "r", None);
        assert_eq!(a.body, b.body);
    }
    let appended = n
        .host
        .messages("thread-1")
        .iter()
        .filter(|m| m.text() == "note")
        .count();
    assert_eq!(appended, 1);
}

#[test]
fn request_ids_and_traceparents_are_validated() {
    // "1 to 128 letters, digits, -, _, ., or :. Else the server makes a new UUID."
    assert_eq!(http::request_id(Some("abc-1_2.3:4")), "abc-1_2.3:4");
    assert_eq!(http::request_id(Some(&"a".repeat(128))).len(), 128);
    for bad in ["", "has space", "slash/", &"a".repeat(129)] {
        let id = http::request_id(Some(bad));
        assert_ne!(id, bad);
        assert_eq!(id.len(), 36); // a UUID
    }
    // "It drops a value that is not a valid W3C traceparent."
    let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert!(http::is_valid_traceparent(good));
    for bad in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "garbage",
    ] {
        assert!(!http::is_valid_traceparent(bad), "{bad}");
    }
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", Some(good));
    n.pump();
    assert_eq!(n.turns[0].traceparent.as_deref(), Some(good));
    reply(&mut n, "x");
    n.host.control(
        n.now,
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"y"}}"#,
        "r",
        Some("junk"),
    );
    n.pump();
    assert_eq!(n.turns[0].traceparent, None);
}

#[test]
fn idempotency_receipts_are_bounded() {
    let cfg = HostConfig {
        max_receipts: 2,
        ..HostConfig::default()
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    for id in ["a-1", "a-2", "a-3", "a-3", "a-1"] {
        let body = format!(
            r#"{{"threadId":"thread-1","input":{{"op":"append","message":"note {id}","inputId":"{id}"}}}}"#
        );
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200
        );
    }
    let texts: Vec<String> = n
        .host
        .messages("thread-1")
        .iter()
        .map(|m| m.text())
        .collect();
    // a-3 repeated within the window ran once; a-1 was forgotten (oldest of more than 2) and ran again.
    assert_eq!(texts, ["note a-1", "note a-2", "note a-3", "note a-1"]);
}

/// Inputs that wait behind a running turn are kept in memory until they run: a client that
/// sends without end must get `rejected` receipts past a bound, not grow the host's memory.
#[test]
fn waiting_inputs_are_bounded_per_thread() {
    let mut n = Net::new(Host::new(
        HostConfig {
            max_waiting_inputs: 3,
            ..HostConfig::default()
        },
        MemoryLog::default(),
    ));
    n.host.control(n.now, None, PROMPT, "r", None);
    let mut statuses = Vec::new();
    for i in 0..5 {
        let body =
            format!(r#"{{"threadId":"thread-1","input":{{"op":"followUp","message":"f{i}"}}}}"#);
        let a = json(&n.host.control(n.now, None, body.as_bytes(), "r", None).body);
        statuses.push((
            a["status"].as_str().unwrap().to_owned(),
            a["reason"].clone(),
        ));
    }
    assert_eq!(statuses[..3].iter().filter(|s| s.0 == "queued").count(), 3);
    assert_eq!(statuses[3].0, "rejected");
    assert_eq!(statuses[4].1, "queue_full");
    let snap = json(&n.host.snapshot("thread-1", None, "r").body);
    assert_eq!(snap["waitingInputs"].as_array().unwrap().len(), 3);
}

/// Ids the host makes up (`in-N`, `op-N`) must not collide, in one thread, with ids a client
/// chose (an `inputId`, a `POST run` runId): a collision would answer one input with
/// another's receipt, or give two runs one operationId.
#[test]
fn host_made_ids_do_not_collide_with_client_chosen_ones() {
    let mut n = net();
    // The client takes "in-1" for an append and "op-1" for a POST run.
    let a = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"append","message":"x","inputId":"in-1"}}"#,
                "r",
                None,
            )
            .body,
    );
    let input: harness_tanstack::agui::RunAgentInput = serde_json::from_str(
        r#"{"threadId":"thread-1","runId":"op-1","messages":[{"id":"u","role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    n.host.run_agui(n.now, &input, None, "r", None).unwrap();
    n.pump();
    let run = n.turns.remove(0);
    assert_eq!(run.operation_id, "op-1");
    n.host
        .finish_turn(n.now, "thread-1", "op-1", TurnOutcome::Completed)
        .unwrap();
    // The host's own ids for a prompt must be different ones.
    let p = json(&n.host.control(n.now, None, PROMPT, "r", None).body);
    assert_ne!(p["inputId"], "in-1");
    assert_ne!(p["operationId"], "op-1");
    // And the append's retry still gets the append's receipt.
    let again = json(
        &n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"thread-1","input":{"op":"append","message":"x","inputId":"in-1"}}"#,
                "r",
                None,
            )
            .body,
    );
    assert_eq!(again, a);
}

/// "`400`: `{ error }`. The input has a bad shape" (and on the socket, `invalid_frame` for
/// "a bad `input`"): the message of a message input is text, a message object or its
/// parts; `null`, a number or a boolean is no message, and must not run a turn.
#[test]
fn a_message_that_is_not_text_an_object_or_parts_is_a_bad_shape() {
    let mut n = net();
    for bad in ["null", "1", "true"] {
        for op in ["prompt", "steer", "followUp", "append"] {
            let body =
                format!(r#"{{"threadId":"thread-1","input":{{"op":"{op}","message":{bad}}}}}"#);
            let a = n.host.control(n.now, None, body.as_bytes(), "r", None);
            assert_eq!(a.status, 400, "{op} {bad}: {}", a.body);
            assert!(json(&a.body)["error"].as_str().unwrap().contains("message"));
        }
    }
    assert!(!n.host.has_thread("thread-1"));
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
    );
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"r-9","input":{"op":"prompt","message":null}}"#,
    );
    n.pump();
    let got: Vec<Value> = n.take(c).iter().map(|s| json(s)).collect();
    assert_eq!(got[1]["code"], "invalid_frame");
    assert_eq!(got[1]["requestId"], "r-9");
    assert!(n.turns.is_empty());
    // Text, a message object and parts are messages.
    for good in [
        r#""hi""#,
        r#"{"role":"user","content":"hi"}"#,
        r#"[{"type":"text","text":"hi"}]"#,
    ] {
        let body =
            format!(r#"{{"threadId":"thread-2","input":{{"op":"append","message":{good}}}}}"#);
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200,
            "{good}"
        );
    }
}

/// "`400`: … `threadId` is missing": an empty thread id is no thread, on every way in (the
/// socket's subscribe is an `invalid_frame` that does not close).
#[test]
fn an_empty_thread_id_is_refused_everywhere() {
    let mut n = net();
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.subscribe","threadId":"","v":2}"#,
    );
    n.pump();
    let e = json(&n.take(c)[0]);
    assert_eq!(e["code"], "invalid_frame");
    assert_eq!(n.closed(c), None);
    // Still waiting for a real subscribe: an input is refused, and makes no thread "".
    n.host.handle_frame(
        n.now,
        c,
        r#"{"type":"harness.input","requestId":"r","input":{"op":"prompt","message":"x"}}"#,
    );
    n.pump();
    assert_eq!(json(&n.take(c)[0])["code"], "invalid_frame");
    assert!(!n.host.has_thread(""));
    let typed = n.host.input(
        n.now,
        "",
        None,
        harness_tanstack::frame::Input::prompt("x"),
        None,
    );
    assert_eq!(typed.unwrap_err().status, 400);
    assert_eq!(
        n.host
            .control(
                n.now,
                None,
                br#"{"threadId":"","input":{"op":"prompt","message":"x"}}"#,
                "r",
                None
            )
            .status,
        400
    );
    assert!(!n.host.has_thread(""));
    assert_eq!(n.host.stats().threads, 0);
}

/// A `POST run`'s `runId` becomes the operation id of every event of the run (in the log,
/// on every `harness.event` frame and every plain AG-UI event of the run), so an id as long
/// as the body allows would have the host store and send it hundreds of times: it is bounded
/// as a thread id is (`max_thread_id_bytes`), refused as a bad shape ("`400`: `{ error }`.
/// The input has a bad shape", tanstack-harness-wire-protocol.md:94), never a `500`.
#[test]
fn a_run_id_over_the_limit_is_a_bad_request() {
    let mut n = net();
    let run = |run_id: &str| -> harness_tanstack::agui::RunAgentInput {
        serde_json::from_value(serde_json::json!({
            "threadId": "t-run", "runId": run_id,
            "messages": [{"id": "u", "role": "user", "content": "hi"}]
        }))
        .unwrap()
    };
    let a = n
        .host
        .run_agui(n.now, &run(&"r".repeat(1025)), None, "r", None)
        .unwrap_err();
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(json(&a.body)["error"].as_str().unwrap().contains("runId"));
    assert!(!n.host.has_thread("t-run"));
    assert!(
        n.host
            .run_agui(n.now, &run(&"r".repeat(1024)), None, "r", None)
            .is_ok()
    );
}

/// A NUL character in a thread id or a run id is refused as a bad shape (line 94): no
/// store keeps it as text (PostgreSQL's `text` refuses it, which made it a `500` that
/// named the database's error), and no client means one.
#[test]
fn a_nul_in_a_thread_id_or_run_id_is_a_bad_request() {
    let mut n = net();
    let body = serde_json::json!({
        "threadId": "t\u{0}x", "input": { "op": "prompt", "message": "x" }
    })
    .to_string();
    let a = n.host.control(n.now, None, body.as_bytes(), "r", None);
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(json(&a.body)["error"].as_str().unwrap().contains("NUL"));
    let sse = n
        .host
        .open_sse(n.now, Some("t\u{0}x"), Some("2"), None, None, None, "r");
    assert_eq!(sse.unwrap_err().status, 400);
    for (thread, run_id) in [("t\u{0}x", "run-1"), ("t-ok", "run\u{0}1")] {
        let run: harness_tanstack::agui::RunAgentInput =
            serde_json::from_value(serde_json::json!({
                "threadId": thread, "runId": run_id,
                "messages": [{"id": "u", "role": "user", "content": "hi"}]
            }))
            .unwrap();
        let a = n.host.run_agui(n.now, &run, None, "r", None).unwrap_err();
        assert_eq!(a.status, 400, "{}", a.body);
    }
    assert_eq!(n.host.stats().threads, 0);
}

/// The spec sets no length for a thread id; this host takes up to
/// `HostConfig::max_thread_id_bytes` (1 KiB by default). A longer one is refused at every
/// way in as a bad request, like a missing one: "`400`: `{ error }`. The input has a bad
/// shape, or `threadId` is missing.", and on the socket `invalid_frame`, which "does not
/// close". Never a `500`.
#[test]
fn a_thread_id_over_the_limit_is_a_bad_request_everywhere() {
    let mut n = net();
    assert_eq!(n.host.config().max_thread_id_bytes, 1024);
    let ok = "t".repeat(1024);
    let long = "t".repeat(1025);
    let body = |id: &str| {
        serde_json::json!({ "threadId": id, "input": { "op": "prompt", "message": "x" } })
            .to_string()
    };
    let a = n
        .host
        .control(n.now, None, body(&long).as_bytes(), "r", None);
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        json(&a.body)["error"]
            .as_str()
            .unwrap()
            .contains("threadId")
    );
    let typed = n.host.input(
        n.now,
        &long,
        None,
        harness_tanstack::frame::Input::prompt("x"),
        None,
    );
    assert_eq!(typed.unwrap_err().status, 400);
    let sse = n
        .host
        .open_sse(n.now, Some(&long), Some("2"), None, None, None, "r");
    assert_eq!(sse.unwrap_err().status, 400);
    let run: harness_tanstack::agui::RunAgentInput = serde_json::from_value(serde_json::json!({
        "threadId": long, "runId": "run-1", "messages": [{"id": "u", "role": "user", "content": "hi"}]
    }))
    .unwrap();
    assert_eq!(
        n.host
            .run_agui(n.now, &run, None, "r", None)
            .unwrap_err()
            .status,
        400
    );
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    let sub = |id: &str| {
        serde_json::json!({ "type": "harness.subscribe", "threadId": id, "v": 2 }).to_string()
    };
    n.host.handle_frame(n.now, c, &sub(&long));
    n.pump();
    assert_eq!(json(&n.take(c)[0])["code"], "invalid_frame");
    assert_eq!(n.closed(c), None);
    assert_eq!(n.host.stats().threads, 0);
    assert_eq!(n.host.stats().watched_threads, 0);
    // At the limit: a thread.
    n.host.handle_frame(n.now, c, &sub(&ok));
    assert_eq!(
        n.host
            .control(n.now, None, body(&ok).as_bytes(), "r", None)
            .status,
        200
    );
    n.pump();
    assert_eq!(json(&n.take(c)[0])["type"], "harness.hello");
    assert!(n.host.has_thread(&ok));
    // The limit is the host's to set.
    let mut n = Net::new(Host::new(
        HostConfig {
            max_thread_id_bytes: 4096,
            ..HostConfig::default()
        },
        MemoryLog::default(),
    ));
    assert_eq!(
        n.host
            .control(n.now, None, body(&long).as_bytes(), "r", None)
            .status,
        200
    );
}

/// A lone surrogate (`"\ud800 lone"`) is no Unicode text: a prompt carrying one must not
/// become an empty user message. It is refused, the same way on every transport, as a bad
/// input: "`400`: `{ error }`. The input has a bad shape" (spec line 94) on `POST control`
/// and `POST run`, and on the socket and the stdio worker "`invalid_frame` | The frame is
/// … a bad `input`" (line 317), which does not close. No thread, no turn, no message.
#[test]
fn a_lone_surrogate_is_refused_on_every_transport() {
    let mut n = net();
    for bad in [r"\ud800 lone", r"tail \udc00", r"\ud800\u0041"] {
        let body =
            format!(r#"{{"threadId":"thread-1","input":{{"op":"prompt","message":"{bad}"}}}}"#);
        let a = n.host.control(n.now, None, body.as_bytes(), "r", None);
        assert_eq!(a.status, 400, "{bad}: {}", a.body);
        assert!(json(&a.body)["error"].is_string());
        for transport in [Transport::WebSocket, Transport::Stdio] {
            let c = n.host.connect(n.now, transport, None, "up");
            n.host.handle_frame(
                n.now,
                c,
                r#"{"type":"harness.subscribe","threadId":"thread-1","v":2}"#,
            );
            n.host.handle_frame(
                n.now,
                c,
                &format!(
                    r#"{{"type":"harness.input","requestId":"r-7","input":{{"op":"prompt","message":"{bad}"}}}}"#
                ),
            );
            n.pump();
            let got: Vec<Value> = n.take(c).iter().map(|s| json(s)).collect();
            assert_eq!(got[0]["type"], "harness.hello");
            assert_eq!(got[1]["code"], "invalid_frame", "{transport:?} {got:?}");
            assert_eq!(got[1]["requestId"], "r-7");
            assert_eq!(got.len(), 2, "no receipt: {got:?}");
            assert_eq!(n.closed(c), None);
        }
        // The typed API.
        let input: harness_tanstack::frame::Input =
            serde_json::from_str(&format!(r#"{{"op":"prompt","message":"{bad}"}}"#)).unwrap();
        let e = n
            .host
            .input(n.now, "thread-1", None, input, None)
            .unwrap_err();
        assert_eq!(e.status, 400);
        // POST run: the body does not read as a RunAgentInput (the host answers 400).
        let run = format!(
            r#"{{"threadId":"thread-1","runId":"run-1","messages":[{{"id":"u","role":"user","content":"{bad}"}}]}}"#
        );
        assert!(serde_json::from_str::<harness_tanstack::agui::RunAgentInput>(&run).is_err());
    }
    n.pump();
    assert!(n.turns.is_empty());
    assert!(!n.host.has_thread("thread-1"));
    // A real pair (U+1F600) is text.
    let ok = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"\ud83d\ude00"}}"#;
    assert_eq!(n.host.control(n.now, None, ok, "r", None).status, 200);
    n.pump();
    assert_eq!(n.turns[0].message.text(), "\u{1F600}");
    // An escaped backslash before "ud800" is text too.
    let ok = br#"{"threadId":"thread-2","input":{"op":"prompt","message":"a\\ud800"}}"#;
    assert_eq!(n.host.control(n.now, None, ok, "r", None).status, 200);
    n.pump();
    assert_eq!(n.turns[1].message.text(), "a\\ud800");
}

/// A log whose every write fails with its store's own words.
struct FailingLog(MemoryLog);

impl EventLog for FailingLog {
    fn append_as(
        &mut self,
        _key: &str,
        _thread_id: &str,
        _operation_id: &str,
        _event: &harness_tanstack::agui::AguiEvent,
    ) -> Result<harness_tanstack::log::LogRecord, harness_tanstack::log::LogError> {
        Err(harness_tanstack::log::LogError::Io(
            "postgres: relation harness_secret_table".into(),
        ))
    }
    fn get(
        &mut self,
        thread_id: &str,
        seq: u64,
    ) -> Result<Option<harness_tanstack::log::LogRecord>, harness_tanstack::log::LogError> {
        self.0.get(thread_id, seq)
    }
    fn head_seq(&self, thread_id: &str) -> u64 {
        self.0.head_seq(thread_id)
    }
    fn first_seq(&self, thread_id: &str) -> u64 {
        self.0.first_seq(thread_id)
    }
    fn gap_reason(&self) -> harness_tanstack::catalog::GapReason {
        self.0.gap_reason()
    }
    fn threads(&self) -> Vec<String> {
        self.0.threads()
    }
    fn is_durable(&self) -> bool {
        false
    }
}

/// An input the host fails to apply (its log refused the write) is "`internal`: The server
/// … failed to apply one input" (tanstack-harness-wire-protocol.md:320): the client gets
/// that code, on `POST control` a `500 {error}`, never the store's own error text (a
/// database's words name its tables and are the operator's, in the host's log).
#[test]
fn an_input_the_log_fails_is_internal_without_the_stores_words() {
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FailingLog(MemoryLog::default()),
    ));
    let a = n.host.control(n.now, None, PROMPT, "r", None);
    assert_eq!(a.status, 500);
    assert_eq!(json(&a.body)["error"], "internal");
    assert!(!a.body.contains("harness_secret_table"), "{}", a.body);
    let c = n.host.connect(n.now, Transport::WebSocket, None, "up");
    let sub = serde_json::json!({ "type": "harness.subscribe", "threadId": "t-sock", "v": 2 });
    n.host.handle_frame(n.now, c, &sub.to_string());
    let frame = serde_json::json!({
        "type": "harness.input", "requestId": "q1", "threadId": "t-sock",
        "input": { "op": "prompt", "message": "hi" }
    })
    .to_string();
    n.host.handle_frame(n.now, c, &frame);
    n.pump();
    let got = n.take(c);
    let err = got
        .iter()
        .map(|f| json(f))
        .find(|f| f["type"] == "harness.error")
        .unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(err["code"], "internal");
    assert_eq!(err["requestId"], "q1");
    assert!(!err.to_string().contains("harness_secret_table"), "{err}");
}
