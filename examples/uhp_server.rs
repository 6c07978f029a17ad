//! A UHP server serving built-in agents on the scripted model: the tour's FAQ agent
//! (`harness_core::agent::faq`, the default harness, offered the host's
//! `write_file`/`read_file` tools too), and the echo and chat harnesses of harness-sessions.
//!
//! ```text
//! cargo run --example uhp_server -- --addr 127.0.0.1:8080 --api-key KEY [--data DIR]
//! ```
//!
//! `--api-key` may be given more than once: the first key is the principal `default`, the
//! next ones `key2`, `key3`, … (each sees only its own objects). `--max-running-per-key N`
//! caps the tasks one principal runs at once (default 64; past it `429 rate_limited`), so
//! one caller cannot take the host's 256 slots from the others.
//!
//! `--data DIR` keeps responses, sessions, harnesses and idempotency keys on disk (they
//! survive a restart); `--database-url postgres://…` keeps them in PostgreSQL (`--features
//! postgres`), where several processes serve the same objects at once (a key used through one
//! is the same task through another; a task made on one is read and cancelled through
//! another); without either
//! everything lives in memory. The model is a deterministic
//! stand-in that answers the tasks the official conformance suite sends, paced like a real
//! model (a short wait before the first token, then one delta at a time): the pacing is the
//! example's, the library never sleeps.
//!
//! | the task says | the model |
//! | --- | --- |
//! | `Reply with exactly: X` | replies `X` |
//! | `Count slowly from 1 to N, …` | streams one number per line, 50 ms apart |
//! | `Create a file named F containing exactly: C` | calls `write_file`, then confirms |
//! | a message with a file attached | reads it; a "secret token" in it is the reply |
//! | anything else | the FAQ agent's model (`faq_answer`): `When are you open?` calls `get_hours`, `Please refund order 42` the gated `refund` (UHP cannot ask a person: the host's policy denies it), else `You said: …` |

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use harness_core::agent::faq::{FaqAgent, Refunds, faq_answer, faq_tools};
use harness_core::message::{
    JsonObject, Message, ModelRequest, ModelResponse, Part, Role, ToolCall, Usage,
};
use harness_core::model::{Model, ModelError, ModelEvent, ModelStream};
use harness_sessions::harnesses::{ChatHarness, EchoHarness};
use harness_uhp::server::axum::{FileStore, RouterConfig, UhpServeConfig, router, serve};
use harness_uhp::server::driver::{FileTools, UhpService};
use serde_json::json;

#[path = "common/model_arg.rs"]
mod model_arg;
#[path = "common/trace_arg.rs"]
mod trace_arg;
#[path = "uhp_shared/mod.rs"]
mod uhp_shared;

const USAGE: &str = "usage: uhp_server --addr HOST:PORT --api-key KEY [--api-key KEY2 …] [--max-running-per-key N] [--data DIR | --database-url URL] [--model scripted|openai:MODEL] [--trace[=debug]] [--otlp URL]   (--addr 127.0.0.1:0 picks a port; --database-url needs the postgres feature)";

/// What the model does for one request, before pacing.
struct Plan {
    message: Message,
    deltas: Vec<String>,
    first_token: Duration,
    between: Duration,
}

/// The example's model: deterministic answers, real-time pacing.
struct DemoModel;

fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let i = text.find(marker)?;
    Some(text[i + marker.len()..].trim())
}

fn tool_call(id: &str, tool: &str, args: serde_json::Value) -> Message {
    let args = match args {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(ToolCall::new(id, tool, args))],
    }
}

impl DemoModel {
    fn plan(req: &ModelRequest) -> Plan {
        let offered = |name: &str| req.tools.iter().any(|t| t.name == name);
        let mut plan = Plan {
            message: Message::assistant(""),
            deltas: Vec::new(),
            first_token: Duration::from_millis(600),
            between: Duration::from_millis(40),
        };
        // After a tool ran, say what it did.
        if let Some(last) = req.messages.last().filter(|m| m.role == Role::Tool) {
            let result = last.parts.iter().find_map(|p| match p {
                Part::ToolResult(r) => Some(r),
                _ => None,
            });
            let text = match result.and_then(|r| r.output.as_ref()) {
                Some(o) if o.contains_key("filename") => {
                    format!("Created {}.", o["filename"].as_str().unwrap_or("the file"))
                }
                _ => faq_answer(req).text(), // the FAQ tools' results, errors, denials
            };
            plan.deltas = harness_core::model::word_deltas(&text);
            plan.message = Message::assistant(text);
            return plan;
        }
        let user = req.messages.iter().rev().find(|m| m.role == Role::User);
        let text = user.map(Message::text).unwrap_or_default();
        let files: Vec<(String, String)> = user
            .map(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::File(f) => Some((
                            f.name.clone(),
                            String::from_utf8_lossy(f.bytes.as_deref().unwrap_or_default())
                                .into_owned(),
                        )),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let reply = if let Some(x) = after(&text, "Reply with exactly:") {
            x.to_owned()
        } else if let Some(rest) = after(&text, "Count slowly from 1 to") {
            let n: u32 = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
                .unwrap_or(10)
                .min(10_000);
            plan.deltas = (1..=n).map(|i| format!("{i}\n")).collect();
            plan.between = Duration::from_millis(50);
            let all: String = plan.deltas.concat();
            plan.message = Message::assistant(all);
            return plan;
        } else if let (Some(rest), true) =
            (after(&text, "Create a file named"), offered("write_file"))
        {
            let (name, content) = rest
                .split_once(" containing exactly:")
                .unwrap_or((rest, ""));
            plan.message = tool_call(
                "call_write_1",
                "write_file",
                json!({"path": name.trim(), "content": content.trim()}),
            );
            return plan;
        } else if let Some((name, body)) = files.first() {
            match after(body, "secret token is") {
                Some(t) => t.trim_end_matches('.').to_owned(),
                None => format!(
                    "{name} says: {}",
                    body.chars().take(200).collect::<String>()
                ),
            }
        } else {
            let faq = faq_answer(req);
            if faq.tool_calls().next().is_some() {
                plan.message = faq;
                return plan;
            }
            faq.text()
        };
        plan.deltas = harness_core::model::word_deltas(&reply);
        plan.message = Message::assistant(reply);
        plan
    }
}

fn tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

#[async_trait::async_trait]
impl Model for DemoModel {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let plan = Self::plan(req);
        let usage = Usage {
            model: "scripted".into(),
            input_tokens: tokens(req.messages.iter().map(|m| m.text().len()).sum()),
            output_tokens: tokens(plan.message.text().len()),
            reasoning_tokens: 0,
        };
        let done = ModelResponse {
            message: plan.message,
            usage,
        };
        let first = plan.first_token;
        let between = plan.between;
        let deltas = plan.deltas.into_iter().enumerate();
        let head = futures::stream::once(async move {
            tokio::time::sleep(first).await;
            None
        });
        let body = futures::stream::iter(deltas).then(move |(i, d)| async move {
            if i > 0 {
                tokio::time::sleep(between).await;
            }
            Some(Ok::<_, ModelError>(ModelEvent::TextDelta(d)))
        });
        let tail = futures::stream::once(async move { Some(Ok(ModelEvent::Completed(done))) });
        head.chain(body)
            .chain(tail)
            .filter_map(|x| async move { x })
            .boxed()
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The PostgreSQL store (connecting blocks: off the async workers).
#[cfg(feature = "postgres")]
async fn database_store(
    url: String,
) -> Result<harness_uhp::server::postgres::PgStore, Box<dyn std::error::Error>> {
    Ok(
        tokio::task::spawn_blocking(move || harness_uhp::server::postgres::PgStore::connect(&url))
            .await??,
    )
}

#[cfg(not(feature = "postgres"))]
async fn database_store(_: String) -> Result<FileStore, Box<dyn std::error::Error>> {
    usage_error(
        "--database-url needs the postgres feature (cargo run --features postgres --example uhp_server -- …)",
    )
}

fn usage_error(why: &str) -> ! {
    eprintln!("uhp_server: {why}\n{USAGE}");
    std::process::exit(2);
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _trace = trace_arg::install_if_asked();
    let mut addr = "127.0.0.1:8080".to_owned();
    let mut keys: Vec<String> = Vec::new();
    let mut per_key: Option<usize> = None;
    let mut data: Option<String> = None;
    let mut database_url: Option<String> = None;
    let opts = [
        "--addr",
        "--api-key",
        "--data",
        "--database-url",
        "--max-running-per-key",
        "--model",
    ];
    for (name, value) in uhp_shared::parse_args("uhp_server", USAGE, &[], &opts) {
        match name.as_str() {
            "--addr" => addr = value.unwrap_or(addr),
            "--api-key" => keys.extend(value),
            "--max-running-per-key" => {
                per_key = Some(
                    value
                        .and_then(|v| v.parse().ok())
                        .filter(|n| *n > 0)
                        .unwrap_or_else(|| {
                            usage_error("--max-running-per-key needs a positive integer")
                        }),
                );
            }
            "--database-url" => database_url = value,
            "--model" => {} // read by model_arg below
            _ => data = value,
        }
    }
    if data.is_some() && database_url.is_some() {
        usage_error("--data and --database-url are two stores: pick one");
    }
    if keys.is_empty() {
        keys.extend(std::env::var("UHP_API_KEY").ok());
    }
    if keys.is_empty() {
        usage_error("--api-key is required");
    }

    // The tour's FAQ agent, with the host's file tools beside its own.
    let files = FileTools::new();
    let mut tools = faq_tools(&Refunds::default());
    for t in files.tools().iter() {
        tools.insert(t.clone());
    }
    let faq = FaqAgent::new().with_tools(&files.tools());

    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let public = format!("http://{}", listener.local_addr()?);
    let model = model_arg::from_command_line(|| std::sync::Arc::new(DemoModel))
        .unwrap_or_else(|e| usage_error(&e));
    let mut builder = UhpService::builder(model)
        .harness("faq", "FAQ agent", faq)
        .harness("echo", "Echo", EchoHarness)
        .harness("chat", "Chat", ChatHarness::new("scripted"))
        .models(["scripted"])
        .tools(tools)
        .file_tools(&files)
        .configure(move |c| {
            c.implementation_name = "harness-rs uhp_server example".into();
            c.public_url = Some(public);
            if let Some(n) = per_key {
                c.max_running_tasks_per_principal = n;
            }
        });
    for (i, key) in keys.iter().enumerate() {
        let principal = match i {
            0 => "default".to_owned(),
            _ => format!("key{}", i + 1),
        };
        builder = builder.api_key(key, &principal);
    }
    if let Some(dir) = &data {
        builder = builder.store(FileStore::open(dir).await?);
    }
    if let Some(url) = database_url {
        builder = builder.store(database_store(url).await?);
    }
    let host = builder.build(Instant::now, wall_ms).await?;
    tokio::spawn(host.run(tokio::time::sleep));

    println!("uhp_server listening on http://{}", listener.local_addr()?);
    serve(
        listener,
        router(host, RouterConfig::default()),
        UhpServeConfig::default(),
    )
    .await?;
    Ok(())
}
