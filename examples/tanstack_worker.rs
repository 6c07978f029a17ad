//! The TanStack stdio worker: frames in on stdin, frames out on stdout, one JSON object per
//! line, serving the demo agent (`ToolLoopAgent` on the echoing `ScriptedModel`).
//!
//! ```text
//! printf '%s\n' '{"type":"harness.subscribe","threadId":"thread-1","v":2}' \
//!   '{"type":"harness.input","requestId":"req-1","input":{"op":"prompt","message":"Hello"}}' \
//!   | cargo run --example tanstack_worker [-- --model scripted|openai:MODEL]
//! ```
//!
//! `--model openai:MODEL` answers with an OpenAI-compatible server (`OPENAI_API_KEY`,
//! `OPENAI_BASE_URL`); the default, the echoing scripted model, needs no key and no network.
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
//!
//! The loop is the library's stdio runner (`harness_tanstack::stdio::run_stdio`, feature
//! `tokio`).

use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::model::ScriptedModel;
use harness_tanstack::stdio::{StdioConfig, run_stdio};

#[path = "common/model_arg.rs"]
mod model_arg;

const USAGE: &str = "usage: tanstack_worker [--model scripted|openai:MODEL]";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}\n  {}", model_arg::HELP);
        return;
    }
    let model = model_arg::from_args(&mut args, ScriptedModel::echo).unwrap_or_else(|e| {
        eprintln!("tanstack_worker: {e}\n{USAGE}");
        std::process::exit(2)
    });
    if let Some(other) = args.first() {
        eprintln!("tanstack_worker: unknown argument {other:?}\n{USAGE}");
        std::process::exit(2)
    }
    let agent = ToolLoopAgent::new("acme/assistant");
    let _ = run_stdio(agent, model, Tools::new(), StdioConfig::default()).await;
    // Not a return: tokio reads stdin with a blocking read on a thread of its own that
    // cannot be cancelled, and the runtime's shutdown waits for it, so after
    // `unsupported_version` a worker whose stdin stayed open never exited.
    std::process::exit(0)
}
