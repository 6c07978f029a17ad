//! Retrying without running the agent twice: idempotency keys, which failures are worth a
//! retry, backoff with full jitter where the server's own answer (`Retry-After`,
//! `detail.retry_after_ms`) wins, and a sans-IO policy that says retry-at or give-up.
//!
//! Reuse one key across every attempt of one task: a retry after a timeout without it runs
//! the task a second time while the first may still be running.

use std::time::{Duration, Instant, SystemTime};

use crate::error::ErrorObject;

/// The longest `Idempotency-Key` the protocol accepts (OpenAPI `maxLength: 255`).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// An `Idempotency-Key` header value: at most 255 characters, visible ASCII.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// A string that cannot be an `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdempotencyKeyError {
    /// Longer than 255 characters.
    #[error("idempotency key is {len} characters; at most 255 are allowed")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Empty, or a character that cannot stand in an HTTP header value unquoted.
    #[error("idempotency key must be non-empty visible ASCII")]
    InvalidCharacter,
}

impl IdempotencyKey {
    /// A fresh key: `prefix-<uuid v4>` (the peer's `uhp-…` format with the default prefix).
    /// A prefix that would make the key longer than 255 characters is cut to fit.
    pub fn generate(prefix: &str) -> Self {
        Self::from_random(prefix, uuid::Uuid::new_v4().into_bytes())
    }

    /// A key from caller-supplied randomness (deterministic tests, or your own RNG).
    pub fn from_random(prefix: &str, random: [u8; 16]) -> Self {
        let id = uuid::Builder::from_random_bytes(random).into_uuid();
        let suffix = id.hyphenated().to_string(); // 36 characters
        let room = MAX_IDEMPOTENCY_KEY_LEN - suffix.len() - 1;
        let prefix: String = prefix
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(room)
            .collect();
        if prefix.is_empty() {
            IdempotencyKey(suffix)
        } else {
            IdempotencyKey(format!("{prefix}-{suffix}"))
        }
    }

    /// Checks a key chosen by the caller.
    pub fn new(key: impl Into<String>) -> Result<Self, IdempotencyKeyError> {
        let key = key.into();
        if key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(IdempotencyKeyError::TooLong { len: key.len() });
        }
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(IdempotencyKeyError::InvalidCharacter);
        }
        Ok(IdempotencyKey(key))
    }

    /// The header value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A fresh idempotency key with the default prefix, `uhp-<uuid v4>`. Attach it to every
/// attempt of the same task.
#[must_use]
pub fn idempotency_key() -> IdempotencyKey {
    IdempotencyKey::generate("uhp")
}

/// What the protocol's retry table says about a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryClass {
    /// Not worth retrying: nothing changes until the request (or the quota, or the
    /// credentials) does.
    Never,
    /// A server error: retry with exponential backoff and jitter.
    Backoff,
    /// `rate_limited` (or a 429 without a code): retry after the server's `Retry-After`.
    AfterRetryAfter,
    /// `session_busy`: retry once the in-flight task is terminal (`detail.retry_after_ms`
    /// when the server knows).
    WhenSessionIdle,
}

/// Classifies a failure by the protocol's retry table. The code decides when it is one the
/// protocol defines, then the error type, then the HTTP status:
///
/// - `rate_limited` → after `Retry-After`; `quota_exhausted` → never (even though a 429);
/// - `session_busy` → once the in-flight task is terminal;
/// - `harness_unavailable` (503), `preview_failed` (502) → backoff;
/// - `preview_unavailable` (501) and every other defined code → never;
/// - type `server_error` → backoff; `rate_limit_error` → after `Retry-After`; other types →
///   never (a failed task, `harness_error`, is retried only by the client's own judgment) —
///   each only with a status the type covers (or none): `server_error` with 501 is not in
///   the table's "server_error (500, 502, 503, 504)" row, and the status decides;
/// - status 500, 502, 503, 504 → backoff (not 501); 429 → after `Retry-After`.
pub fn retry_class(
    code: Option<&str>,
    error_type: Option<&str>,
    status: Option<u16>,
) -> RetryClass {
    if let Some(code) = code {
        match code {
            "rate_limited" => return RetryClass::AfterRetryAfter,
            "session_busy" => return RetryClass::WhenSessionIdle,
            "harness_unavailable" | "preview_failed" | "environment_unavailable" => {
                return RetryClass::Backoff;
            }
            c if crate::error::error_code(c).is_some() => return RetryClass::Never,
            _ => {} // a vendor code: the type and status decide
        }
    }
    // A type decides when the status is absent or one the type covers; a status the type
    // does not cover (`server_error` with 501) leaves the decision to the status.
    let covers = |statuses: &[u16]| status.is_none_or(|s| statuses.contains(&s));
    match error_type.and_then(|t| Some((t, crate::error::error_type_statuses(t)?))) {
        Some(("server_error", st)) if covers(st) => return RetryClass::Backoff,
        Some(("rate_limit_error", st)) if covers(st) => return RetryClass::AfterRetryAfter,
        Some((_, st)) if covers(st) => return RetryClass::Never,
        _ => {}
    }
    match status {
        Some(500 | 502 | 503 | 504) => RetryClass::Backoff,
        Some(429) => RetryClass::AfterRetryAfter,
        _ => RetryClass::Never,
    }
}

/// True when retrying is worth anything (see [`retry_class`]).
///
/// ```
/// use harness_uhp::retry::is_retryable;
/// assert!(is_retryable(Some("session_busy"), None, None));
/// assert!(!is_retryable(Some("quota_exhausted"), Some("rate_limit_error"), Some(429)));
/// assert!(is_retryable(None, None, Some(503)));
/// assert!(!is_retryable(None, None, Some(501))); // 501 is not a server_error status
/// ```
pub fn is_retryable(code: Option<&str>, error_type: Option<&str>, status: Option<u16>) -> bool {
    retry_class(code, error_type, status) != RetryClass::Never
}

/// A parsed `Retry-After` header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// `Retry-After: 120`.
    Delay(Duration),
    /// `Retry-After: Fri, 31 Dec 1999 23:59:59 GMT`.
    Date(SystemTime),
}

impl RetryAfter {
    /// Parses a header value; `None` when it is neither form. Huge second counts saturate.
    pub fn parse(value: &str) -> Option<RetryAfter> {
        let v = value.trim();
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
            let secs = v.bytes().fold(0u64, |acc, d| {
                acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
            });
            return Some(RetryAfter::Delay(Duration::from_secs(secs)));
        }
        httpdate::parse_http_date(v).ok().map(RetryAfter::Date)
    }

    /// The delay it asks for, measured from `now` (a date in the past is no delay).
    pub fn delay_from(&self, now: SystemTime) -> Duration {
        match self {
            RetryAfter::Delay(d) => *d,
            RetryAfter::Date(t) => t.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// A source of randomness for jitter: a number uniform in `[0, 1)`.
pub trait Jitter {
    /// The next number, uniform in `[0, 1)`.
    fn unit(&mut self) -> f64;
}

impl Jitter for fastrand::Rng {
    fn unit(&mut self) -> f64 {
        self.f64()
    }
}

impl<F: FnMut() -> f64> Jitter for F {
    fn unit(&mut self) -> f64 {
        self()
    }
}

/// Backoff settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// The ceiling of the first retry's delay; doubled per attempt. Default 0.5 s.
    pub base: Duration,
    /// The largest ceiling. Default 30 s.
    pub cap: Duration,
    /// The longest server-requested delay honoured; longer ones are clamped to it.
    /// Default 15 min.
    pub max_server_delay: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
            max_server_delay: Duration::from_secs(15 * 60),
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0 = the first retry): uniform in
    /// `[0, min(cap, base·2^attempt))` (full jitter), unless the server said how long to
    /// wait: then its answer wins, clamped to `[0, max_server_delay]`. Never panics and never
    /// overflows, whatever `attempt` or `server_delay_secs` (`inf`, negative, NaN: NaN is
    /// ignored).
    pub fn delay(
        &self,
        attempt: u32,
        server_delay_secs: Option<f64>,
        rng: &mut dyn Jitter,
    ) -> Duration {
        if let Some(s) = server_delay_secs.filter(|s| !s.is_nan()) {
            let max = self.max_server_delay.as_secs_f64();
            return Duration::try_from_secs_f64(s.clamp(0.0, max)).unwrap_or(self.max_server_delay);
        }
        let (base, cap) = (self.base.as_secs_f64(), self.cap.as_secs_f64());
        // 2^1024 is infinite; 0 · ∞ would be NaN, so a zero base is handled first.
        let ceiling = if base == 0.0 {
            0.0
        } else {
            (base * 2f64.powi(attempt.min(1024) as i32)).min(cap)
        };
        let u = rng.unit();
        let u = if (0.0..1.0).contains(&u) { u } else { 0.0 };
        // Past Duration::MAX only when the cap is within an ulp of it: the cap, then.
        Duration::try_from_secs_f64(ceiling * u).unwrap_or(self.cap)
    }
}

/// The delay, in seconds, for retry number `attempt` with the default [`Backoff`]: the
/// peer's `backoff_seconds(attempt, retry_after=…)`, but never `inf` and never an error.
///
/// ```
/// use harness_uhp::retry::backoff_seconds;
/// let mut rng = fastrand::Rng::with_seed(7);
/// assert_eq!(backoff_seconds(2, Some(30.0), &mut rng), 30.0); // the server's answer wins
/// assert_eq!(backoff_seconds(2, Some(f64::INFINITY), &mut rng), 900.0); // clamped
/// assert!(backoff_seconds(1100, None, &mut rng) <= 30.0); // no overflow
/// ```
pub fn backoff_seconds(attempt: u32, retry_after: Option<f64>, rng: &mut dyn Jitter) -> f64 {
    Backoff::default()
        .delay(attempt, retry_after, rng)
        .as_secs_f64()
}

/// One failed attempt, as the transport saw it.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The server answered with an error status (and, usually, an error envelope).
    Http {
        /// The HTTP status.
        status: u16,
        /// The envelope's error, when the body was one.
        error: Option<ErrorObject>,
        /// The `Retry-After` delay, resolved against the response's `Date` (or your clock).
        retry_after: Option<Duration>,
    },
    /// No answer: the connection failed, was reset, or timed out before a status. With an
    /// idempotency key a retry is safe (the server returns the first request's result).
    Transport,
}

impl Failure {
    /// Where the failure sits in the retry table.
    pub fn class(&self) -> RetryClass {
        match self {
            Failure::Http { status, error, .. } => retry_class(
                error.as_ref().and_then(|e| e.code.as_deref()),
                error.as_ref().and_then(|e| e.error_type.as_deref()),
                Some(*status),
            ),
            Failure::Transport => RetryClass::Backoff,
        }
    }

    /// The server's own answer to "when": `Retry-After`, else `detail.retry_after_ms`.
    pub fn server_delay_secs(&self) -> Option<f64> {
        match self {
            Failure::Http {
                retry_after, error, ..
            } => retry_after.map(|d| d.as_secs_f64()).or_else(|| {
                error
                    .as_ref()
                    .and_then(ErrorObject::retry_after_ms)
                    .map(|ms| ms / 1000.0)
            }),
            Failure::Transport => None,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Decision {
    /// Send the same request again (same idempotency key) at this time.
    RetryAt(Instant),
    /// Stop: the failure is not retryable, or the attempts or the deadline ran out.
    GiveUp(GiveUpReason),
}

/// Why a [`RetryPolicy`] gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// The retry table says never.
    NotRetryable,
    /// `max_attempts` were made in a row.
    AttemptsExhausted,
    /// The next attempt would start after the deadline.
    DeadlinePassed,
    /// The delay asked for (within [`Backoff::max_server_delay`]) ends later than an
    /// [`Instant`] can express: there is no time at which to retry.
    DelayTooLong,
}

/// The retry policy of one task: one idempotency key for all its attempts, a budget of
/// attempts and an optional deadline, and the backoff.
///
/// ```
/// use std::time::{Duration, Instant};
/// use harness_uhp::retry::{Decision, Failure, RetryPolicy};
///
/// let now = Instant::now();
/// let mut policy = RetryPolicy::new().with_seed(1);
/// let key = policy.idempotency_key().clone();
/// let busy = Failure::Http { status: 429, error: None, retry_after: Some(Duration::from_secs(30)) };
/// assert_eq!(policy.on_failure(now, &busy), Decision::RetryAt(now + Duration::from_secs(30)));
/// assert_eq!(policy.idempotency_key(), &key); // the same key on every attempt
/// ```
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    key: IdempotencyKey,
    backoff: Backoff,
    max_attempts: u32,
    deadline: Option<Instant>,
    failures: u32,
    rng: fastrand::Rng,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryPolicy {
    /// A policy with a fresh key, the default backoff and at most 5 attempts.
    pub fn new() -> Self {
        RetryPolicy {
            key: idempotency_key(),
            backoff: Backoff::default(),
            max_attempts: 5,
            deadline: None,
            failures: 0,
            rng: fastrand::Rng::new(),
        }
    }

    /// Uses this key (for instance, one persisted before a crash).
    #[must_use]
    pub fn with_key(mut self, key: IdempotencyKey) -> Self {
        self.key = key;
        self
    }

    /// Seeds the jitter, for deterministic tests.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// At most this many attempts in all (the first one included). At least 1.
    #[must_use]
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// No attempt starts after this instant.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Uses this backoff.
    #[must_use]
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The key every attempt of this task carries.
    pub fn idempotency_key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// Failed attempts since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The deadline, if any: no attempt starts after it.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Records a successful attempt: the budget of attempts and the backoff's exponent start
    /// over (they bound consecutive failures), the key stays.
    pub fn on_success(&mut self) {
        self.failures = 0;
    }

    /// Records a failed attempt at `now` and says when to retry, or to give up.
    #[must_use = "the failure is recorded; the decision says when to send the request again"]
    pub fn on_failure(&mut self, now: Instant, failure: &Failure) -> Decision {
        let attempt = self.failures;
        self.failures = self.failures.saturating_add(1);
        if failure.class() == RetryClass::Never {
            return Decision::GiveUp(GiveUpReason::NotRetryable);
        }
        if self.failures >= self.max_attempts {
            return Decision::GiveUp(GiveUpReason::AttemptsExhausted);
        }
        let delay = self
            .backoff
            .delay(attempt, failure.server_delay_secs(), &mut self.rng);
        let Some(at) = now.checked_add(delay) else {
            return Decision::GiveUp(GiveUpReason::DelayTooLong);
        };
        match self.deadline {
            Some(d) if at > d => Decision::GiveUp(GiveUpReason::DeadlinePassed),
            _ => Decision::RetryAt(at),
        }
    }
}
