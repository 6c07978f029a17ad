//! What comes from the host: SSE bytes and frames, each made into events for the application.

use std::time::Instant;

use harness_core::Cursor;

use super::{Action, Client, ClientEvent, DeliveredEvent, InputAnswer, Resync};
use crate::agui::AguiEvent;
use crate::catalog::{Gap, HarnessEvent};
use crate::frame::{ErrorCode, FrameError, HostFrame};

impl Client {
    /// SSE bytes of `GET events`.
    pub fn handle_sse_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.last_bytes = Some(now);
        // In place, each event borrowed from `bytes` (the decoder is lent out while the
        // frames are handled: handling one never touches it).
        let mut sse = std::mem::take(&mut self.sse);
        sse.feed_frames(bytes, |frame| match frame {
            Ok(f) => self.handle_host_frame(now, f),
            Err(crate::transport::TransportError::Frame(e)) => {
                self.events.push_back(ClientEvent::BadFrame(e))
            }
            Err(e) => self.events.push_back(ClientEvent::BadFrame(FrameError {
                message: e.to_string(),
                request_id: None,
            })),
        });
        self.sse = sse;
    }

    /// One frame (a WebSocket text frame, an NDJSON line).
    pub fn handle_frame(&mut self, now: Instant, text: &str) {
        self.last_bytes = Some(now);
        match HostFrame::from_json(text) {
            Ok(f) => self.handle_host_frame(now, f),
            Err(e) => self.events.push_back(ClientEvent::BadFrame(e)),
        }
    }

    fn handle_host_frame(&mut self, _now: Instant, f: HostFrame) {
        match f {
            HostFrame::Hello(h) => {
                // "The `harness.hello` frame gives the version that the server uses." …
                // "The server speaks one version. Use a client of that version." A hello of
                // another version, or of another thread, starts a stream we cannot read.
                let problem = match (&h.v, &h.thread_id) {
                    (Some(v), _) if *v != self.cfg.version => Some((
                        Some(ErrorCode::UnsupportedVersion),
                        format!(
                            "The host speaks protocol version {v}. This client speaks version {}.",
                            self.cfg.version
                        ),
                    )),
                    (_, Some(t)) if *t != self.cfg.thread_id => Some((
                        None,
                        format!(
                            "The host opened thread {t:?}, not {:?}.",
                            self.cfg.thread_id
                        ),
                    )),
                    _ => None,
                };
                match problem {
                    None => self.events.push_back(ClientEvent::Hello { v: h.v }),
                    Some((code, message)) => {
                        self.connected = false;
                        self.ended = Some(Action::Stop);
                        self.events.push_back(ClientEvent::Error {
                            code,
                            message,
                            request_id: None,
                            action: Action::Stop,
                        });
                    }
                }
            }
            HostFrame::Event(ev) if ev.thread_id != self.cfg.thread_id => {
                // "On the stream of a thread, it is that thread." Not ours: neither its
                // event nor its cursor.
                self.events.push_back(ClientEvent::BadFrame(FrameError {
                    message: format!(
                        "an event of thread {:?} (cursor {:?}) on the stream of {:?}",
                        ev.thread_id,
                        ev.cursor.as_str(),
                        self.cfg.thread_id
                    ),
                    request_id: None,
                }));
            }
            HostFrame::Event(ev) => {
                if self.seen.contains(&ev.cursor) {
                    return; // replayed: delivered once already
                }
                self.remember(ev.cursor.clone());
                self.last_cursor = Some(ev.cursor.clone());
                if let Some(Ok(HarnessEvent::Gap(Gap {
                    from,
                    resume_at,
                    reason,
                    ..
                }))) = HarnessEvent::from_event(&ev.event)
                {
                    // Step 1 is partly ours: what we built from events (the cursors seen)
                    // goes. The events after a gap are new, even when a host that lost its
                    // memory hands out cursors we saw before it.
                    self.seen.clear();
                    self.seen_order.clear();
                    self.remember(ev.cursor.clone());
                    // Step 3 is ours: store resumeAt. Step 2 on a socket: ask for the snapshot.
                    self.last_cursor = Some(resume_at.clone());
                    if self.socket {
                        self.request_snapshot();
                    }
                    self.events.push_back(ClientEvent::Gap(Resync {
                        from,
                        resume_at,
                        reason,
                    }));
                    return;
                }
                match &ev.event {
                    AguiEvent::RunStarted(r) => {
                        self.runs
                            .started(&r.run_id, r.parent_run_id.clone(), self.cfg.max_runs);
                    }
                    AguiEvent::RunFinished(r) => self.runs.ended(&r.run_id),
                    // RUN_ERROR names no run: it is the run that made it ("`operationId` is
                    // the run that made the event. It is also the AG-UI `runId`.").
                    AguiEvent::RunError(_) => self.runs.ended(&ev.operation_id),
                    _ => {}
                }
                // An ended run stays in the tree (until newer runs push it out), so its
                // RUN_FINISHED still has its parent.
                let parent = self.runs.parents.get(&ev.operation_id).cloned().flatten();
                self.events.push_back(ClientEvent::Event(DeliveredEvent {
                    cursor: ev.cursor,
                    operation_id: ev.operation_id,
                    parent_run_id: parent,
                    event: ev.event,
                }));
            }
            HostFrame::Receipt(r) => {
                // "The answer to one `harness.input`": a receipt of a request we did not
                // send, or already answered, answers nothing.
                let Some(p) = self.pending.remove(&r.request_id) else {
                    self.events.push_back(ClientEvent::BadFrame(FrameError {
                        message: format!(
                            "a receipt for {:?}, which no input waits for",
                            r.request_id
                        ),
                        request_id: Some(r.request_id),
                    }));
                    return;
                };
                self.events.push_back(ClientEvent::Receipt(InputAnswer {
                    // "The `inputId` of its receipt is the id that you sent."
                    input_id: p.input_id,
                    request_id: r.request_id,
                    status: r.status,
                    operation_id: r.operation_id,
                    reason: r.reason,
                }));
            }
            HostFrame::Snapshot(s) => self.events.push_back(ClientEvent::Snapshot(s.snapshot)),
            HostFrame::Error(e) => {
                // `unauthorized`, `unsupported_version` and `slow_consumer` always end the
                // stream ("Does the stream close? Yes"), whatever their `requestId`: the id
                // the server gives a frame without one (the subscribe) can be the id of one
                // of our inputs (the spec's example of `unsupported_version` has "req-1").
                // Such an input was not answered: it stays pending, to send again.
                let closing = matches!(
                    e.code,
                    Some(
                        ErrorCode::Unauthorized
                            | ErrorCode::UnsupportedVersion
                            | ErrorCode::SlowConsumer
                    )
                );
                let for_input = !closing
                    && e.request_id
                        .as_ref()
                        .is_some_and(|r| self.pending.contains_key(r));
                if for_input {
                    if let Some(r) = &e.request_id {
                        self.pending.remove(r);
                    }
                }
                let action = match (&e.code, for_input) {
                    (_, true) => Action::Continue,
                    (Some(ErrorCode::Unauthorized), _) => Action::SignIn,
                    (Some(ErrorCode::Forbidden) | Some(ErrorCode::UnsupportedVersion), _) => {
                        Action::Stop
                    }
                    (Some(ErrorCode::SlowConsumer) | Some(ErrorCode::Internal), _) => {
                        Action::Resubscribe {
                            from: self.last_cursor.clone(),
                        }
                    }
                    _ => Action::Continue,
                };
                if action != Action::Continue {
                    self.connected = false;
                    self.ended = Some(action.clone());
                }
                self.events.push_back(ClientEvent::Error {
                    code: e.code,
                    message: e.message,
                    request_id: e.request_id,
                    action,
                });
            }
            HostFrame::Ping(_) | HostFrame::Unknown(_) => {}
        }
    }

    fn remember(&mut self, c: Cursor) {
        self.seen.insert(c.clone());
        self.seen_order.push_back(c);
        while self.seen_order.len() > self.cfg.dedup_window {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }
}
