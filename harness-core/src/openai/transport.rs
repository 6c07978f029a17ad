//! The HTTP adapter (feature `openai`): [`OpenAiModel`] sends the codec's request over hyper
//! and rustls and feeds the body to a [`ChatStreamDecoder`]. This is the one place of the
//! provider that owns sockets, a runtime and a clock.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use http::{HeaderMap, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::runtime::{Handle, Runtime};

use super::decoder::{ChatStreamConfig, ChatStreamDecoder};
use super::request::request_body;
use super::status::{http_error, retry_after};
use crate::message::ModelRequest;
use crate::model::{Model, ModelError, ModelEvent, ModelStream};

/// OpenAI's API, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The most bytes of an error answer's body read for its message.
const MAX_ERROR_BODY: usize = 64 << 10;

/// How long to wait for the rest of a body after `data: [DONE]` (so the connection can go
/// back to the pool) before handing out the completed response anyway.
const DRAIN_AFTER_DONE: Duration = Duration::from_millis(100);

/// Events buffered between the connection task and the stream's reader.
const CHANNEL: usize = 64;

/// Why an [`OpenAiModel`] could not be configured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiConfigError {
    /// `OPENAI_API_KEY` is not set and the base URL is OpenAI's (a local server needs none).
    #[error(
        "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a server that needs no key)"
    )]
    MissingApiKey,
    /// The base URL is not an absolute `http://` or `https://` URL.
    #[error("invalid base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value (the API key among them) is not valid in HTTP.
    #[error("invalid HTTP header {name:?}")]
    InvalidHeader {
        /// The header's name.
        name: String,
    },
    /// A model spec that is not `openai:MODEL`.
    #[error("invalid model spec {spec:?}: expected openai:MODEL, e.g. openai:gpt-4.1-mini")]
    InvalidSpec {
        /// The spec given.
        spec: String,
    },
    /// The model name is empty.
    #[error("no model name")]
    MissingModel,
    /// rustls refused its configuration.
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// The configuration of an [`OpenAiModel`]: where, who, which model, how long to wait.
///
/// ```
/// use std::time::Duration;
/// use harness_core::openai::OpenAiConfig;
///
/// let model = OpenAiConfig::new("llama3.2")
///     .base_url("http://127.0.0.1:11434/v1")      // Ollama: no key needed
///     .connect_timeout(Duration::from_secs(2))
///     .idle_timeout(Duration::from_secs(30))
///     .build()?;                                  // no I/O yet: it connects on the first call
/// assert_eq!(model.config().model, "llama3.2");
/// # Ok::<(), harness_core::openai::OpenAiConfigError>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API base, up to and without `/chat/completions`. Default [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// The model sent in every request.
    pub model: String,
    /// Send the request's own `model` instead, when it names one. Off by default: a
    /// harness's request names its own label (`echo`, `tour-model`), which a provider does not
    /// know.
    pub use_request_model: bool,
    /// Longest wait for the TCP connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest wait from sending the request to the response's status line (connection and TLS
    /// included). Default 300 s: a server may think for a long time before it answers.
    pub first_byte_timeout: Duration,
    /// Longest silence between two pieces of the response body. Default 300 s.
    pub idle_timeout: Duration,
    /// More headers for every request (`OpenAI-Organization`, a proxy's key…).
    pub headers: Vec<(String, String)>,
    /// The decoder's limits.
    pub stream: ChatStreamConfig,
    /// The tokio runtime the requests run on. `None`: a one-thread runtime the model starts on
    /// its first call and keeps, so the model works from any executor.
    pub runtime: Option<Handle>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .field("use_request_model", &self.use_request_model)
            .field("connect_timeout", &self.connect_timeout)
            .field("first_byte_timeout", &self.first_byte_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// A configuration for `model` on OpenAI's API, with no key and the default timeouts.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            use_request_model: false,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(300),
            headers: Vec::new(),
            stream: ChatStreamConfig::DEFAULT,
            runtime: None,
        }
    }

    /// A configuration for `model` from the environment: `OPENAI_API_KEY` (required for
    /// OpenAI's own API, optional elsewhere) and `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]; e.g. `http://localhost:8000/v1` for vLLM,
    /// `http://localhost:11434/v1` for Ollama, `http://localhost:8080/v1` for llama.cpp).
    /// Empty variables count as unset.
    pub fn from_env(model: impl Into<String>) -> Result<Self, OpenAiConfigError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mut cfg = OpenAiConfig::new(model);
        if let Some(url) = var("OPENAI_BASE_URL") {
            cfg.base_url = url.trim().to_owned();
        }
        cfg.api_key = var("OPENAI_API_KEY").map(|k| k.trim().to_owned());
        if cfg.api_key.is_none() && cfg.base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
            return Err(OpenAiConfigError::MissingApiKey);
        }
        Ok(cfg)
    }

    /// Sets the base URL.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Sets the API key.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sends the request's own `model` when it names one.
    #[must_use]
    pub fn use_request_model(mut self, yes: bool) -> Self {
        self.use_request_model = yes;
        self
    }

    /// Sets the connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Sets the first-byte timeout (request sent → status line).
    #[must_use]
    pub fn first_byte_timeout(mut self, d: Duration) -> Self {
        self.first_byte_timeout = d;
        self
    }

    /// Sets the idle timeout (silence between two pieces of the body).
    #[must_use]
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// Adds a header to every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the decoder's limits.
    #[must_use]
    pub fn stream_limits(mut self, limits: ChatStreamConfig) -> Self {
        self.stream = limits;
        self
    }

    /// Runs the requests on this tokio runtime instead of the model's own.
    #[must_use]
    pub fn runtime(mut self, handle: Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// The model. Checks the URL and the headers; opens nothing.
    pub fn build(self) -> Result<OpenAiModel, OpenAiConfigError> {
        OpenAiModel::new(self)
    }
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A tokio runtime the model owns, shut down without blocking when the model is dropped
/// (which may happen inside another runtime, where a blocking shutdown would panic).
struct OwnRuntime(Option<Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// What a call needs; a call's task holds it (and not the runtime, which only the model
/// holds, so that it is never dropped from one of its own threads).
struct Inner {
    cfg: OpenAiConfig,
    endpoint: Uri,
    headers: HeaderMap,
    client: HttpsClient,
}

/// The runtime a model starts on its first call when none was configured.
type LazyRuntime = OnceLock<Result<OwnRuntime, String>>;

/// A [`Model`] that streams from an OpenAI-compatible Chat Completions endpoint: OpenAI,
/// vLLM, Ollama, llama.cpp, DeepSeek, OpenRouter, LM Studio… over `https://` (rustls, Mozilla's
/// roots) or `http://`.
///
/// Each call POSTs [`request_body`] to `{base_url}/chat/completions` and streams the
/// [`ChatStreamDecoder`]'s events as they arrive; connections are pooled between calls. The
/// call runs as a task on a tokio runtime (the one given in [`OpenAiConfig::runtime`], or one
/// the model starts on its first call and stops when its last clone is dropped), so the
/// stream can be read from any executor; dropping the stream cancels the call.
///
/// Errors: an HTTP error answer is [`http_error`]'s mapping (401/403 →
/// [`ModelError::Rejected`]; 429 with its `Retry-After`, and 5xx → [`ModelError::Retryable`]); a
/// connection that fails or times out before the answer is [`ModelError::Unavailable`]; a
/// body that breaks off or goes idle before `data: [DONE]` is [`ModelError::Incomplete`] (idle)
/// or the decoder's error.
///
/// ```no_run
/// use harness_core::message::{Message, ModelRequest};
/// use harness_core::model::Model;
/// use harness_core::openai::OpenAiModel;
///
/// // OPENAI_API_KEY=… (and OPENAI_BASE_URL=http://localhost:11434/v1 for a local Ollama)
/// let model = OpenAiModel::from_env("gpt-4.1-mini")?;
/// let req = ModelRequest::new(vec![Message::user("Say hello.")]);
/// let resp = futures::executor::block_on(model.complete(&req, &mut |d| print!("{d}")))?;
/// println!("\n{} tokens in, {} out", resp.usage.input_tokens, resp.usage.output_tokens);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
    own_runtime: Arc<LazyRuntime>,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("endpoint", &self.inner.endpoint)
            .field("model", &self.inner.cfg.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// The model a configuration describes. Checks the URL and the headers; opens nothing.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, OpenAiConfigError> {
        if cfg.model.trim().is_empty() && !cfg.use_request_model {
            return Err(OpenAiConfigError::MissingModel);
        }
        let endpoint = endpoint(&cfg.base_url)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("harness-rs/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(key) = &cfg.api_key {
            let mut v = HeaderValue::try_from(format!("Bearer {key}")).map_err(|_| {
                OpenAiConfigError::InvalidHeader {
                    name: "authorization".into(),
                }
            })?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        for (name, value) in &cfg.headers {
            let invalid = || OpenAiConfigError::InvalidHeader { name: name.clone() };
            let n = HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
            let v = HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
            headers.insert(n, v);
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(cfg.connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| OpenAiConfigError::Tls(e.to_string()))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(https);
        Ok(OpenAiModel {
            inner: Arc::new(Inner {
                cfg,
                endpoint,
                headers,
                client,
            }),
            own_runtime: Arc::new(OnceLock::new()),
        })
    }

    /// [`OpenAiConfig::from_env`], built.
    pub fn from_env(model: impl Into<String>) -> Result<Self, OpenAiConfigError> {
        OpenAiConfig::from_env(model)?.build()
    }

    /// The model a spec names: `openai:MODEL` (e.g. `openai:gpt-4.1-mini`,
    /// `openai:llama3.2`), configured from the environment as [`from_env`](Self::from_env).
    ///
    /// ```
    /// use harness_core::openai::{OpenAiConfigError, OpenAiModel};
    ///
    /// assert!(matches!(OpenAiModel::from_spec("anthropic:claude"), Err(OpenAiConfigError::InvalidSpec { .. })));
    /// assert!(matches!(OpenAiModel::from_spec("openai:"), Err(OpenAiConfigError::InvalidSpec { .. })));
    /// ```
    pub fn from_spec(spec: &str) -> Result<Self, OpenAiConfigError> {
        match spec.trim().strip_prefix("openai:") {
            Some(model) if !model.trim().is_empty() => Self::from_env(model.trim()),
            _ => Err(OpenAiConfigError::InvalidSpec {
                spec: spec.to_owned(),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.cfg
    }

    /// The URL requests go to (`{base_url}/chat/completions`).
    pub fn endpoint(&self) -> &Uri {
        &self.inner.endpoint
    }

    /// The runtime to run a call on.
    fn handle(&self) -> Result<Handle, ModelError> {
        if let Some(h) = &self.inner.cfg.runtime {
            return Ok(h.clone());
        }
        let rt = self.own_runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("harness-openai")
                .enable_all()
                .build()
                .map(|rt| OwnRuntime(Some(rt)))
                .map_err(|e| e.to_string())
        });
        match rt {
            Ok(OwnRuntime(Some(rt))) => Ok(rt.handle().clone()),
            Ok(OwnRuntime(None)) => Err(ModelError::Unavailable("runtime shut down".into())),
            Err(e) => Err(ModelError::Unavailable(format!(
                "cannot start a runtime: {e}"
            ))),
        }
    }
}

/// `{base}/chat/completions` (a base that already ends so is taken as it is).
fn endpoint(base: &str) -> Result<Uri, OpenAiConfigError> {
    let invalid = |reason: &str| OpenAiConfigError::InvalidBaseUrl {
        url: base.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = base.trim().trim_end_matches('/');
    let full = if trimmed.ends_with("/chat/completions") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/chat/completions")
    };
    let uri = Uri::try_from(full).map_err(|e| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(invalid("the scheme must be http or https")),
    }
    if uri.authority().is_none() {
        return Err(invalid("no host"));
    }
    if uri.query().is_some() {
        return Err(invalid("a query string is not supported"));
    }
    Ok(uri)
}

impl Inner {
    fn request(&self, body: Vec<u8>) -> Result<Request<Full<Bytes>>, ModelError> {
        let mut req = Request::post(self.endpoint.clone())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ModelError::Unavailable(e.to_string()))?;
        req.headers_mut().extend(self.headers.clone());
        Ok(req)
    }

    /// One call: send, then stream the answer into `tx`. An `Err` is the call's failure.
    async fn call(
        &self,
        body: Vec<u8>,
        tx: &mut mpsc::Sender<Result<ModelEvent, ModelError>>,
    ) -> Result<(), ModelError> {
        let req = self.request(body)?;
        let limit = self.cfg.first_byte_timeout;
        let resp = match tokio::time::timeout(limit, self.client.request(req)).await {
            Err(_) => {
                return Err(ModelError::Unavailable(format!(
                    "no answer from {} within {limit:?}",
                    self.endpoint
                )));
            }
            Ok(Err(e)) => {
                return Err(ModelError::Unavailable(format!(
                    "{}: {}",
                    self.endpoint,
                    error_chain(&e)
                )));
            }
            Ok(Ok(resp)) => resp,
        };
        let (head, mut body) = resp.into_parts();
        if !head.status.is_success() {
            let bytes = self.read_capped(&mut body).await;
            let header = |name: &str| head.headers.get(name).and_then(|v| v.to_str().ok());
            let wait = retry_after(
                header("retry-after"),
                header("retry-after-ms"),
                SystemTime::now(),
            );
            return Err(http_error(head.status.as_u16(), wait, &bytes));
        }
        let content_type = head
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if content_type.starts_with("application/json") {
            // A server that ignored `stream: true`, or an error with a 200 status.
            let bytes = self.read_capped(&mut body).await;
            let text = super::status::error_message(&bytes).unwrap_or_default();
            return Err(ModelError::Provider(format!(
                "expected an event stream, got JSON: {text}"
            )));
        }
        let mut dec = ChatStreamDecoder::with_config(self.cfg.stream);
        loop {
            let frame = match tokio::time::timeout(self.cfg.idle_timeout, body.frame()).await {
                Err(_) => return Err(ModelError::Incomplete),
                Ok(None) => {
                    dec.finish()?;
                    None
                }
                Ok(Some(Err(_))) => return Err(ModelError::Incomplete),
                Ok(Some(Ok(frame))) => Some(frame),
            };
            let ended = frame.is_none();
            if let Some(data) = frame.and_then(|f| f.into_data().ok()) {
                dec.push(&data);
            }
            while let Some(ev) = dec.poll_event()? {
                if matches!(ev, ModelEvent::Completed(_)) && !ended {
                    self.drain(&mut body).await;
                }
                if tx.send(Ok(ev)).await.is_err() {
                    return Ok(()); // the reader went away
                }
            }
            if ended || dec.is_done() {
                return Ok(());
            }
        }
    }

    /// Up to [`MAX_ERROR_BODY`] bytes of a body, best effort.
    async fn read_capped(&self, body: &mut Incoming) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < MAX_ERROR_BODY {
            match tokio::time::timeout(self.cfg.idle_timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        let room = MAX_ERROR_BODY - out.len();
                        out.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                _ => break,
            }
        }
        out
    }

    /// Reads what follows `[DONE]` for a moment, so the connection ends cleanly and can be
    /// pooled.
    async fn drain(&self, body: &mut Incoming) {
        let _ = tokio::time::timeout(DRAIN_AFTER_DONE, async {
            while let Some(Ok(_)) = body.frame().await {}
        })
        .await;
    }
}

/// An error and its sources, `: `-joined (hyper's own message is terse: "client error
/// (Connect)").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        s.push_str(": ");
        s.push_str(&src.to_string());
        cur = src.source();
    }
    s
}

/// The events of one call, read from the call's task; dropping it cancels the call.
struct CallStream {
    rx: mpsc::Receiver<Result<ModelEvent, ModelError>>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream for CallStream {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_next_unpin(cx)
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        let inner = &self.inner;
        let model = if inner.cfg.use_request_model && !req.model.is_empty() {
            req.model.as_str()
        } else {
            inner.cfg.model.as_str()
        };
        let body = request_body(req, model);
        let handle = match self.handle() {
            Ok(h) => h,
            Err(e) => return futures::stream::iter([Err(e)]).boxed(),
        };
        let (mut tx, rx) = mpsc::channel(CHANNEL);
        let inner = Arc::clone(&self.inner);
        let task = handle.spawn(async move {
            if let Err(e) = inner.call(body, &mut tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        CallStream { rx, task }.boxed()
    }
}
