//! Thread ownership as a lease in the database: who holds it, under which epoch, until when
//! (the database's clock: no two hosts' clocks are ever compared).
//!
//! - **Acquire** ([`EventLog::lease`](crate::log::EventLog::lease)), one transaction under
//!   the thread row's lock: a host that holds the lease already keeps it (renewed); a lease
//!   that is free (never held, released, or expired) is taken under `epoch + 1`, and the
//!   same transaction appends `harness.ownership.changed {epoch, reason}`, so the first
//!   record of every epoch says who owns the log from there (`taken_over` when the old
//!   holder's lease expired with no release, else `acquired`); a live lease of another
//!   host is [`Lease::HeldBy`].
//! - **Fencing**: an append is one `UPDATE … WHERE lease_holder = me AND lease_epoch = mine`
//!   on the thread row (row-locked, so a concurrent takeover is seen), or
//!   [`LogError::Fenced`]: a host that was paused past its lease and taken over never
//!   writes into the thread again, whatever it still thinks it runs.
//! - **Renew**: [`PgLog::keep_leases`] renews every unreleased lease of this host every
//!   TTL/3, on the pool's runtime (a task of the adapter; the host machine reads no clock).
//! - **Release**: the host lets a thread go when it is idle
//!   ([`EventLog::release`](crate::log::EventLog::release)), and
//!   [`EventLog::release_all`](crate::log::EventLog::release_all) on a graceful shutdown.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use harness_core::pg::{PgError, Pool};

use super::{NOTIFY_CHANNEL, PgLog, log_err};
use crate::catalog::{self, HarnessEvent, OwnershipReason};
use crate::log::{Lease, LogError};

/// The lease side of a [`PgLog`]: this process's holder id, the TTL, and the epoch of each
/// thread it holds (threads it runs turns of: bounded by them).
#[derive(Debug)]
pub(super) struct Leases {
    pub(super) holder: String,
    pub(super) ttl_ms: i64,
    pub(super) held: Mutex<HashMap<String, i64>>,
}

impl Leases {
    pub(super) fn new(ttl: Duration) -> Leases {
        Leases {
            holder: format!("host-{}", uuid::Uuid::new_v4().simple()),
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1),
            held: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn epoch(&self, key: &str) -> Option<i64> {
        self.held.lock().ok().and_then(|h| h.get(key).copied())
    }

    pub(super) fn set(&self, key: &str, epoch: Option<i64>) {
        if let Ok(mut h) = self.held.lock() {
            match epoch {
                Some(e) => {
                    h.insert(key.to_owned(), e);
                }
                None => {
                    h.remove(key);
                }
            }
        }
    }
}

/// What the acquiring transaction decided.
enum Took {
    Kept(i64),
    New(i64, OwnershipReason),
    Other(String),
}

/// A task renewing this host's leases ([`PgLog::keep_leases`]); dropping it stops it.
#[derive(Debug)]
pub struct LeaseKeeper(tokio::task::JoinHandle<()>);

impl LeaseKeeper {
    /// Whether the task ended (it does not, unless the runtime stops).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl PgLog {
    /// This host's holder id (random per [`PgLog`]), or `None` without leases.
    pub fn holder(&self) -> Option<&str> {
        self.leases.as_ref().map(|l| l.holder.as_str())
    }

    /// The holder and expiry state of a thread's lease, as the database has it:
    /// `(holder, epoch, released)`.
    pub fn lease_state(&self, key: &str) -> Result<Option<(Option<String>, u64, bool)>, LogError> {
        let key = key.to_owned();
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                let row = c
                    .query_opt(
                        "SELECT lease_holder, lease_epoch, lease_released \
                         FROM harness_tanstack_thread WHERE key = $1",
                        &[&key],
                    )
                    .await?;
                Ok(match row {
                    Some(r) => {
                        let e: i64 = r.try_get(1)?;
                        Some((r.try_get(0)?, u64::try_from(e).unwrap_or(0), r.try_get(2)?))
                    }
                    None => None,
                })
            })
            .map_err(log_err)
    }

    /// Renews every lease this host holds (and has not released), now: the statement the
    /// keeper runs. How many it renewed.
    pub fn renew_leases(&self) -> Result<u64, LogError> {
        let Some(l) = &self.leases else { return Ok(0) };
        let (holder, ttl) = (l.holder.clone(), l.ttl_ms);
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move { renew(&pool, &holder, ttl).await })
            .map_err(log_err)
    }

    /// Starts renewing this host's leases every TTL/3 on the pool's runtime (the adapter's
    /// task: the host machine reads no clock), until the returned keeper is dropped. A
    /// failed renewal is tried again at the next tick; a lease that expired meanwhile may be
    /// taken over, and this host's appends are then fenced.
    pub fn keep_leases(&self) -> Option<LeaseKeeper> {
        let l = self.leases.as_ref()?;
        let (holder, ttl) = (l.holder.clone(), l.ttl_ms);
        let pool = self.pg.pool().clone();
        let every = Duration::from_millis(u64::try_from(ttl / 3).unwrap_or(1).max(1));
        let task = self.pg.runtime().spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = renew(&pool, &holder, ttl).await {
                    tracing::warn!(error = %e, "renewing the thread leases failed");
                }
            }
        });
        Some(LeaseKeeper(task))
    }

    /// Releases every lease this host holds (a graceful shutdown): the next host to write
    /// each thread takes it with reason `acquired`, at once, not after the TTL
    /// ([`EventLog::release_all`](crate::log::EventLog::release_all)).
    pub(super) fn release_every_lease(&self) -> Result<(), LogError> {
        let Some(l) = &self.leases else { return Ok(()) };
        let holder = l.holder.clone();
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                c.execute(
                    "UPDATE harness_tanstack_thread SET lease_released = true \
                     WHERE lease_holder = $1 AND NOT lease_released",
                    &[&holder],
                )
                .await?;
                Ok(())
            })
            .map_err(log_err)?;
        if let Ok(mut h) = l.held.lock() {
            h.clear();
        }
        Ok(())
    }

    pub(super) fn take_lease(&self, key: &str, thread_id: &str) -> Result<Lease, LogError> {
        let Some(l) = &self.leases else {
            return Ok(Lease::Held);
        };
        let (k, t, holder, ttl) = (
            key.to_owned(),
            thread_id.to_owned(),
            l.holder.clone(),
            l.ttl_ms,
        );
        let pool = self.pg.pool().clone();
        let took = self
            .pg
            .block_on(async move {
                let mut c = pool.get().await?;
                let tx = c.transaction().await?;
                tx.execute(
                    "INSERT INTO harness_tanstack_thread (key) VALUES ($1) ON CONFLICT (key) DO NOTHING",
                    &[&k],
                )
                .await?;
                let row = tx
                    .query_one(
                        "SELECT lease_holder, lease_epoch, lease_released, \
                                coalesce(lease_expires > now(), false) \
                         FROM harness_tanstack_thread WHERE key = $1 FOR UPDATE",
                        &[&k],
                    )
                    .await?;
                let (cur, epoch, released, live): (Option<String>, i64, bool, bool) =
                    (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?);
                let took = match cur {
                    Some(h) if h == holder => {
                        tx.execute(
                            "UPDATE harness_tanstack_thread SET lease_released = false, \
                             lease_expires = now() + $2::bigint * interval '1 millisecond' \
                             WHERE key = $1",
                            &[&k, &ttl],
                        )
                        .await?;
                        Took::Kept(epoch)
                    }
                    Some(h) if !released && live => Took::Other(h),
                    cur => {
                        let reason = if cur.is_some() && !released {
                            OwnershipReason::TakenOver
                        } else {
                            OwnershipReason::Acquired
                        };
                        let next = epoch + 1;
                        let ev = HarnessEvent::OwnershipChanged(catalog::OwnershipChanged {
                            epoch: u64::try_from(next).unwrap_or(0),
                            reason: reason.clone(),
                            ..catalog::OwnershipChanged::default()
                        })
                        .to_event()
                        .to_json();
                        let row = tx
                            .query_one(
                                "UPDATE harness_tanstack_thread SET lease_holder = $2, \
                                 lease_epoch = $3, lease_released = false, \
                                 lease_expires = now() + $4::bigint * interval '1 millisecond', \
                                 head = head + 1 WHERE key = $1 RETURNING head",
                                &[&k, &holder, &next, &ttl],
                            )
                            .await?;
                        let seq: i64 = row.try_get(0)?;
                        tx.execute(
                            "INSERT INTO harness_tanstack_event (key, seq, operation_id, thread_id, event) \
                             VALUES ($1, $2, 'session', $3, $4)",
                            &[&k, &seq, &t, &ev],
                        )
                        .await?;
                        tx.execute(
                            "SELECT pg_notify($1, current_schema() || ' ' || $2::bigint::text || ' ' || $4 || ' ' || $3)",
                            &[&NOTIFY_CHANNEL, &seq, &k, &holder],
                        )
                        .await?;
                        Took::New(next, reason)
                    }
                };
                tx.commit().await?;
                Ok(took)
            })
            .map_err(log_err)?;
        Ok(match took {
            Took::Kept(epoch) => {
                l.set(key, Some(epoch));
                Lease::Held
            }
            Took::New(epoch, reason) => {
                l.set(key, Some(epoch));
                if let Ok(mut w) = self.windows.lock() {
                    w.remove(key);
                }
                tracing::info!(key, epoch, reason = reason.as_str(), "thread lease taken");
                Lease::Acquired {
                    epoch: u64::try_from(epoch).unwrap_or(0),
                    reason,
                }
            }
            Took::Other(holder) => {
                l.set(key, None);
                Lease::HeldBy { holder }
            }
        })
    }

    pub(super) fn release_lease(&self, key: &str) -> Result<(), LogError> {
        let Some(l) = &self.leases else { return Ok(()) };
        let Some(epoch) = l.epoch(key) else {
            return Ok(());
        };
        l.set(key, None);
        let (k, holder) = (key.to_owned(), l.holder.clone());
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                c.execute(
                    "UPDATE harness_tanstack_thread SET lease_released = true \
                     WHERE key = $1 AND lease_holder = $2 AND lease_epoch = $3",
                    &[&k, &holder, &epoch],
                )
                .await?;
                Ok(())
            })
            .map_err(log_err)
    }
}

async fn renew(pool: &Pool, holder: &str, ttl: i64) -> Result<u64, PgError> {
    let c = pool.get().await?;
    Ok(c.execute(
        "UPDATE harness_tanstack_thread \
         SET lease_expires = now() + $2::bigint * interval '1 millisecond' \
         WHERE lease_holder = $1 AND NOT lease_released",
        &[&holder, &ttl],
    )
    .await?)
}
