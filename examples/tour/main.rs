//! The harness-rs tour: every protocol of the SDK, end to end, on built-in defaults.
//!
//! ```text
//! cargo run --example tour            # every chapter
//! cargo run --example tour -- sse     # one chapter by name
//! ```
//!
//! No network beyond loopback, no API key: models are the built-in deterministic
//! `ScriptedModel`, and servers listen on 127.0.0.1 with a port the OS picks.

mod core_sse;
mod jambonz;
mod sessions;
mod tanstack;
mod uhp;

type ChapterFn = fn() -> Result<(), Box<dyn std::error::Error>>;

/// The chapters, in reading order. Each protocol adds its own.
const CHAPTERS: &[(&str, &str, ChapterFn)] = &[
    (
        "sse",
        "harness-core: SSE decoding and one agent, any sink",
        core_sse::run,
    ),
    (
        "jambonz",
        "harness-jambonz: a phone call over a WebSocket",
        jambonz::run,
    ),
    (
        "sessions",
        "harness-sessions: crash, resume, fork, replay, verify",
        sessions::run,
    ),
    (
        "tanstack",
        "harness-tanstack: a TanStack thread over SSE, a reconnect, a gap and an approval",
        tanstack::run,
    ),
    (
        "uhp",
        "harness-uhp: a mangled task stream, the retry table, a dropped stream recovered",
        uhp::run,
    ),
];

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let mut failed = false;
    for (name, title, run) in CHAPTERS {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        println!("\n=== {title} ===\n");
        if let Err(e) = run() {
            eprintln!("chapter {name} failed: {e}");
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}
