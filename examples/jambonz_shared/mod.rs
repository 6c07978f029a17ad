//! Shared by the jambonz examples and the tour chapter: the demo FAQ agent, a WebSocket
//! server that serves it (with the upgrade check), and a client that plays jambonz with the
//! simulator in real time.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::result_large_err
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use harness_core::agent::ToolLoopAgent;
use harness_core::message::{Message, Part, Role, ToolCall, ToolDefinition};
use harness_core::model::ScriptedModel;
use harness_core::{Tool, Tools};
use harness_jambonz::driver::{CallReport, Incoming, ServeConfig, serve};
use harness_jambonz::harness_side::Transmit;
use harness_jambonz::simulator::{Script, SimConfig, Simulator, Transcript};
use harness_jambonz::upgrade::{SUBPROTOCOL, check_upgrade};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The harness's own tools: `refund(order_id)`, gated (`requires_approval`): a person must
/// approve a refund. On a phone call no one can (jambonz has no approval message), so the
/// driver's policy denies it and the code never runs; `refunds_run` counts the times it did.
pub fn faq_tools(refunds_run: Arc<AtomicUsize>) -> Tools {
    Tools::new().with(
        Tool::json("refund", "Refund an order", move |args| {
            refunds_run.fetch_add(1, Ordering::SeqCst);
            Ok(serde_json::json!({"refunded": args.get("order_id")}))
        })
        .requires_approval(),
    )
}

/// The platform's tools, which jambonz runs on `tool:call` (the simulator plays them).
pub fn platform_tools() -> Tools {
    Tools::new().with(Tool::json("get_hours", "Acme's opening hours", |_| {
        Ok(serde_json::json!({"weekdays": "8am to 6pm"}))
    }))
}

/// The demo agent: answers calls for Acme, looks up opening hours with the platform's
/// `get_hours` tool (run by jambonz), offers its own gated `refund` tool (refused on the
/// phone), and hangs up with the `hangup` command when the caller says goodbye.
pub fn faq_agent() -> ToolLoopAgent {
    ToolLoopAgent::new("acme-faq")
        .with_system_prompt("You answer calls for Acme.")
        .with_tools(&platform_tools())
        .with_tools(&faq_tools(Arc::default()))
        .with_command_tool(ToolDefinition::new("hangup", "End the call"), "hangup")
}

/// What the model says when the refund was denied: the words come from seeing the
/// denial as the tool's result.
pub const REFUND_REFUSED: &str =
    "Sorry, I can't make refunds on the phone. Please ask at acme.example/refunds.";

/// The built-in deterministic model behind the demo agent (no network, no key).
pub fn faq_model() -> ScriptedModel {
    let ids = AtomicUsize::new(0);
    ScriptedModel::new()
        .with_id("scripted-faq")
        .otherwise(move |req| {
            let call = |name: &str, args: serde_json::Value| {
                let n = ids.fetch_add(1, Ordering::SeqCst) + 1;
                let args = args.as_object().cloned().unwrap_or_default();
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall::new(
                        format!("call_{n}"),
                        name,
                        args,
                    ))],
                }
            };
            let last = req.messages.last();
            if let Some(m) = last.filter(|m| m.role == Role::Tool) {
                let result = m.parts.iter().find_map(|p| match p {
                    Part::ToolResult(r) => Some(r),
                    _ => None,
                });
                if result.is_some_and(|r| r.is_denied()) {
                    return Ok(Message::assistant(REFUND_REFUSED));
                }
                let output = result.and_then(|r| r.output.as_ref());
                if let Some(order) = output.and_then(|o| o.get("refunded")) {
                    return Ok(Message::assistant(format!("Order {order} is refunded.")));
                }
                let hours = output
                    .and_then(|o| o.get("weekdays"))
                    .and_then(|h| h.as_str());
                return Ok(Message::assistant(match hours {
                    Some(h) if h.contains("8am to 6pm") => {
                        "We're open eight to six on weekdays.".to_owned()
                    }
                    Some(h) => format!("We're open {h} on weekdays."),
                    None => "Sorry, I could not look that up.".to_owned(),
                }));
            }
            let said = req.last_user_text().unwrap_or_default().to_lowercase();
            Ok(if said.contains("(call connected)") {
                Message::assistant("Thanks for calling Acme.")
            } else if said.contains("bye") {
                call("hangup", serde_json::json!({"reason": "resolved"}))
            } else if said.contains("refund") {
                let order = said
                    .split(|c: char| !c.is_ascii_digit())
                    .find_map(|d| d.parse::<u64>().ok());
                call("refund", serde_json::json!({"order_id": order}))
            } else if said.contains("open") || said.contains("hours") {
                call("get_hours", serde_json::json!({}))
            } else {
                Message::assistant("I can tell you when we're open.")
            })
        })
}

/// The spec's "A whole call" (greeting, "When are you open", a barge-in with "Thanks, bye"),
/// with a refund request before the question.
pub fn whole_call_script() -> Script {
    Script::new()
        .greeting()
        .say("Please refund order 42")
        .say("When are you open")
        .barge_in(Duration::from_millis(1100), "Thanks, bye")
}

/// A simulator for the whole call, with the platform's `get_hours` tool.
pub fn whole_call_simulator(now: Instant) -> Simulator {
    Simulator::new(now, SimConfig::default(), whole_call_script()).with_tools(platform_tools())
}

/// Serves the FAQ agent on `listener` forever, one task per call.
pub async fn run_server(listener: TcpListener, secret: Option<String>, verbose: bool) {
    let agent = Arc::new(faq_agent());
    let model = Arc::new(faq_model());
    let tools = faq_tools(Arc::default());
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            continue;
        };
        let (agent, model, tools, secret) =
            (agent.clone(), model.clone(), tools.clone(), secret.clone());
        tokio::spawn(async move {
            match serve_connection(tcp, agent, model, tools, secret.as_deref()).await {
                Ok(report) if verbose => println!(
                    "call {} from {peer}: {} turns, {} cancelled, {} failed, {} bad frames, end {:?}",
                    report
                        .session
                        .as_ref()
                        .and_then(|s| s.call_sid.clone())
                        .unwrap_or_default(),
                    report.turns,
                    report.cancelled,
                    report.failed,
                    report.frame_errors.len(),
                    report.end.as_ref().and_then(|e| e.reason.clone()),
                ),
                Ok(_) => {}
                Err(e) if verbose => println!("connection from {peer}: {e}"),
                Err(_) => {}
            }
        });
    }
}

/// One call: the upgrade check, then the driver over the socket, with the agent's own
/// `tools` (a gated one is denied: the default policy).
pub async fn serve_connection(
    tcp: TcpStream,
    agent: Arc<ToolLoopAgent>,
    model: Arc<ScriptedModel>,
    tools: Tools,
    secret: Option<&str>,
) -> Result<CallReport, String> {
    let check = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes()));
        match check_upgrade(headers, secret) {
            Ok(accept) => {
                resp.headers_mut().insert(
                    "sec-websocket-protocol",
                    HeaderValue::from_static(accept.subprotocol),
                );
                Ok(resp)
            }
            Err(refusal) => {
                let mut e = ErrorResponse::new(Some(refusal.reason.to_owned()));
                *e.status_mut() =
                    StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::UNAUTHORIZED);
                Err(e)
            }
        }
    };
    let _ = tcp.set_nodelay(true);
    let ws = tokio_tungstenite::accept_hdr_async(tcp, check)
        .await
        .map_err(|e| format!("upgrade refused or failed: {e}"))?;
    let (sink, stream) = ws.split();
    let incoming = stream.filter_map(|m| async move {
        match m {
            Ok(WsMessage::Text(t)) => Some(Incoming::Text(t.as_str().to_owned())),
            Ok(WsMessage::Binary(_)) => Some(Incoming::Binary),
            Ok(WsMessage::Close(f)) => Some(Incoming::Close {
                code: f.as_ref().map(|f| u16::from(f.code)),
                reason: f.map(|f| f.reason.as_str().to_owned()).unwrap_or_default(),
            }),
            Ok(_) => None,
            Err(e) => Some(Incoming::Close {
                code: None,
                reason: e.to_string(),
            }),
        }
    });
    let mut sink = sink
        .sink_map_err(|e| e.to_string())
        .with(|t: Transmit| futures::future::ready(Ok::<_, String>(to_ws(t))));
    let report = serve(
        agent,
        model,
        tools,
        Instant::now,
        Box::pin(incoming),
        &mut sink,
        ServeConfig::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let _ = sink.close().await;
    Ok(report)
}

fn to_ws(t: Transmit) -> WsMessage {
    match t {
        Transmit::Text(s) => WsMessage::text(s),
        Transmit::Close { code, reason } => WsMessage::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: reason.into(),
        })),
    }
}

fn short(s: &str) -> String {
    if s.len() > 150 {
        let mut end = 150;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s.to_owned()
    }
}

/// How long jambonz waits for the harness to accept the connection and the upgrade.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Plays jambonz against the harness at `url` with `sim`, in real time; prints every frame
/// when `verbose`. Returns the transcript.
pub async fn play_call(
    url: &str,
    secret: Option<&str>,
    sim: Simulator,
    verbose: bool,
) -> Result<Transcript, String> {
    play_call_with(url, secret, sim, verbose, CONNECT_TIMEOUT).await
}

/// [`play_call`], giving up when the harness has not completed the WebSocket upgrade
/// within `connect_timeout` (a server that accepts TCP and never answers would hang the
/// call for ever).
pub async fn play_call_with(
    url: &str,
    secret: Option<&str>,
    mut sim: Simulator,
    verbose: bool,
    connect_timeout: Duration,
) -> Result<Transcript, String> {
    // jambonz dials wss://, or ws:// to a private address only.
    harness_jambonz::upgrade::check_harness_url(url).map_err(|e| e.to_string())?;
    let mut req = url.into_client_request().map_err(|e| e.to_string())?;
    req.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_static(SUBPROTOCOL),
    );
    if let Some(s) = secret {
        let v = HeaderValue::from_str(&format!("Bearer {s}")).map_err(|e| e.to_string())?;
        req.headers_mut().insert("authorization", v);
    }
    let connect = tokio_tungstenite::connect_async_with_config(req, None, true);
    let (mut ws, _) = tokio::time::timeout(connect_timeout, connect)
        .await
        .map_err(|_| {
            format!(
                "connect {url}: no WebSocket upgrade within {} ms",
                connect_timeout.as_millis()
            )
        })?
        .map_err(|e| format!("connect {url}: {e}"))?;
    let t0 = Instant::now();
    let stamp = move || format!("{:>6} ms", t0.elapsed().as_millis());
    sim.start(Instant::now());
    loop {
        while let Some(t) = sim.poll_transmit() {
            if verbose {
                match &t {
                    Transmit::Text(s) => println!("{}  jambonz → harness  {}", stamp(), short(s)),
                    Transmit::Close { code, reason } => {
                        println!("{}  jambonz closes ({code} {reason})", stamp())
                    }
                }
            }
            let close = matches!(t, Transmit::Close { .. });
            ws.send(to_ws(t)).await.map_err(|e| e.to_string())?;
            if close {
                // Wait briefly for the harness's side of the close handshake.
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    while let Some(Ok(_)) = ws.next().await {}
                })
                .await;
                return Ok(sim.transcript().clone());
            }
        }
        if sim.is_ended() {
            let _ = ws.close(None).await;
            return Ok(sim.transcript().clone());
        }
        let deadline = sim.poll_timeout();
        tokio::select! {
            m = ws.next() => match m {
                Some(Ok(WsMessage::Text(t))) => {
                    if verbose {
                        println!("{}  harness → jambonz  {}", stamp(), short(t.as_str()));
                    }
                    sim.handle_frame(Instant::now(), t.as_str());
                }
                Some(Ok(WsMessage::Binary(_))) => sim.handle_binary(Instant::now()),
                Some(Ok(WsMessage::Close(f))) => {
                    let (code, reason) = f.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())).unwrap_or((1005, String::new()));
                    if verbose {
                        println!("{}  harness closes ({code} {reason})", stamp());
                    }
                    sim.handle_close(Instant::now(), code, &reason);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    sim.handle_close(Instant::now(), 1006, &e.to_string());
                }
                None => sim.handle_close(Instant::now(), 1006, "connection lost"),
            },
            _ = sleep_until(deadline) => sim.handle_timeout(Instant::now()),
        }
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => futures::future::pending().await,
    }
}

/// Whether a played call passes: it ended, nothing broke a rule, no deadline expired, every
/// turn was answered (or barged in on).
pub fn check(t: &Transcript) -> Result<(), String> {
    let mut problems = Vec::new();
    if t.ended.is_none() {
        problems.push("the call did not end".to_owned());
    }
    if let Some((code, reason)) = &t.closed_by_harness {
        problems.push(format!(
            "the harness closed the socket mid-call ({code} {reason})"
        ));
    }
    for v in &t.violations {
        problems.push(format!("violation {:?}: {}", v.kind, v.detail));
    }
    if t.violations_dropped > 0 {
        problems.push(format!("and {} more violations", t.violations_dropped));
    }
    for turn in &t.turns {
        if !matches!(
            turn.completion_reason.as_str(),
            "completed" | "barge_in" | "call_ended"
        ) {
            problems.push(format!(
                "turn {} {} {}",
                turn.turn_id,
                turn.completion_reason,
                turn.harness_error.clone().unwrap_or_default()
            ));
        }
    }
    if t.heard().iter().all(|h| h.is_empty()) {
        problems.push("the caller heard nothing".to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}
