//! An agentctl-like tool on the harness-sessions file journal, with a built-in deterministic
//! model (no network, no key).
//!
//! ```text
//! cargo run --example sessions -- --dir ./journal exec --input "What is a prime number?"
//! session 2f0c…                                  # like agentctl: a new session's uid
//! cargo run --example sessions -- --dir ./journal exec --session UID --input "Give me three examples."
//! cargo run --example sessions -- --dir ./journal exec --session UID --input "Explain" --interrupt-after 3
//! cargo run --example sessions -- --dir ./journal resume --session UID
//! cargo run --example sessions -- --dir ./journal replay --session UID
//! cargo run --example sessions -- --dir ./journal fork --session UID --at 5
//! cargo run --example sessions -- --dir ./journal verify --session UID
//! cargo run --example sessions -- --dir ./journal log --session UID
//! ```
//!
//! `exec` options: `--harness echo|chat|counter` (default: the session's, `chat` for a new
//! one), `--config JSON` (per-execution config, e.g. `{"system_prompt":"Be brief."}`),
//! `--input TEXT` (repeatable), `--interrupt-after N` (simulate the process dying after N
//! records of the turn reach the journal, to try `resume`). `verify` exits 1 and names the
//! first record that does not hold. `counter` needs memory snapshots, which this
//! filesystem-only tool cannot take: it is refused before anything is journaled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::ExitCode;
use std::sync::Arc;

use harness_core::Timestamp;
use harness_core::event::EventBody;
use harness_core::message::Message;
use harness_core::model::ScriptedModel;
use harness_sessions::controller::{Controller, ExecRequest, Observer, TurnStatus};
use harness_sessions::harnesses::{ChatHarness, CounterHarness, EchoHarness};
use harness_sessions::journal::{FileJournal, Journal};
use harness_sessions::testing::CrashAfter;
use harness_sessions::{Error, Record};

const USAGE: &str = "usage: sessions --dir DIR <exec|resume|replay|fork|verify|log|sessions> [options]
  exec    [--session UID] [--harness echo|chat|counter] [--config JSON] --input TEXT... [--interrupt-after N]
  resume  --session UID
  replay  --session UID
  fork    --session UID --at SEQ [--child UID]
  verify  --session UID
  log     --session UID
  sessions";

/// The built-in model: canned answers for the README's questions, an echo otherwise.
fn builtin_model() -> ScriptedModel {
    ScriptedModel::new().with_id("builtin").otherwise(|req| {
        let q = req.last_user_text().unwrap_or_default();
        let a = match q.trim() {
            "What is a prime number?" => {
                "A prime number is a whole number greater than 1 whose only divisors are 1 and itself."
                    .to_owned()
            }
            "Give me three examples." => "2, 3 and 5.".to_owned(),
            other => format!("You said: {other}"),
        };
        Ok(Message::assistant(a))
    })
}

struct Print;

impl Observer for Print {
    fn on_delta(&self, _session: &str, delta: &str) {
        use std::io::Write;
        print!("{delta}");
        let _ = std::io::stdout().flush();
    }
}

fn controller(journal: Arc<dyn Journal>) -> Controller {
    Controller::builder(journal)
        .model(Arc::new(builtin_model()))
        .harness("chat", Arc::new(ChatHarness::new("builtin")))
        .harness("echo", Arc::new(EchoHarness))
        .harness("counter", Arc::new(CounterHarness::new()))
        .default_harness("chat")
        .clock(Arc::new(|| {
            Some(Timestamp::from_system_time(std::time::SystemTime::now()))
        }))
        .observer(Arc::new(Print))
        .build()
}

#[derive(Default)]
struct Args {
    dir: Option<String>,
    cmd: Option<String>,
    session: Option<String>,
    harness: Option<String>,
    config: Option<String>,
    inputs: Vec<String>,
    at: Option<u64>,
    child: Option<String>,
    interrupt_after: Option<usize>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = Some(value("--dir")?),
            "--session" => a.session = Some(value("--session")?),
            "--harness" => a.harness = Some(value("--harness")?),
            "--config" => a.config = Some(value("--config")?),
            "--input" => a.inputs.push(value("--input")?),
            "--child" => a.child = Some(value("--child")?),
            "--at" => a.at = Some(value("--at")?.parse().map_err(|_| "--at needs a number")?),
            "--interrupt-after" => {
                a.interrupt_after = Some(
                    value("--interrupt-after")?
                        .parse()
                        .map_err(|_| "--interrupt-after needs a number")?,
                )
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if a.cmd.is_none() => a.cmd = Some(s.to_owned()),
            s => return Err(format!("unexpected argument {s}")),
        }
    }
    Ok(a)
}

fn summary(r: &Record) -> String {
    let short = |s: &str| {
        let s = s.replace('\n', " ");
        if s.chars().count() > 60 {
            format!("{}…", s.chars().take(60).collect::<String>())
        } else {
            s
        }
    };
    match &r.event.body {
        EventBody::ExecutionStart(m) => format!(
            "harness={} version={} inputs={} config={}B",
            m.harness,
            m.harness_version,
            m.input_count.map_or("?".into(), |n| n.to_string()),
            m.config.len()
        ),
        EventBody::Input(m) | EventBody::Output(m) => format!("{:?}", short(&m.text())),
        EventBody::ModelCall(mc) => format!(
            "model={} input_hash={}…",
            mc.model,
            &mc.input_hash[..12.min(mc.input_hash.len())]
        ),
        EventBody::ToolCall(c) => format!("{} {} key={}", c.id, c.tool, c.idempotency_key),
        EventBody::ToolResult(t) => format!("{} error={}", t.id, t.is_error),
        EventBody::Lifecycle(l) => format!("{:?} {}", l.kind, l.detail),
        EventBody::End(e) => e.state.clone(),
        EventBody::Error(e) => short(&e.description),
        EventBody::Usage(u) => format!("in={} out={}", u.input_tokens, u.output_tokens),
        EventBody::ApprovalRequest(a) => a.tool_call_id.clone(),
        EventBody::ApprovalResult(a) => format!("{} approved={}", a.tool_call_id, a.approved),
        _ => String::new(),
    }
}

async fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let dir = a.dir.clone().unwrap_or_else(|| "./journal".into());
    let journal: Arc<dyn Journal> = Arc::new(FileJournal::open(&dir)?);
    let host = controller(journal.clone());
    let session = || a.session.clone().ok_or("--session UID is required");
    match a.cmd.as_deref() {
        Some("exec") => {
            if a.inputs.is_empty() {
                return Err("exec needs at least one --input".into());
            }
            let sid = match &a.session {
                Some(s) => s.clone(),
                None => {
                    let s = uuid::Uuid::new_v4().to_string();
                    host.create_session(&s, a.harness.as_deref())?;
                    println!("session {s}");
                    s
                }
            };
            let mut req = ExecRequest::new(&sid, a.inputs.iter().map(Message::user).collect());
            req.harness = a.harness.clone();
            if let Some(c) = &a.config {
                req.config = c.clone().into_bytes();
            }
            let host = match a.interrupt_after {
                Some(n) => controller(Arc::new(CrashAfter::new(journal, n))),
                None => host,
            };
            match host.exec(req).await {
                Ok(turn) => {
                    println!();
                    match turn.status {
                        TurnStatus::Completed => println!(
                            "execution {} completed: {} provider call(s), head at record {}",
                            turn.execution_id, turn.provider_calls, turn.head_seq
                        ),
                        other => println!("execution {}: {other:?}", turn.execution_id),
                    }
                }
                Err(Error::Journal(e)) if a.interrupt_after.is_some() => {
                    println!("\ninterrupted ({e}): run `resume --session {sid}`");
                }
                Err(e) => return Err(e.into()),
            }
        }
        Some("resume") => match host.resume(&session()?).await? {
            None => println!("nothing to resume: the last turn completed"),
            Some(turn) => println!(
                "\nexecution {} resumed and completed: {} recorded effect(s) served, {} provider call(s)",
                turn.execution_id, turn.served_effects, turn.provider_calls
            ),
        },
        Some("replay") => {
            let r = host.replay(&session()?).await?;
            println!(
                "replayed {} execution(s) ({} skipped): {} records reproduced byte for byte, {} provider calls",
                r.executions, r.skipped, r.records_reproduced, r.provider_calls
            );
        }
        Some("fork") => {
            let at = a.at.ok_or("fork needs --at SEQ")?;
            let child = a
                .child
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let out = host.fork(&session()?, at, &child).await?;
            println!("session {}", out.child);
            println!(
                "forked at record {at}; LIFECYCLE FORK is record {}",
                out.fork_seq
            );
        }
        Some("verify") => {
            let v = host.verify(&session()?)?;
            let head = v.head.map(|h| h.to_string()).unwrap_or_default();
            println!("ok: {} records, head {head}", v.records);
        }
        Some("log") => {
            for r in host.records(&session()?)? {
                let id = &r.event.execution_id;
                println!(
                    "{:>4} {:<16} {:<16} {}  {}",
                    r.seq,
                    r.event.kind().as_str(),
                    if id.is_empty() { "-" } else { id },
                    &r.content_hash.to_string()[..12],
                    summary(&r)
                );
            }
        }
        Some("sessions") => {
            for s in journal.sessions()? {
                println!("{s}");
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match futures::executor::block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<Error>() {
                Some(err) => eprintln!("error ({:?}): {err}", err.code()),
                None => eprintln!("error: {e}"),
            }
            ExitCode::FAILURE
        }
    }
}
