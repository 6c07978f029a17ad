//! The floor: one reply spoken at a time (playing, queued, held, interrupting) and barge-in.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Map;

use super::caller::TurnStatus;
use super::reply::ReplyState;
use super::script::When;
use super::{Line, Phase, Simulator, ms};
use crate::event::{JambonzEvent, UserInterruption};
use crate::frame::JambonzMessage;
use crate::turn::TurnId;

/// The reply playing: how many of its characters were spoken, as of `last`.
#[derive(Debug)]
pub(super) struct Playback {
    pub(super) reply_id: String,
    pub(super) pos: f64,
    pub(super) last: Instant,
}

fn is_ws(c: char) -> bool {
    c.is_whitespace()
}

/// Splits `text` after `chars` characters were spoken, at the end of the last whole word:
/// `("We're open eight to six", 16)` → `("We're open eight", " to six")`.
pub fn split_spoken(text: &str, chars: usize) -> (&str, &str) {
    let mut b = text
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(i, _)| i);
    if b < text.len() {
        let at = text[b..].chars().next().unwrap_or(' ');
        if !is_ws(at) {
            while let Some(c) = text[..b].chars().next_back() {
                if is_ws(c) {
                    break;
                }
                b -= c.len_utf8();
            }
        }
        while let Some(c) = text[..b].chars().next_back() {
            if !is_ws(c) {
                break;
            }
            b -= c.len_utf8();
        }
    }
    text.split_at(b)
}

impl Simulator {
    pub(super) fn caller_speaking(&self) -> bool {
        self.caller.is_some()
    }

    fn any_open_turn(&self) -> bool {
        self.turns.values().any(|t| t.status == TurnStatus::Open)
    }

    /// "The floor is free (nothing playing, no turn open, the caller not speaking)".
    pub(super) fn floor_free(&self) -> bool {
        self.playing.is_none()
            && self.queue.is_empty()
            && self.pending_interrupt.is_none()
            && !self.caller_speaking()
            && !self.any_open_turn()
    }

    fn quiet(&self) -> bool {
        self.phase == Phase::Active
            && self.floor_free()
            && self.held.is_none()
            && self.tool_runs.is_empty()
    }

    pub(super) fn sync_playback(&mut self, t: Instant) {
        let rate = self.cfg.speaking_rate;
        if let Some(p) = &mut self.playing {
            let avail = self.replies.get(&p.reply_id).map_or(0, |r| r.chars) as f64;
            if t > p.last {
                let step = t.duration_since(p.last).as_secs_f64() * rate;
                p.pos = (p.pos + step).min(avail);
                p.last = t;
            }
        }
    }

    /// After any change: start what can play, and note when the call went quiet.
    pub(super) fn after_change(&mut self) {
        if self.phase != Phase::Active {
            return;
        }
        if self.playing.is_none() && !self.caller_speaking() {
            let next = if let Some(id) = self.pending_interrupt.take() {
                Some(id)
            } else if let Some(id) = self.queue.pop_front() {
                Some(id)
            } else if !self.any_open_turn() {
                self.held.take()
            } else {
                None
            };
            if let Some(id) = next {
                self.start_playing(id);
            }
        }
        if self.quiet() {
            if self.quiet_since.is_none() {
                self.quiet_since = Some(self.clock);
            }
        } else {
            self.quiet_since = None;
        }
        if let (Some(step), Some(p)) = (self.script.front(), &self.playing) {
            if matches!(step.when, When::DuringReply(_)) && self.barge_anchor.is_none() {
                let started = self
                    .replies
                    .get(&p.reply_id)
                    .and_then(|r| r.started)
                    .unwrap_or(self.clock);
                self.barge_anchor = Some(started.max(self.step_since));
            }
        }
    }

    pub(super) fn start_playing(&mut self, id: String) {
        let t = self.clock;
        if let Some(r) = self.replies.get_mut(&id) {
            r.state = ReplyState::Playing;
            r.started = Some(t);
            self.playing = Some(Playback {
                reply_id: id,
                pos: 0.0,
                last: t,
            });
        }
    }

    pub(super) fn finish_playback(&mut self) {
        let Some(p) = self.playing.take() else { return };
        let Some(r) = self.replies.remove(&p.reply_id) else {
            return;
        };
        if self.replies.is_empty() {
            self.replies = HashMap::new();
        }
        let at_ms = self.at_ms(r.started.unwrap_or(self.clock));
        self.line(Line::Agent {
            reply_id: p.reply_id,
            turn_id: r.turn_id,
            heard: r.text,
            unheard: String::new(),
            cut_off: false,
            at_ms,
        });
    }

    /// Cuts off what plays; returns (reply_id, turn_id, spoken, unspoken).
    pub(super) fn cut_playback(&mut self) -> Option<(String, Option<TurnId>, String, String)> {
        self.sync_playback(self.clock);
        let p = self.playing.take()?;
        let t0 = self.t0;
        let clock = self.clock;
        let r = self.replies.get_mut(&p.reply_id)?;
        // ok: pos is within 0..=chars by construction; the cast floors it.
        let (spoken, unspoken) = split_spoken(&r.text, p.pos as usize);
        let (spoken, unspoken) = (spoken.to_owned(), unspoken.to_owned());
        r.state = ReplyState::CutOff;
        r.text = String::new();
        let turn_id = r.turn_id;
        let at_ms = ms(r.started.unwrap_or(clock).saturating_duration_since(t0));
        self.line(Line::Agent {
            reply_id: p.reply_id.clone(),
            turn_id,
            heard: spoken.clone(),
            unheard: unspoken.clone(),
            cut_off: true,
            at_ms,
        });
        Some((p.reply_id, turn_id, spoken, unspoken))
    }

    /// The caller starts speaking: what plays is cut off (`user_interruption`, and
    /// `turn:cancel` reason `barge_in` for its turn), every other open turn is superseded,
    /// and queued replies are dropped unheard.
    pub(super) fn barge_in(&mut self) {
        // Barge-in: the caller speaks over what plays.
        if let Some((reply_id, reply_turn, spoken, unspoken)) = self.cut_playback() {
            let cid = self.sid();
            self.send(JambonzMessage::Event(JambonzEvent::UserInterruption(
                UserInterruption {
                    call_sid: cid,
                    turn_id: reply_turn,
                    reply_id: Some(reply_id),
                    spoken,
                    unspoken,
                    extra: Map::new(),
                },
            )));
            if let Some(rt) = reply_turn {
                // The turn ends with its reply cut off, whether or not its reply:done came.
                if matches!(
                    self.turns.get(&rt).map(|x| x.status),
                    Some(TurnStatus::Open | TurnStatus::Answered)
                ) {
                    self.cancel_turn(rt);
                }
            }
        }
        // Any other open turn is superseded by the new speech.
        let open: Vec<TurnId> = self
            .turns
            .iter()
            .filter(|(_, x)| x.status == TurnStatus::Open)
            .map(|(id, _)| *id)
            .collect();
        for id in open {
            self.cancel_turn(id);
        }
        // Queued replies are not played over the new speech. A turn whose reply is dropped
        // unheard ends like the one that was playing (even if its reply:done came): the
        // harness must learn that the caller never heard it.
        let mut unheard = Vec::new();
        for id in std::mem::take(&mut self.queue) {
            if let Some(tid) = self.replies.get(&id).and_then(|r| r.turn_id) {
                unheard.push(tid);
            }
            self.kill_reply(&id);
        }
        for tid in unheard {
            if self.turns.get(&tid).map(|x| x.status) == Some(TurnStatus::Answered) {
                self.cancel_turn(tid);
            }
        }
    }
}
