//! What the UHP examples share: printing a task as `uhp_inspect` does, and performing one
//! `TaskClient` request over a fresh hyper connection.
#![allow(dead_code)] // each example uses part of it

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness_uhp::client::ClientRequest;
use harness_uhp::{TaskAccumulator, TaskClient, TaskSummary};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The command line of an example: `--flag` alone or `--option VALUE`, in order; `-h` or
/// `--help` prints `usage` and exits 0; anything else, or an option without its value, exits 2.
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
        if a == "-h" || a == "--help" {
            println!("{usage}");
            std::process::exit(0);
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

/// Sends one request of `task` over a fresh connection to `addr` and feeds the answer to it,
/// calling `show` after each piece so the caller can drain its events.
pub async fn perform(
    addr: SocketAddr,
    task: &mut TaskClient,
    t: ClientRequest,
    show: &mut dyn FnMut(&mut TaskClient),
) {
    let fail = |task: &mut TaskClient| task.handle_transport_error(Instant::now(), t.id);
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return fail(task);
    };
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        return fail(task);
    };
    tokio::spawn(conn);
    let (parts, body) = t.request.into_parts();
    let req = hyper::Request::from_parts(parts, Full::new(Bytes::from(body)));
    let Ok(resp) = sender.send_request(req).await else {
        return fail(task);
    };
    task.handle_head(Instant::now(), t.id, resp.status().as_u16(), resp.headers());
    let mut body = resp.into_body();
    loop {
        // The client's own inactivity deadline bounds each read.
        let wait = task.poll_timeout().map_or(Duration::from_secs(5), |at| {
            at.saturating_duration_since(Instant::now())
        });
        match tokio::time::timeout(wait, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    task.handle_data(Instant::now(), t.id, data);
                    show(task);
                }
            }
            Ok(None) => return task.handle_end(Instant::now(), t.id),
            Ok(Some(Err(e))) => {
                println!("  !! body error: {e}");
                return fail(task);
            }
            Err(_) => return task.handle_timeout(Instant::now()),
        }
        if task.is_finished() {
            return; // the terminal event arrived; the rest of the body does not matter
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
