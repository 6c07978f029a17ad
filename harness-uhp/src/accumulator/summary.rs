//! The task as a serializable summary ([`TaskSummary`]): what `uhp_inspect` prints and the
//! differential tests compare.

use super::TaskAccumulator;
use crate::error::ErrorObject;
use crate::response::{Annotation, OutputItem};
use crate::sequence::SequenceReport;

/// A serializable summary of a task: what `uhp_inspect` prints and the differential tests
/// compare.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TaskSummary {
    /// `in_progress` until terminal, then the terminal status.
    pub status: String,
    /// Whether a terminal event (or stored response) arrived.
    pub terminal: bool,
    /// [`TaskAccumulator::text`].
    pub text: String,
    /// [`TaskAccumulator::reasoning`].
    pub reasoning: String,
    /// [`TaskAccumulator::tool_calls`], as `function_call` items.
    pub tool_calls: Vec<OutputItem>,
    /// [`TaskAccumulator::annotations`].
    pub annotations: Vec<Annotation>,
    /// [`TaskAccumulator::error`].
    pub error: Option<ErrorObject>,
    /// The sequence check.
    pub sequence: SequenceSummary,
    /// The findings, as messages.
    pub findings: Vec<String>,
}

/// The sequence check in [`TaskSummary`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SequenceSummary {
    /// [`SequenceReport::ok`].
    pub ok: bool,
    /// Missing numbers: a number for each one of a short run, `[first, last]` for a run of 16
    /// or more (so `[0, 5000000]` prints as one pair).
    pub missing: Vec<serde_json::Value>,
    /// [`SequenceReport::duplicates`].
    pub duplicates: Vec<u64>,
    /// [`SequenceReport::duplicate_count`].
    pub duplicate_count: u64,
    /// [`SequenceReport::out_of_order`].
    pub out_of_order: Vec<u64>,
    /// [`SequenceReport::out_of_order_count`].
    pub out_of_order_count: u64,
    /// [`SequenceReport::unnumbered`].
    pub unnumbered: u64,
}

impl From<&SequenceReport> for SequenceSummary {
    fn from(r: &SequenceReport) -> Self {
        let mut missing = Vec::new();
        for run in &r.missing {
            if run.end() - run.start() >= 15 {
                missing.push(serde_json::json!([run.start(), run.end()]));
            } else {
                missing.extend(run.clone().map(serde_json::Value::from));
            }
        }
        SequenceSummary {
            ok: r.ok,
            missing,
            duplicates: r.duplicates.clone(),
            duplicate_count: r.duplicate_count,
            out_of_order: r.out_of_order.clone(),
            out_of_order_count: r.out_of_order_count,
            unnumbered: r.unnumbered,
        }
    }
}

impl TaskAccumulator {
    /// The task as a serializable summary.
    pub fn summary(&self) -> TaskSummary {
        TaskSummary {
            status: self.status.to_string(),
            terminal: self.is_terminal(),
            text: self.text().into_owned(),
            reasoning: self.reasoning().into_owned(),
            tool_calls: self
                .tool_calls()
                .into_iter()
                .map(OutputItem::FunctionCall)
                .collect(),
            annotations: self.annotations(),
            error: self.error().cloned(),
            sequence: SequenceSummary::from(&self.sequence()),
            findings: self.findings.iter().map(ToString::to_string).collect(),
        }
    }
}
