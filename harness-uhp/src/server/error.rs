//! A refused request as the protocol reports it (errors.md §1–§3): a non-2xx status and the
//! error envelope, `type` from the status, `code` from the closed set (or `harnessrs_…` for the
//! few conditions the protocol has no code for), a `message` safe to show a user.

use serde_json::{Value, json};

use crate::error::{ERROR_TYPES, ErrorEnvelope, ErrorObject, error_code};

/// The vendor prefix of the codes this server adds (errors.md §1: "MUST namespace them").
pub const VENDOR_PREFIX: &str = "harnessrs_";

/// A request the server refuses: status, envelope and the headers that go with it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// The error object of the envelope.
    pub error: Box<ErrorObject>,
    /// `Retry-After` in seconds (`rate_limited`).
    pub retry_after: Option<u64>,
    /// `Allow` (a method the path does not take).
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// An error with a protocol code; its status and `type` come from the protocol's tables.
    /// An unknown code is a server bug and becomes a 500 `server_error`.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        match error_code(code) {
            Some(c) if c.status != 200 => Self::with_status(c.status, code, message),
            _ => Self::with_status(500, "harnessrs_internal", "The server failed."),
        }
    }

    /// An error with an explicit status (vendor codes).
    pub fn with_status(status: u16, code: &str, message: impl Into<String>) -> Self {
        let error_type = ERROR_TYPES
            .iter()
            .find(|(_, statuses)| statuses.contains(&status))
            .map_or(
                if status >= 500 {
                    "server_error"
                } else {
                    "invalid_request_error"
                },
                |(t, _)| t,
            );
        let mut error = ErrorObject::new(code, message).with_type(error_type);
        error.detail = Some(Value::Null);
        ApiError {
            status,
            error: Box::new(error),
            retry_after: None,
            allow: None,
        }
    }

    /// Sets `param`, the dotted path of the offending field.
    #[must_use]
    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.error.param = Some(param.into());
        self
    }

    /// Sets `detail`.
    #[must_use]
    pub fn detail(mut self, detail: Value) -> Self {
        self.error.detail = Some(detail);
        self
    }

    /// The error's code.
    pub fn code(&self) -> &str {
        self.error.code.as_deref().unwrap_or("")
    }

    /// The whole HTTP response: status, headers, envelope.
    pub fn response(&self) -> http::Response<Vec<u8>> {
        super::error_response(self)
    }

    /// The envelope's JSON bytes.
    pub fn body(&self) -> Vec<u8> {
        let env = ErrorEnvelope {
            error: (*self.error).clone(),
            detail: None,
            extra: Default::default(),
        };
        serde_json::to_vec(&env).unwrap_or_else(|_| {
            br#"{"error":{"type":"server_error","code":"harnessrs_internal","message":"The server failed.","param":null,"detail":null}}"#.to_vec()
        })
    }

    // The protocol's errors, each once.

    pub(crate) fn invalid_input(message: impl Into<String>) -> Self {
        Self::new("invalid_input", message)
    }
    pub(crate) fn harness_not_found(id: &str) -> Self {
        Self::new(
            "harness_not_found",
            format!("No harness with id '{}'.", shown(id)),
        )
    }
    pub(crate) fn response_not_found(id: &str) -> Self {
        Self::new(
            "response_not_found",
            format!("No response with id '{}'.", shown(id)),
        )
    }
    pub(crate) fn session_not_found(id: &str) -> Self {
        Self::new(
            "session_not_found",
            format!("No session with id '{}'.", shown(id)),
        )
    }
    pub(crate) fn file_not_found(id: &str) -> Self {
        Self::new(
            "file_not_found",
            format!("No file with id '{}'.", shown(id)),
        )
    }
    pub(crate) fn too_large(max_bytes: usize) -> Self {
        Self::new(
            "file_too_large",
            format!("The body exceeds this server's limit of {max_bytes} bytes."),
        )
        .detail(json!({ "max_bytes": max_bytes }))
    }
    pub(crate) fn not_found_route() -> Self {
        Self::with_status(404, "harnessrs_no_such_endpoint", "No such endpoint.")
    }
    pub(crate) fn method_not_allowed(allow: &'static str) -> Self {
        let mut e = Self::with_status(
            405,
            "harnessrs_method_not_allowed",
            "This endpoint does not take that method.",
        );
        e.allow = Some(allow);
        e
    }
}

/// An id as quoted in a message: at most 64 characters, printable ASCII only, so a message
/// never carries what a caller smuggled into an id.
pub(crate) fn shown(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_type_come_from_the_tables() {
        let e = ApiError::new("session_busy", "busy");
        assert_eq!(e.status, 409);
        assert_eq!(e.error.error_type.as_deref(), Some("invalid_request_error"));
        let e = ApiError::new("invalid_credential", "no");
        assert_eq!(
            (e.status, e.error.error_type.as_deref()),
            (401, Some("authentication_error"))
        );
        let e = ApiError::new("harness_unavailable", "no");
        assert_eq!(
            (e.status, e.error.error_type.as_deref()),
            (503, Some("server_error"))
        );
        // A code reported in a failed response is no request error: a bug, a 500.
        assert_eq!(ApiError::new("cancelled", "x").status, 500);
    }

    #[test]
    fn the_envelope_has_every_field() {
        let v: Value = serde_json::from_slice(&ApiError::invalid_input("bad").body()).unwrap();
        for f in ["type", "code", "message", "param", "detail"] {
            assert!(v["error"].get(f).is_some(), "{f} missing");
        }
    }
}
