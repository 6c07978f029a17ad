//! Plays jambonz against any harness URL: the simulator over a real WebSocket, running the
//! spec's "A whole call" (greeting, "Please refund order 42", "When are you open", a barge-in
//! with "Thanks, bye"), with the platform's `get_hours` tool. Against `jambonz_server` the
//! refund is refused: the demo agent's `refund` tool needs an approval, which no one can give
//! on a phone call. Prints every frame and what the caller heard; exits non-zero
//! if the harness broke a rule, missed a deadline or left a turn unanswered.
//!
//! ```text
//! cargo run --example jambonz_call -- --url ws://127.0.0.1:8080 [--secret S] [--quiet] [--connect-timeout MS]
//! ```
//!
//! As jambonz does, it dials `ws://` only to a private address. `wss://` passes that check
//! but needs a TLS feature of `tokio-tungstenite`, which this workspace does not enable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "jambonz_shared/mod.rs"]
mod jambonz_shared;

use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    const USAGE: &str = "usage: jambonz_call [--url ws://127.0.0.1:8080] [--secret S] [--quiet] \
                         [--connect-timeout MS (default 10000)]";
    let usage_error = |what: String| -> ! {
        eprintln!("{what}; {USAGE}");
        std::process::exit(2)
    };
    let mut url = "ws://127.0.0.1:8080".to_owned();
    let mut secret = None;
    let mut verbose = true;
    let mut connect_timeout = jambonz_shared::CONNECT_TIMEOUT;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--url" => {
                url = args
                    .next()
                    .unwrap_or_else(|| usage_error("--url needs a URL".into()))
            }
            "--secret" => match args.next() {
                // "Authorization: Bearer " with nothing after it matches no secret.
                Some(s) if !s.is_empty() => secret = Some(s),
                _ => usage_error("--secret needs a non-empty secret".into()),
            },
            "--quiet" => verbose = false,
            "--connect-timeout" => match args.next().and_then(|s| s.parse::<u64>().ok()) {
                Some(ms) if ms > 0 => connect_timeout = Duration::from_millis(ms),
                _ => usage_error("--connect-timeout needs a number of milliseconds".into()),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => usage_error(format!("unknown argument {other}")),
        }
    }
    let sim = jambonz_shared::whole_call_simulator(Instant::now());
    let call =
        jambonz_shared::play_call_with(&url, secret.as_deref(), sim, verbose, connect_timeout);
    match call.await {
        Err(e) => {
            eprintln!("call failed: {e}");
            std::process::exit(1);
        }
        Ok(t) => {
            println!("\nwhat the caller heard:\n{t}");
            if let Err(problems) = jambonz_shared::check(&t) {
                eprintln!("FAILED:\n{problems}");
                std::process::exit(1);
            }
            println!("ok");
        }
    }
}
