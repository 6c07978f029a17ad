//! Chapter: harness-jambonz. A phone call without a phone: the FAQ agent served over a real
//! WebSocket on loopback (with the Bearer-secret upgrade check), and the jambonz simulator
//! calling it in real time through the spec's "A whole call": greeting, a refund request (the
//! agent's own `refund` tool is gated, and on the phone no one can approve it: the driver's
//! policy denies it and the agent says so), a question answered with the platform's tool, a
//! barge-in, a hang-up with the `hangup` command.

#[path = "../jambonz_shared/mod.rs"]
mod jambonz_shared;

use std::time::Instant;

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}", listener.local_addr()?);
        println!("  harness listening on {url} (secret required)\n");
        let server = tokio::spawn(jambonz_shared::run_server(
            listener,
            Some("tour-secret".into()),
            false,
        ));

        // A caller without the secret is refused at the upgrade (HTTP 401).
        let refused = jambonz_shared::play_call(
            &url,
            None,
            jambonz_shared::whole_call_simulator(Instant::now()),
            false,
        )
        .await;
        println!(
            "  without the secret: {}\n",
            refused.err().unwrap_or_default()
        );

        let sim = jambonz_shared::whole_call_simulator(Instant::now());
        let transcript = jambonz_shared::play_call(&url, Some("tour-secret"), sim, true).await?;
        println!("\n  what the caller heard:");
        for line in transcript.to_string().lines() {
            println!("    {line}");
        }
        server.abort();
        jambonz_shared::check(&transcript).map_err(|e| e.into())
    })
}
