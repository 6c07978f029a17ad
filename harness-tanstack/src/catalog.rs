//! The `harness.*` event catalog: the `CUSTOM` events a harness adds to the stream, as typed
//! values ([`HarnessEvent`]).
//!
//! Spec, "Event catalog": "A harness adds its own events to the stream as AG-UI `CUSTOM`
//! events. `name` is the event name, and `value` has the fields below. Ignore a name that you
//! do not know." A name this version does not know is kept as [`HarnessEvent::Unknown`].
//!
//! ```
//! use harness_tanstack::catalog::{Gap, GapReason, HarnessEvent};
//! use harness_core::Cursor;
//!
//! let gap = HarnessEvent::Gap(Gap {
//!     from: Cursor::new("12"),
//!     resume_at: Cursor::new("120"),
//!     reason: GapReason::Truncated,
//!     ..Gap::default()
//! });
//! let ev = gap.to_event();
//! assert_eq!(ev.to_json(),
//!     r#"{"type":"CUSTOM","name":"harness.gap","value":{"from":"12","resumeAt":"120","reason":"truncated"}}"#);
//! assert_eq!(HarnessEvent::from_event(&ev).unwrap().unwrap(), gap);
//! ```

use harness_core::Cursor;
use harness_core::{wire_enum, wire_struct};

use crate::Json;
use crate::agui::{AguiEvent, Custom};

wire_enum! {
    /// `harness.operation.started` `kind`.
    pub enum OperationKind {
        /// `chat`
        Chat = "chat",
        /// `agent`
        Agent = "agent",
        /// `command`
        Command = "command",
        /// `compact`
        Compact = "compact",
    }
}

wire_enum! {
    /// `harness.operation.finished` `status`.
    pub enum OperationStatus {
        /// `completed`
        Completed = "completed",
        /// `failed`
        Failed = "failed",
        /// `cancelled`
        Cancelled = "cancelled",
        /// `interrupted`
        Interrupted = "interrupted",
    }
}

wire_enum! {
    /// Where a waiting input goes: `steer` or `queue`.
    pub enum Delivery {
        /// `steer`: into the running turn.
        Steer = "steer",
        /// `queue`: after the running turn.
        Queue = "queue",
    }
}

wire_enum! {
    /// `harness.input.settled` `outcome`.
    pub enum InputOutcome {
        /// `completed`
        Completed = "completed",
        /// `aborted`
        Aborted = "aborted",
        /// `interrupted`
        Interrupted = "interrupted",
        /// `failed` (the only one with an `error`)
        Failed = "failed",
    }
}

wire_enum! {
    /// `harness.wait.opened` `kind`.
    pub enum WaitKind {
        /// `approval`
        Approval = "approval",
        /// `question`
        Question = "question",
        /// `sign-in`
        SignIn = "sign-in",
        /// `client-tool`
        ClientTool = "client-tool",
        /// `human`
        Human = "human",
    }
}

wire_enum! {
    /// `harness.wait.settled` `outcome`.
    pub enum WaitOutcome {
        /// `answered`
        Answered = "answered",
        /// `cancelled`
        Cancelled = "cancelled",
        /// `expired`
        Expired = "expired",
    }
}

wire_enum! {
    /// `harness.handoff` `by`.
    pub enum HandoffBy {
        /// `tool`
        Tool = "tool",
        /// `code`
        Code = "code",
        /// `router`
        Router = "router",
        /// `operator`
        Operator = "operator",
    }
}

wire_enum! {
    /// `harness.ownership.changed` `reason`.
    pub enum OwnershipReason {
        /// `taken_over`: the old owner's ownership expired with no release.
        TakenOver = "taken_over",
        /// `acquired`
        Acquired = "acquired",
    }
}

wire_enum! {
    /// `harness.gap` `reason`.
    pub enum GapReason {
        /// `truncated`: a truncate of the log.
        Truncated = "truncated",
        /// `evicted`: the server memory dropped old events.
        Evicted = "evicted",
    }
}

macro_rules! enum_defaults {
    ($($t:ident = $v:ident),*) => {
        $( impl Default for $t {
            fn default() -> Self {
                $t::$v
            }
        } )*
    };
}
enum_defaults!(
    OperationKind = Chat,
    OperationStatus = Completed,
    Delivery = Queue,
    InputOutcome = Completed,
    WaitKind = Question,
    WaitOutcome = Answered,
    HandoffBy = Code,
    OwnershipReason = Acquired,
    GapReason = Evicted
);

wire_struct! {
    /// `{ message, code?, retryAfterMs? }` of a retried turn.
    pub struct RetryError {
        /// For people.
        req message: String = "message",
        /// For code.
        opt code: String = "code",
        /// When to retry.
        opt retry_after_ms: u64 = "retryAfterMs",
    }
}

wire_struct! {
    /// `{ message, code? }` of a failed input.
    pub struct InputError {
        /// For people.
        req message: String = "message",
        /// For code.
        opt code: String = "code",
    }
}

wire_struct! {
    /// `harness.operation.started`: `{ operationId, kind, agent? }`.
    pub struct OperationStarted {
        /// The run.
        req operation_id: String = "operationId",
        /// `chat`, `agent`, `command`, or `compact`.
        req kind: OperationKind = "kind",
        /// The agent.
        opt agent: String = "agent",
    }
}

wire_struct! {
    /// `harness.operation.finished`: `{ operationId, status }`.
    pub struct OperationFinished {
        /// The run.
        req operation_id: String = "operationId",
        /// `completed`, `failed`, `cancelled`, or `interrupted`.
        req status: OperationStatus = "status",
    }
}

wire_struct! {
    /// `harness.operation.resumed`: `{ operationId, resumedFrom? }`.
    pub struct OperationResumed {
        /// The run.
        req operation_id: String = "operationId",
        /// Where it resumed from.
        opt resumed_from: String = "resumedFrom",
    }
}

wire_struct! {
    /// `harness.turn.retry`: `{ operationId, retries, error, continued }`.
    pub struct TurnRetry {
        /// The run.
        req operation_id: String = "operationId",
        /// How many retries so far.
        req retries: u64 = "retries",
        /// Why.
        req error: RetryError = "error",
        /// Whether the model continues a partial answer.
        req continued: bool = "continued",
    }
}

wire_struct! {
    /// `harness.handoff`: `{ from, to, note?, runId, by, waitId? }`. `from` and `to` are an
    /// agent name, `null` for the main model, or `{ human: true }`.
    pub struct HandoffEvent {
        /// From whom.
        req from: Json = "from",
        /// To whom.
        req to: Json = "to",
        /// A note.
        opt note: String = "note",
        /// The run.
        req run_id: String = "runId",
        /// `tool`, `code`, `router`, or `operator`.
        req by: HandoffBy = "by",
        /// The wait of a handoff to a person.
        opt wait_id: String = "waitId",
    }
}

wire_struct! {
    /// `harness.usage`: `{ model, sender?, source?, label?, usage, total }`.
    pub struct UsageEvent {
        /// The model.
        req model: String = "model",
        /// Who called it.
        opt sender: String = "sender",
        /// `plugin:<name>`, `router`, or `transfer`; absent for a turn or an agent run.
        opt source: String = "source",
        /// A label.
        opt label: String = "label",
        /// This model call.
        req usage: Json = "usage",
        /// The new total of the thread.
        req total: Json = "total",
    }
}

wire_struct! {
    /// `harness.input.accepted`: `{ inputId, op, message?, traceparent? }`.
    pub struct InputAccepted {
        /// The input.
        req input_id: String = "inputId",
        /// Its op.
        req op: String = "op",
        /// The user message of a `prompt`, `steer`, or `followUp`.
        opt message: Json = "message",
        /// The W3C `traceparent` the input came with, when valid (a message input only).
        /// This record is the log's `harness.input` record: "It stores the value on the
        /// `harness.input` record of the log" (spec, "Traces").
        opt traceparent: String = "traceparent",
    }
}

wire_struct! {
    /// `harness.input.queued`: `{ inputId, delivery }`.
    pub struct InputQueued {
        /// The input.
        req input_id: String = "inputId",
        /// `steer` or `queue`.
        req delivery: Delivery = "delivery",
    }
}

wire_struct! {
    /// `harness.input.applied`: `{ inputId, operationId }`.
    pub struct InputApplied {
        /// The input.
        req input_id: String = "inputId",
        /// The run it went to.
        req operation_id: String = "operationId",
    }
}

wire_struct! {
    /// `harness.input.rejected`: `{ inputId, reason }`.
    pub struct InputRejected {
        /// The input.
        req input_id: String = "inputId",
        /// Why.
        req reason: String = "reason",
    }
}

wire_struct! {
    /// `harness.input.settled`: `{ inputId, operationId?, outcome, error? }`.
    pub struct InputSettled {
        /// The input.
        req input_id: String = "inputId",
        /// The run.
        opt operation_id: String = "operationId",
        /// `completed`, `aborted`, `interrupted`, or `failed`.
        req outcome: InputOutcome = "outcome",
        /// Only with `failed`.
        opt error: InputError = "error",
    }
}

wire_struct! {
    /// `harness.input.delivery`: `{ inputId, delivery }`.
    pub struct InputDelivery {
        /// The input.
        req input_id: String = "inputId",
        /// Where it goes now.
        req delivery: Delivery = "delivery",
    }
}

wire_struct! {
    /// `harness.wait.opened`: `{ waitId, kind, runId, message?, expiresAt? }`.
    pub struct WaitOpened {
        /// The wait.
        req wait_id: String = "waitId",
        /// `approval`, `question`, `sign-in`, `client-tool`, or `human`.
        req kind: WaitKind = "kind",
        /// The run.
        req run_id: String = "runId",
        /// For people.
        opt message: String = "message",
        /// Epoch milliseconds.
        opt expires_at: i64 = "expiresAt",
    }
}

wire_struct! {
    /// `harness.wait.settled`: `{ waitId, outcome }`.
    pub struct WaitSettled {
        /// The wait.
        req wait_id: String = "waitId",
        /// `answered`, `cancelled`, or `expired`.
        req outcome: WaitOutcome = "outcome",
    }
}

wire_struct! {
    /// `harness.question`: `{ questionId, message, schema?, secret?, url? }`.
    pub struct QuestionEvent {
        /// The question (answer it with the `answer` input).
        req question_id: String = "questionId",
        /// For people.
        req message: String = "message",
        /// JSON Schema of the answer.
        opt schema: Json = "schema",
        /// Whether the answer is a secret.
        opt secret: bool = "secret",
        /// A URL to open.
        opt url: String = "url",
    }
}

wire_struct! {
    /// `harness.question.answered`: `{ questionId }`.
    pub struct QuestionAnswered {
        /// The question.
        req question_id: String = "questionId",
    }
}

wire_struct! {
    /// `harness.auth_required`: `{ connector, url?, userCode? }`.
    pub struct AuthRequired {
        /// The connector that needs a sign-in.
        req connector: String = "connector",
        /// Where to sign in.
        opt url: String = "url",
        /// The code to enter.
        opt user_code: String = "userCode",
    }
}

wire_struct! {
    /// `harness.config.changed`: `{ key, value }`.
    pub struct ConfigChanged {
        /// The key.
        req key: String = "key",
        /// The new value.
        req value: Json = "value",
    }
}

wire_struct! {
    /// `harness.settings.changed`: `{ settings }`.
    pub struct SettingsChanged {
        /// The settings.
        req settings: Json = "settings",
    }
}

wire_struct! {
    /// `harness.commands.changed`: `{}`. Load `GET describe` again.
    pub struct CommandsChanged {}
}

wire_struct! {
    /// `harness.reloaded`: `{ error? }`. The plugins started again.
    pub struct Reloaded {
        /// Why a reload failed.
        opt error: Json = "error",
    }
}

wire_struct! {
    /// `harness.reset`: `{ inputId, note? }`. The next turn starts a fresh model context.
    pub struct Reset {
        /// The input.
        req input_id: String = "inputId",
        /// A note.
        opt note: String = "note",
    }
}

wire_struct! {
    /// `harness.revert`: `{ messageId }` (`null` when no revert stands).
    pub struct Revert {
        /// The message, or `None` for `null` (no revert stands).
        req message_id: Option<String> = "messageId",
    }
}

wire_struct! {
    /// `harness.media`: a media record.
    pub struct Media {
        /// The media id.
        req id: String = "id",
        /// The thread.
        req thread_id: String = "threadId",
        /// Its kind.
        req kind: String = "kind",
        /// Its media type.
        req mime_type: String = "mimeType",
        /// Its name.
        req name: String = "name",
        /// Its size in bytes.
        req size: u64 = "size",
        /// When it was made.
        req created_at: Json = "createdAt",
        /// Where it came from.
        req source: Json = "source",
    }
}

wire_struct! {
    /// `harness.plugin.event`: `{ plugin, name, value }`.
    pub struct PluginEvent {
        /// The plugin.
        req plugin: String = "plugin",
        /// The event name.
        req name: String = "name",
        /// The value.
        req value: Json = "value",
    }
}

wire_struct! {
    /// `harness.plugin.warning`: `{ plugin, message }`.
    pub struct PluginWarning {
        /// The plugin.
        req plugin: String = "plugin",
        /// What failed.
        req message: String = "message",
    }
}

wire_struct! {
    /// `harness.ownership.changed`: `{ epoch, reason }`.
    pub struct OwnershipChanged {
        /// The ownership epoch.
        req epoch: u64 = "epoch",
        /// `taken_over` or `acquired`.
        req reason: OwnershipReason = "reason",
    }
}

wire_struct! {
    /// `harness.stranded`: `{ operationId?, hostId? }`.
    pub struct Stranded {
        /// The run that tried the workspace.
        opt operation_id: String = "operationId",
        /// The host of a folder.
        opt host_id: String = "hostId",
    }
}

wire_struct! {
    /// `{ threadId }`, an end of a transfer.
    pub struct ThreadRef {
        /// The thread.
        req thread_id: String = "threadId",
    }
}

wire_struct! {
    /// `harness.transferred`: `{ transferId, from?, to? }`.
    pub struct Transferred {
        /// The transfer.
        req transfer_id: String = "transferId",
        /// Where the conversation came from.
        opt from: ThreadRef = "from",
        /// Where it went.
        opt to: ThreadRef = "to",
    }
}

wire_struct! {
    /// `harness.gap`: `{ from, resumeAt, reason }`.
    pub struct Gap {
        /// The cursor that the client sent.
        req(crate::wire::cursor) from: Cursor = "from",
        /// The cursor of this event; the stream continues after it.
        req(crate::wire::cursor) resume_at: Cursor = "resumeAt",
        /// `truncated` or `evicted`.
        req reason: GapReason = "reason",
    }
}

macro_rules! catalog {
    ($( $(#[$m:meta])* $var:ident($ty:ty) = $name:literal ),* $(,)?) => {
        /// One `harness.*` event, typed. Read it from a `CUSTOM` event with
        /// [`from_event`](Self::from_event); write it with [`to_event`](Self::to_event).
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum HarnessEvent {
            $( $(#[$m])* $var($ty), )*
            /// A name this version does not know, with its value.
            Unknown {
                /// The name.
                name: String,
                /// The value.
                value: Json,
            },
        }

        /// Every name of the catalog.
        pub const NAMES: &[&str] = &[$($name),*];

        impl HarnessEvent {
            /// The event name.
            pub fn name(&self) -> &str {
                match self {
                    $( HarnessEvent::$var(_) => $name, )*
                    HarnessEvent::Unknown { name, .. } => name,
                }
            }

            /// The `value`, as JSON.
            pub fn value(&self) -> Json {
                let r = match self {
                    $( HarnessEvent::$var(v) => Json::new(v), )*
                    HarnessEvent::Unknown { value, .. } => return value.clone(),
                };
                r.unwrap_or_default()
            }

            /// Reads a `CUSTOM` name and value. A name outside the catalog is `Unknown`;
            /// a catalog name whose value does not fit is an error.
            pub fn from_custom(name: &str, value: &Json) -> Result<HarnessEvent, serde_json::Error> {
                Ok(match name {
                    $( $name => HarnessEvent::$var(value.parse()?), )*
                    other => HarnessEvent::Unknown { name: other.to_owned(), value: value.clone() },
                })
            }
        }
    };
}

catalog! {
    /// `harness.operation.started`
    OperationStarted(OperationStarted) = "harness.operation.started",
    /// `harness.operation.finished`
    OperationFinished(OperationFinished) = "harness.operation.finished",
    /// `harness.operation.resumed`
    OperationResumed(OperationResumed) = "harness.operation.resumed",
    /// `harness.turn.retry`
    TurnRetry(TurnRetry) = "harness.turn.retry",
    /// `harness.handoff`
    Handoff(HandoffEvent) = "harness.handoff",
    /// `harness.usage`
    Usage(UsageEvent) = "harness.usage",
    /// `harness.input.accepted`
    InputAccepted(InputAccepted) = "harness.input.accepted",
    /// `harness.input.queued`
    InputQueued(InputQueued) = "harness.input.queued",
    /// `harness.input.applied`
    InputApplied(InputApplied) = "harness.input.applied",
    /// `harness.input.rejected`
    InputRejected(InputRejected) = "harness.input.rejected",
    /// `harness.input.settled`
    InputSettled(InputSettled) = "harness.input.settled",
    /// `harness.input.delivery`
    InputDelivery(InputDelivery) = "harness.input.delivery",
    /// `harness.wait.opened`
    WaitOpened(WaitOpened) = "harness.wait.opened",
    /// `harness.wait.settled`
    WaitSettled(WaitSettled) = "harness.wait.settled",
    /// `harness.question`
    Question(QuestionEvent) = "harness.question",
    /// `harness.question.answered`
    QuestionAnswered(QuestionAnswered) = "harness.question.answered",
    /// `harness.auth_required`
    AuthRequired(AuthRequired) = "harness.auth_required",
    /// `harness.config.changed`
    ConfigChanged(ConfigChanged) = "harness.config.changed",
    /// `harness.settings.changed`
    SettingsChanged(SettingsChanged) = "harness.settings.changed",
    /// `harness.commands.changed`
    CommandsChanged(CommandsChanged) = "harness.commands.changed",
    /// `harness.reloaded`
    Reloaded(Reloaded) = "harness.reloaded",
    /// `harness.reset`
    Reset(Reset) = "harness.reset",
    /// `harness.revert`
    Revert(Revert) = "harness.revert",
    /// `harness.media`
    Media(Media) = "harness.media",
    /// `harness.plugin.event`
    PluginEvent(PluginEvent) = "harness.plugin.event",
    /// `harness.plugin.warning`
    PluginWarning(PluginWarning) = "harness.plugin.warning",
    /// `harness.ownership.changed`
    OwnershipChanged(OwnershipChanged) = "harness.ownership.changed",
    /// `harness.stranded`
    Stranded(Stranded) = "harness.stranded",
    /// `harness.transferred`
    Transferred(Transferred) = "harness.transferred",
    /// `harness.gap`
    Gap(Gap) = "harness.gap",
}

impl HarnessEvent {
    /// The `CUSTOM` event that carries it.
    pub fn to_event(&self) -> AguiEvent {
        AguiEvent::Custom(Custom {
            name: self.name().to_owned(),
            value: self.value(),
            ..Custom::default()
        })
    }

    /// Reads a `harness.*` event from an AG-UI event: `None` when it is not a `CUSTOM`
    /// event, `Some(Err)` when a catalog name carries a value that does not fit.
    pub fn from_event(ev: &AguiEvent) -> Option<Result<HarnessEvent, serde_json::Error>> {
        match ev {
            AguiEvent::Custom(c) => Some(HarnessEvent::from_custom(&c.name, &c.value)),
            _ => None,
        }
    }
}
