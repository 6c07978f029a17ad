//! What `@tanstack/ai-client` reads back after a reload, on `GET run`: `joinRun` (a run's
//! events from its start, live until its end) and `hydrate` (the thread as UI messages,
//! its active run and its pending interrupts).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::wait::WaitFor;
use super::{AccessPolicy, ConnId, Host, may_read};
use crate::agui::AguiMessage;
use crate::http::HttpAnswer;
use crate::log::EventLog;

/// The most log records read to rebuild the index when a host opens its log.
pub(super) const MAX_RUN_INDEX_SCAN: u64 = 1 << 16;
/// A run id longer than this is not indexed (it is still found with its `threadId`).
const MAX_INDEXED_RUN_ID_BYTES: usize = 256;

/// Run id → the key of its thread, the newest [`HostConfig::max_indexed_runs`] all users
/// together, and of each user (the owner of the run's thread) the newest
/// [`HostConfig::max_indexed_runs_per_user`]: a user
/// over their share loses their own oldest entry, so that one user starting many runs
/// cannot push the other users' runs out of the index (runs of threads with no owner count
/// against the whole only). Under [`MembersOnly`](AccessPolicy::MembersOnly) a run is
/// indexed under its thread's owner and its id (each user's ids are their own, as thread
/// ids are: another user's run of the same id does not hide the user's own from
/// `joinRun`); else under its id. Each insert is `O(log n)`.
///
/// [`HostConfig::max_indexed_runs`]: super::HostConfig::max_indexed_runs
/// [`HostConfig::max_indexed_runs_per_user`]: super::HostConfig::max_indexed_runs_per_user
#[derive(Debug)]
pub(super) struct RunIndex {
    at: HashMap<String, Indexed>,
    /// Every entry, the oldest first.
    order: crate::lru::Lru,
    /// Each user's entries, the oldest first (a user with none has no entry).
    of_user: HashMap<String, crate::lru::Lru>,
    /// The most entries of all users together.
    total: usize,
    /// The most entries of one user.
    per_user: usize,
}

/// An entry: the key of the run's thread, and the user it counts against.
#[derive(Debug)]
struct Indexed {
    key: String,
    user: Option<String>,
}

/// The index's key of the run `run_id` of a thread `owner` owns (`None`: a thread anyone
/// may read); no scoped key is an unscoped one (`<len>:<owner>:…` against `:…`).
fn index_key(owner: Option<&str>, run_id: &str) -> String {
    match owner {
        Some(o) => format!("{}:{o}:{run_id}", o.len()),
        None => format!(":{run_id}"),
    }
}

/// The owner a run is indexed under on a host of this access policy.
pub(super) fn index_scope<'a>(access: &AccessPolicy, owner: Option<&'a str>) -> Option<&'a str> {
    match access {
        AccessPolicy::MembersOnly => owner,
        AccessPolicy::Open => None,
    }
}

impl RunIndex {
    /// An empty index keeping at most `total` runs, and `per_user` runs of one user (at
    /// least one each).
    pub(super) fn new(total: usize, per_user: usize) -> RunIndex {
        RunIndex {
            at: HashMap::new(),
            order: crate::lru::Lru::default(),
            of_user: HashMap::new(),
            total: total.max(1),
            per_user: per_user.max(1),
        }
    }

    /// Indexes the run `run_id` of the thread stored under `key`, owned by `owner`
    /// (whose share it counts against) and indexed under `scope` (see [`index_scope`]).
    pub(super) fn insert(
        &mut self,
        scope: Option<&str>,
        owner: Option<&str>,
        run_id: &str,
        key: &str,
    ) {
        if run_id.len() > MAX_INDEXED_RUN_ID_BYTES {
            return;
        }
        let ix = index_key(scope, run_id);
        let entry = Indexed {
            key: key.to_owned(),
            user: owner.map(str::to_owned),
        };
        // The same id again (an unscoped id another user ran too): the new one stands,
        // counted against its own user.
        if let Some(old) = self.at.insert(ix.clone(), entry) {
            if old.user.as_deref() != owner {
                self.forget_user_entry(old.user.as_deref(), &ix);
            }
        }
        self.order.touch(&ix);
        if let Some(u) = owner {
            let mine = self.of_user.entry(u.to_owned()).or_default();
            mine.touch(&ix);
            // Over the user's share: the user's own oldest goes, never another user's.
            while mine.len() > self.per_user {
                match mine.pop_oldest_except(&ix) {
                    Some(old) => {
                        self.at.remove(&old);
                        self.order.remove(&old);
                    }
                    None => break,
                }
            }
        }
        while self.order.len() > self.total {
            match self.order.pop_oldest_except(&ix) {
                Some(old) => {
                    if let Some(e) = self.at.remove(&old) {
                        self.forget_user_entry(e.user.as_deref(), &old);
                    }
                }
                None => break,
            }
        }
    }

    /// Takes `ix` out of `user`'s entries (and the user out of the map once it has none).
    fn forget_user_entry(&mut self, user: Option<&str>, ix: &str) {
        let Some(u) = user else { return };
        if let Some(mine) = self.of_user.get_mut(u) {
            mine.remove(ix);
            if mine.len() == 0 {
                self.of_user.remove(u);
            }
        }
    }

    /// The key of the thread of the run `run_id` that `user` may read: the user's own
    /// (under `MembersOnly`), else one that anyone may read.
    fn get(&self, user: Option<&str>, run_id: &str) -> Option<&String> {
        user.and_then(|u| self.at.get(&index_key(Some(u), run_id)))
            .or_else(|| self.at.get(&index_key(None, run_id)))
            .map(|e| &e.key)
    }

    /// The index of the runs a log already has (a durable log after a restart), so that
    /// `joinRun` finds a run from before the restart by its id alone: each thread's
    /// `RUN_STARTED` records, newest first, until `total` runs are found or
    /// [`MAX_RUN_INDEX_SCAN`] records are read (the host's start stays bounded however big
    /// its log; a run past them is still found with its `threadId`). Each user's share
    /// holds as in [`insert`](Self::insert).
    pub(super) fn rebuild<L: EventLog>(
        log: &mut L,
        keys: &[String],
        access: &AccessPolicy,
        total: usize,
        per_user: usize,
    ) -> RunIndex {
        let mut ix = RunIndex::new(total, per_user);
        let total = ix.total;
        let mut budget = MAX_RUN_INDEX_SCAN;
        let mut found = 0;
        for key in keys {
            let first = log.first_seq(key).max(1);
            let mut seq = log.head_seq(key);
            let mut runs = Vec::new();
            while seq >= first && budget > 0 && found + runs.len() < total {
                budget -= 1;
                if let Ok(Some(rec)) = log.get(key, seq) {
                    if rec.event_json().starts_with(b"{\"type\":\"RUN_STARTED\"") {
                        runs.push(rec.operation_id.clone());
                    }
                }
                seq -= 1;
            }
            found += runs.len();
            // Oldest first: the newest are the last to go when the index is full.
            let owner = log.owner(key);
            let scope = index_scope(access, owner.as_deref());
            for run in runs.iter().rev() {
                ix.insert(scope, owner.as_deref(), run, key);
            }
            if budget == 0 || found >= total {
                break;
            }
        }
        ix
    }
}

impl<L: EventLog> Host<L> {
    /// `GET run?runId=&offset=` (`joinRun`): the plain AG-UI events of a run (SSE, no
    /// `harness.*` frames), from its `RUN_STARTED` when `offset` is `-1` (or absent), from
    /// now on when it is `now`; live while the run goes on; the stream ends after its
    /// `RUN_FINISHED` or `RUN_ERROR`. The thread is `thread_id` when given, else the one
    /// the run was started on. A run the host does not know, or that the user may not
    /// read, is `404` ("Unknown or expired run: return 404": the client then quietly
    /// forgets it); any other `offset` is `400` (this host hands out no `id:` cursors on
    /// these streams).
    #[allow(clippy::too_many_arguments)]
    pub fn join_run(
        &mut self,
        now: Instant,
        thread_id: Option<&str>,
        run_id: &str,
        offset: Option<&str>,
        user: Option<&str>,
        request_id: &str,
    ) -> Result<ConnId, HttpAnswer> {
        self.clock(now);
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return Err(HttpAnswer::error(401, "unauthorized", request_id));
        }
        let from_now = match offset {
            None | Some("-1") => false,
            Some("now") => true,
            Some(_) => return Err(HttpAnswer::error(400, "bad offset", request_id)),
        };
        let not_found = || HttpAnswer::error(404, "not_found", request_id);
        let key = match thread_id.filter(|t| !t.is_empty()) {
            Some(t) => self.thread_key(user, t),
            None => self.runs.get(user, run_id).cloned().ok_or_else(not_found)?,
        };
        if !self.ensure(&key, thread_id) {
            return Err(not_found());
        }
        match self.threads.get(&key) {
            // Someone else's run is no run of this user's: the same 404 as an unknown one.
            Some(t) if !may_read(&self.cfg.access, t, user) => return Err(not_found()),
            Some(t) if !t.knows_run(run_id) => return Err(not_found()),
            None => return Err(not_found()),
            _ => {}
        }
        let pos = if from_now {
            self.log.head_seq(&key)
        } else {
            self.log.first_seq(&key).saturating_sub(1)
        };
        let id = self.stream_run(now, &key, run_id, pos, user, request_id);
        self.wake(id);
        Ok(id)
    }

    /// `GET run?threadId=` (`hydrate`): `{messages, activeRun, interrupts}` as
    /// `@tanstack/ai-client` reads them: the thread's saved messages as UI messages
    /// (`{id, role, parts}`; a tool's result joins the call it answers, a call waiting for
    /// its approval is `approval-requested` with `approval.id` its interrupt's id), the
    /// running run (`{runId}`, or `null`) and the interrupts the thread waits on
    /// (`{runId, pending}`, or `null`). A thread the host does not have is `200` with no
    /// messages; one the user may not read `403`.
    pub fn hydrate(&mut self, thread_id: &str, user: Option<&str>, request_id: &str) -> HttpAnswer {
        if self.cfg.access == AccessPolicy::MembersOnly && user.is_none() {
            return HttpAnswer::error(401, "unauthorized", request_id);
        }
        if let Some(e) = self.thread_id_error(thread_id) {
            return HttpAnswer::error(400, &e, request_id);
        }
        let empty = json!({ "messages": [], "activeRun": null, "interrupts": null });
        let key = self.thread_key(user, thread_id);
        if !self.ensure(&key, Some(thread_id)) {
            return HttpAnswer::ok(empty.to_string(), request_id);
        }
        let Some(t) = self.threads.get(&key) else {
            return HttpAnswer::ok(empty.to_string(), request_id);
        };
        if !may_read(&self.cfg.access, t, user) {
            return HttpAnswer::error(403, "forbidden", request_id);
        }
        // One read under one borrow: the active run and the transcript agree.
        let active = t
            .running
            .as_ref()
            .map(|r| json!({ "runId": r.operation_id }));
        let parked = t.parked.as_ref().filter(|p| !p.open.is_empty());
        let approvals: HashMap<&str, &str> = parked
            .iter()
            .flat_map(|p| p.open.iter())
            .filter_map(|w| match &w.what {
                WaitFor::Approval { tool_call_id, .. } => {
                    Some((tool_call_id.as_str(), w.wait_id.as_str()))
                }
                _ => None,
            })
            .collect();
        let interrupts = parked.map(|p| {
            let pending: Vec<Value> = p
                .open
                .iter()
                .filter_map(|w| serde_json::to_value(w.interrupt()).ok())
                .collect();
            json!({ "runId": p.run_id, "pending": pending })
        });
        let messages = ui_messages(&t.transcript(), &approvals);
        let body = json!({
            "messages": messages,
            "activeRun": active,
            "interrupts": interrupts,
        });
        HttpAnswer::ok(body.to_string(), request_id)
    }
}

/// AG-UI messages as TanStack UI messages (`{id, role, parts}`): user and system text;
/// an assistant's text, thinking and tool calls; a tool's result on the call it answers
/// (and as a `tool-result` part of the same message).
fn ui_messages(msgs: &[AguiMessage], approvals: &HashMap<&str, &str>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // Whether the last UI message is an assistant's that later parts may join.
    let mut open_assistant = false;
    let text_part = |s: String| json!({ "type": "text", "content": s });
    for m in msgs {
        match m {
            AguiMessage::User(u) => {
                out.push(json!({ "id": u.id, "role": "user", "parts": [text_part(m.text())] }));
                open_assistant = false;
            }
            AguiMessage::System(s) => {
                out.push(json!({ "id": s.id, "role": "system", "parts": [text_part(m.text())] }));
                open_assistant = false;
            }
            AguiMessage::Developer(d) => {
                out.push(json!({ "id": d.id, "role": "system", "parts": [text_part(m.text())] }));
                open_assistant = false;
            }
            AguiMessage::Assistant(a) => {
                let mut parts = Vec::new();
                if let Some(c) = a.content.as_ref().filter(|c| !c.is_empty()) {
                    parts.push(text_part(c.clone()));
                }
                for call in a.tool_calls.iter().flatten() {
                    let mut p = json!({
                        "type": "tool-call",
                        "id": call.id,
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                        "state": "input-complete",
                    });
                    if let Ok(input) = serde_json::from_str::<Value>(&call.function.arguments) {
                        p["input"] = input;
                    }
                    if let Some(wait) = approvals.get(call.id.as_str()) {
                        p["state"] = json!("approval-requested");
                        p["approval"] = json!({ "id": wait, "needsApproval": true });
                    }
                    parts.push(p);
                }
                // The next assistant message of one reply joins this one.
                if open_assistant {
                    if let Some(last) = out.last_mut().and_then(|l| l["parts"].as_array_mut()) {
                        last.extend(parts);
                        continue;
                    }
                }
                out.push(json!({ "id": a.id, "role": "assistant", "parts": parts }));
                open_assistant = true;
            }
            AguiMessage::Reasoning(r) => {
                let part = json!({ "type": "thinking", "content": r.content });
                push_assistant_part(&mut out, &mut open_assistant, &r.id, part);
            }
            AguiMessage::Tool(tm) => {
                let content = m.text();
                let state = if tm.error.is_some() {
                    "error"
                } else {
                    "complete"
                };
                // The call it answers gets its output.
                let output = serde_json::from_str::<Value>(&content)
                    .unwrap_or_else(|_| Value::String(content.clone()));
                if let Some(call) = out
                    .iter_mut()
                    .rev()
                    .filter_map(|u| u["parts"].as_array_mut())
                    .flat_map(|ps| ps.iter_mut())
                    .find(|p| p["type"] == "tool-call" && p["id"] == tm.tool_call_id.as_str())
                {
                    call["output"] = output;
                    call["state"] = json!(if state == "error" {
                        "error"
                    } else {
                        "complete"
                    });
                }
                let mut part = json!({
                    "type": "tool-result",
                    "toolCallId": tm.tool_call_id,
                    "content": content,
                    "state": state,
                });
                if let Some(e) = &tm.error {
                    part["error"] = json!(e);
                }
                push_assistant_part(&mut out, &mut open_assistant, &tm.id, part);
            }
            AguiMessage::Activity(_) => {}
        }
    }
    out
}

/// A part that belongs to the assistant's reply: onto its message, or a new one.
fn push_assistant_part(out: &mut Vec<Value>, open: &mut bool, id: &str, part: Value) {
    if *open {
        if let Some(parts) = out.last_mut().and_then(|l| l["parts"].as_array_mut()) {
            parts.push(part);
            return;
        }
    }
    out.push(json!({ "id": id, "role": "assistant", "parts": [part] }));
    *open = true;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn run_index_is_bounded() {
        const MAX_INDEXED_RUNS: usize = 16_384;
        let mut ix = RunIndex::new(MAX_INDEXED_RUNS, usize::MAX);
        for i in 0..MAX_INDEXED_RUNS + 10 {
            ix.insert(None, None, &format!("run-{i}"), "t");
        }
        assert_eq!(ix.at.len(), MAX_INDEXED_RUNS);
        assert!(ix.get(None, "run-0").is_none());
        assert!(
            ix.get(None, &format!("run-{}", MAX_INDEXED_RUNS + 9))
                .is_some()
        );
        ix.insert(None, None, &"x".repeat(MAX_INDEXED_RUN_ID_BYTES + 1), "t");
        assert_eq!(ix.at.len(), MAX_INDEXED_RUNS);
    }

    /// A user over their share loses their own oldest entry; the other users' entries and
    /// those of threads with no owner stay; the global cap still holds, and the per-user
    /// orders hold exactly the entries the index has.
    #[test]
    fn a_user_over_their_share_evicts_only_their_own_oldest() {
        let mut ix = RunIndex::new(1_000, 4);
        ix.insert(Some("bob"), Some("bob"), "b-1", "tb");
        ix.insert(None, None, "anon-1", "tn");
        for i in 0..10 {
            ix.insert(Some("alice"), Some("alice"), &format!("a-{i}"), "ta");
        }
        assert_eq!(ix.get(Some("bob"), "b-1").map(String::as_str), Some("tb"));
        assert_eq!(ix.get(None, "anon-1").map(String::as_str), Some("tn"));
        assert!(ix.get(Some("alice"), "a-5").is_none());
        for i in 6..10 {
            assert!(ix.get(Some("alice"), &format!("a-{i}")).is_some(), "a-{i}");
        }
        assert_eq!(ix.at.len(), 6);
        assert_eq!(ix.of_user["alice"].len(), 4);
        // The same unscoped id, run again by another user, counts against that user only.
        ix.insert(None, Some("carol"), "anon-1", "tc");
        ix.insert(None, Some("dave"), "anon-1", "td");
        assert_eq!(ix.get(None, "anon-1").map(String::as_str), Some("td"));
        assert!(!ix.of_user.contains_key("carol"));
        assert_eq!(ix.of_user["dave"].len(), 1);
        let held: usize = ix.of_user.values().map(crate::lru::Lru::len).sum();
        assert_eq!(held, ix.at.values().filter(|e| e.user.is_some()).count());
    }

    /// With shares larger than the whole, the global cap evicts the oldest of anyone and
    /// takes the entry out of its user's order too (no user left with none held).
    #[test]
    fn the_global_cap_still_holds_across_users() {
        const MAX_INDEXED_RUNS: usize = 64;
        let mut ix = RunIndex::new(MAX_INDEXED_RUNS, MAX_INDEXED_RUNS);
        for i in 0..MAX_INDEXED_RUNS {
            let u = format!("u{}", i % 8);
            ix.insert(Some(&u), Some(&u), &format!("r-{i}"), "t");
        }
        ix.insert(Some("z"), Some("z"), "r-z", "t");
        assert_eq!(ix.at.len(), MAX_INDEXED_RUNS);
        assert!(ix.get(Some("u0"), "r-0").is_none());
        assert!(ix.get(Some("u1"), "r-1").is_some());
        let held: usize = ix.of_user.values().map(crate::lru::Lru::len).sum();
        assert_eq!(held, MAX_INDEXED_RUNS);
    }

    /// The rebuild on open reads at most `MAX_RUN_INDEX_SCAN` records, newest first: a run
    /// started further back than that is left out (still found with its `threadId`), a
    /// recent one is indexed, and records that start no run index nothing.
    #[test]
    fn the_rebuild_reads_a_bounded_number_of_records_newest_first() {
        use crate::agui::{AguiEvent, RunStarted};
        use crate::log::MemoryLog;
        let started = |run: &str| {
            AguiEvent::RunStarted(RunStarted {
                thread_id: "t".into(),
                run_id: run.into(),
                ..RunStarted::default()
            })
        };
        let mut log = MemoryLog::new(1 << 20, 1 << 30).with_max_total_bytes(1 << 30);
        log.append("t", "run-old", &started("run-old")).unwrap();
        for _ in 0..MAX_RUN_INDEX_SCAN {
            log.append("t", "run-old", &AguiEvent::text_content("m", "x"))
                .unwrap();
        }
        log.append("t", "run-new", &started("run-new")).unwrap();
        log.append("t", "run-new", &AguiEvent::text_content("m", "y"))
            .unwrap();
        let keys = log.threads();
        let ix = RunIndex::rebuild(&mut log, &keys, &AccessPolicy::Open, 16_384, 1_024);
        assert_eq!(ix.get(None, "run-new").map(String::as_str), Some("t"));
        assert!(
            ix.get(None, "run-old").is_none(),
            "read past the scan budget"
        );
        assert_eq!(ix.at.len(), 1);
    }
}
