//! `exec`: running a new turn.

use harness_core::event::{EventBody, ExecutionStart};
use harness_core::message::Message;
use harness_core::{History, IdentityContext, Resumability, Start};

use super::ids::derive_execution_id;
use super::sink::{JournalSink, Mode};
use super::{Controller, TurnOutcome};
use crate::error::Error;

/// A new turn.
#[derive(Clone, Debug, Default)]
pub struct ExecRequest {
    /// The session (created beforehand with [`Controller::create_session`]).
    pub session: String,
    /// The invocation's inputs (one INPUT record each).
    pub inputs: Vec<Message>,
    /// Opaque per-execution config, journaled verbatim before the harness runs. Not a secret
    /// channel: it is durable journal content.
    pub config: Vec<u8>,
    /// A harness for this turn only (a registry name); `None` uses the session's default.
    pub harness: Option<String>,
    /// The harness cursor (journaled; not the append CAS cursor).
    pub resume_from_seq: i64,
    /// Who the turn runs for.
    pub identity: IdentityContext,
}

impl ExecRequest {
    /// A turn of `session` with these inputs.
    pub fn new(session: impl Into<String>, inputs: Vec<Message>) -> Self {
        ExecRequest {
            session: session.into(),
            inputs,
            ..Default::default()
        }
    }

    /// A turn with one user text input.
    pub fn text(session: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(session, vec![Message::user(text)])
    }

    /// Sets the per-execution config.
    #[must_use]
    pub fn with_config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.config = config.into();
        self
    }

    /// Runs this turn on another registered harness.
    #[must_use]
    pub fn with_harness(mut self, harness: impl Into<String>) -> Self {
        self.harness = Some(harness.into());
        self
    }
}

impl Controller {
    /// Runs a new turn: EXECUTION_START (config, cursor, input count, harness name and
    /// version), one INPUT per input, then the harness with a live sink; END on success,
    /// ERROR on failure.
    pub async fn exec(&self, req: ExecRequest) -> Result<TurnOutcome, Error> {
        if req.session.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        let _guard = self.guard(&req.session).await;
        let meta = self.journal.meta(&req.session)?;
        let name = req.harness.clone().unwrap_or(meta.harness);
        let p = self.prepare(&name).await?;
        let fence = self.journal.acquire_fence(&req.session)?;
        let stateless = p.descriptor.capabilities.resumability == Resumability::StatelessReplay;
        let history: History = if stateless {
            self.records(&req.session)?
                .into_iter()
                .map(|r| r.event)
                .collect()
        } else {
            // A memory-snapshot harness holds its state in RAM and never reads History (I4).
            History::default()
        };
        let head = self.journal.head(&req.session)?;
        let marker = ExecutionStart {
            config: req.config.clone(),
            resume_from_seq: req.resume_from_seq,
            input_count: Some(i64::try_from(req.inputs.len()).unwrap_or(i64::MAX)),
            harness: p.name.clone(),
            harness_version: p.descriptor.version.clone(),
        };
        let execution_id = derive_execution_id(&req.session, &head, &marker, &req.inputs);
        let ctx = self.ctx(
            &req.session,
            &execution_id,
            fence,
            &p.descriptor,
            0,
            Mode::Recover,
        );
        let mut sink = JournalSink::new(ctx, Mode::Recover, &[], Vec::new(), head);
        self.host_append(&mut sink, EventBody::ExecutionStart(marker))?;
        for m in &req.inputs {
            self.host_append(&mut sink, EventBody::Input(m.clone()))?;
        }
        let start = Start {
            execution_id: execution_id.clone(),
            session_uid: req.session.clone(),
            config: req.config,
            history,
            inputs: req.inputs,
            identity: req.identity,
            resume_from_seq: req.resume_from_seq,
        };
        let result = p.harness.run(start, &mut sink).await;
        self.finish(&req.session, &execution_id, sink, result)
    }
}
