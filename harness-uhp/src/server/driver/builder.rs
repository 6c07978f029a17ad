//! [`ServiceBuilder`]: a [`UhpService`] with its harnesses, model, models, tools, keys and store, the
//! store read back into the machine.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use harness_core::Harness;
use harness_core::clock::MonotonicClock;
use harness_core::model::Model;
use harness_core::tool::Tools;
use harness_core::tool::rules::ApprovalPolicy;

use super::files::FileTools;
use super::{Shared, State, UhpService};
use crate::server::store::{MemoryStore, Store, StoreError};
use crate::server::{Base, Principal, UhpServer, UhpServerConfig};

type Configure = Box<dyn FnOnce(&mut UhpServerConfig) + Send>;

/// Builds a [`UhpService`].
pub struct ServiceBuilder {
    model: Arc<dyn Model>,
    harnesses: Vec<(Base, Arc<dyn Harness>)>,
    models: Vec<String>,
    tools: Tools,
    file_tools: Option<FileTools>,
    policy: ApprovalPolicy,
    keys: Vec<(String, Principal)>,
    store: Arc<dyn Store>,
    configure: Vec<Configure>,
}

impl std::fmt::Debug for ServiceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceBuilder")
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl UhpService {
    /// A host whose agents' `sink.model` calls go to `model`.
    pub fn builder(model: impl Model + 'static) -> ServiceBuilder {
        ServiceBuilder {
            model: Arc::new(model),
            harnesses: Vec::new(),
            models: vec!["default".into()],
            tools: Tools::new(),
            file_tools: None,
            policy: ApprovalPolicy::default(),
            keys: Vec::new(),
            store: Arc::new(MemoryStore),
            configure: Vec::new(),
        }
    }
}

impl ServiceBuilder {
    /// Registers a harness under `base` (its built-in configured harness is listed; the
    /// first registered is the default).
    #[must_use]
    pub fn harness(mut self, base: &str, label: &str, harness: impl Harness + 'static) -> Self {
        self.harnesses.push((
            Base {
                base: base.to_owned(),
                label: label.to_owned(),
            },
            Arc::new(harness),
        ));
        self
    }

    /// The model ids the model serves (the first is the default).
    #[must_use]
    pub fn models<I: IntoIterator<Item = S>, S: Into<String>>(mut self, ids: I) -> Self {
        self.models = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The tools the host runs for `sink.tool_call`.
    #[must_use]
    pub fn tools(mut self, tools: Tools) -> Self {
        self.tools = tools;
        self
    }

    /// Binds [`FileTools`] (whose tools should also be in [`tools`](Self::tools)) to this host.
    #[must_use]
    pub fn file_tools(mut self, files: &FileTools) -> Self {
        self.file_tools = Some(files.clone());
        self
    }

    /// How gated tool calls are decided (default: denied; UHP has no way to ask a person).
    #[must_use]
    pub fn approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Accepts a bearer token for a principal.
    #[must_use]
    pub fn api_key(mut self, token: &str, principal: &str) -> Self {
        self.keys
            .push((token.to_owned(), Principal::new(principal)));
        self
    }

    /// Where records go (default [`MemoryStore`]).
    #[must_use]
    pub fn store(mut self, store: impl Store + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Changes the server's configuration (bounds, names).
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut UhpServerConfig) + Send + 'static) -> Self {
        self.configure.push(Box::new(f));
        self
    }

    /// The host, its store read back. `clock` gives monotonic time, `wall_ms` the Unix time
    /// in milliseconds: the host reads them, the library never does.
    pub async fn build(
        self,
        clock: impl MonotonicClock + 'static,
        wall_ms: impl Fn() -> i64 + Send + Sync + 'static,
    ) -> Result<UhpService, StoreError> {
        let bases = self.harnesses.iter().map(|(b, _)| b.clone()).collect();
        let mut cfg = UhpServerConfig::new(bases, self.models);
        cfg.persist = self.store.durable();
        let shared = self.store.durable() && self.store.shared();
        cfg.shared = shared;
        for f in self.configure {
            f(&mut cfg);
        }
        let mut server = UhpServer::new(cfg);
        for (k, p) in self.keys {
            server.add_api_key(&k, p);
        }
        for r in self.store.load().await? {
            server.restore(r);
        }
        let (turn_tx, turn_rx) = mpsc::unbounded();
        let (store_tx, store_rx) = mpsc::unbounded();
        let (remote_tx, remote_rx) = mpsc::unbounded();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                server,
                stream_wakers: HashMap::new(),
                wait_wakers: HashMap::new(),
                aborts: HashMap::new(),
                stopped: HashSet::new(),
                claims: Vec::new(),
            }),
            harnesses: self
                .harnesses
                .into_iter()
                .map(|(b, h)| (b.base, h))
                .collect(),
            model: self.model,
            tools: self.tools,
            policy: self.policy,
            clock: Arc::new(clock),
            wall_ms: Arc::new(wall_ms),
            store: self.store,
            shared,
            turn_tx,
            store_tx,
            remote_tx,
            receivers: Mutex::new(Some((turn_rx, store_rx, remote_rx))),
            watch: Mutex::new(None),
            writes: Default::default(),
        });
        if let Some(f) = self.file_tools {
            f.bind(&shared);
        }
        Ok(UhpService { shared })
    }
}
