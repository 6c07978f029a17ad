//! The `harness.*` frames, both directions, and the inputs they carry.
//!
//! Spec, "Frames": "Each frame is one JSON object with a `type`. Ignore a frame with a `type`
//! that you do not know." Both unions keep an unknown `type` as `Unknown`. An `input` with an
//! `op` this version does not know is a bad input (`invalid_frame`).
//!
//! ```
//! use harness_tanstack::frame::{ClientFrame, HostFrame, Input};
//!
//! let f = ClientFrame::from_json(
//!     r#"{"type":"harness.input","requestId":"req-1","input":{"op":"prompt","message":"Hello"}}"#,
//! ).unwrap();
//! let ClientFrame::Input(i) = &f else { panic!() };
//! assert!(matches!(i.input, Input::Prompt(_)));
//!
//! let h = HostFrame::from_json(r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#).unwrap();
//! assert_eq!(h.to_json(), r#"{"type":"harness.hello","v":2,"threadId":"thread-1"}"#);
//! ```

use harness_core::Cursor;
use harness_core::{wire_enum, wire_open_union, wire_struct, wire_union};

use crate::Json;
use crate::agui::AguiEvent;
use crate::catalog::Delivery;

/// The protocol version this crate speaks: `2`.
pub const PROTOCOL_VERSION: i64 = 2;

/// WebSocket close codes (spec, "The WebSocket").
pub mod close {
    /// "`getUser` refused the user." The client signs in again.
    pub const UNAUTHORIZED: u16 = 4401;
    /// "The user cannot read the thread, or lost access." The client stops.
    pub const FORBIDDEN: u16 = 4403;
    /// "The server does not speak the `v` of the subscribe." The client stops.
    pub const UNSUPPORTED_VERSION: u16 = 4400;
    /// "The client read too slowly." The client subscribes again from the last cursor.
    pub const SLOW_CONSUMER: u16 = 4408;
    /// "The event feed of the thread ended." The client subscribes again from the last cursor.
    pub const FEED_ENDED: u16 = 1011;
}

wire_enum! {
    /// The `status` of a receipt.
    pub enum ReceiptStatus {
        /// `accepted`
        Accepted = "accepted",
        /// `queued`
        Queued = "queued",
        /// `rejected` (with a `reason`)
        Rejected = "rejected",
    }
}

wire_enum! {
    /// The `code` of a `harness.error` frame.
    pub enum ErrorCode {
        /// `unauthorized`: `getUser` refused the user. The stream closes.
        Unauthorized = "unauthorized",
        /// `forbidden`: the user cannot read the thread (closes), or the host refused one
        /// input (does not close).
        Forbidden = "forbidden",
        /// `invalid_frame`: not JSON, an unknown `type`, a bad `input`, a frame before
        /// `harness.subscribe`, or a second subscribe. Does not close.
        InvalidFrame = "invalid_frame",
        /// `unsupported_version`: the server does not speak the `v`. Closes.
        UnsupportedVersion = "unsupported_version",
        /// `slow_consumer`: the client read too slowly. Closes.
        SlowConsumer = "slow_consumer",
        /// `internal`: reading the events failed (closes) or one input failed (does not).
        Internal = "internal",
    }
}

macro_rules! input_op {
    ($(#[$m:meta])* $name:ident = $lit:literal { $($body:tt)* }) => {
        wire_struct! {
            $(#[$m])*
            pub struct $name [tag "op" = $lit @ 0] {
                $($body)*
                /// The idempotency id: send the same one again after a lost answer.
                opt input_id: String = "inputId",
                /// Context for the turn.
                opt context: Json = "context",
            }
        }
    };
}

input_op!(
    /// `prompt`: a user message; starts a turn (the first prompt also makes the thread).
    Prompt = "prompt" {
        /// The message (a string or a message object).
        req message: Json = "message",
        /// What to do when a turn runs.
        opt busy: Json = "busy",
    }
);
input_op!(
    /// `steer`: a message into the running turn.
    Steer = "steer" {
        /// The message.
        req message: Json = "message",
    }
);
input_op!(
    /// `followUp`: a message that runs after the running turn.
    FollowUp = "followUp" {
        /// The message.
        req message: Json = "message",
    }
);
input_op!(
    /// `cancel`: stops a run.
    Cancel = "cancel" {
        /// The run.
        req operation_id: String = "operationId",
    }
);
input_op!(
    /// `answer`: answers a `harness.question`.
    Answer = "answer" {
        /// The question.
        req question_id: String = "questionId",
        /// The answer.
        opt value: Json = "value",
    }
);
input_op!(
    /// `command`: runs a command.
    Command = "command" {
        /// The command.
        req command: String = "command",
        /// Its arguments.
        opt args: Json = "args",
    }
);
input_op!(
    /// `agent`: runs an agent.
    AgentRun = "agent" {
        /// The agent.
        req agent: String = "agent",
        /// Its input.
        opt input: Json = "input",
        /// Whether it runs in the background.
        opt detached: bool = "detached",
    }
);
input_op!(
    /// `append`: adds a message to the transcript without a turn.
    Append = "append" {
        /// The message.
        req message: Json = "message",
    }
);
input_op!(
    /// `setDelivery`: moves a waiting input (`inputId` names it).
    SetDelivery = "setDelivery" {
        /// `steer` or `queue`.
        req delivery: Delivery = "delivery",
    }
);
input_op!(
    /// `cancelInput`: drops a waiting input (`inputId` names it).
    CancelInput = "cancelInput" {}
);
input_op!(
    /// `continue`: continues the last turn.
    Continue = "continue" {
        /// Whether the continuation is kept out of the transcript.
        opt ephemeral: bool = "ephemeral",
    }
);
input_op!(
    /// `resolve`: answers interrupts.
    Resolve = "resolve" {
        /// The answers.
        req resume: Vec<Json> = "resume",
    }
);
input_op!(
    /// `background`: moves a running tool call to the background.
    Background = "background" {
        /// The tool call.
        opt tool_call_id: String = "toolCallId",
    }
);
input_op!(
    /// `agentMessage`: a message to a running agent.
    AgentMessage = "agentMessage" {
        /// The agent run.
        req operation_id: String = "operationId",
        /// The message.
        req message: Json = "message",
        /// `steer` or `followUp`.
        req mode: String = "mode",
    }
);
input_op!(
    /// `configure`: changes the session configuration.
    Configure = "configure" {}
);
input_op!(
    /// `reset`: the next turn starts a fresh model context.
    ResetInput = "reset" {
        /// A note.
        opt note: String = "note",
    }
);

wire_union! {
    /// One input (the `input` of `POST control` and of `harness.input`), keyed on `op`.
    pub enum Input ["op"] {
        /// `prompt`
        Prompt(Prompt) = "prompt",
        /// `steer`
        Steer(Steer) = "steer",
        /// `followUp`
        FollowUp(FollowUp) = "followUp",
        /// `cancel`
        Cancel(Cancel) = "cancel",
        /// `answer`
        Answer(Answer) = "answer",
        /// `command`
        Command(Command) = "command",
        /// `agent`
        Agent(AgentRun) = "agent",
        /// `append`
        Append(Append) = "append",
        /// `setDelivery`
        SetDelivery(SetDelivery) = "setDelivery",
        /// `cancelInput`
        CancelInput(CancelInput) = "cancelInput",
        /// `continue`
        Continue(Continue) = "continue",
        /// `resolve`
        Resolve(Resolve) = "resolve",
        /// `background`
        Background(Background) = "background",
        /// `agentMessage`
        AgentMessage(AgentMessage) = "agentMessage",
        /// `configure`
        Configure(Configure) = "configure",
        /// `reset`
        Reset(ResetInput) = "reset",
    }
}

macro_rules! each_input {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Input::Prompt($v) => $e,
            Input::Steer($v) => $e,
            Input::FollowUp($v) => $e,
            Input::Cancel($v) => $e,
            Input::Answer($v) => $e,
            Input::Command($v) => $e,
            Input::Agent($v) => $e,
            Input::Append($v) => $e,
            Input::SetDelivery($v) => $e,
            Input::CancelInput($v) => $e,
            Input::Continue($v) => $e,
            Input::Resolve($v) => $e,
            Input::Background($v) => $e,
            Input::AgentMessage($v) => $e,
            Input::Configure($v) => $e,
            Input::Reset($v) => $e,
        }
    };
}

impl Input {
    /// A `prompt` with a text message.
    pub fn prompt(text: &str) -> Input {
        Input::Prompt(Prompt {
            message: Json::string(text),
            ..Prompt::default()
        })
    }

    /// A `cancel` of a run.
    pub fn cancel(operation_id: impl Into<String>) -> Input {
        Input::Cancel(Cancel {
            operation_id: operation_id.into(),
            ..Cancel::default()
        })
    }

    /// The `op`.
    pub fn op(&self) -> &'static str {
        self.tag()
    }

    /// The `inputId`, when the client set one.
    pub fn input_id(&self) -> Option<&str> {
        each_input!(self, v => v.input_id.as_deref())
    }

    /// Sets the `inputId`.
    pub fn set_input_id(&mut self, id: impl Into<String>) {
        let id = id.into();
        each_input!(self, v => v.input_id = Some(id))
    }

    /// Sets the `inputId` and returns the input.
    #[must_use]
    pub fn with_input_id(mut self, id: impl Into<String>) -> Input {
        self.set_input_id(id);
        self
    }

    /// Whether it is a message input (`prompt`, `steer`, `followUp`): the only inputs whose
    /// `traceparent` the harness reads.
    pub fn is_message(&self) -> bool {
        matches!(
            self,
            Input::Prompt(_) | Input::Steer(_) | Input::FollowUp(_)
        )
    }

    /// Whether an `inputId` makes it run once: "A `prompt`, `command`, `agent`, or `append`
    /// input with the same `inputId` runs once."
    pub fn is_idempotent(&self) -> bool {
        matches!(
            self,
            Input::Prompt(_) | Input::Command(_) | Input::Agent(_) | Input::Append(_)
        )
    }

    /// Why the input has a bad shape, if it does: the `message` of `prompt`, `steer`,
    /// `followUp`, `append` and `agentMessage` is text, a message object or its parts, never
    /// `null`, a number or a boolean; each entry of a `resolve` is a `ResumeEntry`. (`POST
    /// control` answers `400`, the socket `invalid_frame`.)
    pub fn shape_error(&self) -> Option<String> {
        // Each answer of a `resolve` is an AG-UI `ResumeEntry`: `{ interruptId, status:
        // "resolved" | "cancelled", payload? }`.
        if let Input::Resolve(r) = self {
            return r.resume.iter().find_map(|e| {
                e.parse::<crate::agui::ResumeEntry>().err().map(|err| {
                    format!(
                        "input.resume of resolve: each entry is {{interruptId, status: resolved | cancelled, payload?}}: {err}"
                    )
                })
            });
        }
        let m = match self {
            Input::Prompt(p) => &p.message,
            Input::Steer(p) => &p.message,
            Input::FollowUp(p) => &p.message,
            Input::Append(p) => &p.message,
            Input::AgentMessage(p) => &p.message,
            _ => return None,
        };
        (!(m.is_string() || m.is_object() || m.is_array())).then(|| {
            format!(
                "input.message of {} must be text, a message object or its parts, got {}",
                self.op(),
                m.get().chars().take(32).collect::<String>()
            )
        })
    }

    /// The text of the message of a message input (a string, or the text of a message object's
    /// `content` / `parts`).
    pub fn message_text(&self) -> Option<String> {
        let m = match self {
            Input::Prompt(p) => &p.message,
            Input::Steer(p) => &p.message,
            Input::FollowUp(p) => &p.message,
            Input::Append(p) => &p.message,
            _ => return None,
        };
        Some(json_text(&m.to_value()))
    }
}

/// The text of a message given as a string, `{content}` or `{parts:[{type:"text",text}]}`.
fn json_text(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            if let Some(c) = o.get("content") {
                return json_text(c);
            }
            if let Some(Value::Array(parts)) = o.get("parts") {
                return parts.iter().map(json_text).collect();
            }
            match o.get("text") {
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            }
        }
        Value::Array(a) => a.iter().map(json_text).collect(),
        _ => String::new(),
    }
}

wire_struct! {
    /// `harness.subscribe`: `threadId`, `from?`, `v?`. The first frame.
    pub struct Subscribe [tag "type" = "harness.subscribe" @ 0] {
        /// The thread.
        req thread_id: String = "threadId",
        /// Start after this cursor.
        opt_null(crate::wire::cursor_or_null) from: Cursor = "from",
        /// The protocol version (absent: the server's).
        opt(crate::wire::int) v: i64 = "v",
    }
}

wire_struct! {
    /// `harness.input`: `requestId`, `input`, `traceparent?`.
    pub struct InputFrame [tag "type" = "harness.input" @ 0] {
        /// A new id per input; the receipt and any error repeat it.
        opt request_id: String = "requestId",
        /// The input.
        req input: Input = "input",
        /// A W3C `traceparent`.
        opt traceparent: String = "traceparent",
    }
}

wire_struct! {
    /// `harness.snapshot` (client → host): asks for the snapshot of the session.
    pub struct SnapshotRequest [tag "type" = "harness.snapshot" @ 0] {}
}

wire_open_union! {
    /// A frame from the client to the host (socket and stdio worker).
    pub enum ClientFrame ["type"] {
        /// `harness.subscribe`
        Subscribe(Subscribe) = "harness.subscribe",
        /// `harness.input`
        Input(InputFrame) = "harness.input",
        /// `harness.snapshot`
        Snapshot(SnapshotRequest) = "harness.snapshot",
    }
}

wire_struct! {
    /// `harness.hello`: `v`, `threadId` (none on `host-events`).
    pub struct Hello [tag "type" = "harness.hello" @ 0] {
        /// The version the server uses.
        opt(crate::wire::int) v: i64 = "v",
        /// The thread.
        opt thread_id: String = "threadId",
    }
}

wire_struct! {
    /// `harness.receipt`: the answer to one `harness.input`.
    pub struct ReceiptFrame [tag "type" = "harness.receipt" @ 0] {
        /// The input's `requestId`.
        req request_id: String = "requestId",
        /// `accepted`, `queued`, or `rejected`.
        req status: ReceiptStatus = "status",
        /// The input's id (the client's when it sent one).
        opt input_id: String = "inputId",
        /// The run it started or went to.
        opt operation_id: String = "operationId",
        /// Why it was rejected.
        opt reason: String = "reason",
    }
}

wire_struct! {
    /// `harness.event`: one event of the session.
    pub struct EventFrame [tag "type" = "harness.event" @ 0] {
        /// Its position: store it, send it back, never parse it.
        req(crate::wire::cursor) cursor: Cursor = "cursor",
        /// The thread that keeps it.
        req thread_id: String = "threadId",
        /// The run that made it (the AG-UI `runId`).
        req operation_id: String = "operationId",
        /// The AG-UI event.
        req_in event: AguiEvent = "event",
    }
}

wire_struct! {
    /// `harness.snapshot` (host → client): the snapshot of the session.
    pub struct SnapshotFrame [tag "type" = "harness.snapshot" @ 0] {
        /// The snapshot.
        req snapshot: Json = "snapshot",
    }
}

wire_struct! {
    /// `harness.error`: `message`, `code`, `requestId`.
    pub struct ErrorFrame [tag "type" = "harness.error" @ 0] {
        /// For people.
        req message: String = "message",
        /// For code: read this one.
        opt code: ErrorCode = "code",
        /// The request it is about.
        opt request_id: String = "requestId",
    }
}

wire_struct! {
    /// `harness.ping`: a heartbeat on the socket. Ignore it.
    pub struct Ping [tag "type" = "harness.ping" @ 0] {}
}

wire_open_union! {
    /// A frame from the host to the client.
    pub enum HostFrame ["type"] {
        /// `harness.hello`
        Hello(Hello) = "harness.hello",
        /// `harness.receipt`
        Receipt(ReceiptFrame) = "harness.receipt",
        /// `harness.event`
        Event(EventFrame) = "harness.event",
        /// `harness.snapshot`
        Snapshot(SnapshotFrame) = "harness.snapshot",
        /// `harness.error`
        Error(ErrorFrame) = "harness.error",
        /// `harness.ping`
        Ping(Ping) = "harness.ping",
    }
}

/// A frame that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid frame: {message}")]
pub struct FrameError {
    /// What is wrong.
    pub message: String,
    /// The `requestId` of the frame, when it had a readable one.
    pub request_id: Option<String>,
}

impl ClientFrame {
    /// Reads a frame. On error, the frame's `requestId` is recovered when it has one, so
    /// the `invalid_frame` error can repeat it.
    pub fn from_json(text: &str) -> Result<ClientFrame, FrameError> {
        let frame: ClientFrame = serde_json::from_str(text).map_err(|e| FrameError {
            message: e.to_string(),
            request_id: request_id_of(text),
        })?;
        if let ClientFrame::Input(f) = &frame {
            if let Some(message) = f.input.shape_error() {
                return Err(FrameError {
                    message,
                    request_id: f.request_id.clone(),
                });
            }
        }
        Ok(frame)
    }

    /// Compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl HostFrame {
    /// Reads a frame.
    pub fn from_json(text: &str) -> Result<HostFrame, FrameError> {
        let mut frame = HostFrame::placeholder();
        frame.read_json(text)?;
        Ok(frame)
    }

    /// A fresh frame to read into (see [`read_json`](Self::read_json)): an empty
    /// `harness.event`, the frame a stream is made of, so that reading one fills it where it
    /// is. It allocates nothing.
    pub(crate) fn placeholder() -> HostFrame {
        HostFrame::Event(EventFrame {
            cursor: Cursor::default(),
            thread_id: String::new(),
            operation_id: String::new(),
            event: AguiEvent::Unknown(crate::agui::UnknownEvent::default()),
            extra: crate::Extra::new(),
        })
    }

    /// Reads a frame into a [`placeholder`](Self::placeholder): the frame is built where it
    /// stays.
    pub(crate) fn read_json(&mut self, text: &str) -> Result<(), FrameError> {
        use harness_core::wire::DeserializeInto;
        let mut de = serde_json::Deserializer::from_str(text);
        HostFrame::deserialize_into(&mut de, self)
            .and_then(|()| de.end())
            .map_err(|e| FrameError {
                message: e.to_string(),
                request_id: None,
            })
    }

    /// Compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A `harness.error` frame.
    pub fn error(
        code: ErrorCode,
        message: impl Into<String>,
        request_id: impl Into<String>,
    ) -> HostFrame {
        HostFrame::Error(ErrorFrame {
            message: message.into(),
            code: Some(code),
            request_id: Some(request_id.into()),
            ..ErrorFrame::default()
        })
    }
}

/// The `requestId` of a frame that did not parse, if it is a JSON object with a string one.
fn request_id_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct R {
        #[serde(rename = "requestId")]
        request_id: Option<serde_json::Value>,
    }
    let r: R = serde_json::from_str(text).ok()?;
    match r.request_id? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

wire_struct! {
    /// The body of `POST control`: `{ threadId, input }`.
    pub struct ControlRequest {
        /// The thread (missing: 400).
        req thread_id: String = "threadId",
        /// The input.
        req input: Input = "input",
    }
}

wire_struct! {
    /// The receipt of `POST control`: `{ inputId, status, operationId?, reason? }`.
    pub struct Receipt {
        /// The input's id.
        req input_id: String = "inputId",
        /// `accepted`, `queued`, or `rejected`.
        req status: ReceiptStatus = "status",
        /// The run.
        opt operation_id: String = "operationId",
        /// Why it was rejected.
        opt reason: String = "reason",
    }
}

#[allow(clippy::derivable_impls)]
impl Default for ReceiptStatus {
    fn default() -> Self {
        ReceiptStatus::Accepted
    }
}

impl Default for Input {
    fn default() -> Self {
        Input::Continue(Continue::default())
    }
}

wire_struct! {
    /// A run of the session (`activeOperations` of the snapshot).
    pub struct ActiveOperation {
        /// The run.
        req id: String = "id",
        /// Its kind.
        req kind: String = "kind",
    }
}

wire_struct! {
    /// An input waiting behind a turn (`waitingInputs` of the snapshot).
    pub struct WaitingInput {
        /// The input.
        req input_id: String = "inputId",
        /// `steer` or `queue`.
        req delivery: Delivery = "delivery",
        /// Its message.
        opt message: Json = "message",
    }
}

wire_struct! {
    /// The state of a session: what `GET snapshot` and the `harness.snapshot` frame carry.
    pub struct SessionSnapshot {
        /// The thread.
        req thread_id: String = "threadId",
        /// `idle` or `running`.
        req status: String = "status",
        /// The runs going on.
        req active_operations: Vec<ActiveOperation> = "activeOperations",
        /// Inputs waiting behind a turn.
        req waiting_inputs: Vec<WaitingInput> = "waitingInputs",
        /// The cursor of the last event of the thread when the snapshot was taken.
        opt_null(crate::wire::cursor_or_null) cursor: Cursor = "cursor",
    }
}
