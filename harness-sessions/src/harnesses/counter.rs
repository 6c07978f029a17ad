use std::sync::Mutex;

use async_trait::async_trait;
use harness_core::{
    Capabilities, Descriptor, EventSink, Harness, HarnessError, Resumability, Start,
};

/// The spec's reference harness 3 (`harness/counteragent`): an in-RAM count, incremented
/// and output each turn. Its state is process memory the journal cannot rebuild, so it
/// declares REQUIRES_MEMORY_SNAPSHOT (not fork-safe), and it never reads `Start::history`
/// (I4): 0 on a fresh boot, the restored value after a memory restore.
#[derive(Debug, Default)]
pub struct CounterHarness {
    count: Mutex<u64>,
}

impl CounterHarness {
    /// A counter at 0 (a fresh boot).
    pub fn new() -> Self {
        Self::default()
    }

    /// The count (what a memory snapshot would hold).
    pub fn count(&self) -> u64 {
        self.count.lock().map(|c| *c).unwrap_or(0)
    }
}

#[async_trait]
impl Harness for CounterHarness {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor {
            id: "counter".into(),
            version: "1".into(),
            models: Vec::new(),
            tools: Vec::new(),
            capabilities: Capabilities {
                resumability: Resumability::RequiresMemorySnapshot,
                fork_safe: false,
                ..Capabilities::default()
            },
        })
    }

    async fn run(&self, _start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        // Deliberately ignores `_start.history`.
        let n = {
            let mut c = self
                .count
                .lock()
                .map_err(|_| HarnessError::failed("counter lock poisoned"))?;
            *c += 1;
            *c
        };
        sink.output(&n.to_string()).await?;
        Ok(())
    }
}
