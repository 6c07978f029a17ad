//! Answers questions about the protocol's mechanics, one JSON object per line on stdin, one
//! answer per line on stdout: the Rust side of the differential test of everything the Python
//! peer exports besides the stream (scripts/interop/uhp/differential.py).
//!
//! ```text
//! echo '{"op":"is_retryable","code":"session_busy"}' | cargo run --example uhp_probe
//! ```
//!
//! Ops: `is_retryable {code, type, status}`, `check_discovery {doc}`,
//! `object_type_for_id {id}`, `check_sequence {seqs}`, `output_text {response}`,
//! `artifacts {response}`, `backoff_seconds {attempt, retry_after}`, `idempotency_key {prefix}`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, Write};

use harness_uhp::protocol::{Discovery, ObjectKind, object_kind};
use harness_uhp::retry::{IdempotencyKey, backoff_seconds, is_retryable};
use harness_uhp::{Response, SequenceCheck};
use serde_json::{Value, json};

fn answer(q: &Value) -> Value {
    let s = |k: &str| q.get(k).and_then(Value::as_str);
    match s("op").unwrap_or("") {
        "is_retryable" => {
            let status = match q.get("status") {
                None | Some(Value::Null) => None,
                // An HTTP status is three digits: 66039 is not 503 wrapped around.
                Some(v) => match v.as_u64().and_then(|n| u16::try_from(n).ok()) {
                    Some(n) if (100..=999).contains(&n) => Some(n),
                    _ => return json!({"error": format!("status {v} is not an HTTP status")}),
                },
            };
            json!(is_retryable(s("code"), s("type"), status))
        }
        "check_discovery" => match serde_json::from_value::<Discovery>(q["doc"].clone()) {
            Ok(d) => json!(d.check().is_empty()),
            Err(_) => json!(false),
        },
        "object_type_for_id" => json!(s("id").and_then(object_kind).map(|k| match k {
            ObjectKind::Harness => "harness",
            ObjectKind::Response => "response",
            ObjectKind::Session => "session",
            ObjectKind::File => "file",
            ObjectKind::Container => "container",
            _ => "other",
        })),
        "check_sequence" => {
            let mut check = SequenceCheck::new();
            for n in q["seqs"].as_array().into_iter().flatten() {
                check.record(n.as_u64());
            }
            let r = check.report();
            json!([r.ok, r.missing_numbers().collect::<Vec<_>>()])
        }
        "output_text" => match Response::from_value_lenient(q["response"].clone()) {
            Ok(r) => json!(r.output_text()),
            Err(e) => json!({"error": e.to_string()}),
        },
        "artifacts" => match Response::from_value_lenient(q["response"].clone()) {
            // As annotations, with their `type`, the way the peer returns them.
            Ok(r) => json!(
                r.annotations()
                    .filter(|a| a.as_container_file_citation().is_some())
                    .collect::<Vec<_>>()
            ),
            Err(e) => json!({"error": e.to_string()}),
        },
        "backoff_seconds" => {
            let attempt = q["attempt"].as_u64().unwrap_or(0).min(u64::from(u32::MAX)) as u32;
            let retry_after = match &q["retry_after"] {
                Value::Null => None,
                Value::String(s) if s == "inf" => Some(f64::INFINITY),
                Value::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
                v => v.as_f64(),
            };
            let mut rng = fastrand::Rng::with_seed(1);
            json!(backoff_seconds(attempt, retry_after, &mut rng))
        }
        "idempotency_key" => json!(IdempotencyKey::generate(s("prefix").unwrap_or("uhp")).as_str()),
        op => json!({"error": format!("unknown op {op:?}")}),
    }
}

const USAGE: &str = "usage: uhp_probe < questions.jsonl   (one JSON question per line, one answer per line; see the header of examples/uhp_probe.rs for the ops) [--trace[=debug]] [--otlp URL]";

#[path = "common/trace_arg.rs"]
mod trace_arg;

fn main() {
    let _trace = trace_arg::install_if_asked();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            return;
        }
        if trace_arg::is_trace_flag(&a) || a.starts_with("--otlp=") {
            continue;
        }
        if a == "--otlp" && args.next().is_some() {
            continue;
        }
        eprintln!("uhp_probe: unexpected argument {a}\n{USAGE}");
        std::process::exit(2);
    }
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("uhp_probe: read error: {e}");
                std::process::exit(1);
            }
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        // One answer per question line, even for a line that is not JSON (or not UTF-8).
        let a = match serde_json::from_str::<Value>(&text) {
            Ok(q) => answer(&q),
            Err(e) => json!({"error": format!("not a JSON question: {e}")}),
        };
        match writeln!(out, "{a}") {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return, // `| head`
            Err(e) => {
                eprintln!("uhp_probe: write error: {e}");
                std::process::exit(1);
            }
        }
    }
}
