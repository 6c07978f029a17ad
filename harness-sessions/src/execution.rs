//! A journal read as executions (turns): each starts at its host-owned `EXECUTION_START`,
//! then its `INPUT`s, then the effects its harness caused, then `END` (completed) or
//! nothing (interrupted, parked or failed; `ERROR` records are audit only).

use harness_core::event::{EventBody, EventKind, ExecutionStart, LifecycleKind};
use harness_core::message::Message;

use crate::record::{Record, Seq};

/// Whether a record of this kind is an effect the harness caused (served on replay).
pub fn is_effect(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::Usage
            | EventKind::ApprovalRequest
            | EventKind::ApprovalResult
    )
}

/// One execution of a journal.
#[derive(Clone, Debug)]
pub struct Execution {
    /// Its id.
    pub execution_id: String,
    /// Index of its `EXECUTION_START` in the records it was split from.
    pub start_index: usize,
    /// Seq of its `EXECUTION_START`.
    pub start_seq: Seq,
    /// The start marker: config, cursor, input count, harness and version.
    pub marker: ExecutionStart,
    /// Its inputs, in order.
    pub inputs: Vec<Message>,
    /// Indices of its effect records, in order.
    pub effects: Vec<usize>,
    /// Index of its `END`, when it completed.
    pub end: Option<usize>,
    /// How many `ERROR` records it has (failed attempts).
    pub errors: usize,
}

impl Execution {
    /// Whether it completed (has an `END`).
    pub fn is_completed(&self) -> bool {
        self.end.is_some()
    }
}

/// A journal split into executions.
#[derive(Clone, Debug, Default)]
pub struct Executions {
    /// The executions, in order of their start markers.
    pub list: Vec<Execution>,
    /// Records that belong to no execution and are not session lifecycle events (a legacy
    /// journal without start markers, or ID-bearing events without one).
    pub orphans: usize,
    /// Seq of the last `LIFECYCLE FORK` record (records before it were inherited from the
    /// parent), 0 when the session is not a fork.
    pub fork_seq: Seq,
}

impl Executions {
    /// Splits `records` (a whole journal, from seq 1).
    pub fn split(records: &[Record]) -> Self {
        let mut out = Executions::default();
        for (i, r) in records.iter().enumerate() {
            let ev = &r.event;
            match &ev.body {
                EventBody::ExecutionStart(m) => {
                    out.list.push(Execution {
                        execution_id: ev.execution_id.clone(),
                        start_index: i,
                        start_seq: r.seq,
                        marker: m.clone(),
                        inputs: Vec::new(),
                        effects: Vec::new(),
                        end: None,
                        errors: 0,
                    });
                    continue;
                }
                // A kind this version does not know is kept in the journal (and verified)
                // but is neither an input nor an effect: replay passes over it.
                EventBody::Unknown { .. } => continue,
                EventBody::Lifecycle(l) => {
                    if l.kind == LifecycleKind::Fork {
                        out.fork_seq = r.seq;
                    }
                    if ev.execution_id.is_empty() {
                        continue;
                    }
                }
                _ => {}
            }
            let Some(x) = out
                .list
                .iter_mut()
                .rev()
                .find(|x| x.execution_id == ev.execution_id && !ev.execution_id.is_empty())
            else {
                out.orphans += 1;
                continue;
            };
            match &ev.body {
                EventBody::Input(m) => x.inputs.push(m.clone()),
                EventBody::End(_) => x.end = Some(i),
                EventBody::Error(_) => x.errors += 1,
                b if is_effect(b.kind()) => x.effects.push(i),
                _ => {}
            }
        }
        out
    }
}
