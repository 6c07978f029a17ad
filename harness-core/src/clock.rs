//! Two kinds of time, with two names.
//!
//! - **Monotonic time** ([`Instant`]) runs the state machines: deadlines, heartbeats,
//!   retries. A machine takes it as `now` on every input ([`run_loop`](crate::run_loop)); a
//!   driver that must read it itself (to feed a machine) takes a [`MonotonicClock`].
//! - **Wall-clock time** ([`Timestamp`]) is written into records that outlive the process:
//!   a journal event's `timestamp`. A host that writes such records takes a [`WallClock`].
//!
//! The library never reads either clock: the application passes them in, usually as
//! `Instant::now` and `|| Some(Timestamp::from_system_time(SystemTime::now()))`. Tests pass a
//! virtual clock instead.
//!
//! ```
//! use std::time::{Instant, SystemTime};
//! use harness_core::Timestamp;
//! use harness_core::clock::{MonotonicClock, NoWallClock, WallClock};
//!
//! fn takes(mono: impl MonotonicClock, wall: impl WallClock) -> (Instant, Option<Timestamp>) {
//!     (mono.now(), wall.now())
//! }
//! let (_, stamped) = takes(Instant::now, || Some(Timestamp::from_system_time(SystemTime::now())));
//! assert!(stamped.is_some());
//! let (_, none) = takes(Instant::now, NoWallClock);
//! assert_eq!(none, None);
//! ```

use std::sync::Arc;
use std::time::Instant;

use crate::proto_json::Timestamp;

/// Where a driver reads monotonic time to feed its state machine. Any `Fn() -> Instant`
/// is one (`Instant::now`, or a test's virtual clock).
pub trait MonotonicClock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<F: Fn() -> Instant + Send + Sync> MonotonicClock for F {
    fn now(&self) -> Instant {
        self()
    }
}

impl<C: MonotonicClock + ?Sized> MonotonicClock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// Where a host reads the wall-clock time it writes into records. Any
/// `Fn() -> Option<Timestamp>` is one; [`NoWallClock`] writes none.
pub trait WallClock: Send + Sync {
    /// The timestamp of a record written now (`None`: the record carries none).
    fn now(&self) -> Option<Timestamp>;
}

impl<F: Fn() -> Option<Timestamp> + Send + Sync> WallClock for F {
    fn now(&self) -> Option<Timestamp> {
        self()
    }
}

impl<C: WallClock + ?Sized> WallClock for Arc<C> {
    fn now(&self) -> Option<Timestamp> {
        (**self).now()
    }
}

/// No wall clock: records carry no timestamp (deterministic output, as tests want).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoWallClock;

impl WallClock for NoWallClock {
    fn now(&self) -> Option<Timestamp> {
        None
    }
}
