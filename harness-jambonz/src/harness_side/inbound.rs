//! Frames from jambonz: each taken (or refused, the state unchanged) and turned into events.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::{CallEvent, HarnessCall, JambonzFrameError, Outgoing, Phase, Transmit, TurnState};
use crate::event::JambonzEvent;
use crate::frame::JambonzMessage;
use crate::session::{CLOSE_UNSUPPORTED_PROTOCOL, PROTOCOL_VERSION};
use crate::turn::TurnId;

impl HarnessCall {
    /// Takes a binary frame: always an error ("There are no binary frames"); the call goes on.
    pub fn handle_binary(&mut self, _now: Instant) -> Result<(), JambonzFrameError> {
        Err(JambonzFrameError::Binary)
    }

    /// Takes a text frame from jambonz. On an error nothing changed.
    pub fn handle_frame(&mut self, _now: Instant, text: &str) -> Result<(), JambonzFrameError> {
        if self.phase == Phase::Over {
            return Err(JambonzFrameError::Closed);
        }
        if text.len() > self.config.max_frame_bytes {
            return Err(JambonzFrameError::TooLarge {
                len: text.len(),
                limit: self.config.max_frame_bytes,
            });
        }
        let msg = JambonzMessage::decode(text)?;
        self.handle_message(msg)
    }

    /// Takes a decoded message from jambonz. On an error nothing changed.
    pub fn handle_message(&mut self, msg: JambonzMessage) -> Result<(), JambonzFrameError> {
        if self.phase == Phase::Over {
            return Err(JambonzFrameError::Closed);
        }
        if self.phase == Phase::AwaitingStart && !matches!(msg, JambonzMessage::SessionStart(_)) {
            return Err(JambonzFrameError::BeforeSessionStart {
                kind: msg.kind().to_owned(),
            });
        }
        match msg {
            JambonzMessage::SessionStart(s) => {
                if self.phase != Phase::AwaitingStart {
                    return Err(JambonzFrameError::DuplicateSessionStart);
                }
                if s.protocol_version() == Some(PROTOCOL_VERSION) {
                    self.phase = Phase::Active;
                    self.call_sid.clone_from(&s.call_sid);
                    self.events.push_back(CallEvent::SessionStarted(s));
                } else {
                    let said = match &s.protocol {
                        Some(p) => p.to_string(),
                        None => "none".to_owned(),
                    };
                    self.phase = Phase::Over;
                    self.transmits.push_back(Outgoing {
                        turn_id: None,
                        tool_call: None,
                        command: None,
                        frame: Transmit::Close {
                            code: CLOSE_UNSUPPORTED_PROTOCOL,
                            reason: format!(
                                "unsupported protocol {said}: this harness speaks protocol {PROTOCOL_VERSION}"
                            ),
                        },
                    });
                    self.events.push_back(CallEvent::UnsupportedProtocol {
                        protocol: s.protocol,
                    });
                }
            }
            JambonzMessage::TurnStart(t) => {
                let id = t.turn_id.ok_or_else(|| JambonzFrameError::MissingTurnId {
                    kind: "turn:start".into(),
                })?;
                if self.turns.contains_key(&id) {
                    return Err(JambonzFrameError::DuplicateTurn(id));
                }
                self.remember_turn(id, TurnState::Started);
                self.events.push_back(CallEvent::TurnStarted(t));
            }
            JambonzMessage::TurnCancel(c) => {
                let id = c.turn_id.ok_or_else(|| JambonzFrameError::MissingTurnId {
                    kind: "turn:cancel".into(),
                })?;
                if self.turns.get(&id) == Some(&TurnState::Cancelled) {
                    return Err(JambonzFrameError::DuplicateCancel(id));
                }
                self.remember_turn(id, TurnState::Cancelled);
                self.drop_queued_for_turn(id);
                self.events.push_back(CallEvent::TurnCancelled(c));
            }
            JambonzMessage::SpeechStart(s) => self.events.push_back(CallEvent::SpeechStarted(s)),
            JambonzMessage::Transcript(t) => self.events.push_back(CallEvent::Transcript(t)),
            JambonzMessage::ToolResult(r) => {
                let (turn_id, name) = self
                    .tools
                    .remove(&r.call_id)
                    .ok_or_else(|| JambonzFrameError::UnknownCallId(r.call_id.clone()))?;
                self.events.push_back(CallEvent::ToolResult {
                    turn_id,
                    name,
                    result: r,
                });
            }
            JambonzMessage::CommandResult(r) => {
                let name = self
                    .commands
                    .remove(&r.command_id)
                    .ok_or_else(|| JambonzFrameError::UnknownCommandId(r.command_id.clone()))?;
                if name == "hangup" && r.ok {
                    // Hung up: the call is ending (session:end follows); what the app made
                    // since the hangup went out is never sent.
                    self.hung_up = true;
                    self.drop_queued(|_| true);
                }
                self.events
                    .push_back(CallEvent::CommandResult { name, result: r });
            }
            JambonzMessage::Event(e) => self.events.push_back(match e {
                JambonzEvent::UserInterruption(u) => CallEvent::Interrupted(u),
                JambonzEvent::ReplyDropped(d) => CallEvent::ReplyDropped(d),
                JambonzEvent::Error(e) => CallEvent::Error(e),
                other => CallEvent::Event(other),
            }),
            JambonzMessage::SessionEnd(e) => {
                self.phase = Phase::Over;
                // The last message of the call: nothing queued is sent after it.
                self.transmits = VecDeque::new();
                self.replies = HashMap::new();
                self.tools.clear();
                self.commands.clear();
                self.events.push_back(CallEvent::SessionEnded(e));
            }
            JambonzMessage::Unknown(u) => self.events.push_back(CallEvent::Unknown(u)),
        }
        Ok(())
    }

    /// "Send nothing more for the turn": frames made for it that were not taken from
    /// `poll_transmit` yet are never sent; a `tool:call` among them awaits no result.
    fn drop_queued_for_turn(&mut self, id: TurnId) {
        self.drop_queued(|o| o.turn_id == Some(id));
    }

    /// Drops the queued frames `which` selects; a `tool:call` among them awaits no result.
    fn drop_queued(&mut self, which: impl Fn(&Outgoing) -> bool) {
        let (tools, commands) = (&mut self.tools, &mut self.commands);
        self.transmits.retain(|o| {
            if !which(o) {
                return true;
            }
            if let Some(call_id) = &o.tool_call {
                tools.remove(call_id);
            }
            if let Some(command_id) = &o.command {
                commands.remove(command_id);
            }
            false
        });
    }

    fn remember_turn(&mut self, id: TurnId, state: TurnState) {
        if self.turns.insert(id, state).is_none() {
            self.turn_order.push_back(id);
        }
        // The longest remembered go first, whatever their ids (a turn just seen is never
        // the one forgotten), and their open replies with them: were the id started again,
        // nothing opened for the old turn is sent.
        while self.turns.len() > self.config.max_turns.max(1) {
            let Some(old) = self.turn_order.pop_front() else {
                break;
            };
            self.turns.remove(&old);
            self.replies.retain(|_, r| r.turn_id != Some(old));
        }
    }
}
