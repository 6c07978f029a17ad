//! The host's tool executor for controller-mediated and approval-gated tool calls, and the
//! durable deduplication that makes an at-most-once re-drive safe (I3).
//!
//! The agent's tools are a [`Tools`] registry (harness-core's one tool model, the same one
//! every host takes): give it to the controller with
//! [`ControllerBuilder::tools`](crate::controller::ControllerBuilder::tools), and it runs
//! each host-executed call with the tool of its name, passing a [`ToolContext`] with the
//! session uid (bound by the host, never chosen by the harness) and the execution id.
//! [`ToolExecutor`] is the layer under the controller: [`Tools`] is one, [`DedupExecutor`]
//! adds receipts to any, and a custom executor (a gateway, a remote service) is another.
//!
//! The controller records a `TOOL_CALL` intent before it invokes the executor and a
//! `TOOL_RESULT` (with the call's id) after. If the process dies in between, resume re-drives
//! the intent with its original idempotency key, in the same session only.
//! [`DedupExecutor`] then returns the stored receipt instead of running the tool again: it
//! deduplicates on `(session uid, idempotency key)`, never on the harness-chosen key alone,
//! and with [`FileReceipts`] its receipts survive restarts.
//!
//! **What that guarantees, and what it does not.** A receipt is stored after the tool
//! returns. So an effect runs at most once per key *when its receipt was stored*; a process
//! killed between the effect and its receipt leaves no receipt, and the re-drive runs the
//! tool again (a refund paid twice, if the refund is not idempotent itself). The spec puts
//! the duty where it can be met: "the tool side dedups on session UID plus idempotency key".
//! An effect that must not repeat must be idempotent on the key, which the tool receives in
//! `call.idempotency_key` (with the session in [`ToolContext::session_uid`]): pass both to
//! the service that performs it.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//! use harness_core::message::{JsonObject, Mediation, ToolCall, ToolResult};
//! use harness_core::tool::{Tool, ToolContext, Tools};
//! use harness_sessions::tools::{DedupExecutor, MemoryReceipts, ToolExecutor};
//! use serde_json::json;
//!
//! /// A payment service that takes an idempotency key: a request with a key it has seen is
//! /// answered with the first payment, and nothing is paid again.
//! #[derive(Default)]
//! struct Payments(Mutex<HashMap<String, u64>>);
//!
//! impl Payments {
//!     fn refund(&self, key: String, order: u64) -> u64 {
//!         *self.0.lock().unwrap().entry(key).or_insert(order)
//!     }
//!     fn paid(&self) -> usize {
//!         self.0.lock().unwrap().len()
//!     }
//! }
//!
//! let payments = Arc::new(Payments::default());
//! let service = Arc::clone(&payments);
//! let refund = Tool::new("refund", "Refund an order", move |call: ToolCall, cx: ToolContext| {
//!     let service = Arc::clone(&service);
//!     async move {
//!         let order = call.args.get("order_id").and_then(|v| v.as_u64()).unwrap_or(0);
//!         // The key goes to the service: a re-drive of this call is not paid twice.
//!         let key = format!("{}/{}", cx.session_uid, call.idempotency_key);
//!         let refunded = service.refund(key, order);
//!         ToolResult::ok_json(&call.id, json!({"refunded": refunded}))
//!     }
//! })
//! .requires_approval();
//! let tools = Tools::new().with(refund);
//! let host_side = DedupExecutor::new(tools.clone(), MemoryReceipts::default());
//!
//! let mut args = JsonObject::new();
//! args.insert("order_id".into(), json!(42));
//! let call = ToolCall::new("c1", "refund", args)
//!     .with_mediation(Mediation::RequiresApproval)
//!     .with_idempotency_key("x1:c1");
//! let cx = ToolContext::new("s1", "x1");
//! futures::executor::block_on(async {
//!     // The refund ran, and the process was killed before its receipt was stored:
//!     tools.execute(&cx, &call).await.unwrap();
//!     // Resume re-drives the call: no receipt, so the tool runs again, and the payment
//!     // service, not the receipts, keeps it from being paid twice.
//!     host_side.execute(&cx, &call).await.unwrap();
//!     // From now on the receipt answers: the tool does not run.
//!     host_side.execute(&cx, &call).await.unwrap();
//! });
//! assert_eq!(payments.paid(), 1);
//! ```

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use harness_core::message::{ToolCall, ToolResult};
use harness_core::tool::{ToolContext, Tools};
use serde::{Deserialize, Serialize};

use crate::journal::JournalError;

/// Why an executor could not produce a result (a tool that ran and failed returns a
/// [`ToolResult`] with `is_error` instead).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tool executor: {0}")]
pub struct ToolError(pub String);

/// Runs host-executed tools: the layer under the controller. [`Tools`] is one;
/// [`DedupExecutor`] adds receipts to any; implement it for an executor of your own.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Runs `call` for the session and execution in `cx` (bound by the host). The result's
    /// id is stamped with the call's id by the controller.
    async fn execute(&self, cx: &ToolContext, call: &ToolCall) -> Result<ToolResult, ToolError>;
}

#[async_trait]
impl<E: ToolExecutor + ?Sized> ToolExecutor for std::sync::Arc<E> {
    async fn execute(&self, cx: &ToolContext, call: &ToolCall) -> Result<ToolResult, ToolError> {
        (**self).execute(cx, call).await
    }
}

/// The agent's tools run the call: the tool of its name, with `cx`. An unknown tool is an
/// error result (`unknown tool: <name>`), which the controller journals as the call's
/// receipt; a tool's code never fails the turn.
#[async_trait]
impl ToolExecutor for Tools {
    async fn execute(&self, cx: &ToolContext, call: &ToolCall) -> Result<ToolResult, ToolError> {
        Ok(self.call_ref(call, cx).await)
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

/// An executor that runs each `(session uid, idempotency key)` at most once *once its receipt
/// is stored*: a repeated call (a re-driven intent after a crash) returns the stored receipt
/// without running the tool.
///
/// The receipt is stored after the tool returns, so a crash between the tool's effect and
/// its receipt leaves no receipt and the re-drive runs the tool again: an effect that must
/// not repeat needs a tool that is itself idempotent on the key it receives in
/// `call.idempotency_key` (as the spec puts it, "the tool side dedups on session UID plus
/// idempotency key"; see the [module docs](self)). The example `sessions` tool's `publish`
/// checks its own log for the key for that reason.
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
    async fn execute(&self, cx: &ToolContext, call: &ToolCall) -> Result<ToolResult, ToolError> {
        if call.idempotency_key.is_empty() {
            return Err(ToolError("missing idempotency key".into()));
        }
        let stored = self
            .receipts
            .get(&cx.session_uid, &call.idempotency_key)
            .map_err(|e| ToolError(e.to_string()))?;
        if let Some(r) = stored {
            return Ok(r);
        }
        let result = self.inner.execute(cx, call).await?;
        self.receipts
            .put(&cx.session_uid, &call.idempotency_key, &result)
            .map_err(|e| ToolError(e.to_string()))?;
        Ok(result)
    }
}
