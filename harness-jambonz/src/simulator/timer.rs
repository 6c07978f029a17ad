//! Time: what comes due next, the clock advancing through it, and deadlines expiring.

use std::time::Instant;

use super::caller::TurnStatus;
use super::script::{DEFAULT_PAUSE, ScriptAction, When};
use super::{Phase, SimEvent, Simulator, ViolationKind, completion, harness_error, later, secs};
use crate::session::end_reason;
use crate::turn::TurnId;

/// What comes due.
#[derive(Clone, Copy, Debug)]
pub(super) enum Timer {
    PlaybackEnd,
    Caller,
    Tool(usize),
    FirstChunk(TurnId),
    ReplyDone(TurnId),
    UnpromptedDone,
    Step,
    IdleHangup,
    MaxCall,
}

impl Simulator {
    pub(super) fn next_timer(&self) -> Option<(Instant, Timer)> {
        if self.phase != Phase::Active {
            return None;
        }
        let mut best: Option<(Instant, Timer)> = None;
        let mut consider = |t: Instant, k: Timer| {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, k));
            }
        };
        if let Some(p) = &self.playing {
            if let Some(r) = self.replies.get(&p.reply_id) {
                if r.done {
                    let left = (r.chars as f64 - p.pos).max(0.0);
                    consider(
                        later(p.last, secs(left, self.cfg.speaking_rate)),
                        Timer::PlaybackEnd,
                    );
                }
            }
        }
        if let Some(c) = &self.caller {
            if let Some((t, _)) = c.events.front() {
                consider(*t, Timer::Caller);
            }
        }
        for (i, run) in self.tool_runs.iter().enumerate() {
            let t = match run.deadline {
                Some(d) if d < run.due => d,
                _ => run.due,
            };
            consider(t, Timer::Tool(i));
        }
        for (id, turn) in &self.turns {
            if turn.status != TurnStatus::Open {
                continue;
            }
            if let (None, Some(d), 0) = (
                turn.first_chunk,
                self.cfg.deadlines.first_chunk,
                turn.tools_running,
            ) {
                // Paused while jambonz runs one of the turn's tools.
                consider(
                    later(later(turn.started, turn.tool_time), d),
                    Timer::FirstChunk(*id),
                );
            }
            if let Some(d) = self.cfg.deadlines.reply_done {
                consider(later(turn.started, d), Timer::ReplyDone(*id));
            }
        }
        if let Some(d) = self.cfg.deadlines.reply_done {
            for r in self.replies.values() {
                if r.turn_id.is_none() && !r.done && r.unprompted_live() {
                    consider(later(r.since, d), Timer::UnpromptedDone);
                }
            }
        }
        match self.script.front() {
            Some(step) => {
                let blocked =
                    matches!(step.action, ScriptAction::Say { .. }) && self.caller_speaking();
                if !blocked {
                    let due = match step.when {
                        When::Now => Some(self.step_since),
                        When::Quiet(p) => {
                            self.quiet_since.map(|q| later(q.max(self.step_since), p))
                        }
                        // No reply to speak over: once the call is quiet, the caller
                        // speaks after the usual pause (a silent harness must not hold the
                        // call until max_call).
                        When::DuringReply(a) => {
                            self.barge_anchor.map(|b| later(b, a)).or_else(|| {
                                self.quiet_since
                                    .map(|q| later(q.max(self.step_since), DEFAULT_PAUSE))
                            })
                        }
                    };
                    if let Some(t) = due {
                        consider(t, Timer::Step);
                    }
                }
            }
            None => {
                if let Some(q) = self.quiet_since {
                    consider(
                        later(q.max(self.step_since), self.cfg.idle_hangup),
                        Timer::IdleHangup,
                    );
                }
            }
        }
        consider(later(self.t0, self.cfg.max_call), Timer::MaxCall);
        best
    }

    pub(super) fn advance(&mut self, now: Instant) {
        // Each timer consumes itself when fired; the bound is a guard, not a rule.
        for _ in 0..100_000 {
            let Some((due, timer)) = self.next_timer() else {
                break;
            };
            if due > now {
                break;
            }
            let t = due.max(self.clock);
            self.sync_playback(t);
            self.clock = t;
            self.fire(timer);
            self.after_change();
        }
        if now > self.clock {
            self.sync_playback(now);
            self.clock = now;
        }
    }

    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::PlaybackEnd => self.finish_playback(),
            Timer::Caller => self.caller_event(),
            Timer::Tool(i) => {
                if i < self.tool_runs.len() {
                    let run = self.tool_runs.remove(i);
                    self.tool_answer(run);
                }
            }
            Timer::FirstChunk(id) => self.fail_turn(id, harness_error::FIRST_CHUNK_TIMEOUT, true),
            Timer::ReplyDone(id) => self.fail_turn(id, harness_error::REPLY_DONE_TIMEOUT, true),
            Timer::UnpromptedDone => self.expire_unprompted(),
            Timer::Step => self.run_step(),
            Timer::IdleHangup | Timer::MaxCall => self.end_call(end_reason::CALLER_HANGUP),
        }
    }

    pub(super) fn fail_turn(&mut self, turn_id: TurnId, error: &str, cut: bool) {
        let Some(t) = self.turns.get_mut(&turn_id) else {
            return;
        };
        if !matches!(t.status, TurnStatus::Open | TurnStatus::Answered) {
            return;
        }
        t.status = TurnStatus::Failed;
        self.set_completion(turn_id, completion::HARNESS_FAILURE, Some(error));
        if cut {
            let playing_this = self
                .playing
                .as_ref()
                .and_then(|p| self.replies.get(&p.reply_id))
                .is_some_and(|r| r.turn_id == Some(turn_id));
            if playing_this {
                self.cut_playback();
            }
        }
        self.drop_turn_replies(turn_id);
        self.event(SimEvent::TurnFailed {
            turn_id,
            harness_error: error.to_owned(),
        });
    }

    /// Cuts off the unprompted replies whose reply deadline passed without their
    /// `reply:done`.
    fn expire_unprompted(&mut self) {
        let Some(d) = self.cfg.deadlines.reply_done else {
            return;
        };
        let now = self.clock;
        let mut due: Vec<String> = self
            .replies
            .iter()
            .filter(|(_, r)| {
                r.turn_id.is_none() && !r.done && r.unprompted_live() && later(r.since, d) <= now
            })
            .map(|(k, _)| k.clone())
            .collect();
        due.sort();
        for id in due {
            self.violation(
                ViolationKind::ReplyDoneTimeout,
                format!("unprompted reply {id} without reply:done: cut off"),
            );
            if self.playing.as_ref().is_some_and(|p| p.reply_id == id) {
                self.cut_playback();
                continue;
            }
            self.queue.retain(|q| *q != id);
            if self.held.as_deref() == Some(id.as_str()) {
                self.held = None;
            }
            if self.pending_interrupt.as_deref() == Some(id.as_str()) {
                self.pending_interrupt = None;
            }
            self.kill_reply(&id);
        }
    }
}
