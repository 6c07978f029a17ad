//! Decode a captured UHP event stream and print the accumulated task as JSON.
//!
//! ```text
//! cargo run --example uhp_inspect -- capture.sse
//! curl -sN … | cargo run --example uhp_inspect
//! cargo run --example uhp_inspect -- --chunk 7 capture.sse      # push 7 bytes at a time
//! cargo run --example uhp_inspect -- --chunk random:42 capture.sse
//! cargo run --example uhp_inspect -- --no-events capture.sse
//! ```
//!
//! Keys: status (`in_progress` until a terminal event), terminal, text, reasoning,
//! tool_calls, annotations, error, sequence {ok, missing, duplicates, out_of_order,
//! unnumbered}, findings, events (as received).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;

use harness_uhp::{StreamDecoder, TaskAccumulator};
use serde_json::{Value, json};

fn usage() -> ! {
    eprintln!("usage: uhp_inspect [--chunk whole|N|random:SEED] [--no-events] [FILE|-]");
    std::process::exit(2);
}

fn main() {
    let mut chunk = "whole".to_owned();
    let mut file: Option<String> = None;
    let mut with_events = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--chunk" => chunk = args.next().unwrap_or_else(|| usage()),
            "--no-events" => with_events = false,
            "-h" | "--help" => usage(),
            _ if file.is_none() => file = Some(a),
            _ => usage(),
        }
    }
    let mut body = Vec::new();
    match file.as_deref() {
        None | Some("-") => {
            std::io::stdin().read_to_end(&mut body).expect("read stdin");
        }
        Some(path) => body = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}")),
    }

    // How the bytes are pushed; the answer must not depend on it.
    let sizes: Box<dyn FnMut() -> usize> = match chunk.as_str() {
        "whole" => Box::new(|| usize::MAX),
        s if s.starts_with("random:") => {
            let mut rng = fastrand::Rng::with_seed(s[7..].parse().unwrap_or_else(|_| usage()));
            Box::new(move || rng.usize(1..=4096))
        }
        s => {
            let n: usize = s.parse().unwrap_or_else(|_| usage());
            Box::new(move || n.max(1))
        }
    };
    let mut sizes = sizes;

    let mut dec = StreamDecoder::new();
    let mut task = TaskAccumulator::new();
    let mut events: Vec<Value> = Vec::new();
    let mut drain = |dec: &mut StreamDecoder, task: &mut TaskAccumulator| loop {
        match dec.poll_event() {
            Ok(Some(ev)) => {
                task.add(&ev);
                if with_events {
                    events.push(ev.to_value());
                }
            }
            Ok(None) => break,
            Err(finding) => task.add_finding(&finding),
        }
    };
    let mut rest = &body[..];
    while !rest.is_empty() {
        let n = sizes().min(rest.len());
        dec.push(&rest[..n]);
        rest = &rest[n..];
        drain(&mut dec, &mut task);
    }
    let end = dec.finish();
    drain(&mut dec, &mut task); // complete events finish() found come before its report
    if let Err(f) = end {
        task.add_finding(&f);
    }

    let mut out = serde_json::to_value(task.summary()).unwrap();
    if with_events {
        out["events"] = Value::Array(events);
    }
    out["events_seen"] = json!(task.events_seen());
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
