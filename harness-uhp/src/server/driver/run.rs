//! [`UhpService::run`]: the host's own work — the turns, the store writer, the timers — on the
//! application's runtime.

use std::sync::Arc;
use std::time::Duration;

use futures::{Future, FutureExt, StreamExt};

use super::UhpService;
use super::turn::run_turn;

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
            let Some((turns, records)) = receivers else {
                return;
            };
            let weak = Arc::downgrade(&shared);
            let store = Arc::clone(&shared.store);
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
            let write = async move {
                let mut records = records;
                while let Some(batch) = records.next().await {
                    // A failed write is not retried here: the machine keeps serving from
                    // memory, and the next compaction rewrites everything.
                    let _ = store.append(batch).await;
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
                        Some(s) => s.call(|srv, now| srv.handle_timeout(now)),
                    }
                }
            };
            futures::join!(run_turns, write, timers);
        }
    }
}
