//! `POST /v1/responses`: the request's fields checked; the harness, the model and the session
//! picked; the task made and its turn asked of the driver (tasks.md §1, sessions.md §1).

use std::sync::Arc;

use harness_core::message::Message;
use harness_core::{IdentityContext, Start};
use serde_json::{Map, Value};

use super::Task;
use super::events::Open;
use super::idempotency::request_key;
use super::response::sse_head;
use crate::response::{Response, ResponseStatus};
use crate::server::auth::Principal;
use crate::server::error::{ApiError, shown};
use crate::server::harness::HarnessObject;
use crate::server::shared::PendingClaim;
use crate::server::store::{KeyClaim, StoreRecord};
use crate::server::stream::{Cursor, Out, field};
use crate::server::{Now, Reply, Request, ServerEvent, UhpServer, UhpTurnRequest, json_response};

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

impl UhpServer {
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

    /// The session `previous_response_id` continues, with its harness; or, for a new session,
    /// the harness `metadata.harness_id` names or the default (tasks.md §1.2, sessions.md §1).
    fn select(
        &self,
        p: &Principal,
        c: &Create,
    ) -> Result<(Option<String>, HarnessObject), ApiError> {
        match &c.previous {
            Some(prev) => {
                let t = self
                    .task(p, prev)
                    .map_err(|e| e.param("previous_response_id"))?;
                let sid = t.session_id.clone();
                // Its task still runs (here, or on another host sharing the store).
                if !t.response.status.is_terminal() {
                    return Err(ApiError::new(
                        "session_busy",
                        "A task is already running in this session; retry once it has ended.",
                    ));
                }
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
                Ok((Some(sid), h))
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
                Ok((None, h.clone()))
            }
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
        let idempotency = request_key(req)?;
        let c = self.parse_create(p, &body)?;
        if let Some(k) = &idempotency {
            if let Some(reply) = self.repeated_key(now, p, k, c.stream, c.background)? {
                return Ok(reply);
            }
        }

        // The harness and the session.
        let (session_id, harness) = self.select(p, &c)?;
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
                    shown(&model)
                ),
            )
            .param("model"));
        }
        // One caller cannot take every slot (security.md:90): past its own share it is told
        // to slow down (errors.md:84, `429 rate_limited` with `Retry-After`), before the
        // host-wide cap answers anyone `503`.
        let cap = self.cfg.max_running_tasks_per_principal;
        if self.running_tasks_of(p) >= cap {
            let mut e = ApiError::new(
                "rate_limited",
                "Too many tasks running for this credential; retry once one has ended.",
            )
            .detail(serde_json::json!({ "max_running_tasks": cap }));
            e.retry_after = Some(1);
            return Err(e);
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
        let new_session = session_id.is_none();
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
                shown(&name)
            );
            out.event(&mut task.cur.stream, &mut task.cur.seq, "error", |b| {
                field(b, "code", &"harnessrs_mcp_unavailable");
                field(b, "message", &message);
                field(b, "param", &Value::Null);
                b.push(b'}');
            });
        }
        if let Some(k) = &idempotency {
            self.remember_key(now, p, k, &rid);
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
        let turn = UhpTurnRequest {
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
                let w = self.new_wait(p, &rid, false);
                task.waiters.push(w);
                Reply::Wait(w)
            }
        };
        let record = StoreRecord::task(&task);
        self.tasks.insert(rid.clone(), task);
        self.running.insert(rid.clone());
        *self.running_per.entry(p.clone()).or_insert(0) += 1;
        if self.cfg.shared && self.cfg.persist {
            // Several hosts: the task is stored (its key claimed with it) before anyone is
            // answered, and its turn starts once the key is the task's (`claim_resolved`).
            let turn_session = turn.session_id.clone();
            let mut also = Vec::new();
            if new_session {
                if let Some(s) = self.sessions.get(&turn.session_id) {
                    also.push(StoreRecord::Session {
                        principal: p.clone(),
                        session: Box::new(s.stored()),
                    });
                }
            }
            self.claims.insert(
                rid.clone(),
                PendingClaim {
                    turn: Box::new(turn),
                    new_session,
                    stream: c.stream,
                    background: c.background,
                },
            );
            self.events.push_back(ServerEvent::Claim(Box::new(KeyClaim {
                principal: p.clone(),
                key: idempotency,
                response_id: rid,
                session_id: turn_session,
                record,
                also,
                ttl: self.cfg.idempotency_ttl,
            })));
        } else {
            self.persist(|| record);
            self.events
                .push_back(ServerEvent::StartTurn(Box::new(turn)));
        }
        Ok(reply)
    }
}
