//! Serving a Harness (the driver): what the agent's sink calls become in UHP, cancellation
//! that really stops the agent, the tool rules (harness-core `tool::rules`: check, gate, deny
//! by default), the host's file tools, unsupported features, and the store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::interaction::{Command, Feature, Handoff, Question, StateUpdate, Step};
use harness_core::message::{JsonObject, ModelRequest, ToolCall, ToolResult};
use harness_core::model::{Model, ModelStream, ScriptedModel};
use harness_core::tool::rules::ApprovalPolicy;
use harness_core::tool::{Tool, Tools};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, SinkError, Start};
use harness_uhp::server::driver::{Body, CallerAuth, FileTools, UhpService};
use harness_uhp::server::{Store, StoreError, StoreRecord};
use serde_json::{Value, json};

fn wall() -> i64 {
    1_786_400_000_000
}

async fn request(
    host: &UhpService,
    method: &str,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> (u16, Vec<u8>) {
    let mut b = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", "Bearer k");
    if let Some(k) = key {
        b = b.header("idempotency-key", k);
    }
    let req = b
        .body(
            body.map(|v| serde_json::to_vec(&v).unwrap())
                .unwrap_or_default(),
        )
        .unwrap();
    let resp = host.handle(CallerAuth::Bearer, req).await;
    let status = resp.status().as_u16();
    let bytes = match resp.into_body() {
        Body::Full(b) => b,
        Body::Stream(s) => s.concat().await,
    };
    (status, bytes)
}

async fn json_of(host: &UhpService, method: &str, path: &str, body: Option<Value>) -> Value {
    let (_, b) = request(host, method, path, body, None).await;
    serde_json::from_slice(&b).unwrap()
}

async fn spawn(builder: harness_uhp::server::driver::ServiceBuilder) -> UhpService {
    let host = builder
        .api_key("k", "alice")
        .models(["scripted"])
        .build(Instant::now, wall)
        .await
        .unwrap();
    tokio::spawn(host.run(tokio::time::sleep));
    host
}

fn events(sse: &[u8]) -> Vec<Value> {
    let mut dec = harness_uhp::StreamDecoder::new();
    dec.push(sse);
    let mut out = Vec::new();
    while let Ok(Some(e)) = dec.poll_event() {
        out.push(e.to_value());
    }
    out
}

/// The agent's model deltas become `response.output_text.delta`s, in order, and its usage the
/// response's `usage`; the completion is not sent twice.
#[tokio::test]
async fn model_deltas_stream_as_output_text() {
    let host = spawn(
        UhpService::builder(ScriptedModel::new().reply("We open at eight.")).harness(
            "faq",
            "FAQ",
            ToolLoopAgent::new("faq"),
        ),
    )
    .await;
    let (status, body) = request(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "When?", "stream": true})),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let ev = events(&body);
    let deltas: Vec<&str> = ev
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["We ", "open ", "at ", "eight."]);
    let last = &ev.last().unwrap()["response"];
    assert_eq!(last["output"][0]["content"][0]["text"], "We open at eight.");
    assert!(last["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        last["usage"]["total_tokens"],
        last["usage"]["input_tokens"].as_u64().unwrap()
            + last["usage"]["output_tokens"].as_u64().unwrap()
    );
}

fn refund_tools(ran: Arc<AtomicUsize>) -> Tools {
    Tools::new().with(
        Tool::sync("refund", "Refund an order", move |c| {
            ran.fetch_add(1, Ordering::SeqCst);
            ToolResult::ok_json(&c.id, json!({"refunded": true}))
        })
        .requires_approval(),
    )
}

/// UHP has no approval channel: a gated tool is decided by the host's policy, deny by
/// default — it never runs silently, and the denial is in the output for all to see.
#[tokio::test]
async fn gated_tools_are_denied_by_default_and_run_when_the_policy_approves() {
    for (policy, expect_runs) in [(ApprovalPolicy::default(), 0), (ApprovalPolicy::Approve, 1)] {
        let ran = Arc::new(AtomicUsize::new(0));
        let tools = refund_tools(Arc::clone(&ran));
        let model = ScriptedModel::new()
            .tool_call("refund", json!({"order": 7}))
            .reply("Handled.");
        let agent = ToolLoopAgent::new("shop").with_tools(&tools);
        let host = spawn(
            UhpService::builder(model)
                .harness("shop", "Shop", agent)
                .tools(tools)
                .approval_policy(policy),
        )
        .await;
        let v = json_of(
            &host,
            "POST",
            "/v1/responses",
            Some(json!({"input": "refund order 7"})),
        )
        .await;
        assert_eq!(v["status"], "completed");
        assert_eq!(ran.load(Ordering::SeqCst), expect_runs);
        let items: Vec<&str> = v["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(items, ["function_call", "function_call_output", "message"]);
        assert_eq!(v["output"][0]["name"], "refund");
        let out = v["output"][1]["output"].as_str().unwrap();
        assert_eq!(out.contains("approval denied"), expect_runs == 0, "{out}");
    }
}

/// A model that records the tools it was offered.
struct Offered(Mutex<Vec<Vec<String>>>, ScriptedModel);

#[async_trait]
impl Model for Offered {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        self.0
            .lock()
            .unwrap()
            .push(req.tools.iter().map(|t| t.name.clone()).collect());
        self.1.stream(req)
    }
}

/// harnesses.md §4.3: where the runtime can, a disabled tool is a hard block — the host never
/// offers it to the model and refuses the call.
#[tokio::test]
async fn disabled_tools_are_a_hard_block() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = Arc::clone(&ran);
    let tools = Tools::new().with(Tool::sync("get_hours", "Hours", move |c| {
        r2.fetch_add(1, Ordering::SeqCst);
        ToolResult::ok_json(&c.id, json!({}))
    }));
    let model = Arc::new(Offered(
        Mutex::new(Vec::new()),
        ScriptedModel::new()
            .tool_call("get_hours", json!({}))
            .reply("ok"),
    ));
    let agent = ToolLoopAgent::new("faq").with_tools(&tools);
    let host = spawn(
        UhpService::builder(Arc::clone(&model))
            .harness("faq", "FAQ", agent)
            .tools(tools),
    )
    .await;
    let h = json_of(
        &host,
        "POST",
        "/v1/harnesses",
        Some(json!({"base": "faq", "disabled_tools": ["get_hours"]})),
    )
    .await;
    let v = json_of(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "hours?", "metadata": {"harness_id": h["id"]}})),
    )
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(
        v["output"][1]["output"]
            .as_str()
            .unwrap()
            .contains("disabled")
    );
    assert!(
        model
            .0
            .lock()
            .unwrap()
            .iter()
            .all(|t| !t.contains(&"get_hours".to_owned()))
    );
}

/// An agent that talks until it is stopped, counting.
struct Chatter {
    said: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Harness for Chatter {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("chatter", "1"))
    }
    async fn run(&self, _start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let _guard = SetOnDrop(Arc::clone(&self.dropped));
        loop {
            sink.output("blah ").await?;
            self.said.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// sessions.md §4: cancellation stops the agent — its turn's future is dropped — and the task
/// ends `cancelled` with what it said before.
#[tokio::test]
async fn cancel_really_stops_the_agent() {
    let said = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    let agent = Chatter {
        said: Arc::clone(&said),
        dropped: Arc::clone(&dropped),
    };
    let host =
        spawn(UhpService::builder(ScriptedModel::new()).harness("chatter", "Chatter", agent)).await;
    let v = json_of(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "go", "background": true})),
    )
    .await;
    let id = v["id"].as_str().unwrap().to_owned();
    while said.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let c = json_of(&host, "POST", &format!("/v1/responses/{id}/cancel"), None).await;
    assert_eq!(c["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        dropped.load(Ordering::SeqCst),
        "the turn's future was dropped"
    );
    let n = said.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        said.load(Ordering::SeqCst),
        n,
        "the agent says nothing more"
    );
    let v = json_of(&host, "GET", &format!("/v1/responses/{id}"), None).await;
    assert!(
        v["output"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("blah blah")
    );
}

/// The host's `write_file` makes an artifact the way the suite asks an agent to create a
/// file; `read_file` reads it back in a later task of the session.
#[tokio::test]
async fn file_tools_write_artifacts() {
    let files = FileTools::new();
    let tools = files.tools();
    let model = ScriptedModel::new()
        .tool_call(
            "write_file",
            json!({"path": "uhp-conformance.txt", "content": "artifact-ok"}),
        )
        .reply("Created it.")
        .tool_call("read_file", json!({"path": "uhp-conformance.txt"}))
        .reply("Read it.");
    let agent = ToolLoopAgent::new("faq").with_tools(&tools);
    let host = spawn(
        UhpService::builder(model)
            .harness("faq", "FAQ", agent)
            .tools(tools)
            .file_tools(&files),
    )
    .await;
    let v = json_of(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "Create a file"})),
    )
    .await;
    let ann = &v["output"][2]["content"][0]["annotations"][0];
    assert_eq!(ann["filename"], "uhp-conformance.txt");
    let (status, bytes) = request(
        &host,
        "GET",
        ann["download_url"].as_str().unwrap(),
        None,
        None,
    )
    .await;
    assert_eq!((status, bytes.as_slice()), (200, &b"artifact-ok"[..]));
    let w = json_of(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "read", "previous_response_id": v["id"]})),
    )
    .await;
    assert!(
        w["output"][1]["output"]
            .as_str()
            .unwrap()
            .contains("artifact-ok")
    );
    // Outside a host the tools say so, never panic.
    let lone = FileTools::new().tools();
    let call = ToolCall::new("c", "write_file", JsonObject::new()).controller_mediated("x");
    assert!(lone.call(call, Default::default()).await.is_error);
}

/// What UHP cannot carry is refused with a typed `Unsupported`; reasoning it can carry; a
/// tool call that breaks the rules (no mediation, no key) is `Rejected` before anything runs.
struct Asker(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Harness for Asker {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("asker", "1"))
    }
    async fn run(&self, _s: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let mut log = Vec::new();
        log.push(format!(
            "{:?}",
            sink.ask(Question::new("Sure?")).await.err()
        ));
        log.push(format!(
            "{:?}",
            sink.handoff(Handoff::to_human()).await.err()
        ));
        log.push(format!(
            "{:?}",
            sink.command(Command::hangup("bye")).await.err()
        ));
        log.push(format!(
            "{:?}",
            sink.state(StateUpdate::Snapshot(json!({}))).await.err()
        ));
        log.push(format!(
            "{:?}",
            sink.step(Step::Started("s".into())).await.err()
        ));
        log.push(format!("{}", sink.supports(Feature::Reasoning)));
        sink.reasoning("Weighing it.").await?;
        let raw = ToolCall::new("c1", "anything", JsonObject::new());
        log.push(format!(
            "{:?}",
            sink.tool_call(raw)
                .await
                .err()
                .map(|e| matches!(e, SinkError::Rejected(_)))
        ));
        sink.output("done").await?;
        self.0.lock().unwrap().extend(log);
        Ok(())
    }
}

#[tokio::test]
async fn unsupported_features_are_typed() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = spawn(UhpService::builder(ScriptedModel::new()).harness(
        "asker",
        "Asker",
        Asker(Arc::clone(&log)),
    ))
    .await;
    let v = json_of(&host, "POST", "/v1/responses", Some(json!({"input": "x"}))).await;
    assert_eq!(v["status"], "completed");
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "Some(Unsupported(Questions))",
            "Some(Unsupported(Handoff))",
            "Some(Unsupported(Commands))",
            "Some(Unsupported(State))",
            "Some(Unsupported(Steps))",
            "true",
            "Some(true)",
        ]
    );
    assert_eq!(v["output"][0]["type"], "reasoning");
    assert_eq!(v["output"][0]["summary"][0]["text"], "Weighing it.");
    assert_eq!(
        v["output"].as_array().unwrap().len(),
        2,
        "the rejected call left no item"
    );
}

/// A store that keeps what it is given, shared between two hosts.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<StoreRecord>>>);

#[async_trait]
impl Store for Kept {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        Ok(self.0.lock().unwrap().clone())
    }
    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError> {
        self.0.lock().unwrap().extend(records);
        Ok(())
    }
}

/// A restart: responses, sessions, harnesses and idempotency keys come back from the store;
/// a repeated key after the restart is answered from it, and the agent is not run again.
#[tokio::test]
async fn a_restart_keeps_what_the_store_kept() {
    let store = Kept::default();
    let model = Arc::new(ScriptedModel::new().reply("first"));
    let host = spawn(
        UhpService::builder(Arc::clone(&model))
            .harness("faq", "FAQ", ToolLoopAgent::new("faq"))
            .store(store.clone()),
    )
    .await;
    let body = json!({"input": "once"});
    let (_, a) = request(
        &host,
        "POST",
        "/v1/responses",
        Some(body.clone()),
        Some("key-1"),
    )
    .await;
    let a: Value = serde_json::from_slice(&a).unwrap();
    let h = json_of(
        &host,
        "POST",
        "/v1/harnesses",
        Some(json!({"base": "faq", "name": "kept"})),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await; // the writer runs beside the requests
    drop(host);
    let again = spawn(
        UhpService::builder(Arc::clone(&model))
            .harness("faq", "FAQ", ToolLoopAgent::new("faq"))
            .store(store.clone()),
    )
    .await;
    let got = json_of(
        &again,
        "GET",
        &format!("/v1/responses/{}", a["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(got, a);
    let (_, replay) = request(&again, "POST", "/v1/responses", Some(body), Some("key-1")).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&replay).unwrap()["id"],
        a["id"]
    );
    assert_eq!(model.calls(), 1, "never run twice");
    assert_eq!(
        json_of(
            &again,
            "GET",
            &format!("/v1/harnesses/{}", h["id"].as_str().unwrap()),
            None
        )
        .await["name"],
        "kept"
    );
    let sid = a["metadata"]["session_id"].as_str().unwrap();
    assert_eq!(
        json_of(&again, "GET", &format!("/v1/sessions/{sid}/turns"), None).await["turns"][0]["output_text"],
        "first"
    );
}

/// A harness that panics fails its own task (`harness_error`), and the host serves on.
struct Panics;

#[async_trait]
impl Harness for Panics {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("panics", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        if start.inputs[0].text() == "boom" {
            panic!("a bug in the agent");
        }
        sink.output("fine").await?;
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_harness_fails_its_task_only() {
    let host =
        spawn(UhpService::builder(ScriptedModel::new()).harness("panics", "Panics", Panics)).await;
    let v = json_of(
        &host,
        "POST",
        "/v1/responses",
        Some(json!({"input": "boom"})),
    )
    .await;
    assert_eq!(
        (v["status"].as_str(), v["error"]["code"].as_str()),
        (Some("failed"), Some("harness_error"))
    );
    assert!(
        !v["error"]["message"].as_str().unwrap().contains("bug"),
        "no internals in the message"
    );
    let v = json_of(&host, "POST", "/v1/responses", Some(json!({"input": "ok"}))).await;
    assert_eq!(v["status"], "completed");
}
