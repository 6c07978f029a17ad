//! A jambonz harness over a real WebSocket: the demo FAQ agent (the built-in deterministic
//! model, a `get_hours` tool that jambonz runs, its own gated `refund` tool that the driver's
//! policy denies on the phone, a `hangup` command on goodbye) served by
//! `harness_jambonz::server::JambonzServer`, with the upgrade check. `--agent minimal` serves the
//! spec's minimal harness instead (what `scripts/load/jambonz_vs_node.py` loads). Ctrl-C
//! stops it gracefully. `--model openai:MODEL` runs the agent on an OpenAI-compatible server
//! (`OPENAI_API_KEY`, `OPENAI_BASE_URL`); the default, the built-in scripted model, needs no
//! key and no network.
//!
//! ```text
//! cargo run --example jambonz_server -- --addr 127.0.0.1:8080 [--secret S] [--agent faq|minimal] [--quiet] [--threads N]
//!     [--model scripted|openai:MODEL] [--trace[=debug]] [--otlp URL]
//! cargo run --example jambonz_call -- --url ws://127.0.0.1:8080 [--secret S]
//! ```

#[path = "jambonz_shared/mod.rs"]
mod jambonz_shared;

use harness_jambonz::server::{JambonzServer, JambonzServerConfig};

#[path = "common/model_arg.rs"]
mod model_arg;
#[path = "common/trace_arg.rs"]
mod trace_arg;

use std::sync::Arc;

const USAGE: &str = "usage: jambonz_server [--addr 127.0.0.1:8080] [--secret S] [--agent faq|minimal] [--quiet] [--threads N] [--model scripted|openai:MODEL] [--trace[=debug]] [--otlp URL]";

fn main() {
    let _trace = trace_arg::install_if_asked();
    // `--threads N`: the runtime's worker threads (default: one per core). One thread serves
    // thousands of calls; more spread them over cores at some cost in wake-ups between them.
    let threads = std::env::args()
        .skip_while(|a| a != "--threads")
        .nth(1)
        .map(|n| {
            n.parse::<usize>()
                .unwrap_or_else(|_| exit(2, &format!("--threads takes a number; {USAGE}")))
        });
    let mut rt = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.max(1));
            b
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = rt
        .enable_all()
        .build()
        .unwrap_or_else(|e| exit(1, &format!("cannot start the runtime: {e}")));
    rt.block_on(serve());
}

async fn serve() {
    let (mut addr, mut config) = ("127.0.0.1:8080".to_owned(), JambonzServerConfig::default());
    let (mut minimal, mut quiet) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match a.as_str() {
            "--addr" => addr = value(),
            // An empty secret would refuse every upgrade: say so instead.
            "--secret" => match value() {
                s if s.is_empty() => {
                    exit(2, &format!("--secret needs a non-empty secret; {USAGE}"))
                }
                s => config = config.with_secret(s),
            },
            "--agent" => match value().as_str() {
                "faq" => minimal = false,
                "minimal" => minimal = true,
                _ => exit(2, &format!("--agent is faq or minimal; {USAGE}")),
            },
            "--quiet" => quiet = true,
            "--threads" => {
                value();
            }
            "-h" | "--help" => return println!("{USAGE}\n  {}", model_arg::HELP),
            t if trace_arg::is_trace_flag(t) => {}
            "--otlp" | "--model" => {
                value();
            }
            m if model_arg::is_model_flag(m) => {}
            o if trace_arg::is_otlp_flag(o) => {}
            other => exit(2, &format!("unknown argument {other}; {USAGE}")),
        }
    }
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| exit(1, &format!("cannot listen on {addr}: {e}")));
    let local = listener.local_addr().map_or(addr, |a| a.to_string());
    let auth = config
        .secret
        .as_ref()
        .map_or("", |_| ", Bearer secret required");
    println!("jambonz harness on ws://{local} (subprotocol harness.jambonz.org{auth})");

    let mut server = JambonzServer::new(config);
    if !quiet {
        server = server.on_call_end(|end| println!("{end}"));
    }
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let (agent, scripted, tools) = match minimal {
        true => jambonz_shared::minimal(),
        false => jambonz_shared::faq(),
    };
    let model = model_arg::from_command_line(|| Arc::new(scripted)).unwrap_or_else(|e| exit(2, &e));
    let report = server.serve(listener, agent, model, tools, stop).await;
    println!("stopped: {report:?}");
}

fn exit(code: i32, what: &str) -> ! {
    eprintln!("{what}");
    std::process::exit(code)
}
