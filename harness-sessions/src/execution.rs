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
    /// Its id. For the legacy run of a v0.1.2 journal, the `legacy-<sha256>` compatibility
    /// token (never journaled: its records keep an empty execution id).
    pub execution_id: String,
    /// Index of its `EXECUTION_START` in the records it was split from: the length of the
    /// history prefix it gets (for a legacy run, the records before it, as the spec says).
    pub start_index: usize,
    /// Seq of its `EXECUTION_START` (0 for a legacy run, which has none).
    pub start_seq: Seq,
    /// The start marker: config, cursor, input count, harness and version (all empty for a
    /// legacy run: "Executions without a start marker use empty config and a zero cursor").
    pub marker: ExecutionStart,
    /// Its inputs, in order.
    pub inputs: Vec<Message>,
    /// Indices of its effect records, in order.
    pub effects: Vec<usize>,
    /// Index of its `END`, when it completed.
    pub end: Option<usize>,
    /// How many `ERROR` records it has (failed attempts).
    pub errors: usize,
    /// Whether it is made of v0.1.2 records (no execution ids, no start marker): records the
    /// host appends to it keep an empty execution id.
    pub legacy: bool,
}

impl Execution {
    /// Whether it completed (has an `END`).
    pub fn is_completed(&self) -> bool {
        self.end.is_some()
    }
}

/// The records a v0.1.2 writer left at the start of a journal: no execution ids, no start
/// markers. A journal is legacy up to its first record with an execution id.
#[derive(Clone, Debug, Default)]
pub struct LegacyPrefix {
    /// Indices of its records, session lifecycle records left out, in order.
    pub records: Vec<usize>,
    /// Index of its last `END`.
    pub last_end: Option<usize>,
    /// Whether its last record is an `END` or an `ERROR`: "A legacy END or ERROR finishes
    /// the turn, making Resume a no-op."
    pub finished: bool,
}

/// Whether a v0.1.2 writer could have written a record of this kind.
fn is_legacy_kind(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::Input
            | EventKind::ModelCall
            | EventKind::Output
            | EventKind::ToolCall
            | EventKind::ToolResult
            | EventKind::Usage
            | EventKind::Lifecycle
            | EventKind::End
            | EventKind::Error
    )
}

/// A journal split into executions.
#[derive(Clone, Debug, Default)]
pub struct Executions {
    /// The executions, in order of their start markers.
    pub list: Vec<Execution>,
    /// The v0.1.2 records before the first execution id (empty for a journal written by a
    /// current host).
    pub legacy: LegacyPrefix,
    /// Records with an execution id but no start marker of theirs (a pre-marker journal).
    pub orphans: usize,
    /// The first shape a reconstruction must refuse (`ErrInvalidExecutionLog`): a start
    /// marker without an execution id, a kind no v0.1.2 writer wrote in the legacy prefix,
    /// an unfinished legacy prefix followed by an execution without a marker, a record
    /// without an execution id after a modern one.
    pub invalid: Option<String>,
    /// Seq of the last `LIFECYCLE FORK` record (records before it were inherited from the
    /// parent), 0 when the session is not a fork.
    pub fork_seq: Seq,
}

impl Executions {
    /// Splits `records` (a whole journal, from seq 1).
    pub fn split(records: &[Record]) -> Self {
        let mut out = Executions::default();
        // Whether a record with an execution id was seen: the legacy prefix is over.
        let mut modern = false;
        for (i, r) in records.iter().enumerate() {
            let ev = &r.event;
            let kind = ev.kind();
            let id_less = ev.execution_id.is_empty();
            match &ev.body {
                EventBody::ExecutionStart(m) => {
                    if id_less {
                        refuse(
                            &mut out,
                            format!("record {}: a start marker with no execution_id", r.seq),
                        );
                        continue;
                    }
                    modern = true;
                    out.list.push(Execution {
                        execution_id: ev.execution_id.clone(),
                        start_index: i,
                        start_seq: r.seq,
                        marker: m.clone(),
                        inputs: Vec::new(),
                        effects: Vec::new(),
                        end: None,
                        errors: 0,
                        legacy: false,
                    });
                    continue;
                }
                // A kind this version does not know is kept in the journal (and verified)
                // but is neither an input nor an effect: replay passes over it. No v0.1.2
                // writer wrote one, so in the legacy prefix it is refused.
                EventBody::Unknown { .. } => {
                    if id_less && !modern {
                        refuse(&mut out, format!("record {}: not a legacy event", r.seq));
                    }
                    continue;
                }
                EventBody::Lifecycle(l) => {
                    if l.kind == LifecycleKind::Fork {
                        out.fork_seq = r.seq;
                    }
                    if id_less {
                        continue;
                    }
                }
                _ => {}
            }
            if id_less {
                if modern {
                    refuse(
                        &mut out,
                        format!(
                            "record {} ({}): no execution_id after a modern execution",
                            r.seq,
                            kind.as_str()
                        ),
                    );
                } else if !is_legacy_kind(kind) {
                    refuse(
                        &mut out,
                        format!("record {} ({}): not a legacy event", r.seq, kind.as_str()),
                    );
                } else {
                    out.legacy.records.push(i);
                    out.legacy.finished = matches!(kind, EventKind::End | EventKind::Error);
                    if kind == EventKind::End {
                        out.legacy.last_end = Some(i);
                    }
                }
                continue;
            }
            if !modern && !out.legacy.records.is_empty() && !out.legacy.finished {
                refuse(
                    &mut out,
                    format!(
                        "record {}: an execution without a start marker after an unfinished legacy prefix",
                        r.seq
                    ),
                );
            }
            modern = true;
            let Some(x) = out
                .list
                .iter_mut()
                .rev()
                .find(|x| x.execution_id == ev.execution_id)
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

    /// The legacy run that replay re-runs: v0.1.2 replay is one invocation with every legacy
    /// input and the legacy records as History ("it does not infer per-turn boundaries").
    /// In a pure legacy journal it is the whole log, finished or not; in front of modern
    /// executions it is the prefix up to the last legacy `END` ("Mixed Replay skips that
    /// abandoned tail while retaining whole-log replay of the complete legacy prefix"), and
    /// none when no legacy turn finished. Its id is `legacy_id(anchor)`, anchored on the
    /// first INPUT (else the first record).
    pub fn legacy_replay(
        &self,
        records: &[Record],
        legacy_id: impl Fn(usize) -> String,
    ) -> Option<Execution> {
        let upto = if self.list.is_empty() {
            *self.legacy.records.last()?
        } else {
            self.legacy.last_end?
        };
        let run: Vec<usize> = self
            .legacy
            .records
            .iter()
            .copied()
            .filter(|&i| i <= upto)
            .collect();
        let anchor = run
            .iter()
            .copied()
            .find(|&i| records[i].event.kind() == EventKind::Input)
            .or_else(|| run.first().copied())?;
        let history = if self.list.is_empty() {
            records.len()
        } else {
            upto + 1
        };
        Some(legacy_execution(
            records,
            legacy_id(anchor),
            history,
            &run,
            self.legacy.last_end.filter(|&e| e <= upto),
        ))
    }

    /// The legacy turn resume re-drives when the journal's head is an unfinished legacy
    /// turn: "Legacy Resume selects only the last INPUT and continues the invocation": its
    /// input is that INPUT, its History the records before it, its effects those after it.
    /// `None` when the journal has modern executions, no legacy records, or a finished
    /// legacy turn.
    pub fn legacy_resume(
        &self,
        records: &[Record],
        legacy_id: impl Fn(usize) -> String,
    ) -> Option<Execution> {
        if !self.list.is_empty() || self.legacy.finished {
            return None;
        }
        let all = &self.legacy.records;
        let anchor = all
            .iter()
            .rev()
            .copied()
            .find(|&i| records[i].event.kind() == EventKind::Input)
            .or_else(|| all.first().copied())?;
        let run: Vec<usize> = all.iter().copied().filter(|&i| i >= anchor).collect();
        Some(legacy_execution(
            records,
            legacy_id(anchor),
            anchor,
            &run,
            None,
        ))
    }
}

/// Keeps the first shape a reconstruction must refuse.
fn refuse(out: &mut Executions, why: String) {
    out.invalid.get_or_insert(why);
}

/// An execution made of the legacy records `run`.
fn legacy_execution(
    records: &[Record],
    id: String,
    history: usize,
    run: &[usize],
    end: Option<usize>,
) -> Execution {
    let mut x = Execution {
        execution_id: id,
        start_index: history,
        start_seq: 0,
        marker: ExecutionStart::default(),
        inputs: Vec::new(),
        effects: Vec::new(),
        end,
        errors: 0,
        legacy: true,
    };
    for &i in run {
        match &records[i].event.body {
            EventBody::Input(m) => x.inputs.push(m.clone()),
            EventBody::Error(_) => x.errors += 1,
            b if is_effect(b.kind()) => x.effects.push(i),
            _ => {}
        }
    }
    x
}
