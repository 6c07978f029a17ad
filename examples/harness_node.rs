//! A harness node: serves a built-in harness as the agentsessions `Harness` gRPC service, the
//! way agentsessions' `cmd/harnessnode` does, for a host to drive over `Harness.Connect`.
//!
//! ```text
//! cargo run --example harness_node -- --addr 127.0.0.1:8090 --harness echo
//! cargo run --example harness_node -- --addr unix:///tmp/h.sock --harness faq
//! cargo run --example sessions -- --dir ./journal --harness mine=127.0.0.1:8090 exec --harness mine --input hello
//! ```
//!
//! Harnesses: `echo` and `chat` (the spec's reference harnesses), `counter` (the
//! memory-snapshot one: a host that does not own this process refuses it), `faq` (the tour's
//! FAQ agent, whose `refund` tool is gated). Bind loopback unless the host is on another
//! machine: whatever answers here is trusted by the host, over cleartext.

use std::process::ExitCode;

use harness_core::Harness;
use harness_core::agent::faq::FaqAgent;
use harness_sessions::connect::HarnessAddress;
use harness_sessions::connect::grpc::serve;
use harness_sessions::harnesses::{ChatHarness, CounterHarness, EchoHarness};

const USAGE: &str = "usage: harness_node [--addr ADDRESS] [--harness echo|chat|counter|faq]
  --addr     host:port or unix:PATH (default 127.0.0.1:8090)
  --harness  the harness to serve (default echo)";

fn harness(name: &str) -> Option<Box<dyn Harness>> {
    Some(match name {
        "echo" => Box::new(EchoHarness),
        "chat" => Box::new(ChatHarness::new("builtin")),
        "counter" => Box::new(CounterHarness::new()),
        // The FAQ agent offers its tools; the host runs them (and gates `refund`).
        "faq" => Box::new(FaqAgent::new()),
        _ => return None,
    })
}

fn main() -> ExitCode {
    let mut addr = "127.0.0.1:8090".to_owned();
    let mut name = "echo".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let slot = match a.as_str() {
            "--addr" => &mut addr,
            "--harness" => &mut name,
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        };
        match args.next() {
            Some(v) => *slot = v,
            None => {
                eprintln!("{a} needs a value\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let address: HarnessAddress = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let Some(h) = harness(&name) else {
        eprintln!("unknown harness {name:?}\n{USAGE}");
        return ExitCode::from(2);
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("harness_node serving {name} at {address}");
    match rt.block_on(serve(&address, h)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harness_node: {e}");
            ExitCode::FAILURE
        }
    }
}
