//! jambonz over a real socket (feature `tokio`): the [`Simulator`] dials a harness URL and
//! plays its script in real time, as jambonz would. Test a harness you deployed, in any
//! language, with the spec's rules checked on every frame.
//!
//! ```no_run
//! use std::time::Instant;
//! use harness_jambonz::client::Caller;
//! use harness_jambonz::simulator::{Script, SimConfig, Simulator};
//!
//! # async fn run() -> Result<(), harness_jambonz::client::ClientError> {
//! let sim = Simulator::new(Instant::now(), SimConfig::default(), Script::new().greeting().say("When are you open"));
//! let transcript = Caller::new()
//!     .with_secret("s3cret")
//!     .on_frame(|f| println!("{:>6} ms {:?} {:?}", f.at_ms, f.direction, f.frame))
//!     .call("ws://127.0.0.1:8080", sim)
//!     .await?;
//! println!("{transcript}");
//! assert!(transcript.problems().is_empty());
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::harness_side::Transmit;
use crate::simulator::{CallTranscript, Simulator};
use crate::testing::{Direction, SimFrame};
use crate::upgrade::{SUBPROTOCOL, UrlRefusal, check_harness_url};
use crate::ws::to_ws;

/// Why a call could not be played.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// jambonz would not dial this URL.
    #[error(transparent)]
    Url(#[from] UrlRefusal),
    /// The URL or the secret cannot be put in a request.
    #[error("request: {0}")]
    Request(String),
    /// The harness did not complete the WebSocket upgrade in time.
    #[error("no WebSocket upgrade within {} ms", .0.as_millis())]
    ConnectTimeout(Duration),
    /// The harness answered the upgrade with this HTTP status (401: the secret).
    #[error("upgrade refused: HTTP {status}")]
    Refused {
        /// The status.
        status: u16,
    },
    /// The connection or the upgrade failed.
    #[error("connect: {0}")]
    Connect(String),
    /// The socket failed during the call.
    #[error("transport: {0}")]
    Transport(String),
}

type OnFrame = dyn FnMut(&SimFrame) + Send;

/// Dials harnesses as jambonz does: subprotocol `harness.jambonz.org`, the Bearer secret,
/// `ws://` to a private address only.
pub struct Caller {
    secret: Option<String>,
    connect_timeout: Duration,
    close_wait: Duration,
    on_frame: Option<Box<OnFrame>>,
}

impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller")
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for Caller {
    fn default() -> Self {
        Self::new()
    }
}

impl Caller {
    /// No secret, a 10 s connect timeout.
    pub fn new() -> Self {
        Caller {
            secret: None,
            connect_timeout: Duration::from_secs(10),
            close_wait: Duration::from_secs(2),
            on_frame: None,
        }
    }

    /// Sends `Authorization: Bearer <secret>` with the upgrade.
    #[must_use]
    pub fn with_secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// Gives up when the harness has not completed the upgrade within `t` (a server that
    /// accepts TCP and never answers would hold the call for ever).
    #[must_use]
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// Calls `f` with every frame sent or received, as it goes.
    #[must_use]
    pub fn on_frame(mut self, f: impl FnMut(&SimFrame) + Send + 'static) -> Self {
        self.on_frame = Some(Box::new(f));
        self
    }

    fn request(&self, url: &str) -> Result<Request, ClientError> {
        let mut req = url
            .into_client_request()
            .map_err(|e| ClientError::Request(e.to_string()))?;
        req.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        if let Some(s) = &self.secret {
            let v = HeaderValue::from_str(&format!("Bearer {s}"))
                .map_err(|e| ClientError::Request(e.to_string()))?;
            req.headers_mut().insert("authorization", v);
        }
        Ok(req)
    }

    /// Dials `url` (`ws://` to a private address; for `wss://` open the TLS stream yourself
    /// and use [`call_over`](Self::call_over)) and plays `sim` until the call ends.
    pub async fn call(&mut self, url: &str, sim: Simulator) -> Result<CallTranscript, ClientError> {
        check_harness_url(url)?;
        let req = self.request(url)?;
        let connect = tokio_tungstenite::connect_async(req);
        let (ws, _) = tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| ClientError::ConnectTimeout(self.connect_timeout))?
            .map_err(connect_error)?;
        self.play(ws, sim).await
    }

    /// Plays `sim` over a connection you opened (a TLS stream, a Unix socket), with the
    /// upgrade request for `url`.
    pub async fn call_over<S>(
        &mut self,
        stream: S,
        url: &str,
        sim: Simulator,
    ) -> Result<CallTranscript, ClientError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let req = self.request(url)?;
        let upgrade = tokio_tungstenite::client_async(req, stream);
        let (ws, _) = tokio::time::timeout(self.connect_timeout, upgrade)
            .await
            .map_err(|_| ClientError::ConnectTimeout(self.connect_timeout))?
            .map_err(connect_error)?;
        self.play(ws, sim).await
    }

    async fn play<S>(
        &mut self,
        mut ws: tokio_tungstenite::WebSocketStream<S>,
        mut sim: Simulator,
    ) -> Result<CallTranscript, ClientError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let t0 = Instant::now();
        let mut seen = |direction, frame: &Transmit| {
            if let Some(f) = &mut self.on_frame {
                f(&SimFrame {
                    at_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                    direction,
                    frame: frame.clone(),
                });
            }
        };
        let transport = |e: WsError| ClientError::Transport(e.to_string());
        sim.start(Instant::now());
        loop {
            while let Some(t) = sim.poll_transmit() {
                seen(Direction::ToHarness, &t);
                let close = matches!(t, Transmit::Close { .. });
                ws.send(to_ws(t)).await.map_err(transport)?;
                if close {
                    // Wait briefly for the harness's side of the close handshake.
                    let _ = tokio::time::timeout(self.close_wait, async {
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
                        seen(Direction::ToJambonz, &Transmit::Text(t.as_str().to_owned()));
                        sim.handle_frame(Instant::now(), t.as_str());
                    }
                    Some(Ok(WsMessage::Binary(_))) => sim.handle_binary(Instant::now()),
                    Some(Ok(WsMessage::Close(f))) => {
                        let (code, reason) = f
                            .map(|f| (u16::from(f.code), f.reason.as_str().to_owned()))
                            .unwrap_or((1005, String::new()));
                        seen(Direction::ToJambonz, &Transmit::Close { code, reason: reason.clone() });
                        sim.handle_close(Instant::now(), code, &reason);
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => sim.handle_close(Instant::now(), 1006, &e.to_string()),
                    None => sim.handle_close(Instant::now(), 1006, "connection lost"),
                },
                () = sleep_until(deadline) => sim.handle_timeout(Instant::now()),
            }
        }
    }
}

fn connect_error(e: WsError) -> ClientError {
    match e {
        WsError::Http(resp) => ClientError::Refused {
            status: resp.status().as_u16(),
        },
        e => ClientError::Connect(e.to_string()),
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
