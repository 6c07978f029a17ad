//! Approvals: the request a parked turn waits on, and the host's decision on it.

use harness_core::event::{ApprovalResult, EventBody};
use harness_core::message::ToolCall;

use super::Controller;
use crate::error::Error;
use crate::execution::{Execution, Executions};
use crate::record::{Record, Seq};

/// An approval request waiting for a decision.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingApproval {
    /// The parked execution.
    pub execution_id: String,
    /// The gated call.
    pub call: ToolCall,
    /// Its APPROVAL_REQUEST record.
    pub request_seq: Seq,
}

fn to_i64(s: Seq) -> i64 {
    i64::try_from(s).unwrap_or(i64::MAX)
}

impl Controller {
    /// The approval request of `x` that has no decision yet.
    pub(super) fn pending_in(records: &[Record], x: &Execution) -> Option<PendingApproval> {
        let mut pending: Option<PendingApproval> = None;
        let mut last_call: Option<ToolCall> = None;
        for &i in &x.effects {
            let r = &records[i];
            match &r.event.body {
                EventBody::ToolCall(c) => last_call = Some(c.clone()),
                EventBody::ApprovalRequest(a) => {
                    let call = last_call
                        .clone()
                        .filter(|c| c.id == a.tool_call_id)
                        .unwrap_or_else(|| ToolCall {
                            id: a.tool_call_id.clone(),
                            ..ToolCall::default()
                        });
                    pending = Some(PendingApproval {
                        execution_id: x.execution_id.clone(),
                        call,
                        request_seq: r.seq,
                    });
                }
                EventBody::ApprovalResult(d)
                    if pending
                        .as_ref()
                        .is_some_and(|p| p.call.id == d.tool_call_id) =>
                {
                    pending = None;
                }
                _ => {}
            }
        }
        pending
    }

    /// The approval request the session's last execution is parked on, if any.
    pub fn pending_approval(&self, session: &str) -> Result<Option<PendingApproval>, Error> {
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        Ok(xs
            .list
            .last()
            .filter(|x| !x.is_completed())
            .and_then(|x| Self::pending_in(&records, x)))
    }

    /// Records a decision on a pending approval request (APPROVAL_RESULT). Resume then
    /// delivers it: a denial gives an `APPROVAL_DENIED` result and never runs the executor.
    /// A request this session inherited from its fork parent cannot be decided here
    /// ([`Error::InheritedToolIntent`]): resume would never deliver the decision.
    pub fn approve(
        &self,
        session: &str,
        tool_call_id: &str,
        approved: bool,
        reason: &str,
    ) -> Result<Seq, Error> {
        let records = self.records(session)?;
        let xs = Executions::split(&records);
        let x = xs
            .list
            .last()
            .filter(|x| !x.is_completed())
            .ok_or_else(|| Error::NoPendingApproval(tool_call_id.to_owned()))?;
        let pending = Self::pending_in(&records, x)
            .filter(|p| p.call.id == tool_call_id)
            .ok_or_else(|| Error::NoPendingApproval(tool_call_id.to_owned()))?;
        // A gated call inherited from a fork parent is never re-driven under the child's
        // uid, so a decision on it could not be delivered: refuse it before appending.
        if let Some((id, seq)) = Self::inherited_intent(&records, x, xs.fork_seq)
            && id == tool_call_id
        {
            return Err(Error::InheritedToolIntent {
                execution_id: x.execution_id.clone(),
                tool_call_id: id,
                seq,
            });
        }
        let body = EventBody::ApprovalResult(ApprovalResult {
            tool_call_id: tool_call_id.to_owned(),
            approved,
            reason: reason.to_owned(),
            request_seq: to_i64(pending.request_seq),
        });
        let rec = self.append_host_record(session, pending.execution_id, body)?;
        Ok(rec.seq)
    }
}
