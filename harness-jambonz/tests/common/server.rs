//! The setup of the server's tests: a [`JambonzServer`] on a loopback port with a small agent
//! ([`Running`]), a WebSocket client that speaks to it frame by frame ([`connect`],
//! [`Ws`]), and a short call to play over it ([`short_call`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use harness_core::Tools;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::Message;
use harness_core::model::ScriptedModel;
use harness_jambonz::server::{JambonzServer, JambonzServerConfig, ServerReport};
use harness_jambonz::simulator::{CallTranscript, Script, SimConfig, Simulator};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The agent every server test serves: a greeting, then "We're open eight to six." in
/// words, for anything said.
pub fn agent() -> (ToolLoopAgent, ScriptedModel) {
    let model = ScriptedModel::new().otherwise(|req| {
        let said = req.last_user_text().unwrap_or_default();
        Ok(Message::assistant(if said == "(call connected)" {
            "Thanks for calling Acme."
        } else {
            "We're open eight to six."
        }))
    });
    (ToolLoopAgent::new("acme"), model)
}

/// A server serving [`agent`] on a loopback port, stopped with [`Running::stop`].
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<ServerReport>,
}

impl Running {
    pub async fn start(config: JambonzServerConfig) -> Self {
        Self::start_with(JambonzServer::new(config)).await
    }

    pub async fn start_with(server: JambonzServer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let (agent, model) = agent();
        let shutdown = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(server.serve(listener, agent, model, Tools::new(), shutdown));
        Running {
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Begins the shutdown (without waiting for it).
    pub fn begin_stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Shuts down and waits for the report.
    pub async fn stop(mut self) -> ServerReport {
        self.begin_stop();
        self.task.await.unwrap()
    }

    /// The report, once the server ended by itself (after [`begin_stop`](Self::begin_stop)),
    /// or `None` if it has not within `within`.
    pub async fn ended_within(&mut self, within: Duration) -> Option<ServerReport> {
        tokio::time::timeout(within, &mut self.task)
            .await
            .ok()
            .map(|r| r.unwrap())
    }
}

/// The spec's whole call, shortened: the greeting and one question.
pub fn short_call() -> Simulator {
    let script = Script::new().greeting().say("When are you open");
    Simulator::new(Instant::now(), SimConfig::default(), script)
}

/// Checks a [`short_call`] played against [`agent`]: it passes, and the caller heard both
/// replies.
pub fn assert_short_call_passed(t: &CallTranscript) {
    assert!(t.problems().is_empty(), "{:?}", t.problems());
    assert_eq!(
        t.heard(),
        ["Thanks for calling Acme.", "We're open eight to six."]
    );
}

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A WebSocket to `url` offering the subprotocol (and the secret, if any).
pub async fn connect(url: &str, secret: Option<&str>) -> Result<Ws, String> {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_static("harness.jambonz.org"),
    );
    if let Some(s) = secret {
        req.headers_mut().insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {s}")).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            Err(format!("HTTP {}", r.status().as_u16()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Sends `session:start` (and the greeting turn) on a socket: a call in progress.
pub async fn start_call(ws: &mut Ws, sid: &str) {
    let start = format!(r#"{{"type":"session:start","call_sid":"{sid}","protocol":1}}"#);
    ws.send(WsMessage::text(start)).await.unwrap();
    let greeting = format!(
        r#"{{"type":"turn:start","call_sid":"{sid}","turn_id":1,"input":{{"type":"greeting"}}}}"#
    );
    ws.send(WsMessage::text(greeting)).await.unwrap();
    // Wait for the greeting's reply:done.
    while let Some(Ok(m)) = ws.next().await {
        if m.to_text().is_ok_and(|t| t.contains("reply:done")) {
            return;
        }
    }
    panic!("no reply:done for the greeting");
}

/// Reads until the server's close frame: its code and reason (`None`: the connection ended
/// without one).
pub async fn close_of(ws: &mut Ws) -> Option<(u16, String)> {
    while let Some(m) = ws.next().await {
        match m {
            Ok(WsMessage::Close(f)) => {
                return f.map(|f| (u16::from(f.code), f.reason.as_str().to_owned()));
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}
