//! The runtime half (feature `axum`): a nestable axum [`Router`](axum::Router) over a [`UhpService`], a hyper
//! server with a header-read timeout, and [`FileStore`], the on-disk store.
//!
//! The router hands every request under it to the machine, raw target included (so ids are
//! decoded and checked in one place, [`route`](super::route)). It reads a body up to the
//! host's [`max_request_bytes`](UhpService::max_request_bytes) (a larger `Content-Length` is
//! answered `413` before a byte is read) and gives up on a body that stalls for
//! [`RouterConfig::idle_timeout`]. An auth hook may map a request to a principal itself;
//! without one the host checks bearer tokens against its keys. Event streams are sent as the
//! machine queues them, chunk by chunk, with `X-Accel-Buffering: no` for proxies.
//!
//! ```no_run
//! # async fn demo(host: harness_uhp::server::driver::UhpService) -> std::io::Result<()> {
//! use harness_uhp::server::axum::{RouterConfig, UhpServeConfig, router, serve};
//!
//! tokio::spawn(host.run(tokio::time::sleep));
//! let app = axum::Router::new().nest("/api/harness", router(host, RouterConfig::default()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! serve(listener, app, UhpServeConfig::default()).await
//! # }
//! ```

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body as AxumBody;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;

use super::driver::{Body, CallerAuth, UhpService};
use super::error::ApiError;
use super::store::{Store, StoreError, StoreRecord};

/// Maps a request (its head) to who is calling.
pub type AuthHook = Arc<dyn Fn(&http::request::Parts) -> CallerAuth + Send + Sync>;

/// The router's settings.
#[derive(Clone)]
#[non_exhaustive]
pub struct RouterConfig {
    /// Decides the caller; `None`: bearer tokens checked against the host's keys.
    pub auth: Option<AuthHook>,
    /// How long a request body may stall between two reads (default 30 s): then `408`.
    pub idle_timeout: Duration,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            auth: None,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for RouterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterConfig")
            .field("auth", &self.auth.is_some())
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl RouterConfig {
    /// With an auth hook.
    #[must_use]
    pub fn with_auth(
        mut self,
        hook: impl Fn(&http::request::Parts) -> CallerAuth + Send + Sync + 'static,
    ) -> Self {
        self.auth = Some(Arc::new(hook));
        self
    }
}

struct RouterState {
    host: UhpService,
    cfg: RouterConfig,
}

/// A router answering every UHP endpoint (`/v1/…`) for `host`; nest it where you like.
pub fn router(host: UhpService, cfg: RouterConfig) -> axum::Router {
    axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(RouterState { host, cfg }))
}

async fn handle(State(st): State<Arc<RouterState>>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    let limit = st.host.max_request_bytes();
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return full(st.host.body_too_large());
    }
    let mut buf = Vec::new();
    let mut body = body;
    loop {
        match tokio::time::timeout(st.cfg.idle_timeout, body.frame()).await {
            Err(_) => {
                let e = ApiError::with_status(
                    408,
                    "harnessrs_request_timeout",
                    "The request body stalled.",
                );
                return full(e.response());
            }
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                let e = ApiError::invalid_input("The request body could not be read.");
                return full(e.response());
            }
            Ok(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    if buf.len() + d.len() > limit {
                        return full(st.host.body_too_large());
                    }
                    buf.extend_from_slice(d);
                }
            }
        }
    }
    let caller = st
        .cfg
        .auth
        .as_ref()
        .map_or(CallerAuth::Bearer, |h| h(&parts));
    let resp = st
        .host
        .handle(caller, http::Request::from_parts(parts, buf))
        .await;
    let (parts, body) = resp.into_parts();
    let body = match body {
        Body::Full(b) => AxumBody::from(b),
        Body::Stream(s) => {
            AxumBody::from_stream(s.map(|chunk| Ok::<_, Infallible>(Bytes::from(chunk))))
        }
    };
    Response::from_parts(parts, body)
}

fn full(r: http::Response<Vec<u8>>) -> Response {
    r.map(AxumBody::from)
}

/// The HTTP server's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UhpServeConfig {
    /// How long a client may take to send a request's head (default 30 s).
    pub header_timeout: Duration,
}

impl Default for UhpServeConfig {
    fn default() -> Self {
        UhpServeConfig {
            header_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` over HTTP/1.1 (keep-alive, chunked streams), each connection
/// with a header-read timeout. Runs until the listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    cfg: UhpServeConfig,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true); // ok: a latency hint, not required
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let timeout = cfg.header_timeout;
        tokio::spawn(async move {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(timeout);
            // A connection that fails (reset, timeout) ends alone.
            let _ = b
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Records on disk: one JSON record per line in `DIR/records.jsonl`, appended and synced,
/// compacted (folded to the live objects, written to a temporary file, renamed over) when it
/// opens and whenever the log has grown to four times its live size, so it stays bounded by
/// what the machine keeps. A torn last line (a crash mid-write) is skipped.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    lines: tokio::sync::Mutex<(usize, usize)>, // (lines in the log, live records at last compaction)
}

impl FileStore {
    /// A store in `dir` (created if missing).
    pub async fn open(dir: impl AsRef<Path>) -> Result<FileStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?;
        Ok(FileStore {
            path: dir.join("records.jsonl"),
            lines: tokio::sync::Mutex::new((0, 0)),
        })
    }

    fn read_folded(path: &Path) -> Result<Vec<StoreRecord>, StoreError> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::Io(e.to_string())),
        };
        let mut order: Vec<Option<StoreRecord>> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for line in text.split(|b| *b == b'\n') {
            let Ok(r) = serde_json::from_slice::<StoreRecord>(line) else {
                continue; // blank, or torn by a crash
            };
            let (kind, id) = r.key();
            let key = (kind.to_owned(), id.to_owned());
            if let Some(i) = index.remove(&key) {
                if let Some(slot) = order.get_mut(i) {
                    *slot = None;
                }
            }
            if !r.is_deletion() {
                index.insert(key, order.len());
                order.push(Some(r));
            }
        }
        Ok(order.into_iter().flatten().collect())
    }

    fn rewrite(path: &Path, records: &[StoreRecord]) -> Result<(), StoreError> {
        use std::io::Write;
        let tmp = path.with_extension("jsonl.tmp");
        let io = |e: std::io::Error| StoreError::Io(e.to_string());
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        for r in records {
            let mut line = serde_json::to_vec(r).map_err(|e| StoreError::Io(e.to_string()))?;
            line.push(b'\n');
            f.write_all(&line).map_err(io)?;
        }
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

#[async_trait]
impl Store for FileStore {
    async fn load(&self) -> Result<Vec<StoreRecord>, StoreError> {
        let mut n = self.lines.lock().await;
        let path = self.path.clone();
        let records = tokio::task::spawn_blocking(move || {
            let r = Self::read_folded(&path)?;
            Self::rewrite(&path, &r)?;
            Ok::<_, StoreError>(r)
        })
        .await
        .map_err(|e| StoreError::Io(e.to_string()))??;
        *n = (records.len(), records.len());
        Ok(records)
    }

    async fn append(&self, records: Vec<StoreRecord>) -> Result<(), StoreError> {
        let mut n = self.lines.lock().await;
        let path = self.path.clone();
        let added = records.len();
        let compact = n.0 + added > 4 * n.1.max(256);
        let live = tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let io = |e: std::io::Error| StoreError::Io(e.to_string());
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io)?;
            let mut buf = Vec::new();
            for r in &records {
                serde_json::to_writer(&mut buf, r).map_err(|e| StoreError::Io(e.to_string()))?;
                buf.push(b'\n');
            }
            f.write_all(&buf).map_err(io)?;
            f.sync_data().map_err(io)?;
            if compact {
                let r = Self::read_folded(&path)?;
                Self::rewrite(&path, &r)?;
                return Ok::<_, StoreError>(Some(r.len()));
            }
            Ok(None)
        })
        .await
        .map_err(|e| StoreError::Io(e.to_string()))??;
        *n = match live {
            Some(l) => (l, l),
            None => (n.0 + added, n.1),
        };
        Ok(())
    }
}
