//! An HTTP error answer, mapped to a [`ModelError`] without I/O: the status says whether a
//! retry can help, `Retry-After` says when, the body says why.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::model::ModelError;

/// The longest provider message kept in an error, in bytes (the rest is cut at a character
/// boundary): an HTML error page from a proxy should not become a 100 KB error string.
const MAX_MESSAGE: usize = 1024;

/// The [`ModelError`] for an HTTP answer that is not a success.
///
/// - 408, 409, 429 and every 5xx: [`ModelError::Retryable`], carrying `retry_after`
///   (see [`retry_after`]): the provider is busy, rate limiting or failing, and the same
///   request may succeed later. (409 and 408 are what OpenAI's own SDKs retry besides.)
/// - any other status, 401 and 403 among them: [`ModelError::Rejected`]: the request, the key or
///   the model must change first.
///
/// The message is the provider's: `error.message` of an OpenAI-style body (`{"error":
/// {"message": …}}`, also a bare `{"error": "…"}` or vLLM's top-level `{"message": …}`),
/// else the body as text, else the status line.
///
/// ```
/// use std::time::Duration;
/// use harness_core::model::ModelError;
/// use harness_core::openai::http_error;
///
/// let body = br#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
/// let err = http_error(429, Some(Duration::from_secs(20)), body);
/// assert_eq!(err, ModelError::Retryable { status: 429, message: "Rate limit reached".into(), retry_after_ms: Some(20_000) });
/// assert!(err.is_retryable());
///
/// let err = http_error(401, None, br#"{"error":{"message":"Incorrect API key provided"}}"#);
/// assert!(matches!(err, ModelError::Rejected { status: 401, .. }) && !err.is_retryable());
/// ```
pub fn http_error(status: u16, retry_after: Option<Duration>, body: &[u8]) -> ModelError {
    let message = error_message(body).unwrap_or_else(|| format!("HTTP {status}"));
    if is_retryable_status(status) {
        ModelError::Retryable {
            status,
            message,
            retry_after_ms: retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    } else {
        ModelError::Rejected { status, message }
    }
}

/// Whether an HTTP status means "the same request may succeed later".
pub(super) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// How long to wait before a retry, from the response's `Retry-After` (RFC 9110 §10.2.3:
/// delay-seconds, or an HTTP-date, read against `now`) and OpenAI's `retry-after-ms`
/// (milliseconds, more precise; preferred when both are there). A date in the past is no
/// wait; a value that is neither is ignored.
///
/// `now` is a parameter, so this reads no clock: the transport passes
/// `SystemTime::now()`, a test a fixed time.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use harness_core::openai::retry_after;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
/// assert_eq!(retry_after(Some("120"), None, now), Some(Duration::from_secs(120)));
/// assert_eq!(retry_after(Some("Wed, 21 Oct 2015 07:28:30 GMT"), None, now), Some(Duration::from_secs(30)));
/// assert_eq!(retry_after(Some("20"), Some("19500"), now), Some(Duration::from_millis(19_500)));
/// assert_eq!(retry_after(Some("soon"), None, now), None);
/// ```
pub fn retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    let ms = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok());
    if let Some(ms) = ms.filter(|ms| ms.is_finite() && (0.0..1e15).contains(ms)) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = retry_after?.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let secs = v.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The provider's message in an error body, if the body has one.
pub(super) fn error_message(body: &[u8]) -> Option<String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let from_json = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| message_of(&v));
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    Some(cut(text))
}

/// `error.message`, `error` (a string) or `message` of an error object.
pub(super) fn message_of(v: &Value) -> Option<String> {
    let text = match v.get("error") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(e @ Value::Object(_)) => e.get("message").map(json_text),
        _ => None,
    };
    text.or_else(|| v.get("message").map(json_text))
        .filter(|s| !s.is_empty())
}

/// A JSON value as text: a string's contents, anything else as JSON.
pub(super) fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}
