//! The response object: its terminal status, and the object given back whole — as JSON or a
//! replayed event stream — to the requests waiting for it (tasks.md §3–4, streaming.md §4, §6).

use std::collections::{HashMap, VecDeque};

use serde_json::json;

use super::{Outcome, Task};
use crate::error::ErrorObject;
use crate::response::{Response, ResponseStatus};
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::stream::{self, Cursor, Out};
use crate::server::{
    ServerEvent, StreamId, UhpServer, WaitId, Wake, bytes_response, error_response, json_response,
};

/// A request waiting for a task's end.
#[derive(Debug)]
pub(crate) struct Wait {
    principal: Principal,
    response_id: String,
    sse: bool,
    ready: Option<http::Response<Vec<u8>>>,
    /// Answered with the task as it is then, ended or not (a cancel of a task running on
    /// another host).
    pub(crate) deadline: Option<std::time::Instant>,
}

impl UhpServer {
    /// A request waiting for the end of task `rid` (answered as an event stream if `sse`).
    pub(super) fn new_wait(&mut self, p: &Principal, rid: &str, sse: bool) -> WaitId {
        let w = WaitId(self.new_handle());
        self.waits.insert(
            w,
            Wait {
                principal: p.clone(),
                response_id: rid.to_owned(),
                sse,
                ready: None,
                deadline: None,
            },
        );
        w
    }

    /// The waits whose deadline passed: answered with their task as it is now.
    pub(crate) fn expire_waits(&mut self, now: std::time::Instant) {
        for (id, w) in self.waits.iter_mut() {
            if w.ready.is_none() && w.deadline.is_some_and(|d| d <= now) {
                w.deadline = None;
                let r = match self.tasks.get(&w.response_id) {
                    Some(t) if t.principal == w.principal && !t.deleted => {
                        final_reply(&t.response, w.sse)
                    }
                    _ => error_response(&ApiError::response_not_found(&w.response_id)),
                };
                w.ready = Some(r);
                self.events.push_back(ServerEvent::Wake(Wake::Wait(*id)));
            }
        }
    }

    /// The earliest deadline of a wait.
    pub(crate) fn next_wait_deadline(&self) -> Option<std::time::Instant> {
        self.waits.values().filter_map(|w| w.deadline).min()
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
            return Some(error_response(&ApiError::response_not_found(&rid)));
        }
        None
    }

    /// The client of a waiting request went away; the task goes on.
    pub fn drop_wait(&mut self, id: WaitId) {
        self.waits.remove(&id);
    }
}

/// Sets the response's terminal status (with its `error` or `incomplete_details`); the
/// terminal event's type.
pub(super) fn conclude(response: &mut Response, outcome: &Outcome) -> &'static str {
    let (event, status) = match outcome {
        Outcome::Completed => ("response.completed", ResponseStatus::Completed),
        Outcome::Failed { code, message } => {
            response.error = Some(ErrorObject::new(*code, *message).with_type("harness_error"));
            ("response.failed", ResponseStatus::Failed)
        }
        Outcome::Incomplete(reason) => {
            response.incomplete_details = Some(json!({ "reason": reason }));
            ("response.incomplete", ResponseStatus::Incomplete)
        }
        Outcome::Cancelled => ("response.failed", ResponseStatus::Cancelled),
    };
    response.status = status;
    event
}

/// Answers the requests waiting for an ended task, each woken.
pub(crate) fn answer_waiters(
    t: &mut Task,
    waits: &mut HashMap<WaitId, Wait>,
    events: &mut VecDeque<ServerEvent>,
) {
    for w in std::mem::take(&mut t.waiters) {
        if let Some(wait) = waits.get_mut(&w) {
            wait.ready = Some(final_reply(&t.response, wait.sse));
            events.push_back(ServerEvent::Wake(Wake::Wait(w)));
        }
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
    streams.insert(id, stream::Stream::default());
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
        Some(s) => stream::take(s).unwrap_or_default(),
        None => Vec::new(),
    };
    let (parts, ()) = sse_head().into_parts();
    let mut resp = bytes_response(200, "text/event-stream", body);
    *resp.headers_mut() = parts.headers;
    resp
}
