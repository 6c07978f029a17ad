//! Errors as the protocol defines them: the error object and its envelope, the error types
//! with the HTTP statuses each covers, and the closed set of error codes with their statuses.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An error object (schema `Error`): in the envelope of every non-2xx answer, in a failed
/// response's `error`, and (without `type`) in an `error` stream event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The broad class (`invalid_request_error`, `server_error`, …). Absent in `error` events.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The specific, machine-readable code (`session_busy`, `provider_error`, …).
    #[serde(default)]
    pub code: Option<String>,
    /// One sentence, safe to show a user.
    #[serde(default)]
    pub message: Option<String>,
    /// Dotted path to the offending field.
    #[serde(default)]
    pub param: Option<String>,
    /// Code-specific detail (`supported` versions, `max_bytes`, `retry_after_ms`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorObject {
    /// An error with this code and message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorObject {
            code: Some(code.into()),
            message: Some(message.into()),
            ..ErrorObject::default()
        }
    }

    /// Sets the `type`.
    #[must_use]
    pub fn with_type(mut self, error_type: impl Into<String>) -> Self {
        self.error_type = Some(error_type.into());
        self
    }

    /// `detail.retry_after_ms` (sent with `session_busy` when the server knows), as given.
    pub fn retry_after_ms(&self) -> Option<f64> {
        self.detail.as_ref()?.get("retry_after_ms")?.as_f64()
    }

    /// An error object read without failing: `type`, `code`, `message` and `param` as text
    /// when they are strings or other scalars (`"code": 504` reads as `"504"`), the rest in
    /// `detail` and `extra` as received. `None` for anything but an object.
    pub fn lenient(v: Value) -> Option<ErrorObject> {
        let Value::Object(mut fields) = v else {
            return None;
        };
        let mut text = |key: &str| match fields.remove(key) {
            Some(Value::String(s)) => Some(s),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => Some(v.to_string()),
            Some(Value::Null) | None => None,
            Some(v) => Some(v.to_string()),
        };
        let (error_type, code, message, param) =
            (text("type"), text("code"), text("message"), text("param"));
        let detail = fields.remove("detail");
        Some(ErrorObject {
            error_type,
            code,
            message,
            param,
            detail,
            extra: fields,
        })
    }

    /// `detail.supported`: the versions a server offers after `unsupported_protocol_version`.
    pub fn supported_versions(&self) -> Vec<String> {
        self.detail
            .as_ref()
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The envelope of every non-2xx answer (schema `ErrorEnvelope`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorObject,
    /// Deprecated human-readable alias of `error.message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    /// Fields this version does not define.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorEnvelope {
    /// Parses an error body; `None` when it is not an error envelope.
    pub fn parse(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }
}

/// The broad error classes and the HTTP statuses each covers.
///
/// `server_error` covers 500, 502, 503 and 504 — not 501, which is `preview_unavailable`, a
/// permanent "this server does not do that".
pub const ERROR_TYPES: &[(&str, &[u16])] = &[
    ("invalid_request_error", &[400, 404, 409, 413, 422]),
    ("authentication_error", &[401]),
    ("permission_error", &[403]),
    ("rate_limit_error", &[429]),
    ("harness_error", &[200]),
    ("server_error", &[500, 502, 503, 504]),
];

/// The HTTP statuses an error type covers; `None` for a type the protocol does not define.
pub fn error_type_statuses(error_type: &str) -> Option<&'static [u16]> {
    ERROR_TYPES
        .iter()
        .find(|(t, _)| *t == error_type)
        .map(|(_, s)| *s)
}

/// One error code of the protocol, as its table defines it ([`ERROR_CODES`]): the code, its
/// HTTP status and the version that introduced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCodeEntry {
    /// The code.
    pub code: &'static str,
    /// The HTTP status it is reported under (200 = in a failed response).
    pub status: u16,
    /// The protocol version that introduced it.
    pub since: &'static str,
}

const fn code(code: &'static str, status: u16, since: &'static str) -> ErrorCodeEntry {
    ErrorCodeEntry {
        code,
        status,
        since,
    }
}

/// Every error code the protocol defines, with its status and the version that added it.
/// Vendor codes must carry a vendor prefix (`acme_…`) and are never in this table.
pub const ERROR_CODES: &[ErrorCodeEntry] = &[
    code("unsupported_protocol_version", 400, "2026-08-11"),
    code("invalid_input", 400, "2026-08-11"),
    code("harness_not_found", 404, "2026-08-11"),
    code("response_not_found", 404, "2026-08-11"),
    code("session_not_found", 404, "2026-08-11"),
    code("file_not_found", 404, "2026-08-11"),
    code("session_expired", 404, "2026-08-11"),
    code("harness_mismatch", 409, "2026-08-11"),
    code("session_busy", 409, "2026-08-11"),
    code("file_too_large", 413, "2026-08-11"),
    code("model_unavailable", 422, "2026-08-11"),
    code("unsupported_base", 422, "2026-08-11"),
    code("missing_credential", 401, "2026-08-11"),
    code("invalid_credential", 401, "2026-08-11"),
    code("insufficient_scope", 403, "2026-08-11"),
    code("rate_limited", 429, "2026-08-11"),
    code("quota_exhausted", 429, "2026-08-11"),
    code("harness_error", 200, "2026-08-11"),
    code("harness_unavailable", 503, "2026-08-11"),
    code("provider_error", 200, "2026-08-11"),
    code("timeout", 200, "2026-08-11"),
    code("cancelled", 200, "2026-08-11"),
    code("preview_unavailable", 501, "2026-08-11"),
    code("preview_failed", 502, "2026-08-11"),
    code("plugin_not_found", 404, "2026-09-12"),
    code("plugin_conflict", 409, "2026-09-12"),
    code("plugin_invalid", 422, "2026-09-12"),
    code("unsupported_plugin_schema", 422, "2026-09-12"),
    code("unsupported_transport", 422, "2026-09-12"),
    code("environment_not_found", 404, "2026-09-28"),
    code("environment_not_ready", 409, "2026-09-28"),
    code("environment_busy", 409, "2026-09-28"),
    code("environment_exists", 409, "2026-09-28"),
    code("environment_invalid", 422, "2026-09-28"),
    code("environment_unavailable", 502, "2026-09-28"),
];

/// The protocol's entry for a code, if it defines one.
pub fn error_code(code: &str) -> Option<&'static ErrorCodeEntry> {
    ERROR_CODES.iter().find(|c| c.code == code)
}
