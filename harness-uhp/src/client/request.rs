//! Building the requests of a task: where and how to reach the server ([`TaskClientConfig`]),
//! the body of a create ([`CreateRequest`]), and the builders of every request with its
//! headers — the version, the bearer token, and on a create the idempotency key every
//! attempt of one task carries ([`requests`]).

use std::time::Duration;

use harness_core::sse::SseConfig;
use http::Method;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{IDEMPOTENCY_KEY_HEADER, PROTOCOL_VERSION, VERSION_HEADER, endpoints};
use crate::retry::IdempotencyKey;

/// Where and how to reach the server, for a [`TaskClient`](super::TaskClient) and the
/// [`requests`] builders.
#[derive(Clone, Debug)]
pub struct TaskClientConfig {
    /// The server's base URL, without a trailing slash (`http://127.0.0.1:3000/api/harness`).
    pub base_url: String,
    /// The `UHP-Version` to ask for (`None`: send none, the server's default applies).
    pub version: Option<String>,
    /// The bearer token, if the server wants one.
    pub token: Option<String>,
    /// How long a connection may stay silent — a stream between its bytes, a request
    /// awaiting its answer's head or body — before it is considered lost. Servers send a
    /// keep-alive at least every 30 s; the default is 75 s. There is no total timeout, and a
    /// repeated create waits for its head as long as it takes (the server holds a repeated
    /// key's answer until the first request's task has a result).
    pub inactivity_timeout: Duration,
    /// How often to read a stored response again while it is still `in_progress`.
    pub poll_interval: Duration,
    /// The largest JSON body accepted (a response object or an error). Default 64 MiB.
    pub max_body_bytes: usize,
    /// Limits of the stream decoder.
    pub sse: SseConfig,
}

impl TaskClientConfig {
    /// A configuration for this server with the defaults.
    pub fn new(base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        TaskClientConfig {
            base_url,
            version: Some(PROTOCOL_VERSION.to_owned()),
            token: None,
            inactivity_timeout: Duration::from_secs(75),
            poll_interval: Duration::from_secs(1),
            max_body_bytes: 64 << 20,
            sse: SseConfig::DEFAULT,
        }
    }

    /// Sets the bearer token.
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

/// The body of `POST /v1/responses` (schema `CreateResponseRequest`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateRequest {
    /// A string (one user message) or a list of input items.
    pub input: Value,
    /// The model; omitted means the harness default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Continue the session of this response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Client metadata; `harness_id` selects the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Stream the events (set by the builders).
    #[serde(default)]
    pub stream: bool,
    /// Wall-clock budget in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Fields this crate does not model (`tools`, `max_step`, `background`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl CreateRequest {
    /// A task with this input (a bare string is one user message).
    pub fn new(input: impl Into<Value>) -> Self {
        CreateRequest {
            input: input.into(),
            ..Self::default()
        }
    }

    /// Selects the harness (`metadata.harness_id`).
    #[must_use]
    pub fn harness(mut self, harness_id: &str) -> Self {
        self.metadata
            .get_or_insert_with(Map::new)
            .insert("harness_id".into(), Value::from(harness_id));
        self
    }

    /// Sets the model.
    #[must_use]
    pub fn model(mut self, model: &str) -> Self {
        self.model = Some(model.to_owned());
        self
    }

    /// Continues the session of a previous response.
    #[must_use]
    pub fn continue_from(mut self, previous_response_id: &str) -> Self {
        self.previous_response_id = Some(previous_response_id.to_owned());
        self
    }
}

/// A request could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The URL or a header value is not valid HTTP.
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// Request builders. Each returns an `http::Request` carrying the version header (and the
/// bearer token); send it with any HTTP client.
pub mod requests {
    use super::*;

    fn base(cfg: &TaskClientConfig, method: Method, path: &str) -> http::request::Builder {
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", cfg.base_url));
        if let Some(v) = &cfg.version {
            b = b.header(VERSION_HEADER, v);
        }
        if let Some(t) = &cfg.token {
            b = b.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        b
    }

    fn done(
        b: http::request::Builder,
        body: Vec<u8>,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        b.body(body)
            .map_err(|e| RequestError::Invalid(e.to_string()))
    }

    /// `POST /v1/responses`, with `Idempotency-Key` (every attempt of one task carries the
    /// same key) and, when `stream`, `"stream": true` and `Accept: text/event-stream`.
    pub fn create(
        cfg: &TaskClientConfig,
        body: &CreateRequest,
        key: &IdempotencyKey,
        stream: bool,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        let mut body = body.clone();
        body.stream = stream;
        let json = serde_json::to_vec(&body).map_err(|e| RequestError::Invalid(e.to_string()))?;
        let b = base(cfg, Method::POST, endpoints::RESPONSES)
            .header(CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY_HEADER, key.as_str())
            .header(
                ACCEPT,
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            );
        done(b, json)
    }

    /// `POST /v1/responses` with `"stream": true`.
    pub fn stream(
        cfg: &TaskClientConfig,
        body: &CreateRequest,
        key: &IdempotencyKey,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        create(cfg, body, key, true)
    }

    /// A new task in the session of `previous_response_id`, streamed.
    pub fn continue_session(
        cfg: &TaskClientConfig,
        previous_response_id: &str,
        input: impl Into<Value>,
        key: &IdempotencyKey,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        create(
            cfg,
            &CreateRequest::new(input).continue_from(previous_response_id),
            key,
            true,
        )
    }

    fn require_id(response_id: &str) -> Result<(), RequestError> {
        if response_id.is_empty() {
            return Err(RequestError::Invalid("empty response id".to_owned()));
        }
        Ok(())
    }

    /// `GET /v1/responses/{id}`: the stored response, the source of truth. The id is
    /// escaped as one path segment ([`endpoints::segment`]); an empty id is an error.
    pub fn retrieve(
        cfg: &TaskClientConfig,
        response_id: &str,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        require_id(response_id)?;
        done(
            base(cfg, Method::GET, &endpoints::response(response_id))
                .header(ACCEPT, "application/json"),
            Vec::new(),
        )
    }

    /// `POST /v1/responses/{id}/cancel` (idempotent; cancelling a finished task changes
    /// nothing). The id is escaped as in [`retrieve`].
    pub fn cancel(
        cfg: &TaskClientConfig,
        response_id: &str,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        require_id(response_id)?;
        done(
            base(cfg, Method::POST, &endpoints::response_cancel(response_id))
                .header(ACCEPT, "application/json"),
            Vec::new(),
        )
    }

    /// `GET /v1/uhp`: the discovery document (no token needed).
    pub fn discovery(cfg: &TaskClientConfig) -> Result<http::Request<Vec<u8>>, RequestError> {
        done(
            base(cfg, Method::GET, endpoints::DISCOVERY).header(ACCEPT, "application/json"),
            Vec::new(),
        )
    }
}
