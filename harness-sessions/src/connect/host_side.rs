//! The host's side of one `Harness.Connect` stream, sans-IO: the harness's events in,
//! requests for the host's own sink out, the answers sent back as frames.
//!
//! What it enforces, as the Go bridge (`harnesswire.ClientHarness`) does:
//! - the first frame is `start` with the execution id ("Start requires execution_id");
//! - every event carries that execution id ("event execution_id mismatch");
//! - the harness never emits host-owned control events (`APPROVAL_REQUEST`,
//!   `APPROVAL_RESULT`, `EXECUTION_START`, an unsolicited `EVENT_PARKED`), nor approval
//!   fields in a reported result; `INPUT`, `LIFECYCLE`, `ERROR` and unknown kinds are
//!   ignored;
//! - one request at a time: an event while a model or tool call is outstanding is refused;
//! - a decided gated call is answered by `approval` then `tool`; an undecided one by `park`
//!   (its tuple checked first), which must be acknowledged by exactly one correlated
//!   `EVENT_PARKED` and then the end of the stream;
//! - after END (or the park acknowledgement) the stream must end: a second END, or any
//!   event, is refused. A stream that ends before END is an interrupted turn (the Go host
//!   counts a clean end before END as success; this side does not).
//!
//! See [the run-loop contract](harness_core::run_loop).

use std::collections::VecDeque;

use harness_core::event::{ApprovalResult, EventBody};
use harness_core::message::{
    Mediation, ModelRequest, ModelResponse, Part, ToolCall, ToolResult, Usage,
};
use harness_core::{SinkError, Start};

use super::frame::{ApprovalRef, ConnectError, ControllerFrame, Frame, HarnessFrame, ModelResult};
use super::harness_side::{has_approval_fields, valid_receipt};

/// What the harness asked of the host's sink.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostConnectEvent {
    /// `MODEL_CALL`: call `sink.model`, then [`HostConnect::model_result`].
    Model(ModelRequest),
    /// `OUTPUT` of text: `sink.output`.
    Output(String),
    /// `OUTPUT` of one reasoning part: `sink.reasoning` of its summary.
    Reasoning(String),
    /// `TOOL_CALL`: call `sink.tool_call`, then [`HostConnect::tool_result`] or
    /// [`HostConnect::park`].
    ToolCall(ToolCall),
    /// `TOOL_RESULT`: `sink.report`.
    Report(ToolResult),
    /// `USAGE`: `sink.usage`.
    Usage(Usage),
}

/// How a turn over the wire ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// `END{COMPLETED}`, then the end of the stream.
    Completed,
    /// `END` in another state (`FAILED`, `CANCELED`), with its error's description.
    Failed {
        /// The END's state.
        state: String,
        /// Its error's description.
        description: String,
    },
    /// The park acknowledgement, then the end of the stream.
    Parked(ApprovalRef),
}

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Running,
    Model(String),
    Tool(ToolCall),
    ParkAck(ApprovalRef),
    Closing(Ending),
}

/// The host's side of one `Harness.Connect` stream (see the module docs).
///
/// ```
/// use harness_core::Start;
/// use harness_core::event::{Event, EventBody, HarnessEnd};
/// use harness_sessions::connect::{Ending, HarnessFrame, HostConnect};
///
/// let start = Start { execution_id: "x1".into(), session_uid: "s".into(), ..Start::default() };
/// let mut h = HostConnect::new(&start)?;
/// assert!(h.poll_transmit().is_some()); // the start frame
/// h.handle_event(HarnessFrame::Event(Event::new("x1", EventBody::End(HarnessEnd::completed()))))?;
/// // A second END is refused; the end of the stream completes the turn.
/// assert!(h.handle_event(HarnessFrame::Event(Event::new("x1", EventBody::End(HarnessEnd::completed())))).is_err());
/// # let mut h = HostConnect::new(&start)?;
/// # h.handle_event(HarnessFrame::Event(Event::new("x1", EventBody::End(HarnessEnd::completed()))))?;
/// assert_eq!(h.handle_close()?, Ending::Completed);
/// # Ok::<(), harness_sessions::connect::ConnectError>(())
/// ```
#[derive(Debug)]
pub struct HostConnect {
    session: String,
    execution_id: String,
    phase: Phase,
    transmit: VecDeque<ControllerFrame>,
    events: VecDeque<HostConnectEvent>,
}

impl HostConnect {
    /// Opens the exchange for `start`: queues the start frame.
    pub fn new(start: &Start) -> Result<Self, ConnectError> {
        if start.execution_id.is_empty() {
            return Err(ConnectError::protocol("Start requires execution_id"));
        }
        let mut s = HostConnect {
            session: start.session_uid.clone(),
            execution_id: start.execution_id.clone(),
            phase: Phase::Running,
            transmit: VecDeque::new(),
            events: VecDeque::new(),
        };
        s.push(Frame::Start(Box::new(start.clone())));
        Ok(s)
    }

    fn push(&mut self, frame: Frame) {
        self.transmit.push_back(ControllerFrame {
            session: self.session.clone(),
            execution_id: self.execution_id.clone(),
            frame: Some(frame),
        });
    }

    /// Takes an event from the harness. An error ends the exchange (the driver drops the
    /// stream).
    pub fn handle_event(&mut self, frame: HarnessFrame) -> Result<(), ConnectError> {
        if frame.execution_id() != self.execution_id {
            return Err(ConnectError::protocol("event execution_id mismatch"));
        }
        match (&self.phase, frame) {
            (Phase::Closing(_), f) => Err(ConnectError::protocol(format!(
                "expected stream closure after {}, got {}",
                match &self.phase {
                    Phase::Closing(Ending::Parked(_)) => "park acknowledgement",
                    _ => "END",
                },
                kind_name(&f)
            ))),
            (Phase::ParkAck(want), HarnessFrame::Parked { parked, .. }) => {
                if parked != *want {
                    return Err(ConnectError::protocol(
                        "park acknowledgement correlation mismatch",
                    ));
                }
                self.phase = Phase::Closing(Ending::Parked(parked));
                Ok(())
            }
            (Phase::ParkAck(_), f) => Err(ConnectError::protocol(format!(
                "park acknowledgement correlation mismatch: got {}",
                kind_name(&f)
            ))),
            (_, HarnessFrame::Parked { .. }) => Err(ConnectError::protocol(
                "harness emitted host-owned control event EVENT_PARKED",
            )),
            (Phase::Model(_) | Phase::Tool(_), f) => Err(ConnectError::protocol(format!(
                "harness sent {} while a request was outstanding",
                kind_name(&f)
            ))),
            (Phase::Running, HarnessFrame::Event(ev)) => {
                match ev.body {
                    EventBody::ModelCall(mc) => {
                        self.phase = Phase::Model(mc.id);
                        self.events.push_back(HostConnectEvent::Model(ModelRequest {
                            model: mc.model,
                            messages: mc.messages,
                            params: mc.params,
                            tools: mc.tools,
                            tool_choice: mc.tool_choice,
                        }));
                    }
                    EventBody::Output(m) => {
                        let reasoning = match m.parts.as_slice() {
                            [Part::Reasoning(r)] => Some(
                                r.summary
                                    .iter()
                                    .filter_map(|p| match p {
                                        Part::Text(t) => Some(t.text.as_str()),
                                        _ => None,
                                    })
                                    .collect::<String>(),
                            ),
                            _ => None,
                        };
                        self.events.push_back(match reasoning {
                            Some(text) => HostConnectEvent::Reasoning(text),
                            None => HostConnectEvent::Output(m.text()),
                        });
                    }
                    EventBody::ToolCall(c) => {
                        self.phase = Phase::Tool(c.clone());
                        self.events.push_back(HostConnectEvent::ToolCall(c));
                    }
                    EventBody::ToolResult(r) => {
                        if has_approval_fields(&r) {
                            return Err(ConnectError::protocol(
                                "a reported tool result carries approval fields",
                            ));
                        }
                        self.events.push_back(HostConnectEvent::Report(r));
                    }
                    EventBody::Usage(u) => self.events.push_back(HostConnectEvent::Usage(u)),
                    EventBody::End(end) => {
                        self.phase = Phase::Closing(if end.state == "COMPLETED" {
                            Ending::Completed
                        } else {
                            Ending::Failed {
                                state: end.state,
                                description: end.error.map(|e| e.description).unwrap_or_default(),
                            }
                        });
                    }
                    EventBody::ApprovalRequest(_)
                    | EventBody::ApprovalResult(_)
                    | EventBody::ExecutionStart(_) => {
                        return Err(ConnectError::protocol(format!(
                            "harness emitted host-owned control event EVENT_{}",
                            ev_kind(&ev.body)
                        )));
                    }
                    // INPUT, LIFECYCLE, ERROR and kinds this version does not know.
                    _ => {}
                }
                Ok(())
            }
        }
    }

    /// Answers the outstanding model call with the host's completion.
    /// Refused (and the exchange left as it was) when no model call is outstanding.
    pub fn model_result(&mut self, resp: ModelResponse) -> Result<(), ConnectError> {
        let id = match std::mem::replace(&mut self.phase, Phase::Running) {
            Phase::Model(id) => id,
            other => {
                self.phase = other;
                return Err(ConnectError::protocol("no model call outstanding"));
            }
        };
        self.push(Frame::Model(ModelResult {
            message: resp.message,
            usage: None,
            model_call_id: id,
        }));
        Ok(())
    }

    /// Answers the outstanding tool call. A receipt of the approval gate (with approval
    /// seqs) goes as the decision, then the receipt; it must match the decision. Refused
    /// (and the exchange left as it was) when no tool call is outstanding or the answer does
    /// not fit the call.
    pub fn tool_result(&mut self, result: ToolResult) -> Result<(), ConnectError> {
        let Phase::Tool(call) = &self.phase else {
            return Err(ConnectError::protocol("no tool call outstanding"));
        };
        if result.approval_decision_seq > 0 || result.approval_request_seq > 0 {
            let denied = result.is_denied();
            let decision = ApprovalResult {
                tool_call_id: call.id.clone(),
                approved: !denied,
                reason: if denied {
                    result.error.clone()
                } else {
                    String::new()
                },
                request_seq: result.approval_request_seq,
            };
            valid_receipt(&call.id, &decision, &result)?;
            self.push(Frame::Approval(decision));
        } else if call.mediation == Mediation::RequiresApproval {
            return Err(ConnectError::protocol(
                "a gated call answered without its decision",
            ));
        }
        self.phase = Phase::Running;
        self.push(Frame::Tool(result));
        Ok(())
    }

    /// The host parked the outstanding (gated) call: checks the tuple, sends the park frame,
    /// and waits for its acknowledgement.
    pub fn park(&mut self, tool_call_id: &str, request_seq: i64) -> Result<(), ConnectError> {
        let Phase::Tool(call) = &self.phase else {
            return Err(ConnectError::protocol("no tool call outstanding"));
        };
        if self.session.is_empty()
            || call.id.is_empty()
            || call.id != tool_call_id
            || request_seq <= 0
        {
            return Err(ConnectError::protocol("invalid host park correlation"));
        }
        let park = ApprovalRef {
            execution_id: self.execution_id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            request_seq,
        };
        self.phase = Phase::ParkAck(park.clone());
        self.push(Frame::Park(park));
        Ok(())
    }

    /// Queues a `cancel` frame (the turn is cancelled by the host).
    pub fn cancel(&mut self, reason: &str) {
        self.push(Frame::Cancel {
            reason: reason.to_owned(),
        });
    }

    /// The stream ended: how the turn ended, or why it cannot end here.
    pub fn handle_close(&mut self) -> Result<Ending, ConnectError> {
        match &self.phase {
            Phase::Closing(e) => Ok(e.clone()),
            Phase::ParkAck(_) => Err(ConnectError::Closed(
                "the stream ended before the park acknowledgement".into(),
            )),
            _ => Err(ConnectError::Closed(
                "the harness closed the stream before END".into(),
            )),
        }
    }

    /// The next request for the host's sink.
    pub fn poll_event(&mut self) -> Option<HostConnectEvent> {
        self.events.pop_front()
    }

    /// The next frame to send, in order.
    pub fn poll_transmit(&mut self) -> Option<ControllerFrame> {
        self.transmit.pop_front()
    }
}

fn ev_kind(body: &EventBody) -> &'static str {
    body.kind().as_str()
}

fn kind_name(f: &HarnessFrame) -> String {
    match f {
        HarnessFrame::Event(e) => format!("EVENT_{}", e.kind().as_str()),
        HarnessFrame::Parked { .. } => "EVENT_PARKED".into(),
    }
}

/// The sink error a failed exchange is for the agent (and the controller): the transport.
pub(crate) fn transport(e: ConnectError) -> SinkError {
    SinkError::Transport(e.to_string())
}
