//! A dropped UHP stream, recovered from the stored response without running the task twice.
//!
//! ```text
//! cargo run --example uhp_recover
//! ```
//!
//! A tiny UHP server on 127.0.0.1 (axum) runs each task in the background and streams its
//! events; this one drops the connection after a dozen events, as a proxy or a flaky network
//! would. The client is harness-uhp's `HttpTaskClient` (feature `client-hyper`): it notices the
//! stream ended without a terminal event, fetches `GET /v1/responses/{id}` (polling while the
//! task still runs) and finishes the task from it. The server counts executions: one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use bytes::Bytes;
use futures::StreamExt;
use harness_uhp::builder::StreamBuilder;
use harness_uhp::client::{CreateRequest, HttpTaskClient, TaskClientConfig, TaskEvent};
use harness_uhp::{ResponseStatus, RetryPolicy, StreamEventKind};

/// The server's state: tasks by id, idempotency keys, and how many tasks it ever ran.
#[derive(Default)]
struct Server {
    tasks: Mutex<HashMap<String, Arc<Mutex<StreamBuilder>>>>,
    keys: Mutex<HashMap<String, String>>,
    executions: AtomicUsize,
    creates: AtomicUsize,
    drop_after: usize,
}

const WORDS: &[&str] = &[
    "The",
    " stream",
    " is",
    " an",
    " optimisation;",
    " the",
    " stored",
    " response",
    " is",
    " the",
    " source",
    " of",
    " truth,",
    " so",
    " a",
    " dropped",
    " connection",
    " costs",
    " latency,",
    " not",
    " correctness.",
];

/// The "agent": produces the task's events over time, whoever is listening.
async fn run_task(task: Arc<Mutex<StreamBuilder>>) {
    task.lock().unwrap().message_start();
    for w in WORDS {
        tokio::time::sleep(Duration::from_millis(15)).await;
        task.lock().unwrap().message_delta(w);
    }
    let mut t = task.lock().unwrap();
    t.message_end(&[]);
    t.completed();
}

async fn create(State(srv): State<Arc<Server>>, headers: HeaderMap) -> impl IntoResponse {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    srv.creates.fetch_add(1, Ordering::SeqCst);
    let existing = srv.keys.lock().unwrap().get(&key).cloned();
    let id = match existing {
        Some(id) => id, // a repeated key: the first request's task, not a second run
        None => {
            let n = srv.executions.fetch_add(1, Ordering::SeqCst) + 1;
            let id = format!("resp_{n:016x}");
            let mut b = StreamBuilder::new(&id);
            b.created();
            let task = Arc::new(Mutex::new(b));
            srv.tasks.lock().unwrap().insert(id.clone(), task.clone());
            srv.keys.lock().unwrap().insert(key, id.clone());
            tokio::spawn(run_task(task));
            id
        }
    };
    let task = srv.tasks.lock().unwrap()[&id].clone();
    let drop_after = srv.drop_after;
    // Stream the task's events as they appear; after `drop_after` of them, fail the body,
    // which makes hyper cut the connection mid-stream.
    let stream = futures::stream::unfold(0usize, move |sent| {
        let task = task.clone();
        async move {
            if sent == drop_after {
                return Some((Err(std::io::Error::other("connection dropped")), sent + 1));
            }
            loop {
                let next = task.lock().unwrap().sse_event_at(sent);
                match next {
                    Some(ev) => return Some((Ok(Bytes::from(ev)), sent + 1)),
                    None if task.lock().unwrap().response().status.is_terminal() => return None,
                    None => tokio::time::sleep(Duration::from_millis(2)).await,
                }
            }
        }
    });
    (
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("uhp-version", "2026-08-11"),
        ],
        Body::from_stream(stream),
    )
}

async fn retrieve(State(srv): State<Arc<Server>>, Path(id): Path<String>) -> impl IntoResponse {
    let task = srv.tasks.lock().unwrap().get(&id).cloned();
    match task {
        Some(t) => {
            let json = serde_json::to_vec(t.lock().unwrap().response()).unwrap();
            (StatusCode::OK, [("content-type", "application/json")], json)
        }
        None => (
            StatusCode::NOT_FOUND,
            [("content-type", "application/json")],
            br#"{"error":{"type":"invalid_request_error","code":"response_not_found","message":"No such response.","param":null}}"#.to_vec(),
        ),
    }
}

fn show(ev: TaskEvent) {
    match ev {
        TaskEvent::Event(e) => match e.kind() {
            StreamEventKind::OutputTextDelta { delta, .. } => print!("{delta}"),
            StreamEventKind::Created(r) => {
                println!("  <- response.created {} ({})", r.id, r.status)
            }
            _ => {}
        },
        TaskEvent::StreamLost { response_id } => {
            println!(
                "\n  !! stream ended before its terminal event: GET /v1/responses/{response_id}"
            )
        }
        TaskEvent::Retrying { kind, failures, .. } => {
            println!("  .. retrying {kind:?} (failures: {failures})")
        }
        TaskEvent::Finished => println!("  == task finished"),
        TaskEvent::Failed(e) => println!("  == task failed: {e}"),
        other => println!("  {other:?}"),
    }
}

pub async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let srv = Arc::new(Server {
        drop_after: 12,
        ..Server::default()
    });
    let app = Router::new()
        .route("/v1/responses", post(create))
        .route("/v1/responses/{id}", get(retrieve))
        .with_state(srv.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("  UHP server on http://{addr} (drops every stream after 12 events)");

    let mut cfg = TaskClientConfig::new(format!("http://{addr}"));
    cfg.poll_interval = Duration::from_millis(50);
    // The client: harness-uhp's HTTP driver around the sans-IO TaskClient.
    let policy = RetryPolicy::new();
    println!(
        "  -> POST /v1/responses  Idempotency-Key: {}",
        policy.idempotency_key()
    );
    let body = CreateRequest::new("Explain why the stream is an optimisation.");
    let mut run = HttpTaskClient::new(cfg)?.run_with_policy(body, policy);
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), run.next()).await? {
        show(ev);
    }
    let acc = run.finish().await?;
    println!("  status:     {}", acc.status());
    println!("  text:       {}", acc.text());
    println!("  from:       {:?}", acc.terminal_source());
    println!(
        "  sequence:   ok={} (events seen before the drop: {})",
        acc.sequence().ok,
        acc.events_seen()
    );
    let runs = srv.executions.load(Ordering::SeqCst);
    let creates = srv.creates.load(Ordering::SeqCst);
    println!("  server ran the task {runs} time(s); the client sent {creates} create request(s)");
    if acc.status() != &ResponseStatus::Completed
        || acc.text() != WORDS.concat()
        || runs != 1
        || creates != 1
    {
        return Err("recovery did not give the completed task exactly once".into());
    }
    Ok(())
}

#[path = "common/trace_arg.rs"]
mod trace_arg;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _trace = trace_arg::install_if_asked();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!(
                "usage: uhp_recover [--trace[=debug]] [--otlp URL]   (a loopback UHP server drops the stream; the task is recovered from the stored response, created once)"
            );
            return Ok(());
        }
        if trace_arg::is_trace_flag(&a) || a.starts_with("--otlp=") {
            continue;
        }
        if a == "--otlp" {
            args.next();
            continue;
        }
        return Err(format!("unexpected argument {a}; see --help").into());
    }
    demo().await
}
