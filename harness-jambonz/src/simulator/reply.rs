//! Reply tracking: each reply's chunks and `reply:done`; replies refused, cut off or dropped.

use std::time::Instant;

use serde_json::Map;

use super::caller::TurnStatus;
use super::{Simulator, ViolationKind, completion, ms};
use crate::event::{ErrorEvent, JambonzEvent, ReplyDropped, drop_reason};
use crate::frame::JambonzMessage;
use crate::reply::{ReplyChunk, ReplyDone};
use crate::turn::TurnId;
use crate::turn_record::TurnRecord;

/// Where a reply stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReplyState {
    /// Refused (before its turn's start): later frames are ignored.
    Refused,
    /// Dropped (replaced while held, its turn closed): later frames are ignored.
    Dead,
    /// Cut off while playing (by the caller, an interrupting reply, a failure): later chunks
    /// are not played, but its `reply:done` still answers its turn if that is open.
    CutOff,
    Queued,
    Held,
    PendingInterrupt,
    Playing,
}

/// A reply of the harness, from its first frame.
#[derive(Debug)]
pub(super) struct SimReply {
    pub(super) turn_id: Option<TurnId>,
    pub(super) text: String,
    pub(super) chars: usize,
    pub(super) done: bool,
    /// Text past `max_reply_bytes` was cut (and reported once).
    truncated: bool,
    pub(super) state: ReplyState,
    pub(super) started: Option<Instant>,
    /// Its first chunk.
    pub(super) since: Instant,
}

impl Simulator {
    pub(super) fn on_chunk(&mut self, c: ReplyChunk) {
        if self.id_too_long("reply_id", &c.reply_id) {
            return;
        }
        if c.chunk.has_tool_calls() {
            self.violation(
                ViolationKind::ToolCallsInChunk,
                format!("delta.tool_calls in reply {} ignored", c.reply_id),
            );
        }
        let content = c.chunk.content().to_owned();
        let interrupt = c.interrupt == Some(true);
        if let Some(r) = self.replies.get_mut(&c.reply_id) {
            match r.state {
                ReplyState::Refused | ReplyState::Dead => return,
                _ => {}
            }
            if r.done {
                self.violation(
                    ViolationKind::DeadReply,
                    format!("chunk after reply:done of {}", c.reply_id),
                );
                return;
            }
            if r.state == ReplyState::CutOff {
                // In flight when it was cut off: not played, not a fault.
                return;
            }
            let cut = append_bounded(r, &content, self.cfg.max_reply_bytes);
            if cut {
                let detail = format!(
                    "reply {} over {} bytes: the rest is not spoken",
                    c.reply_id, self.cfg.max_reply_bytes
                );
                self.violation(ViolationKind::ReplyTooLong, detail);
            }
            if interrupt {
                self.violation(
                    ViolationKind::InterruptNotFirst,
                    format!("interrupt on a later chunk of {}", c.reply_id),
                );
            }
            return;
        }
        if !self.id_room() {
            return;
        }
        if c.reply_id.is_empty() || !self.reply_ids.insert(c.reply_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("reply_id {:?} reused or empty", c.reply_id),
            );
            return;
        }
        if let Some(tid) = c.turn_id {
            match self.turn_usable(tid) {
                Ok(()) => {}
                Err((_, true)) => {
                    self.refuse_early(&c.reply_id, tid);
                    self.insert_reply(&c.reply_id, c.turn_id, ReplyState::Refused, String::new());
                    return;
                }
                Err((kind, false)) => {
                    self.violation(kind, format!("reply {} for closed turn {tid}", c.reply_id));
                    self.insert_reply(&c.reply_id, c.turn_id, ReplyState::Dead, String::new());
                    return;
                }
            }
        }
        self.mark_first_chunk(c.turn_id);
        let id = c.reply_id;
        if interrupt {
            if self.caller_speaking() {
                // "A caller in mid-utterance is still never talked over."
                if let Some(old) = self.pending_interrupt.take() {
                    self.queue.push_front(old);
                }
                self.insert_reply(&id, c.turn_id, ReplyState::PendingInterrupt, content);
                self.pending_interrupt = Some(id);
            } else {
                self.cut_playback();
                self.insert_reply(&id, c.turn_id, ReplyState::Queued, content);
                self.start_playing(id);
            }
            return;
        }
        if c.turn_id.is_some() {
            self.insert_reply(&id, c.turn_id, ReplyState::Queued, content);
            self.queue.push_back(id);
        } else if self.floor_free() {
            self.insert_reply(&id, None, ReplyState::Queued, content);
            self.start_playing(id);
        } else {
            if let Some(old) = self.held.take() {
                self.kill_reply(&old);
                let cid = self.sid();
                self.send(JambonzMessage::Event(JambonzEvent::ReplyDropped(
                    ReplyDropped {
                        call_sid: cid,
                        reply_id: Some(old),
                        reason: Some(drop_reason::REPLACED.into()),
                        extra: Map::new(),
                    },
                )));
            }
            self.insert_reply(&id, None, ReplyState::Held, content);
            self.held = Some(id);
        }
    }

    fn insert_reply(&mut self, id: &str, turn_id: Option<TurnId>, state: ReplyState, text: String) {
        let mut r = SimReply {
            turn_id,
            text: String::new(),
            chars: 0,
            done: false,
            truncated: false,
            state,
            started: None,
            since: self.clock,
        };
        let cut = append_bounded(&mut r, &text, self.cfg.max_reply_bytes);
        self.replies.insert(id.to_owned(), r);
        if cut {
            let detail = format!(
                "reply {id} over {} bytes: the rest is not spoken",
                self.cfg.max_reply_bytes
            );
            self.violation(ViolationKind::ReplyTooLong, detail);
        }
    }

    fn mark_first_chunk(&mut self, turn_id: Option<TurnId>) {
        let Some(tid) = turn_id else { return };
        let now = self.clock;
        if let Some(t) = self.turns.get_mut(&tid) {
            if t.first_chunk.is_none() {
                t.first_chunk = Some(now);
                let latency = ms(now.saturating_duration_since(t.started));
                if let Some(s) = self.transcript.turns.get_mut(t.summary) {
                    s.first_chunk_ms = Some(latency);
                }
            }
        }
    }

    fn refuse_early(&mut self, reply_id: &str, turn_id: TurnId) {
        let message = format!("reply {reply_id} for turn {turn_id} before its turn:start");
        self.violation(ViolationKind::ReplyBeforeTurnStart, message.clone());
        let cid = self.sid();
        self.send(JambonzMessage::Event(JambonzEvent::Error(ErrorEvent {
            call_sid: cid,
            reply_id: Some(reply_id.to_owned()),
            turn_id: Some(turn_id),
            message: Some(message),
            extra: Map::new(),
        })));
    }

    pub(super) fn on_done(&mut self, d: ReplyDone) {
        if self.id_too_long("reply_id", &d.reply_id) {
            return;
        }
        if let Some(r) = &d.turn_record {
            if let Err(e) = r.check_size() {
                self.violation(ViolationKind::TurnRecordTooLarge, e.to_string());
            }
        }
        if let Some(r) = self.replies.get_mut(&d.reply_id) {
            match r.state {
                ReplyState::Refused | ReplyState::Dead => return,
                _ => {}
            }
            if r.done {
                self.violation(
                    ViolationKind::DeadReply,
                    format!("second reply:done for {}", d.reply_id),
                );
                return;
            }
            r.done = true;
            let turn_id = r.turn_id;
            self.answered(turn_id, d.turn_record);
            return;
        }
        // A reply:done without chunks: an empty reply.
        if !self.id_room() {
            return;
        }
        if d.reply_id.is_empty() || !self.reply_ids.insert(d.reply_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("reply_id {:?} reused or empty", d.reply_id),
            );
            return;
        }
        if let Some(tid) = d.turn_id {
            match self.turn_usable(tid) {
                Ok(()) => {}
                Err((_, true)) => {
                    self.refuse_early(&d.reply_id, tid);
                    return;
                }
                Err((kind, false)) => {
                    self.violation(
                        kind,
                        format!("reply:done {} for closed turn {tid}", d.reply_id),
                    );
                    return;
                }
            }
        }
        self.answered(d.turn_id, d.turn_record);
    }

    fn answered(&mut self, turn_id: Option<TurnId>, record: Option<TurnRecord>) {
        let Some(tid) = turn_id else { return };
        let Some(t) = self.turns.get_mut(&tid) else {
            return;
        };
        if !matches!(t.status, TurnStatus::Open | TurnStatus::Answered) {
            // Cancelled, failed or ended: a reply:done in flight changes nothing.
            return;
        }
        if t.status == TurnStatus::Open {
            t.status = TurnStatus::Answered;
            let summary = t.summary;
            if let Some(s) = self.transcript.turns.get_mut(summary) {
                s.completion_reason = completion::COMPLETED.into();
            }
        }
        if let Some(s) = self.transcript.turns.get_mut(t.summary) {
            if let Some(r) = record {
                s.turn_record = Some(Box::new(r));
            }
        }
    }

    pub(super) fn kill_reply(&mut self, id: &str) {
        if let Some(r) = self.replies.get_mut(id) {
            r.state = ReplyState::Dead;
            r.text = String::new();
        }
    }

    pub(super) fn drop_turn_replies(&mut self, turn_id: TurnId) {
        let ids: Vec<String> = self
            .replies
            .iter()
            .filter(|(_, r)| r.turn_id == Some(turn_id) && r.state != ReplyState::Playing)
            .map(|(k, _)| k.clone())
            .collect();
        for id in ids {
            self.queue.retain(|q| *q != id);
            if self.pending_interrupt.as_deref() == Some(id.as_str()) {
                self.pending_interrupt = None;
            }
            self.kill_reply(&id);
        }
    }
}

impl SimReply {
    /// Whether it may still be spoken (queued, held, waiting to interrupt or playing).
    pub(super) fn unprompted_live(&self) -> bool {
        matches!(
            self.state,
            ReplyState::Queued
                | ReplyState::Held
                | ReplyState::PendingInterrupt
                | ReplyState::Playing
        )
    }
}

/// Appends `text` to a reply, keeping at most `max` bytes of text (cut at a character
/// boundary). Returns whether text was cut for the first time.
fn append_bounded(r: &mut SimReply, text: &str, max: usize) -> bool {
    let room = max.saturating_sub(r.text.len());
    let mut take = text.len().min(room);
    while !text.is_char_boundary(take) {
        take -= 1;
    }
    let kept = &text[..take];
    r.text.push_str(kept);
    r.chars += kept.chars().count();
    let first_cut = take < text.len() && !r.truncated;
    if take < text.len() {
        r.truncated = true;
    }
    first_cut
}
