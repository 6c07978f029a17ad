//! The turn's lifecycle: its steps and usage against the budgets, its end, cancel and delete
//! (lifecycle.md §3, tasks.md §5 and §7, sessions.md §4).

use std::sync::Arc;

use harness_core::event::{Event, EventBody};
use harness_core::message::Message;
use serde_json::json;

use super::events::{annotate, close_open};
use super::response::{answer_waiters, conclude};
use super::{Outcome, Task};
use crate::response::ResponseUsage;
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::session::Turn;
use crate::server::store::StoreRecord;
use crate::server::stream::Out;
use crate::server::{Now, Reply, ServerEvent, TurnEnd, TurnGone, UhpServer, json_response};

impl UhpServer {
    /// `POST /v1/responses/{id}/cancel`.
    pub(crate) fn cancel_response(
        &mut self,
        now: Now,
        p: &Principal,
        id: &str,
    ) -> Result<Reply, ApiError> {
        let t = self.task(p, id)?;
        let remote = self.cfg.shared
            && !t.response.status.is_terminal()
            && !self.running.contains(id)
            && !self.claims.contains_key(id);
        if remote {
            // Another host runs it: ask that host, and answer when it has ended the task (or
            // with the task as stored, after REMOTE_CANCEL_WAIT).
            self.events.push_back(ServerEvent::CancelRemote {
                response_id: id.to_owned(),
            });
            let w = self.new_wait(p, id, false);
            if let Some(wait) = self.waits.get_mut(&w) {
                wait.deadline = now.instant.checked_add(crate::server::REMOTE_CANCEL_WAIT);
            }
            if let Some(t) = self.tasks.get_mut(id) {
                t.waiters.push(w);
            }
            return Ok(Reply::Wait(w));
        }
        self.finish_task(now, id, Outcome::Cancelled, true);
        Ok(Reply::Full(json_response(200, &self.task(p, id)?.response)))
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
        self.persist(|| StoreRecord::ResponseDeleted { id: id.to_owned() });
        Ok(json_response(
            200,
            &json!({"id": id, "object": "response", "deleted": true}),
        ))
    }

    fn running_task(&mut self, rid: &str) -> Result<&mut Task, TurnGone> {
        if !self.running.contains(rid) {
            return Err(TurnGone);
        }
        self.tasks.get_mut(rid).ok_or(TurnGone)
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

    /// Token usage of a model call, added to the task's.
    pub fn turn_usage(
        &mut self,
        rid: &str,
        usage: &harness_core::message::Usage,
    ) -> Result<(), TurnGone> {
        let t = self.running_task(rid)?;
        let u = t.response.usage.get_or_insert_with(ResponseUsage::default);
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

    /// Ends a running task: closes its items, cites its artifacts, sets its status, writes
    /// the terminal event, answers its waiters, records the turn in its session. Nothing
    /// for a task already terminal (cancelling one changes nothing, sessions.md §4).
    pub(crate) fn finish_task(&mut self, now: Now, rid: &str, outcome: Outcome, stop_turn: bool) {
        if !self.running.remove(rid) {
            return;
        }
        if let Some(p) = self.tasks.get(rid).map(|t| t.principal.clone()) {
            self.release_slot(&p);
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
        annotate(t, &mut out);
        close_open(t, &mut out, item_status);
        let event = conclude(&mut t.response, &outcome);
        out.response(&mut t.cur, event, &t.response);
        out.end(&mut t.cur.stream);
        answer_waiters(t, &mut self.waits, &mut self.events);
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
        let t_deleted = t.deleted;
        if let Some(s) = self.sessions.get_mut(&sid) {
            if s.running.as_deref() == Some(rid) {
                s.running = None;
            }
            s.status = status.clone();
            s.updated_at = now.unix_s();
            s.last_used = now.instant;
            s.turns.push(Turn {
                response_id: rid.to_owned(),
                status,
                created_at,
                input_text,
                output_text: text.clone(),
            });
            let h = Arc::make_mut(&mut s.history);
            for m in inputs {
                h.push(Event::new(rid, EventBody::Input(m)));
            }
            if !text.is_empty() {
                h.push(Event::new(rid, EventBody::Output(Message::assistant(text))));
            }
        }
        // Its final record (which also frees its session in a shared store); a deleted
        // response stays deleted in the store too.
        if self.cfg.persist {
            if let Some(r) = self.tasks.get(rid).map(StoreRecord::task) {
                self.persist(|| r);
            }
            if t_deleted {
                self.persist(|| StoreRecord::ResponseDeleted { id: rid.to_owned() });
            }
        }
        self.persist_session(&sid);
        if keep {
            self.stored_order.push_back(rid.to_owned());
            while self.stored_order.len() > self.cfg.max_stored_responses {
                if let Some(old) = self.stored_order.pop_front() {
                    if !self.running.contains(&old) {
                        self.tasks.remove(&old);
                        self.persist(|| StoreRecord::ResponseDeleted { id: old });
                    }
                }
            }
        } else {
            self.tasks.remove(rid);
        }
    }
}
