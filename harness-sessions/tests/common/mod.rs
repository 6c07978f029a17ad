//! Shared test helpers: a scripted harness, a counting executor, a journal that "crashes".
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod approval_rig;
pub mod faq;
pub mod wire;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use harness_core::event::EventKind;
use harness_core::message::{
    JsonObject, Mediation, Message, ModelRequest, Part, ReasoningPart, Role, ToolCall, ToolResult,
    Usage,
};
use harness_core::model::{Model, ModelStream, ScriptedModel};
use harness_core::tool::{Tool, ToolContext, Tools};
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_sessions::controller::Controller;
use harness_sessions::harnesses::EchoHarness;
use harness_sessions::journal::{Journal, JournalError, MemoryJournal, SessionMeta};
use harness_sessions::record::{Fence, Head, Record, Seq};
use harness_sessions::tools::{DedupExecutor, MemoryReceipts};
use harness_sessions::verify::{Verified, VerifyError};
use serde_json::json;

pub fn block<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// One step of a scripted agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `sink.model` with the conversation so far; the completion joins the conversation.
    Model,
    /// `sink.output(text)`.
    Output(String),
    /// A controller-mediated `sink.tool_call` with a per-execution idempotency key.
    Tool,
    /// An approval-gated `sink.tool_call`.
    Gated,
    /// `sink.report` of a tool the harness ran itself.
    Report,
    /// `sink.usage`.
    Usage(u64),
}

/// A stateless harness that runs a fixed script of sink calls each turn.
#[derive(Clone, Debug)]
pub struct ScriptHarness {
    pub ops: Vec<Op>,
    pub version: String,
    pub runs: Arc<AtomicUsize>,
}

impl ScriptHarness {
    pub fn new(ops: Vec<Op>) -> Self {
        ScriptHarness {
            ops,
            version: "1".into(),
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }
}

pub fn call_for(exec_id: &str, i: usize, mediation: Mediation) -> ToolCall {
    let mut args = JsonObject::new();
    args.insert("step".into(), json!(i));
    args.insert("ratio".into(), json!(0.5));
    ToolCall::new(format!("call-{i}"), "effect", args)
        .with_mediation(mediation)
        .with_idempotency_key(format!("{exec_id}-{i}"))
}

#[async_trait]
impl Harness for ScriptHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        let mut d = Descriptor::new("script", self.version.clone());
        d.capabilities.fork_safe = true;
        Ok(d)
    }

    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let mut convo = start.history_messages();
        convo.extend(start.inputs.iter().cloned());
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Op::Model => {
                    let resp = sink
                        .model(ModelRequest::new(convo.clone()).with_model("m"))
                        .await?;
                    convo.push(resp.message);
                }
                Op::Output(t) => sink.output(t).await?,
                Op::Tool | Op::Gated => {
                    let m = if *op == Op::Tool {
                        Mediation::ControllerMediated
                    } else {
                        Mediation::RequiresApproval
                    };
                    let r = sink.tool_call(call_for(&start.execution_id, i, m)).await?;
                    convo.push(Message {
                        role: Role::Tool,
                        parts: vec![Part::ToolResult(r)],
                    });
                }
                Op::Report => {
                    let mut out = JsonObject::new();
                    out.insert("ran".into(), json!(i));
                    sink.report(ToolResult::ok(format!("own-{i}"), out)).await?;
                }
                Op::Usage(n) => {
                    sink.usage(Usage {
                        model: "m".into(),
                        input_tokens: *n,
                        output_tokens: n / 2,
                        reasoning_tokens: 0,
                    })
                    .await?
                }
            }
        }
        Ok(())
    }
}

/// A deterministic provider: answers with the length of the conversation.
pub fn counting_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new().otherwise(|req| {
        Ok(Message::assistant(format!(
            "answer to {} messages",
            req.messages.len()
        )))
    }))
}

/// A provider whose completions carry an opaque reasoning part (bytes that are not UTF-8, a
/// summary, an item id) before the text, as the spec's Rule 5 describes them.
pub fn reasoning_model() -> ScriptedModel {
    ScriptedModel::new().otherwise(|req| {
        Ok(Message {
            role: Role::Assistant,
            parts: vec![
                Part::Reasoning(ReasoningPart {
                    provider: "p".into(),
                    model_id: "m".into(),
                    opaque: Some(b"\x00opaque\xff".to_vec()),
                    summary: vec![Part::text("thought")],
                    item_id: "rs_1".into(),
                    ordinal: 1,
                    ..Default::default()
                }),
                Part::text(format!("answer to {} messages", req.messages.len())),
            ],
        })
    })
}

/// Every effect the `effect` tool performed, by (session, key).
#[derive(Debug, Default)]
pub struct Effects {
    pub log: Mutex<Vec<(String, String)>>,
}

impl Effects {
    pub fn count(&self) -> usize {
        self.log.lock().unwrap().len()
    }
    pub fn keys(&self) -> Vec<(String, String)> {
        self.log.lock().unwrap().clone()
    }

    /// The `effect` tool: logs (session, key) each time it runs and answers `{"done": key}`.
    pub fn tool(self: &Arc<Self>) -> Tool {
        let effects = Arc::clone(self);
        Tool::new(
            "effect",
            "A counted effect",
            move |call: ToolCall, cx: ToolContext| {
                effects
                    .log
                    .lock()
                    .unwrap()
                    .push((cx.session_uid.clone(), call.idempotency_key.clone()));
                let mut out = JsonObject::new();
                out.insert("done".into(), json!(call.idempotency_key));
                async move { ToolResult::ok("", out) }
            },
        )
    }

    /// A registry holding only [`tool`](Self::tool).
    pub fn tools(self: &Arc<Self>) -> Tools {
        Tools::new().with(self.tool())
    }
}

/// A durable-dedup executor over the counted effects' tools (the receipts outlive a "crash"):
/// the executor layer as a host with a custom executor composes it.
pub fn dedup(
    effects: &Arc<Effects>,
    receipts: &Arc<MemoryReceipts>,
) -> Arc<DedupExecutor<Tools, Arc<MemoryReceipts>>> {
    Arc::new(DedupExecutor::new(effects.tools(), Arc::clone(receipts)))
}

/// A journal that dies after a number of appended records: every later write fails, as if
/// the process had stopped right after that record reached storage.
pub struct Crashing<J> {
    pub inner: J,
    budget: Mutex<Option<usize>>,
}

impl<J: Journal> Crashing<J> {
    pub fn new(inner: J, records: Option<usize>) -> Self {
        Crashing {
            inner,
            budget: Mutex::new(records),
        }
    }
    fn dead(&self) -> bool {
        *self.budget.lock().unwrap() == Some(0)
    }
}

fn crashed() -> JournalError {
    JournalError::Io("process crashed".into())
}

impl<J: Journal> Journal for Crashing<J> {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        if self.dead() {
            return Err(crashed());
        }
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
        if self.dead() {
            return Err(crashed());
        }
        self.inner.acquire_fence(session)
    }
    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        let mut b = self.budget.lock().unwrap();
        if let Some(n) = *b {
            if records.len() > n {
                *b = Some(0);
                return Err(crashed());
            }
            *b = Some(n - records.len());
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
        if self.dead() {
            return Err(crashed());
        }
        self.inner.fork(parent, at, child, meta)
    }
    fn sync(&self, session: &str) -> Result<(), JournalError> {
        if self.dead() {
            return Err(crashed());
        }
        self.inner.sync(session)
    }
    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        self.inner.verify(session)
    }
}

/// The kinds of a session's records, in order.
pub fn kinds(host: &Controller, session: &str) -> Vec<EventKind> {
    host.records(session)
        .unwrap()
        .iter()
        .map(|r| r.event.kind())
        .collect()
}

/// Whether every record of a session has an empty execution id (a legacy, v0.1.2, form).
pub fn all_legacy_ids(host: &Controller, session: &str) -> bool {
    host.records(session)
        .unwrap()
        .iter()
        .all(|r| r.event.execution_id.is_empty())
}

/// The kinds of a session's records, as their names, one line (`EXECUTION_START INPUT …`).
pub fn kind_names(host: &Controller, session: &str) -> String {
    kinds(host, session)
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The content hashes of a session's records.
pub fn hashes(journal: &dyn Journal, session: &str) -> Vec<String> {
    journal
        .read(session, 1, None)
        .unwrap()
        .iter()
        .map(|r| r.content_hash.to_string())
        .collect()
}

/// A model wrapper that calls a hook before each completion (to look at the journal).
pub struct Hooked<M> {
    pub inner: M,
    pub hook: Box<dyn Fn(&ModelRequest) + Send + Sync>,
}

#[async_trait]
impl<M: Model> Model for Hooked<M> {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> ModelStream<'a> {
        (self.hook)(req);
        self.inner.stream(req)
    }
}

/// A controller over a memory journal with session "s" on a script harness (and echo), a
/// counted dedup executor and `model`.
pub struct Host {
    pub host: Controller,
    pub journal: Arc<MemoryJournal>,
    pub model: Arc<ScriptedModel>,
    pub effects: Arc<Effects>,
    pub harness: ScriptHarness,
}

pub fn host_with(ops: Vec<Op>, model: Arc<ScriptedModel>) -> Host {
    let journal = Arc::new(MemoryJournal::new());
    let effects = Arc::new(Effects::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let harness = ScriptHarness::new(ops);
    let host = Controller::builder(journal.clone())
        .model(model.clone())
        .tools(effects.tools())
        .receipts(receipts)
        .harness("script", harness.clone())
        .harness("echo", EchoHarness)
        .build();
    host.create_session("s", Some("script")).unwrap();
    Host {
        host,
        journal,
        model,
        effects,
        harness,
    }
}

/// [`host_with`] on the counting model.
pub fn host(ops: Vec<Op>) -> Host {
    host_with(ops, counting_model())
}

/// A harness that cannot describe itself (a remote one that does not answer).
pub struct Silent;

#[async_trait]
impl Harness for Silent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Err(HarnessError::failed("connection refused"))
    }
    async fn run(&self, _: Start, _: &mut dyn EventSink) -> Result<(), HarnessError> {
        panic!("never run")
    }
}

/// A fresh, empty folder for a test's file journal, named after the test binary and `name`.
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let d = std::env::temp_dir().join(format!("hs-{exe}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A controller `build` makes over a new memory journal, with an empty session `s`.
pub fn on_memory(
    build: impl FnOnce(Arc<dyn Journal>) -> Controller,
) -> (Arc<MemoryJournal>, Controller) {
    let journal = Arc::new(MemoryJournal::new());
    let host = build(journal.clone());
    host.create_session("s", None).unwrap();
    (journal, host)
}
