//! The scripted caller (greeting, speech, transcripts, steps) and the turns it opens and cancels.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::Map;

use super::script::ScriptAction;
use super::{Line, Simulator, TurnSummary, ViolationKind, completion, later, secs};
use crate::event::{JambonzEvent, Silence};
use crate::frame::JambonzMessage;
use crate::harness_side::Transmit;
use crate::session::end_reason;
use crate::turn::{
    SpeechStart, Transcript as TranscriptMsg, TurnCancel, TurnId, TurnInput, TurnStart,
    cancel_reason,
};

/// Where a turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnStatus {
    Open,
    Answered,
    Cancelled,
    Failed,
    Ended,
}

/// A turn jambonz opened (`turn:start`).
#[derive(Debug)]
pub(super) struct SimTurn {
    pub(super) started: Instant,
    pub(super) status: TurnStatus,
    pub(super) first_chunk: Option<Instant>,
    pub(super) summary: usize,
    /// Tool calls of the turn that jambonz is running, and since when one has been.
    pub(super) tools_running: usize,
    pub(super) tools_since: Instant,
    /// Time jambonz spent running the turn's tools: not counted by the first-chunk deadline.
    pub(super) tool_time: Duration,
}

/// What the speaking caller gives next.
#[derive(Debug)]
pub(super) enum CallerEv {
    Partial(String),
    Final,
    TurnStart,
}

/// The caller mid-utterance: the turn their words will open, and what is still due.
#[derive(Debug)]
pub(super) struct Caller {
    turn_id: TurnId,
    text: String,
    pub(super) events: VecDeque<(Instant, CallerEv)>,
}

impl Simulator {
    pub(super) fn run_step(&mut self) {
        let Some(step) = self.script.pop_front() else {
            return;
        };
        self.step_since = self.clock;
        self.barge_anchor = None;
        match step.action {
            ScriptAction::Greeting => self.open_turn(TurnInput::greeting(), "(greeting)".into()),
            ScriptAction::Say { text, partials } => self.caller_starts(text, partials),
            ScriptAction::Silence => {
                let cid = self.sid();
                self.send(JambonzMessage::Event(JambonzEvent::Silence(Silence {
                    call_sid: cid,
                    extra: Map::new(),
                })));
            }
            ScriptAction::HangUp => self.end_call(end_reason::CALLER_HANGUP),
            ScriptAction::Raw(frame) => self.transmits.push_back(Transmit::Text(frame)),
        }
    }

    fn caller_starts(&mut self, text: String, partials: bool) {
        let t = self.clock;
        let turn_id = self.next_turn;
        self.next_turn += 1;
        self.barge_in();
        self.line(Line::Caller {
            turn_id,
            text: text.clone(),
            at_ms: self.at_ms(t),
        });
        let cid = self.sid();
        self.send(JambonzMessage::SpeechStart(SpeechStart {
            call_sid: cid,
            turn_id: Some(turn_id),
            extra: Map::new(),
        }));
        let rate = self.cfg.caller_rate;
        let total = text.chars().count();
        let mut events = VecDeque::new();
        if partials {
            let mut chars = 0usize;
            let words: Vec<&str> = text.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                chars += w.chars().count() + usize::from(i > 0);
                if i + 1 < words.len() {
                    let prefix = words[..=i].join(" ");
                    events.push_back((
                        later(t, secs(chars as f64, rate)),
                        CallerEv::Partial(prefix),
                    ));
                }
            }
        }
        let end = later(t, secs(total as f64, rate));
        events.push_back((end, CallerEv::Final));
        events.push_back((later(end, self.cfg.endpointing), CallerEv::TurnStart));
        self.caller = Some(Caller {
            turn_id,
            text,
            events,
        });
    }

    pub(super) fn caller_event(&mut self) {
        let cid = self.sid();
        let Some(c) = &mut self.caller else { return };
        let Some((_, ev)) = c.events.pop_front() else {
            return;
        };
        let turn_id = c.turn_id;
        match ev {
            CallerEv::Partial(text) => self.send(JambonzMessage::Transcript(TranscriptMsg {
                call_sid: cid,
                turn_id: Some(turn_id),
                text,
                is_final: false,
                extra: Map::new(),
            })),
            CallerEv::Final => {
                let text = c.text.clone();
                self.send(JambonzMessage::Transcript(TranscriptMsg {
                    call_sid: cid,
                    turn_id: Some(turn_id),
                    text,
                    is_final: true,
                    extra: Map::new(),
                }))
            }
            CallerEv::TurnStart => {
                let text = c.text.clone();
                self.caller = None;
                let input = TurnInput::speech(text.clone(), Some(self.cfg.language.clone()));
                self.open_turn_with(turn_id, input, text);
            }
        }
    }

    fn open_turn(&mut self, input: TurnInput, label: String) {
        let turn_id = self.next_turn;
        self.next_turn += 1;
        self.open_turn_with(turn_id, input, label);
    }

    fn open_turn_with(&mut self, turn_id: TurnId, input: TurnInput, label: String) {
        let summary = self.transcript.turns.len();
        self.transcript.turns.push(TurnSummary {
            turn_id,
            input: label,
            first_chunk_ms: None,
            completion_reason: completion::CALL_ENDED.into(),
            harness_error: None,
            turn_record: None,
        });
        self.turns.insert(
            turn_id,
            SimTurn {
                started: self.clock,
                status: TurnStatus::Open,
                first_chunk: None,
                tools_running: 0,
                tools_since: self.clock,
                tool_time: Duration::ZERO,
                summary,
            },
        );
        let cid = self.sid();
        self.send(JambonzMessage::TurnStart(TurnStart {
            call_sid: cid,
            turn_id: Some(turn_id),
            input,
            extra: Map::new(),
        }));
    }

    /// Checks the turn of a reply or tool call: `Ok(())` when it may be used.
    pub(super) fn turn_usable(&self, turn_id: TurnId) -> Result<(), (ViolationKind, bool)> {
        match self.turns.get(&turn_id).map(|t| t.status) {
            None => Err((ViolationKind::ReplyBeforeTurnStart, true)),
            Some(TurnStatus::Open | TurnStatus::Answered) => Ok(()),
            Some(_) => Err((ViolationKind::ClosedTurn, false)),
        }
    }

    pub(super) fn set_completion(&mut self, turn_id: TurnId, reason: &str, error: Option<&str>) {
        if let Some(t) = self.turns.get(&turn_id) {
            if let Some(s) = self.transcript.turns.get_mut(t.summary) {
                s.completion_reason = reason.to_owned();
                s.harness_error = error.map(str::to_owned);
            }
        }
    }

    pub(super) fn cancel_turn(&mut self, turn_id: TurnId) {
        if let Some(t) = self.turns.get_mut(&turn_id) {
            t.status = TurnStatus::Cancelled;
        }
        self.set_completion(turn_id, completion::BARGE_IN, None);
        let cid = self.sid();
        self.send(JambonzMessage::TurnCancel(TurnCancel {
            call_sid: cid,
            turn_id: Some(turn_id),
            reason: Some(cancel_reason::BARGE_IN.into()),
            extra: Map::new(),
        }));
        self.drop_turn_replies(turn_id);
    }
}
