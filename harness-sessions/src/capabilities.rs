//! Capability matching: placing a harness only on a runtime that can honor what it declares.
//!
//! ```
//! use harness_core::{Capabilities, Resumability};
//! use harness_sessions::capabilities::{RuntimeCapabilities, can_place};
//!
//! let counter = Capabilities { resumability: Resumability::RequiresMemorySnapshot, ..Default::default() };
//! assert!(!can_place(&counter, &RuntimeCapabilities::filesystem_only()));
//! assert!(can_place(&counter, &RuntimeCapabilities { memory_snapshot: true, ..Default::default() }));
//! ```

use harness_core::{Capabilities, Resumability};

/// What a runtime (the compute a harness runs on) can do (agentsessions
/// `api.RuntimeCapabilities`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RuntimeCapabilities {
    /// It can snapshot and restore the harness's memory.
    pub memory_snapshot: bool,
    /// It can fork a snapshot copy-on-write.
    pub cow_fork: bool,
    /// It can attest what it runs.
    pub attest: bool,
    /// It can keep GPU state across a snapshot.
    pub gpu_state: bool,
}

impl RuntimeCapabilities {
    /// A plain process or pod: files survive, memory does not.
    pub fn filesystem_only() -> Self {
        Self::default()
    }
}

/// Whether a harness declaring `harness` may run on a runtime offering `runtime`
/// (agentsessions `controller.CanPlace`): a `REQUIRES_MEMORY_SNAPSHOT` harness needs memory
/// snapshots; nothing else is checked (GPU and fork-safety are not matched, as upstream).
pub fn can_place(harness: &Capabilities, runtime: &RuntimeCapabilities) -> bool {
    harness.resumability != Resumability::RequiresMemorySnapshot || runtime.memory_snapshot
}
