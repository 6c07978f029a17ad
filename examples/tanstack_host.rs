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
//!     [--max-open-files N] [--memory-log-bytes N]
//! ```
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
//! headers there); without it the host is open. `--token` may be given more than once: the
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
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{SinkExt, StreamExt};
use harness_core::message::ModelRequest;
use harness_core::message::{Message, Role};
use harness_core::model::{Model, ModelEvent, ModelStream, ScriptedModel};
use harness_tanstack::agui::RunAgentInput;
use harness_tanstack::driver::{ConnStream, Service, run_turns};
use harness_tanstack::host::{AccessPolicy, Host, HostConfig, Transport};
use harness_tanstack::http::{HttpAnswer, StreamOptions, request_id};
use harness_tanstack::log::{EventLog, FileLog, FileLogConfig, MemoryLog};

#[path = "tanstack_shared/mod.rs"]
mod tanstack_shared;
#[path = "common/trace_arg.rs"]
mod trace_arg;

use tanstack_shared::{faq_agent, faq_model, faq_tools};

type Log = Box<dyn EventLog>;

#[derive(Clone)]
struct App {
    svc: Service<Log>,
    /// The tokens: the n-th signs in `user-n`.
    tokens: Vec<String>,
    /// `slowConsumerMs`: a socket write that does not complete for this long is a client
    /// that does not read (the host closes it 4408; the socket goes too).
    slow_consumer: Duration,
    /// The largest request body, and WebSocket message, taken.
    max_body: usize,
}

impl App {
    /// `getUser`: the bearer token (or `?token=`) must be one of the tokens, and signs in
    /// its user; with no token configured, every request is the anonymous user.
    fn user(&self, headers: &HeaderMap, query_token: Option<&str>) -> Option<String> {
        if self.tokens.is_empty() {
            return Some("anonymous".into());
        }
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let n = self
            .tokens
            .iter()
            .position(|t| bearer == Some(t.as_str()) || query_token == Some(t.as_str()))?;
        Some(format!("user-{}", n + 1))
    }
}

/// The request id (`with_request_id` already put a safe one in the header).
fn rid(headers: &HeaderMap) -> String {
    request_id(headers.get("x-request-id").and_then(|v| v.to_str().ok()))
}

/// "Every HTTP answer of the handler sends the id back in the X-Request-Id header": the
/// client's id when it is a short safe id, else a new UUID, on every answer (the WebSocket
/// upgrade, a wrong method and a bad query string included).
async fn with_request_id(mut req: Request, next: Next) -> Response {
    let id = rid(req.headers());
    let Ok(v) = HeaderValue::from_str(&id) else {
        return next.run(req).await;
    };
    req.headers_mut().insert("x-request-id", v.clone());
    let mut res = next.run(req).await;
    if res.status().as_u16() >= 400 && !is_json(res.headers()) {
        // axum's own answers (404, 405, 413 of a body over the limit) are plain text or empty;
        // every answer of this host carries `{error}`, as the spec's `POST control` ones do.
        let error = res.status().canonical_reason().unwrap_or("error");
        let body = serde_json::json!({ "error": error.to_ascii_lowercase() }).to_string();
        let (mut parts, _) = res.into_parts();
        parts.headers.remove("content-length");
        parts
            .headers
            .insert("content-type", HeaderValue::from_static("application/json"));
        res = Response::from_parts(parts, Body::from(body));
    }
    res.headers_mut().entry("x-request-id").or_insert(v);
    res
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

fn json_answer(a: HttpAnswer) -> Response {
    let mut r = Response::new(Body::from(a.body));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(&a.request_id) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

fn sse_answer(stream: ConnStream<Log>, request_id: &str) -> Response {
    let body = Body::from_stream(stream.map(Ok::<Bytes, Infallible>));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    r
}

type Q = Query<HashMap<String, String>>;

async fn events(State(app): State<App>, Query(q): Q, headers: HeaderMap) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    match app.svc.open_sse(
        q.get("threadId").map(String::as_str),
        q.get("v").map(String::as_str),
        q.get("from").map(String::as_str),
        last,
        user.as_deref(),
        &rid,
    ) {
        Ok(s) => sse_answer(s, &rid),
        Err(a) => json_answer(a),
    }
}

async fn host_events(State(app): State<App>, Query(q): Q, headers: HeaderMap) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    match app.svc.open_host_events(
        q.get("v").map(String::as_str),
        q.get("from").map(String::as_str),
        last,
        user.as_deref(),
        &rid,
    ) {
        Ok(s) => sse_answer(s, &rid),
        Err(a) => json_answer(a),
    }
}

async fn control(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let tp = headers.get("traceparent").and_then(|v| v.to_str().ok());
    json_answer(app.svc.control(user.as_deref(), &body, &rid, tp))
}

async fn snapshot(State(app): State<App>, Query(q): Q, headers: HeaderMap) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let t = q.get("threadId").cloned().unwrap_or_default();
    json_answer(app.svc.snapshot(&t, user.as_deref(), &rid))
}

async fn transcript(State(app): State<App>, Query(q): Q, headers: HeaderMap) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let t = q.get("threadId").cloned().unwrap_or_default();
    json_answer(app.svc.transcript(&t, user.as_deref(), &rid))
}

async fn capabilities(State(app): State<App>, headers: HeaderMap) -> Response {
    json_answer(app.svc.capabilities("acme/assistant", &rid(&headers)))
}

async fn run_post(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let input: RunAgentInput = match serde_json::from_slice(&body) {
        Ok(i) => i,
        Err(e) => return json_answer(HttpAnswer::error(400, &e.to_string(), &rid)),
    };
    let tp = headers.get("traceparent").and_then(|v| v.to_str().ok());
    match app.svc.run_agui(&input, user.as_deref(), &rid, tp) {
        Ok(s) => sse_answer(s, &rid),
        Err(a) => json_answer(a),
    }
}

async fn run_get(State(app): State<App>, Query(q): Q, headers: HeaderMap) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, None);
    let (t, r) = (
        q.get("threadId").cloned().unwrap_or_default(),
        q.get("runId").cloned().unwrap_or_default(),
    );
    match app.svc.open_run(&t, &r, user.as_deref(), &rid) {
        Ok(s) => sse_answer(s, &rid),
        Err(a) => json_answer(a),
    }
}

async fn socket(
    State(app): State<App>,
    Query(q): Q,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let rid = rid(&headers);
    let user = app.user(&headers, q.get("token").map(String::as_str));
    ws.max_message_size(app.max_body)
        .max_frame_size(app.max_body)
        .on_upgrade(move |socket| serve_socket(app, socket, user, rid))
        .into_response()
}

async fn serve_socket(app: App, mut socket: WebSocket, user: Option<String>, rid: String) {
    let conn = app.svc.connect(Transport::WebSocket, user.as_deref(), &rid);
    let Ok(mut out) = conn.stream() else {
        return; // a new connection's first stream
    };
    let slow = app.slow_consumer;
    loop {
        tokio::select! {
            msg = socket.recv() => match msg {
                Some(Ok(WsMessage::Text(t))) => conn.handle_text(t.as_str()),
                Some(Ok(WsMessage::Binary(b))) => conn.handle_text(&String::from_utf8_lossy(&b)),
                Some(Ok(WsMessage::Close(_))) => {
                    // The close from the client gets its close back (RFC 6455 5.5.1: "the
                    // endpoint MUST send a Close frame in response"): the reply is queued
                    // by the socket and goes out on the flush of `close` (dropping the
                    // socket instead leaves the client with 1006, an abnormal closure).
                    let _ = tokio::time::timeout(slow, SinkExt::close(&mut socket)).await;
                    break;
                }
                None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            item = out.next() => match item {
                Some(b) => {
                    let text = String::from_utf8_lossy(&b).into_owned();
                    // A client that does not read: the write does not complete and the stream
                    // is not polled, so the host gives the connection up (4408). Queue the
                    // close behind what waits (a client that reads again gets it, and
                    // subscribes again from its last cursor); drop a client that does not.
                    match tokio::time::timeout(slow, socket.send(WsMessage::Text(text.into()))).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break,
                        Err(_) => {
                            let close = CloseFrame { code: 4408, reason: "slow_consumer".into() };
                            let _ = tokio::time::timeout(slow, socket.send(WsMessage::Close(Some(close)))).await;
                            break;
                        }
                    }
                }
                None => {
                    let code = out.close_code().unwrap_or(1000);
                    let _ = socket.send(WsMessage::Close(Some(CloseFrame { code, reason: "".into() }))).await;
                    break;
                }
            },
        }
    }
}

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
[--max-open-files N] [--memory-log-bytes N] [--trace[=debug]] [--otlp URL]";

/// The flags that set a limit of the host or its log (a whole number).
const LIMITS: [&str; 9] = [
    "--max-threads",
    "--max-threads-per-user",
    "--max-input-bytes",
    "--max-body-bytes",
    "--max-transcript-bytes",
    "--max-resident-threads",
    "--max-resident-bytes",
    "--max-open-files",
    "--memory-log-bytes",
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
            "--otlp" => {
                it.next();
                continue;
            }
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

/// The event log in PostgreSQL and a listener that sends the key of each thread appended to
/// (by any host) to `appended`. Connecting blocks: it runs before the server starts.
#[cfg(feature = "postgres")]
fn database_log(
    url: &str,
    appended: std::sync::mpsc::Sender<String>,
) -> (Log, Box<dyn std::any::Any + Send>) {
    let log = harness_tanstack::log::PgLog::connect(url)
        .unwrap_or_else(|e| exit_with(format!("cannot open the event log in {url}: {e}"), 1));
    let listener = log
        .listen(move |key, _| {
            let _ = appended.send(key.to_owned());
        })
        .unwrap_or_else(|e| exit_with(format!("cannot listen on {url}: {e}"), 1));
    (Box::new(log), Box::new(listener))
}

#[cfg(not(feature = "postgres"))]
fn database_log(
    _: &str,
    _: std::sync::mpsc::Sender<String>,
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
            println!("{USAGE}");
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
    let (appended_tx, appended) = std::sync::mpsc::channel::<String>();
    let mut shared = None;
    let log: Log = if let Some(url) = &args.database_url {
        let (log, listener) = database_log(url, appended_tx);
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
            while let Ok(key) = appended.recv() {
                woken.handle_appended(&key);
            }
        });
    }

    // The FAQ agent and the host share one tool registry; its refund is gated.
    let tools = faq_tools(Arc::default());
    let agent = faq_agent(&tools);
    tokio::spawn(run_turns(svc.clone(), agent, DemoModel(faq_model()), tools));
    let ticker = svc.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(100));
        loop {
            every.tick().await;
            ticker.tick();
        }
    });

    let app = App {
        svc,
        tokens,
        slow_consumer,
        max_body,
    };
    let router = Router::new()
        .route("/api/harness/events", get(events))
        .route("/api/harness/host-events", get(host_events))
        .route("/api/harness/control", post(control))
        .route("/api/harness/snapshot", get(snapshot))
        .route("/api/harness/transcript", get(transcript))
        .route("/api/harness/capabilities", get(capabilities))
        .route("/api/harness/run", post(run_post).get(run_get))
        .route("/api/harness/socket", get(socket))
        .with_state(app)
        // A body over the limit: `413 {error}` (axum's answer, made JSON below).
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(with_request_id));
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| exit_with(format!("cannot listen on {addr}: {e}"), 1));
    println!(
        "tanstack host on http://{}/api/harness/",
        listener.local_addr().expect("addr")
    );
    axum::serve(listener, router).await.expect("serve");
}
