//! What a connection sends next: its queued frames, then the log from its cursor, with gaps.

use std::time::Instant;

use bytes::Bytes;
use harness_core::Cursor;

use super::agui_run::plain_sse;
use super::connection::{ConnState, limit, render};
use super::read::snapshot_of;
use super::{ConnId, HOST_EVENTS, Host, HostEvent, Transport};
use crate::Json;
use crate::agui::{AguiEvent, RunError};
use crate::catalog::{self, HarnessEvent};
use crate::frame::{ErrorCode, HostFrame, SnapshotFrame, close};
use crate::log::{EventLog, LogError, LogRecord};

impl<L: EventLog> Host<L> {
    /// The next bytes to send on a connection: a whole SSE event, WebSocket text frame or
    /// NDJSON line. `None`: nothing now (wait for a [`HostEvent::Wake`]).
    #[must_use = "the bytes are the connection's: dropped, the client never gets them"]
    pub fn poll_transmit(&mut self, now: Instant, id: ConnId) -> Option<Bytes> {
        self.clock(now);
        let next = self.transmit(now, id);
        if let Some(b) = &next {
            self.outflow.add(b.len());
        }
        if next.is_none() && self.conns.get(&id).is_some_and(|c| c.closed_code.is_some()) {
            // It sends nothing more: out of the fan-out.
            self.unwatch(id);
        }
        next
    }

    fn transmit(&mut self, now: Instant, id: ConnId) -> Option<Bytes> {
        let c = self.conns.get_mut(&id)?;
        // The application asks for bytes: the transport takes them.
        c.unpolled_since = None;
        let lim = limit(&self.cfg.stream, c.transport);
        // "Above this bufferedAmount, the server stops sending." (A closing connection
        // still gets its last frames: the error that says why.)
        if c.in_flight >= lim && c.close_after.is_none() {
            c.blocked = true;
            return None;
        }
        if let Some(b) = c.pop_out() {
            c.hand_out(&b, now);
            return Some(b);
        }
        if let Some((code, reason)) = c.close_after.take() {
            c.state = ConnState::Closed;
            c.closed_code = Some(code);
            self.events.push_back(HostEvent::Close {
                conn: id,
                code,
                reason,
            });
            return None;
        }
        let transport = c.transport;
        let next = match &mut c.state {
            ConnState::Thread {
                thread,
                thread_id,
                pos,
                force_gap,
            } => {
                let thread = thread.as_str();
                if let Some(rec) = gap_if_behind(&self.log, thread, thread_id, pos, force_gap) {
                    Some(record_bytes(transport, &rec))
                } else {
                    match self.log.get(thread, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            Some(record_bytes(transport, &rec))
                        }
                        Ok(None) if c.snapshots_wanted > 0 => {
                            // Caught up with the log: the snapshot is at this cursor.
                            c.snapshots_wanted -= 1;
                            let head = self.log.head_seq(thread);
                            let snap = snapshot_of(self.threads.get(thread), head, thread_id);
                            let frame = HostFrame::Snapshot(SnapshotFrame {
                                snapshot: Json::new(&snap).unwrap_or_default(),
                                ..SnapshotFrame::default()
                            });
                            Some(render(transport, &frame))
                        }
                        Ok(None) => None,
                        Err(LogError::Corrupt(_)) => {
                            // A record that no longer reads is an event the log no longer
                            // has, for good: reading it again never succeeds, so closing
                            // would send the reader back to it for ever. "the stream sends
                            // one `CUSTOM` event with the name `harness.gap`, and continues
                            // from the first event that it has": the gap takes its cursor.
                            let from = Cursor::new(pos.to_string());
                            *pos += 1;
                            let rec = gap_record(thread_id, from, *pos, self.log.gap_reason());
                            Some(record_bytes(transport, &rec))
                        }
                        Err(e) => {
                            // "`internal` … The server failed to read the events" — closes.
                            let f = HostFrame::error(
                                ErrorCode::Internal,
                                e.to_string(),
                                c.request_id.clone(),
                            );
                            c.push_out(render(transport, &f));
                            c.close_after = Some((close::FEED_ENDED, "internal".into()));
                            c.woken(Some(now));
                            self.woken.insert(id);
                            None
                        }
                    }
                }
            }
            ConnState::HostEvents {
                key,
                pos,
                force_gap,
            } => {
                // A reader behind what the host still keeps, or with a cursor it never
                // handed out: the same gap as on a thread stream.
                if let Some(rec) = gap_if_behind(&self.host_log, key, HOST_EVENTS, pos, force_gap) {
                    Some(record_bytes(transport, &rec))
                } else {
                    match self.host_log.get(key, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            Some(record_bytes(transport, &rec))
                        }
                        _ => None,
                    }
                }
            }
            ConnState::Run {
                thread,
                operation_id,
                pos,
            } => {
                let first = self.log.first_seq(thread);
                let mut found = None;
                // Plain AG-UI has no gap event: when the log no longer has events of the
                // run that this reader did not get, or fails to read, the run's stream ends
                // with RUN_ERROR rather than wait for events that will never come.
                let mut lost =
                    (*pos + 1 < first).then(|| self.log.gap_reason().as_str().to_owned());
                while lost.is_none() {
                    match self.log.get(thread, *pos + 1) {
                        Ok(Some(rec)) => {
                            *pos = rec.seq;
                            if &*rec.operation_id == operation_id.as_str() {
                                found = Some(rec);
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => lost = Some("internal".to_owned()),
                    }
                }
                if let Some(code) = lost {
                    let ev = AguiEvent::RunError(RunError {
                        message: "The host no longer has the events of this run.".into(),
                        code: Some(code),
                        ..RunError::default()
                    });
                    c.close_after = Some((close::FEED_ENDED, "events lost".into()));
                    c.woken(Some(now));
                    self.woken.insert(id);
                    Some(plain_sse(ev.to_json().as_bytes()))
                } else if let Some(rec) = found {
                    let ev = rec.event_json();
                    // The run ends with its RUN_FINISHED or RUN_ERROR: then the stream does.
                    let terminal = ev.starts_with(b"{\"type\":\"RUN_FINISHED\"")
                        || ev.starts_with(b"{\"type\":\"RUN_ERROR\"");
                    if terminal {
                        c.close_after = Some((1000, "run finished".into()));
                        c.woken(Some(now));
                        self.woken.insert(id);
                    }
                    Some(plain_sse(&ev))
                } else {
                    None
                }
            }
            ConnState::AwaitSubscribe | ConnState::Closed => None,
        };
        if let Some(b) = &next {
            c.hand_out(b, now);
        }
        next
    }
}

/// The gap a reader at `pos` of `stream` (its frames naming the thread `thread_id`) gets
/// when the first record `log` keeps is past its next one, or when it was marked for one
/// (`force_gap`, e.g. a cursor never handed out): "the stream sends one `CUSTOM` event with
/// the name `harness.gap`, and continues from the first event that it has". Moves `pos` to
/// the gap's cursor, just before that event.
fn gap_if_behind<L: EventLog + ?Sized>(
    log: &L,
    stream: &str,
    thread_id: &str,
    pos: &mut u64,
    force_gap: &mut Option<Cursor>,
) -> Option<LogRecord> {
    let first = log.first_seq(stream);
    let from = force_gap
        .take()
        .or_else(|| (*pos + 1 < first).then(|| Cursor::new(pos.to_string())))?;
    let resume = first.saturating_sub(1);
    *pos = resume;
    Some(gap_record(thread_id, from, resume, log.gap_reason()))
}

/// The `harness.gap` record a reader behind the log gets: "`from` is the cursor that you
/// sent. `resumeAt` is the cursor of this event. The stream continues after it."
fn gap_record(thread: &str, from: Cursor, resume: u64, reason: catalog::GapReason) -> LogRecord {
    let gap = HarnessEvent::Gap(catalog::Gap {
        from,
        resume_at: Cursor::new(resume.to_string()),
        reason,
        ..catalog::Gap::default()
    });
    LogRecord::render(thread, resume, "session", &gap.to_event())
}

fn record_bytes(t: Transport, rec: &LogRecord) -> Bytes {
    match t {
        Transport::Sse => rec.sse(),
        Transport::WebSocket => rec.json(),
        Transport::Stdio => rec.ndjson(),
    }
}
