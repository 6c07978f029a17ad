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
//! tool_calls, annotations, error, sequence {ok, missing, duplicates, duplicate_count,
//! out_of_order, out_of_order_count, unnumbered}, findings, events (as received),
//! events_seen.

use std::io::Read;

use harness_uhp::{StreamDecoder, TaskAccumulator};
use serde_json::Value;

#[path = "common/trace_arg.rs"]
mod trace_arg;
#[path = "uhp_shared/mod.rs"]
mod uhp_shared;

const USAGE: &str = "usage: uhp_inspect [--chunk whole|N|random:SEED] [--no-events] [--trace[=debug]] [--otlp URL] [FILE|-]";

fn usage_error(why: &str) -> ! {
    eprintln!("uhp_inspect: {why}\n{USAGE}");
    std::process::exit(2);
}

fn main() {
    let _trace = trace_arg::install_if_asked();
    let mut chunk = "whole".to_owned();
    let mut file: Option<String> = None;
    let mut with_events = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--chunk" => {
                chunk = args
                    .next()
                    .unwrap_or_else(|| usage_error("--chunk needs a value"))
            }
            "--no-events" => with_events = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            t if trace_arg::is_trace_flag(t) || t.starts_with("--otlp=") => {}
            "--otlp" => {
                args.next()
                    .unwrap_or_else(|| usage_error("--otlp needs a URL"));
            }
            "-" => file = Some(a),
            _ if a.starts_with('-') => usage_error(&format!("unknown option {a}")),
            _ if file.is_none() => file = Some(a),
            _ => usage_error("one input at most"),
        }
    }
    // How the bytes are pushed; the answer must not depend on it.
    let mut sizes: Box<dyn FnMut() -> usize> = match chunk.as_str() {
        "whole" => Box::new(|| usize::MAX),
        s if s.starts_with("random:") => {
            let seed = s[7..]
                .parse()
                .unwrap_or_else(|_| usage_error(&format!("bad seed in --chunk {s}")));
            let mut rng = fastrand::Rng::with_seed(seed);
            Box::new(move || rng.usize(1..=4096))
        }
        s => match s.parse::<usize>() {
            Ok(n) if n > 0 => Box::new(move || n),
            _ => usage_error(&format!(
                "--chunk {s}: expected whole, a size ≥ 1 or random:SEED"
            )),
        },
    };

    // The body is read as it arrives (a live `curl -sN` works), never all at once.
    let mut input: Box<dyn Read> = match file.as_deref() {
        None | Some("-") => Box::new(std::io::stdin().lock()),
        Some(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("uhp_inspect: {path}: {e}");
                std::process::exit(1);
            }
        },
    };

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
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let got = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("uhp_inspect: read error: {e}");
                std::process::exit(1);
            }
        };
        let mut rest = &buf[..got];
        while !rest.is_empty() {
            let n = sizes().min(rest.len());
            dec.push(&rest[..n]);
            rest = &rest[n..];
            drain(&mut dec, &mut task);
        }
    }
    let end = dec.finish();
    drain(&mut dec, &mut task); // complete events finish() found come before its report
    if let Err(f) = end {
        task.add_finding(&f);
    }

    uhp_shared::print_task(&task, with_events.then_some(events), "uhp_inspect");
}
