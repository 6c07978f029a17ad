//! A real TanStack harness host on HTTP and WebSocket, serving the tour's FAQ agent (the
//! built-in `ToolLoopAgent` on a deterministic `ScriptedModel`: no network, no key; see
//! `tanstack_shared`). It says hello back, and takes 30 s over a message that starts with
//! "wait" (a turn to queue inputs behind, or to `cancel`). Its tools are one registry for the
//! agent and the host: `get_hours(day)` and a gated `refund(order_id)`:
//!
//! - "What are your hours on Saturday?" answers at once through `get_hours`; "What are your
//!   hours?" asks "Which day?" (`harness.question`), and
//!   `{"op":"answer","questionId":…,"value":"Saturday"}` continues the turn.
//! - "Please refund order 42" shows the call and ends the run waiting for an approval
//!   (`harness.wait.opened` kind `approval`, the interrupt in `RUN_FINISHED`), with no tool
//!   result; `{"op":"resolve","resume":[{"interruptId":"approval-call_2","status":"resolved",
//!   "payload":{"approved":true}}]}` drives the turn again and the refund runs once
//!   (`TOOL_CALL_RESULT` "refunded order 42"); `approved: false` never runs it.
//! - "I'd like a person" hands the conversation to a person (`harness.handoff`).
//!
//! ```text
//! cargo run --example tanstack_host -- --addr 127.0.0.1:8080 [--token T]... [--memory] [--log-dir DIR]
//!     [--heartbeat-ms N] [--sse-queue-bytes N] [--socket-buffer-bytes N] [--slow-consumer-ms N]
//!     [--max-threads N] [--max-threads-per-user N] [--max-input-bytes N] [--max-body-bytes N]
//!     [--max-transcript-bytes N] [--max-resident-threads N] [--max-resident-bytes N]
//!     [--max-open-files N] [--memory-log-bytes N] [--max-connections N] [--header-timeout-ms N]
//!     [--write-timeout-ms N] [--database-url URL [--lease-ttl-ms N]]
//!     [--model scripted|openai:MODEL] [--trace[=debug]] [--otlp URL]
//! ```
//!
//! With `--database-url` several hosts share one database: one cursor space per thread, and
//! one host at a time runs a thread's turns (a lease of `--lease-ttl-ms`, default 10 s,
//! renewed every third of it; another host takes a thread over when its owner stopped, and
//! the interrupted turn settles `interrupted`; see the README, "Several hosts").
//!
//! `--model openai:MODEL` runs the agent on an OpenAI-compatible server (`OPENAI_API_KEY`,
//! `OPENAI_BASE_URL`) instead of the built-in scripted model; the default needs no key and
//! no network.
//!
//! The server is the library's runtime adapter (`harness_tanstack::server`, feature `axum`):
//! this file only reads its flags and picks the agent. A request head must arrive within
//! `--header-timeout-ms` (default 10 s), and past `--max-connections` open connections
//! (default 16,384) a new one is answered `503` at once; a connection whose writes stay
//! blocked for `--write-timeout-ms` (a client that does not read) is closed (default: 60 s,
//! or twice `--slow-consumer-ms` if that is longer, so that a client that reads again after
//! `slowConsumerMs` still gets `slow_consumer`; `0`: never); Ctrl-C shuts down gracefully
//! (WebSockets get the close 1001, and the host prints what the shutdown closed).
//!
//! The stream values are the spec's (`heartbeatMs`, …): a value that is not a finite number
//! above 0 stops the host at the start, with an error that names the field.
//!
//! The limits keep the host's memory and open files bounded, whatever its clients send and
//! however big its log grows (each defaults to the library's default, see `HostConfig` and
//! `FileLogConfig`): threads per host and per user, the bytes of one input, of a
//! thread's transcript and of the idle threads kept in memory (the others are read back
//! from the log when used), the thread files open at once, and, with `--memory`, the bytes
//! of the whole memory log. Past a limit an input gets the spec's "`rejected` receipt …
//! Its `reason` says why" (`too_large`, `thread_limit`, `queue_full`); a request body over
//! `--max-body-bytes` (default: the input limit and 64 KiB, at least 2 MiB) is refused
//! before the protocol with `413 {error}`, and a WebSocket message over it closes the
//! socket.
//!
//! Routes, under `/api/harness/`: `GET events` (SSE), `POST control`, `GET snapshot`,
//! `GET transcript`, `GET capabilities`, `GET host-events` (SSE), `POST run` / `GET run`
//! (standard AG-UI), and the WebSocket at `GET socket`. With `--token T` a request must carry
//! `authorization: Bearer T` (or `?token=T` on the socket, since a browser cannot set
//! headers there), the scheme in any case (`bearer`, `BEARER`), checked in constant time;
//! without it the host is open. `--token` may be given more than once: the
//! n-th token signs in the user `user-n`, each with threads of their own. The two `curl` commands at the top of the
//! spec work as written against `http://127.0.0.1:8080`:
//!
//! ```text
//! curl -X POST http://127.0.0.1:8080/api/harness/control -H 'authorization: Bearer my-token' \
//!   -H 'content-type: application/json' -d '{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}'
//! curl -N -H 'authorization: Bearer my-token' 'http://127.0.0.1:8080/api/harness/events?threadId=thread-1&v=2'
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use harness_core::message::ModelRequest;
use harness_core::message::{Message, Role};
use harness_core::model::{Model, ModelEvent, ModelStream, ScriptedModel};
use harness_tanstack::driver::Service;
use harness_tanstack::host::{AccessPolicy, Host, HostConfig};
use harness_tanstack::http::StreamOptions;
use harness_tanstack::log::{EventLog, FileLog, FileLogConfig, MemoryLog};
use harness_tanstack::server::{
    BearerTokens, DEFAULT_WRITE_TIMEOUT, TanstackRouterConfig, TanstackServeConfig, drive, router,
    serve,
};

#[path = "common/model_arg.rs"]
mod model_arg;
#[path = "tanstack_shared/mod.rs"]
mod tanstack_shared;
#[path = "common/trace_arg.rs"]
mod trace_arg;

use tanstack_shared::{faq_agent, faq_model, faq_tools};

type Log = Box<dyn EventLog>;

/// The demo model: the FAQ agent's (`tanstack_shared::faq_model`), except that a message
/// starting with "wait" streams "Waiting... " and then takes 30 s (a turn to cancel, or to
/// queue inputs behind).
struct DemoModel(ScriptedModel);

impl Model for DemoModel {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let wait = req
            .last_user_text()
            .is_some_and(|t| t.to_lowercase().starts_with("wait"))
            && req.messages.last().is_some_and(|m| m.role == Role::User);
        if !wait {
            return self.0.stream(req);
        }
        let done = ModelEvent::Completed(harness_core::message::ModelResponse {
            message: Message::assistant("Waiting... done."),
            usage: Default::default(),
        });
        futures::stream::iter([Ok(ModelEvent::TextDelta("Waiting... ".into()))])
            .chain(futures::stream::once(async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(done)
            }))
            .boxed()
    }
}

const USAGE: &str = "usage: tanstack_host [--addr HOST:PORT] [--token T]... [--memory] [--log-dir DIR] [--database-url URL] \
[--heartbeat-ms N] [--sse-queue-bytes N] [--socket-buffer-bytes N] [--slow-consumer-ms N] \
[--max-threads N] [--max-threads-per-user N] [--max-input-bytes N] [--max-body-bytes N] \
[--max-transcript-bytes N] [--max-resident-threads N] [--max-resident-bytes N] \
[--max-open-files N] [--memory-log-bytes N] [--max-connections N] [--header-timeout-ms N] [--write-timeout-ms N] \
[--lease-ttl-ms N] [--model scripted|openai:MODEL] [--trace[=debug]] [--otlp URL]";

/// The flags that set a limit of the host or its log (a whole number).
const LIMITS: [&str; 13] = [
    "--max-threads",
    "--max-threads-per-user",
    "--max-input-bytes",
    "--max-body-bytes",
    "--max-transcript-bytes",
    "--max-resident-threads",
    "--max-resident-bytes",
    "--max-open-files",
    "--memory-log-bytes",
    "--max-connections",
    "--header-timeout-ms",
    "--write-timeout-ms",
    "--lease-ttl-ms",
];

/// The command line, strictly: an unknown flag, a flag without its value or a value that is
/// not a number stops the host (a `--token` that silently fell off would open the host).
#[derive(Default)]
struct Args {
    addr: Option<String>,
    tokens: Vec<String>,
    memory: bool,
    log_dir: Option<String>,
    /// `--database-url`: the event log in PostgreSQL, shared with other hosts.
    database_url: Option<String>,
    stream: StreamOptions,
    /// The limit flags that were given, by flag.
    limits: HashMap<&'static str, usize>,
}

impl Args {
    fn limit(&self, flag: &str) -> Option<usize> {
        self.limits.get(flag).copied()
    }
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    const WITH_VALUE: [&str; 8] = [
        "--addr",
        "--token",
        "--log-dir",
        "--database-url",
        "--heartbeat-ms",
        "--sse-queue-bytes",
        "--socket-buffer-bytes",
        "--slow-consumer-ms",
    ];
    let mut a = Args::default();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--memory" => {
                a.memory = true;
                continue;
            }
            "--help" | "-h" => return Err(String::new()),
            t if trace_arg::is_trace_flag(t) => continue,
            "--otlp" | "--model" => {
                it.next();
                continue;
            }
            m if model_arg::is_model_flag(m) => continue,
            o if trace_arg::is_otlp_flag(o) => continue,
            f if !WITH_VALUE.contains(&f) && !LIMITS.contains(&f) => {
                return Err(format!("unknown argument {flag:?}"));
            }
            _ => {}
        }
        let value = it
            .next()
            .filter(|v| !v.is_empty() && !v.starts_with("--"))
            .ok_or_else(|| format!("{flag} needs a value"))?;
        if let Some(limit) = LIMITS.iter().find(|l| **l == flag) {
            let n = value
                .parse::<usize>()
                .map_err(|_| format!("{flag} must be a whole number, got {value:?}"))?;
            a.limits.insert(limit, n);
            continue;
        }
        let num = |field: &str| {
            value.parse::<f64>().map_err(|_| {
                format!("stream.{field} must be a finite number above 0, got {value:?}")
            })
        };
        match flag.as_str() {
            "--addr" => a.addr = Some(value),
            "--token" => a.tokens.push(value),
            "--log-dir" => a.log_dir = Some(value),
            "--database-url" => a.database_url = Some(value),
            "--heartbeat-ms" => a.stream.heartbeat_ms = Some(num("heartbeatMs")?),
            "--sse-queue-bytes" => a.stream.sse_queue_bytes = Some(num("sseQueueBytes")?),
            "--socket-buffer-bytes" => {
                a.stream.socket_buffer_bytes = Some(num("socketBufferBytes")?)
            }
            _ => a.stream.slow_consumer_ms = Some(num("slowConsumerMs")?),
        }
    }
    Ok(a)
}

/// What the database tells this host: another host appended to a thread (its key), forwarded
/// an input to this host, or answered an input this host forwarded (its id).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
enum Note {
    Appended(String),
    Forwarded,
    Answered(u64),
}

/// The event log in PostgreSQL, listeners that send what the database tells this host to
/// `appended`, and the task that renews this host's thread leases every TTL/3. Connecting
/// blocks: it runs before the server starts.
#[cfg(feature = "postgres")]
fn database_log(
    url: &str,
    lease_ttl_ms: Option<usize>,
    appended: std::sync::mpsc::Sender<Note>,
) -> (Log, Box<dyn std::any::Any + Send>) {
    let mut log = harness_tanstack::log::PgLog::connect(url)
        .unwrap_or_else(|e| exit_with(format!("cannot open the event log in {url}: {e}"), 1));
    if let Some(ms) = lease_ttl_ms {
        log = log.with_lease_ttl(Duration::from_millis(ms as u64));
    }
    let tx = appended.clone();
    let listener = log
        .listen(move |key, _| {
            let _ = tx.send(Note::Appended(key.to_owned()));
        })
        .unwrap_or_else(|e| exit_with(format!("cannot listen on {url}: {e}"), 1));
    let tx = appended.clone();
    let forwards = log
        .listen_forwards(
            move || {
                let _ = tx.send(Note::Forwarded);
            },
            move |id| {
                let _ = appended.send(Note::Answered(id));
            },
        )
        .unwrap_or_else(|e| exit_with(format!("cannot listen on {url}: {e}"), 1));
    let keeper = log.keep_leases();
    (Box::new(log), Box::new((listener, forwards, keeper)))
}

#[cfg(not(feature = "postgres"))]
fn database_log(
    _: &str,
    _: Option<usize>,
    _: std::sync::mpsc::Sender<Note>,
) -> (Log, Box<dyn std::any::Any + Send>) {
    exit_with(
        "--database-url needs the postgres feature (cargo run --features postgres --example tanstack_host -- …)",
        2,
    )
}

fn exit_with(message: impl std::fmt::Display, code: i32) -> ! {
    eprintln!("tanstack_host: {message}");
    std::process::exit(code)
}

#[tokio::main]
async fn main() {
    let _trace = trace_arg::install_if_asked();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}\n  {}", model_arg::HELP);
            return;
        }
        Err(e) => exit_with(format!("{e}\n{USAGE}"), 2),
    };
    // "createHarnessHandler and handleHarnessSocket throw at the start, and the error
    // names the field."
    let stream = args.stream.validate().unwrap_or_else(|e| exit_with(e, 2));
    let addr = args.addr.clone().unwrap_or_else(|| "127.0.0.1:8080".into());
    let tokens = args.tokens.clone();
    // `--database-url`: the shared log, and the keys of threads other hosts append to.
    let (appended_tx, appended) = std::sync::mpsc::channel::<Note>();
    let mut shared = None;
    let log: Log = if let Some(url) = &args.database_url {
        let (log, listener) = database_log(url, args.limit("--lease-ttl-ms"), appended_tx);
        shared = Some(listener);
        log
    } else if args.memory {
        let mut log = MemoryLog::default();
        if let Some(n) = args.limit("--memory-log-bytes") {
            log = log.with_max_total_bytes(n);
        }
        Box::new(log)
    } else {
        // The durable file log is the embedded default: cursors survive a restart.
        let dir = args
            .log_dir
            .clone()
            .map(Into::into)
            .unwrap_or_else(|| std::env::temp_dir().join("harness-tanstack-host"));
        let mut log_cfg = FileLogConfig::default();
        if let Some(n) = args.limit("--max-open-files") {
            log_cfg.max_open_files = n;
        }
        match FileLog::open_with(&dir, log_cfg) {
            Ok(l) => Box::new(l),
            Err(e) => exit_with(
                format!("cannot open the event log in {}: {e}", dir.display()),
                1,
            ),
        }
    };
    let mut cfg = HostConfig {
        stream,
        ..HostConfig::default()
    };
    if !tokens.is_empty() {
        cfg.access = AccessPolicy::MembersOnly;
    }
    for (flag, field) in [
        ("--max-threads", &mut cfg.max_threads),
        ("--max-threads-per-user", &mut cfg.max_threads_per_user),
        ("--max-input-bytes", &mut cfg.max_input_bytes),
        ("--max-transcript-bytes", &mut cfg.max_transcript_bytes),
        ("--max-resident-threads", &mut cfg.max_resident_threads),
        ("--max-resident-bytes", &mut cfg.max_resident_bytes),
    ] {
        if let Some(n) = args.limit(flag) {
            *field = n;
        }
    }
    // A body or a socket message may hold the largest input and the frame around it.
    let max_body = args
        .limit("--max-body-bytes")
        .unwrap_or_else(|| (cfg.max_input_bytes + (64 << 10)).max(2 << 20));
    let slow_consumer = cfg.stream.slow_consumer;
    let svc = Service::new(Host::new(cfg, log), Instant::now);
    if shared.is_some() {
        // Another host's appends wake this host's streams of the thread (LISTEN/NOTIFY).
        let woken = svc.clone();
        std::thread::spawn(move || {
            while let Ok(note) = appended.recv() {
                match note {
                    Note::Appended(key) => woken.handle_appended(&key),
                    Note::Forwarded => woken.handle_forwarded(),
                    Note::Answered(id) => woken.handle_forward_answer(id),
                }
            }
        });
    }

    // The FAQ agent and the host share one tool registry; its refund is gated.
    let tools = faq_tools(Arc::default());
    let agent = faq_agent(&tools);
    let model = model_arg::from_command_line(|| Arc::new(DemoModel(faq_model())))
        .unwrap_or_else(|e| exit_with(e, 2));
    tokio::spawn(drive(svc.clone(), agent, model, tools));

    let mut rc = TanstackRouterConfig::new("acme/assistant").with_max_body_bytes(max_body);
    if !tokens.is_empty() {
        // The n-th token signs in `user-n`.
        let users = (1..).map(|n| format!("user-{n}"));
        rc = rc.with_bearer(BearerTokens::new(tokens.iter().zip(users)));
    }
    let app = axum::Router::new().nest("/api/harness", router(svc.clone(), rc));
    let mut serve_cfg = TanstackServeConfig::default();
    serve_cfg = match args.limit("--write-timeout-ms") {
        Some(0) => serve_cfg.without_write_timeout(),
        Some(ms) => serve_cfg.with_write_timeout(Duration::from_millis(ms as u64)),
        None => serve_cfg.with_write_timeout(DEFAULT_WRITE_TIMEOUT.max(slow_consumer * 2)),
    };
    if let Some(n) = args.limit("--max-connections") {
        serve_cfg = serve_cfg.with_max_connections(n);
    }
    if let Some(ms) = args.limit("--header-timeout-ms") {
        serve_cfg = serve_cfg.with_header_timeout(Duration::from_millis(ms as u64));
    }
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| exit_with(format!("cannot listen on {addr}: {e}"), 1));
    println!(
        "tanstack host on http://{}/api/harness/",
        listener.local_addr().expect("addr")
    );
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let report = serve(listener, app, serve_cfg, stop).await;
    println!(
        "tanstack host stopped: {} connections open at the shutdown, {} closed by it; {} closed by the write timeout",
        report.open_at_shutdown, report.ended_by_shutdown, report.write_timeouts
    );
    // A graceful shutdown lets this host's thread leases go: another host takes each thread
    // at once (`acquired`), not after the TTL (`taken_over`).
    let released = svc.with_host(|h, _| h.log_mut().release_all());
    if let Err(e) = released {
        eprintln!("tanstack_host: releasing the thread leases failed: {e}");
    }
    drop(shared);
}
