//! The stdio worker runner (feature `tokio`) on in-memory pipes, against the spec's worker
//! rules (/work/shared/spec/tanstack-harness-wire-protocol.md:183-186): frames in order, an
//! input right after the subscribe, no user, exit when stdin closes; and lines bounded.
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::stdio::{StdioConfig, serve_stdio};
use harness_tanstack::{Host, HostConfig, MemoryLog, Service, run_turns};
use tokio::io::AsyncWriteExt;

async fn worker(input: Vec<u8>, cfg: StdioConfig) -> Vec<serde_json::Value> {
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    );
    tokio::spawn(run_turns(
        svc.clone(),
        ToolLoopAgent::new("a"),
        ScriptedModel::echo(),
        Tools::new(),
    ));
    let (mut to_worker, stdin) = tokio::io::duplex(1 << 16);
    let mut stdout = Vec::new();
    let feed = async move {
        to_worker.write_all(&input).await.unwrap();
        drop(to_worker); // stdin closes
    };
    let run = serve_stdio(&svc, stdin, &mut stdout, &cfg);
    let (r, ()) = tokio::time::timeout(Duration::from_secs(10), futures::future::join(run, feed))
        .await
        .expect("the worker exits once stdin closed and the turn ended");
    r.unwrap();
    String::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// "The worker runs the frames in order, so an input right after the subscribe is safe."
/// "When stdin closes, the worker exits." (it first lets the running turn finish).
#[tokio::test]
async fn an_input_right_after_the_subscribe_runs_and_the_worker_exits_at_eof() {
    let input = b"{\"type\":\"harness.subscribe\",\"threadId\":\"t\",\"v\":2}\n\
{\"type\":\"harness.input\",\"requestId\":\"r1\",\"input\":{\"op\":\"prompt\",\"message\":\"Hi\"}}\n";
    let frames = worker(input.to_vec(), StdioConfig::default()).await;
    assert_eq!(frames[0]["type"], "harness.hello");
    assert!(
        frames.iter().any(|f| f["type"] == "harness.receipt"
            && f["requestId"] == "r1"
            && f["status"] == "accepted"),
        "{frames:?}"
    );
    assert!(
        frames
            .iter()
            .any(|f| f["type"] == "harness.event" && f["event"]["type"] == "RUN_FINISHED"),
        "the turn ran to its end before the exit: {frames:?}"
    );
}

/// A line that is not UTF-8, and one over `max_line_bytes`, are answered `invalid_frame`
/// and the frames after them still run.
#[tokio::test]
async fn bad_and_overlong_lines_are_invalid_frames_and_reading_goes_on() {
    let mut input =
        b"{\"type\":\"harness.subscribe\",\"threadId\":\"t\",\"v\":2}\r\n\xff\xfe\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 5000));
    input.extend_from_slice(
        b"\n{\"type\":\"harness.input\",\"requestId\":\"r2\",\"input\":{\"op\":\"prompt\",\"message\":\"Hi\"}}\n",
    );
    let mut cfg = StdioConfig::default();
    cfg.max_line_bytes = 1024;
    let frames = worker(input, cfg).await;
    let invalid = frames
        .iter()
        .filter(|f| f["type"] == "harness.error" && f["code"] == "invalid_frame")
        .count();
    assert_eq!(invalid, 2, "{frames:?}");
    assert!(
        frames
            .iter()
            .any(|f| f["requestId"] == "r2" && f["status"] == "accepted"),
        "{frames:?}"
    );
}
