//! The platform's tools (`tool:call` answered, with latency and deadline) and commands.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use harness_core::message::{ToolCall, ToolResult};
use harness_core::tool::{ToolContext, ToolFuture};
use serde_json::{Map, Value};

use super::{Simulator, ViolationKind, harness_error, later};
use crate::command::{CommandMessage, CommandResultMessage, JambonzCommand};
use crate::frame::JambonzMessage;
use crate::session::end_reason;
use crate::tool::{ToolCallMessage, ToolResultMessage};
use crate::turn::TurnId;

/// A tool's answer: ready, or its code still running (polled again when the answer is due).
enum Outcome {
    Ready(ToolResultMessage),
    Running(BoxFuture<'static, ToolResult>),
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ready(m) => f.debug_tuple("Ready").field(m).finish(),
            Outcome::Running(_) => f.write_str("Running(..)"),
        }
    }
}

/// Polls a tool's code once. The simulator has no wakers (time is virtual): a tool must
/// finish when polled; one still pending is polled again when its answer is due.
fn poll_once(mut fut: BoxFuture<'static, ToolResult>) -> Outcome {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Outcome::Ready(answer(&r)),
        Poll::Pending => Outcome::Running(fut),
    }
}

/// Starts a tool's code: a synchronous tool's answer is ready at once; async code is polled
/// once.
fn start(run: ToolFuture) -> Outcome {
    match run.ready_or_boxed() {
        Ok(r) => Outcome::Ready(answer(&r)),
        Err(fut) => poll_once(fut),
    }
}

/// A [`ToolResult`] as jambonz answers it: the output as `result`, or the error.
fn answer(r: &ToolResult) -> ToolResultMessage {
    if r.is_error {
        ToolResultMessage::error(&r.id, r.error.clone())
    } else {
        let output = r.output.clone().unwrap_or_default();
        ToolResultMessage::ok(&r.id, Value::Object(output))
    }
}

/// A `tool:call` being answered: its result goes out at `due` (or an error at the
/// `deadline`, if that comes first).
#[derive(Debug)]
pub(super) struct ToolRun {
    pub(super) due: Instant,
    pub(super) deadline: Option<Instant>,
    call_id: String,
    turn_id: Option<TurnId>,
    outcome: Outcome,
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
        let failed = |why: String| Outcome::Ready(ToolResultMessage::error(&c.call_id, why));
        let outcome = if let Some(why) = malformed {
            failed(why)
        } else if let Err((kind, _)) = usable {
            self.violation(
                kind,
                format!(
                    "tool:call {} for turn {:?}, which is not open",
                    c.call_id, c.turn_id
                ),
            );
            failed(format!("turn {:?} is not open", c.turn_id))
        } else {
            match self.tools.get(&c.name) {
                None => failed(format!("unknown tool: {}", c.name)),
                Some(tool) => {
                    let latency = self.latencies.get(&c.name).copied().unwrap_or_default();
                    let due = later(t, latency);
                    // jambonz's call of the tool: call ids are unique within the call, so
                    // the call id is the idempotency key, scoped by the call.
                    let call = ToolCall::new(c.call_id.clone(), c.name.clone(), c.args)
                        .with_idempotency_key(c.call_id.clone());
                    let turn = c.turn_id.map(|id| id.to_string()).unwrap_or_default();
                    let cx = ToolContext::new(self.cfg.call_sid.clone(), turn);
                    let outcome = start(tool.run(call, cx));
                    self.tool_running(c.turn_id, true);
                    self.tool_runs.push(ToolRun {
                        due,
                        deadline: self.cfg.deadlines.tool_result.map(|d| later(t, d)),
                        call_id: c.call_id,
                        turn_id: c.turn_id,
                        outcome,
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
            outcome,
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
        let outcome = match run.outcome {
            Outcome::Running(fut) if !timed_out => poll_once(fut),
            other => other,
        };
        let mut msg = match outcome {
            _ if timed_out => ToolResultMessage::error(&run.call_id, "tool timed out"),
            Outcome::Ready(m) => m,
            Outcome::Running(_) => ToolResultMessage::error(
                &run.call_id,
                "the tool did not finish (the simulator runs tools on virtual time)",
            ),
        };
        msg.call_id.clone_from(&run.call_id);
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
        let ok = !malformed && matches!(c.command(), JambonzCommand::Hangup { .. });
        let cid = self.sid();
        self.send(JambonzMessage::CommandResult(CommandResultMessage {
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
