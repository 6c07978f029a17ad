//! The output items as the agent makes them — text, reasoning, tool calls and results, cited
//! artifacts — each change an event of the stream, in order (streaming.md §2–3, files.md §2.1).

use harness_core::message::{ToolCall, ToolResult};
use serde_json::{Map, Value, json};

use super::Task;
use crate::response::{
    Annotation, ContainerFileCitation, FunctionCallItem, FunctionCallOutput, OutputContent,
    OutputItem, OutputMessage, OutputText, Reasoning, SummaryText,
};
use crate::server::stream::{Out, field, int, raw_str};
use crate::server::{Now, TurnGone, UhpServer};

/// The item a task is writing into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Open {
    None,
    Message(usize),
    Reasoning(usize),
}

fn item_id(prefix: &str, response_id: &str, n: u64) -> String {
    let tail = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("{prefix}_{tail}_{n}")
}

impl UhpServer {
    /// A running task and where its events go.
    fn turn_parts(&mut self, rid: &str) -> Result<(&mut Task, Out<'_>), TurnGone> {
        if !self.running.contains(rid) {
            return Err(TurnGone);
        }
        let t = self.tasks.get_mut(rid).ok_or(TurnGone)?;
        let out = Out {
            streams: &mut self.streams,
            events: &mut self.events,
            max_buffer: self.cfg.max_stream_buffer_bytes,
        };
        Ok((t, out))
    }

    /// A running task's next item, the open one closed first: the task, where its events go,
    /// the item's index and id.
    fn next_item_of(
        &mut self,
        rid: &str,
        prefix: &str,
    ) -> Result<(&mut Task, Out<'_>, usize, String), TurnGone> {
        let (t, mut out) = self.turn_parts(rid)?;
        close_open(t, &mut out, "completed");
        let (index, id) = next_item(t, prefix);
        Ok((t, out, index, id))
    }

    /// Assistant text (a model delta or `sink.output`): `response.output_text.delta`, in a
    /// message item opened on the first one.
    pub fn turn_text(&mut self, _now: Now, rid: &str, delta: &str) -> Result<(), TurnGone> {
        self.delta(rid, delta, Open::Message(0))
    }

    /// Reasoning summary text (`sink.reasoning`): `response.reasoning_summary_text.delta`, in
    /// a `reasoning` item opened on the first one.
    pub fn turn_reasoning(&mut self, _now: Now, rid: &str, delta: &str) -> Result<(), TurnGone> {
        self.delta(rid, delta, Open::Reasoning(0))
    }

    /// A delta into the open item of `kind` (its index ignored), opened when another is.
    fn delta(&mut self, rid: &str, delta: &str, kind: Open) -> Result<(), TurnGone> {
        let (t, mut out) = self.turn_parts(rid)?;
        let index = match (t.open, kind) {
            (Open::Message(i), Open::Message(_)) | (Open::Reasoning(i), Open::Reasoning(_)) => i,
            (_, Open::Reasoning(_)) => open_reasoning(t, &mut out),
            _ => open_message(t, &mut out),
        };
        let (id, part, ty, sub) = match t.response.output.get_mut(index) {
            Some(OutputItem::Message(m)) => (
                m.id.as_deref(),
                m.content.first_mut(),
                "response.output_text.delta",
                "content_index",
            ),
            Some(OutputItem::Reasoning(r)) => (
                r.id.as_deref(),
                r.summary.first_mut(),
                "response.reasoning_summary_text.delta",
                "summary_index",
            ),
            _ => return Ok(()),
        };
        if let Some(
            OutputContent::OutputText(OutputText { text, .. })
            | OutputContent::SummaryText(SummaryText { text, .. }),
        ) = part
        {
            text.push_str(delta);
        }
        let id = id.unwrap_or("");
        out.part(&mut t.cur, ty, id, index, Some(sub), "delta", &delta);
        Ok(())
    }

    /// A tool the agent invoked: a `function_call` item, added and done.
    pub fn turn_tool_call(
        &mut self,
        _now: Now,
        rid: &str,
        call: &ToolCall,
    ) -> Result<(), TurnGone> {
        let (t, mut out, index, id) = self.next_item_of(rid, "fc")?;
        let arguments = serde_json::to_string(&call.args).unwrap_or_else(|_| "{}".into());
        let mut fc = FunctionCallItem {
            id: Some(id.clone()),
            call_id: call.id.clone(),
            name: call.tool.clone(),
            arguments: String::new(),
            status: Some("in_progress".into()),
            extra: Map::new(),
        };
        out.item(
            &mut t.cur,
            "response.output_item.added",
            index,
            &OutputItem::FunctionCall(fc.clone()),
        );
        let ty = "response.function_call_arguments.delta";
        out.part(&mut t.cur, ty, &id, index, None, "delta", &arguments);
        let ty = "response.function_call_arguments.done";
        out.part(&mut t.cur, ty, &id, index, None, "arguments", &arguments);
        fc.arguments = arguments;
        fc.status = Some("completed".into());
        let item = OutputItem::FunctionCall(fc);
        out.item(&mut t.cur, "response.output_item.done", index, &item);
        t.response.output.push(item);
        Ok(())
    }

    /// A tool's result: a `function_call_output` item, added and done.
    pub fn turn_tool_result(
        &mut self,
        _now: Now,
        rid: &str,
        result: &ToolResult,
    ) -> Result<(), TurnGone> {
        let (t, mut out, index, id) = self.next_item_of(rid, "fco")?;
        let output = if result.is_error {
            json!({"error": result.error}).to_string()
        } else {
            serde_json::to_string(&result.output.clone().unwrap_or_default())
                .unwrap_or_else(|_| "{}".into())
        };
        let item = OutputItem::FunctionCallOutput(FunctionCallOutput {
            id: Some(id),
            call_id: result.id.clone(),
            output: Value::from(output),
            status: Some("completed".into()),
            extra: Map::new(),
        });
        out.item(&mut t.cur, "response.output_item.added", index, &item);
        out.item(&mut t.cur, "response.output_item.done", index, &item);
        t.response.output.push(item);
        Ok(())
    }

    /// A file the agent wrote, cited on the task's final message.
    pub(crate) fn cite(&mut self, rid: &str, citation: ContainerFileCitation) {
        if let Some(t) = self.tasks.get_mut(rid) {
            t.artifacts.retain(|a| a.file_id != citation.file_id);
            t.artifacts.push(citation);
        }
    }
}

/// The task's artifacts, cited on its final message (opened if none is): one
/// `response.output_text.annotation.added` each.
pub(super) fn annotate(t: &mut Task, out: &mut Out<'_>) {
    if !t.artifacts.is_empty() {
        let index = match t.open {
            Open::Message(i) => i,
            _ => open_message(t, out),
        };
        let arts = std::mem::take(&mut t.artifacts);
        if let Some(OutputItem::Message(m)) = t.response.output.get_mut(index) {
            let id = m.id.clone().unwrap_or_default();
            if let Some(OutputContent::OutputText(ot)) = m.content.first_mut() {
                let end = ot.text.chars().count() as i64;
                for a in arts {
                    let mut a = a;
                    a.start_index = Some(0);
                    a.end_index = Some(end);
                    let ann = Annotation::ContainerFileCitation(a);
                    let ai = ot.annotations.len() as u64;
                    let ty = "response.output_text.annotation.added";
                    out.event(&mut t.cur.stream, &mut t.cur.seq, ty, |b| {
                        raw_str(b, "item_id", &id);
                        int(b, "output_index", index as u64);
                        int(b, "content_index", 0);
                        int(b, "annotation_index", ai);
                        field(b, "annotation", &ann);
                        b.push(b'}');
                    });
                    ot.annotations.push(ann);
                }
            }
        }
    }
}

/// The next item's index and id.
fn next_item(t: &mut Task, prefix: &str) -> (usize, String) {
    t.items += 1;
    (
        t.response.output.len(),
        item_id(prefix, &t.response.id, t.items),
    )
}

/// Opens an item that streams into its first part: `output_item.added` with the shell, the
/// part's `added` event, and the item kept open.
fn open_item(
    t: &mut Task,
    out: &mut Out<'_>,
    prefix: &str,
    shell: impl FnOnce(&str) -> (OutputItem, &'static str, &'static str, OutputContent),
) -> usize {
    close_open(t, out, "completed");
    let (index, id) = next_item(t, prefix);
    let (mut item, part_added, sub, part) = shell(&id);
    out.item(&mut t.cur, "response.output_item.added", index, &item);
    out.part(&mut t.cur, part_added, &id, index, Some(sub), "part", &part);
    match &mut item {
        OutputItem::Message(m) => m.content.push(part),
        OutputItem::Reasoning(r) => r.summary.push(part),
        _ => {}
    }
    t.open = match item {
        OutputItem::Reasoning(_) => Open::Reasoning(index),
        _ => Open::Message(index),
    };
    t.response.output.push(item);
    index
}

fn open_reasoning(t: &mut Task, out: &mut Out<'_>) -> usize {
    open_item(t, out, "rs", |id| {
        let item = OutputItem::Reasoning(Reasoning {
            id: Some(id.to_owned()),
            summary: Vec::new(),
            status: Some("in_progress".into()),
            extra: Map::new(),
        });
        let part = OutputContent::SummaryText(SummaryText::default());
        let added = "response.reasoning_summary_part.added";
        (item, added, "summary_index", part)
    })
}

fn open_message(t: &mut Task, out: &mut Out<'_>) -> usize {
    open_item(t, out, "msg", |id| {
        let item = OutputItem::Message(OutputMessage {
            id: Some(id.to_owned()),
            status: Some("in_progress".into()),
            role: Some("assistant".into()),
            content: Vec::new(),
            extra: Map::new(),
        });
        let part = OutputContent::OutputText(OutputText::default());
        (item, "response.content_part.added", "content_index", part)
    })
}

/// Closes the open item: its part's done events, then `output_item.done`.
pub(super) fn close_open(t: &mut Task, out: &mut Out<'_>, status: &str) {
    let index = match std::mem::replace(&mut t.open, Open::None) {
        Open::None => return,
        Open::Message(i) | Open::Reasoning(i) => i,
    };
    let Some(item) = t.response.output.get_mut(index) else {
        return;
    };
    match item {
        OutputItem::Message(m) => {
            m.status = Some(status.to_owned());
            let id = m.id.as_deref().unwrap_or("");
            if let Some(part @ OutputContent::OutputText(ot)) = m.content.first() {
                let sub = Some("content_index");
                out.part(
                    &mut t.cur,
                    "response.output_text.done",
                    id,
                    index,
                    sub,
                    "text",
                    &ot.text,
                );
                out.part(
                    &mut t.cur,
                    "response.content_part.done",
                    id,
                    index,
                    sub,
                    "part",
                    part,
                );
            }
        }
        OutputItem::Reasoning(r) => {
            r.status = Some(status.to_owned());
            let id = r.id.as_deref().unwrap_or("");
            if let Some(part) = r.summary.first() {
                let ty = "response.reasoning_summary_part.done";
                out.part(
                    &mut t.cur,
                    ty,
                    id,
                    index,
                    Some("summary_index"),
                    "part",
                    part,
                );
            }
        }
        _ => {}
    }
    if let Some(item) = t.response.output.get(index) {
        out.item(&mut t.cur, "response.output_item.done", index, item);
    }
}
