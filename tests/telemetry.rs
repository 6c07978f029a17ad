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

/// Runs one turn (a tool call, then a reply) with `traceparent` on the prompt, under an
/// OpenTelemetry layer and a debugging recorder; returns the finished spans and the metrics.
fn one_turn(traceparent: Option<&str>) -> (Vec<SpanData>, Vec<Metric>) {
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
    tracing::subscriber::with_default(subscriber, || {
        metrics::with_local_recorder(&recorder, || {
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
    });
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
    let find = |name: &str, label: Option<(&str, &str)>| {
        metrics
            .iter()
            .find(|(n, l, _)| {
                n == name && label.is_none_or(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| v)
    };
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
