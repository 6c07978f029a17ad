//! The harness's side of one `Harness.Connect` stream, sans-IO: host frames in, events out,
//! and the agent's sink calls in between.
//!
//! What it enforces, as the Go bridge (`harnesswire.Server`) does:
//! - the first frame is `start` with a non-empty `execution_id` ("first ControllerFrame must
//!   be Start", "Start frame requires execution_id");
//! - every event carries that execution id; every reply frame must too ("result execution_id
//!   mismatch");
//! - one request outstanding at a time: a `MODEL_CALL` is answered by a `model` frame whose
//!   `model_call_id` is the call's wire id, a `TOOL_CALL` by a `tool` frame of the same
//!   session whose result id is the call's id;
//! - an approval-gated call is answered by `approval` (the committed decision, correlated)
//!   then `tool` (the receipt, validated against the decision), or by `park` (the tuple
//!   execution/call/request validated), after which every sink call fails with the park and
//!   the turn ends with exactly one `EVENT_PARKED` and no END;
//! - no approval request/decision seqs or receipt codes outside the gate (in a `sink.report`
//!   or an ordinary tool reply): a sticky failure that the END reports even if the agent
//!   swallowed it;
//! - exactly one END: `COMPLETED`, `FAILED` with the error, or `CANCELED` after a `cancel`
//!   frame; nothing after it.
//!
//! It has no timers: the host's deadline is the transport's. See
//! [the run-loop contract](harness_core::run_loop).

use std::collections::VecDeque;

use harness_core::event::{ApprovalResult, ErrorInfo, Event, EventBody, HarnessEnd, ModelCall};
use harness_core::message::{
    Mediation, Message, ModelRequest, ModelResponse, Part, ReasoningPart, Role, ToolCall,
    ToolResult, ToolResultCode, Usage,
};
use harness_core::{HarnessError, SinkError, Start};

use super::frame::{ApprovalRef, ConnectError, ControllerFrame, Frame, HarnessFrame};
use crate::controller::derive_wire_id;

/// What the harness side tells its driver.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HarnessConnectEvent {
    /// The start frame arrived: run the turn with this `Start`.
    Start(Box<Start>),
    /// The reply to the sink call outstanding.
    Reply(SinkReply),
    /// The host cancelled the turn: stop it (drop its future).
    Cancel(String),
}

/// The answer to the sink call outstanding.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SinkReply {
    /// The completion of `sink.model`.
    Model(ModelResponse),
    /// The result of `sink.tool_call`.
    Tool(ToolResult),
    /// The call failed (a park, a broken correlation, the stream closed).
    Failed(SinkError),
}

#[derive(Clone, Debug, PartialEq)]
enum Pending {
    Model(String),
    Tool {
        call: ToolCall,
        decision: Option<ApprovalResult>,
    },
}

/// The harness's side of one `Harness.Connect` stream (see the module docs).
///
/// ```
/// use harness_core::message::{Message, ModelRequest};
/// use harness_sessions::connect::{ControllerFrame, Frame, HarnessConnect, HarnessConnectEvent, ModelResult, SinkReply};
///
/// let mut h = HarnessConnect::new();
/// let start = harness_core::Start::with_inputs(vec![Message::user("hi")]);
/// h.handle_frame(ControllerFrame { session: "s".into(), execution_id: "x1".into(),
///     frame: Some(Frame::Start(Box::new(start))) })?;
/// assert!(matches!(h.poll_event(), Some(HarnessConnectEvent::Start(_))));
/// // The agent calls sink.model: one MODEL_CALL goes out, carrying a wire id.
/// h.model(ModelRequest::new(vec![Message::user("hi")])).unwrap();
/// let sent = h.poll_transmit().unwrap();
/// let id = match &sent { harness_sessions::connect::HarnessFrame::Event(e) => match &e.body {
///     harness_core::event::EventBody::ModelCall(mc) => mc.id.clone(), _ => unreachable!() },
///     _ => unreachable!() };
/// h.handle_frame(ControllerFrame { session: "s".into(), execution_id: "x1".into(),
///     frame: Some(Frame::Model(ModelResult { message: Message::assistant("hello"),
///         usage: None, model_call_id: id })) })?;
/// assert!(matches!(h.poll_event(), Some(HarnessConnectEvent::Reply(SinkReply::Model(_)))));
/// h.finish(&Ok(()));
/// assert!(h.poll_transmit().is_some()); // END{COMPLETED}
/// # Ok::<(), harness_sessions::connect::ConnectError>(())
/// ```
#[derive(Debug, Default)]
pub struct HarnessConnect {
    started: bool,
    ended: bool,
    closed: bool,
    session: String,
    execution_id: String,
    model_calls: u64,
    pending: Option<Pending>,
    sticky: Option<String>,
    parked: Option<ApprovalRef>,
    transmit: VecDeque<HarnessFrame>,
    events: VecDeque<HarnessConnectEvent>,
}

/// Whether `r` carries what only the host's approval gate may set.
pub(crate) fn has_approval_fields(r: &ToolResult) -> bool {
    r.approval_request_seq != 0
        || r.approval_decision_seq != 0
        || r.code == ToolResultCode::ApprovalDenied
}

/// `validateApprovalReceipt`: the receipt answers the decision on `call`.
pub(crate) fn valid_receipt(
    call_id: &str,
    d: &ApprovalResult,
    r: &ToolResult,
) -> Result<(), ConnectError> {
    let fits = if d.approved {
        (r.code == ToolResultCode::Unspecified && !r.is_error)
            || (r.code == ToolResultCode::ExecutorError && r.is_error)
    } else {
        r.code == ToolResultCode::ApprovalDenied && r.is_error
    };
    if r.id != call_id
        || r.approval_request_seq != d.request_seq
        || r.approval_decision_seq <= 0
        || !fits
    {
        return Err(ConnectError::protocol(
            "approval receipt does not match the decision",
        ));
    }
    Ok(())
}

impl HarnessConnect {
    /// A stream waiting for its start frame.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the host closed its side of the stream.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// The execution id of the start frame (empty before it).
    pub fn execution_id(&self) -> &str {
        &self.execution_id
    }

    /// Takes a frame from the host. Before the turn starts, a frame that is not a valid
    /// start is an error and the stream is over (no END: no turn ran). During the turn a
    /// frame that breaks the exchange fails the sink call outstanding (or the next one),
    /// and the END says so; it is not returned here.
    pub fn handle_frame(&mut self, f: ControllerFrame) -> Result<(), ConnectError> {
        if !self.started {
            let Some(Frame::Start(mut start)) = f.frame else {
                return Err(ConnectError::protocol(
                    "first ControllerFrame must be Start",
                ));
            };
            if f.execution_id.is_empty() {
                return Err(ConnectError::protocol("Start frame requires execution_id"));
            }
            self.started = true;
            start.execution_id.clone_from(&f.execution_id);
            start.session_uid.clone_from(&f.session);
            self.execution_id = f.execution_id;
            self.session = f.session;
            self.events.push_back(HarnessConnectEvent::Start(start));
            return Ok(());
        }
        if self.ended {
            return Ok(());
        }
        if let Some(Frame::Cancel { reason }) = f.frame {
            self.events.push_back(HarnessConnectEvent::Cancel(reason));
            return Ok(());
        }
        if f.execution_id != self.execution_id {
            self.fail("result execution_id mismatch", true);
            return Ok(());
        }
        match self.pending.take() {
            None => self.fail("a reply frame with no request outstanding", true),
            Some(Pending::Model(id)) => match f.frame {
                Some(Frame::Model(m)) if m.model_call_id == id => {
                    self.reply(SinkReply::Model(ModelResponse {
                        message: m.message,
                        usage: m.usage.unwrap_or_default(),
                    }));
                }
                Some(Frame::Model(_)) => self.fail("model result correlation mismatch", false),
                _ => self.fail("expected a ModelResult frame", false),
            },
            Some(Pending::Tool { call, decision }) => self.tool_reply(f, call, decision),
        }
        Ok(())
    }

    fn tool_reply(&mut self, f: ControllerFrame, call: ToolCall, decision: Option<ApprovalResult>) {
        if f.session != self.session {
            return self.fail("tool result session mismatch", true);
        }
        match f.frame {
            Some(Frame::Park(p)) => {
                if decision.is_some()
                    || p.execution_id != self.execution_id
                    || p.tool_call_id != call.id
                    || p.request_seq <= 0
                {
                    return self.fail("park correlation mismatch", true);
                }
                let parked = SinkError::ApprovalParked {
                    tool_call_id: p.tool_call_id.clone(),
                    request_seq: p.request_seq,
                };
                self.parked = Some(p);
                self.reply(SinkReply::Failed(parked));
            }
            Some(Frame::Approval(d)) => {
                if decision.is_some() || d.tool_call_id != call.id || d.request_seq <= 0 {
                    return self.fail("expected correlated approval before ToolResult", true);
                }
                self.pending = Some(Pending::Tool {
                    call,
                    decision: Some(d),
                });
            }
            Some(Frame::Tool(r)) => {
                if r.id != call.id {
                    return self.fail("tool result correlation mismatch", true);
                }
                match &decision {
                    Some(d) => {
                        if let Err(e) = valid_receipt(&call.id, d, &r) {
                            return self.fail(&e.to_string(), true);
                        }
                    }
                    None if call.mediation == Mediation::RequiresApproval => {
                        return self.fail("expected correlated approval before ToolResult", true);
                    }
                    None if has_approval_fields(&r) => {
                        return self.fail(
                            "a tool result outside the approval gate carries approval fields",
                            true,
                        );
                    }
                    None => {}
                }
                self.reply(SinkReply::Tool(r));
            }
            _ => self.fail("expected a ToolResult frame", true),
        }
    }

    fn reply(&mut self, r: SinkReply) {
        self.events.push_back(HarnessConnectEvent::Reply(r));
    }

    /// A broken exchange: the call outstanding fails; `sticky` ones fail every later call
    /// and the END (the Go bridge's sticky ToolCall/Report failures; model ones are not).
    fn fail(&mut self, why: &str, sticky: bool) {
        let e = SinkError::Transport(format!("harnesswire: {why}"));
        if sticky && self.sticky.is_none() {
            self.sticky = Some(format!("harnesswire: {why}"));
        }
        self.pending = None;
        self.reply(SinkReply::Failed(e));
    }

    /// The host closed its side of the stream: the call outstanding, and every later one,
    /// fails.
    pub fn handle_close(&mut self) {
        self.closed = true;
        if self.pending.take().is_some() {
            self.reply(SinkReply::Failed(SinkError::Transport(
                "harnesswire: the host closed the stream".into(),
            )));
        }
    }

    /// Why a sink call cannot be made now.
    fn check(&self) -> Result<(), SinkError> {
        if let Some(p) = &self.parked {
            return Err(SinkError::ApprovalParked {
                tool_call_id: p.tool_call_id.clone(),
                request_seq: p.request_seq,
            });
        }
        if let Some(s) = &self.sticky {
            return Err(SinkError::Transport(s.clone()));
        }
        if !self.started || self.ended || self.closed {
            return Err(SinkError::Transport(
                "harnesswire: the stream is closed".into(),
            ));
        }
        if self.pending.is_some() {
            return Err(SinkError::Rejected(
                "one sink operation at a time over Harness.Connect".into(),
            ));
        }
        Ok(())
    }

    fn send(&mut self, body: EventBody) {
        self.transmit.push_back(HarnessFrame::Event(Event::new(
            self.execution_id.clone(),
            body,
        )));
    }

    /// `sink.model`: sends `MODEL_CALL` (model, params, a wire id, messages, tools, tool
    /// choice; no input hash: the host computes it) and waits for its `model` frame.
    pub fn model(&mut self, req: ModelRequest) -> Result<(), SinkError> {
        self.check()?;
        self.model_calls += 1;
        let id = derive_wire_id(&self.execution_id, self.model_calls);
        let call = ModelCall {
            model: req.model,
            params: req.params,
            input_hash: String::new(),
            id: id.clone(),
            messages: req.messages,
            tools: req.tools,
            tool_choice: req.tool_choice,
        };
        self.send(EventBody::ModelCall(call));
        self.pending = Some(Pending::Model(id));
        Ok(())
    }

    /// `sink.output`: sends `OUTPUT` (an assistant text message).
    pub fn output(&mut self, text: &str) -> Result<(), SinkError> {
        self.check()?;
        self.send(EventBody::Output(Message::assistant(text)));
        Ok(())
    }

    /// `sink.reasoning`: sends `OUTPUT` whose one part is a reasoning part with the text as
    /// its summary, the form the journal records reasoning in (a harness-rs host gives it
    /// back to its sink as reasoning; the Go host reads it as an empty output).
    pub fn reasoning(&mut self, text: &str) -> Result<(), SinkError> {
        self.check()?;
        let part = ReasoningPart {
            summary: vec![Part::text(text)],
            validity_scope: self.execution_id.clone(),
            ..ReasoningPart::default()
        };
        self.send(EventBody::Output(Message {
            role: Role::Assistant,
            parts: vec![Part::Reasoning(part)],
        }));
        Ok(())
    }

    /// `sink.tool_call`: sends `TOOL_CALL` and waits for the host's answer.
    pub fn tool_call(&mut self, call: ToolCall) -> Result<(), SinkError> {
        self.check()?;
        if call.mediation == Mediation::RequiresApproval
            && (self.session.is_empty() || call.id.is_empty())
        {
            return Err(SinkError::Rejected(
                "approval requires session and call id".into(),
            ));
        }
        self.send(EventBody::ToolCall(call.clone()));
        self.pending = Some(Pending::Tool {
            call,
            decision: None,
        });
        Ok(())
    }

    /// `sink.report`: sends `TOOL_RESULT`. A result carrying approval request/decision seqs
    /// or a host receipt code is refused, stickily.
    pub fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.check()?;
        if has_approval_fields(&result) {
            let why = "sink.report cannot carry approval request/decision or host receipt fields";
            self.sticky = Some(format!("harnesswire: {why}"));
            return Err(SinkError::Rejected(why.into()));
        }
        self.send(EventBody::ToolResult(result));
        Ok(())
    }

    /// `sink.usage`: sends `USAGE`.
    pub fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.check()?;
        self.send(EventBody::Usage(usage));
        Ok(())
    }

    /// The turn returned `result`: queues its one terminal event and says whether the RPC
    /// ends OK. A parked turn that returned its park ends with one `EVENT_PARKED` and no END
    /// (`Ok`); a parked turn that returned anything else ends with neither (`Err`). Otherwise
    /// one END: `FAILED` with a sticky exchange failure (which wins over the turn's own
    /// result), `CANCELED` for a cancelled turn, `FAILED` for an error, else `COMPLETED`.
    pub fn finish(&mut self, result: &Result<(), HarnessError>) -> Result<(), String> {
        if self.ended || !self.started {
            return Err("harnesswire: no turn to finish".into());
        }
        self.ended = true;
        self.pending = None;
        if let Some(p) = self.parked.clone() {
            let unwound = matches!(result, Err(HarnessError::Sink(SinkError::ApprovalParked {
                tool_call_id, request_seq })) if *tool_call_id == p.tool_call_id && *request_seq == p.request_seq);
            if !unwound {
                return Err(match result {
                    Err(e) => e.to_string(),
                    Ok(()) => "harnesswire: the harness went on after its call was parked".into(),
                });
            }
            self.transmit.push_back(HarnessFrame::Parked {
                execution_id: self.execution_id.clone(),
                parked: p,
            });
            return Ok(());
        }
        let (state, error) = match (&self.sticky, result) {
            (Some(s), _) => ("FAILED", Some(s.clone())),
            (None, Err(e)) if e.is_cancelled() => ("CANCELED", Some(e.to_string())),
            (None, Err(e)) => ("FAILED", Some(e.to_string())),
            (None, Ok(())) => ("COMPLETED", None),
        };
        self.send(EventBody::End(HarnessEnd {
            state: state.into(),
            error: error.clone().map(|description| ErrorInfo {
                code: 0,
                description,
            }),
        }));
        error.map_or(Ok(()), Err)
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<HarnessConnectEvent> {
        self.events.pop_front()
    }

    /// The next frame to send, in order.
    pub fn poll_transmit(&mut self) -> Option<HarnessFrame> {
        self.transmit.pop_front()
    }
}
