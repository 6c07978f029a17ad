//! The envelope of every event the host writes: the schema version and a wall-clock
//! timestamp.

use harness_core::clock::WallClock;
use harness_core::event::{Event, EventBody};

/// The `schema_version` of the events this controller writes.
pub const SCHEMA_VERSION: i32 = 1;

/// `body` in the envelope the host writes now: this schema version, the wall clock's
/// timestamp (the journal's timestamps are wall-clock time; the library never reads a clock
/// itself), no actor.
pub(crate) fn envelope(clock: &dyn WallClock, execution_id: String, body: EventBody) -> Event {
    Event {
        execution_id,
        timestamp: clock.now(),
        schema_version: SCHEMA_VERSION,
        actor: None,
        body,
    }
}
