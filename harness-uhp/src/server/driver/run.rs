//! [`UhpService::run`]: the host's own work — the turns, the store writer, the timers, and
//! with a shared store its claims, cancel requests and the changes other hosts make — on the
//! application's runtime.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{Future, FutureExt, StreamExt};

use super::turn::run_turn;
use super::{Remote, Shared, UhpService};
use crate::server::store::{Change, OnChange, Store};
use crate::server::{Reply, UhpServer};

/// Changes reported by the store and not yet read; past it they are dropped and the whole
/// store is read again.
const MAX_PENDING_CHANGES: usize = 4096;

/// Tasks running on other hosts, waited for here, read again per timer tick (at most 1 s
/// apart): in case their end was not reported, or their host is gone.
const MAX_POLLED: usize = 64;

/// Claims and cancel requests in flight at once.
const MAX_REMOTE_OPS: usize = 64;

/// Drops a reply nobody will take (its request went away).
pub(super) fn discard(s: &mut UhpServer, r: Reply) {
    match r {
        Reply::Full(_) => {}
        Reply::Stream(_, id) => s.close_stream(id),
        Reply::Wait(id) => s.drop_wait(id),
    }
}

impl UhpService {
    /// Runs the turns, the store writer and the timers; spawn it once. `sleep(d)` waits `d`
    /// on the application's runtime. Only the first call does anything; it ends when every
    /// [`UhpService`] is dropped… except for its timer loop, so spawn it detached.
    pub fn run<S, F>(&self, sleep: S) -> impl Future<Output = ()> + Send + 'static
    where
        S: Fn(Duration) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let receivers = shared
            .receivers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        async move {
            let Some((turns, records, remote)) = receivers else {
                return;
            };
            let weak = Arc::downgrade(&shared);
            let store = Arc::clone(&shared.store);
            // Other hosts' changes, read in order (a shared store only).
            let (change_tx, change_rx) = mpsc::channel::<Change>(MAX_PENDING_CHANGES);
            let resync = Arc::new(AtomicBool::new(false));
            let on_change = {
                let resync = Arc::clone(&resync);
                move || -> OnChange {
                    let tx = Mutex::new(change_tx.clone());
                    let resync = Arc::clone(&resync);
                    Box::new(move |c| {
                        let mut tx = tx.lock().unwrap_or_else(|e| e.into_inner());
                        if tx.try_send(c).is_err() {
                            resync.store(true, Ordering::SeqCst);
                        }
                    })
                }
            };
            if shared.shared {
                watch(&shared, on_change());
            }
            drop(shared);
            let turns_weak = weak.clone();
            let run_turns = async move {
                let mut turns = turns;
                let mut running = futures::stream::FuturesUnordered::new();
                loop {
                    futures::select! {
                        t = turns.next() => match t {
                            Some(t) => {
                                if let Some(s) = turns_weak.upgrade() {
                                    running.push(run_turn(s, t).boxed());
                                }
                            }
                            None => break,
                        },
                        () = running.select_next_some() => {},
                    }
                }
                while running.next().await.is_some() {}
            };
            let write_store = Arc::clone(&store);
            let write_weak = weak.clone();
            let write = async move {
                let mut records = records;
                while let Some(batch) = records.next().await {
                    // A failed write is not retried here: the machine keeps serving from
                    // memory, and the next compaction rewrites everything.
                    let keys = write_weak
                        .upgrade()
                        .filter(|s| s.shared)
                        .map(|_| super::Writes::keys(&batch));
                    let _ = write_store.append(batch).await;
                    if let (Some(keys), Some(s)) = (keys, write_weak.upgrade()) {
                        s.writes.end(keys);
                    }
                }
            };
            let remote_weak = weak.clone();
            let remote_ops = async move {
                let mut remote = remote;
                let mut inflight = futures::stream::FuturesUnordered::new();
                loop {
                    if inflight.len() >= MAX_REMOTE_OPS {
                        inflight.next().await;
                        continue;
                    }
                    futures::select! {
                        op = remote.next() => match op {
                            Some(op) => inflight.push(remote_op(remote_weak.clone(), Arc::clone(&store), op).boxed()),
                            None => break,
                        },
                        () = inflight.select_next_some() => {},
                    }
                }
                while inflight.next().await.is_some() {}
            };
            let changes_weak = weak.clone();
            let changes_resync = Arc::clone(&resync);
            let changes = async move {
                let mut rx = change_rx;
                while let Some(c) = rx.next().await {
                    let Some(s) = changes_weak.upgrade() else {
                        break;
                    };
                    if changes_resync.swap(false, Ordering::SeqCst) {
                        reload(&s).await;
                    }
                    match c {
                        Change::Object { kind, id } => s.fetch(&kind, &id).await,
                        Change::Cancel { response_id } => {
                            s.call(|srv, now| srv.cancel_here(now, &response_id));
                        }
                        Change::Resync => reload(&s).await,
                    }
                }
            };
            let timers = async move {
                loop {
                    let wait = match weak.upgrade() {
                        None => break,
                        Some(s) => {
                            let next = s.lock().server.poll_timeout();
                            let now = s.clock.now();
                            next.map_or(Duration::from_secs(1), |at| {
                                at.saturating_duration_since(now)
                                    .min(Duration::from_secs(1))
                            })
                        }
                    };
                    sleep(wait).await;
                    match weak.upgrade() {
                        None => break,
                        Some(s) => {
                            s.call(|srv, now| srv.handle_timeout(now));
                            rewatch(&s, &on_change);
                            if s.shared {
                                let waited = s.lock().server.remote_waited(MAX_POLLED);
                                for id in waited {
                                    s.fetch("response", &id).await;
                                }
                            }
                        }
                    }
                }
            };
            futures::join!(run_turns, write, remote_ops, changes, timers);
        }
    }
}

/// One claim or cancel request.
async fn remote_op(weak: Weak<Shared>, store: Arc<dyn Store>, op: Remote) {
    match op {
        Remote::Claim(c, tx) => {
            let rid = c.response_id.clone();
            let result = store.claim(*c).await;
            // The request went away: resolve it here, its reply dropped.
            if let Err((rid, result)) = tx.send((rid, result)) {
                if let Some(s) = weak.upgrade() {
                    s.call(|srv, now| {
                        if let Some(r) = srv.claim_resolved(now, &rid, result) {
                            discard(srv, r);
                        }
                    });
                }
            }
        }
        Remote::Cancel(rid) => {
            if let Err(e) = store.request_cancel(&rid).await {
                tracing::warn!(error = %e, "uhp: a cancel could not be sent");
            }
        }
    }
}

/// Starts the store's watch of other hosts.
fn watch(s: &Shared, on_change: OnChange) {
    match s.store.watch(on_change) {
        Ok(w) => *s.watch.lock().unwrap_or_else(|e| e.into_inner()) = w,
        Err(e) => tracing::warn!(error = %e, "uhp: the shared store cannot be watched"),
    }
}

/// Watches again when the watch stopped (its connection ended), and reads everything again.
fn rewatch(s: &Arc<Shared>, on_change: &impl Fn() -> OnChange) {
    if !s.shared {
        return;
    }
    let finished = s
        .watch
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_none_or(|w| w.is_finished());
    if finished {
        let f = on_change();
        watch(s, f);
        let again = s.watch.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        if again {
            let resync = on_change();
            resync(Change::Resync);
        }
    }
}

/// Reads every stored object again (changes were missed).
async fn reload(s: &Shared) {
    match s.store.load().await {
        Ok(records) => s.call(|srv, now| {
            for r in records {
                srv.refresh(now, r);
            }
        }),
        Err(e) => tracing::warn!(error = %e, "uhp: reading the shared store failed"),
    }
}
