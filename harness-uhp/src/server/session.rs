//! Sessions (sessions.md, lifecycle.md §4–5).
//!
//! A session is made by the first task of a chain and keeps, across the tasks that continue
//! it: the conversation (the agent's `Start.history`), the container of files, and the
//! configured harness. One task runs in it at a time (`409 session_busy`). It is listed
//! (`next_cursor: null` on the last page), read, its turns read, its running task cancelled
//! (the session stays continuable), shared read-only (revocable; the view holds no
//! credential and nothing of another principal), and deleted: the running task is cancelled
//! first, then the session, its responses and its artifacts become unreachable.
//!
//! Past [`UhpServerConfig::max_sessions_per_principal`](super::UhpServerConfig) the least recently
//! used idle session expires: continuing it is `404 session_expired`, distinguishable from
//! `session_not_found`.

use std::sync::Arc;
use std::time::Instant;

use harness_core::event::Event;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Principal;
use super::error::ApiError;
use super::file::StoredFile;
use super::route::query_param;
use super::store::StoreRecord;
use super::task::Outcome;
use super::{Now, UhpServer, json_response};

/// One task of a session, as `/turns` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The task.
    pub response_id: String,
    /// Its final status.
    pub status: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The user's text.
    pub input_text: String,
    /// The assistant's text.
    pub output_text: String,
}

/// A published read-only view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// The unguessable token of `GET /v1/shared/{token}`.
    pub token: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// A session.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) principal: Principal,
    pub(crate) harness_id: String,
    pub(crate) container_id: String,
    pub(crate) title: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) status: String,
    pub(crate) turns: Vec<Turn>,
    pub(crate) history: Arc<Vec<Event>>,
    pub(crate) running: Option<String>,
    pub(crate) files: Vec<StoredFile>,
    pub(crate) share: Option<Share>,
    pub(crate) last_used: Instant,
    pub(crate) seq: u64,
}

/// A session as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSession {
    /// `hsess…`.
    pub id: String,
    /// The configured harness.
    pub harness_id: String,
    /// `cntr_…`.
    pub container_id: String,
    /// The first input, shortened.
    pub title: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
    /// The last task's status.
    pub status: String,
    /// The tasks.
    pub turns: Vec<Turn>,
    /// The conversation.
    pub history: Vec<Event>,
    /// The artifacts.
    pub files: Vec<StoredFile>,
    /// The share, if published.
    pub share: Option<Share>,
}

impl Session {
    pub(crate) fn object(&self) -> Value {
        json!({
            "id": self.id,
            "object": "session",
            "harness_id": self.harness_id,
            "title": self.title,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "container_id": self.container_id,
            "running_response_id": self.running,
            "turn_count": self.turns.len(),
        })
    }

    pub(crate) fn turns_object(&self) -> Value {
        json!({ "object": "list", "session_id": self.id, "turns": self.turns })
    }

    pub(crate) fn files_object(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| f.object(Some(&self.container_id)))
            .collect();
        json!({ "object": "list", "session_id": self.id, "files": files })
    }

    pub(crate) fn share_object(&self) -> Value {
        match &self.share {
            Some(s) => json!({
                "object": "session.share", "session_id": self.id, "active": true,
                "token": s.token, "url": format!("/v1/shared/{}", s.token),
                "created_at": s.created_at,
            }),
            None => json!({ "object": "session.share", "session_id": self.id, "active": false }),
        }
    }

    pub(crate) fn stored(&self) -> StoredSession {
        StoredSession {
            id: self.id.clone(),
            harness_id: self.harness_id.clone(),
            container_id: self.container_id.clone(),
            title: self.title.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            status: self.status.clone(),
            turns: self.turns.clone(),
            history: self.history.as_ref().clone(),
            files: self.files.clone(),
            share: self.share.clone(),
        }
    }

    pub(crate) fn from_stored(
        principal: Principal,
        s: StoredSession,
        now: Instant,
        seq: u64,
    ) -> Self {
        Session {
            id: s.id,
            principal,
            harness_id: s.harness_id,
            container_id: s.container_id,
            title: s.title,
            created_at: s.created_at,
            updated_at: s.updated_at,
            status: s.status,
            turns: s.turns,
            history: Arc::new(s.history),
            running: None,
            files: s.files,
            share: s.share,
            last_used: now,
            seq,
        }
    }
}

impl UhpServer {
    pub(crate) fn session(&self, p: &Principal, id: &str) -> Result<&Session, ApiError> {
        self.sessions
            .get(id)
            .filter(|s| &s.principal == p)
            .ok_or_else(|| ApiError::session_not_found(id))
    }

    /// A new session for `p`; the least recently used idle one expires past the bound.
    pub(crate) fn new_session(
        &mut self,
        now: Now,
        p: &Principal,
        harness_id: &str,
        text: &str,
    ) -> String {
        let mine = self.sessions.values().filter(|s| &s.principal == p).count();
        if mine >= self.cfg.max_sessions_per_principal {
            let victim = self
                .sessions
                .values()
                .filter(|s| &s.principal == p && s.running.is_none())
                .min_by_key(|s| (s.last_used, s.seq))
                .map(|s| s.id.clone());
            if let Some(v) = victim {
                self.remove_session(&v, true);
            }
        }
        let id = self.new_id("hsess");
        let container_id = self.new_id("cntr_");
        let seq = self.new_handle();
        let title: String = text.trim().chars().take(80).collect();
        self.containers.insert(container_id.clone(), id.clone());
        self.sessions.insert(
            id.clone(),
            Session {
                id: id.clone(),
                principal: p.clone(),
                harness_id: harness_id.to_owned(),
                container_id,
                title,
                created_at: now.unix_s(),
                updated_at: now.unix_s(),
                status: "in_progress".into(),
                turns: Vec::new(),
                history: Arc::new(Vec::new()),
                running: None,
                files: Vec::new(),
                share: None,
                last_used: now.instant,
                seq,
            },
        );
        id
    }

    /// Drops a session, its container, its share and its responses; `expired` remembers it
    /// (bounded) so a continuation says `session_expired`.
    pub(crate) fn remove_session(&mut self, id: &str, expired: bool) {
        let Some(s) = self.sessions.remove(id) else {
            return;
        };
        self.containers.remove(&s.container_id);
        if let Some(sh) = &s.share {
            self.shares.remove(&sh.token);
        }
        // A deleted session takes its responses with it (sessions.md §6); an expired one
        // leaves them readable, so continuing one says `session_expired`.
        if !expired {
            for t in &s.turns {
                self.tasks.remove(&t.response_id);
                self.persist(|| StoreRecord::ResponseDeleted {
                    id: t.response_id.clone(),
                });
            }
        }
        if expired {
            self.expired.insert(id.to_owned());
            self.expired_order.push_back(id.to_owned());
            while self.expired_order.len() > self.cfg.max_sessions_per_principal.max(1024) {
                if let Some(old) = self.expired_order.pop_front() {
                    self.expired.remove(&old);
                }
            }
        }
        self.persist(|| StoreRecord::SessionDeleted {
            id: id.to_owned(),
            expired,
        });
    }

    pub(crate) fn persist_session(&mut self, id: &str) {
        if !self.cfg.persist {
            return;
        }
        if let Some(s) = self.sessions.get(id) {
            let r = StoreRecord::Session {
                principal: s.principal.clone(),
                session: Box::new(s.stored()),
            };
            self.persist(|| r);
        }
    }

    /// `GET /v1/sessions?limit=&cursor=&harness=`.
    pub(crate) fn list_sessions(
        &self,
        p: &Principal,
        target: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        let limit = match query_param(target, "limit") {
            None => 20,
            Some(l) if l.is_empty() => 20,
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| ApiError::invalid_input("`limit` is 1 to 100.").param("limit"))?,
        };
        let harness = query_param(target, "harness").filter(|h| !h.is_empty());
        let mut mine: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| &s.principal == p)
            .filter(|s| harness.as_ref().is_none_or(|h| &s.harness_id == h))
            .collect();
        // Newest first; the cursor is the last session of the previous page.
        mine.sort_by_key(|s| std::cmp::Reverse(s.seq));
        let start = match query_param(target, "cursor").filter(|c| !c.is_empty()) {
            None => 0,
            Some(c) => {
                let seq: u64 = c
                    .strip_prefix("s")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| ApiError::invalid_input("Unknown cursor.").param("cursor"))?;
                mine.iter().position(|s| s.seq < seq).unwrap_or(mine.len())
            }
        };
        let page: Vec<&Session> = mine.iter().skip(start).take(limit).copied().collect();
        let more = start + page.len() < mine.len();
        let next = match (more, page.last()) {
            (true, Some(last)) => Value::from(format!("s{}", last.seq)),
            _ => Value::Null,
        };
        let sessions: Vec<Value> = page.iter().map(|s| s.object()).collect();
        Ok(json_response(
            200,
            &json!({ "object": "list", "sessions": sessions, "next_cursor": next }),
        ))
    }

    /// `POST /v1/sessions/{id}/cancel`: stops whatever runs there; succeeds when nothing does.
    pub(crate) fn cancel_session(
        &mut self,
        now: Now,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        let mut running = self.session(p, id)?.running.clone();
        if let Some(rid) = &running {
            self.finish_task(now, rid, Outcome::Cancelled, true);
        } else if let Some(rid) = self.remote_running_in(id) {
            // Running on another host: that host is asked to stop it.
            self.events.push_back(super::ServerEvent::CancelRemote {
                response_id: rid.clone(),
            });
            running = Some(rid);
        }
        let mut v = self.session(p, id)?.object();
        v["cancelled"] = json!(running.into_iter().collect::<Vec<_>>());
        Ok(json_response(200, &v))
    }

    /// `DELETE /v1/traces/{id}` (and `/v1/sessions/{id}`): cancels the running task first
    /// (its stream ends with its terminal event, a waiting request gets its answer), then
    /// the session, its responses and its artifacts become unreachable.
    pub(crate) fn delete_session(
        &mut self,
        now: Now,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        // A task running on another host is cancelled there when that host reads the
        // deletion (then it deletes the session again, after the task's last records).
        if let Some(rid) = self.session(p, id)?.running.clone() {
            self.finish_task(now, &rid, Outcome::Cancelled, true);
        }
        self.remove_session(id, false);
        Ok(json_response(
            200,
            &json!({"id": id, "object": "session", "deleted": true}),
        ))
    }

    /// `POST /v1/sessions/{id}/share`: publishes (or returns) the read-only view.
    pub(crate) fn share(
        &mut self,
        now: Now,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        self.session(p, id)?;
        let token = format!(
            "shr_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let Some(s) = self.sessions.get_mut(id) else {
            return Err(ApiError::session_not_found(id));
        };
        if s.share.is_none() {
            s.share = Some(super::session::Share {
                token: token.clone(),
                created_at: now.unix_s(),
            });
            self.shares.insert(token, id.to_owned());
        }
        let v = s.share_object();
        self.persist_session(id);
        Ok(json_response(200, &v))
    }

    /// `DELETE /v1/sessions/{id}/share`: revokes the view.
    pub(crate) fn revoke_share(
        &mut self,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        self.session(p, id)?;
        let Some(s) = self.sessions.get_mut(id) else {
            return Err(ApiError::session_not_found(id));
        };
        if let Some(sh) = s.share.take() {
            self.shares.remove(&sh.token);
        }
        let v = s.share_object();
        self.persist_session(id);
        Ok(json_response(200, &v))
    }

    /// `GET /v1/shared/{token}`: the session's turns and file names, read-only; nothing
    /// about its owner, no way to continue, cancel or upload.
    pub(crate) fn shared_view(&self, token: &str) -> Result<http::Response<Vec<u8>>, ApiError> {
        let s = self
            .shares
            .get(token)
            .and_then(|sid| self.sessions.get(sid))
            .ok_or_else(|| ApiError::session_not_found(token))?;
        let files: Vec<Value> = s
            .files
            .iter()
            .map(|f| json!({"filename": f.filename, "bytes": f.bytes.len()}))
            .collect();
        Ok(json_response(
            200,
            &json!({
                "object": "session.shared", "read_only": true,
                "session": {"id": s.id, "title": s.title, "status": s.status,
                    "created_at": s.created_at, "updated_at": s.updated_at},
                "turns": s.turns, "files": files,
            }),
        ))
    }
}
