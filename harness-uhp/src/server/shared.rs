//! Several hosts on one store ([`UhpServerConfig::shared`](super::UhpServerConfig::shared)):
//! the machine's side. It still does no I/O; the driver does what it asks.
//!
//! - **A new task is stored before it is answered, its idempotency key claimed with it.** A
//!   new task (with an `Idempotency-Key` the machine does not know, or none) is made as usual
//!   but not started: [`ServerEvent::Claim`] asks the driver to store the key, the task's
//!   record and its new session's in one transaction ([`Store::claim`](super::Store::claim)),
//!   so that every host can read the task as soon as its creator answers. [`UhpServer::claim_resolved`] then starts the
//!   turn (the key is the task's), or forgets the task and answers as for a repeated key
//!   (tasks.md §6: the first request's task, waited for if it still runs; another body is
//!   `422`) when another host's task holds the key.
//! - **Other hosts' objects are read from the store.** Before a request that names a task or
//!   a session, [`UhpServer::remote_reads`] lists what the driver should fetch: what the
//!   machine does not hold, a task still running elsewhere, a session not running here. Each
//!   fetched record is given to [`UhpServer::refresh`] (or [`UhpServer::refresh_gone`]); so are
//!   the objects other hosts write, as the store reports them ([`Store::watch`](super::Store::watch)).
//!   What runs on this host is never replaced from the store: this host is its only writer.
//! - **A task running elsewhere** is `in_progress` here until its final record arrives: then
//!   the requests waiting for it (a repeated key, a cancel) get their answer. Cancelling it
//!   ([`ServerEvent::CancelRemote`]) asks its host; the request is answered with the
//!   cancelled task when that host has written it, or after [`REMOTE_CANCEL_WAIT`] with the
//!   task as stored then (sessions.md §4: "SHOULD respond to cancel within one second").

use std::time::Duration;

use super::auth::Principal;
use super::error::ApiError;
use super::session::Session;
use super::store::{Claimed, StoreError, StoreRecord};
use super::task::{Task, answer_waiters};
use super::{Now, Reply, Request, ServerEvent, UhpServer, UhpTurnRequest, error_response};
use crate::protocol::IDEMPOTENCY_KEY_HEADER;
use crate::server::route::{self, Route};

/// How long a cancel of a task running on another host waits for that host's answer.
pub const REMOTE_CANCEL_WAIT: Duration = Duration::from_millis(900);

/// A new task waiting for its key's claim.
#[derive(Debug)]
pub(crate) struct PendingClaim {
    pub(crate) turn: Box<UhpTurnRequest>,
    pub(crate) new_session: bool,
    pub(crate) stream: bool,
    pub(crate) background: bool,
}

impl UhpServer {
    /// The objects (`kind`, `id`) to read from a shared store before answering `req`: what
    /// it names that this host does not hold, a task that runs elsewhere, a session not
    /// running here. Nothing for an unauthenticated request (`authenticated`: the
    /// application's verdict, `None` to check the bearer token here), nor without
    /// [`UhpServerConfig::shared`](super::UhpServerConfig::shared).
    pub fn remote_reads(
        &self,
        req: &Request<'_>,
        authenticated: Option<bool>,
    ) -> Vec<(&'static str, String)> {
        if !self.cfg.shared {
            return Vec::new();
        }
        let ok = authenticated.unwrap_or_else(|| {
            self.keys
                .authenticate(req.headers.get("authorization").map(|v| v.as_bytes()))
                .is_ok()
        });
        let Some(route) = route::route(req.method, req.target).ok().filter(|_| ok) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match route {
            Route::GetResponse(id)
            | Route::DeleteResponse(id)
            | Route::InputItems(id)
            | Route::CancelResponse(id) => self.task_read(&id, &mut out),
            Route::CreateResponse => {
                let prev = serde_json::from_slice::<serde_json::Value>(req.body)
                    .ok()
                    .and_then(|v| v.get("previous_response_id")?.as_str().map(str::to_owned));
                if let Some(id) = prev {
                    self.task_read(&id, &mut out);
                }
            }
            Route::GetSession(id)
            | Route::SessionTurns(id)
            | Route::CancelSession(id)
            | Route::DeleteSession(id)
            | Route::Share(id)
            | Route::GetShare(id)
            | Route::RevokeShare(id)
            | Route::SessionFiles(id)
            | Route::SessionArchive(id) => self.session_read(&id, &mut out),
            Route::GetHarness(id) | Route::UpdateHarness(id) | Route::DeleteHarness(id) => {
                out.push(("harness", id));
            }
            Route::GetFile(id) => out.push(("upload", id)),
            _ => {}
        }
        out
    }

    /// A task to read (unless it runs here or is terminal here: a terminal task never
    /// changes), and its session.
    fn task_read(&self, id: &str, out: &mut Vec<(&'static str, String)>) {
        match self.tasks.get(id) {
            Some(t) if self.running.contains(id) || t.response.status.is_terminal() => {}
            _ => out.push(("response", id.to_owned())),
        }
        if let Some(t) = self.tasks.get(id) {
            self.session_read(&t.session_id, out);
        }
    }

    fn session_read(&self, id: &str, out: &mut Vec<(&'static str, String)>) {
        let busy_here = self
            .sessions
            .get(id)
            .and_then(|s| s.running.as_deref())
            .is_some_and(|r| self.running.contains(r));
        if !busy_here {
            out.push(("session", id.to_owned()));
        }
    }

    /// A record another host wrote (fetched, or reported by the store's watch): it replaces
    /// this host's copy, unless this host runs the object (a task running here, a session
    /// whose task runs here, a task waiting for its claim). A task it ends answers the
    /// requests waiting for it.
    pub fn refresh(&mut self, now: Now, record: StoreRecord) {
        match record {
            StoreRecord::Response { principal, task } => {
                let id = task.response.id.clone();
                if self.running.contains(&id) || self.claims.contains_key(&id) {
                    return;
                }
                let mut t = Task::restored(principal, *task, now.instant, self.cfg.shared);
                if let Some(old) = self.tasks.get_mut(&id) {
                    t.waiters = std::mem::take(&mut old.waiters);
                }
                if let Some((k, e)) = t.idem_entry(now.instant) {
                    if self.idem.insert(k.clone(), e).is_none() {
                        self.idem_order.push_back(k);
                    }
                }
                let ended = t.response.status.is_terminal();
                let keep = t.store;
                let new = self.tasks.insert(id.clone(), t).is_none();
                if ended {
                    if let Some(t) = self.tasks.get_mut(&id) {
                        answer_waiters(t, &mut self.waits, &mut self.events);
                    }
                }
                // Kept like this host's own responses: the oldest is forgotten first.
                if keep && new {
                    self.stored_order.push_back(id);
                    while self.stored_order.len() > self.cfg.max_stored_responses {
                        match self.stored_order.pop_front() {
                            Some(old) if !self.running.contains(&old) => {
                                self.tasks.remove(&old);
                            }
                            _ => {}
                        }
                    }
                }
            }
            StoreRecord::Session { principal, session } => {
                let id = session.id.clone();
                let old = self.sessions.get(&id);
                if old
                    .and_then(|s| s.running.as_deref())
                    .is_some_and(|r| self.running.contains(r) || self.claims.contains_key(r))
                {
                    return;
                }
                let seq = match old {
                    Some(s) => s.seq,
                    None => self.new_handle(),
                };
                if let Some(old) = self.sessions.remove(&id) {
                    if let Some(sh) = &old.share {
                        self.shares.remove(&sh.token);
                    }
                    self.containers.remove(&old.container_id);
                }
                let s = Session::from_stored(principal, *session, now.instant, seq);
                if let Some(sh) = &s.share {
                    self.shares.insert(sh.token.clone(), id.clone());
                }
                self.containers.insert(s.container_id.clone(), id.clone());
                self.expired.remove(&id);
                self.sessions.insert(id, s);
            }
            StoreRecord::Harness { principal, harness } => {
                self.registry.restore(principal, *harness);
            }
            StoreRecord::Upload { principal, file } => {
                let id = file.id.clone();
                if self
                    .uploads
                    .insert(id.clone(), (principal, *file))
                    .is_none()
                {
                    self.upload_order.push_back(id);
                }
            }
            deletion => {
                let (kind, id) = deletion.key();
                let (kind, id) = (kind.to_owned(), id.to_owned());
                self.refresh_gone(now, &kind, &id);
            }
        }
    }

    /// An object another host deleted (the store holds no record of it): forgotten here. A
    /// task running here is only marked deleted (deleting never cancels, tasks.md §7); a
    /// session is forgotten as expired (its responses go with their own deletions), its task
    /// running here cancelled first.
    pub fn refresh_gone(&mut self, now: Now, kind: &str, id: &str) {
        match kind {
            "response" => {
                if self.running.contains(id) || self.claims.contains_key(id) {
                    if let Some(t) = self.tasks.get_mut(id) {
                        t.deleted = true;
                    }
                } else {
                    self.tasks.remove(id);
                }
            }
            "session" => {
                let here = self
                    .sessions
                    .get(id)
                    .and_then(|s| s.running.clone())
                    .filter(|r| self.running.contains(r));
                if let Some(rid) = here {
                    // Deleted while its task runs here: the task is cancelled first
                    // (sessions.md §6), then the session is deleted again, after the
                    // task's last records.
                    self.finish_task(now, &rid, super::task::Outcome::Cancelled, true);
                    self.remove_session(id, false);
                } else if self.sessions.contains_key(id) {
                    let persist = std::mem::replace(&mut self.cfg.persist, false);
                    self.remove_session(id, true);
                    self.cfg.persist = persist;
                }
            }
            "harness" => self.registry.forget(id),
            "upload" => {
                self.uploads.remove(id);
            }
            _ => {}
        }
    }

    /// The tasks running on other hosts that requests here wait for (at most `max`): the
    /// driver reads them again now and then, in case their end was not reported (or their
    /// host is gone).
    pub fn remote_waited(&self, max: usize) -> Vec<String> {
        if !self.cfg.shared {
            return Vec::new();
        }
        self.tasks
            .iter()
            .filter(|(id, t)| {
                !t.waiters.is_empty()
                    && !t.response.status.is_terminal()
                    && !self.running.contains(*id)
                    && !self.claims.contains_key(*id)
            })
            .map(|(id, _)| id.clone())
            .take(max)
            .collect()
    }

    /// The task of session `sid` running on another host, if this host knows of one.
    pub(crate) fn remote_running_in(&self, sid: &str) -> Option<String> {
        if !self.cfg.shared {
            return None;
        }
        self.tasks
            .iter()
            .find(|(id, t)| {
                t.session_id == sid
                    && !t.response.status.is_terminal()
                    && !self.running.contains(*id)
                    && !self.claims.contains_key(*id)
            })
            .map(|(id, _)| id.clone())
    }

    /// Another host asks whoever runs `response_id` to cancel it: cancelled if it runs here.
    pub fn cancel_here(&mut self, now: Now, response_id: &str) {
        if self.running.contains(response_id) && !self.claims.contains_key(response_id) {
            self.finish_task(now, response_id, super::task::Outcome::Cancelled, true);
        }
    }

    /// The store answered [`ServerEvent::Claim`] for `response_id`. `None`: the request's
    /// reply stands (the key is the new task's, whose turn starts now). `Some(reply)`: the
    /// request gets this reply instead, and the driver drops the one it had (the new task is
    /// forgotten): the holder's task, replayed, or waited for; `422` for another body; `503`
    /// if the store failed.
    pub fn claim_resolved(
        &mut self,
        now: Now,
        response_id: &str,
        result: Result<Claimed, StoreError>,
    ) -> Option<Reply> {
        let pending = self.claims.remove(response_id)?;
        match result {
            Ok(Claimed::Won) => {
                self.events.push_back(ServerEvent::StartTurn(pending.turn));
                None
            }
            Ok(Claimed::SessionBusy) => {
                self.discard_unclaimed(response_id, &pending);
                let e = ApiError::new(
                    "session_busy",
                    "A task is already running in this session; retry once it has ended.",
                );
                Some(Reply::Full(error_response(&e)))
            }
            Err(e) => {
                tracing::warn!(error = %e, "uhp: an idempotency key could not be claimed");
                self.discard_unclaimed(response_id, &pending);
                let mut err = ApiError::new(
                    "harness_unavailable",
                    "The server could not record the request; retry later.",
                );
                err.retry_after = Some(1);
                Some(Reply::Full(error_response(&err)))
            }
            Ok(Claimed::Held {
                response_id: holder,
                fingerprint,
                task,
            }) => {
                let (p, key) = match self.tasks.get(response_id) {
                    Some(t) => (t.principal.clone(), t.idempotency.clone()),
                    None => {
                        let e = ApiError::response_not_found(response_id);
                        return Some(Reply::Full(error_response(&e)));
                    }
                };
                self.discard_unclaimed(response_id, &pending);
                if let Some(r) = task {
                    self.refresh(now, r);
                }
                let reply = if key.is_some_and(|k| k.fingerprint != fingerprint) {
                    Err(reused_key())
                } else {
                    self.replay(&p, &holder, pending.stream, pending.background)
                };
                Some(reply.unwrap_or_else(|e| Reply::Full(error_response(&e))))
            }
        }
    }

    /// Forgets a task whose key another task holds: it never ran and nothing of it was
    /// stored (nor its new session).
    fn discard_unclaimed(&mut self, rid: &str, pending: &PendingClaim) {
        self.running.remove(rid);
        let Some(t) = self.tasks.remove(rid) else {
            return;
        };
        self.release_slot(&t.principal);
        let sid = &pending.turn.session_id;
        if pending.new_session {
            if let Some(s) = self.sessions.remove(sid) {
                self.containers.remove(&s.container_id);
            }
        } else if let Some(s) = self.sessions.get_mut(sid) {
            if s.running.as_deref() == Some(rid) {
                s.running = None;
            }
        }
        if let Some(k) = &t.idempotency {
            let entry = (t.principal.clone(), k.key.clone());
            if self.idem.get(&entry).is_some_and(|e| e.response_id == rid) {
                self.idem.remove(&entry);
            }
        }
    }

    /// One fewer task running for `p`.
    pub(crate) fn release_slot(&mut self, p: &Principal) {
        if let Some(n) = self.running_per.get_mut(p) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running_per.remove(p);
            }
        }
    }
}

pub(crate) fn reused_key() -> ApiError {
    ApiError::with_status(
        422,
        "harnessrs_idempotency_key_reused",
        "This Idempotency-Key was used for a different request.",
    )
    .param(IDEMPOTENCY_KEY_HEADER)
}
