//! The host's tool executor for controller-mediated and approval-gated tool calls, and the
//! durable deduplication that makes an at-most-once re-drive safe (I3).
//!
//! The controller records a `TOOL_CALL` intent before it invokes the executor and a
//! `TOOL_RESULT` (with the call's id) after. If the process dies in between, resume re-drives
//! the intent with its original idempotency key, in the same session only. The executor must
//! then return the original receipt instead of repeating the effect: it deduplicates on
//! `(session uid, idempotency key)`, never on the harness-chosen key alone, and keeps that
//! state durable across restarts. [`DedupExecutor`] adds exactly that to any executor.
//!
//! ```
//! use std::sync::Arc;
//! use harness_core::message::{JsonObject, Mediation, ToolCall, ToolResult};
//! use harness_sessions::tools::{
//!     DedupExecutor, MemoryReceipts, ToolCallContext, ToolExecutor, executor_fn,
//! };
//!
//! let effects = Arc::new(std::sync::atomic::AtomicUsize::new(0));
//! let counter = Arc::clone(&effects);
//! let exec = DedupExecutor::new(
//!     executor_fn(move |_scope, call| {
//!         counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         Ok(ToolResult::ok(&call.id, JsonObject::new()))
//!     }),
//!     MemoryReceipts::default(),
//! );
//! let call = ToolCall::new("c1", "send_mail", JsonObject::new())
//!     .with_mediation(Mediation::ControllerMediated)
//!     .with_idempotency_key("mail-1");
//! let scope = ToolCallContext { session_uid: "s1".into() };
//! futures::executor::block_on(async {
//!     exec.execute(&scope, &call).await.unwrap();
//!     exec.execute(&scope, &call).await.unwrap(); // a re-drive: served from the receipt
//! });
//! assert_eq!(effects.load(std::sync::atomic::Ordering::SeqCst), 1);
//! ```

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use harness_core::message::{ToolCall, ToolResult};
use serde::{Deserialize, Serialize};

use crate::journal::JournalError;

/// The host-bound scope of a tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallContext {
    /// The session the call belongs to: bound by the host, never chosen by the harness.
    pub session_uid: String,
}

/// Why an executor could not produce a result (a tool that ran and failed returns a
/// [`ToolResult`] with `is_error` instead).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tool executor: {0}")]
pub struct ToolError(pub String);

/// Runs host-executed tools.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Runs `call` for the session in `scope`. The result's id is stamped with the call's id
    /// by the controller.
    async fn execute(
        &self,
        scope: &ToolCallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, ToolError>;
}

#[async_trait]
impl<E: ToolExecutor + ?Sized> ToolExecutor for std::sync::Arc<E> {
    async fn execute(
        &self,
        scope: &ToolCallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, ToolError> {
        (**self).execute(scope, call).await
    }
}

/// A synchronous function as a [`ToolExecutor`].
pub struct FnExecutor<F>(F);

impl<F> std::fmt::Debug for FnExecutor<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnExecutor")
    }
}

/// Wraps `f` as an executor.
pub fn executor_fn<F>(f: F) -> FnExecutor<F>
where
    F: Fn(&ToolCallContext, &ToolCall) -> Result<ToolResult, ToolError> + Send + Sync,
{
    FnExecutor(f)
}

#[async_trait]
impl<F> ToolExecutor for FnExecutor<F>
where
    F: Fn(&ToolCallContext, &ToolCall) -> Result<ToolResult, ToolError> + Send + Sync,
{
    async fn execute(
        &self,
        scope: &ToolCallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, ToolError> {
        (self.0)(scope, call)
    }
}

/// Durable receipts of executed tool calls, keyed by session uid and idempotency key.
pub trait ReceiptStore: Send + Sync {
    /// The receipt of `key` in `session`, if the effect ran.
    fn get(&self, session: &str, key: &str) -> Result<Option<ToolResult>, JournalError>;
    /// Stores the receipt of `key` in `session` (durably, before returning).
    fn put(&self, session: &str, key: &str, result: &ToolResult) -> Result<(), JournalError>;
}

impl<R: ReceiptStore + ?Sized> ReceiptStore for std::sync::Arc<R> {
    fn get(&self, session: &str, key: &str) -> Result<Option<ToolResult>, JournalError> {
        (**self).get(session, key)
    }
    fn put(&self, session: &str, key: &str, result: &ToolResult) -> Result<(), JournalError> {
        (**self).put(session, key, result)
    }
}

/// Receipts in memory: enough for tests and single-process hosts whose tools are themselves
/// idempotent. Not durable across restarts.
#[derive(Debug, Default)]
pub struct MemoryReceipts(Mutex<HashMap<(String, String), ToolResult>>);

impl ReceiptStore for MemoryReceipts {
    fn get(&self, session: &str, key: &str) -> Result<Option<ToolResult>, JournalError> {
        let m = self
            .0
            .lock()
            .map_err(|_| JournalError::Io("receipts lock poisoned".into()))?;
        Ok(m.get(&(session.to_owned(), key.to_owned())).cloned())
    }
    fn put(&self, session: &str, key: &str, result: &ToolResult) -> Result<(), JournalError> {
        let mut m = self
            .0
            .lock()
            .map_err(|_| JournalError::Io("receipts lock poisoned".into()))?;
        m.insert((session.to_owned(), key.to_owned()), result.clone());
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct ReceiptLine {
    session: String,
    key: String,
    result: ToolResult,
}

/// Receipts in an append-only JSON-lines file, fsynced on every put. A torn last line (a
/// crash during a put) is ignored on load: that effect's receipt was not stored.
///
/// The file is read once, on first use; one `FileReceipts` per file and process (share it
/// with an `Arc`), since an instance does not see receipts another one puts later.
#[derive(Debug)]
pub struct FileReceipts {
    path: PathBuf,
    cache: Mutex<Option<HashMap<(String, String), ToolResult>>>,
}

impl FileReceipts {
    /// Receipts kept in `path` (created on first put).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileReceipts {
            path: path.into(),
            cache: Mutex::new(None),
        }
    }

    fn with_cache<T>(
        &self,
        f: impl FnOnce(&mut HashMap<(String, String), ToolResult>) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        let mut c = self
            .cache
            .lock()
            .map_err(|_| JournalError::Io("receipts lock poisoned".into()))?;
        if c.is_none() {
            let mut m = HashMap::new();
            match fs::read(&self.path) {
                Ok(bytes) => {
                    for line in bytes.split(|&b| b == b'\n') {
                        if let Ok(r) = serde_json::from_slice::<ReceiptLine>(line) {
                            m.insert((r.session, r.key), r.result);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
            *c = Some(m);
        }
        match c.as_mut() {
            Some(m) => f(m),
            None => Err(JournalError::Io("receipts not loaded".into())),
        }
    }
}

impl ReceiptStore for FileReceipts {
    fn get(&self, session: &str, key: &str) -> Result<Option<ToolResult>, JournalError> {
        self.with_cache(|m| Ok(m.get(&(session.to_owned(), key.to_owned())).cloned()))
    }

    fn put(&self, session: &str, key: &str, result: &ToolResult) -> Result<(), JournalError> {
        self.with_cache(|m| {
            let line = ReceiptLine {
                session: session.to_owned(),
                key: key.to_owned(),
                result: result.clone(),
            };
            let mut bytes =
                serde_json::to_vec(&line).map_err(|e| JournalError::Io(e.to_string()))?;
            bytes.push(b'\n');
            let mut f: File = OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(&self.path)?;
            let len = f.metadata()?.len();
            if len > 0 {
                // A torn previous line would swallow this one: start on a fresh line.
                let mut last = [0u8; 1];
                f.seek(SeekFrom::Start(len - 1))?;
                f.read_exact(&mut last)?;
                if last != *b"\n" {
                    f.write_all(b"\n")?;
                }
            }
            f.write_all(&bytes)?;
            f.sync_data()?;
            if len == 0 {
                // A new file: make its directory entry durable too.
                if let Some(d) = self.path.parent().and_then(|d| {
                    File::open(if d.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        d
                    })
                    .ok()
                }) {
                    let _ = d.sync_all();
                }
            }
            m.insert((session.to_owned(), key.to_owned()), result.clone());
            Ok(())
        })
    }
}

/// An executor that runs each `(session uid, idempotency key)` at most once: a repeated call
/// (a re-driven intent after a crash) returns the stored receipt without running the tool.
///
/// The receipt is stored after the tool returns, so a crash between the tool's effect and
/// its receipt leaves no receipt and the re-drive runs the tool again: an effect that must
/// not repeat needs a tool that is itself idempotent on the key (as the spec puts it, "the
/// tool side dedups on session UID plus idempotency key"). The example `sessions` tool's
/// `publish` checks its own log for the key for that reason.
#[derive(Debug)]
pub struct DedupExecutor<E, R> {
    inner: E,
    receipts: R,
}

impl<E, R> DedupExecutor<E, R> {
    /// Deduplicates `inner` with `receipts`.
    pub fn new(inner: E, receipts: R) -> Self {
        DedupExecutor { inner, receipts }
    }

    /// The wrapped executor.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

#[async_trait]
impl<E: ToolExecutor, R: ReceiptStore> ToolExecutor for DedupExecutor<E, R> {
    async fn execute(
        &self,
        scope: &ToolCallContext,
        call: &ToolCall,
    ) -> Result<ToolResult, ToolError> {
        if call.idempotency_key.is_empty() {
            return Err(ToolError("missing idempotency key".into()));
        }
        let stored = self
            .receipts
            .get(&scope.session_uid, &call.idempotency_key)
            .map_err(|e| ToolError(e.to_string()))?;
        if let Some(r) = stored {
            return Ok(r);
        }
        let result = self.inner.execute(scope, call).await?;
        self.receipts
            .put(&scope.session_uid, &call.idempotency_key, &result)
            .map_err(|e| ToolError(e.to_string()))?;
        Ok(result)
    }
}
