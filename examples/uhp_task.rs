//! Runs one task against a UHP server with harness-uhp's HTTP driver (`HttpTaskClient`,
//! feature `client-hyper`: retries with one idempotency key, recovery of a dropped stream from
//! the stored response) and prints it as `uhp_inspect` does.
//!
//! ```text
//! cargo run --example uhp_task -- --url http://127.0.0.1:8080 --api-key KEY --input "Reply with exactly: ok"
//! cargo run --example uhp_task -- --url … --api-key KEY --input TEXT --harness chrn_… --no-stream
//! ```
//!
//! Exits 0 when the task reached a terminal state (whatever it is), 1 when it could not be
//! finished.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use harness_uhp::client::{CreateRequest, HttpTaskClient, TaskClientConfig, TaskEvent, requests};
use harness_uhp::{Response, TaskAccumulator, idempotency_key};
use serde_json::Value;

#[path = "common/trace_arg.rs"]
mod trace_arg;
#[path = "uhp_shared/mod.rs"]
mod uhp_shared;

const USAGE: &str = "usage: uhp_task --url http://HOST:PORT --api-key KEY --input TEXT [--harness ID] [--no-stream] [--trace[=debug]] [--otlp URL]";

fn usage_error(why: &str) -> ! {
    eprintln!("uhp_task: {why}\n{USAGE}");
    std::process::exit(2);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _trace = trace_arg::install_if_asked();
    let (mut url, mut key, mut input, mut harness, mut stream) = (None, None, None, None, true);
    let opts = ["--url", "--api-key", "--input", "--harness"];
    for (name, value) in uhp_shared::parse_args("uhp_task", USAGE, &["--no-stream"], &opts) {
        match name.as_str() {
            "--url" => url = value,
            "--api-key" => key = value,
            "--input" => input = value,
            "--harness" => harness = value,
            _ => stream = false,
        }
    }
    let url = url.unwrap_or_else(|| usage_error("--url is required"));
    let input = input.unwrap_or_else(|| usage_error("--input is required"));
    let hostport = url
        .strip_prefix("http://")
        .unwrap_or_else(|| usage_error("--url must be http://HOST:PORT"))
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let addr: SocketAddr = tokio::net::lookup_host(&hostport)
        .await?
        .next()
        .ok_or("--url names no address")?;

    let mut cfg = TaskClientConfig::new(url);
    if let Some(k) = key.or_else(|| std::env::var("UHP_API_KEY").ok()) {
        cfg = cfg.with_token(k);
    }
    cfg.poll_interval = Duration::from_millis(200);
    let mut body = CreateRequest::new(Value::from(input));
    if let Some(h) = &harness {
        body = body.harness(h);
    }

    if !stream {
        // One non-streaming create, with an idempotency key; the answer is the response.
        let req = requests::create(&cfg, &body, &idempotency_key(), false)?;
        let (status, bytes) = uhp_shared::send(addr, req).await?;
        if status != 200 {
            eprintln!(
                "uhp_task: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
            std::process::exit(1);
        }
        let resp: Response = serde_json::from_slice(&bytes)?;
        let mut acc = TaskAccumulator::new();
        acc.apply_response(&resp);
        uhp_shared::print_task(&acc, None, "uhp_task");
        return Ok(());
    }

    // Streamed: the HTTP driver runs the task to its end (retries with one idempotency key,
    // a dropped stream read back from the stored response) and streams its events.
    let mut run = HttpTaskClient::new(cfg)?.run(body);
    let mut events: Vec<Value> = Vec::new();
    while let Some(ev) = run.next().await {
        match ev {
            TaskEvent::Event(e) => events.push(e.to_value()),
            TaskEvent::StreamLost { response_id } => {
                eprintln!("uhp_task: stream lost; reading {response_id} back")
            }
            TaskEvent::Retrying { kind, failures, .. } => {
                eprintln!("uhp_task: retrying {kind:?} ({failures} failures)")
            }
            _ => {}
        }
    }
    if let Some(task) = run.accumulator() {
        uhp_shared::print_task(task, Some(events), "uhp_task");
    }
    if let Err(e) = run.finish().await {
        eprintln!("uhp_task: {e}");
        std::process::exit(1);
    }
    Ok(())
}
