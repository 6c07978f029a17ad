//! The crate's frames and the prost messages of `proto/agentsessions.proto`, both ways.
//!
//! Enums cross by their proto names (the serde names of the crate's types), so a number
//! this version does not know becomes the type's default (or, for an event kind, an
//! [`EventBody::Unknown`]); JSON objects cross as `google.protobuf.Struct` (numbers as
//! float64, as in Go). Nothing here panics on any message.

use std::collections::BTreeMap;

use harness_core::event::{
    ApprovalRequest, ApprovalResult, ErrorInfo, Event, EventBody, EventKind, ExecutionStart,
    HarnessEnd, IdentityRef, Lifecycle, ModelCall,
};
use harness_core::message::{
    DataPart, FilePart, JsonObject, Message, Part, ReasoningPart, Role, TextPart, ToolCall,
    ToolChoice, ToolDefinition, ToolResult, ToolSpec, Usage,
};
use harness_core::{Capabilities, Descriptor, History, IdentityContext, Resumability, Start};
use prost_types::value::Kind;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::frame::{ApprovalRef, ControllerFrame, Frame, HarnessFrame, ModelResult};
use super::pb;

/// An enum of the crate's (serialized as its proto name) as the proto number `from` gives.
fn to_num<T: Serialize>(v: &T, from: fn(&str) -> Option<i32>) -> i32 {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => from(&s).unwrap_or(0),
        _ => 0,
    }
}

/// A proto number as an enum of the crate's (its default for a number it does not know).
fn from_num<T: DeserializeOwned + Default>(name: Option<&str>) -> T {
    name.and_then(|n| serde_json::from_value(Value::String(n.to_owned())).ok())
        .unwrap_or_default()
}

fn sat(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

// ---- JSON objects as google.protobuf.Struct ----

fn value_to_pb(v: &Value) -> prost_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.iter().map(value_to_pb).collect(),
        }),
        Value::Object(o) => Kind::StructValue(object_to_pb(o)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn object_to_pb(o: &JsonObject) -> prost_types::Struct {
    prost_types::Struct {
        fields: o.iter().map(|(k, v)| (k.clone(), value_to_pb(v))).collect(),
    }
}

fn value_from_pb(v: prost_types::Value) -> Value {
    match v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n).map_or(Value::Null, |n| {
            // Whole numbers read back as integers, as proto3-JSON writes them.
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => {
                    Value::from(f as i64)
                }
                _ => Value::Number(n),
            }
        }),
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.into_iter().map(value_from_pb).collect()),
        Some(Kind::StructValue(s)) => Value::Object(object_from_pb(s)),
    }
}

fn object_from_pb(s: prost_types::Struct) -> JsonObject {
    s.fields
        .into_iter()
        .map(|(k, v)| (k, value_from_pb(v)))
        .collect()
}

// ---- messages and parts ----

impl From<&Message> for pb::Message {
    fn from(m: &Message) -> Self {
        pb::Message {
            role: m.role.as_str().to_owned(),
            parts: m.parts.iter().map(pb::Part::from).collect(),
        }
    }
}

impl From<pb::Message> for Message {
    fn from(m: pb::Message) -> Self {
        Message {
            role: Role::from(m.role.as_str()),
            parts: m.parts.into_iter().filter_map(part_from_pb).collect(),
        }
    }
}

impl From<&Part> for pb::Part {
    fn from(p: &Part) -> Self {
        use pb::part::Part as P;
        let part = match p {
            Part::Text(t) => P::Text(pb::TextPart {
                text: t.text.clone(),
            }),
            Part::File(f) => P::File(pb::FilePart {
                mime: f.mime.clone(),
                name: f.name.clone(),
                digest: f.digest.clone(),
                source: match &f.bytes {
                    Some(b) => Some(pb::file_part::Source::Bytes(b.clone())),
                    None if !f.uri.is_empty() => Some(pb::file_part::Source::Uri(f.uri.clone())),
                    None => None,
                },
            }),
            Part::Data(d) => P::Data(pb::DataPart {
                data: Some(object_to_pb(&d.data)),
            }),
            Part::Reasoning(r) => P::Reasoning(pb::ReasoningPart {
                provider: r.provider.clone(),
                model_id: r.model_id.clone(),
                summary: r.summary.iter().map(pb::Part::from).collect(),
                item_id: r.item_id.clone(),
                ordinal: r.ordinal,
                validity_scope: r.validity_scope.clone(),
                opaque_digest: r.opaque_digest.clone(),
                opaque: match &r.opaque {
                    Some(b) => Some(pb::reasoning_part::Opaque::OpaqueBytes(b.clone())),
                    None if !r.opaque_uri.is_empty() => {
                        Some(pb::reasoning_part::Opaque::OpaqueUri(r.opaque_uri.clone()))
                    }
                    None => None,
                },
            }),
            Part::ToolCall(c) => P::ToolCall(c.into()),
            Part::ToolResult(r) => P::ToolResult(r.into()),
            // A part this version of the wire does not carry.
            _ => return pb::Part { part: None },
        };
        pb::Part { part: Some(part) }
    }
}

/// A part as the crate reads it (`None` for a part with no member set).
fn part_from_pb(p: pb::Part) -> Option<Part> {
    {
        use pb::part::Part as P;
        Some(match p.part? {
            P::Text(t) => Part::Text(TextPart { text: t.text }),
            P::File(f) => {
                let (bytes, uri) = match f.source {
                    Some(pb::file_part::Source::Bytes(b)) => (Some(b), String::new()),
                    Some(pb::file_part::Source::Uri(u)) => (None, u),
                    None => (None, String::new()),
                };
                Part::File(FilePart {
                    mime: f.mime,
                    bytes,
                    uri,
                    name: f.name,
                    digest: f.digest,
                })
            }
            P::Data(d) => Part::Data(DataPart {
                data: d.data.map(object_from_pb).unwrap_or_default(),
            }),
            P::Reasoning(r) => {
                let (opaque, opaque_uri) = match r.opaque {
                    Some(pb::reasoning_part::Opaque::OpaqueBytes(b)) => (Some(b), String::new()),
                    Some(pb::reasoning_part::Opaque::OpaqueUri(u)) => (None, u),
                    None => (None, String::new()),
                };
                Part::Reasoning(ReasoningPart {
                    provider: r.provider,
                    model_id: r.model_id,
                    opaque,
                    opaque_uri,
                    summary: r.summary.into_iter().filter_map(part_from_pb).collect(),
                    item_id: r.item_id,
                    ordinal: r.ordinal,
                    validity_scope: r.validity_scope,
                    opaque_digest: r.opaque_digest,
                })
            }
            P::ToolCall(c) => Part::ToolCall(c.into()),
            P::ToolResult(r) => Part::ToolResult(r.into()),
        })
    }
}

impl From<&ToolCall> for pb::ToolCall {
    fn from(c: &ToolCall) -> Self {
        pb::ToolCall {
            id: c.id.clone(),
            tool: c.tool.clone(),
            args: Some(object_to_pb(&c.args)),
            mediation: to_num(&c.mediation, |s| {
                pb::Mediation::from_str_name(s).map(|m| m as i32)
            }),
            idempotency_key: c.idempotency_key.clone(),
        }
    }
}

impl From<pb::ToolCall> for ToolCall {
    fn from(c: pb::ToolCall) -> Self {
        ToolCall {
            id: c.id,
            tool: c.tool,
            args: c.args.map(object_from_pb).unwrap_or_default(),
            mediation: from_num(
                pb::Mediation::try_from(c.mediation)
                    .ok()
                    .map(|m| m.as_str_name()),
            ),
            idempotency_key: c.idempotency_key,
        }
    }
}

impl From<&ToolResult> for pb::ToolResult {
    fn from(r: &ToolResult) -> Self {
        pb::ToolResult {
            id: r.id.clone(),
            output: r.output.as_ref().map(object_to_pb),
            output_uri: r.output_uri.clone(),
            is_error: r.is_error,
            error: r.error.clone(),
            output_digest: r.output_digest.clone(),
            content: r.content.iter().map(pb::Part::from).collect(),
            code: to_num(&r.code, |s| {
                pb::tool_result::Code::from_str_name(s).map(|c| c as i32)
            }),
            approval_request_seq: r.approval_request_seq,
            approval_decision_seq: r.approval_decision_seq,
        }
    }
}

impl From<pb::ToolResult> for ToolResult {
    fn from(r: pb::ToolResult) -> Self {
        ToolResult {
            id: r.id,
            output: r.output.map(object_from_pb),
            output_uri: r.output_uri,
            is_error: r.is_error,
            error: r.error,
            output_digest: r.output_digest,
            content: r.content.into_iter().filter_map(part_from_pb).collect(),
            code: from_num(
                pb::tool_result::Code::try_from(r.code)
                    .ok()
                    .map(|c| c.as_str_name()),
            ),
            approval_request_seq: r.approval_request_seq,
            approval_decision_seq: r.approval_decision_seq,
        }
    }
}

impl From<&Usage> for pb::Usage {
    fn from(u: &Usage) -> Self {
        pb::Usage {
            model: u.model.clone(),
            input_tokens: sat(u.input_tokens),
            output_tokens: sat(u.output_tokens),
            reasoning_tokens: sat(u.reasoning_tokens),
        }
    }
}

impl From<pb::Usage> for Usage {
    fn from(u: pb::Usage) -> Self {
        Usage {
            model: u.model,
            input_tokens: unsigned(u.input_tokens),
            output_tokens: unsigned(u.output_tokens),
            reasoning_tokens: unsigned(u.reasoning_tokens),
        }
    }
}

impl From<&ModelCall> for pb::ModelCall {
    fn from(m: &ModelCall) -> Self {
        pb::ModelCall {
            model: m.model.clone(),
            params: m
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            input_hash: m.input_hash.clone(),
            id: m.id.clone(),
            messages: m.messages.iter().map(pb::Message::from).collect(),
            tools: m
                .tools
                .iter()
                .map(|t| pb::ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.as_ref().map(object_to_pb),
                })
                .collect(),
            tool_choice: m.tool_choice.as_ref().map(|c| pb::ToolChoice {
                mode: to_num(&c.mode, |s| {
                    pb::tool_choice::Mode::from_str_name(s).map(|m| m as i32)
                }),
                name: c.name.clone(),
            }),
        }
    }
}

impl From<pb::ModelCall> for ModelCall {
    fn from(m: pb::ModelCall) -> Self {
        ModelCall {
            model: m.model,
            params: m.params.into_iter().collect::<BTreeMap<_, _>>(),
            input_hash: m.input_hash,
            id: m.id,
            messages: m.messages.into_iter().map(Message::from).collect(),
            tools: m
                .tools
                .into_iter()
                .map(|t| ToolDefinition {
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema.map(object_from_pb),
                })
                .collect(),
            tool_choice: m.tool_choice.map(|c| ToolChoice {
                mode: from_num(
                    pb::tool_choice::Mode::try_from(c.mode)
                        .ok()
                        .map(|m| m.as_str_name()),
                ),
                name: c.name,
            }),
        }
    }
}

fn approval_result_pb(a: &ApprovalResult) -> pb::ApprovalResult {
    pb::ApprovalResult {
        tool_call_id: a.tool_call_id.clone(),
        approved: a.approved,
        reason: a.reason.clone(),
        request_seq: a.request_seq,
    }
}

fn approval_result(a: pb::ApprovalResult) -> ApprovalResult {
    ApprovalResult {
        tool_call_id: a.tool_call_id,
        approved: a.approved,
        reason: a.reason,
        request_seq: a.request_seq,
    }
}

fn error_pb(e: &ErrorInfo) -> pb::Error {
    pb::Error {
        code: e.code,
        description: e.description.clone(),
    }
}

fn error_info(e: pb::Error) -> ErrorInfo {
    ErrorInfo {
        code: e.code,
        description: e.description,
    }
}

fn approval_ref_pb(a: &ApprovalRef) -> pb::ApprovalRef {
    pb::ApprovalRef {
        execution_id: a.execution_id.clone(),
        tool_call_id: a.tool_call_id.clone(),
        request_seq: a.request_seq,
    }
}

fn approval_ref(a: pb::ApprovalRef) -> ApprovalRef {
    ApprovalRef {
        execution_id: a.execution_id,
        tool_call_id: a.tool_call_id,
        request_seq: a.request_seq,
    }
}

// ---- events ----

impl From<&Event> for pb::Event {
    fn from(e: &Event) -> Self {
        use pb::event::Body as B;
        let kind_num =
            |k: EventKind| to_num(&k, |s| pb::EventKind::from_str_name(s).map(|k| k as i32));
        let (kind, body) = match &e.body {
            EventBody::Input(m) => (kind_num(EventKind::Input), Some(B::Message(m.into()))),
            EventBody::Output(m) => (kind_num(EventKind::Output), Some(B::Message(m.into()))),
            EventBody::ModelCall(m) => (kind_num(EventKind::ModelCall), Some(B::Model(m.into()))),
            EventBody::ToolCall(c) => (kind_num(EventKind::ToolCall), Some(B::Tool(c.into()))),
            EventBody::ToolResult(r) => {
                (kind_num(EventKind::ToolResult), Some(B::Result(r.into())))
            }
            EventBody::ApprovalRequest(a) => (
                kind_num(EventKind::ApprovalRequest),
                Some(B::Approval(pb::ApprovalRequest {
                    tool_call_id: a.tool_call_id.clone(),
                    reason: a.reason.clone(),
                })),
            ),
            EventBody::ApprovalResult(a) => (
                kind_num(EventKind::ApprovalResult),
                Some(B::ApprovalResult(approval_result_pb(a))),
            ),
            EventBody::Usage(u) => (kind_num(EventKind::Usage), Some(B::Usage(u.into()))),
            EventBody::Lifecycle(l) => (
                kind_num(EventKind::Lifecycle),
                Some(B::Lifecycle(pb::Lifecycle {
                    kind: to_num(&l.kind, |s| {
                        pb::LifecycleKind::from_str_name(s).map(|k| k as i32)
                    }),
                    detail: l.detail.clone(),
                    snapshot_local: l.snapshot_local.clone(),
                    snapshot_external_uri: l.snapshot_external_uri.clone(),
                    snapshot_memory: l.snapshot_memory,
                    snapshot_sealed: l.snapshot_sealed,
                })),
            ),
            EventBody::End(end) => (
                kind_num(EventKind::End),
                Some(B::End(pb::HarnessEnd {
                    state: end.state.clone(),
                    error: end.error.as_ref().map(error_pb),
                })),
            ),
            EventBody::Error(err) => (kind_num(EventKind::Error), Some(B::Error(error_pb(err)))),
            EventBody::ExecutionStart(s) => (
                kind_num(EventKind::ExecutionStart),
                Some(B::ExecutionStart(pb::ExecutionStart {
                    config: s.config.clone(),
                    resume_from_seq: s.resume_from_seq,
                    input_count: s.input_count,
                    harness: s.harness.clone(),
                    harness_version: s.harness_version.clone(),
                })),
            ),
            EventBody::Unknown { kind, .. } => (
                pb::EventKind::from_str_name(kind)
                    .map_or_else(|| kind.parse().unwrap_or(0), |k| k as i32),
                None,
            ),
            // A body this version of the wire does not carry: its kind only.
            other => (kind_num(other.kind()), None),
        };
        pb::Event {
            execution_id: e.execution_id.clone(),
            ts: e.timestamp.map(|t| prost_types::Timestamp {
                seconds: t.seconds,
                nanos: t.nanos,
            }),
            schema_version: e.schema_version,
            kind,
            actor: e.actor.as_ref().map(|a| pb::IdentityRef {
                principal: a.principal.clone(),
                issuer: a.issuer.clone(),
                subject: a.subject.clone(),
            }),
            body,
        }
    }
}

/// An event as the crate reads it; `EVENT_PARKED` is not an event (see [`HarnessFrame`]).
fn event_from_pb(e: pb::Event) -> Event {
    use pb::event::Body as B;
    let kind = pb::EventKind::try_from(e.kind).ok();
    let body = match (kind, e.body) {
        (Some(pb::EventKind::EventInput), Some(B::Message(m))) => EventBody::Input(m.into()),
        (Some(pb::EventKind::EventInput), _) => EventBody::Input(Message::default()),
        (Some(pb::EventKind::EventOutput), Some(B::Message(m))) => EventBody::Output(m.into()),
        (Some(pb::EventKind::EventOutput), _) => EventBody::Output(Message::default()),
        (Some(pb::EventKind::EventModelCall), b) => EventBody::ModelCall(match b {
            Some(B::Model(m)) => m.into(),
            _ => ModelCall::default(),
        }),
        (Some(pb::EventKind::EventToolCall), b) => EventBody::ToolCall(match b {
            Some(B::Tool(c)) => c.into(),
            _ => ToolCall::default(),
        }),
        (Some(pb::EventKind::EventToolResult), b) => EventBody::ToolResult(match b {
            Some(B::Result(r)) => r.into(),
            _ => ToolResult::default(),
        }),
        (Some(pb::EventKind::EventApprovalRequest), b) => EventBody::ApprovalRequest(match b {
            Some(B::Approval(a)) => ApprovalRequest {
                tool_call_id: a.tool_call_id,
                reason: a.reason,
            },
            _ => ApprovalRequest::default(),
        }),
        (Some(pb::EventKind::EventApprovalResult), b) => EventBody::ApprovalResult(match b {
            Some(B::ApprovalResult(a)) => approval_result(a),
            _ => ApprovalResult::default(),
        }),
        (Some(pb::EventKind::EventUsage), b) => EventBody::Usage(match b {
            Some(B::Usage(u)) => u.into(),
            _ => Usage::default(),
        }),
        (Some(pb::EventKind::EventLifecycle), b) => EventBody::Lifecycle(match b {
            Some(B::Lifecycle(l)) => Lifecycle {
                kind: from_num(
                    pb::LifecycleKind::try_from(l.kind)
                        .ok()
                        .map(|k| k.as_str_name()),
                ),
                detail: l.detail,
                snapshot_local: l.snapshot_local,
                snapshot_external_uri: l.snapshot_external_uri,
                snapshot_memory: l.snapshot_memory,
                snapshot_sealed: l.snapshot_sealed,
            },
            _ => Lifecycle::default(),
        }),
        (Some(pb::EventKind::EventEnd), b) => EventBody::End(match b {
            Some(B::End(end)) => HarnessEnd {
                state: end.state,
                error: end.error.map(error_info),
            },
            _ => HarnessEnd::default(),
        }),
        (Some(pb::EventKind::EventError), b) => EventBody::Error(match b {
            Some(B::Error(err)) => error_info(err),
            _ => ErrorInfo::default(),
        }),
        (Some(pb::EventKind::EventExecutionStart), b) => EventBody::ExecutionStart(match b {
            Some(B::ExecutionStart(s)) => ExecutionStart {
                config: s.config,
                resume_from_seq: s.resume_from_seq,
                input_count: s.input_count,
                harness: s.harness,
                harness_version: s.harness_version,
            },
            _ => ExecutionStart::default(),
        }),
        (k, _) => EventBody::Unknown {
            kind: k.map_or_else(|| e.kind.to_string(), |k| k.as_str_name().to_owned()),
            fields: serde_json::Map::new(),
        },
    };
    Event {
        execution_id: e.execution_id,
        timestamp: e.ts.map(|t| harness_core::Timestamp {
            seconds: t.seconds,
            nanos: t.nanos,
        }),
        schema_version: e.schema_version,
        actor: e.actor.map(|a| IdentityRef {
            principal: a.principal,
            issuer: a.issuer,
            subject: a.subject,
        }),
        body,
    }
}

impl From<&HarnessFrame> for pb::Event {
    fn from(f: &HarnessFrame) -> Self {
        match f {
            HarnessFrame::Event(e) => e.into(),
            HarnessFrame::Parked {
                execution_id,
                parked,
            } => pb::Event {
                execution_id: execution_id.clone(),
                kind: pb::EventKind::EventParked as i32,
                body: Some(pb::event::Body::Parked(approval_ref_pb(parked))),
                ..pb::Event::default()
            },
        }
    }
}

impl From<pb::Event> for HarnessFrame {
    fn from(e: pb::Event) -> Self {
        if e.kind == pb::EventKind::EventParked as i32 {
            let parked = match e.body {
                Some(pb::event::Body::Parked(p)) => approval_ref(p),
                _ => ApprovalRef::default(),
            };
            return HarnessFrame::Parked {
                execution_id: e.execution_id,
                parked,
            };
        }
        HarnessFrame::Event(event_from_pb(e))
    }
}

// ---- the host's frames ----

impl From<&ControllerFrame> for pb::ControllerFrame {
    fn from(f: &ControllerFrame) -> Self {
        use pb::controller_frame::Frame as F;
        let frame = f.frame.as_ref().map(|fr| match fr {
            Frame::Start(s) => F::Start(pb::Start {
                config: s.config.clone(),
                history: s.history.iter().map(pb::Event::from).collect(),
                inputs: s.inputs.iter().map(pb::Message::from).collect(),
                // The Go bridge never fills identity; neither does this one.
                identity: None,
                resume_from_seq: s.resume_from_seq,
            }),
            Frame::Cancel { reason } => F::Cancel(pb::Cancel {
                reason: reason.clone(),
            }),
            Frame::Approval(a) => F::Approval(approval_result_pb(a)),
            Frame::Tool(r) => F::Tool(r.into()),
            Frame::Model(m) => F::Model(pb::ModelResult {
                message: Some((&m.message).into()),
                usage: m.usage.as_ref().map(pb::Usage::from),
                model_call_id: m.model_call_id.clone(),
            }),
            Frame::Park(p) => F::Park(approval_ref_pb(p)),
        });
        pb::ControllerFrame {
            session: f.session.clone(),
            execution_id: f.execution_id.clone(),
            frame,
        }
    }
}

impl From<pb::ControllerFrame> for ControllerFrame {
    fn from(f: pb::ControllerFrame) -> Self {
        use pb::controller_frame::Frame as F;
        let frame = f.frame.map(|fr| match fr {
            F::Start(s) => Frame::Start(Box::new(Start {
                execution_id: f.execution_id.clone(),
                session_uid: f.session.clone(),
                config: s.config,
                history: History::from_iter(s.history.into_iter().map(event_from_pb)),
                inputs: s.inputs.into_iter().map(Message::from).collect(),
                identity: s
                    .identity
                    .map(|i| IdentityContext {
                        principal: i.principal.map(|p| p.principal).unwrap_or_default(),
                        can_mint_tokens: i.can_mint_tokens,
                    })
                    .unwrap_or_default(),
                resume_from_seq: s.resume_from_seq,
            })),
            F::Cancel(c) => Frame::Cancel { reason: c.reason },
            F::Approval(a) => Frame::Approval(approval_result(a)),
            F::Tool(r) => Frame::Tool(r.into()),
            F::Model(m) => Frame::Model(ModelResult {
                message: m.message.map(Message::from).unwrap_or_default(),
                usage: m.usage.map(Usage::from),
                model_call_id: m.model_call_id,
            }),
            F::Park(p) => Frame::Park(approval_ref(p)),
        });
        ControllerFrame {
            session: f.session,
            execution_id: f.execution_id,
            frame,
        }
    }
}

// ---- Describe ----

impl From<&Descriptor> for pb::HarnessDescriptor {
    fn from(d: &Descriptor) -> Self {
        let c = &d.capabilities;
        pb::HarnessDescriptor {
            id: d.id.clone(),
            models: d.models.clone(),
            tools: d
                .tools
                .iter()
                .map(|t| pb::ToolSpec {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    mediation: to_num(&t.mediation, |s| {
                        pb::Mediation::from_str_name(s).map(|m| m as i32)
                    }),
                })
                .collect(),
            // Always STATELESS_REPLAY unless REQUIRES_MEMORY_SNAPSHOT (capabilitiesToProto).
            capabilities: Some(pb::Capabilities {
                resumability: match c.resumability {
                    Resumability::RequiresMemorySnapshot => {
                        pb::Resumability::RequiresMemorySnapshot as i32
                    }
                    _ => pb::Resumability::StatelessReplay as i32,
                },
                fork_safe: c.fork_safe,
                requires_gpu: c.requires_gpu,
                streaming: c.streaming,
                reasoning_replay: c.reasoning_replay,
            }),
            version: d.version.clone(),
        }
    }
}

impl From<pb::HarnessDescriptor> for Descriptor {
    fn from(d: pb::HarnessDescriptor) -> Self {
        let c = d.capabilities.unwrap_or_default();
        Descriptor {
            id: d.id,
            version: d.version,
            models: d.models,
            tools: d
                .tools
                .into_iter()
                .map(|t| ToolSpec {
                    name: t.name,
                    description: t.description,
                    mediation: from_num(
                        pb::Mediation::try_from(t.mediation)
                            .ok()
                            .map(|m| m.as_str_name()),
                    ),
                })
                .collect(),
            // Anything but REQUIRES_MEMORY_SNAPSHOT is STATELESS_REPLAY (capabilitiesFromProto).
            capabilities: Capabilities {
                resumability: if c.resumability == pb::Resumability::RequiresMemorySnapshot as i32 {
                    Resumability::RequiresMemorySnapshot
                } else {
                    Resumability::StatelessReplay
                },
                fork_safe: c.fork_safe,
                requires_gpu: c.requires_gpu,
                streaming: c.streaming,
                reasoning_replay: c.reasoning_replay,
            },
        }
    }
}
