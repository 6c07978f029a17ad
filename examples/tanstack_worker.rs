//! The TanStack stdio worker: frames in on stdin, frames out on stdout, one JSON object per
//! line, serving the demo agent (`ToolLoopAgent` on the echoing `ScriptedModel`).
//!
//! ```text
//! printf '%s\n' '{"type":"harness.subscribe","threadId":"thread-1","v":2}' \
//!   '{"type":"harness.input","requestId":"req-1","input":{"op":"prompt","message":"Hello"}}' \
//!   | cargo run --example tanstack_worker
//! ```
//!
//! "The worker runs the frames in order, so an input right after the subscribe is safe. The
//! worker has no login. Every input runs with no user. The worker sends no heartbeat. When
//! stdin closes, the worker exits. It also exits after an `unsupported_version` error."
//! (When stdin closes the worker first lets a running turn finish and writes its events, so
//! that a piped script like the one above sees the answer.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::driver::{Service, Tools, run_turns};
use harness_tanstack::host::{Host, HostConfig, Transport};
use harness_tanstack::log::MemoryLog;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Arc::new(Instant::now),
    );
    tokio::spawn(run_turns(
        svc.clone(),
        Arc::new(ToolLoopAgent::new("acme/assistant")),
        Arc::new(ScriptedModel::echo()),
        Tools::new(),
    ));
    let conn = svc.connect(Transport::Stdio, None, "stdio");
    let mut out = conn.stream();
    let mut stdout = tokio::io::stdout();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    loop {
        tokio::select! {
            line = lines.next_line(), if stdin_open => match line {
                // "one JSON object per line": a blank line is no frame (as in the NDJSON
                // decoder of harness-core).
                Ok(Some(l)) if l.trim().is_empty() => {}
                Ok(Some(l)) => conn.handle_text(&l),
                _ => stdin_open = false,
            },
            item = out.next() => match item {
                Some(b) => {
                    if stdout.write_all(&b).await.is_err() {
                        return;
                    }
                    let _ = stdout.flush().await;
                }
                // The host closed the stream (after `unsupported_version`): exit.
                None => return,
            },
            // stdin closed and nothing more came for a moment: exit.
            _ = tokio::time::sleep(Duration::from_millis(300)), if !stdin_open && !busy(&svc) => return,
        }
    }
}

/// Whether a turn is still running (or an input waiting) on some thread.
fn busy(svc: &Service<MemoryLog>) -> bool {
    svc.with_host(|h, _| h.is_busy())
}
