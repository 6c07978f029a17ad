//! Reads: `GET snapshot`, `GET transcript`, `GET capabilities`, the messages and the run tree.

use std::collections::HashMap;

use harness_core::Cursor;

use super::input::{input_message, message_json};
use super::thread::Thread;
use super::{AccessPolicy, Host, may_read};
use crate::agui;
use crate::frame::{ActiveOperation, SessionSnapshot, WaitingInput};
use crate::http::HttpAnswer;
use crate::log::EventLog;

impl<L: EventLog> Host<L> {
    /// `GET snapshot?threadId=`: the state of the thread.
    pub fn snapshot(
        &mut self,
        thread_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> HttpAnswer {
        match self.read_check(thread_id, user, request_id) {
            Err(a) => a,
            Ok(key) => HttpAnswer::ok(
                serde_json::to_string(&snapshot_of(
                    self.threads.get(&key),
                    self.log.head_seq(&key),
                    thread_id,
                ))
                .unwrap_or_default(),
                request_id,
            ),
        }
    }

    /// `GET transcript?threadId=`: the saved messages of the thread (AG-UI messages), the
    /// newest within [`max_transcript_bytes`](super::HostConfig::max_transcript_bytes).
    pub fn transcript(
        &mut self,
        thread_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> HttpAnswer {
        match self.read_check(thread_id, user, request_id) {
            Err(a) => a,
            Ok(key) => {
                let msgs = self
                    .threads
                    .get(&key)
                    .map(Thread::transcript)
                    .unwrap_or_default();
                HttpAnswer::ok(
                    serde_json::json!({ "threadId": thread_id, "messages": msgs }).to_string(),
                    request_id,
                )
            }
        }
    }

    /// The transcript of the thread stored under `key` (see [`thread_key`](Self::thread_key)).
    pub fn messages(&mut self, key: &str) -> Vec<agui::AguiMessage> {
        self.ensure(key, None);
        self.threads
            .get(key)
            .map(Thread::transcript)
            .unwrap_or_default()
    }

    /// The parent of each run of the thread stored under `key` (from the `parentRunId` of
    /// its `RUN_STARTED`; the newest runs, within
    /// [`max_receipts`](super::HostConfig::max_receipts)).
    pub fn run_tree(&mut self, key: &str) -> HashMap<String, Option<String>> {
        self.ensure(key, None);
        self.threads
            .get(key)
            .map(Thread::parents)
            .unwrap_or_default()
    }

    /// The key of a thread the user may read, or the answer that says why not.
    fn read_check(
        &mut self,
        thread_id: &str,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<String, HttpAnswer> {
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        let key = self.thread_key(user, thread_id);
        if !self.ensure(&key, Some(thread_id)) {
            return Err(HttpAnswer::error(404, "not_found", request_id));
        }
        match self.threads.get(&key) {
            Some(t) if !may_read(&self.cfg.access, t, user) => {
                Err(HttpAnswer::error(403, "forbidden", request_id))
            }
            _ => Ok(key),
        }
    }

    /// `GET capabilities`: the AG-UI capabilities; `custom.tanstack.protocol` is the
    /// protocol version of the server.
    pub fn capabilities(&self, name: &str, request_id: &str) -> HttpAnswer {
        let body = serde_json::json!({
            "identity": { "name": name, "type": "harness" },
            "transport": { "streaming": true, "websocket": true, "resumable": true },
            "custom": { "tanstack": { "protocol": self.cfg.version, "agents": self.cfg.agents } },
        });
        HttpAnswer::ok(body.to_string(), request_id)
    }
}

/// The snapshot of a thread whose log ends at `head`.
pub(super) fn snapshot_of(t: Option<&Thread>, head: u64, thread_id: &str) -> SessionSnapshot {
    SessionSnapshot {
        thread_id: thread_id.to_owned(),
        status: if t.and_then(|t| t.running.as_ref()).is_some() {
            "running".into()
        } else {
            "idle".into()
        },
        active_operations: t
            .and_then(|t| t.running.as_ref())
            .map(|r| {
                vec![ActiveOperation {
                    id: r.operation_id.clone(),
                    kind: r.kind.as_str().to_owned(),
                    ..ActiveOperation::default()
                }]
            })
            .unwrap_or_default(),
        waiting_inputs: t
            .map(|t| {
                t.waiting()
                    .iter()
                    .map(|w| WaitingInput {
                        input_id: w.input_id.clone(),
                        delivery: w.delivery.clone(),
                        message: Some(message_json(&input_message(&w.input))),
                        ..WaitingInput::default()
                    })
                    .collect()
            })
            .unwrap_or_default(),
        cursor: (head > 0).then(|| Cursor::new(head.to_string())),
        ..SessionSnapshot::default()
    }
}
