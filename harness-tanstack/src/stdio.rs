//! The stdio worker (feature `tokio`): frames in on stdin, frames out on stdout, one JSON
//! object per line ("`runHarnessWorker` reads frames from stdin and writes frames to
//! stdout").
//!
//! ```no_run
//! use harness_core::{Tools, agent::ToolLoopAgent, model::ScriptedModel};
//! use harness_tanstack::stdio::{StdioConfig, run_stdio};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     let agent = ToolLoopAgent::new("acme/assistant");
//!     let _ = run_stdio(agent, ScriptedModel::echo(), Tools::new(), StdioConfig::default()).await;
//!     // tokio reads stdin on a blocking thread that cannot be cancelled: exit, do not
//!     // wait for the runtime to shut down.
//!     std::process::exit(0)
//! }
//! ```
//!
//! The spec's rules: "The worker runs the frames in order, so an input right after the
//! subscribe is safe. The worker has no login. Every input runs with no user. The worker
//! sends no heartbeat. When stdin closes, the worker exits. It also exits after an
//! `unsupported_version` error." When stdin closes the worker first lets a running turn
//! finish and writes its events, so that a piped script sees the answer.
//!
//! A line is read as bytes: one that is not UTF-8 is decoded lossily (as Node's `readline`
//! does) and answered like any other bad frame (`invalid_frame`); one longer than
//! [`StdioConfig::max_line_bytes`] is skipped as it comes (memory stays bounded) and
//! answered `invalid_frame`. Neither ends the reading.

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_core::Harness;
use harness_core::model::Model;
use harness_core::tool::Tools;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::driver::{Service, run_turns};
use crate::host::{Host, HostConfig, Transport};
use crate::log::{EventLog, MemoryLog};

/// The worker's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StdioConfig {
    /// The host's settings (its access is `Open`: "The worker has no login").
    pub host: HostConfig,
    /// The longest line taken (default 16 MiB, the NDJSON limit of harness-core).
    pub max_line_bytes: usize,
    /// After stdin closes, how long the worker waits with nothing running before it exits
    /// (default 300 ms).
    pub linger: Duration,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            host: HostConfig::default(),
            max_line_bytes: 16 << 20,
            linger: Duration::from_millis(300),
        }
    }
}

/// Serves `harness` (on `model`, with `tools`) on the process's stdin and stdout, with a
/// memory log, until stdin closes (and the turn running then ends) or the host ends the
/// stream (`unsupported_version`). See the [module docs](self).
pub async fn run_stdio(
    harness: impl Harness + 'static,
    model: impl Model + 'static,
    tools: Tools,
    config: StdioConfig,
) -> std::io::Result<()> {
    let svc = Service::new(
        Host::new(config.host.clone(), MemoryLog::default()),
        Instant::now,
    );
    tokio::spawn(run_turns(svc.clone(), harness, model, tools));
    serve_stdio(&svc, tokio::io::stdin(), tokio::io::stdout(), &config).await
}

/// Serves one stdio connection of `svc` on any reader and writer (a child's pipes, a
/// test's duplex). The turns are run by whoever runs `svc` ([`run_turns`]).
pub async fn serve_stdio<L, R, W>(
    svc: &Service<L>,
    input: R,
    mut output: W,
    config: &StdioConfig,
) -> std::io::Result<()>
where
    L: EventLog + 'static,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let conn = svc.connect(Transport::Stdio, None, "stdio");
    let Ok(mut out) = conn.stream() else {
        return Ok(()); // a new connection's first stream
    };
    let mut lines = Lines::new(BufReader::new(input), config.max_line_bytes);
    let mut stdin_open = true;
    let busy = || svc.with_host(|h, _| h.is_busy());
    loop {
        tokio::select! {
            line = lines.next_line(), if stdin_open => match line {
                // "one JSON object per line": a blank line is no frame.
                Ok(Line::Text(l)) if l.trim().is_empty() => {}
                Ok(Line::Text(l)) => conn.handle_text(&l),
                // Not JSON, so the host answers `invalid_frame` (and the reading goes on).
                Ok(Line::TooLong) => conn.handle_text(&format!(
                    "a line longer than {} bytes",
                    config.max_line_bytes
                )),
                Ok(Line::Eof) | Err(_) => stdin_open = false,
            },
            item = out.next() => match item {
                Some(b) => {
                    output.write_all(&b).await?;
                    output.flush().await?;
                }
                // The host closed the stream (after `unsupported_version`): exit.
                None => break,
            },
            // stdin closed and nothing more came for a moment: exit.
            _ = tokio::time::sleep(config.linger), if !stdin_open && !busy() => break,
        }
    }
    output.flush().await
}

enum Line {
    Text(String),
    TooLong,
    Eof,
}

/// Lines as bytes, each at most `max` (the rest of a longer one is dropped as it comes).
/// Cancel-safe: what was read stays in `buf` across a `select!`.
struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    too_long: bool,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    fn new(r: R, max: usize) -> Self {
        Lines {
            r,
            buf: Vec::new(),
            too_long: false,
            max,
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
                if self.buf.len() + chunk.len() > self.max {
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
