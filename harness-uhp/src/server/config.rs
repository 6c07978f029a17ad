//! [`UhpServerConfig`]: the server's limits and identity, each bound with its default.

use std::time::Duration;

use super::harness::Base;

/// The server's limits and identity. Every bound has a default; past it the request gets the
/// protocol's status and code.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UhpServerConfig {
    /// The bases served; the first one's built-in harness is the default.
    pub bases: Vec<Base>,
    /// The models the server's model provider serves (`available: true`); the first is the
    /// default.
    pub models: Vec<String>,
    /// The backend name models are listed under.
    pub backend: String,
    /// `implementation.name` in the discovery document.
    pub implementation_name: String,
    /// `implementation.version`.
    pub implementation_version: String,
    /// Largest JSON body (default 16 MiB); larger is `413 file_too_large`.
    pub max_body_bytes: usize,
    /// Largest upload (default 32 MiB); larger is `413 file_too_large` (files.md §1.2).
    pub max_upload_bytes: usize,
    /// Open event streams (default 16 384); more is `429 rate_limited`.
    pub max_open_streams: usize,
    /// Tasks running at once (default 256); more is `503 harness_unavailable`.
    pub max_running_tasks: usize,
    /// Tasks one principal (the caller an API key names) runs at once (default 64, below
    /// `max_running_tasks`, so one caller cannot take every slot); more is `429 rate_limited`
    /// with `Retry-After` (security.md:90, §5: "SHOULD rate-limit task creation per principal").
    pub max_running_tasks_per_principal: usize,
    /// Terminal responses kept (default 10 000); the oldest is forgotten first.
    pub max_stored_responses: usize,
    /// Tasks in one session (default 1 000); more is `429 quota_exhausted`.
    pub max_turns_per_session: usize,
    /// Sessions per principal (default 1 000); past it the least recently used idle one
    /// expires (`404 session_expired` on continuation).
    pub max_sessions_per_principal: usize,
    /// Configured harnesses per principal (default 100); more is `429 quota_exhausted`.
    pub max_harnesses_per_principal: usize,
    /// Artifacts per session (default 1 000) and their total size (default 64 MiB): a write
    /// past either fails that tool call.
    pub max_files_per_session: usize,
    /// See `max_files_per_session`.
    pub max_session_file_bytes: usize,
    /// Uploads kept per principal (default 1 000); the oldest is forgotten first.
    pub max_uploads_per_principal: usize,
    /// Idempotency keys kept (default 100 000), each for `idempotency_ttl` (default 24 h,
    /// tasks.md §6).
    pub max_idempotency_keys: usize,
    /// See `max_idempotency_keys`.
    pub idempotency_ttl: Duration,
    /// Bytes one stream may hold unsent (default 8 MiB); past it the stream ends and the
    /// client reads the stored response (the task goes on).
    pub max_stream_buffer_bytes: usize,
    /// The keep-alive tick (default 10 s): a stream that sent nothing during a whole tick
    /// gets a `: keep-alive` comment, so no stream is silent for more than two ticks
    /// (errors.md §5 asks for at least every 30 s).
    pub keep_alive: Duration,
    /// The longest any task runs (default 1 h; security.md §5): then it ends `incomplete`.
    pub max_task_duration: Duration,
    /// The server's public base URL (`https://host/api/harness`), which makes an artifact's
    /// `download_url` absolute; `None`: the URL is the path alone.
    pub public_url: Option<String>,
    /// Emit [`ServerEvent::Persist`](super::ServerEvent::Persist) records (set by the driver when a durable store is used).
    pub persist: bool,
    /// The store is shared with other hosts serving the same objects (set by the driver from
    /// [`Store::shared`](super::Store::shared)): idempotency keys are claimed in it
    /// ([`ServerEvent::Claim`](super::ServerEvent::Claim)), other hosts' tasks are read from it
    /// and stay `in_progress` here until their host ends them. Needs `persist`.
    pub shared: bool,
}

impl UhpServerConfig {
    /// The defaults, serving `bases` with `models`.
    pub fn new(bases: Vec<Base>, models: Vec<String>) -> Self {
        UhpServerConfig {
            bases,
            models,
            backend: "harness-rs".into(),
            implementation_name: "harness-rs".into(),
            implementation_version: env!("CARGO_PKG_VERSION").into(),
            max_body_bytes: 16 << 20,
            max_upload_bytes: 32 << 20,
            max_open_streams: 16_384,
            max_running_tasks: 256,
            max_running_tasks_per_principal: 64,
            max_stored_responses: 10_000,
            max_turns_per_session: 1_000,
            max_sessions_per_principal: 1_000,
            max_harnesses_per_principal: 100,
            max_files_per_session: 1_000,
            max_session_file_bytes: 64 << 20,
            max_uploads_per_principal: 1_000,
            max_idempotency_keys: 100_000,
            idempotency_ttl: Duration::from_secs(24 * 3600),
            max_stream_buffer_bytes: 8 << 20,
            keep_alive: Duration::from_secs(10),
            max_task_duration: Duration::from_secs(3600),
            public_url: None,
            persist: false,
            shared: false,
        }
    }

    /// The largest request body a transport should read before handing it over: the larger
    /// of the two body limits, plus room for multipart framing.
    pub fn max_request_bytes(&self) -> usize {
        self.max_body_bytes.max(self.max_upload_bytes) + (64 << 10)
    }
}
