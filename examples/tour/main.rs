//! The harness-rs tour: every protocol of the SDK, end to end, on built-in defaults.
//!
//! ```text
//! cargo run --example tour            # every chapter
//! cargo run --example tour -- sse     # one chapter by name
//! cargo run --example tour -- --model openai:gpt-4.1-mini sse   # the agent on a real model
//! ```
//!
//! No network beyond loopback, no API key: models are the built-in deterministic
//! `ScriptedModel`, and servers listen on 127.0.0.1 with a port the OS picks. With
//! `--model openai:MODEL`, the `sse` chapter's agent runs on an OpenAI-compatible server
//! instead (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; see the README's "A real model").

use std::sync::OnceLock;

#[path = "../common/model_arg.rs"]
mod model_arg;

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
        "harness-uhp: a mangled task stream, the retry table, a dropped stream recovered, the FAQ agent as an endpoint",
        uhp::run,
    ),
];

/// The `--model` spec given, if any.
static MODEL_SPEC: OnceLock<Option<String>> = OnceLock::new();

/// The `--model` spec given, if any (`None`: the scripted model).
fn model_spec() -> Option<&'static str> {
    MODEL_SPEC.get().and_then(|s| s.as_deref())
}

fn main() {
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    match model_arg::take_spec(&mut wanted) {
        Ok(spec) => {
            let _ = MODEL_SPEC.set(spec);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
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
