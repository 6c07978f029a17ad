//! An agentctl-like tool on the harness-sessions file journal, with a built-in deterministic
//! model (no network, no key).
//!
//! ```text
//! cargo run --example sessions -- --dir ./journal exec --input "What is a prime number?"
//! cargo run --example harness_node -- --addr 127.0.0.1:8090 --harness echo &
//! cargo run --example sessions -- --dir ./journal --harness mine=127.0.0.1:8090 exec --harness mine --input hello
//! session 2f0c…                                  # like agentctl: a new session's uid
//! cargo run --example sessions -- --dir ./journal exec --session UID --input "Give me three examples."
//! cargo run --example sessions -- --dir ./journal exec --session UID --input "Explain" --interrupt-after 3
//! cargo run --example sessions -- --dir ./journal resume --session UID
//! cargo run --example sessions -- --dir ./journal replay --session UID
//! cargo run --example sessions -- --dir ./journal fork --session UID --at 5
//! cargo run --example sessions -- --dir ./journal verify --session UID
//! cargo run --example sessions -- --dir ./journal verify --session UID --head SEQ:HASH
//! cargo run --example sessions -- --dir ./journal log --session UID
//! ```
//!
//! Several processes, or several machines, can share the sessions on one PostgreSQL
//! (`--features postgres`): `--database-url` puts the journal and the receipts there, and any
//! process can resume, approve or fork what another started (the journal's fences and
//! compare-and-set keep one writer per turn):
//!
//! ```text
//! cargo run --features postgres --example sessions -- --database-url postgres://postgres@127.0.0.1:5432/postgres exec --input hello
//! ```
//!
//! `--durability turn` (the default, as for the file journal) commits the appends of a turn
//! without waiting for the server's WAL flush and waits once at the turn's end; `record`
//! waits at every append.
//!
//! Approvals: the `publish` harness answers, then asks to publish the answer with an
//! approval-gated tool (REQUIRES_APPROVAL), which parks the turn. `approve` (or `deny`)
//! records the decision and resumes the turn, as agentctl's approve and deny do:
//!
//! ```text
//! cargo run --example sessions -- --dir ./journal exec --harness publish --input "What is a prime number?"
//! cargo run --example sessions -- --dir ./journal pending --session UID
//! cargo run --example sessions -- --dir ./journal approve --session UID --reason "looks right"
//! ```
//!
//! `publish` is a tool of the host's `Tools` registry, registered `requires_approval` (the
//! host gates it whatever the call says). An approved `publish` appends a line to
//! `DIR/published.log`; its receipt is stored in `DIR/receipts.jsonl`, keyed by (session
//! uid, idempotency key), so a call re-driven after a crash is answered from its receipt,
//! even across restarts of this tool. A receipt is stored after the effect, so the publish
//! itself also checks the log for its key: a crash between the effect and its receipt would
//! otherwise publish it again.
//!
//! Only writers change the journal. `exec`, `resume`, `approve`, `deny` and `fork` open it
//! for writing, and set aside a torn last record (a crash mid-write) to
//! `UID.journal.torn-<offset>`; `log`, `replay`, `pending`, `verify` and `sessions` open it
//! read-only: they never change a file, serve the complete records and say a record is torn.
//!
//! `exec` without `--session` creates a session for the turn and prints its uid, as agentctl
//! does, but only once the request is admitted: a request refused before anything is
//! journaled (an unknown harness, one this tool cannot place, an input the journal cannot
//! hold) creates no session. A config is the harness's to read: one the harness rejects
//! fails its turn after the start and inputs are journaled, as the spec says ("A rejected
//! config leaves the turn incomplete ... recovery requires a new Exec with valid config").
//!
//! The model is built in (deterministic, no network) unless `--model openai:MODEL` names an
//! OpenAI-compatible server (`OPENAI_BASE_URL`, `OPENAI_API_KEY`). The `agent` harness is the
//! model-and-tools loop ([`ToolLoopAgent`]) with one tool with an external effect, `charge`:
//! it appends to the payment ledger `DIR/ledger.log` an `attempt SESSION KEY` line every time
//! its code runs and a `charged SESSION KEY AMOUNT` line once per (session uid, idempotency
//! key), deduplicating on the key the host hands it, so a call re-driven after a crash is
//! harmless and visible. `--effect-pause-ms N` makes `charge` wait N ms after its effect,
//! before its receipt and result are recorded: a window to kill the process in.
//!
//! `exec` options: `--harness echo|chat|publish|agent|counter` (default: the session's, `chat`
//! for a new one), `--config JSON` (per-execution config, e.g. `{"system_prompt":"Be
//! brief."}`), `--input TEXT` (repeatable), `--interrupt-after N` (simulate the process dying
//! after N records of the turn reach the journal, to try `resume`). `verify` exits 1 and
//! names the first record that does not hold.
//!
//! Every command that writes prints the head it leaves, `head SEQ:HASH` (the seq and content
//! hash of the session's last record). A chain that holds vouches for every record up to its
//! last one, so a journal cut after a whole record still passes `verify`; keep the printed
//! head elsewhere, and `verify --head SEQ:HASH` fails (DATA_LOSS, naming the missing records)
//! unless the journal still holds that record. `counter` needs memory snapshots, which this
//! filesystem-only tool cannot take: it is refused before anything is journaled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use harness_core::agent::ToolLoopAgent;
use harness_core::agent::faq::{Refunds, faq_tools};
use harness_core::event::EventBody;
use harness_core::message::{JsonObject, Mediation, Message, ModelRequest, ToolCall, ToolResult};
use harness_core::model::{Model, ScriptedModel};
use harness_core::tool::ToolContext;
use harness_core::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, Resumability, Start, Timestamp,
    Tool, Tools,
};
use harness_sessions::connect::HarnessAddress;
use harness_sessions::connect::grpc;
use harness_sessions::controller::{Controller, ExecRequest, Observer, TurnReport, TurnStatus};
use harness_sessions::harnesses::{ChatHarness, CounterHarness, EchoHarness};
use harness_sessions::journal::{FileJournal, Journal};
use harness_sessions::testing::CrashAfter;
use harness_sessions::tools::{FileReceipts, ReceiptStore};
use harness_sessions::verify::HeadPin;
use harness_sessions::{Error, Record};

#[path = "common/model_arg.rs"]
mod model_arg;
#[path = "common/trace_arg.rs"]
mod trace_arg;

const USAGE: &str = "usage: sessions [--dir DIR] [--database-url URL] [--durability D] [--harness NAME=ADDRESS]... [--model SPEC] [--trace[=debug]] [--otlp URL] <command> [options]
  --dir DIR                the journal folder (default ./journal); with --database-url, where
           the publish tool's log and the charge tool's ledger are kept
  --durability record|turn|never   with --database-url: whether each append's commit waits
           for the WAL flush (record), only the turn's end does (turn, the default), or none
  --model SPEC             scripted (the default, also `builtin`: deterministic, no key, no
           network) or openai:MODEL, an
           OpenAI-compatible server from OPENAI_BASE_URL and OPENAI_API_KEY
  --effect-pause-ms N      the agent's charge tool waits N ms after its effect (the line in
           DIR/ledger.log), before its receipt and result are recorded: a window to kill in
  --database-url URL       the journal and receipts in PostgreSQL (postgres://user@host:port/db),
           shared by every process on the database (feature `postgres`)
  --harness NAME=ADDRESS   registers a remote harness (Harness.Connect over gRPC) as
           agentsessionsd does: host:port, dns:///host:port, dns://resolver/host:port,
           unix:PATH, unix:///ABSOLUTE or unix://RELATIVE; exec --harness NAME selects it
  --trace[=debug]          prints the spans (exec, replay, resume, Connect streams) on stderr
  --otlp URL               exports them to an OpenTelemetry collector (OTLP/HTTP)
  exec     [--session UID] [--harness echo|chat|publish|agent|counter] [--config JSON] --input TEXT... [--interrupt-after N]
  resume   --session UID
  pending  --session UID
  approve  --session UID [--reason TEXT]     (records the decision, then resumes the turn)
  deny     --session UID [--reason TEXT]
  replay   --session UID
  fork     --session UID --at SEQ [--child UID]
  verify   --session UID [--head SEQ:HASH]
  log      --session UID
  sessions

The agent harness is a model-and-tools loop offering one tool, charge {\"amount\": N}: it
appends `attempt SESSION KEY` to DIR/ledger.log every time its code runs and `charged SESSION
KEY N` once per idempotency key (a re-driven call does not charge twice).

exec, resume, approve, deny and fork write the journal (and set a torn last record aside)
and print the head they leave, `head SEQ:HASH`; log, replay, pending, verify and sessions only
read it (a torn last record is reported and left in place). Keep a printed head: `verify
--head SEQ:HASH` fails (DATA_LOSS) if the journal no longer holds that record, e.g. records
were cut off its tail, which a plain verify cannot see.";

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

/// Writes to stdout and never panics: a closed stdout (`sessions log … | head`) must not kill
/// the process, least of all in the middle of a turn (the observer prints while effects run).
/// The journal, not the terminal, is the record. Under test, what would be printed is kept
/// for the test to read.
fn write_out(s: &str) {
    #[cfg(test)]
    tests::OUT.with(|o| o.borrow_mut().push_str(s));
    #[cfg(not(test))]
    {
        let mut o = std::io::stdout();
        let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
    }
}

/// `println!` through [`write_out`].
macro_rules! out {
    () => {
        write_out("\n")
    };
    ($($t:tt)*) => {
        write_out(&format!("{}\n", format_args!($($t)*)))
    };
}

/// `eprintln!` that never panics.
macro_rules! err {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Prints the model's text as it streams, and a new session's uid with its first record.
#[derive(Default)]
struct Print {
    /// A session created by this exec, to print (as agentctl does) once its first record is
    /// journaled: a refused request creates no session and prints none.
    announce: std::sync::Mutex<Option<String>>,
}

impl Observer for Print {
    fn on_record(&self, session: &str, _record: &Record) {
        if let Ok(mut a) = self.announce.lock()
            && a.as_deref() == Some(session)
        {
            *a = None;
            out!("session {session}");
        }
    }

    fn on_delta(&self, _session: &str, delta: &str) {
        write_out(delta);
    }
}

/// Answers with the model, then asks the host to publish the answer through an
/// approval-gated tool and says what became of it. Stateless: every call is rebuilt from the
/// inputs and the recorded completion, so replay and resume reproduce it exactly.
struct PublishHarness;

#[async_trait]
impl Harness for PublishHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor {
            capabilities: Capabilities {
                resumability: Resumability::StatelessReplay,
                fork_safe: true,
                ..Capabilities::default()
            },
            ..Descriptor::new("publish", "1")
        })
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        let answer = sink
            .model(ModelRequest::new(start.inputs.clone()).with_model("builtin"))
            .await?
            .message
            .text();
        let mut args = JsonObject::new();
        args.insert("text".into(), answer.into());
        // One publish per execution: its id and idempotency key come from the execution id.
        let key = format!("{}-publish", start.execution_id);
        let call = ToolCall::new(key.clone(), "publish", args)
            .with_mediation(Mediation::RequiresApproval)
            .with_idempotency_key(key);
        // An undecided call parks the turn: propagate the error, as the spec says.
        let result = sink.tool_call(call).await?;
        let note = if result.is_error {
            format!("\n[not published: {}]", result.error)
        } else {
            "\n[published]".to_owned()
        };
        sink.output(&note).await?;
        Ok(())
    }
}

/// The agents' tools, as the host runs them: `publish` appends its text to
/// DIR/published.log. It is gated (`requires_approval`): the host parks the turn until a
/// person decides, whatever the call says.
fn tools(dir: &Path) -> Tools {
    let log = dir.join("published.log");
    let publish = Tool::new(
        "publish",
        "Publish a text",
        move |call: ToolCall, cx: ToolContext| {
            let result = publish(&log, &cx, &call);
            async move { result }
        },
    )
    .requires_approval();
    // And the FAQ agent's (`get_hours`; `refund`, gated), for a remote harness that calls
    // them: `harness_node --harness faq`, or a harness of another language.
    let mut tools = faq_tools(&Refunds::default());
    tools.insert(publish);
    tools
}

/// Appends the call's text to `log`, once per (session uid, idempotency key).
fn publish(log: &Path, cx: &ToolContext, call: &ToolCall) -> ToolResult {
    use std::io::{Read as _, Seek as _};
    let text = call.args.get("text").and_then(|v| v.as_str()).unwrap_or("");
    let run = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(log)?;
        // The effect itself is idempotent on (session uid, key), which the tool receives:
        // a crash after the line was written but before the receipt was stored must not
        // publish it again on the re-drive (the receipts cannot close that window).
        let tag = format!("{} {}: ", cx.session_uid, call.idempotency_key);
        let mut published = Vec::new();
        f.read_to_end(&mut published)?;
        // Lossy: a line torn in the middle of a character must not stop every publish.
        let published = String::from_utf8_lossy(&published);
        if published.lines().any(|l| l.starts_with(&tag)) {
            return Ok(());
        }
        // A line torn by a crash would swallow this one: start on a fresh line.
        let sep = if published.is_empty() || published.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        f.seek(std::io::SeekFrom::End(0))?;
        writeln!(f, "{sep}{tag}{text:?}")?;
        f.sync_data()
    };
    match run() {
        Ok(()) => {
            let mut out = JsonObject::new();
            out.insert("published".into(), true.into());
            ToolResult::ok(&call.id, out)
        }
        Err(e) => ToolResult::error(&call.id, format!("publish: {e}")),
    }
}

/// The agent harness's tool: `charge {"amount": N}` through the payment ledger
/// `DIR/ledger.log`. Every run of its code appends `attempt SESSION KEY`; the charge itself,
/// `charged SESSION KEY N`, is appended once per (session uid, idempotency key): a payment
/// service deduplicates on the key the host hands it, so a call re-driven after a crash
/// between the effect and its receipt does not charge twice. After the effect it waits
/// `pause` (`--effect-pause-ms`), before the host stores its receipt and records its result.
fn charge_tool(dir: &Path, pause: std::time::Duration) -> Tool {
    let ledger = dir.join("ledger.log");
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert(
        "properties".into(),
        serde_json::json!({"amount": {"type": "integer"}}),
    );
    Tool::new(
        "charge",
        "Charge the customer an amount, once per idempotency key",
        move |call: ToolCall, cx: ToolContext| {
            let result = charge(&ledger, &cx, &call);
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            async move { result }
        },
    )
    .with_input_schema(schema)
}

/// One run of `charge`'s code: the attempt, then the charge unless the ledger holds the key.
fn charge(ledger: &Path, cx: &ToolContext, call: &ToolCall) -> ToolResult {
    use std::io::Read as _;
    let amount = call
        .args
        .get("amount")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    let run = || -> std::io::Result<bool> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(ledger)?;
        let who = format!("{} {}", cx.session_uid, call.idempotency_key);
        let mut seen = Vec::new();
        f.read_to_end(&mut seen)?;
        let seen = String::from_utf8_lossy(&seen);
        let sep = if seen.is_empty() || seen.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        let tag = format!("charged {who} ");
        let charged = seen.lines().any(|l| l.starts_with(&tag));
        let mut lines = format!("{sep}attempt {who}\n");
        if !charged {
            lines.push_str(&format!("{tag}{amount}\n"));
        }
        f.write_all(lines.as_bytes())?;
        f.sync_data()?;
        Ok(!charged)
    };
    match run() {
        Ok(new) => {
            let mut out = JsonObject::new();
            out.insert("charged".into(), amount.into());
            out.insert("already_charged".into(), (!new).into());
            ToolResult::ok(&call.id, out)
        }
        Err(e) => ToolResult::error(&call.id, format!("charge: {e}")),
    }
}

fn controller(
    journal: Arc<dyn Journal>,
    receipts: Arc<dyn ReceiptStore>,
    dir: &Path,
    print: Arc<Print>,
    remotes: &[(String, HarnessAddress)],
    model: Arc<dyn Model>,
    effect_pause: std::time::Duration,
) -> Controller {
    let mut b = Controller::builder(journal);
    // Remote harnesses (`--harness name=ADDRESS`), driven over Harness.Connect.
    for (name, address) in remotes {
        if let Ok(h) = grpc::remote(address.clone()) {
            b = b.remote_harness(name.clone(), h);
        }
    }
    let charge = charge_tool(dir, effect_pause);
    let agent = ToolLoopAgent::new("agent")
        .with_system_prompt("You charge customers with the charge tool, then explain.")
        .with_tools(&Tools::new().with(charge.clone()));
    let mut tools = tools(dir);
    tools.insert(charge);
    b.model(model)
        .tools(tools)
        .receipts(receipts)
        .harness("chat", ChatHarness::new("builtin"))
        .harness("echo", EchoHarness)
        .harness("publish", PublishHarness)
        .harness("agent", agent)
        .harness("counter", CounterHarness::new())
        .default_harness("chat")
        .clock(|| Some(Timestamp::from_system_time(std::time::SystemTime::now())))
        .observer(print)
        .build()
}

#[derive(Default)]
struct Args {
    dir: Option<String>,
    /// `--database-url postgres://…`: the journal and receipts in PostgreSQL.
    database_url: Option<String>,
    cmd: Option<String>,
    session: Option<String>,
    harness: Option<String>,
    config: Option<String>,
    inputs: Vec<String>,
    at: Option<u64>,
    child: Option<String>,
    reason: Option<String>,
    interrupt_after: Option<usize>,
    head: Option<HeadPin>,
    /// `--durability record|turn|never`: when a PostgreSQL append waits for its WAL flush.
    durability: Option<String>,
    /// `--effect-pause-ms N`: the charge tool's wait after its effect.
    effect_pause_ms: u64,
    /// `--harness name=ADDRESS`: remote harnesses, as agentsessionsd registers them.
    remotes: Vec<(String, HarnessAddress)>,
    /// `--model SPEC`: the host's model (`scripted` or `builtin`, the built-in one, by
    /// default; or `openai:MODEL`).
    model: Option<String>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = Some(value("--dir")?),
            "--database-url" => a.database_url = Some(value("--database-url")?),
            "--session" => a.session = Some(value("--session")?),
            "--harness" => {
                let v = value("--harness")?;
                match v.split_once('=') {
                    // Checked at startup: a form the spec refuses stops here, not later.
                    Some((name, address)) => {
                        let address = address
                            .parse()
                            .map_err(|e| format!("--harness {name}: {e}"))?;
                        a.remotes.push((name.to_owned(), address));
                    }
                    None => a.harness = Some(v),
                }
            }
            "--config" => a.config = Some(value("--config")?),
            "--durability" => a.durability = Some(value("--durability")?),
            "--effect-pause-ms" => {
                a.effect_pause_ms = value("--effect-pause-ms")?
                    .parse()
                    .map_err(|_| "--effect-pause-ms needs a number")?
            }
            "--input" => a.inputs.push(value("--input")?),
            "--child" => a.child = Some(value("--child")?),
            "--reason" => a.reason = Some(value("--reason")?),
            "--head" => {
                a.head = Some(
                    value("--head")?
                        .parse()
                        .map_err(|e| format!("--head: {e}"))?,
                )
            }
            "--at" => a.at = Some(value("--at")?.parse().map_err(|_| "--at needs a number")?),
            "--interrupt-after" => {
                a.interrupt_after = Some(
                    value("--interrupt-after")?
                        .parse()
                        .map_err(|_| "--interrupt-after needs a number")?,
                )
            }
            "--model" => a.model = Some(value("--model")?),
            m if m.starts_with("--model=") => a.model = Some(m["--model=".len()..].to_owned()),
            // Read by `trace_arg` in `main`.
            t if trace_arg::is_trace_flag(t) || t.starts_with("--otlp=") => {}
            "--otlp" => {
                value("--otlp")?;
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if a.cmd.is_none() => a.cmd = Some(s.to_owned()),
            s => return Err(format!("unexpected argument {s}")),
        }
    }
    Ok(a)
}

/// The head a writer leaves, to keep outside the journal for `verify --head`.
fn print_head(pin: Option<HeadPin>) {
    if let Some(pin) = pin {
        out!("head {pin}");
    }
}

fn print_turn(turn: &TurnReport, done: &str) {
    out!();
    match &turn.status {
        TurnStatus::Completed => out!(
            "execution {} {done}: {} recorded effect(s) served, {} provider call(s), {} tool call(s) run",
            turn.execution_id,
            turn.served_effects,
            turn.provider_calls,
            turn.executor_calls,
        ),
        TurnStatus::Parked {
            tool_call_id,
            request_seq,
        } => out!(
            "execution {} parked: tool call {tool_call_id} awaits approval (request record {request_seq}); run `approve --session {s}` or `deny --session {s}`",
            turn.execution_id,
            s = turn.session
        ),
        other => out!("execution {}: {other:?}", turn.execution_id),
    }
    print_head(turn.head_pin());
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

/// What a command did, and what opening the journal found on the way (for stderr).
struct Outcome {
    result: Result<(), Box<dyn std::error::Error>>,
    notes: Vec<String>,
}

/// The commands that write to the journal. The others open it read-only: they never change
/// a file, and report a torn last record instead of setting it aside.
fn writes(cmd: Option<&str>) -> bool {
    matches!(cmd, Some("exec" | "resume" | "approve" | "deny" | "fork"))
}

/// The journal and receipts in PostgreSQL (`--database-url`): several processes, on one
/// machine or several, share the sessions.
#[cfg(feature = "postgres")]
async fn run_on_database(a: &Args, url: &str, dir: &str) -> Outcome {
    use harness_sessions::journal::Durability;
    use harness_sessions::journal::{PgJournal, PgReceipts};
    let durability = match a.durability.as_deref() {
        Some("record") => Durability::EveryRecord,
        None | Some("turn") => Durability::EveryTurn,
        Some("never") => Durability::Never,
        Some(other) => {
            return Outcome {
                result: Err(format!("--durability {other}: record, turn or never").into()),
                notes: Vec::new(),
            };
        }
    };
    let opened = PgJournal::connect(url)
        .map(|j| j.with_durability(durability))
        .and_then(|j| Ok((PgReceipts::new(j.pg().clone())?, j)));
    let result = match opened {
        Ok((receipts, journal)) => {
            // The publish tool's log stays a file in --dir.
            let _ = std::fs::create_dir_all(dir);
            command(a, dir, Arc::new(journal), Arc::new(receipts)).await
        }
        Err(e) => Err(Error::from(e).into()),
    };
    Outcome {
        result,
        notes: Vec::new(),
    }
}

#[cfg(not(feature = "postgres"))]
async fn run_on_database(_: &Args, _: &str, _: &str) -> Outcome {
    Outcome {
        result: Err("--database-url needs the postgres feature: \
                     cargo run --features postgres --example sessions -- --database-url URL …"
            .into()),
        notes: Vec::new(),
    }
}

async fn run(a: Args) -> Outcome {
    let dir = a.dir.clone().unwrap_or_else(|| "./journal".into());
    if let Some(url) = &a.database_url {
        return run_on_database(&a, url, &dir).await;
    }
    let opened = if writes(a.cmd.as_deref()) {
        FileJournal::open(&dir)
    } else {
        FileJournal::open_read_only(&dir)
    };
    let files = match opened {
        Ok(f) => Arc::new(f),
        Err(e) => {
            return Outcome {
                result: Err(Error::from(e).into()),
                notes: Vec::new(),
            };
        }
    };
    let journal: Arc<dyn Journal> = files.clone();
    let receipts = Arc::new(FileReceipts::new(Path::new(&dir).join("receipts.jsonl")));
    let result = command(&a, &dir, journal, receipts).await;
    // A torn last record (a crash mid-write): a writer set it aside, a reader left it.
    let notes = files
        .torn_tails()
        .into_iter()
        .map(|t| match &t.saved_to {
            Some(p) => format!(
                "note: session {}: set aside a torn last record ({} bytes at offset {}) in {}",
                t.session,
                t.len,
                t.offset,
                p.display()
            ),
            None => format!(
                "note: session {}: the last record is torn ({} bytes at offset {}, a crash \
                 mid-write); served the complete records before it and left the file as it \
                 is: the next exec, resume, approve, deny or fork sets it aside",
                t.session, t.len, t.offset
            ),
        })
        .collect();
    Outcome { result, notes }
}

/// The line an error is reported with: a controller error names its gRPC status.
fn diagnostic(e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<Error>() {
        Some(err) => format!("error {} ({}): {err}", err.code().name(), err.code().grpc()),
        None => format!("error: {e}"),
    }
}

async fn command(
    a: &Args,
    dir: &str,
    journal: Arc<dyn Journal>,
    receipts: Arc<dyn ReceiptStore>,
) -> Result<(), Box<dyn std::error::Error>> {
    let print = Arc::new(Print::default());
    let spec = a.model.as_deref().filter(|s| s.trim() != "builtin");
    let model = model_arg::from_spec(spec, builtin_model)?;
    let pause = std::time::Duration::from_millis(a.effect_pause_ms);
    let host = controller(
        journal.clone(),
        receipts.clone(),
        Path::new(dir),
        print.clone(),
        &a.remotes,
        model.clone(),
        pause,
    );
    let session = || a.session.clone().ok_or("--session UID is required");
    match a.cmd.as_deref() {
        Some("exec") => {
            if a.inputs.is_empty() {
                return Err("exec needs at least one --input".into());
            }
            // Without --session, a new session is created for the turn once the request is
            // admitted, with --harness (or chat) as its default harness.
            let new = a.session.is_none();
            let sid = a
                .session
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let mut req = ExecRequest::new(&sid, a.inputs.iter().map(Message::user).collect());
            req.harness = a.harness.clone();
            if let Some(c) = &a.config {
                req.config = c.clone().into_bytes();
            }
            let host = match a.interrupt_after {
                Some(n) => controller(
                    Arc::new(CrashAfter::new(journal, n)),
                    receipts,
                    Path::new(dir),
                    print.clone(),
                    &a.remotes,
                    model,
                    pause,
                ),
                None => host,
            };
            let turn = if new {
                if let Ok(mut announce) = print.announce.lock() {
                    *announce = Some(sid.clone());
                }
                host.exec_new_session(req).await
            } else {
                host.exec(req).await
            };
            match turn {
                Ok(turn) => print_turn(&turn, "completed"),
                Err(Error::Journal(e)) if a.interrupt_after.is_some() => {
                    out!("\ninterrupted ({e}): run `resume --session {sid}`");
                    print_head(host.head(&sid)?);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Some("resume") => {
            let sid = session()?;
            match host.resume(&sid).await? {
                None => {
                    out!("nothing to resume: the last turn completed");
                    print_head(host.head(&sid)?);
                }
                Some(turn) => print_turn(&turn, "resumed and completed"),
            }
        }
        Some("pending") => match host.pending_approval(&session()?)? {
            None => out!("no approval pending"),
            Some(p) => out!(
                "execution {}: tool call {} ({}) awaits a decision (request record {}), args {}",
                p.execution_id,
                p.call.id,
                p.call.tool,
                p.request_seq,
                serde_json::Value::Object(p.call.args.clone())
            ),
        },
        Some(cmd @ ("approve" | "deny")) => {
            // As agentctl: find the pending request, commit the decision, then resume.
            let sid = session()?;
            let pending = host
                .pending_approval(&sid)?
                .ok_or("no approval pending in this session")?;
            let approved = cmd == "approve";
            let reason = a.reason.clone().unwrap_or_default();
            let seq = host.approve(&sid, &pending.call.id, approved, &reason)?;
            out!(
                "{} tool call {} ({}): decision is record {seq}",
                if approved { "approved" } else { "denied" },
                pending.call.id,
                pending.call.tool
            );
            match host.resume(&sid).await? {
                None => {
                    out!("nothing to resume");
                    print_head(host.head(&sid)?);
                }
                Some(turn) => print_turn(&turn, "resumed and completed"),
            }
        }
        Some("replay") => {
            let r = host.replay(&session()?).await?;
            out!(
                "replayed {} execution(s) ({} skipped): {} records reproduced byte for byte, {} provider calls",
                r.executions,
                r.skipped,
                r.records_reproduced,
                r.provider_calls
            );
        }
        Some("fork") => {
            let at = a.at.ok_or("fork needs --at SEQ")?;
            let child = a
                .child
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let out = host.fork(&session()?, at, &child).await?;
            out!("session {}", out.child);
            out!(
                "forked at record {at}; LIFECYCLE FORK is record {}",
                out.fork_seq
            );
            print_head(Some(out.head_pin()));
        }
        Some("verify") => {
            let sid = session()?;
            let v = match &a.head {
                Some(pin) => host.verify_head(&sid, pin)?,
                None => host.verify(&sid)?,
            };
            let head = v
                .head_pin()
                .map_or_else(|| "none".into(), |p| p.to_string());
            match &a.head {
                Some(pin) => out!(
                    "ok: {} records, head {head}; pinned head {pin} holds",
                    v.records
                ),
                None => out!("ok: {} records, head {head}", v.records),
            }
        }
        Some("log") => {
            for r in host.records(&session()?)? {
                let id = &r.event.execution_id;
                out!(
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
                out!("{s}");
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let _trace = trace_arg::install_if_asked();
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                err!("{e}");
            }
            err!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // A remote harness's gRPC channel runs on tokio.
    let outcome = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(run(args)),
        Err(e) => {
            err!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for n in &outcome.notes {
        err!("{n}");
    }
    match outcome.result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            err!("{}", diagnostic(&*e));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::PathBuf;

    use super::*;

    thread_local! {
        /// What the commands run on this thread printed on stdout.
        pub(super) static OUT: RefCell<String> = const { RefCell::new(String::new()) };
    }

    /// A fresh journal folder for the calling test: libtest runs each test on a thread
    /// named after it.
    fn tmpdir() -> PathBuf {
        let test = std::thread::current()
            .name()
            .unwrap_or("main")
            .replace("::", "-");
        let pid = std::process::id();
        let d = std::env::temp_dir().join(format!("harness-rs-sessions-cli-{pid}-{test}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Runs one command line against `dir`; returns its outcome and what it printed.
    fn cli(dir: &Path, args: &[&str]) -> (Outcome, String) {
        OUT.with(|o| o.borrow_mut().clear());
        let mut argv = vec!["--dir".to_owned(), dir.display().to_string()];
        argv.extend(args.iter().map(|s| (*s).to_owned()));
        let outcome = futures::executor::block_on(run(parse(argv.into_iter()).unwrap()));
        (outcome, OUT.with(|o| o.borrow().clone()))
    }

    /// The uid a new session was announced with.
    fn printed_session(printed: &str) -> String {
        printed
            .lines()
            .find_map(|l| l.strip_prefix("session "))
            .unwrap_or_else(|| panic!("no session printed: {printed}"))
            .to_owned()
    }

    /// `exec` in a new session: its uid and its journal file.
    fn new_session(dir: &Path, input: &str) -> (String, PathBuf) {
        let (o, printed) = cli(dir, &["exec", "--input", input]);
        o.result.unwrap();
        let sid = printed_session(&printed);
        let path = dir.join(format!("{sid}.journal"));
        (sid, path)
    }

    /// The torn-tail files set aside next to the journals in `dir`.
    fn set_aside(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".journal.torn-"))
            .collect();
        v.sort();
        v
    }

    /// Only writers repair; readers report. `log`, `replay`, `pending` and `verify` on a
    /// session whose last record is torn (a crash mid-write) leave the file byte for byte as
    /// it was, say that the record is torn, and serve the complete records before it; `exec`
    /// (a writer) sets the torn bytes aside and carries on.
    #[test]
    fn readers_leave_a_torn_tail_in_place_and_report_it_writers_set_it_aside() {
        let dir = tmpdir();
        let (sid, path) = new_session(&dir, "What is a prime number?");
        let whole = std::fs::read(&path).unwrap();
        let torn: &[u8] = b"{\"seq\":\"6\",\"prev_hash\":\"ab";
        let mut bytes = whole.clone();
        bytes.extend_from_slice(torn);
        std::fs::write(&path, &bytes).unwrap();

        for cmd in ["log", "replay", "pending", "verify"] {
            let (o, printed) = cli(&dir, &[cmd, "--session", &sid]);
            assert!(
                std::fs::read(&path).unwrap() == bytes,
                "{cmd} changed the file"
            );
            assert!(set_aside(&dir).is_empty(), "{cmd} set the tail aside");
            let reported = o.notes.iter().any(|n| n.contains("torn"))
                || o.result
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("torn"));
            assert!(
                reported,
                "{cmd} did not report the torn record: {:?}",
                o.notes
            );
            match cmd {
                // The five complete records of the turn: START, INPUT, MODEL_CALL, OUTPUT, END.
                "log" => assert_eq!(printed.lines().count(), 5, "{printed}"),
                "replay" => assert!(printed.contains("replayed 1 execution"), "{printed}"),
                "pending" => assert!(printed.contains("no approval pending"), "{printed}"),
                _ => {}
            }
            if cmd != "verify" {
                o.result.unwrap();
            }
        }

        let (o, _) = cli(&dir, &["exec", "--session", &sid, "--input", "More?"]);
        o.result.unwrap();
        assert!(
            o.notes.iter().any(|n| n.contains("set aside")),
            "{:?}",
            o.notes
        );
        let aside = set_aside(&dir);
        assert_eq!(aside.len(), 1);
        assert_eq!(std::fs::read(&aside[0]).unwrap(), torn);
        let now = std::fs::read(&path).unwrap();
        assert!(now.starts_with(&whole) && now.ends_with(b"\n"));
        let (o, _) = cli(&dir, &["verify", "--session", &sid]);
        o.result.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The `head SEQ:HASH` line a command printed.
    fn printed_head(printed: &str) -> String {
        printed
            .lines()
            .find_map(|l| l.strip_prefix("head "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no head printed: {printed}"))
            .to_owned()
    }

    /// Writers print the head they leave (`head SEQ:HASH`); `verify --head SEQ:HASH` checks
    /// the journal still holds it. Whole records cut off the tail pass a plain `verify` (the
    /// chain of what is left holds) and fail `verify --head`, as DATA_LOSS, naming the
    /// records that are missing.
    #[test]
    fn verify_against_a_printed_head_catches_records_cut_off_the_tail() {
        let dir = tmpdir();
        let (sid, path) = new_session(&dir, "What is a prime number?");
        let (o, printed) = cli(
            &dir,
            &[
                "exec",
                "--session",
                &sid,
                "--input",
                "Give me three examples.",
            ],
        );
        o.result.unwrap();
        let head = printed_head(&printed);
        assert!(head.starts_with("10:"), "{head}");
        let (o, printed) = cli(&dir, &["verify", "--session", &sid, "--head", &head]);
        o.result.unwrap();
        assert!(
            printed.contains(&format!("pinned head {head} holds")),
            "{printed}"
        );
        // A fork prints its child's head.
        let (o, printed) = cli(&dir, &["fork", "--session", &sid, "--at", "5"]);
        o.result.unwrap();
        assert!(printed_head(&printed).starts_with("6:"), "{printed}");

        let whole = std::fs::read_to_string(&path).unwrap();
        let end = whole.find("{\"seq\":\"8\"").unwrap();
        std::fs::write(&path, &whole[..end]).unwrap();
        let (o, printed) = cli(&dir, &["verify", "--session", &sid]);
        o.result.unwrap();
        assert!(printed.starts_with("ok: 7 records, head 7:"), "{printed}");
        let (o, _) = cli(&dir, &["verify", "--session", &sid, "--head", &head]);
        let line = diagnostic(&*o.result.unwrap_err());
        assert!(line.starts_with("error DATA_LOSS (15): "), "{line}");
        assert!(line.contains("records 8..=10 are missing"), "{line}");

        for bad in ["10", "ten:abc", &head[3..]] {
            assert!(
                parse(["verify", "--head", bad].map(String::from).into_iter()).is_err(),
                "{bad}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The session journals in `dir`.
    fn journals(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "journal"))
            .collect();
        v.sort();
        v
    }

    /// `exec` without `--session` creates a session for the turn, but only once the request
    /// is admitted: a request refused before anything would be journaled (a harness this
    /// tool cannot place, an unknown harness, no input) leaves no session behind.
    #[test]
    fn a_refused_exec_creates_no_session() {
        let dir = tmpdir();
        for (args, code) in [
            (
                &["exec", "--harness", "counter", "--input", "hi"][..],
                "FAILED_PRECONDITION",
            ),
            (
                &["exec", "--harness", "nope", "--input", "hi"][..],
                "INVALID_ARGUMENT",
            ),
        ] {
            let (o, printed) = cli(&dir, args);
            let line = diagnostic(&*o.result.unwrap_err());
            assert!(
                line.starts_with(&format!("error {code} ")),
                "{args:?}: {line}"
            );
            assert!(!printed.contains("session "), "{args:?}: {printed}");
            assert_eq!(journals(&dir), Vec::<PathBuf>::new(), "{args:?}");
        }
        let (o, _) = cli(&dir, &["exec"]);
        assert!(o.result.is_err());
        assert_eq!(journals(&dir), Vec::<PathBuf>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A config is the harness's to read, so the spec has a rejected one journaled: "A
    /// rejected config leaves the turn incomplete. Every Resume retries that turn with the
    /// same journaled config and fails again; recovery requires a new Exec with valid
    /// config." A chat config nested 60000 deep (Go's decoder stops at 10000) is that case:
    /// INVALID_ARGUMENT, the session is printed, its turn is START, INPUT, ERROR; resume
    /// fails again, a new exec in that session with a valid config completes.
    #[test]
    fn a_config_chat_rejects_fails_its_turn_as_the_spec_says() {
        let dir = tmpdir();
        let config = format!("{}{}", "[".repeat(60_000), "]".repeat(60_000));
        let (o, printed) = cli(&dir, &["exec", "--config", &config, "--input", "hi"]);
        let line = diagnostic(&*o.result.unwrap_err());
        assert!(line.starts_with("error INVALID_ARGUMENT (3): "), "{line}");
        assert!(
            !line.contains("[["),
            "the diagnostic quotes the config: {line}"
        );
        let sid = printed_session(&printed);
        let (o, log) = cli(&dir, &["log", "--session", &sid]);
        o.result.unwrap();
        let kinds: Vec<&str> = log
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(kinds, ["EXECUTION_START", "INPUT", "ERROR"], "{log}");
        let (o, _) = cli(&dir, &["resume", "--session", &sid]);
        assert!(diagnostic(&*o.result.unwrap_err()).contains("INVALID_ARGUMENT"));
        let (o, _) = cli(&dir, &["exec", "--session", &sid, "--input", "again"]);
        o.result.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The charge tool deduplicates on (session uid, idempotency key), as the spec asks of a
    /// side-effecting tool (agentsessions-writing-a-harness.txt:133: "the tool side dedups on
    /// session UID plus idempotency key"): its code run twice with one key records two
    /// attempts and one charge; another key, or the same key in another session, charges.
    #[test]
    fn charge_charges_once_per_session_and_key() {
        let dir = tmpdir();
        let ledger = dir.join("ledger.log");
        let mut args = JsonObject::new();
        args.insert("amount".into(), 42.into());
        let call =
            |key: &str| ToolCall::new("c1", "charge", args.clone()).with_idempotency_key(key);
        let a = ToolContext::new("s1", "e1");
        let b = ToolContext::new("s2", "e1");
        let first = charge(&ledger, &a, &call("k1"));
        let again = charge(&ledger, &a, &call("k1"));
        assert!(!first.is_error && !again.is_error);
        charge(&ledger, &a, &call("k2"));
        charge(&ledger, &b, &call("k1"));
        let text = std::fs::read_to_string(&ledger).unwrap();
        let count = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
        assert_eq!(count("attempt s1 k1"), 2, "{text}");
        assert_eq!(count("charged s1 k1 42"), 1, "{text}");
        assert_eq!(count("charged s1 k2 42"), 1, "{text}");
        assert_eq!(count("charged s2 k1 42"), 1, "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A journal changed after it was written is corruption: the diagnostic names gRPC
    /// `DATA_LOSS`, not `INTERNAL`, for `verify` and for any command that opens it.
    #[test]
    fn a_changed_journal_is_reported_as_data_loss() {
        let dir = tmpdir();
        let (sid, path) = new_session(&dir, "What is a prime number?");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("prime", "prune")).unwrap();
        for cmd in ["verify", "log", "replay", "resume"] {
            let (o, _) = cli(&dir, &[cmd, "--session", &sid]);
            let e = o.result.unwrap_err();
            let line = diagnostic(&*e);
            assert!(line.starts_with("error DATA_LOSS (15): "), "{cmd}: {line}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
