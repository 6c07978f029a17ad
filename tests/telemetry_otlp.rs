//! The examples' `--otlp URL` (examples/common/trace_arg.rs): the spans of a TanStack turn
//! reach an OTLP/HTTP collector (here a loopback HTTP server that keeps what is posted to
//! `/v1/traces`), the `harness.operation` span with its link to the input's traceparent.
//!
//! Spec (tanstack-harness-wire-protocol.md:393): "the server that runs the turn gives its
//! `harness.operation` span a link to the value."
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../examples/common/trace_arg.rs"]
mod trace_arg;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_core::tool::Tools;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::MemoryLog;
use opentelemetry::trace::TracerProvider as _;
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

/// A collector: keeps the JSON bodies posted to `/v1/traces`; returns its base URL.
fn collector(bodies: Arc<Mutex<Vec<Value>>>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |body: axum::body::Bytes| {
                    let bodies = Arc::clone(&bodies);
                    async move {
                        if let Ok(v) = serde_json::from_slice(&body) {
                            bodies.lock().unwrap().push(v);
                        }
                        "{}"
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// Every span of every body, flattened.
fn spans(bodies: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for b in bodies {
        for rs in b["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    out
}

#[test]
fn the_spans_of_a_turn_reach_an_otlp_collector_with_the_traceparent_link() {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let url = collector(Arc::clone(&bodies));
    let provider = trace_arg::otlp_provider(&url).unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::with_default(subscriber, || {
        let service = Service::new(
            Host::new(HostConfig::default(), MemoryLog::default()),
            Instant::now,
        );
        let mut pool = LocalPool::new();
        let model = ScriptedModel::new().reply("Hello there.");
        pool.spawner()
            .spawn_local(run_turns(
                service.clone(),
                ToolLoopAgent::new("a"),
                model,
                Tools::new(),
            ))
            .unwrap();
        let body = br#"{"threadId":"thread-1","input":{"op":"prompt","message":"Hi"}}"#;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(service.control(None, body, "r", Some(tp)).status, 200);
        pool.run_until_stalled();
    });
    // Off this thread, as the examples' guard does.
    std::thread::spawn(move || provider.shutdown().unwrap())
        .join()
        .unwrap();
    let all = spans(&bodies.lock().unwrap());
    let op = all
        .iter()
        .find(|s| s["name"] == "harness.operation")
        .unwrap_or_else(|| panic!("{all:#?}"));
    let link = &op["links"][0];
    assert_eq!(link["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(link["spanId"], "00f067aa0ba902b7");
    assert_ne!(op["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    let model = all.iter().find(|s| s["name"] == "harness.model").unwrap();
    assert_eq!(model["parentSpanId"], op["spanId"]);
}
