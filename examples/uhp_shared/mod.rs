//! What the UHP examples share: their command lines, printing a task as `uhp_inspect` does,
//! and one plain request over a fresh hyper connection (a task's own requests go through
//! harness-uhp's `HttpTaskClient`).
#![allow(dead_code)] // each example uses part of it

use std::io::Write;
use std::net::SocketAddr;

use bytes::Bytes;
use harness_uhp::{TaskAccumulator, TaskSummary};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// What `--help` says about the tracing flags every UHP example takes.
pub const TRACE_HELP: &str = "  --trace[=debug]: print the spans (tasks, turns, model and tool calls) on stderr\n  \
--otlp URL: export them to an OpenTelemetry collector (OTLP/HTTP, e.g. http://127.0.0.1:4318)";

/// The command line of an example: `--flag` alone or `--option VALUE` (or `--option=VALUE`),
/// in order; `--trace[=LEVEL]` and `--otlp URL` are skipped (`common/trace_arg.rs` reads
/// them); `-h` or `--help` prints `usage` and exits 0; anything else, or an option without
/// its value, exits 2.
pub fn parse_args(
    name: &str,
    usage: &str,
    flags: &[&str],
    options: &[&str],
) -> Vec<(String, Option<String>)> {
    let fail = |why: String| -> ! {
        eprintln!("{name}: {why}\n{usage}");
        std::process::exit(2);
    };
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // `--option=value` is `--option value`.
        if let Some((opt, v)) = a.split_once('=').filter(|(o, _)| options.contains(o)) {
            out.push((opt.to_owned(), Some(v.to_owned())));
            continue;
        }
        if a == "-h" || a == "--help" {
            println!("{usage}\n{TRACE_HELP}");
            std::process::exit(0);
        } else if a == "--trace" || a.starts_with("--trace=") || a.starts_with("--otlp=") {
            // `common/trace_arg.rs` read them already.
        } else if a == "--otlp" {
            args.next()
                .unwrap_or_else(|| fail(format!("{a} needs a value")));
        } else if flags.contains(&a.as_str()) {
            out.push((a, None));
        } else if options.contains(&a.as_str()) {
            let v = args
                .next()
                .unwrap_or_else(|| fail(format!("{a} needs a value")));
            out.push((a, Some(v)));
        } else {
            fail(format!("unknown argument {a}"));
        }
    }
    out
}

/// What is printed: the summary's keys in their order (status first), then the events.
#[derive(serde::Serialize)]
struct Output {
    #[serde(flatten)]
    summary: TaskSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<Value>>,
    events_seen: u64,
}

/// Prints the task as pretty JSON: the accumulator's summary, then `events` if given.
/// A closed stdout (`… | head`) is the reader's choice, not an error.
pub fn print_task(task: &TaskAccumulator, events: Option<Vec<Value>>, name: &str) {
    let out = Output {
        summary: task.summary(),
        events,
        events_seen: task.events_seen(),
    };
    let json = match serde_json::to_string_pretty(&out) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{json}").and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("{name}: write error: {e}");
            std::process::exit(1);
        }
    }
}

/// Sends one request and reads its whole answer: status and body.
pub async fn send(
    addr: SocketAddr,
    req: http::Request<Vec<u8>>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let (parts, body) = req.into_parts();
    let resp = sender
        .send_request(hyper::Request::from_parts(
            parts,
            Full::new(Bytes::from(body)),
        ))
        .await
        .map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    Ok((status, body.to_vec()))
}
