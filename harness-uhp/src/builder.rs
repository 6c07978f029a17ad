//! A stream builder: writes the events a UHP server emits for a task, in the reference
//! server's order, with consecutive sequence numbers. For tests, benchmarks, examples and
//! small servers; the stored response it keeps in step is what `GET /v1/responses/{id}`
//! returns.

use harness_core::sse::{SseEncoder, SseEvent};
use serde_json::{Value, json};

use crate::error::ErrorObject;
use crate::response::{
    Annotation, FunctionCallItem, OutputContent, OutputItem, OutputMessage, OutputText, Reasoning,
    Response, ResponseStatus, SummaryText,
};

/// Builds one task's event stream.
///
/// ```
/// use harness_uhp::builder::StreamBuilder;
///
/// let mut b = StreamBuilder::new("resp_1");
/// b.created();
/// b.message(&["Hel", "lo"], &[]);
/// b.completed();
/// assert_eq!(b.events().len(), 10);
/// assert_eq!(b.events()[9]["sequence_number"], 9);
/// assert_eq!(b.response().output_text(), "Hello");
/// let sse = b.to_sse(); // `data: {…}\n\n` per event
/// assert!(sse.starts_with(b"data: {"));
/// ```
#[derive(Clone, Debug)]
pub struct StreamBuilder {
    response: Response,
    /// Each event's JSON text, `type` first in every object as servers write it.
    events: Vec<String>,
    items: u64,
}

/// Writes `v` as compact JSON with `type` (then `sequence_number`) first in every object,
/// the order servers use and the one decoders are fastest on.
fn write_ordered(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            let first = ["type", "sequence_number"];
            let keys = first
                .iter()
                .filter_map(|k| m.get_key_value(*k))
                .chain(m.iter().filter(|(k, _)| !first.contains(&k.as_str())));
            for (i, (k, v)) in keys.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_ordered(v, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

impl StreamBuilder {
    /// A builder for the task `response_id`, in progress, with no output yet.
    pub fn new(response_id: &str) -> Self {
        let mut response = Response::new(response_id, ResponseStatus::InProgress);
        response.created_at = Some(1_786_400_000);
        response.model = Some("scripted".to_owned());
        response.store = Some(true);
        StreamBuilder {
            response,
            events: Vec::new(),
            items: 0,
        }
    }

    fn push(&mut self, mut ev: Value) {
        if let Value::Object(m) = &mut ev {
            m.insert(
                "sequence_number".into(),
                Value::from(self.events.len() as u64),
            );
        }
        let mut json = String::new();
        write_ordered(&ev, &mut json);
        self.events.push(json);
    }

    fn response_value(&self) -> Value {
        serde_json::to_value(&self.response).unwrap_or(Value::Null)
    }

    fn item_id(&self, prefix: &str) -> String {
        format!("{prefix}_{:032x}", self.items + 1)
    }

    /// `response.created` then `response.in_progress`.
    pub fn created(&mut self) -> &mut Self {
        let r = self.response_value();
        self.push(json!({"type": "response.created", "response": r}));
        self.push(json!({"type": "response.in_progress", "response": r}));
        self
    }

    /// A reasoning item with one summary part streamed as `deltas`.
    pub fn reasoning(&mut self, deltas: &[&str]) -> &mut Self {
        let oi = self.response.output.len() as u64;
        let id = self.item_id("rs");
        self.items += 1;
        let text: String = deltas.concat();
        self.push(
            json!({"type": "response.output_item.added", "output_index": oi,
            "item": {"id": id, "type": "reasoning", "summary": [], "status": "in_progress"}}),
        );
        self.push(
            json!({"type": "response.reasoning_summary_part.added", "item_id": id,
            "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        );
        for d in deltas {
            self.push(
                json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                "output_index": oi, "summary_index": 0, "delta": d}),
            );
        }
        self.push(json!({"type": "response.reasoning_summary_part.done", "item_id": id,
            "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": text}}));
        let item = OutputItem::Reasoning(Reasoning {
            id: Some(id),
            summary: vec![OutputContent::SummaryText(SummaryText {
                text,
                extra: Default::default(),
            })],
            status: Some("completed".into()),
            extra: Default::default(),
        });
        self.done(oi, item)
    }

    /// A function call whose arguments stream as `deltas`.
    pub fn tool_call(&mut self, call_id: &str, name: &str, deltas: &[&str]) -> &mut Self {
        let oi = self.response.output.len() as u64;
        let id = self.item_id("fc");
        self.items += 1;
        let arguments: String = deltas.concat();
        self.push(
            json!({"type": "response.output_item.added", "output_index": oi,
            "item": {"id": id, "type": "function_call", "call_id": call_id, "name": name,
                     "arguments": "", "status": "in_progress"}}),
        );
        for d in deltas {
            self.push(
                json!({"type": "response.function_call_arguments.delta", "item_id": id,
                "output_index": oi, "delta": d}),
            );
        }
        self.push(
            json!({"type": "response.function_call_arguments.done", "item_id": id,
            "output_index": oi, "arguments": arguments}),
        );
        let item = OutputItem::FunctionCall(FunctionCallItem {
            id: Some(id),
            call_id: call_id.into(),
            name: name.into(),
            arguments,
            status: Some("completed".into()),
            extra: Default::default(),
        });
        self.done(oi, item)
    }

    /// A message with one `output_text` part streamed as `deltas`, then its annotations.
    pub fn message(&mut self, deltas: &[&str], annotations: &[Annotation]) -> &mut Self {
        self.message_start();
        for d in deltas {
            self.message_delta(d);
        }
        self.message_end(annotations)
    }

    /// Opens a message item and its `output_text` part (for streaming deltas one by one).
    pub fn message_start(&mut self) -> &mut Self {
        let oi = self.response.output.len() as u64;
        let id = self.item_id("msg");
        self.push(json!({"type": "response.output_item.added", "output_index": oi,
            "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}));
        self.push(
            json!({"type": "response.content_part.added", "item_id": id, "output_index": oi,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        self.response
            .output
            .push(OutputItem::Message(OutputMessage {
                id: Some(id),
                status: Some("in_progress".into()),
                role: Some("assistant".into()),
                content: vec![OutputContent::OutputText(OutputText::default())],
                extra: Default::default(),
            }));
        self
    }

    /// One `response.output_text.delta` of the open message.
    pub fn message_delta(&mut self, delta: &str) -> &mut Self {
        let oi = self.response.output.len().saturating_sub(1) as u64;
        let Some(OutputItem::Message(m)) = self.response.output.last_mut() else {
            return self;
        };
        let id = m.id.clone().unwrap_or_default();
        if let Some(OutputContent::OutputText(t)) = m.content.first_mut() {
            t.text.push_str(delta);
        }
        self.push(
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": oi,
            "content_index": 0, "delta": delta}),
        );
        self
    }

    /// Closes the open message: annotations, `output_text.done`, `content_part.done`,
    /// `output_item.done`.
    pub fn message_end(&mut self, annotations: &[Annotation]) -> &mut Self {
        let oi = self.response.output.len().saturating_sub(1) as u64;
        let Some(OutputItem::Message(mut m)) = self.response.output.pop() else {
            return self;
        };
        self.items += 1;
        let id = m.id.clone().unwrap_or_default();
        let mut text = String::new();
        if let Some(OutputContent::OutputText(t)) = m.content.first_mut() {
            t.annotations = annotations.to_vec();
            text = t.text.clone();
        }
        for (ai, a) in annotations.iter().enumerate() {
            self.push(
                json!({"type": "response.output_text.annotation.added", "item_id": id,
                "output_index": oi, "content_index": 0, "annotation_index": ai, "annotation": a}),
            );
        }
        self.push(
            json!({"type": "response.output_text.done", "item_id": id, "output_index": oi,
            "content_index": 0, "text": text}),
        );
        self.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": oi,
            "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": annotations}}));
        m.status = Some("completed".into());
        self.done(oi, OutputItem::Message(m))
    }

    fn done(&mut self, oi: u64, item: OutputItem) -> &mut Self {
        let v = serde_json::to_value(&item).unwrap_or(Value::Null);
        self.push(json!({"type": "response.output_item.done", "output_index": oi, "item": v}));
        self.response.output.push(item);
        self
    }

    /// An `error` event (an error that did not itself end the task).
    pub fn error(&mut self, code: &str, message: &str) -> &mut Self {
        self.push(json!({"type": "error", "code": code, "message": message, "param": null}));
        self
    }

    fn terminal(&mut self, event: &str, status: ResponseStatus) -> &mut Self {
        self.response.status = status;
        let r = self.response_value();
        self.push(json!({"type": event, "response": r}));
        self
    }

    /// `response.completed`.
    pub fn completed(&mut self) -> &mut Self {
        self.terminal("response.completed", ResponseStatus::Completed)
    }

    /// `response.incomplete`.
    pub fn incomplete(&mut self) -> &mut Self {
        self.terminal("response.incomplete", ResponseStatus::Incomplete)
    }

    /// `response.failed` with `error` in the response.
    pub fn failed(&mut self, error: ErrorObject) -> &mut Self {
        self.response.error = Some(error);
        self.terminal("response.failed", ResponseStatus::Failed)
    }

    /// `response.failed` carrying status `cancelled` (there is no `response.cancelled`).
    pub fn cancelled(&mut self) -> &mut Self {
        self.terminal("response.failed", ResponseStatus::Cancelled)
    }

    /// The events so far, as JSON values.
    pub fn events(&self) -> Vec<Value> {
        self.events
            .iter()
            .map(|e| serde_json::from_str(e).unwrap_or(Value::Null))
            .collect()
    }

    /// How many events so far.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event was written yet.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Event `i` as JSON text (`type` first), if there is one.
    pub fn event_json(&self, i: usize) -> Option<&str> {
        self.events.get(i).map(String::as_str)
    }

    /// The response as stored now (what `GET /v1/responses/{id}` returns).
    pub fn response(&self) -> &Response {
        &self.response
    }

    /// One event as an SSE message (`data: {…}\n\n`), `type` first.
    pub fn sse_event(event: &Value) -> Vec<u8> {
        let mut json = String::new();
        write_ordered(event, &mut json);
        Self::sse_data(json)
    }

    fn sse_data(json: String) -> Vec<u8> {
        let mut out = Vec::with_capacity(json.len() + 8);
        // ok to ignore: compact JSON has no line breaks, which is the encoder's only error.
        let _ = SseEncoder::event(&mut out, &SseEvent::new(json));
        out
    }

    /// Event `i` as an SSE message, if there is one.
    pub fn sse_event_at(&self, i: usize) -> Option<Vec<u8>> {
        self.events.get(i).map(|e| Self::sse_data(e.clone()))
    }

    /// Every event as an SSE body.
    pub fn to_sse(&self) -> Vec<u8> {
        self.events
            .iter()
            .flat_map(|e| Self::sse_data(e.clone()))
            .collect()
    }
}
