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
//! As jambonz does, it dials `ws://` only to a private address. For `wss://`, open the TLS
//! stream yourself and use `harness_jambonz::client::Caller::call_over`.

#[path = "jambonz_shared/mod.rs"]
mod jambonz_shared;

use std::time::{Duration, Instant};

use harness_jambonz::client::Caller;

const USAGE: &str = "usage: jambonz_call [--url ws://127.0.0.1:8080] [--secret S] [--quiet] \
                     [--connect-timeout MS (default 10000)]";

#[tokio::main]
async fn main() {
    let (mut url, mut caller, mut verbose) =
        ("ws://127.0.0.1:8080".to_owned(), Caller::new(), true);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match a.as_str() {
            "--url" => url = value(),
            // "Authorization: Bearer " with nothing after it matches no secret.
            "--secret" => match value() {
                s if s.is_empty() => {
                    exit(2, &format!("--secret needs a non-empty secret; {USAGE}"))
                }
                s => caller = caller.with_secret(s),
            },
            "--quiet" => verbose = false,
            "--connect-timeout" => match value().parse::<u64>() {
                Ok(ms) if ms > 0 => caller = caller.with_connect_timeout(Duration::from_millis(ms)),
                _ => exit(2, &format!("--connect-timeout needs milliseconds; {USAGE}")),
            },
            "-h" | "--help" => return println!("{USAGE}"),
            other => exit(2, &format!("unknown argument {other}; {USAGE}")),
        }
    }
    if verbose {
        caller = caller.on_frame(|f| println!("{f:.150}"));
    }
    let sim = jambonz_shared::whole_call_simulator(Instant::now());
    let transcript = caller
        .call(&url, sim)
        .await
        .unwrap_or_else(|e| exit(1, &format!("call failed: {e}")));
    println!("\nwhat the caller heard:\n{transcript}");
    let problems = transcript.problems();
    if !problems.is_empty() {
        exit(1, &format!("FAILED:\n{}", problems.join("\n")));
    }
    println!("ok");
}

fn exit(code: i32, what: &str) -> ! {
    eprintln!("{what}");
    std::process::exit(code)
}
