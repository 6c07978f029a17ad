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

use std::sync::Arc;
use std::time::Instant;

use harness_core::event::{Event as HistoryEvent, EventBody};
use harness_core::message::{FilePart, Message, Part, Role, ToolCall, ToolResult};
use harness_core::{IdentityContext, Start};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::auth::Principal;
use super::error::ApiError;
use super::file::decode_data_url;
use super::stream::{Cursor, Out, field, int, raw_str};
use super::{
    Now, Reply, Request, Server, ServerEvent, StreamId, TurnEnd, TurnGone, TurnStart, WaitId, Wake,
    bytes_response, json_response,
};
use crate::error::ErrorObject;
use crate::protocol::IDEMPOTENCY_KEY_HEADER;
use crate::response::{
    Annotation, ContainerFileCitation, ContentPart, FunctionCall, FunctionCallOutput,
    Message as OutputMessage, OutputItem, OutputText, Reasoning, Response, ResponseStatus,
    SummaryText, Usage,
};

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

/// The item a task is writing into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    None,
    Message(usize),
    Reasoning(usize),
}

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
    waiters: Vec<WaitId>,
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

/// An idempotency key as stored with its task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKey {
    /// The key.
    pub key: String,
    /// SHA-256 of the request body, hex.
    pub fingerprint: String,
}

/// An idempotency entry.
#[derive(Clone, Debug)]
pub(crate) struct Idem {
    fingerprint: String,
    response_id: String,
    at: Instant,
}

/// A request waiting for a task's end.
#[derive(Debug)]
pub(crate) struct Wait {
    principal: Principal,
    response_id: String,
    sse: bool,
    ready: Option<http::Response<Vec<u8>>>,
}

/// What a create asked for, checked.
struct Create {
    input_messages: Vec<Message>,
    input_items: Vec<Value>,
    input_text: String,
    model: Option<String>,
    harness_id: Option<String>,
    previous: Option<String>,
    stream: bool,
    background: bool,
    store: bool,
    instructions: Option<String>,
    max_step: Option<u64>,
    timeout_seconds: Option<u64>,
    max_output_tokens: Option<u64>,
}

fn opt_u64(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ApiError::invalid_input(format!("`{key}` must be a non-negative integer.")).param(key)
        }),
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid_input(format!("`{key}` must be a boolean.")).param(key)),
    }
}

fn opt_str(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_input(format!("`{key}` must be a string.")).param(key)),
    }
}

fn item_id(prefix: &str, response_id: &str, n: u64) -> String {
    let tail = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("{prefix}_{tail}_{n}")
}

impl Server {
    pub(crate) fn task(&self, p: &Principal, id: &str) -> Result<&Task, ApiError> {
        self.tasks
            .get(id)
            .filter(|t| &t.principal == p && !t.deleted)
            .ok_or_else(|| ApiError::response_not_found(id))
    }

    fn parse_create(&self, p: &Principal, body: &Value) -> Result<Create, ApiError> {
        let obj = body
            .as_object()
            .ok_or_else(|| ApiError::invalid_input("The body must be a JSON object."))?;
        let input = obj
            .get("input")
            .ok_or_else(|| ApiError::invalid_input("`input` is required.").param("input"))?;
        let (input_messages, input_items, input_text) = self.parse_input(p, input)?;
        let metadata = match obj.get("metadata") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                return Err(
                    ApiError::invalid_input("`metadata` must be an object.").param("metadata")
                );
            }
        };
        let harness_id = match metadata.and_then(|m| m.get("harness_id")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(
                    ApiError::invalid_input("`metadata.harness_id` must be a string.")
                        .param("metadata.harness_id"),
                );
            }
        };
        Ok(Create {
            input_messages,
            input_items,
            input_text,
            model: opt_str(obj, "model")?,
            harness_id,
            previous: opt_str(obj, "previous_response_id")?,
            stream: opt_bool(obj, "stream", false)?,
            background: opt_bool(obj, "background", false)?,
            store: opt_bool(obj, "store", true)?,
            instructions: opt_str(obj, "instructions")?,
            max_step: opt_u64(obj, "max_step")?,
            timeout_seconds: opt_u64(obj, "timeout_seconds")?,
            max_output_tokens: opt_u64(obj, "max_output_tokens")?,
        })
    }

    /// `input` as messages for the agent, as items for `input_items`, and as text (a turn's
    /// title). A bare string is one user message (tasks.md §2).
    fn parse_input(
        &self,
        p: &Principal,
        input: &Value,
    ) -> Result<(Vec<Message>, Vec<Value>, String), ApiError> {
        let items: Vec<Value> = match input {
            Value::String(s) => vec![json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": s}]})],
            Value::Array(a) => a.clone(),
            _ => {
                return Err(ApiError::invalid_input(
                    "`input` must be a string or a list of items.",
                )
                .param("input"));
            }
        };
        if items.len() > 10_000 {
            return Err(ApiError::invalid_input("`input` has too many items.").param("input"));
        }
        let mut messages = Vec::new();
        let mut loose = Vec::new(); // content items given without a message around them
        let mut text = String::new();
        for (i, item) in items.iter().enumerate() {
            let param = format!("input[{i}]");
            let Some(obj) = item.as_object() else {
                return Err(
                    ApiError::invalid_input("Each input item must be an object.").param(param),
                );
            };
            let ty = obj.get("type").and_then(Value::as_str);
            if obj.contains_key("content") || obj.contains_key("role") || ty == Some("message") {
                let role = obj.get("role").and_then(Value::as_str).unwrap_or("user");
                let role = match role {
                    "developer" | "system" => Role::System,
                    r => Role::from(r),
                };
                let parts = match obj.get("content") {
                    Some(Value::String(s)) => vec![Part::text(s.clone())],
                    Some(Value::Array(parts)) => {
                        let mut out = Vec::new();
                        for (j, part) in parts.iter().enumerate() {
                            if let Some(pt) =
                                self.parse_part(p, part, &format!("{param}.content[{j}]"))?
                            {
                                out.push(pt);
                            }
                        }
                        out
                    }
                    None | Some(Value::Null) => Vec::new(),
                    Some(_) => {
                        return Err(ApiError::invalid_input(
                            "`content` must be a string or a list.",
                        )
                        .param(format!("{param}.content")));
                    }
                };
                if parts.is_empty() {
                    continue;
                }
                if role == Role::User {
                    text.push_str(
                        &Message {
                            role: role.clone(),
                            parts: parts.clone(),
                        }
                        .text(),
                    );
                }
                messages.push(Message { role, parts });
            } else if let Some(pt) = self.parse_part(p, item, &param)? {
                if let Part::Text(t) = &pt {
                    text.push_str(&t.text);
                }
                loose.push(pt);
            }
        }
        if !loose.is_empty() {
            messages.push(Message {
                role: Role::User,
                parts: loose,
            });
        }
        let has_content = messages.iter().any(|m| {
            m.parts.iter().any(|p| match p {
                Part::Text(t) => !t.text.trim().is_empty(),
                _ => true,
            })
        });
        if !has_content {
            return Err(ApiError::invalid_input("`input` is empty.").param("input"));
        }
        Ok((messages, items, text))
    }

    /// One content part; `None` for a type the server does not use (ignored, tasks.md §1.1).
    fn parse_part(
        &self,
        p: &Principal,
        part: &Value,
        param: &str,
    ) -> Result<Option<Part>, ApiError> {
        let Some(obj) = part.as_object() else {
            return Err(
                ApiError::invalid_input("Each content part must be an object.").param(param),
            );
        };
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "input_text" | "output_text" | "text" => {
                let t = obj.get("text").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid_input("A text part needs `text`.")
                        .param(format!("{param}.text"))
                })?;
                Ok(Some(Part::text(t)))
            }
            "input_file" | "input_image" => {
                let url_key = if ty == "input_file" {
                    "file_data"
                } else {
                    "image_url"
                };
                let name = obj
                    .get("filename")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if let Some(url) = obj.get(url_key).and_then(Value::as_str) {
                    let (mime, bytes) = decode_data_url(url).ok_or_else(|| {
                        ApiError::invalid_input(format!("`{url_key}` must be a data: URL."))
                            .param(format!("{param}.{url_key}"))
                    })?;
                    return Ok(Some(Part::File(FilePart {
                        mime,
                        bytes: Some(bytes),
                        name,
                        ..FilePart::default()
                    })));
                }
                if let Some(fid) = obj.get("file_id").and_then(Value::as_str) {
                    let f = self.file_for_input(p, fid).ok_or_else(|| {
                        ApiError::file_not_found(fid).param(format!("{param}.file_id"))
                    })?;
                    return Ok(Some(Part::File(FilePart {
                        mime: f.media_type.clone(),
                        bytes: Some(f.bytes.clone()),
                        name: if name.is_empty() {
                            f.filename.clone()
                        } else {
                            name
                        },
                        ..FilePart::default()
                    })));
                }
                Err(
                    ApiError::invalid_input(format!("A file part needs `{url_key}` or `file_id`."))
                        .param(param),
                )
            }
            _ => Ok(None),
        }
    }

    /// `POST /v1/responses`.
    pub(crate) fn create_response(
        &mut self,
        now: Now,
        p: &Principal,
        req: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let body = self.json_body(req)?;
        let key = match req.headers.get(IDEMPOTENCY_KEY_HEADER) {
            None => None,
            Some(v) => {
                let k = v.to_str().ok().filter(|k| !k.is_empty() && k.len() <= 255);
                Some(k.ok_or_else(|| {
                    ApiError::invalid_input(
                        "`Idempotency-Key` must be 1 to 255 visible characters.",
                    )
                    .param(IDEMPOTENCY_KEY_HEADER)
                })?)
            }
        };
        let fingerprint = key.map(|_| hex(&Sha256::digest(req.body)));
        let c = self.parse_create(p, &body)?;
        if let (Some(k), Some(fp)) = (key, &fingerprint) {
            self.expire_keys(now.instant);
            if let Some(e) = self.idem.get(&(p.clone(), k.to_owned())).cloned() {
                if &e.fingerprint != fp {
                    return Err(ApiError::with_status(
                        422,
                        "harnessrs_idempotency_key_reused",
                        "This Idempotency-Key was used for a different request.",
                    )
                    .param(IDEMPOTENCY_KEY_HEADER));
                }
                return self.replay(p, &e.response_id, c.stream, c.background);
            }
        }

        // The harness and the session.
        let (session_id, harness) = match &c.previous {
            Some(prev) => {
                let t = self
                    .task(p, prev)
                    .map_err(|e| e.param("previous_response_id"))?;
                let sid = t.session_id.clone();
                let s = match self.sessions.get(&sid).filter(|s| &s.principal == p) {
                    Some(s) => s,
                    None if self.expired.contains(&sid) => {
                        return Err(ApiError::new(
                            "session_expired",
                            "The session of that response has expired; start a new one.",
                        )
                        .param("previous_response_id"));
                    }
                    None => {
                        return Err(ApiError::session_not_found(&sid).param("previous_response_id"));
                    }
                };
                if c.harness_id.as_ref().is_some_and(|h| h != &s.harness_id) {
                    return Err(ApiError::new(
                        "harness_mismatch",
                        "That session runs a different harness; a session keeps its harness.",
                    )
                    .param("metadata.harness_id"));
                }
                if let Some(r) = &s.running {
                    let _ = r;
                    return Err(ApiError::new(
                        "session_busy",
                        "A task is already running in this session; retry once it has ended.",
                    ));
                }
                if s.turns.len() >= self.cfg.max_turns_per_session {
                    return Err(ApiError::new(
                        "quota_exhausted",
                        "This session has reached its limit of tasks; start a new session.",
                    ));
                }
                let h = self
                    .registry
                    .get(p, &s.harness_id)
                    .ok_or_else(|| ApiError::harness_not_found(&s.harness_id))?
                    .clone();
                (Some(sid), h)
            }
            None => {
                let h = match &c.harness_id {
                    Some(id) => self.registry.get(p, id).ok_or_else(|| {
                        ApiError::harness_not_found(id).param("metadata.harness_id")
                    })?,
                    None => self.registry.default_harness().ok_or_else(|| {
                        ApiError::new("harness_unavailable", "This server has no harness to run.")
                    })?,
                };
                (None, h.clone())
            }
        };
        let model = c
            .model
            .clone()
            .or_else(|| harness.default_model.clone())
            .or_else(|| self.cfg.models.first().cloned())
            .unwrap_or_default();
        if !self.cfg.models.contains(&model) {
            return Err(ApiError::new(
                "model_unavailable",
                format!(
                    "The model '{}' is not available for this harness.",
                    super::error::shown(&model)
                ),
            )
            .param("model"));
        }
        if self.running.len() >= self.cfg.max_running_tasks {
            return Err(ApiError::new(
                "harness_unavailable",
                "No capacity to run a task right now; retry later.",
            ));
        }
        if c.stream && self.streams.len() >= self.cfg.max_open_streams {
            let mut e = ApiError::new("rate_limited", "Too many open streams; retry later.");
            e.retry_after = Some(1);
            return Err(e);
        }

        let rid = self.new_id("resp_");
        let session_id = match session_id {
            Some(s) => s,
            None => self.new_session(now, p, &harness.id, &c.input_text),
        };
        let (history, container_id) = match self.sessions.get_mut(&session_id) {
            Some(s) => {
                s.running = Some(rid.clone());
                (Arc::clone(&s.history), s.container_id.clone())
            }
            None => return Err(ApiError::session_not_found(&session_id)),
        };

        let mut metadata = Map::new();
        metadata.insert("session_id".into(), Value::from(session_id.as_str()));
        metadata.insert("harness_id".into(), Value::from(harness.id.as_str()));
        metadata.insert("container_id".into(), Value::from(container_id.as_str()));
        let mut response = Response::new(rid.clone(), ResponseStatus::InProgress);
        response.created_at = Some(now.unix_s());
        response.model = Some(model.clone());
        response.previous_response_id = c.previous.clone();
        response.store = Some(c.store);
        response.metadata = Some(metadata);

        let max_step = c.max_step.or(harness.max_step);
        let budget = c.timeout_seconds.or(harness.timeout_seconds);
        let (deadline, deadline_reason) = match budget
            .map(std::time::Duration::from_secs)
            .filter(|d| *d < self.cfg.max_task_duration)
        {
            Some(d) => (now.instant.checked_add(d), "timeout_seconds"),
            None => (
                now.instant.checked_add(self.cfg.max_task_duration),
                "max_task_duration",
            ),
        };
        let stream = c.stream.then(|| self.open_stream(now.instant));
        let idempotency = key.zip(fingerprint).map(|(k, fp)| StoredKey {
            key: k.to_owned(),
            fingerprint: fp,
        });
        let mut task = Task {
            principal: p.clone(),
            response,
            input_items: c.input_items,
            input_messages: c.input_messages.clone(),
            input_text: c.input_text,
            session_id: session_id.clone(),
            harness_id: harness.id.clone(),
            cur: Cursor { stream, seq: 0 },
            waiters: Vec::new(),
            open: Open::None,
            items: 0,
            artifacts: Vec::new(),
            deadline: deadline.unwrap_or(now.instant),
            deadline_reason,
            max_step,
            steps: 0,
            store: c.store,
            deleted: false,
            idempotency: idempotency.clone(),
        };
        let mut out = Out {
            streams: &mut self.streams,
            events: &mut self.events,
            max_buffer: self.cfg.max_stream_buffer_bytes,
        };
        for ty in ["response.created", "response.in_progress"] {
            out.response(&mut task.cur, ty, &task.response);
        }
        // MCP servers this host cannot reach are reported, not dropped (harnesses.md §4.1).
        for name in harness.enabled_mcp_names() {
            let message = format!(
                "The MCP server '{}' was not connected: this server does not speak MCP; the task runs without its tools.",
                super::error::shown(&name)
            );
            out.event(&mut task.cur.stream, &mut task.cur.seq, "error", |b| {
                field(b, "code", &"harnessrs_mcp_unavailable");
                field(b, "message", &message);
                field(b, "param", &Value::Null);
                b.push(b'}');
            });
        }
        if let Some(k) = &idempotency {
            let entry = (p.clone(), k.key.clone());
            self.idem.insert(
                entry.clone(),
                Idem {
                    fingerprint: k.fingerprint.clone(),
                    response_id: rid.clone(),
                    at: now.instant,
                },
            );
            self.idem_order.push_back(entry);
            while self.idem.len() > self.cfg.max_idempotency_keys {
                match self.idem_order.pop_front() {
                    Some(old) => {
                        self.idem.remove(&old);
                    }
                    None => break,
                }
            }
        }
        let start = Start {
            execution_id: rid.clone(),
            session_uid: session_id.clone(),
            config: harness.start_config(c.instructions.as_deref()),
            // A view of the session's events, not a copy (History::prefix).
            history: harness_core::History::prefix(Arc::clone(&history), history.len()),
            inputs: c.input_messages,
            identity: IdentityContext {
                principal: p.as_str().to_owned(),
                can_mint_tokens: false,
            },
            resume_from_seq: 0,
        };
        let turn = TurnStart {
            response_id: rid.clone(),
            session_id,
            base: harness.base.clone(),
            model,
            start,
            disabled_tools: harness.disabled_tools.clone(),
            max_step,
            max_output_tokens: c.max_output_tokens,
        };
        let head_response = json_response(200, &task.response);
        let reply = match stream {
            Some(sid) => Reply::Stream(sse_head(), sid),
            None if c.background => Reply::Full(head_response),
            None => {
                let w = WaitId(self.new_handle());
                task.waiters.push(w);
                self.waits.insert(
                    w,
                    Wait {
                        principal: p.clone(),
                        response_id: rid.clone(),
                        sse: false,
                        ready: None,
                    },
                );
                Reply::Wait(w)
            }
        };
        self.persist(|| Record::task(&task));
        self.tasks.insert(rid.clone(), task);
        self.running.insert(rid);
        self.events
            .push_back(ServerEvent::StartTurn(Box::new(turn)));
        Ok(reply)
    }

    /// A repeated idempotency key: the first request's task, never a second run.
    fn replay(
        &mut self,
        p: &Principal,
        rid: &str,
        stream: bool,
        background: bool,
    ) -> Result<Reply, ApiError> {
        let t = self.task(p, rid)?;
        if t.response.status.is_terminal() || background {
            return Ok(Reply::Full(final_reply(&t.response, stream)));
        }
        let w = WaitId(self.new_handle());
        self.waits.insert(
            w,
            Wait {
                principal: p.clone(),
                response_id: rid.to_owned(),
                sse: stream,
                ready: None,
            },
        );
        if let Some(t) = self.tasks.get_mut(rid) {
            t.waiters.push(w);
        }
        Ok(Reply::Wait(w))
    }

    fn expire_keys(&mut self, now: Instant) {
        while let Some(front) = self.idem_order.front() {
            let stale = match self.idem.get(front) {
                Some(e) => now.saturating_duration_since(e.at) > self.cfg.idempotency_ttl,
                None => true,
            };
            if !stale {
                break;
            }
            if let Some(k) = self.idem_order.pop_front() {
                if self
                    .idem
                    .get(&k)
                    .is_some_and(|e| now.saturating_duration_since(e.at) > self.cfg.idempotency_ttl)
                {
                    self.idem.remove(&k);
                }
            }
        }
    }

    /// The answer of a waiting request, once its task has ended.
    pub fn poll_wait(&mut self, id: WaitId) -> Option<http::Response<Vec<u8>>> {
        let w = self.waits.get_mut(&id)?;
        if let Some(r) = w.ready.take() {
            self.waits.remove(&id);
            return Some(r);
        }
        let gone = self
            .tasks
            .get(&w.response_id)
            .is_none_or(|t| t.principal != w.principal || t.deleted);
        if gone {
            let rid = w.response_id.clone();
            self.waits.remove(&id);
            return Some(super::error_response(&ApiError::response_not_found(&rid)));
        }
        None
    }

    /// The client of a waiting request went away; the task goes on.
    pub fn drop_wait(&mut self, id: WaitId) {
        self.waits.remove(&id);
    }

    /// `POST /v1/responses/{id}/cancel`.
    pub(crate) fn cancel_response(
        &mut self,
        now: Now,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        self.task(p, id)?;
        self.finish_task(now, id, Outcome::Cancelled, true);
        Ok(json_response(200, &self.task(p, id)?.response))
    }

    /// `DELETE /v1/responses/{id}`: forgets the response; a running task goes on.
    pub(crate) fn delete_response(
        &mut self,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        self.task(p, id)?;
        let running = self.running.contains(id);
        if running {
            if let Some(t) = self.tasks.get_mut(id) {
                t.deleted = true;
            }
        } else {
            self.tasks.remove(id);
        }
        self.persist(|| Record::ResponseDeleted { id: id.to_owned() });
        Ok(json_response(
            200,
            &json!({"id": id, "object": "response", "deleted": true}),
        ))
    }

    // ── The turn: what the driver reports ───────────────────────────────────────────────

    fn running_task(&mut self, rid: &str) -> Result<&mut Task, TurnGone> {
        if !self.running.contains(rid) {
            return Err(TurnGone);
        }
        self.tasks.get_mut(rid).ok_or(TurnGone)
    }

    /// A running task and where its events go.
    fn turn_parts(&mut self, rid: &str) -> Result<(&mut Task, Out<'_>), TurnGone> {
        if !self.running.contains(rid) {
            return Err(TurnGone);
        }
        let t = self.tasks.get_mut(rid).ok_or(TurnGone)?;
        let out = Out {
            streams: &mut self.streams,
            events: &mut self.events,
            max_buffer: self.cfg.max_stream_buffer_bytes,
        };
        Ok((t, out))
    }

    /// Assistant text (a model delta or `sink.output`): `response.output_text.delta`, in a
    /// message item opened on the first one.
    pub fn turn_text(&mut self, _now: Now, rid: &str, delta: &str) -> Result<(), TurnGone> {
        self.delta(rid, delta, Open::Message(0))
    }

    /// Reasoning summary text (`sink.reasoning`): `response.reasoning_summary_text.delta`, in
    /// a `reasoning` item opened on the first one.
    pub fn turn_reasoning(&mut self, _now: Now, rid: &str, delta: &str) -> Result<(), TurnGone> {
        self.delta(rid, delta, Open::Reasoning(0))
    }

    /// A delta into the open item of `kind` (its index ignored), opened when another is.
    fn delta(&mut self, rid: &str, delta: &str, kind: Open) -> Result<(), TurnGone> {
        let (t, mut out) = self.turn_parts(rid)?;
        let index = match (t.open, kind) {
            (Open::Message(i), Open::Message(_)) | (Open::Reasoning(i), Open::Reasoning(_)) => i,
            (_, Open::Reasoning(_)) => open_reasoning(t, &mut out),
            _ => open_message(t, &mut out),
        };
        let (id, part, ty, sub) = match t.response.output.get_mut(index) {
            Some(OutputItem::Message(m)) => (
                m.id.as_deref(),
                m.content.first_mut(),
                "response.output_text.delta",
                "content_index",
            ),
            Some(OutputItem::Reasoning(r)) => (
                r.id.as_deref(),
                r.summary.first_mut(),
                "response.reasoning_summary_text.delta",
                "summary_index",
            ),
            _ => return Ok(()),
        };
        if let Some(
            ContentPart::OutputText(OutputText { text, .. })
            | ContentPart::SummaryText(SummaryText { text, .. }),
        ) = part
        {
            text.push_str(delta);
        }
        let id = id.unwrap_or("");
        out.part(&mut t.cur, ty, id, index, Some(sub), "delta", &delta);
        Ok(())
    }

    /// One more model call (an agent step). Past the task's `max_step` the task ends
    /// `incomplete` and the turn must stop.
    pub fn turn_step(&mut self, now: Now, rid: &str) -> Result<(), TurnGone> {
        let t = self.running_task(rid)?;
        t.steps += 1;
        if t.max_step.is_some_and(|m| t.steps > m) {
            self.finish_task(now, rid, Outcome::Incomplete("max_step"), true);
            return Err(TurnGone);
        }
        Ok(())
    }

    /// A tool the agent invoked: a `function_call` item, added and done.
    pub fn turn_tool_call(
        &mut self,
        _now: Now,
        rid: &str,
        call: &ToolCall,
    ) -> Result<(), TurnGone> {
        let (t, mut out) = self.turn_parts(rid)?;
        close_open(t, &mut out, "completed");
        let (index, id) = next_item(t, "fc");
        let arguments = serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into());
        let mut fc = FunctionCall {
            id: Some(id.clone()),
            call_id: call.id.clone(),
            name: call.tool.clone(),
            arguments: String::new(),
            status: Some("in_progress".into()),
            extra: Map::new(),
        };
        out.item(
            &mut t.cur,
            "response.output_item.added",
            index,
            &OutputItem::FunctionCall(fc.clone()),
        );
        let ty = "response.function_call_arguments.delta";
        out.part(&mut t.cur, ty, &id, index, None, "delta", &arguments);
        let ty = "response.function_call_arguments.done";
        out.part(&mut t.cur, ty, &id, index, None, "arguments", &arguments);
        fc.arguments = arguments;
        fc.status = Some("completed".into());
        let item = OutputItem::FunctionCall(fc);
        out.item(&mut t.cur, "response.output_item.done", index, &item);
        t.response.output.push(item);
        Ok(())
    }

    /// A tool's result: a `function_call_output` item, added and done.
    pub fn turn_tool_result(
        &mut self,
        _now: Now,
        rid: &str,
        result: &ToolResult,
    ) -> Result<(), TurnGone> {
        let (t, mut out) = self.turn_parts(rid)?;
        close_open(t, &mut out, "completed");
        let (index, id) = next_item(t, "fco");
        let output = if result.is_error {
            json!({"error": result.error}).to_string()
        } else {
            serde_json::to_string(&result.output.clone().unwrap_or_default())
                .unwrap_or_else(|_| "{}".into())
        };
        let item = OutputItem::FunctionCallOutput(FunctionCallOutput {
            id: Some(id),
            call_id: result.id.clone(),
            output: Value::from(output),
            status: Some("completed".into()),
            extra: Map::new(),
        });
        out.item(&mut t.cur, "response.output_item.added", index, &item);
        out.item(&mut t.cur, "response.output_item.done", index, &item);
        t.response.output.push(item);
        Ok(())
    }

    /// Token usage of a model call, added to the task's.
    pub fn turn_usage(
        &mut self,
        rid: &str,
        usage: &harness_core::message::Usage,
    ) -> Result<(), TurnGone> {
        let t = self.running_task(rid)?;
        let u = t.response.usage.get_or_insert_with(Usage::default);
        let add = |a: &mut Option<u64>, b: u64| *a = Some(a.unwrap_or(0).saturating_add(b));
        add(&mut u.input_tokens, usage.input_tokens);
        add(
            &mut u.output_tokens,
            usage.output_tokens.saturating_add(usage.reasoning_tokens),
        );
        u.total_tokens = Some(
            u.input_tokens
                .unwrap_or(0)
                .saturating_add(u.output_tokens.unwrap_or(0)),
        );
        Ok(())
    }

    /// The turn ended (its `run` returned). A task already terminal (cancelled, out of
    /// budget) stays as it is.
    pub fn turn_end(&mut self, now: Now, rid: &str, end: TurnEnd) {
        if !self.running.contains(rid) {
            return;
        }
        let outcome = match end {
            TurnEnd::Completed => Outcome::Completed,
            TurnEnd::HarnessFailed => Outcome::Failed {
                code: "harness_error",
                message: "The harness could not complete the task.",
            },
            TurnEnd::ProviderFailed => Outcome::Failed {
                code: "provider_error",
                message: "The model provider failed.",
            },
        };
        self.finish_task(now, rid, outcome, false);
    }

    /// A file the agent wrote, cited on the task's final message.
    pub(crate) fn cite(&mut self, rid: &str, citation: ContainerFileCitation) {
        if let Some(t) = self.tasks.get_mut(rid) {
            t.artifacts.retain(|a| a.file_id != citation.file_id);
            t.artifacts.push(citation);
        }
    }

    /// Ends a running task: closes its items, cites its artifacts, sets its status, writes
    /// the terminal event, answers its waiters, records the turn in its session. Nothing
    /// for a task already terminal (cancelling one changes nothing, sessions.md §4).
    pub(crate) fn finish_task(&mut self, now: Now, rid: &str, outcome: Outcome, stop_turn: bool) {
        if !self.running.remove(rid) {
            return;
        }
        let mut out = Out {
            streams: &mut self.streams,
            events: &mut self.events,
            max_buffer: self.cfg.max_stream_buffer_bytes,
        };
        let Some(t) = self.tasks.get_mut(rid) else {
            return;
        };
        let item_status = if outcome == Outcome::Completed {
            "completed"
        } else {
            "incomplete"
        };
        if !t.artifacts.is_empty() {
            let index = match t.open {
                Open::Message(i) => i,
                _ => open_message(t, &mut out),
            };
            let arts = std::mem::take(&mut t.artifacts);
            if let Some(OutputItem::Message(m)) = t.response.output.get_mut(index) {
                let id = m.id.clone().unwrap_or_default();
                if let Some(ContentPart::OutputText(ot)) = m.content.first_mut() {
                    let end = ot.text.chars().count() as i64;
                    for a in arts {
                        let mut a = a;
                        a.start_index = Some(0);
                        a.end_index = Some(end);
                        let ann = Annotation::ContainerFileCitation(a);
                        let ai = ot.annotations.len() as u64;
                        let ty = "response.output_text.annotation.added";
                        out.event(&mut t.cur.stream, &mut t.cur.seq, ty, |b| {
                            raw_str(b, "item_id", &id);
                            int(b, "output_index", index as u64);
                            int(b, "content_index", 0);
                            int(b, "annotation_index", ai);
                            field(b, "annotation", &ann);
                            b.push(b'}');
                        });
                        ot.annotations.push(ann);
                    }
                }
            }
        }
        close_open(t, &mut out, item_status);
        let (event, status) = match &outcome {
            Outcome::Completed => ("response.completed", ResponseStatus::Completed),
            Outcome::Failed { code, message } => {
                t.response.error =
                    Some(ErrorObject::new(*code, *message).with_type("harness_error"));
                ("response.failed", ResponseStatus::Failed)
            }
            Outcome::Incomplete(reason) => {
                t.response.incomplete_details = Some(json!({ "reason": reason }));
                ("response.incomplete", ResponseStatus::Incomplete)
            }
            Outcome::Cancelled => ("response.failed", ResponseStatus::Cancelled),
        };
        t.response.status = status;
        out.response(&mut t.cur, event, &t.response);
        out.end(&mut t.cur.stream);
        for w in std::mem::take(&mut t.waiters) {
            if let Some(wait) = self.waits.get_mut(&w) {
                wait.ready = Some(final_reply(&t.response, wait.sse));
                self.events.push_back(ServerEvent::Wake(Wake::Wait(w)));
            }
        }
        if stop_turn {
            self.events.push_back(ServerEvent::StopTurn {
                response_id: rid.to_owned(),
            });
        }
        // The session: the turn, the conversation, idle again.
        let text = t.response.output_text();
        let sid = t.session_id.clone();
        let status = t.response.status.as_str().to_owned();
        let inputs = t.input_messages.clone();
        let input_text = t.input_text.clone();
        let created_at = t.response.created_at.unwrap_or(0);
        let keep = t.store && !t.deleted;
        if let Some(s) = self.sessions.get_mut(&sid) {
            if s.running.as_deref() == Some(rid) {
                s.running = None;
            }
            s.status = status.clone();
            s.updated_at = now.unix_s();
            s.last_used = now.instant;
            s.turns.push(super::session::Turn {
                response_id: rid.to_owned(),
                status,
                created_at,
                input_text,
                output_text: text.clone(),
            });
            let h = Arc::make_mut(&mut s.history);
            for m in inputs {
                h.push(HistoryEvent::new(rid, EventBody::Input(m)));
            }
            if !text.is_empty() {
                h.push(HistoryEvent::new(
                    rid,
                    EventBody::Output(Message::assistant(text)),
                ));
            }
        }
        if self.cfg.persist {
            if let Some(r) = self.tasks.get(rid).map(Record::task) {
                self.persist(|| r);
            }
        }
        self.persist_session(&sid);
        if keep {
            self.stored_order.push_back(rid.to_owned());
            while self.stored_order.len() > self.cfg.max_stored_responses {
                if let Some(old) = self.stored_order.pop_front() {
                    if !self.running.contains(&old) {
                        self.tasks.remove(&old);
                        self.persist(|| Record::ResponseDeleted { id: old });
                    }
                }
            }
        } else {
            self.tasks.remove(rid);
        }
    }
}

use super::store::Record;

/// The next item's index and id.
fn next_item(t: &mut Task, prefix: &str) -> (usize, String) {
    t.items += 1;
    (
        t.response.output.len(),
        item_id(prefix, &t.response.id, t.items),
    )
}

/// Opens an item that streams into its first part: `output_item.added` with the shell, the
/// part's `added` event, and the item kept open.
fn open_item(
    t: &mut Task,
    out: &mut Out<'_>,
    prefix: &str,
    shell: impl FnOnce(&str) -> (OutputItem, &'static str, &'static str, ContentPart),
) -> usize {
    close_open(t, out, "completed");
    let (index, id) = next_item(t, prefix);
    let (mut item, part_added, sub, part) = shell(&id);
    out.item(&mut t.cur, "response.output_item.added", index, &item);
    out.part(&mut t.cur, part_added, &id, index, Some(sub), "part", &part);
    match &mut item {
        OutputItem::Message(m) => m.content.push(part),
        OutputItem::Reasoning(r) => r.summary.push(part),
        _ => {}
    }
    t.open = match item {
        OutputItem::Reasoning(_) => Open::Reasoning(index),
        _ => Open::Message(index),
    };
    t.response.output.push(item);
    index
}

fn open_reasoning(t: &mut Task, out: &mut Out<'_>) -> usize {
    open_item(t, out, "rs", |id| {
        let item = OutputItem::Reasoning(Reasoning {
            id: Some(id.to_owned()),
            summary: Vec::new(),
            status: Some("in_progress".into()),
            extra: Map::new(),
        });
        let part = ContentPart::SummaryText(SummaryText::default());
        let added = "response.reasoning_summary_part.added";
        (item, added, "summary_index", part)
    })
}

fn open_message(t: &mut Task, out: &mut Out<'_>) -> usize {
    open_item(t, out, "msg", |id| {
        let item = OutputItem::Message(OutputMessage {
            id: Some(id.to_owned()),
            status: Some("in_progress".into()),
            role: Some("assistant".into()),
            content: Vec::new(),
            extra: Map::new(),
        });
        let part = ContentPart::OutputText(OutputText::default());
        (item, "response.content_part.added", "content_index", part)
    })
}

/// Closes the open item: its part's done events, then `output_item.done`.
fn close_open(t: &mut Task, out: &mut Out<'_>, status: &str) {
    let index = match std::mem::replace(&mut t.open, Open::None) {
        Open::None => return,
        Open::Message(i) | Open::Reasoning(i) => i,
    };
    let Some(item) = t.response.output.get_mut(index) else {
        return;
    };
    match item {
        OutputItem::Message(m) => {
            m.status = Some(status.to_owned());
            let id = m.id.as_deref().unwrap_or("");
            if let Some(part @ ContentPart::OutputText(ot)) = m.content.first() {
                let sub = Some("content_index");
                out.part(
                    &mut t.cur,
                    "response.output_text.done",
                    id,
                    index,
                    sub,
                    "text",
                    &ot.text,
                );
                out.part(
                    &mut t.cur,
                    "response.content_part.done",
                    id,
                    index,
                    sub,
                    "part",
                    part,
                );
            }
        }
        OutputItem::Reasoning(r) => {
            r.status = Some(status.to_owned());
            let id = r.id.as_deref().unwrap_or("");
            if let Some(part) = r.summary.first() {
                let ty = "response.reasoning_summary_part.done";
                out.part(
                    &mut t.cur,
                    ty,
                    id,
                    index,
                    Some("summary_index"),
                    "part",
                    part,
                );
            }
        }
        _ => {}
    }
    if let Some(item) = t.response.output.get(index) {
        out.item(&mut t.cur, "response.output_item.done", index, item);
    }
}

/// The head of an event stream (streaming.md §1), with proxy buffering off.
pub(crate) fn sse_head() -> http::Response<()> {
    let mut r = http::Response::new(());
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    h.insert(
        crate::protocol::VERSION_HEADER,
        http::HeaderValue::from_static(crate::protocol::PROTOCOL_VERSION),
    );
    r
}

/// A terminal (or, for a background replay, current) response as a reply: the JSON object,
/// or a whole event stream of it — created, in_progress, each item added and done, the
/// terminal event — for a client that asked to stream.
pub(crate) fn final_reply(r: &Response, sse: bool) -> http::Response<Vec<u8>> {
    if !sse {
        return json_response(200, r);
    }
    let mut streams = std::collections::HashMap::new();
    let id = StreamId(0);
    streams.insert(id, super::stream::Stream::default());
    let mut events = std::collections::VecDeque::new();
    let mut out = Out {
        streams: &mut streams,
        events: &mut events,
        max_buffer: usize::MAX,
    };
    let mut cur = Cursor {
        stream: Some(id),
        seq: 0,
    };
    let mut created = r.clone();
    created.status = ResponseStatus::InProgress;
    created.output.clear();
    created.error = None;
    created.usage = None;
    created.incomplete_details = None;
    for ty in ["response.created", "response.in_progress"] {
        out.response(&mut cur, ty, &created);
    }
    for (i, item) in r.output.iter().enumerate() {
        for ty in ["response.output_item.added", "response.output_item.done"] {
            out.item(&mut cur, ty, i, item);
        }
    }
    let ty = match r.status {
        ResponseStatus::Completed => "response.completed",
        ResponseStatus::Incomplete => "response.incomplete",
        ResponseStatus::InProgress => "response.in_progress",
        _ => "response.failed",
    };
    out.response(&mut cur, ty, r);
    let body = match streams.get_mut(&id) {
        Some(s) => super::stream::take(s).unwrap_or_default(),
        None => Vec::new(),
    };
    let (parts, ()) = sse_head().into_parts();
    let mut resp = bytes_response(200, "text/event-stream", body);
    *resp.headers_mut() = parts.headers;
    resp
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl Record {
    pub(crate) fn task(t: &Task) -> Record {
        Record::Response {
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
    /// A task read back from the store: terminal (one that was running at the crash ends
    /// `failed`: it is never run again).
    pub(crate) fn restored(
        principal: Principal,
        st: super::store::StoredTask,
        now: Instant,
    ) -> Task {
        let mut response = st.response;
        if !response.status.is_terminal() {
            response.status = ResponseStatus::Failed;
            response.error = Some(
                ErrorObject::new("harness_error", "The server restarted while the task ran.")
                    .with_type("harness_error"),
            );
        }
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

    pub(crate) fn idem_entry(&self, now: Instant) -> Option<((Principal, String), Idem)> {
        let k = self.idempotency.as_ref()?;
        Some((
            (self.principal.clone(), k.key.clone()),
            Idem {
                fingerprint: k.fingerprint.clone(),
                response_id: self.response.id.clone(),
                at: now,
            },
        ))
    }
}
