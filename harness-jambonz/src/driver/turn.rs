//! One turn: the agent run with a sink that speaks, calls tools and fills the turn record.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use futures::channel::oneshot;
use futures::future::BoxFuture;
use harness_core::message::{Message, ModelRequest, ModelResponse, ToolCall, ToolResult, Usage};
use harness_core::model::{Model, ModelError, ModelEvent};
use harness_core::{EventSink, Harness, HarnessError, SinkError, Start};

use super::{Clock, Shared, lock};
use crate::command::CommandMessage;
use crate::harness_side::ActionError;
use crate::turn::{InputKind, TurnId, TurnStart};
use crate::turn_record::{ModelCallRecord, OwnToolRecord, StepRecord, TurnRecord};

const GREETING_INPUT: &str = "(call connected)";

fn sink_error(e: ActionError) -> SinkError {
    match e {
        ActionError::TurnCancelled(_) | ActionError::NotActive => SinkError::Cancelled,
        other => SinkError::Rejected(other.to_string()),
    }
}

/// The sink of one turn.
struct TurnSink<'a, C: ?Sized> {
    shared: Arc<Mutex<Shared>>,
    model: &'a (dyn Model + 'a),
    clock: &'a C,
    turn_id: TurnId,
    reply: Option<String>,
    record: TurnRecord,
    last_model_usage: Option<Usage>,
    /// `(call id, tool name)` of the model's latest tool calls, so that a tool the harness
    /// runs itself is recorded in `own_tools` by its name (a [`ToolResult`] carries only
    /// the call id). Bounded by [`MAX_TOOL_NAMES`].
    tool_names: Vec<(String, String)>,
}

/// The most model tool calls a turn remembers the names of.
const MAX_TOOL_NAMES: usize = 64;

impl<C: Clock + ?Sized> TurnSink<'_, C> {
    fn check(&self) -> Result<(), SinkError> {
        let s = lock(&self.shared);
        if s.call.is_turn_open(self.turn_id) {
            Ok(())
        } else {
            Err(SinkError::Cancelled)
        }
    }

    /// Waits until the outgoing queue has room.
    async fn room(&self) -> Result<(), SinkError> {
        futures::future::poll_fn(|cx: &mut Context<'_>| {
            let mut s = lock(&self.shared);
            if !s.call.is_turn_open(self.turn_id) {
                return Poll::Ready(Err(SinkError::Cancelled));
            }
            if s.call.pending_transmits() < s.max_pending {
                Poll::Ready(Ok(()))
            } else {
                s.space.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    fn speak(&mut self, delta: &str) -> Result<(), SinkError> {
        if delta.is_empty() {
            return Ok(());
        }
        let mut s = lock(&self.shared);
        let reply = match &self.reply {
            Some(r) => r.clone(),
            None => {
                let r = s.call.start_reply(Some(self.turn_id)).map_err(sink_error)?;
                self.reply = Some(r.clone());
                r
            }
        };
        s.call.push_chunk(&reply, delta).map_err(sink_error)?;
        s.history.assistant_delta(&reply, Some(self.turn_id), delta);
        Ok(())
    }

    fn ms_since(&self, t: Instant) -> u64 {
        u64::try_from(self.clock.now().saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)
    }

    /// Ends the turn: `reply:done` with the record (an empty reply if nothing was said).
    fn finish(
        mut self,
        outcome: Result<(), HarnessError>,
        error_reply: Option<&str>,
    ) -> TurnOutcome {
        match outcome {
            Ok(()) => {}
            Err(e) => {
                // Cancelled by jambonz (or the call is over): nothing more for the turn. An
                // agent that says `Cancelled` while the turn is still open has given up on
                // it: a failure, and its reply still ends (an open reply would hold the
                // call, one reply at a time, until jambonz's deadline).
                if self.check().is_err() {
                    return TurnOutcome::Cancelled;
                }
                if let Some(text) = error_reply {
                    // Best effort: the turn may be closing.
                    let _ = self.speak(text);
                }
                self.record.flags_mut().push("harness_error".into());
                let mut note = e.to_string();
                note.truncate(note.char_indices().nth(500).map_or(note.len(), |(i, _)| i));
                self.record.note = Some(note);
                self.done();
                return TurnOutcome::Failed;
            }
        }
        if self.done() {
            TurnOutcome::Completed
        } else {
            TurnOutcome::Cancelled
        }
    }

    fn done(&mut self) -> bool {
        let mut s = lock(&self.shared);
        let reply = match self.reply.take() {
            Some(r) => r,
            None => match s.call.start_reply(Some(self.turn_id)) {
                Ok(r) => r,
                Err(_) => return false,
            },
        };
        let record = std::mem::take(&mut self.record);
        let record = if record.check_size().is_ok() {
            record
        } else {
            // Over 16 KB: keep the summary fields, drop the detail.
            TurnRecord {
                route: record.route,
                flags: record.flags,
                note: Some("turn_record trimmed to 16 KB".into()),
                ..Default::default()
            }
        };
        // Even the summary can be over 16 KB (a huge route or flags): then the reply ends
        // without a record, rather than staying open and holding jambonz's reply queue.
        let record = (!record.is_empty() && record.check_size().is_ok()).then_some(record);
        s.call.finish_reply(&reply, record).is_ok()
    }
}

#[async_trait]
impl<C: Clock + ?Sized> EventSink for TurnSink<'_, C> {
    async fn model(&mut self, req: ModelRequest) -> Result<ModelResponse, SinkError> {
        self.check()?;
        let started = self.clock.now();
        let mut first_token_ms = None;
        let mut stream = self.model.stream(&req);
        let mut response: Result<ModelResponse, ModelError> = Err(ModelError::Incomplete);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ModelEvent::TextDelta(d)) => {
                    if first_token_ms.is_none() {
                        first_token_ms = Some(self.ms_since(started));
                    }
                    self.room().await?;
                    self.speak(&d)?;
                }
                Ok(ModelEvent::Completed(r)) => {
                    response = Ok(r);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    response = Err(e);
                    break;
                }
            }
        }
        drop(stream);
        let ms = self.ms_since(started);
        let model_id = match &response {
            Ok(r) if !r.usage.model.is_empty() => r.usage.model.clone(),
            _ => req.model.clone(),
        };
        let mut entry = ModelCallRecord {
            model: (!model_id.is_empty()).then_some(model_id),
            first_token_ms,
            ms: Some(ms),
            ..Default::default()
        };
        if let Ok(r) = &response {
            entry.input_tokens = Some(r.usage.input_tokens);
            entry.output_tokens = Some(r.usage.output_tokens);
            self.last_model_usage = Some(r.usage.clone());
            for call in r.message.tool_calls() {
                if self.tool_names.len() == MAX_TOOL_NAMES {
                    self.tool_names.remove(0);
                }
                self.tool_names.push((call.id.clone(), call.tool.clone()));
            }
        }
        self.record.model_calls_mut().push(entry);
        Ok(response?)
    }

    async fn output(&mut self, delta: &str) -> Result<(), SinkError> {
        self.room().await?;
        self.speak(delta)
    }

    async fn tool_call(&mut self, call: ToolCall) -> Result<ToolResult, SinkError> {
        self.check()?;
        let started = self.clock.now();
        let rx = {
            let mut s = lock(&self.shared);
            let call_id = if s.command_tools.contains(&call.tool) {
                let command = CommandMessage {
                    name: call.tool.clone(),
                    args: call.args.clone(),
                    ..Default::default()
                }
                .command();
                s.call.send_command(command).map_err(sink_error)?
            } else {
                s.call
                    .call_tool(self.turn_id, call.tool.clone(), call.args.clone())
                    .map_err(sink_error)?
            };
            let (tx, rx) = oneshot::channel();
            s.waiters
                .insert(call_id, (self.turn_id, call.tool.clone(), tx));
            rx
        };
        let mut result = rx.await.map_err(|_| SinkError::Cancelled)?;
        result.id.clone_from(&call.id);
        let ms = self.ms_since(started);
        let mut detail = serde_json::Map::new();
        detail.insert("tool".into(), call.tool.clone().into());
        detail.insert("ok".into(), (!result.is_error).into());
        self.record.steps_mut().push(StepRecord {
            name: Some("tool_call".into()),
            ms: Some(ms),
            detail: Some(detail.into()),
            ..Default::default()
        });
        Ok(result)
    }

    async fn report(&mut self, result: ToolResult) -> Result<(), SinkError> {
        self.check()?;
        // The tool's name, from the model's call with this id; else the id as given.
        let name = match self.tool_names.iter().position(|(id, _)| *id == result.id) {
            Some(i) => self.tool_names.remove(i).1,
            None => result.id.clone(),
        };
        self.record.own_tools_mut().push(OwnToolRecord {
            name: Some(name),
            ok: Some(!result.is_error),
            ..Default::default()
        });
        Ok(())
    }

    async fn usage(&mut self, usage: Usage) -> Result<(), SinkError> {
        self.check()?;
        // Usage already recorded with the mediated model call it belongs to is not counted
        // twice.
        if self.last_model_usage.as_ref() == Some(&usage) {
            self.last_model_usage = None;
            return Ok(());
        }
        self.record.model_calls_mut().push(ModelCallRecord {
            model: (!usage.model.is_empty()).then(|| usage.model.clone()),
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            ..Default::default()
        });
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnOutcome {
    Completed,
    Cancelled,
    Failed,
}

pub(super) fn greet(shared: &Mutex<Shared>, turn_id: TurnId, greeting: &str, route: Option<&str>) {
    let mut s = lock(shared);
    s.history.user(turn_id, GREETING_INPUT);
    let Ok(reply) = s.call.start_reply(Some(turn_id)) else {
        return;
    };
    if s.call.push_chunk(&reply, greeting).is_ok() {
        s.history.assistant_delta(&reply, Some(turn_id), greeting);
    }
    let record = TurnRecord {
        route: Some(route.unwrap_or("greeting").to_owned()),
        ..Default::default()
    };
    // A route over 16 KB: the greeting still ends, without a record.
    let record = record.check_size().is_ok().then_some(record);
    let _ = s.call.finish_reply(&reply, record);
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_turn<'a, H, M, C>(
    harness: &'a H,
    model: &'a M,
    clock: &'a C,
    shared: Arc<Mutex<Shared>>,
    t: TurnStart,
    turn_id: TurnId,
    route: Option<String>,
    error_reply: Option<String>,
) -> BoxFuture<'a, (TurnId, TurnOutcome)>
where
    H: Harness + ?Sized,
    M: Model,
    C: Clock,
{
    let text = match t.input.kind() {
        InputKind::Speech => t.input.text.clone().unwrap_or_default(),
        InputKind::Greeting => GREETING_INPUT.to_owned(),
        InputKind::Other(k) => t.input.text.clone().unwrap_or_else(|| format!("({k})")),
    };
    let start = {
        let mut s = lock(&shared);
        let call_sid = s.call_sid.clone();
        let start = Start {
            execution_id: format!("{call_sid}:{turn_id}"),
            session_uid: call_sid.clone(),
            config: serde_json::to_vec(&t.input).unwrap_or_default(),
            history: s.history.journal(&call_sid).into(),
            inputs: vec![Message::user(text.clone())],
            ..Default::default()
        };
        s.history.user(turn_id, text);
        start
    };
    Box::pin(async move {
        let mut sink = TurnSink {
            shared,
            model: model as &(dyn Model + 'a),
            clock,
            turn_id,
            reply: None,
            record: TurnRecord {
                route,
                ..Default::default()
            },
            last_model_usage: None,
            tool_names: Vec::new(),
        };
        let outcome = harness.run(start, &mut sink).await;
        (turn_id, sink.finish(outcome, error_reply.as_deref()))
    })
}
