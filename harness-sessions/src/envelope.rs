//! The envelope of every event the host writes: the schema version and a [`Clock`] timestamp.

use harness_core::Timestamp;
use harness_core::event::{Event, EventBody};

/// The `schema_version` of the events this controller writes.
pub const SCHEMA_VERSION: i32 = 1;

/// Where event timestamps come from. The library never reads a clock: the host passes one
/// in (or none, and events carry no timestamp).
pub trait Clock: Send + Sync {
    /// The timestamp for an event being recorded now.
    fn now(&self) -> Option<Timestamp>;
}

/// No timestamps.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> Option<Timestamp> {
        None
    }
}

impl<F: Fn() -> Option<Timestamp> + Send + Sync> Clock for F {
    fn now(&self) -> Option<Timestamp> {
        self()
    }
}

/// `body` in the envelope the host writes now: this schema version, the clock's timestamp,
/// no actor.
pub(crate) fn envelope(clock: &dyn Clock, execution_id: String, body: EventBody) -> Event {
    Event {
        execution_id,
        timestamp: clock.now(),
        schema_version: SCHEMA_VERSION,
        actor: None,
        body,
    }
}
