//! What an operator sees of one TanStack turn: its spans through `tracing-opentelemetry`
//! (an in-memory exporter), the link of the `harness.operation` span to the input's W3C
//! traceparent, and the metrics through `metrics-util`'s debugging recorder.
//!
//! Spec (tanstack-harness-wire-protocol.md:393): "When the input starts a turn, the server
//! that runs the turn gives its `harness.operation` span a link to the value. A link is not
//! a parent, so your trace UI shows the turn as a linked trace."
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::ToolResult;
use harness_core::model::ScriptedModel;
use harness_core::tool::{Tool, Tools};
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::MemoryLog;
use harness_tanstack::telemetry::names;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

/// A metric: its name, its labels, its value.
type Metric = (String, Vec<(String, String)>, DebugValue);

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Runs `f` under an OpenTelemetry layer (an in-memory exporter) and a debugging recorder;
/// returns the finished spans and the metrics.
fn collect(f: impl FnOnce()) -> (Vec<SpanData>, Vec<Metric>) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        // The batch processor exports on its own thread (the simple one blocks on the export
        // inside the executor that ends the span).
        .with_batch_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    tracing::subscriber::with_default(subscriber, || metrics::with_local_recorder(&recorder, f));
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let metrics = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(k, _, _, v)| {
            let key = k.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (key.name().to_owned(), labels, v)
        })
        .collect();
    (spans, metrics)
}

/// The value of the metric `name` (with the label `label`, when given).
fn metric<'a>(
    metrics: &'a [Metric],
    name: &str,
    label: Option<(&str, &str)>,
) -> Option<&'a DebugValue> {
    metrics
        .iter()
        .find(|(n, l, _)| {
            n == name && label.is_none_or(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
}

/// Runs one TanStack turn (a tool call, then a reply) with `traceparent` on the prompt.
fn one_turn(traceparent: Option<&str>) -> (Vec<SpanData>, Vec<Metric>) {
    collect(|| {
        let tools = Tools::new().with(Tool::sync("get_weather", "weather", |call| {
            ToolResult::ok_json(&call.id, json!({"celsius": 21}))
        }));
        let agent = ToolLoopAgent::new("weather").with_tools(&tools);
        let model = ScriptedModel::new()
            .tool_call("get_weather", json!({"city": "Paris"}))
            .reply("Sunny in Paris.");
        let service = Service::new(
            Host::new(HostConfig::default(), MemoryLog::default()),
            Instant::now,
        );
        let mut pool = LocalPool::new();
        pool.spawner()
            .spawn_local(run_turns(service.clone(), agent, model, tools))
            .unwrap();
        let body = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Weather?"}}"#;
        let a = service.control(None, body, "req-1", traceparent);
        assert_eq!(a.status, 200, "{}", a.body);
        pool.run_until_stalled();
    })
}

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

fn attr(s: &SpanData, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[test]
fn the_operation_span_links_to_the_traceparent_and_is_not_its_child() {
    let (spans, _) = one_turn(Some(TRACEPARENT));
    let op = span(&spans, "harness.operation");
    // "gives its harness.operation span a link to the value"
    assert_eq!(op.links.links.len(), 1, "{op:#?}");
    let link = &op.links.links[0].span_context;
    assert_eq!(
        link.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
    );
    assert_eq!(
        link.span_id(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap()
    );
    assert!(link.is_sampled());
    assert!(link.is_remote());
    // "A link is not a parent": the turn is a trace of its own.
    assert_ne!(op.span_context.trace_id(), link.trace_id());
    assert_eq!(op.parent_span_id, SpanId::INVALID);
    // Its fields name the protocol's ids.
    assert_eq!(attr(op, "threadId").as_deref(), Some("thread-1"));
    assert_eq!(attr(op, "operationId").as_deref(), Some("op-1"));
    assert_eq!(attr(op, "inputId").as_deref(), Some("in-1"));
    assert_eq!(attr(op, "kind").as_deref(), Some("chat"));
    assert_eq!(attr(op, "outcome").as_deref(), Some("completed"));
    assert_eq!(attr(op, "traceparent").as_deref(), Some(TRACEPARENT));
}

#[test]
fn no_traceparent_no_link_and_an_invalid_one_is_dropped() {
    let (spans, _) = one_turn(None);
    assert!(span(&spans, "harness.operation").links.links.is_empty());
    // spec:391 "It drops a value that is not a valid W3C traceparent."
    let (spans, _) = one_turn(Some("00-4bf92f3577b34da6a3ce929d0e0e4736-xyz-01"));
    let op = span(&spans, "harness.operation");
    assert!(op.links.links.is_empty());
    assert_eq!(attr(op, "traceparent"), None);
}

#[test]
fn the_spans_of_a_turn_form_a_tree_with_the_model_and_tool_calls_under_the_operation() {
    let (spans, _) = one_turn(Some(TRACEPARENT));
    let op = span(&spans, "harness.operation");
    let models: Vec<&SpanData> = spans.iter().filter(|s| s.name == "harness.model").collect();
    // The script: a tool call, then the reply: two model calls.
    assert_eq!(models.len(), 2);
    for m in &models {
        assert_eq!(m.parent_span_id, op.span_context.span_id());
        assert_eq!(m.span_context.trace_id(), op.span_context.trace_id());
        assert_eq!(attr(m, "operationId").as_deref(), Some("op-1"));
        assert_eq!(attr(m, "outcome").as_deref(), Some("ok"));
    }
    // The reply streamed text: its first token was timed.
    assert!(models.iter().any(|m| attr(m, "first_token_ms").is_some()));
    let tool = span(&spans, "harness.tool");
    assert_eq!(tool.parent_span_id, op.span_context.span_id());
    assert_eq!(attr(tool, "name").as_deref(), Some("get_weather"));
    assert_eq!(attr(tool, "mediation").as_deref(), Some("run"));
    assert_eq!(attr(tool, "outcome").as_deref(), Some("ok"));
    // The operation ends after its children.
    assert!(models.iter().all(|m| m.end_time <= op.end_time));
}

#[test]
fn the_metrics_of_a_turn() {
    let (_, metrics) = one_turn(None);
    let find = |name, label| metric(&metrics, name, label);
    assert_eq!(
        find(names::TURNS, Some(("outcome", "completed"))),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        find(names::TOOL_CALLS, Some(("outcome", "ok"))),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        find(names::THREADS_OPEN, None),
        Some(&DebugValue::Gauge(1.0.into()))
    );
    match find(names::FIRST_CHUNK_SECONDS, None) {
        Some(DebugValue::Histogram(v)) => assert_eq!(v.len(), 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_jambonz_call_and_its_turn() {
    use futures::{SinkExt, StreamExt};
    use harness_jambonz::driver::{Incoming, ServeConfig, serve};
    use harness_jambonz::harness_side::Transmit;
    use harness_jambonz::telemetry::names;

    let (spans, metrics) = collect(|| {
        let tools = Tools::new().with(Tool::sync("get_hours", "hours", |call| {
            ToolResult::ok_json(&call.id, json!({"open": "8-18"}))
        }));
        let agent = ToolLoopAgent::new("faq").with_tools(&tools);
        let model = ScriptedModel::new()
            .tool_call("get_hours", json!({}))
            .reply("We open at eight.");
        let frames = [
            r#"{"type":"session:start","call_sid":"CA1","protocol":1}"#,
            r#"{"type":"turn:start","call_sid":"CA1","turn_id":1,"input":{"type":"speech","text":"When?"}}"#,
            r#"{"type":"not:a:frame"}"#,
        ];
        let incoming = futures::stream::iter(frames.map(|f| Incoming::Text(f.into())));
        let (tx, rx) = futures::channel::mpsc::unbounded::<Transmit>();
        let report = futures::executor::block_on(serve(
            agent,
            model,
            tools,
            Instant::now,
            incoming,
            tx.sink_map_err(|e| e.to_string()),
            ServeConfig::default(),
        ))
        .unwrap();
        assert_eq!(report.turns, 1);
        let sent: Vec<Transmit> = futures::executor::block_on(rx.collect());
        assert!(!sent.is_empty());
    });
    let call = span(&spans, "jambonz.call");
    assert_eq!(attr(call, "call_sid").as_deref(), Some("CA1"));
    assert_eq!(attr(call, "turns").as_deref(), Some("1"));
    let turn = span(&spans, "jambonz.turn");
    assert_eq!(turn.parent_span_id, call.span_context.span_id());
    assert_eq!(attr(turn, "call_sid").as_deref(), Some("CA1"));
    assert_eq!(attr(turn, "turn_id").as_deref(), Some("1"));
    assert_eq!(attr(turn, "outcome").as_deref(), Some("completed"));
    let models: Vec<&SpanData> = spans.iter().filter(|s| s.name == "jambonz.model").collect();
    assert_eq!(models.len(), 2);
    assert!(
        models
            .iter()
            .all(|m| m.parent_span_id == turn.span_context.span_id())
    );
    let tool = span(&spans, "jambonz.tool");
    assert_eq!(tool.parent_span_id, turn.span_context.span_id());
    assert_eq!(attr(tool, "name").as_deref(), Some("get_hours"));
    assert_eq!(attr(tool, "mediation").as_deref(), Some("own"));
    assert_eq!(attr(tool, "outcome").as_deref(), Some("ok"));
    let find = |name, label| metric(&metrics, name, label);
    assert_eq!(
        find(names::TURNS, Some(("outcome", "completed"))),
        Some(&DebugValue::Counter(1))
    );
    // Open while served, closed after.
    assert_eq!(
        find(names::CALLS_OPEN, None),
        Some(&DebugValue::Gauge(0.0.into()))
    );
    match find(names::FRAMES_OUT, None) {
        Some(DebugValue::Counter(n)) => assert!(*n >= 2, "{n}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_uhp_task_on_the_server_and_on_the_client() {
    use harness_uhp::builder::StreamBuilder;
    use harness_uhp::client::{CreateRequest, TaskClient, TaskClientConfig};
    use harness_uhp::server::driver::{Body, CallerAuth, UhpService};
    use harness_uhp::telemetry::names;

    let (spans, metrics) = collect(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let tools = Tools::new().with(Tool::sync("get_hours", "hours", |call| {
                ToolResult::ok_json(&call.id, json!({"open": "8-18"}))
            }));
            let model = ScriptedModel::new()
                .tool_call("get_hours", json!({}))
                .reply("We open at eight.");
            let host = UhpService::builder(model)
                .harness("faq", "FAQ", ToolLoopAgent::new("faq").with_tools(&tools))
                .tools(tools)
                .api_key("k", "alice")
                .models(["scripted"])
                .build(Instant::now, || 1_786_400_000_000)
                .await
                .unwrap();
            tokio::spawn(host.run(tokio::time::sleep));
            let req = http::Request::builder()
                .method("POST")
                .uri("/v1/responses")
                .header("authorization", "Bearer k")
                .body(serde_json::to_vec(&json!({"input": "When?"})).unwrap())
                .unwrap();
            let resp = host.handle(CallerAuth::Bearer, req).await;
            assert_eq!(resp.status(), 200);
            if let Body::Stream(s) = resp.into_body() {
                futures::StreamExt::concat(s).await;
            }
        });
        // The client's task: its span opens with it, and the streamed answer finishes it.
        let now = Instant::now();
        let cfg = TaskClientConfig::new("http://127.0.0.1:3000");
        let mut task = TaskClient::new(cfg, CreateRequest::new("hi"));
        task.start(now);
        let create = task.poll_transmit().unwrap();
        let mut server = StreamBuilder::new("resp_1");
        server.created().message(&["Hel", "lo"], &[]).completed();
        let mut head = http::HeaderMap::new();
        head.insert("content-type", "text/event-stream".parse().unwrap());
        task.handle_head(now, create.id, 200, &head);
        task.handle_data(now, create.id, &server.to_sse());
        task.handle_end(now, create.id);
        assert!(task.is_finished());
        drop(task);
    });
    let task = spans
        .iter()
        .find(|s| s.name == "uhp.task" && attr(s, "side").as_deref() == Some("server"))
        .unwrap();
    assert!(attr(task, "response_id").unwrap().starts_with("resp_"));
    assert!(attr(task, "session").is_some());
    assert_eq!(attr(task, "harness").as_deref(), Some("faq"));
    assert_eq!(attr(task, "outcome").as_deref(), Some("completed"));
    let model = span(&spans, "uhp.model");
    assert_eq!(model.parent_span_id, task.span_context.span_id());
    assert_eq!(attr(model, "response_id"), attr(task, "response_id"));
    let tool = span(&spans, "uhp.tool");
    assert_eq!(tool.parent_span_id, task.span_context.span_id());
    assert_eq!(attr(tool, "name").as_deref(), Some("get_hours"));
    assert_eq!(attr(tool, "mediation").as_deref(), Some("run"));
    assert_eq!(attr(tool, "outcome").as_deref(), Some("ok"));
    let client = spans
        .iter()
        .find(|s| s.name == "uhp.task" && attr(s, "side").as_deref() == Some("client"))
        .unwrap();
    assert_eq!(client.parent_span_id, SpanId::INVALID);
    assert_eq!(attr(client, "response_id").as_deref(), Some("resp_1"));
    assert_eq!(attr(client, "outcome").as_deref(), Some("finished"));
    assert_eq!(attr(client, "creates").as_deref(), Some("1"));
    let find = |name, label| metric(&metrics, name, label);
    assert_eq!(
        find(names::TASKS, Some(("outcome", "completed"))),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        find(names::TASKS_RUNNING, None),
        Some(&DebugValue::Gauge(0.0.into()))
    );
    assert_eq!(
        find(names::CLIENT_TASKS, Some(("outcome", "finished"))),
        Some(&DebugValue::Counter(1))
    );
}

#[test]
fn a_sessions_exec_and_its_replay() {
    use harness_sessions::telemetry::names;
    use harness_sessions::{Controller, ExecRequest, MemoryJournal};

    let (spans, metrics) = collect(|| {
        let host = Controller::builder(MemoryJournal::new())
            .model(ScriptedModel::new().reply("Hello there."))
            .harness("agent", ToolLoopAgent::new("agent"))
            .build();
        host.create_session("s", None).unwrap();
        let out = futures::executor::block_on(host.exec(ExecRequest::text("s", "hi"))).unwrap();
        assert!(out.appended >= 3);
        futures::executor::block_on(host.replay("s")).unwrap();
    });
    let exec = span(&spans, "sessions.exec");
    assert_eq!(attr(exec, "session").as_deref(), Some("s"));
    assert_eq!(attr(exec, "outcome").as_deref(), Some("completed"));
    assert!(attr(exec, "execution_id").is_some_and(|x| !x.is_empty()));
    let replay = span(&spans, "sessions.replay");
    assert_eq!(attr(replay, "session").as_deref(), Some("s"));
    assert_eq!(attr(replay, "executions").as_deref(), Some("1"));
    let find = |name, label| metric(&metrics, name, label);
    assert_eq!(
        find(names::TURNS, Some(("outcome", "completed"))),
        Some(&DebugValue::Counter(1))
    );
    match find(names::JOURNAL_APPENDS, None) {
        Some(DebugValue::Counter(n)) => assert!(*n >= 3, "{n}"),
        other => panic!("{other:?}"),
    }
}

/// A journal that another writer takes over just before the turn's END is appended: the
/// controller's append is refused (fenced).
struct TakenOverAtEnd(harness_sessions::MemoryJournal);

impl harness_sessions::Journal for TakenOverAtEnd {
    fn create(
        &self,
        session: &str,
        meta: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.0.create(session, meta)
    }
    fn meta(
        &self,
        session: &str,
    ) -> Result<harness_sessions::journal::SessionMeta, harness_sessions::JournalError> {
        self.0.meta(session)
    }
    fn sessions(&self) -> Result<Vec<String>, harness_sessions::JournalError> {
        self.0.sessions()
    }
    fn head(
        &self,
        session: &str,
    ) -> Result<harness_sessions::record::Head, harness_sessions::JournalError> {
        self.0.head(session)
    }
    fn acquire_fence(
        &self,
        session: &str,
    ) -> Result<harness_sessions::record::Fence, harness_sessions::JournalError> {
        self.0.acquire_fence(session)
    }
    fn append(
        &self,
        session: &str,
        expected_last_seq: harness_sessions::Seq,
        fence: harness_sessions::record::Fence,
        records: &[harness_sessions::Record],
    ) -> Result<(), harness_sessions::JournalError> {
        if records
            .iter()
            .any(|r| matches!(r.event.body, harness_core::event::EventBody::End(_)))
        {
            self.0.acquire_fence(session)?;
        }
        self.0.append(session, expected_last_seq, fence, records)
    }
    fn read(
        &self,
        session: &str,
        from: harness_sessions::Seq,
        to: Option<harness_sessions::Seq>,
    ) -> Result<Vec<harness_sessions::Record>, harness_sessions::JournalError> {
        self.0.read(session, from, to)
    }
    fn fork(
        &self,
        parent: &str,
        at: harness_sessions::Seq,
        child: &str,
        meta: &harness_sessions::journal::SessionMeta,
    ) -> Result<(), harness_sessions::JournalError> {
        self.0.fork(parent, at, child, meta)
    }
}

#[test]
fn a_fenced_append_is_counted_and_the_turn_ends_in_error() {
    use harness_sessions::telemetry::names;
    use harness_sessions::{Controller, ExecRequest, MemoryJournal};

    let (spans, metrics) = collect(|| {
        let host = Controller::builder(TakenOverAtEnd(MemoryJournal::new()))
            .model(ScriptedModel::new().reply("Hello there."))
            .harness("agent", ToolLoopAgent::new("agent"))
            .build();
        host.create_session("s", None).unwrap();
        let err = futures::executor::block_on(host.exec(ExecRequest::text("s", "hi")));
        assert!(
            matches!(
                err,
                Err(harness_sessions::Error::Journal(
                    harness_sessions::JournalError::Fenced { .. }
                ))
            ),
            "{err:?}"
        );
    });
    let exec = span(&spans, "sessions.exec");
    assert_eq!(attr(exec, "outcome").as_deref(), Some("error"));
    let find = |name, label| metric(&metrics, name, label);
    assert_eq!(
        find(names::FENCES_REFUSED, None),
        Some(&DebugValue::Counter(1))
    );
    assert_eq!(
        find(names::TURNS, Some(("outcome", "error"))),
        Some(&DebugValue::Counter(1))
    );
}
