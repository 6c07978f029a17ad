//! A jambonz harness over a real WebSocket: the demo FAQ agent (the built-in deterministic
//! model, a `get_hours` tool that jambonz runs, its own gated `refund` tool that the driver's
//! policy denies on the phone, a `hangup` command on goodbye) served with the upgrade check.
//!
//! ```text
//! cargo run --example jambonz_server -- --addr 127.0.0.1:8080 [--secret S]
//! cargo run --example jambonz_call -- --url ws://127.0.0.1:8080 [--secret S]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "jambonz_shared/mod.rs"]
mod jambonz_shared;

#[tokio::main]
async fn main() {
    const USAGE: &str = "usage: jambonz_server [--addr 127.0.0.1:8080] [--secret S]";
    let usage_error = |what: String| -> ! {
        eprintln!("{what}; {USAGE}");
        std::process::exit(2)
    };
    let mut addr = "127.0.0.1:8080".to_owned();
    let mut secret = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => {
                addr = args
                    .next()
                    .unwrap_or_else(|| usage_error("--addr needs an address".into()))
            }
            "--secret" => match args.next() {
                // An empty secret would refuse every upgrade: say so instead.
                Some(s) if !s.is_empty() => secret = Some(s),
                _ => usage_error("--secret needs a non-empty secret".into()),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => usage_error(format!("unknown argument {other}")),
        }
    }
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(1);
        });
    println!(
        "jambonz harness on ws://{} (subprotocol harness.jambonz.org{})",
        listener.local_addr().map(|a| a.to_string()).unwrap_or(addr),
        if secret.is_some() {
            ", Bearer secret required"
        } else {
            ""
        }
    );
    jambonz_shared::run_server(listener, secret, true).await;
}
