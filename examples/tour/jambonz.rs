//! Chapter: harness-jambonz. A phone call without a phone: the FAQ agent served over a real
//! WebSocket on loopback by `harness_jambonz::server::JambonzServer` (with the Bearer-secret
//! upgrade check), and the jambonz simulator calling it in real time with
//! `harness_jambonz::client::Caller` through the spec's "A whole call": greeting, a refund
//! request (the agent's own `refund` tool is gated, and on the phone no one can approve it:
//! the driver's policy denies it and the agent says so), a question answered with the
//! platform's tool, a barge-in, a hang-up with the `hangup` command.

#[path = "../jambonz_shared/mod.rs"]
mod jambonz_shared;

use std::time::Instant;

use harness_jambonz::client::Caller;
use harness_jambonz::server::{JambonzServer, JambonzServerConfig};

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("ws://{}", listener.local_addr()?);
        println!("  harness listening on {url} (secret required)\n");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (agent, model, tools) = jambonz_shared::faq();
        let server = JambonzServer::new(JambonzServerConfig::default().with_secret("tour-secret"));
        let stop_on = async {
            let _ = stopped.await;
        };
        let server = tokio::spawn(server.serve(listener, agent, model, tools, stop_on));

        // A caller without the secret is refused at the upgrade (HTTP 401).
        let sim = jambonz_shared::whole_call_simulator(Instant::now());
        let refused = Caller::new().call(&url, sim).await;
        println!(
            "  without the secret: {}\n",
            refused.err().map(|e| e.to_string()).unwrap_or_default()
        );

        let sim = jambonz_shared::whole_call_simulator(Instant::now());
        let transcript = Caller::new()
            .with_secret("tour-secret")
            .on_frame(|f| println!("{f:.150}"))
            .call(&url, sim)
            .await?;
        println!("\n  what the caller heard:");
        for line in transcript.to_string().lines() {
            println!("    {line}");
        }
        let _ = stop.send(());
        let report = server.await?;
        println!(
            "\n  the server stopped: {} calls, {} refused (401)",
            report.calls, report.refused_unauthorized
        );
        match transcript.problems() {
            p if p.is_empty() => Ok(()),
            p => Err(p.join("\n").into()),
        }
    })
}
