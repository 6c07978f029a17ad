//! Tasks (tasks.md, lifecycle.md §3, streaming.md §2–4, sessions.md §4).
//!
//! `POST /v1/responses` checks the request, picks the configured harness (`metadata.harness_id`
//! or the default, reported in `metadata`), the model (the task's, else the harness's default;
//! one the server does not serve is `422 model_unavailable`, never a silent substitute), the
//! session (new, or the one `previous_response_id` continues: `404 response_not_found`,
//! `404 session_expired`, `409 harness_mismatch`, `409 session_busy`), and asks the driver to
//! run the turn. The response object is built as the agent works — the same object whether
//! the client streams or not (streaming.md §6) — and every change is an event of the stream.
//!
//! Rules kept here:
//! - the stream starts `response.created`, `response.in_progress`; every item is opened by
//!   `output_item.added` and closed by `output_item.done` after every event naming it; it ends
//!   with exactly one terminal event carrying the final response (a cancelled task ends
//!   `response.failed` with `status: "cancelled"`, §4);
//! - a terminal status never changes; output made before the end is kept (lifecycle.md §3);
//! - a budget (`max_step`, `timeout_seconds`, the server's `max_task_duration`) ends the task
//!   `incomplete`, never `completed`; a cancel ends it `cancelled`, never `failed`, and
//!   cancelling a terminal task succeeds and changes nothing;
//! - `DELETE /v1/responses/{id}` forgets the stored response and does not cancel the task;
//! - `Idempotency-Key`: a repeated key gets the first request's task, waited for if still
//!   running, and never a second run; the same key with a different body is refused
//!   (`422 harnessrs_idempotency_key_reused`: the protocol has no code for it).
//! - `usage` is `null` unless the agent's model calls reported some (never a made-up zero).
//!
//! | module | the spec's noun |
//! | --- | --- |
//! | `create` | `POST /v1/responses`: the harness, the model, the session, the turn asked of the driver (tasks.md §1, sessions.md §1) |
//! | `input` | `input`: a string or items, as the agent's messages (tasks.md §2, files.md §1.1) |
//! | `idempotency` | `Idempotency-Key`: a repeated request gets the first one's task (tasks.md §6) |
//! | `events` | the output items as the agent makes them, each change an event (streaming.md §2–3) |
//! | `run` | the turn's lifecycle: steps, usage, its end, cancel, delete (lifecycle.md §3, tasks.md §5, §7) |
//! | `response` | the response object's terminal status, given back whole or replayed as a stream (tasks.md §3, streaming.md §4, §6) |

mod create;
mod events;
mod idempotency;
mod input;
mod response;
mod run;

use std::time::Instant;

use harness_core::message::Message;
use serde_json::Value;

use self::events::Open;
pub(crate) use self::idempotency::Idem;
pub use self::idempotency::StoredKey;
pub(crate) use self::response::{Wait, answer_waiters};
use super::auth::Principal;
use super::error::ApiError;
use super::store::StoreRecord;
use super::stream::Cursor;
use super::{UhpServer, WaitId};
use crate::response::{ContainerFileCitation, Response};

/// A task: its response object and what it takes to finish it.
#[derive(Debug)]
pub(crate) struct Task {
    pub(crate) principal: Principal,
    pub(crate) response: Response,
    pub(crate) input_items: Vec<Value>,
    pub(crate) input_messages: Vec<Message>,
    pub(crate) input_text: String,
    pub(crate) session_id: String,
    pub(crate) harness_id: String,
    pub(crate) cur: Cursor,
    pub(crate) waiters: Vec<WaitId>,
    open: Open,
    items: u64,
    artifacts: Vec<ContainerFileCitation>,
    pub(crate) deadline: Instant,
    pub(crate) deadline_reason: &'static str,
    max_step: Option<u64>,
    steps: u64,
    pub(crate) store: bool,
    pub(crate) deleted: bool,
    pub(crate) idempotency: Option<StoredKey>,
}

impl UhpServer {
    pub(crate) fn task(&self, p: &Principal, id: &str) -> Result<&Task, ApiError> {
        self.tasks
            .get(id)
            .filter(|t| &t.principal == p && !t.deleted)
            .ok_or_else(|| ApiError::response_not_found(id))
    }
}

/// How a task ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed,
    Failed {
        code: &'static str,
        message: &'static str,
    },
    Incomplete(&'static str),
    Cancelled,
}

impl StoreRecord {
    pub(crate) fn task(t: &Task) -> StoreRecord {
        StoreRecord::Response {
            principal: t.principal.clone(),
            task: Box::new(super::store::StoredTask {
                response: t.response.clone(),
                input_items: t.input_items.clone(),
                input_text: t.input_text.clone(),
                session_id: t.session_id.clone(),
                harness_id: t.harness_id.clone(),
                idempotency: t.idempotency.clone(),
            }),
        }
    }
}

impl Task {
    /// A task read back from the store: terminal, unless `remote` (another host sharing the
    /// store runs it: it stays `in_progress` here, never run by this host). A task that was
    /// running at a crash ends `failed`: it is never run again.
    pub(crate) fn restored(
        principal: Principal,
        mut st: super::store::StoredTask,
        now: Instant,
        remote: bool,
    ) -> Task {
        if !remote {
            st.orphan();
        }
        let response = st.response;
        Task {
            principal,
            response,
            input_items: st.input_items,
            input_messages: Vec::new(),
            input_text: st.input_text,
            session_id: st.session_id,
            harness_id: st.harness_id,
            cur: Cursor::default(),
            waiters: Vec::new(),
            open: Open::None,
            items: 0,
            artifacts: Vec::new(),
            deadline: now,
            deadline_reason: "",
            max_step: None,
            steps: 0,
            store: true,
            deleted: false,
            idempotency: st.idempotency,
        }
    }
}
