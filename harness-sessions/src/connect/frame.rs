//! The frames of `Harness.Connect`: what the host sends ([`ControllerFrame`]) and what the
//! harness sends ([`HarnessFrame`]), as the crate's own types. The `proto` feature converts
//! them to and from the protobuf messages of `proto/agentsessions.proto`.

use harness_core::Start;
use harness_core::event::{ApprovalResult, Event};
use harness_core::message::{Message, ToolResult, Usage};

/// A frame from the host to the harness (`agentsessions.v1.ControllerFrame`).
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerFrame {
    /// The session uid (`session = 1`).
    pub session: String,
    /// The execution this stream runs (`execution_id = 2`).
    pub execution_id: String,
    /// What it carries (the `frame` oneof); `None` for a frame with none set.
    pub frame: Option<Frame>,
}

/// The `frame` oneof of a [`ControllerFrame`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Frame {
    /// `start = 3`: the turn. Its `execution_id` and `session_uid` travel in the envelope.
    Start(Box<Start>),
    /// `cancel = 4`: stop the turn (`reason`: `USER`, `TIMEOUT` or `INTERNAL`).
    Cancel {
        /// Why.
        reason: String,
    },
    /// `approval = 5`: the committed decision on a gated call, before its receipt.
    Approval(ApprovalResult),
    /// `tool = 6`: the result of a host-executed call.
    Tool(ToolResult),
    /// `model = 7`: the completion of a mediated model call.
    Model(ModelResult),
    /// `park = 8`: the gated call has no decision yet; the harness acknowledges with
    /// [`HarnessFrame::Parked`] and closes. (Its field number upstream was not seen: see
    /// the crate's proto file.)
    Park(ApprovalRef),
}

/// A completion served to the harness (`agentsessions.v1.ModelResult`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ModelResult {
    /// The completion (`message = 1`).
    pub message: Message,
    /// Usage (`usage = 2`; the Go host never sets it).
    pub usage: Option<Usage>,
    /// The wire id of the model call it answers (`model_call_id = 3`).
    pub model_call_id: String,
}

/// A parked approval (`agentsessions.v1.ApprovalRef`): the host's park frame and the
/// harness's `EVENT_PARKED` acknowledgement carry the same three values.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ApprovalRef {
    /// The execution.
    pub execution_id: String,
    /// The gated call.
    pub tool_call_id: String,
    /// The journal seq of its APPROVAL_REQUEST.
    pub request_seq: i64,
}

/// A frame from the harness to the host: an `agentsessions.v1.Event`.
// Frames are moved, not stored: boxing the event would cost an allocation per frame.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HarnessFrame {
    /// An event of the execution (`MODEL_CALL`, `OUTPUT`, `TOOL_CALL`, `TOOL_RESULT`,
    /// `USAGE`, `END`; or a kind the host refuses or ignores).
    Event(Event),
    /// `EVENT_PARKED` with `parked = 20`: the acknowledgement of a park frame. Never
    /// journaled.
    Parked {
        /// The execution (the event's `execution_id`).
        execution_id: String,
        /// The parked call, as the park frame named it.
        parked: ApprovalRef,
    },
}

impl HarnessFrame {
    /// The execution id the frame carries.
    pub fn execution_id(&self) -> &str {
        match self {
            HarnessFrame::Event(e) => &e.execution_id,
            HarnessFrame::Parked { execution_id, .. } => execution_id,
        }
    }
}

/// Why a `Harness.Connect` exchange failed: the messages are the Go bridge's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The peer broke a rule of the exchange (a frame out of order, a correlation that does
    /// not match, a host-owned event from the harness, a second END).
    #[error("harnesswire: {0}")]
    Protocol(String),
    /// The stream ended where the exchange cannot end: before END (or before the park
    /// acknowledgement).
    #[error("harnesswire: {0}")]
    Closed(String),
    /// The transport failed (a gRPC status, a reset connection).
    #[error("harnesswire transport: {0}")]
    Transport(String),
    /// The turn failed: after its END (or in place of its park acknowledgement) the
    /// harness ends the RPC with this error, as the Go bridge returns `Run`'s error.
    #[error("{0}")]
    Failed(String),
}

impl ConnectError {
    pub(crate) fn protocol(msg: impl Into<String>) -> Self {
        ConnectError::Protocol(msg.into())
    }
}
