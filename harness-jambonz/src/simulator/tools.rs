//! The platform's tools (`tool:call` answered, with latency and deadline) and commands.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{Simulator, ViolationKind, harness_error, later};
use crate::command::{Command, CommandMessage, CommandResult};
use crate::frame::JambonzMessage;
use crate::session::end_reason;
use crate::tool::{ToolCallMessage, ToolResultMessage};
use crate::turn::TurnId;

/// A tool's body: the call's `args` in, the result (or an error message) out.
pub(super) type ToolFn = Box<dyn Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync>;

/// A tool registered with [`Simulator::with_tool`] or [`Simulator::with_slow_tool`].
pub(super) struct SimTool {
    pub(super) latency: Duration,
    pub(super) run: ToolFn,
}

/// A `tool:call` being answered: its result goes out at `due` (or an error at the
/// `deadline`, if that comes first).
#[derive(Debug)]
pub(super) struct ToolRun {
    pub(super) due: Instant,
    pub(super) deadline: Option<Instant>,
    call_id: String,
    turn_id: Option<TurnId>,
    result: Result<Value, String>,
}

impl Simulator {
    /// `malformed`: the frame was malformed (its call_id readable): answered with an error.
    pub(super) fn on_tool_call(&mut self, c: ToolCallMessage, malformed: Option<String>) {
        if self.id_too_long("call_id", &c.call_id) {
            return;
        }
        let t = self.clock;
        if !self.id_room() {
            return;
        }
        if c.call_id.is_empty() || !self.call_ids.insert(c.call_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("call_id {:?} reused or empty", c.call_id),
            );
        }
        let usable = match c.turn_id {
            Some(tid) => self.turn_usable(tid),
            None => Err((ViolationKind::ClosedTurn, false)),
        };
        let result = if let Some(why) = malformed {
            Err(why)
        } else if let Err((kind, _)) = usable {
            self.violation(
                kind,
                format!(
                    "tool:call {} for turn {:?}, which is not open",
                    c.call_id, c.turn_id
                ),
            );
            Err(format!("turn {:?} is not open", c.turn_id))
        } else {
            match self.tools.get(&c.name) {
                None => Err(format!("unknown tool: {}", c.name)),
                Some(tool) => {
                    let due = later(t, tool.latency);
                    let result = (tool.run)(&c.args);
                    self.tool_running(c.turn_id, true);
                    self.tool_runs.push(ToolRun {
                        due,
                        deadline: self.cfg.deadlines.tool_result.map(|d| later(t, d)),
                        call_id: c.call_id,
                        turn_id: c.turn_id,
                        result,
                    });
                    return;
                }
            }
        };
        // Answered in order with the other tool calls.
        self.tool_runs.push(ToolRun {
            due: t,
            deadline: None,
            call_id: c.call_id,
            turn_id: c.turn_id,
            result,
        });
    }

    /// A tool of the turn starts (`true`) or ends running.
    fn tool_running(&mut self, turn_id: Option<TurnId>, running: bool) {
        let now = self.clock;
        let Some(t) = turn_id.and_then(|id| self.turns.get_mut(&id)) else {
            return;
        };
        if running {
            if t.tools_running == 0 {
                t.tools_since = now;
            }
            t.tools_running += 1;
        } else if t.tools_running > 0 {
            t.tools_running -= 1;
            if t.tools_running == 0 {
                t.tool_time = t
                    .tool_time
                    .saturating_add(now.saturating_duration_since(t.tools_since));
            }
        }
    }

    pub(super) fn tool_answer(&mut self, run: ToolRun) {
        self.tool_running(run.turn_id, false);
        let timed_out = run.deadline.is_some_and(|d| d < run.due);
        let msg = if timed_out {
            ToolResultMessage::error(&run.call_id, "tool timed out")
        } else {
            match run.result {
                Ok(v) => ToolResultMessage::ok(&run.call_id, v),
                Err(e) => ToolResultMessage::error(&run.call_id, e),
            }
        };
        let mut msg = msg;
        msg.call_sid = self.sid();
        self.send(JambonzMessage::ToolResult(msg));
        if timed_out {
            if let Some(t) = run.turn_id {
                self.fail_turn(t, harness_error::TOOL_RESULT_TIMEOUT, true);
            }
        }
    }

    /// `malformed`: the frame was malformed (its command_id readable): `ok: false`.
    pub(super) fn on_command(&mut self, c: CommandMessage, malformed: bool) {
        if self.id_too_long("command_id", &c.command_id) {
            return;
        }
        if !self.id_room() {
            return;
        }
        if c.command_id.is_empty() || !self.command_ids.insert(c.command_id.clone()) {
            self.violation(
                ViolationKind::DuplicateId,
                format!("command_id {:?} reused or empty", c.command_id),
            );
        }
        let ok = !malformed && matches!(c.command(), Command::Hangup { .. });
        let cid = self.sid();
        self.send(JambonzMessage::CommandResult(CommandResult {
            call_sid: cid,
            command_id: c.command_id,
            ok,
            extra: Map::new(),
        }));
        if ok {
            self.end_call(end_reason::HARNESS_HANGUP);
        }
    }
}
