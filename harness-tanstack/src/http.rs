//! The HTTP-facing rules of the protocol that do not need a server: `X-Request-Id`,
//! `traceparent`, the stream values, and the answer shapes of `POST control`.

use std::time::Duration;

/// Whether an `X-Request-Id` is "a short safe id: 1 to 128 letters, digits, `-`, `_`, `.`,
/// or `:`".
pub fn is_safe_request_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The request id of an HTTP request: the client's `X-Request-Id` when it is safe, "Else the
/// server makes a new UUID."
pub fn request_id(header: Option<&str>) -> String {
    match header {
        Some(h) if is_safe_request_id(h) => h.to_owned(),
        _ => uuid::Uuid::new_v4().to_string(),
    }
}

/// Whether a value is a valid W3C `traceparent` (version 00):
/// `00-<32 lowercase hex, not all 0>-<16 lowercase hex, not all 0>-<2 lowercase hex>`.
/// A later version (not `ff`) may append `-…` fields, per the W3C rule for higher versions.
pub fn is_valid_traceparent(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    if parts.len() < 4 {
        return false;
    }
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let (version, trace, parent, flags) = (parts[0], parts[1], parts[2], parts[3]);
    if !hex(version, 2) || version == "ff" {
        return false;
    }
    if version == "00" && parts.len() != 4 {
        return false;
    }
    hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && hex(flags, 2)
}

/// The `traceparent` to keep: the value when valid, else none ("It drops a value that is not
/// a valid W3C `traceparent`.").
pub fn traceparent(v: Option<&str>) -> Option<String> {
    v.filter(|v| is_valid_traceparent(v)).map(str::to_owned)
}

/// The stream values of a host (spec, "Stream values").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamConfig {
    /// `heartbeatMs`: SSE gets `: ping`, the socket `{"type":"harness.ping"}`. Default 20 s.
    pub heartbeat: Duration,
    /// `sseQueueBytes`: the host stops reading the log while this much data waits for an
    /// SSE client. Default 1 MiB.
    pub sse_queue_bytes: usize,
    /// `socketBufferBytes`: above this many unsent bytes the host stops sending on a
    /// socket. Default 8 MiB.
    pub socket_buffer_bytes: usize,
    /// `slowConsumerMs`: a client that does not read for this long gets `slow_consumer`
    /// and is closed. Default 30 s.
    pub slow_consumer: Duration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            heartbeat: Duration::from_secs(20),
            sse_queue_bytes: 1 << 20,
            socket_buffer_bytes: 8 << 20,
            slow_consumer: Duration::from_secs(30),
        }
    }
}

/// A stream value that is not "a finite number above 0". The error names the field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("stream.{field} must be a finite number above 0, got {value}")]
pub struct StreamConfigError {
    /// The option's name (`heartbeatMs`, `sseQueueBytes`, `socketBufferBytes`,
    /// `slowConsumerMs`).
    pub field: &'static str,
    /// The value given.
    pub value: f64,
}

/// The stream values as a user writes them (`{ heartbeatMs: 10_000, … }`); a value left
/// `None` keeps its default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StreamOptions {
    /// `heartbeatMs`
    pub heartbeat_ms: Option<f64>,
    /// `sseQueueBytes`
    pub sse_queue_bytes: Option<f64>,
    /// `socketBufferBytes`
    pub socket_buffer_bytes: Option<f64>,
    /// `slowConsumerMs`
    pub slow_consumer_ms: Option<f64>,
}

impl StreamOptions {
    /// Checks every value ("Each value must be a finite number above 0. If a value is not,
    /// `createHarnessHandler` and `handleHarnessSocket` throw at the start, and the error
    /// names the field.") and builds the config.
    pub fn validate(&self) -> Result<StreamConfig, StreamConfigError> {
        fn check(field: &'static str, v: Option<f64>) -> Result<Option<f64>, StreamConfigError> {
            match v {
                Some(value) if !(value.is_finite() && value > 0.0) => {
                    Err(StreamConfigError { field, value })
                }
                other => Ok(other),
            }
        }
        let d = StreamConfig::default();
        // A huge value saturates to the largest duration rather than overflowing.
        let ms = |v: f64| Duration::try_from_secs_f64(v / 1000.0).unwrap_or(Duration::MAX);
        // ok: finite and > 0, so `as usize` saturates at worst; ceil keeps a fraction above 0.
        let bytes = |v: f64| (v.ceil() as usize).max(1);
        Ok(StreamConfig {
            heartbeat: check("heartbeatMs", self.heartbeat_ms)?
                .map(ms)
                .unwrap_or(d.heartbeat),
            sse_queue_bytes: check("sseQueueBytes", self.sse_queue_bytes)?
                .map(bytes)
                .unwrap_or(d.sse_queue_bytes),
            socket_buffer_bytes: check("socketBufferBytes", self.socket_buffer_bytes)?
                .map(bytes)
                .unwrap_or(d.socket_buffer_bytes),
            slow_consumer: check("slowConsumerMs", self.slow_consumer_ms)?
                .map(ms)
                .unwrap_or(d.slow_consumer),
        })
    }
}

/// An HTTP answer of the handler: status, JSON body, and the request id to echo in
/// `X-Request-Id` ("Every HTTP answer of the handler sends the id back").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status.
    pub status: u16,
    /// The JSON body.
    pub body: String,
    /// The `X-Request-Id` to send back.
    pub request_id: String,
}

impl HttpAnswer {
    /// `{ error }` with a status.
    pub fn error(status: u16, error: &str, request_id: &str) -> HttpAnswer {
        HttpAnswer {
            status,
            body: serde_json::json!({ "error": error }).to_string(),
            request_id: request_id.to_owned(),
        }
    }

    /// 200 with a JSON body.
    pub fn ok(body: String, request_id: &str) -> HttpAnswer {
        HttpAnswer {
            status: 200,
            body,
            request_id: request_id.to_owned(),
        }
    }
}
