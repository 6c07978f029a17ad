//! The app's actions (replies, tool calls, commands), checked against the spec before sending.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{ActionError, HarnessCall, OpenReply, Outgoing, Transmit, TurnState};
use crate::command::JambonzCommand;
use crate::frame::HarnessMessage;
use crate::reply::{Chunk, ReplyChunk, ReplyDone, encode_text_chunk};
use crate::tool::ToolCallMessage;
use crate::turn::TurnId;
use crate::turn_record::TurnRecord;

impl HarnessCall {
    fn check_turn(&self, turn_id: Option<TurnId>) -> Result<(), ActionError> {
        if !self.is_active() {
            return Err(ActionError::NotActive);
        }
        match turn_id.map(|t| (t, self.turns.get(&t))) {
            None => Ok(()),
            Some((_, Some(TurnState::Started))) => Ok(()),
            Some((t, Some(TurnState::Cancelled))) => Err(ActionError::TurnCancelled(t)),
            Some((t, None)) => Err(ActionError::TurnNotStarted(t)),
        }
    }

    /// Starts a reply: for a turn (`Some(turn_id)`, after its `turn:start`), or on the
    /// harness's own initiative (`None`). Nothing is sent until its first chunk.
    pub fn start_reply(&mut self, turn_id: Option<TurnId>) -> Result<String, ActionError> {
        self.open_reply(turn_id, false)
    }

    /// Starts a reply whose first chunk carries `interrupt: true`: whatever is playing is cut
    /// off and this reply is spoken now (never over a caller mid-utterance).
    pub fn start_interrupting_reply(
        &mut self,
        turn_id: Option<TurnId>,
    ) -> Result<String, ActionError> {
        self.open_reply(turn_id, true)
    }

    fn open_reply(
        &mut self,
        turn_id: Option<TurnId>,
        interrupt: bool,
    ) -> Result<String, ActionError> {
        self.check_turn(turn_id)?;
        self.next_reply += 1;
        let id = format!("r{}", self.next_reply);
        self.replies.insert(
            id.clone(),
            OpenReply {
                turn_id,
                chunks: 0,
                interrupt,
            },
        );
        Ok(id)
    }

    fn reply_turn(&self, reply_id: &str) -> Result<Option<TurnId>, ActionError> {
        match self.replies.get(reply_id) {
            Some(r) => {
                self.check_turn(r.turn_id)?;
                Ok(r.turn_id)
            }
            None => {
                if !self.is_active() {
                    return Err(ActionError::NotActive);
                }
                Err(ActionError::UnknownReply(reply_id.to_owned()))
            }
        }
    }

    /// Sends text on a reply as one `reply:chunk`.
    pub fn push_chunk(&mut self, reply_id: &str, text: &str) -> Result<(), ActionError> {
        let (turn_id, interrupt) = self.count_chunk(reply_id, false)?;
        // The hot path: the frame written directly, the same bytes as the chunk's encoding.
        let frame = encode_text_chunk(reply_id, turn_id, text, interrupt.is_some());
        self.push_frame(turn_id, frame);
        Ok(())
    }

    /// Sends a chunk of any shape (an OpenAI `chat.completion.chunk` as the model sent it).
    /// `interrupt` is refused on any chunk but the first.
    pub fn push_raw_chunk(
        &mut self,
        reply_id: &str,
        chunk: Chunk,
        interrupt: bool,
    ) -> Result<(), ActionError> {
        let (turn_id, interrupt) = self.count_chunk(reply_id, interrupt)?;
        let msg = HarnessMessage::ReplyChunk(ReplyChunk {
            reply_id: reply_id.to_owned(),
            turn_id,
            chunk,
            interrupt,
            extra: Map::new(),
        });
        self.push_transmit(turn_id, &msg);
        Ok(())
    }

    /// Counts a chunk of an open reply: its turn, and its `interrupt` (on a first chunk only).
    fn count_chunk(
        &mut self,
        reply_id: &str,
        interrupt: bool,
    ) -> Result<(Option<TurnId>, Option<bool>), ActionError> {
        let turn_id = self.reply_turn(reply_id)?;
        let reply = self
            .replies
            .get_mut(reply_id)
            .ok_or_else(|| ActionError::UnknownReply(reply_id.to_owned()))?;
        if interrupt && reply.chunks > 0 {
            return Err(ActionError::InterruptNotFirst);
        }
        let interrupt = (reply.chunks == 0 && (reply.interrupt || interrupt)).then_some(true);
        reply.chunks = reply.chunks.saturating_add(1);
        Ok((turn_id, interrupt))
    }

    /// Number of chunks sent on an open reply.
    pub fn chunks_sent(&self, reply_id: &str) -> Option<u32> {
        self.replies.get(reply_id).map(|r| r.chunks)
    }

    /// Ends a reply with `reply:done` and an optional turn record (at most 16 KB
    /// serialized; a larger one is refused and the reply stays open).
    pub fn finish_reply(
        &mut self,
        reply_id: &str,
        turn_record: Option<TurnRecord>,
    ) -> Result<(), ActionError> {
        let turn_id = match self.reply_turn(reply_id) {
            Ok(t) => t,
            Err(e @ ActionError::TurnCancelled(_)) => {
                self.replies.remove(reply_id);
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if let Some(r) = &turn_record {
            r.check_size()?;
        }
        self.replies.remove(reply_id);
        if self.replies.is_empty() {
            // An idle call keeps no table (memory per idle call).
            self.replies = HashMap::new();
        }
        let msg = HarnessMessage::ReplyDone(ReplyDone {
            reply_id: reply_id.to_owned(),
            turn_id,
            turn_record,
            extra: Map::new(),
        });
        self.push_transmit(turn_id, &msg);
        Ok(())
    }

    /// Asks jambonz to run one of the agent's tools for a started turn; the answer comes as
    /// [`CallEvent::ToolResult`](super::CallEvent::ToolResult). Returns the `call_id`.
    pub fn call_tool(
        &mut self,
        turn_id: TurnId,
        name: impl Into<String>,
        args: Map<String, Value>,
    ) -> Result<String, ActionError> {
        self.check_turn(Some(turn_id))?;
        self.next_call += 1;
        let id = format!("t{}", self.next_call);
        let name = name.into();
        self.tools.insert(id.clone(), (Some(turn_id), name.clone()));
        let msg = HarnessMessage::ToolCall(ToolCallMessage {
            call_id: id.clone(),
            turn_id: Some(turn_id),
            name,
            args,
            extra: Map::new(),
        });
        self.transmits.push_back(Outgoing {
            turn_id: Some(turn_id),
            tool_call: Some(id.clone()),
            command: None,
            frame: Transmit::Text(msg.encode()),
        });
        Ok(id)
    }

    /// Sends a command; the answer comes as
    /// [`CallEvent::CommandResult`](super::CallEvent::CommandResult). Returns the
    /// `command_id`.
    pub fn send_command(&mut self, command: JambonzCommand) -> Result<String, ActionError> {
        self.check_turn(None)?;
        self.next_command += 1;
        let id = format!("c{}", self.next_command);
        self.commands.insert(id.clone(), command.name().to_owned());
        let msg = HarnessMessage::Command(command.into_message(id.clone()));
        self.transmits.push_back(Outgoing {
            turn_id: None,
            tool_call: None,
            command: Some(id.clone()),
            frame: Transmit::Text(msg.encode()),
        });
        Ok(id)
    }

    /// Hangs up: the `hangup` command with a reason (e.g. `resolved`).
    pub fn hang_up(&mut self, reason: Option<&str>) -> Result<String, ActionError> {
        self.send_command(JambonzCommand::Hangup {
            reason: reason.map(str::to_owned),
        })
    }

    fn push_transmit(&mut self, turn_id: Option<TurnId>, msg: &HarnessMessage) {
        self.push_frame(turn_id, msg.encode());
    }

    fn push_frame(&mut self, turn_id: Option<TurnId>, frame: String) {
        self.transmits.push_back(Outgoing {
            turn_id,
            tool_call: None,
            command: None,
            frame: Transmit::Text(frame),
        });
    }
}
