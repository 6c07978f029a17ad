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
//!
//! A line is read as bytes: one that is not UTF-8 is decoded lossily (as Node's `readline`
//! does) and answered like any other bad frame (`invalid_frame`), and one longer than 16 MiB
//! is skipped as it comes (memory stays bounded) and answered `invalid_frame`. Neither
//! ends the reading: before, a non-UTF-8 line read as the end of stdin, and every frame
//! after it was ignored. A line that is read is bounded in what it leaves behind: an input
//! whose message is over `HostConfig::max_input_bytes` (1 MiB) gets a `rejected` receipt
//! with reason `too_large`, and a message holding a lone surrogate (`"\ud800"`) is
//! `invalid_frame`; the log and the thread's state are the host's bounded ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::driver::{Service, run_turns};
use harness_tanstack::host::{Host, HostConfig, Transport};
use harness_tanstack::log::MemoryLog;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Stdin};

/// The longest line taken (the NDJSON limit of harness-core).
const MAX_LINE_BYTES: usize = 16 << 20;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let svc = Service::new(
        Host::new(HostConfig::default(), MemoryLog::default()),
        Instant::now,
    );
    tokio::spawn(run_turns(
        svc.clone(),
        ToolLoopAgent::new("acme/assistant"),
        ScriptedModel::echo(),
        Tools::new(),
    ));
    let conn = svc.connect(Transport::Stdio, None, "stdio");
    let Ok(mut out) = conn.stream() else {
        return; // a new connection's first stream
    };
    let mut stdout = tokio::io::stdout();
    let mut lines = Lines::new(tokio::io::stdin());
    let mut stdin_open = true;
    loop {
        tokio::select! {
            line = lines.next_line(), if stdin_open => match line {
                // "one JSON object per line": a blank line is no frame (as in the NDJSON
                // decoder of harness-core).
                Ok(Line::Text(l)) if l.trim().is_empty() => {}
                Ok(Line::Text(l)) => conn.handle_text(&l),
                // Not JSON, so the host answers `invalid_frame` (and the reading goes on).
                Ok(Line::TooLong) => {
                    conn.handle_text(&format!("a line longer than {MAX_LINE_BYTES} bytes"))
                }
                Ok(Line::Eof) | Err(_) => stdin_open = false,
            },
            item = out.next() => match item {
                Some(b) => {
                    if stdout.write_all(&b).await.is_err() {
                        break;
                    }
                    let _ = stdout.flush().await;
                }
                // The host closed the stream (after `unsupported_version`): exit.
                None => break,
            },
            // stdin closed and nothing more came for a moment: exit.
            _ = tokio::time::sleep(Duration::from_millis(300)), if !stdin_open && !busy(&svc) => break,
        }
    }
    let _ = stdout.flush().await;
    // Not a return: tokio reads stdin with a blocking read on a thread of its own that
    // cannot be cancelled, and the runtime's shutdown waits for it, so after
    // `unsupported_version` a worker whose stdin stayed open never exited.
    std::process::exit(0)
}

/// Whether a turn is still running (or an input waiting) on some thread.
fn busy(svc: &Service<MemoryLog>) -> bool {
    svc.with_host(|h, _| h.is_busy())
}

enum Line {
    Text(String),
    TooLong,
    Eof,
}

/// Lines of stdin as bytes, each at most `MAX_LINE_BYTES` (the rest of a longer one is
/// dropped as it comes). Cancel-safe: what was read stays in `buf` across a `select!`.
struct Lines {
    r: BufReader<Stdin>,
    buf: Vec<u8>,
    too_long: bool,
}

impl Lines {
    fn new(stdin: Stdin) -> Self {
        Lines {
            r: BufReader::new(stdin),
            buf: Vec::new(),
            too_long: false,
        }
    }

    async fn next_line(&mut self) -> std::io::Result<Line> {
        loop {
            let avail = self.r.fill_buf().await?;
            if avail.is_empty() {
                // EOF: a last line without its newline is still a line.
                if self.buf.is_empty() && !self.too_long {
                    return Ok(Line::Eof);
                }
                return Ok(self.take());
            }
            let (chunk, used, end) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            if !self.too_long {
                if self.buf.len() + chunk.len() > MAX_LINE_BYTES {
                    self.too_long = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            self.r.consume(used);
            if end {
                return Ok(self.take());
            }
        }
    }

    fn take(&mut self) -> Line {
        if std::mem::take(&mut self.too_long) {
            return Line::TooLong;
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let line = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        Line::Text(line)
    }
}
