//! `exec`: running a new turn.

use harness_core::event::{Event, EventBody, ExecutionStart};
use harness_core::message::Message;
use harness_core::{History, IdentityContext, Resumability, Start};

use super::ids::derive_execution_id;
use super::sink::{JournalSink, Mode};
use super::{Controller, TurnReport};
use crate::depth::{message_nesting, too_deep};
use crate::error::Error;
use crate::hash::{MAX_EVENT_DEPTH, canonical_event};

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
    ///
    /// Refused before anything is journaled (no record, no fence): an empty session uid, an
    /// unknown session, an input the journal cannot hold ([`Error::InvalidInput`]), an
    /// unknown harness, a harness that does not describe itself or cannot be placed here. The
    /// config is the harness's to read: the host journals it verbatim before the harness
    /// runs, so a config the harness rejects fails the turn after its start and inputs are
    /// journaled, as the spec words it for chat ("A rejected config leaves the turn
    /// incomplete. Every Resume retries that turn with the same journaled config and fails
    /// again; recovery requires a new Exec with valid config").
    pub async fn exec(&self, req: ExecRequest) -> Result<TurnReport, Error> {
        let span = exec_span(&req);
        let r = tracing::Instrument::instrument(self.exec_in(req, false), span.clone()).await;
        span.in_scope(|| crate::telemetry::turn_result(&r));
        r
    }

    /// [`exec`](Self::exec) in a session it creates, with `req.harness` (or the registry
    /// default) as the session's default harness, once the request is admitted: a request
    /// refused before anything would be journaled creates no session either. (agentsessions'
    /// Exec without a session creates one first, so a refused request leaves it behind empty:
    /// "resending the session-less request creates another empty session".) A session of
    /// that uid already there is
    /// [`JournalError::AlreadyExists`](crate::JournalError::AlreadyExists).
    pub async fn exec_new_session(&self, req: ExecRequest) -> Result<TurnReport, Error> {
        let span = exec_span(&req);
        let r = tracing::Instrument::instrument(self.exec_in(req, true), span.clone()).await;
        span.in_scope(|| crate::telemetry::turn_result(&r));
        r
    }

    async fn exec_in(&self, req: ExecRequest, create: bool) -> Result<TurnReport, Error> {
        if req.session.is_empty() {
            return Err(Error::MissingSessionUid);
        }
        Self::admit_inputs(&req.inputs)?;
        let _guard = self.guard(&req.session).await;
        let default = if create {
            self.default.clone()
        } else {
            self.journal.meta(&req.session)?.harness
        };
        let name = req.harness.clone().unwrap_or(default);
        let p = self.prepare(&name).await?;
        if create {
            self.create_session(&req.session, Some(&name))?;
        }
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
        tracing::Span::current().record("execution_id", execution_id.as_str());
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

    /// Refuses, before anything is journaled, an input whose INPUT record the journal could
    /// not hold (the same canonicalization its record gets when it is sealed).
    fn admit_inputs(inputs: &[Message]) -> Result<(), Error> {
        for (index, m) in inputs.iter().enumerate() {
            let invalid = |reason: String| Error::InvalidInput { index, reason };
            // Far too deep: refused without copying it (which recurses once per level).
            if message_nesting(m) > MAX_EVENT_DEPTH {
                return Err(invalid(too_deep()));
            }
            canonical_event(&Event::new("", EventBody::Input(m.clone())))
                .map_err(|e| invalid(e.0))?;
        }
        Ok(())
    }
}

/// The span of an exec: `sessions.exec`.
fn exec_span(req: &ExecRequest) -> tracing::Span {
    tracing::info_span!(
        "sessions.exec",
        session = %req.session,
        harness = req.harness.as_deref().unwrap_or(""),
        execution_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
    )
}
