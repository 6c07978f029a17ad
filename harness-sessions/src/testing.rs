//! Crash injection for tests, demos and tools: a journal that "dies" after a number of
//! appended records, as if the process had stopped right after that record reached storage.
//!
//! ```
//! use std::sync::Arc;
//! use harness_core::model::ScriptedModel;
//! use harness_sessions::harnesses::EchoHarness;
//! use harness_sessions::journal::{Journal, MemoryJournal};
//! use harness_sessions::testing::CrashAfter;
//! use harness_sessions::{Controller, ExecRequest};
//!
//! let journal = Arc::new(MemoryJournal::new());
//! let model = Arc::new(ScriptedModel::new().reply("hi").reply("hi"));
//! let build = |j: Arc<dyn Journal>| Controller::builder(j)
//!     .model(model.clone()).harness("echo", EchoHarness).build();
//! build(journal.clone()).create_session("s", None).unwrap();
//! // START, INPUT, MODEL_CALL reach the journal; the process "dies" before OUTPUT.
//! let crashing = build(Arc::new(CrashAfter::new(journal.clone(), 3)));
//! assert!(futures::executor::block_on(crashing.exec(ExecRequest::text("s", "x"))).is_err());
//! let turn = futures::executor::block_on(build(journal).resume("s")).unwrap().unwrap();
//! assert_eq!((turn.provider_calls, model.calls()), (1, 2)); // at most one extra call
//! ```

use std::sync::Mutex;

use crate::journal::{Journal, JournalError, SessionMeta};
use crate::record::{Fence, Head, Record, Seq};
use crate::verify::{HeadPin, Verified, VerifyError};

/// Wraps a journal: after `records` appended records every write fails.
#[derive(Debug)]
pub struct CrashAfter<J> {
    inner: J,
    budget: Mutex<usize>,
}

impl<J: Journal> CrashAfter<J> {
    /// Lets `records` more records through, then crashes.
    pub fn new(inner: J, records: usize) -> Self {
        CrashAfter {
            inner,
            budget: Mutex::new(records),
        }
    }

    /// Whether it has crashed (or will at the next write).
    pub fn crashed(&self) -> bool {
        self.budget.lock().map(|b| *b == 0).unwrap_or(true)
    }

    fn alive(&self) -> Result<(), JournalError> {
        if self.crashed() {
            Err(JournalError::Io("crash injected".into()))
        } else {
            Ok(())
        }
    }
}

impl<J: Journal> Journal for CrashAfter<J> {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        self.inner.create(session, meta)
    }
    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        self.inner.meta(session)
    }
    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        self.inner.sessions()
    }
    fn head(&self, session: &str) -> Result<Head, JournalError> {
        self.inner.head(session)
    }
    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        self.alive()?;
        self.inner.acquire_fence(session)
    }
    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        {
            let mut b = self
                .budget
                .lock()
                .map_err(|_| JournalError::Io("crash injected".into()))?;
            if records.len() > *b {
                *b = 0;
                return Err(JournalError::Io("crash injected".into()));
            }
            *b -= records.len();
        }
        self.inner
            .append(session, expected_last_seq, fence, records)
    }
    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        self.inner.read(session, from, to)
    }
    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError> {
        self.alive()?;
        self.inner.fork(parent, at, child, meta)
    }
    fn sync(&self, session: &str) -> Result<(), JournalError> {
        self.alive()?;
        self.inner.sync(session)
    }
    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        self.inner.verify(session)
    }
    fn verify_head(&self, session: &str, pin: &HeadPin) -> Result<Verified, VerifyError> {
        self.inner.verify_head(session, pin)
    }
}
