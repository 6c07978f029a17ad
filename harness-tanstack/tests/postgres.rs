//! The PostgreSQL event log on a real server (feature `postgres`): the shared log suite, then
//! what only a shared database shows: hosts appending to one thread share one cursor space, a
//! reader on another host reads any cursor, and appends reach other hosts by LISTEN/NOTIFY;
//! then thread ownership as a lease (`mod lease`).
//!
//! Needs `HARNESS_PG_URL` (scripts/interop/postgres/run.sh starts a throwaway server and sets
//! it); without it every test fails, saying so. Each test works in a schema of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod log_suite;
mod support;

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use harness_core::pg::PgConfig;
use harness_tanstack::log::{EventLog, PgLog};
use log_suite::text;

/// A schema of this test's own; each open is a new host (a new pool).
struct Schema(PgConfig);

impl Schema {
    fn fresh() -> Schema {
        Schema(PgConfig::for_test("tanstack").unwrap_or_else(|e| panic!("{e}")))
    }
    /// A host with no leases: the tests of the shared cursor space append from several
    /// hosts at once.
    fn host(&self) -> PgLog {
        PgLog::with_config(&self.0).unwrap().without_leases()
    }
    /// A host with leases of `ttl_ms`, as hosts that share a database run.
    fn leased(&self, ttl_ms: u64) -> PgLog {
        PgLog::with_config(&self.0)
            .unwrap()
            .with_lease_ttl(Duration::from_millis(ttl_ms))
    }
}

impl log_suite::Store for Schema {
    fn open(&self) -> Box<dyn log_suite::Log> {
        Box::new(self.host())
    }
}

/// The shared log suite on PostgreSQL, durable part included.
mod pg_log {
    use super::{Schema, log_suite};
    log_suite!(Schema::fresh());
    durable_log_suite!(Schema::fresh());
}

/// Issue 15: "one cursor space per thread shared by every host". Hosts appending to one thread
/// at once get distinct, gapless cursors; every host reads each cursor back as the same bytes.
#[test]
fn hosts_appending_to_one_thread_share_one_gapless_cursor_space() {
    const HOSTS: usize = 4;
    const EACH: usize = 25;
    let schema = Schema::fresh();
    let barrier = Barrier::new(HOSTS);
    let written: Vec<Vec<(u64, bytes::Bytes)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..HOSTS)
            .map(|h| {
                let (schema, barrier) = (&schema, &barrier);
                scope.spawn(move || {
                    let mut log = schema.host();
                    barrier.wait();
                    (0..EACH)
                        .map(|i| {
                            let r = log.append("t", "op", &text(&format!("{h}/{i}"))).unwrap();
                            (r.seq, r.sse())
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<(u64, bytes::Bytes)> = written.into_iter().flatten().collect();
    all.sort_by_key(|(s, _)| *s);
    let seqs: Vec<u64> = all.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=(HOSTS * EACH) as u64).collect::<Vec<_>>());
    let mut reader = schema.host();
    assert_eq!(reader.head_seq("t"), (HOSTS * EACH) as u64);
    for (seq, sse) in &all {
        assert_eq!(&reader.get("t", *seq).unwrap().unwrap().sse(), sse);
    }
}

/// Issue 15: "live tail across hosts via LISTEN/NOTIFY (no polling at idle)": an append on
/// host A is announced to host B's listener with its thread and cursor, and B reads it.
#[test]
fn an_append_on_one_host_is_announced_to_another() {
    let schema = Schema::fresh();
    let mut a = schema.host();
    let b = schema.host();
    let seen: Arc<Mutex<Vec<(String, u64, Instant)>>> = Arc::default();
    let listener = {
        let seen = seen.clone();
        b.listen(move |key, seq| {
            seen.lock()
                .unwrap()
                .push((key.to_owned(), seq, Instant::now()))
        })
        .unwrap()
    };
    let mut sent = Vec::new();
    for i in 0..20 {
        let t0 = Instant::now();
        let r = a.append("th 1", "op", &text(&i.to_string())).unwrap();
        sent.push((r.seq, t0));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < 20 {
        assert!(Instant::now() < deadline, "{:?}", seen.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = seen.lock().unwrap().clone();
    let got: Vec<(String, u64)> = seen.iter().map(|(k, s, _)| (k.clone(), *s)).collect();
    let want: Vec<(String, u64)> = (1..=20).map(|s| ("th 1".to_owned(), s)).collect();
    assert_eq!(got, want);
    let mut b = b;
    assert_eq!(b.get("th 1", 20).unwrap().unwrap().seq, 20);
    assert!(!listener.is_finished());
    drop(listener);
}

/// Issue 15: "a reader on any host resumes from any cursor; live tail across hosts via
/// LISTEN/NOTIFY". Host B's SSE stream of a thread, opened with a `Last-Event-ID` of host A's
/// stream (spec line 246), replays what A wrote after it, then carries A's new events live:
/// B's listener hands each NOTIFY to `Service::handle_appended`. Same cursors, nothing lost
/// or repeated.
#[test]
fn a_stream_on_host_b_resumes_and_tails_what_host_a_appends() {
    use futures::StreamExt;
    use harness_tanstack::driver::Service;
    use harness_tanstack::host::{Host, HostConfig};

    let schema = Schema::fresh();
    let a = Service::new(
        Host::new(HostConfig::default(), schema.host()),
        Instant::now,
    );
    let b = Service::new(
        Host::new(HostConfig::default(), schema.host()),
        Instant::now,
    );
    for i in 1..=3 {
        a.with_host(|h, now| h.emit(now, "t", "op-1", text(&format!("a{i}"))))
            .unwrap();
    }
    // The listener's callback runs on the pool's runtime: it hands the key over, never
    // taking the host's lock there.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let _listener = b.with_host(|h, _| {
        h.log()
            .listen(move |key, _| {
                let _ = tx.send(key.to_owned());
            })
            .unwrap()
    });
    let waker_side = b.clone();
    std::thread::spawn(move || {
        while let Ok(key) = rx.recv() {
            waker_side.handle_appended(&key);
        }
    });
    // A reader on B resumes after A's cursor 1.
    let mut s = b
        .open_sse(Some("t"), Some("2"), None, Some("1"), None, "r")
        .unwrap();
    let (out_tx, out) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        while let Some(bytes) = futures::executor::block_on(s.next()) {
            if out_tx
                .send(String::from_utf8_lossy(&bytes).into_owned())
                .is_err()
            {
                break;
            }
        }
    });
    let cursor_of = |frame: &str| -> Option<u64> {
        frame
            .lines()
            .find_map(|l| l.strip_prefix("id: "))
            .and_then(|c| c.parse().ok())
    };
    let next_event = || loop {
        let f = out
            .recv_timeout(Duration::from_secs(5))
            .expect("B's stream stalled");
        if let Some(c) = cursor_of(&f) {
            return (c, f);
        }
    };
    assert_eq!(next_event().0, 2);
    assert_eq!(next_event().0, 3);
    // Live: each event A appends reaches B's stream, in order, once.
    let mut lat = Vec::new();
    for i in 4..=23u64 {
        let t0 = Instant::now();
        let c = a
            .with_host(|h, now| h.emit(now, "t", "op-1", text(&format!("a{i}"))))
            .unwrap();
        let (seq, frame) = next_event();
        lat.push(t0.elapsed());
        assert_eq!(c.as_str(), i.to_string());
        assert_eq!(seq, i);
        assert!(frame.contains(&format!("a{i}")), "{frame}");
    }
    lat.sort();
    eprintln!(
        "cross-host delivery to B's SSE stream: p50 {:?}, max {:?}",
        lat[lat.len() / 2],
        lat[lat.len() - 1]
    );
}

/// Thread ownership as a lease (issue 15: "one owner runs the thread's turns … with ownership
/// as a lease that another host takes over when the owner dies, the interrupted turn settling
/// `interrupted`"); the catalog's `harness.ownership.changed` (spec
/// tanstack-harness-wire-protocol.md:455).
mod lease {
    use super::*;
    use harness_tanstack::agui::AguiEvent;
    use harness_tanstack::catalog::{HarnessEvent, OwnershipReason};
    use harness_tanstack::host::{Host, HostConfig, HostEvent};
    use harness_tanstack::log::{Lease, LogError};

    /// The harness.* events of a thread, in order, with their operation id.
    fn harness_events(log: &mut PgLog, key: &str) -> Vec<(String, HarnessEvent)> {
        let head = log.head_seq(key);
        (1..=head)
            .filter_map(|s| log.get(key, s).unwrap())
            .filter_map(|r| match r.event().unwrap() {
                AguiEvent::Custom(c) => HarnessEvent::from_custom(&c.name, &c.value)
                    .ok()
                    .map(|h| (r.operation_id.to_string(), h)),
                _ => None,
            })
            .collect()
    }

    fn events(log: &mut PgLog, key: &str) -> Vec<AguiEvent> {
        let head = log.head_seq(key);
        (1..=head)
            .filter_map(|s| log.get(key, s).unwrap())
            .map(|r| r.event().unwrap())
            .collect()
    }

    fn ownership(ev: &[(String, HarnessEvent)]) -> Vec<(u64, OwnershipReason)> {
        ev.iter()
            .filter_map(|(_, h)| match h {
                HarnessEvent::OwnershipChanged(o) => Some((o.epoch, o.reason.clone())),
                _ => None,
            })
            .collect()
    }

    /// Spec :455: "A new host owns the log, from its first write. `reason` is `taken_over`
    /// when the ownership of the old owner expired with no release (it stopped), else
    /// `acquired`." A released lease is `acquired` by the next host at once; an expired
    /// one is `taken_over`; a live one is another host's; the same host keeps its epoch.
    #[test]
    fn acquired_after_a_release_taken_over_after_an_expiry() {
        let schema = Schema::fresh();
        let mut a = schema.leased(300);
        let mut b = schema.leased(300);
        assert_eq!(
            a.lease("t", "t").unwrap(),
            Lease::Acquired {
                epoch: 1,
                reason: OwnershipReason::Acquired
            }
        );
        // The same host again: no new epoch, no record.
        assert_eq!(a.lease("t", "t").unwrap(), Lease::Held);
        a.append("t", "op-1", &text("a")).unwrap();
        // A live lease is A's.
        assert_eq!(
            b.lease("t", "t").unwrap(),
            Lease::HeldBy {
                holder: a.holder().unwrap().to_owned()
            }
        );
        assert_eq!(b.append("t", "op-1", &text("b")), Err(LogError::Fenced));
        // Released: B acquires it at once.
        a.release("t").unwrap();
        assert_eq!(
            b.lease("t", "t").unwrap(),
            Lease::Acquired {
                epoch: 2,
                reason: OwnershipReason::Acquired
            }
        );
        b.append("t", "op-2", &text("b")).unwrap();
        // B stops (no renewal, no release): past the TTL, A takes it over.
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(
            a.lease("t", "t").unwrap(),
            Lease::Acquired {
                epoch: 3,
                reason: OwnershipReason::TakenOver
            }
        );
        let ev = harness_events(&mut a, "t");
        assert_eq!(
            ownership(&ev),
            vec![
                (1, OwnershipReason::Acquired),
                (2, OwnershipReason::Acquired),
                (3, OwnershipReason::TakenOver)
            ]
        );
        // Each epoch's first record is its ownership.changed: records 1, 3, 5.
        for seq in [1u64, 3, 5] {
            let r = a.get("t", seq).unwrap().unwrap();
            assert!(
                r.json_str().contains("harness.ownership.changed"),
                "{seq}: {}",
                r.json_str()
            );
        }
    }

    /// Fencing (issue 15: "fences are ownership epochs checked in the same
    /// statement/transaction"): a holder paused past its lease and taken over never writes
    /// into the thread again, even once the new holder released it.
    #[test]
    fn a_stale_holder_is_fenced_after_a_takeover() {
        let schema = Schema::fresh();
        let mut a = schema.leased(200);
        let mut b = schema.leased(200);
        a.lease("t", "t").unwrap();
        a.append("t", "op-1", &text("before")).unwrap();
        // A "pauses" past its TTL; B takes over.
        std::thread::sleep(Duration::from_millis(350));
        assert!(matches!(
            b.lease("t", "t").unwrap(),
            Lease::Acquired {
                epoch: 2,
                reason: OwnershipReason::TakenOver
            }
        ));
        let head = b.head_seq("t");
        assert_eq!(a.append("t", "op-1", &text("stale")), Err(LogError::Fenced));
        // The waits record is the owner's too.
        b.set_waits("t", Some("b's")).unwrap();
        assert_eq!(a.set_waits("t", Some("a's")), Err(LogError::Fenced));
        assert_eq!(a.waits("t").unwrap().as_deref(), Some("b's"));
        // Even after B lets it go, A's old epoch writes nothing.
        b.release("t").unwrap();
        assert_eq!(
            a.append("t", "op-1", &text("stale 2")),
            Err(LogError::Fenced)
        );
        assert_eq!(b.head_seq("t"), head);
        let all: Vec<String> = (1..=head)
            .map(|s| b.get("t", s).unwrap().unwrap().json_str().to_owned())
            .collect();
        assert!(all.iter().all(|j| !j.contains("stale")), "{all:?}");
        // Racing appends against a takeover: every append that lands is A's before B's
        // ownership.changed, none after.
        let mut c = schema.leased(60_000);
        assert!(matches!(c.lease("u", "u").unwrap(), Lease::Acquired { .. }));
        let mut d = schema.leased(60_000);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..50 {
                    if c.append("u", "op", &text(&format!("c{i}"))).is_err() {
                        break;
                    }
                }
            });
            s.spawn(|| {
                // Force the takeover by releasing C's lease row from under it.
                std::thread::sleep(Duration::from_millis(20));
                let pool = d.pg().pool().clone();
                d.pg()
                    .block_on(async move {
                        let cl = pool.get().await?;
                        cl.execute(
                            "UPDATE harness_tanstack_thread SET lease_released = true WHERE key = 'u'",
                            &[],
                        )
                        .await?;
                        Ok(())
                    })
                    .unwrap();
                assert!(matches!(d.lease("u", "u").unwrap(), Lease::Acquired { epoch: 2, .. }));
            });
        });
        let recs: Vec<String> = (1..=d.head_seq("u"))
            .map(|s| d.get("u", s).unwrap().unwrap().json_str().to_owned())
            .collect();
        let taken = recs
            .iter()
            .rposition(|j| j.contains("harness.ownership.changed"))
            .unwrap();
        assert!(
            recs[taken + 1..].iter().all(|j| !j.contains("\"c")),
            "{recs:?}"
        );
    }

    /// Release on graceful shutdown: a renewed lease stays (another host gets `HeldBy`
    /// past its TTL); `release_all` hands every thread over at once, `acquired`.
    #[test]
    fn renewed_leases_stay_and_release_all_hands_them_over() {
        let schema = Schema::fresh();
        let mut a = schema.leased(300);
        let mut b = schema.leased(300);
        let keeper = a.keep_leases().unwrap();
        a.lease("t1", "t1").unwrap();
        a.lease("t2", "t2").unwrap();
        std::thread::sleep(Duration::from_millis(700));
        assert!(!keeper.is_finished());
        assert!(matches!(b.lease("t1", "t1").unwrap(), Lease::HeldBy { .. }));
        a.release_all().unwrap();
        drop(keeper);
        for t in ["t1", "t2"] {
            assert_eq!(
                b.lease(t, t).unwrap(),
                Lease::Acquired {
                    epoch: 2,
                    reason: OwnershipReason::Acquired
                }
            );
        }
        assert_eq!(a.append("t1", "op", &text("after")), Err(LogError::Fenced));
    }

    fn prompt(h: &mut Host<PgLog>, thread: &str, msg: &str, input_id: &str) -> String {
        let body = format!(
            r#"{{"threadId":"{thread}","input":{{"op":"prompt","message":"{msg}","inputId":"{input_id}"}}}}"#
        );
        h.control(
            Instant::now(),
            None,
            body.as_bytes(),
            "req",
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        )
        .body
    }

    fn start_turn(h: &mut Host<PgLog>) -> Option<String> {
        std::iter::from_fn(|| h.poll_event()).find_map(|e| match e {
            HostEvent::StartTurn(t) => Some(t.operation_id),
            _ => None,
        })
    }

    /// Issue 15: "host A killed mid-turn: host B takes the thread over, the turn settles
    /// `interrupted`, a new prompt runs on B". While A's lease is live B refuses the input
    /// (`not_owner`, nothing written); past the TTL B writes `harness.ownership.changed`
    /// `taken_over`, closes A's open message and run (`TEXT_MESSAGE_END`, `RUN_ERROR` code
    /// `interrupted`), `harness.operation.finished` status `interrupted` (spec :408),
    /// `harness.input.settled` outcome `interrupted` (spec :422) for A's running input and
    /// for the one queued behind it, then runs the new prompt. A, resumed, is fenced: its
    /// turn is cancelled and nothing it emits lands.
    #[test]
    fn a_takeover_settles_the_dead_owners_turn_and_runs_the_new_prompt() {
        let schema = Schema::fresh();
        let mut a = Host::new(HostConfig::default(), schema.leased(300));
        let mut b = Host::new(HostConfig::default(), schema.leased(300));
        assert!(prompt(&mut a, "th", "wait please", "in-a1").contains("accepted"));
        let op_a = start_turn(&mut a).unwrap();
        let now = Instant::now();
        a.emit(
            now,
            "th",
            &op_a,
            AguiEvent::RunStarted(harness_tanstack::agui::RunStarted {
                thread_id: "th".into(),
                run_id: op_a.clone(),
                ..Default::default()
            }),
        )
        .unwrap();
        a.emit(
            now,
            "th",
            &op_a,
            AguiEvent::TextMessageStart(harness_tanstack::agui::TextMessageStart {
                message_id: "m-a".into(),
                ..Default::default()
            }),
        )
        .unwrap();
        a.emit(
            now,
            "th",
            &op_a,
            AguiEvent::text_content("m-a", "Waiting... "),
        )
        .unwrap();
        assert!(prompt(&mut a, "th", "and then", "in-a2").contains("queued"));
        // A is live: B does not run the input, and writes nothing.
        let head = b.log().head_seq("th");
        let r = prompt(&mut b, "th", "hello from b", "in-b1");
        assert!(r.contains("rejected") && r.contains("not_owner"), "{r}");
        assert_eq!(b.log().head_seq("th"), head);
        // A dies (no renewal); past the TTL the next input on B takes the thread over.
        std::thread::sleep(Duration::from_millis(450));
        let r = prompt(&mut b, "th", "hello from b", "in-b1");
        assert!(r.contains("accepted"), "{r}");
        let op_b = start_turn(&mut b).unwrap();
        assert_ne!(op_b, op_a);
        let mut log = schema.host();
        let ev = harness_events(&mut log, "th");
        assert_eq!(
            ownership(&ev),
            vec![
                (1, OwnershipReason::Acquired),
                (2, OwnershipReason::TakenOver)
            ]
        );
        let after: Vec<&(String, HarnessEvent)> = ev
            .iter()
            .skip_while(|(_, h)| !matches!(h, HarnessEvent::OwnershipChanged(o) if o.epoch == 2))
            .collect();
        let finished = after.iter().find_map(|(_, h)| match h {
            HarnessEvent::OperationFinished(f) => Some(f.clone()),
            _ => None,
        });
        let finished = finished.expect("operation.finished after the takeover");
        assert_eq!(finished.operation_id, op_a);
        assert_eq!(finished.status.as_str(), "interrupted");
        let settled: Vec<(String, Option<String>, String)> = after
            .iter()
            .filter_map(|(_, h)| match h {
                HarnessEvent::InputSettled(s) => Some((
                    s.input_id.clone(),
                    s.operation_id.clone(),
                    s.outcome.as_str().to_owned(),
                )),
                _ => None,
            })
            .collect();
        assert!(
            settled.contains(&("in-a1".into(), Some(op_a.clone()), "interrupted".into())),
            "{settled:?}"
        );
        assert!(
            settled
                .iter()
                .any(|(i, _, o)| i == "in-a2" && o == "interrupted"),
            "{settled:?}"
        );
        // The AG-UI run of A ends: its message, then RUN_ERROR code `interrupted`.
        let all = events(&mut log, "th");
        let end = all
            .iter()
            .position(|e| matches!(e, AguiEvent::TextMessageEnd(m) if m.message_id == "m-a"))
            .expect("A's open message ends");
        assert!(
            matches!(&all[end + 1], AguiEvent::RunError(r) if r.code.as_deref() == Some("interrupted"))
        );
        // The new prompt is accepted after the settling, with its traceparent (spec :392).
        let accepted_b = after
            .iter()
            .find_map(|(_, h)| match h {
                HarnessEvent::InputAccepted(a) if a.input_id == "in-b1" => Some(a.clone()),
                _ => None,
            })
            .expect("B accepted its prompt");
        assert_eq!(
            accepted_b.traceparent.as_deref(),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        // A wakes up: fenced, its turn cancelled, nothing lands.
        let head = log.head_seq("th");
        let r = a.emit(
            Instant::now(),
            "th",
            &op_a,
            AguiEvent::text_content("m-a", "late"),
        );
        assert!(r.is_err());
        let cancelled = std::iter::from_fn(|| a.poll_event()).any(
            |e| matches!(e, HostEvent::CancelTurn { operation_id, .. } if operation_id == op_a),
        );
        assert!(cancelled);
        assert_eq!(log.head_seq("th"), head);
        // B's turn runs to its end on B.
        b.emit(
            Instant::now(),
            "th",
            &op_b,
            AguiEvent::text_content("m-b", "hi"),
        )
        .unwrap();
        b.finish_turn(
            Instant::now(),
            "th",
            &op_b,
            harness_tanstack::host::TurnOutcome::Completed,
        )
        .unwrap();
        let ev = harness_events(&mut log, "th");
        assert!(ev.iter().any(|(_, h)| matches!(h, HarnessEvent::OperationFinished(f) if f.operation_id == op_b && f.status.as_str() == "completed")));
        // Idle on B: released, so A's next input acquires it (not a takeover).
        let r = prompt(&mut a, "th", "again", "in-a3");
        assert!(r.contains("accepted"), "{r}");
        let ev = harness_events(&mut log, "th");
        assert_eq!(ownership(&ev).last(), Some(&(3, OwnershipReason::Acquired)));
    }
}

/// Forwarding (issue 15: "an input that reaches another host is forwarded to the owner"; spec
/// :392: the traceparent "goes to that server with the input" and is stored "on the
/// `harness.input` record of the log"; issue 17).
mod forwarding {
    use super::*;
    use harness_tanstack::agui::AguiEvent;
    use harness_tanstack::catalog::HarnessEvent;
    use harness_tanstack::driver::Service;
    use harness_tanstack::host::{Host, HostConfig};

    pub(super) const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// A deadline future that completes after `ms` (a thread, no runtime).
    fn after(ms: u64) -> impl std::future::Future<Output = ()> {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            let _ = tx.send(());
        });
        async move {
            let _ = rx.await;
        }
    }

    pub(super) fn body(thread: &str, msg: &str, input_id: &str) -> Vec<u8> {
        format!(
            r#"{{"threadId":"{thread}","input":{{"op":"prompt","message":"{msg}","inputId":"{input_id}"}}}}"#
        )
        .into_bytes()
    }

    /// A service on a leased log whose forwarding listener feeds it (as the example does).
    pub(super) fn service(
        schema: &Schema,
        ttl_ms: u64,
    ) -> (Service<PgLog>, Box<dyn std::any::Any>) {
        service_with(schema, ttl_ms, HostConfig::default())
    }

    pub(super) fn service_with(
        schema: &Schema,
        ttl_ms: u64,
        cfg: HostConfig,
    ) -> (Service<PgLog>, Box<dyn std::any::Any>) {
        let log = schema.leased(ttl_ms);
        let (tx, rx) = std::sync::mpsc::channel::<Option<u64>>();
        let tx2 = tx.clone();
        let l = log
            .listen_forwards(
                move || {
                    let _ = tx.send(None);
                },
                move |id| {
                    let _ = tx2.send(Some(id));
                },
            )
            .unwrap()
            .unwrap();
        let svc = Service::new(Host::new(cfg, log), Instant::now);
        let s = svc.clone();
        std::thread::spawn(move || {
            while let Ok(n) = rx.recv() {
                match n {
                    None => s.handle_forwarded(),
                    Some(id) => s.handle_forward_answer(id),
                }
            }
        });
        (svc, Box::new(l))
    }

    pub(super) fn accepted_records(
        log: &mut PgLog,
        key: &str,
        input_id: &str,
    ) -> Vec<Option<String>> {
        (1..=log.head_seq(key))
            .filter_map(|s| log.get(key, s).unwrap())
            .filter_map(|r| match r.event().unwrap() {
                AguiEvent::Custom(c) => match HarnessEvent::from_custom(&c.name, &c.value) {
                    Ok(HarnessEvent::InputAccepted(a)) if a.input_id == input_id => {
                        Some(a.traceparent)
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_input_to_a_non_owner_runs_on_the_owner_once_with_its_traceparent() {
        let schema = Schema::fresh();
        let (a, _la) = service(&schema, 5_000);
        let (b, _lb) = service(&schema, 5_000);
        // A owns the thread: its turn runs (never finished here; the service queues it for
        // a driver that this test does not run).
        let r = a.control(None, &body("th", "wait", "in-a1"), "r-a1", None);
        assert!(r.body.contains("accepted"), "{}", r.body);
        // To B: forwarded to A, which queues it behind its turn; B answers with A's receipt.
        let fwd = |rid: &str| {
            futures::executor::block_on(b.control_forwarding(
                None,
                &body("th", "and then", "in-b1"),
                rid,
                Some(TP),
                after(5_000),
            ))
        };
        let t0 = Instant::now();
        let first = fwd("r-b1");
        eprintln!("forwarded round trip: {:?}", t0.elapsed());
        assert_eq!(first.status, 200, "{}", first.body);
        assert!(
            first.body.contains(r#""status":"queued""#),
            "{}",
            first.body
        );
        assert!(
            first.body.contains(r#""inputId":"in-b1""#),
            "{}",
            first.body
        );
        assert_eq!(first.request_id, "r-b1");
        // The same input again (a lost answer): the owner's idempotency, the same receipt.
        let again = fwd("r-b2");
        assert_eq!(again.body, first.body);
        // In the log: one `harness.input.accepted` for it, written by A (no new epoch), with
        // the traceparent that came to B.
        let mut log = schema.host();
        assert_eq!(
            accepted_records(&mut log, "th", "in-b1"),
            vec![Some(TP.to_owned())]
        );
        let owners = (1..=log.head_seq("th"))
            .filter_map(|s| log.get("th", s).unwrap())
            .filter(|r| r.json_str().contains("harness.ownership.changed"))
            .count();
        assert_eq!(owners, 1);
    }

    /// Rows in the inbox table.
    fn inbox_rows(schema: &Schema) -> i64 {
        let pg = harness_core::pg::Pg::connect(&schema.0).unwrap();
        let pool = pg.pool().clone();
        pg.block_on(async move {
            let c = pool.get().await?;
            Ok(
                c.query_one("SELECT count(*) FROM harness_tanstack_inbox", &[])
                    .await?
                    .try_get::<_, i64>(0)?,
            )
        })
        .unwrap()
    }

    /// A request dropped while it waits for the owner (its client went away: the HTTP
    /// server drops the handler's future) leaves nothing behind: the input still runs on
    /// the owner (it was sent), the sender keeps no entry for it, and the owner's answer,
    /// which nobody reads now, is taken off the inbox table when it comes, not left there.
    #[test]
    fn a_forwarded_request_whose_client_went_away_leaves_nothing_behind() {
        use futures::FutureExt;
        let schema = Schema::fresh();
        let (a, _la) = service(&schema, 5_000);
        let (b, _lb) = service(&schema, 5_000);
        let r = a.control(None, &body("th", "wait", "in-a1"), "r-a1", None);
        assert!(r.body.contains("accepted"), "{}", r.body);
        for n in 0..5 {
            let input = body("th", "and then", &format!("in-b{n}"));
            let fwd =
                b.control_forwarding(None, &input, "r-b", Some(TP), futures::future::pending());
            assert!(fwd.now_or_never().is_none(), "it waits for the owner");
            assert_eq!(b.waiting_forwards(), 0);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut log = schema.host();
        loop {
            let ran = (0..5)
                .filter(|n| !accepted_records(&mut log, "th", &format!("in-b{n}")).is_empty())
                .count();
            if ran == 5 && inbox_rows(&schema) == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{ran} of 5 ran on the owner; {} rows left",
                inbox_rows(&schema)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The owner does not answer in time (here: it does not listen): the input is taken back
    /// and answered by the host that got it — `not_owner` while the owner's lease is live,
    /// and the owner never runs it afterwards.
    #[test]
    fn an_unanswered_forward_is_taken_back() {
        let schema = Schema::fresh();
        let a = Service::new(
            Host::new(HostConfig::default(), schema.leased(5_000)),
            Instant::now,
        );
        let (b, _lb) = service(&schema, 5_000);
        let r = a.control(None, &body("th", "wait", "in-a1"), "r-a1", None);
        assert!(r.body.contains("accepted"), "{}", r.body);
        let got = futures::executor::block_on(b.control_forwarding(
            None,
            &body("th", "late", "in-b1"),
            "r-b1",
            Some(TP),
            after(300),
        ));
        assert!(
            got.body.contains("not_owner"),
            "{} {}",
            got.status,
            got.body
        );
        // A looks at its inbox now: nothing is left to run.
        assert_eq!(a.with_host(|h, now| h.handle_forwarded(now)), 0);
        let mut log = schema.host();
        assert!(accepted_records(&mut log, "th", "in-b1").is_empty());
    }
}

/// `POST run` (AG-UI) that reaches a host that does not own the thread goes to the owner as
/// a `POST control` input does (spec tanstack-harness-wire-protocol.md:392: "When another
/// server owns the thread, the value goes to that server with the input"; issue 15: "an
/// input that reaches another host is forwarded to the owner"): the owner runs it once, with
/// no stream attached, and the host that got it streams the run from the shared log, as
/// `joinRun` does (research tanstack-ai-client.md:139, "`offset=-1` means from the first
/// event of the run"), to its `RUN_FINISHED`.
mod run_forwarding {
    use super::*;
    use futures::StreamExt;
    use harness_core::agent::ToolLoopAgent;
    use harness_core::message::Message;
    use harness_core::model::ScriptedModel;
    use harness_core::tool::Tools;
    use harness_tanstack::agui::AguiEvent;
    use harness_tanstack::catalog::HarnessEvent;
    use harness_tanstack::driver::{ConnStream, Service, run_turns};
    use harness_tanstack::host::{Host, HostConfig};
    use harness_tanstack::log::Lease;
    use serde_json::Value;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const TP: &str = super::forwarding::TP;

    /// A deadline future that completes after `ms` (a thread, no runtime).
    fn after(ms: u64) -> impl std::future::Future<Output = ()> {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            let _ = tx.send(());
        });
        async move {
            let _ = rx.await;
        }
    }

    fn run_body(thread: &str, run_id: &str, text: &str) -> Vec<u8> {
        serde_json::json!({"threadId": thread, "runId": run_id,
            "messages": [{"id": "u1", "role": "user", "content": text}]})
        .to_string()
        .into_bytes()
    }

    enum Note {
        Appended(String),
        Forwarded,
        Answered(u64),
    }

    /// A host as the example wires it: a service on a leased log, its listeners (appends of
    /// other hosts, forwarded requests, the answers to its own) feeding it from a thread;
    /// with `calls`, a driver on a thread of its own runs its turns on a scripted model that
    /// counts its calls. `listen: false`: a host that never hears what is forwarded to it.
    fn host(
        log: PgLog,
        calls: Option<Arc<AtomicUsize>>,
        listen: bool,
    ) -> (Service<PgLog>, Box<dyn std::any::Any>) {
        let (tx, rx) = std::sync::mpsc::channel::<Note>();
        let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
        if listen {
            let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
            keep.push(Box::new(
                log.listen(move |key, _| {
                    let _ = t1.send(Note::Appended(key.to_owned()));
                })
                .unwrap(),
            ));
            keep.push(Box::new(
                log.listen_forwards(
                    move || {
                        let _ = t2.send(Note::Forwarded);
                    },
                    move |id| {
                        let _ = t3.send(Note::Answered(id));
                    },
                )
                .unwrap()
                .unwrap(),
            ));
        }
        let svc = Service::new(Host::new(HostConfig::default(), log), Instant::now);
        let s = svc.clone();
        std::thread::spawn(move || {
            while let Ok(n) = rx.recv() {
                match n {
                    Note::Appended(key) => s.handle_appended(&key),
                    Note::Forwarded => s.handle_forwarded(),
                    Note::Answered(id) => s.handle_forward_answer(id),
                }
            }
        });
        if let Some(calls) = calls {
            let s = svc.clone();
            std::thread::spawn(move || {
                let model = ScriptedModel::new().otherwise(move |_| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok(Message::assistant("Hello there."))
                });
                let agent = ToolLoopAgent::new("a");
                futures::executor::block_on(run_turns(s, agent, model, Tools::new()));
            });
        }
        (svc, Box::new(keep))
    }

    /// The plain AG-UI events of a `POST run` answer, to the end of the stream (at most 10 s).
    fn read_run(s: ConnStream<PgLog>) -> Vec<Value> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let chunks: Vec<bytes::Bytes> = futures::executor::block_on(s.collect());
            let _ = tx.send(chunks);
        });
        let chunks = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the run's stream did not end");
        chunks
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .filter_map(|t| t.strip_prefix("data: ").map(|d| d.trim_end().to_owned()))
            .map(|d| serde_json::from_str(&d).unwrap())
            .collect()
    }

    /// The records of the thread `key` in the shared log.
    fn records(key: &str) -> impl Fn(&Schema) -> Vec<harness_tanstack::log::LogRecord> + '_ {
        move |schema| {
            let mut log = schema.host();
            (1..=log.head_seq(key))
                .filter_map(|s| log.get(key, s).unwrap())
                .collect()
        }
    }

    /// The plain AG-UI events of the run `op` in the log, in order, to its `RUN_FINISHED`
    /// or `RUN_ERROR` (where its stream ends: "ends after its RUN_FINISHED or RUN_ERROR").
    fn run_in_log(schema: &Schema, key: &str, op: &str) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        for r in records(key)(schema)
            .iter()
            .filter(|r| &*r.operation_id == op)
        {
            out.push(serde_json::from_slice(&r.event_json()).unwrap());
            if matches!(
                out.last().unwrap()["type"].as_str(),
                Some("RUN_FINISHED" | "RUN_ERROR")
            ) {
                break;
            }
        }
        out
    }

    fn harness_events(schema: &Schema, key: &str) -> Vec<HarnessEvent> {
        records(key)(schema)
            .iter()
            .filter_map(|r| match r.event().unwrap() {
                AguiEvent::Custom(c) => HarnessEvent::from_custom(&c.name, &c.value).ok(),
                _ => None,
            })
            .collect()
    }

    fn owners(schema: &Schema, key: &str) -> Vec<String> {
        harness_events(schema, key)
            .iter()
            .filter_map(|e| match e {
                HarnessEvent::OwnershipChanged(o) => Some(o.reason.as_str().to_owned()),
                _ => None,
            })
            .collect()
    }

    fn traceparents(schema: &Schema, key: &str) -> Vec<Option<String>> {
        harness_events(schema, key)
            .into_iter()
            .filter_map(|e| match e {
                HarnessEvent::InputAccepted(a) => Some(a.traceparent),
                _ => None,
            })
            .collect()
    }

    /// A holds the thread's lease while the thread is idle there (taken here directly: in a
    /// running host, the moment between a turn's end and the lease's release). A run POSTed
    /// to B runs on A, once, with the traceparent B got; B's answer is the whole run, from
    /// `RUN_STARTED` to `RUN_FINISHED`, the same events as A's log. Sent again (a retry)
    /// while A holds the thread: A starts nothing ("must not start a new run", research
    /// tanstack-ai-client.md:118) and B streams the same run again.
    #[test]
    fn a_run_to_a_non_owner_runs_on_the_owner_once_and_streams_from_the_log() {
        let schema = Schema::fresh();
        let (calls_a, calls_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, _la) = host(schema.leased(5_000), Some(calls_a.clone()), true);
        let (b, _lb) = host(schema.leased(5_000), Some(calls_b.clone()), true);
        let take = || a.with_host(|h, _| h.log_mut().lease("th", "th")).unwrap();
        assert!(matches!(take(), Lease::Acquired { .. }));
        let post = |rid: &str| {
            futures::executor::block_on(b.run_forwarding(
                &run_body("th", "run-1", "Hi"),
                None,
                rid,
                Some(TP),
                after(5_000),
            ))
        };
        let t0 = Instant::now();
        let events = read_run(post("r-b1").unwrap());
        eprintln!(
            "a forwarded POST run, to its RUN_FINISHED on B: {:?}",
            t0.elapsed()
        );
        assert_eq!(events.first().unwrap()["type"], "RUN_STARTED", "{events:?}");
        assert_eq!(events.first().unwrap()["runId"], "run-1");
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
            .filter_map(|e| e["delta"].as_str())
            .collect();
        assert_eq!(text, "Hello there.");
        assert_eq!(events, run_in_log(&schema, "th", "run-1"));
        assert_eq!(calls_a.load(Ordering::SeqCst), 1);
        assert_eq!(calls_b.load(Ordering::SeqCst), 0);
        // Written by A, under its one lease, with the traceparent that came to B.
        assert_eq!(owners(&schema, "th"), vec!["acquired"]);
        assert_eq!(traceparents(&schema, "th"), vec![Some(TP.to_owned())]);
        // The same run again, while A holds the thread (again: A let it go at the run's
        // end, and takes it back under its epoch): nothing runs, the same run streams.
        let deadline = Instant::now() + Duration::from_secs(5);
        while a.with_host(|h, _| h.is_busy()) {
            assert!(Instant::now() < deadline, "A's run did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(take(), Lease::Held);
        let again = read_run(post("r-b2").unwrap());
        assert_eq!(again, events);
        assert_eq!(calls_a.load(Ordering::SeqCst), 1);
        assert_eq!(calls_b.load(Ordering::SeqCst), 0);
        // B never took the thread: the run went to A.
        assert_eq!(owners(&schema, "th"), vec!["acquired"]);
        assert_eq!(traceparents(&schema, "th").len(), 1);
        // B knows the run by its id alone now (`joinRun` with no threadId).
        let joined = b.join_run(None, "run-1", Some("-1"), None, "r-j").unwrap();
        assert_eq!(read_run(joined), events);
    }

    /// A refusal of the owner is the answer: a new run while A's turn runs is A's
    /// `409 {error:"conflict"}` (this run would cut in), not B's `not_owner`.
    #[test]
    fn the_owners_refusal_is_the_answer() {
        let schema = Schema::fresh();
        // A's turn never ends: no driver.
        let (a, _la) = host(schema.leased(5_000), None, true);
        let (b, _lb) = host(schema.leased(5_000), None, true);
        let r = a.control(
            None,
            &super::forwarding::body("th", "wait", "in-a1"),
            "r",
            None,
        );
        assert!(r.body.contains("accepted"), "{}", r.body);
        let got = futures::executor::block_on(b.run_forwarding(
            &run_body("th", "run-1", "Hi"),
            None,
            "r-b1",
            None,
            after(5_000),
        ))
        .unwrap_err();
        assert_eq!((got.status, got.request_id.as_str()), (409, "r-b1"));
        assert!(got.body.contains("\"conflict\""), "{}", got.body);
        assert!(run_in_log(&schema, "th", "run-1").is_empty());
    }

    /// The owner does not answer within the wait (here: it does not listen): the run is
    /// taken back — `409 {error:"not_owner"}` while the owner's lease is live, and the owner
    /// never runs it afterwards.
    #[test]
    fn an_unanswered_run_is_taken_back_not_owner_while_the_lease_lives() {
        let schema = Schema::fresh();
        let (a, _la) = host(schema.leased(5_000), None, false);
        let (b, _lb) = host(schema.leased(5_000), None, true);
        assert!(matches!(
            a.with_host(|h, _| h.log_mut().lease("th", "th")).unwrap(),
            Lease::Acquired { .. }
        ));
        let t0 = Instant::now();
        let got = futures::executor::block_on(b.run_forwarding(
            &run_body("th", "run-1", "Hi"),
            None,
            "r-b1",
            None,
            after(300),
        ))
        .unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(300));
        assert_eq!(got.status, 409);
        assert!(got.body.contains("not_owner"), "{}", got.body);
        assert_eq!(a.with_host(|h, now| h.handle_forwarded(now)), 0);
        assert!(run_in_log(&schema, "th", "run-1").is_empty());
    }

    /// The owner stopped (its lease expires during the wait, never renewed): the run is
    /// taken back and B takes the thread over (`taken_over`) and runs it itself; its answer
    /// is the whole run.
    #[test]
    fn an_unanswered_run_whose_owner_stopped_runs_on_the_receiving_host() {
        let schema = Schema::fresh();
        let (a, _la) = host(schema.leased(400), None, false);
        let calls_b = Arc::new(AtomicUsize::new(0));
        let (b, _lb) = host(schema.leased(5_000), Some(calls_b.clone()), true);
        assert!(matches!(
            a.with_host(|h, _| h.log_mut().lease("th", "th")).unwrap(),
            Lease::Acquired { .. }
        ));
        let got = futures::executor::block_on(b.run_forwarding(
            &run_body("th", "run-1", "Hi"),
            None,
            "r-b1",
            Some(TP),
            after(900),
        ))
        .unwrap();
        let events = read_run(got);
        assert_eq!(events.first().unwrap()["type"], "RUN_STARTED");
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
        assert_eq!(events, run_in_log(&schema, "th", "run-1"));
        assert_eq!(calls_b.load(Ordering::SeqCst), 1);
        assert_eq!(owners(&schema, "th"), vec!["acquired", "taken_over"]);
        assert_eq!(a.with_host(|h, now| h.handle_forwarded(now)), 0);
    }
}

/// A `harness.input` frame on a WebSocket of a host that does not own the thread goes to
/// the owner as a `POST control` does, its `traceparent` (set on the frame, spec
/// tanstack-harness-wire-protocol.md:371) with it (:392: "When
/// another server owns the thread, the value goes to that server with the input"), and the
/// socket gets the owner's receipt.
mod socket_forwarding {
    use super::forwarding::{TP, accepted_records, service, service_with};
    use super::*;
    use harness_tanstack::driver::Service;
    use harness_tanstack::host::{ConnId, Host, HostConfig, Transport};
    use serde_json::Value;

    /// A WebSocket on `svc`, subscribed to `thread`.
    fn socket(svc: &Service<PgLog>, thread: &str) -> ConnId {
        svc.with_host(|h, now| {
            let c = h.connect(now, Transport::WebSocket, None, "up");
            let sub = serde_json::json!({"type": "harness.subscribe", "threadId": thread, "v": 2});
            h.handle_frame(now, c, &sub.to_string());
            c
        })
    }

    fn send(svc: &Service<PgLog>, c: ConnId, rid: &str, input_id: &str) {
        let f = serde_json::json!({
            "type": "harness.input", "requestId": rid, "traceparent": TP,
            "input": {"op": "prompt", "message": "from the socket", "inputId": input_id},
        });
        svc.with_host(|h, now| h.handle_frame(now, c, &f.to_string()));
    }

    /// The frame of type `ty` for `rid` the socket gets, waiting at most 10 s (ticking the
    /// service's timers as a driver does).
    fn frame_for(svc: &Service<PgLog>, c: ConnId, ty: &str, rid: &str) -> Value {
        let t0 = Instant::now();
        loop {
            svc.tick();
            let got: Vec<Value> = svc.with_host(|h, now| {
                std::iter::from_fn(|| h.poll_transmit(now, c))
                    .map(|b| serde_json::from_slice(&b).unwrap())
                    .collect()
            });
            if let Some(f) = got
                .into_iter()
                .find(|f| f["type"] == ty && f["requestId"] == rid)
            {
                return f;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no {ty} for {rid}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_socket_input_to_a_non_owner_runs_on_the_owner_once_with_its_traceparent() {
        let schema = Schema::fresh();
        let (a, _la) = service(&schema, 5_000);
        let (b, _lb) = service(&schema, 5_000);
        let r = a.control(
            None,
            &super::forwarding::body("th", "wait", "in-a1"),
            "r-a1",
            None,
        );
        assert!(r.body.contains("accepted"), "{}", r.body);
        let c = socket(&b, "th");
        send(&b, c, "r-w1", "in-w1");
        // A queues it behind its running turn: B's socket gets A's `queued` receipt.
        let first = frame_for(&b, c, "harness.receipt", "r-w1");
        assert_eq!(first["status"], "queued", "{first}");
        assert_eq!(first["inputId"], "in-w1", "{first}");
        // The same input again: the owner's idempotency by inputId, the same receipt.
        send(&b, c, "r-w2", "in-w1");
        let again = frame_for(&b, c, "harness.receipt", "r-w2");
        assert_eq!(again["status"], first["status"]);
        assert_eq!(again["inputId"], "in-w1");
        // One `harness.input.accepted` for it, written by A (no new epoch), with the
        // frame's traceparent.
        let mut log = schema.host();
        assert_eq!(
            accepted_records(&mut log, "th", "in-w1"),
            vec![Some(TP.to_owned())]
        );
        let owners = (1..=log.head_seq("th"))
            .filter_map(|s| log.get("th", s).unwrap())
            .filter(|r| r.json_str().contains("harness.ownership.changed"))
            .count();
        assert_eq!(owners, 1);
    }

    /// The owner does not answer within `forward_wait`: the input is taken back and answered
    /// by the host that got it (`not_owner` while the owner's lease is live); the owner never
    /// runs it afterwards.
    #[test]
    fn an_unanswered_socket_forward_is_taken_back_after_forward_wait() {
        let schema = Schema::fresh();
        let a = Service::new(
            Host::new(HostConfig::default(), schema.leased(5_000)),
            Instant::now,
        );
        let cfg = HostConfig {
            forward_wait: Duration::from_millis(300),
            ..HostConfig::default()
        };
        let (b, _lb) = service_with(&schema, 5_000, cfg);
        let r = a.control(
            None,
            &super::forwarding::body("th", "wait", "in-a1"),
            "r-a1",
            None,
        );
        assert!(r.body.contains("accepted"), "{}", r.body);
        let c = socket(&b, "th");
        let t0 = Instant::now();
        send(&b, c, "r-w1", "in-w1");
        let got = frame_for(&b, c, "harness.receipt", "r-w1");
        assert!(t0.elapsed() >= Duration::from_millis(300));
        assert_eq!(got["status"], "rejected", "{got}");
        assert_eq!(got["reason"], "not_owner", "{got}");
        assert_eq!(a.with_host(|h, now| h.handle_forwarded(now)), 0);
        let mut log = schema.host();
        assert!(accepted_records(&mut log, "th", "in-w1").is_empty());
    }
}

/// A turn parked for an approval on host A (its lease released: the thread is idle) is
/// approved through host B: B takes the thread (`acquired`, not `taken_over`: A let it go),
/// reads the waits record A kept, drives the turn again, and the gated tool runs once, on B
/// (spec "Waits for a person", tanstack-harness-wire-protocol.md:425-433; :455).
mod parked {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use harness_core::agent::ToolLoopAgent;
    use harness_core::message::{Message, Part, Role, ToolCall};
    use harness_core::model::ScriptedModel;
    use harness_core::tool::{Tool, Tools};
    use harness_tanstack::driver::{Service, run_turns};
    use harness_tanstack::host::HostConfig;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use support::driver::{read_all, send, service_over};

    fn refund_host(log: PgLog, runs: &Arc<AtomicUsize>) -> (Service<PgLog>, LocalPool) {
        let (svc, _) = service_over(HostConfig::default(), log);
        let pool = LocalPool::new();
        let counted = Arc::clone(runs);
        let tools = Tools::new().with(
            Tool::json("refund", "Refund an order", move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"refunded": true}))
            })
            .requires_approval(),
        );
        let model = ScriptedModel::new().otherwise(|req| {
            let answered = req
                .messages
                .last()
                .is_some_and(|m| m.parts.iter().any(|p| matches!(p, Part::ToolResult(_))));
            if answered {
                return Ok(Message::assistant("Refunded."));
            }
            let args = json!({"order_id": 42})
                .as_object()
                .cloned()
                .unwrap_or_default();
            Ok(Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall::new("call_1", "refund", args))],
            })
        });
        let agent = ToolLoopAgent::new("shop").with_tools(&tools);
        pool.spawner()
            .spawn_local(run_turns(svc.clone(), agent, model, tools))
            .unwrap();
        (svc, pool)
    }

    /// What host B keeps of a thread in memory follows what host A writes: B's listener
    /// hears A's appends (and not B's own), and B's transcript reads them.
    #[test]
    fn a_transcript_on_host_b_follows_the_turns_of_host_a() {
        let schema = Schema::fresh();
        let runs = Arc::new(AtomicUsize::new(0));
        let (a, mut pool_a) = refund_host(schema.leased(60_000), &runs);
        let (b, _pool_b) = refund_host(schema.leased(60_000), &runs);
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let _l = b.with_host(|h, _| {
            h.log()
                .listen(move |key, _| {
                    let _ = tx.send(key.to_owned());
                })
                .unwrap()
        });
        let transcript = |svc: &Service<PgLog>| svc.transcript("thread-1", None, "r").body;
        send(
            &a,
            &mut pool_a,
            "thread-1",
            json!({"op": "append", "message": "first"}),
        );
        while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
        assert!(transcript(&b).contains("first"));
        send(
            &a,
            &mut pool_a,
            "thread-1",
            json!({"op": "append", "message": "second"}),
        );
        let key = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("B hears A's append");
        b.handle_appended(&key);
        assert!(transcript(&b).contains("second"), "{}", transcript(&b));
        // B's own appends are not announced to B.
        send(
            &b,
            &mut LocalPool::new(),
            "thread-1",
            json!({"op": "append", "message": "third"}),
        );
        assert!(rx.recv_timeout(Duration::from_millis(500)).is_err());
    }

    #[test]
    fn a_turn_parked_on_one_host_is_approved_and_runs_once_on_another() {
        let schema = Schema::fresh();
        let runs = Arc::new(AtomicUsize::new(0));
        let (a, mut pool_a) = refund_host(schema.leased(60_000), &runs);
        let r = send(
            &a,
            &mut pool_a,
            "thread-1",
            json!({"op": "prompt", "message": "Refund order 42"}),
        );
        assert_eq!(r["status"], "accepted");
        let frames = read_all(&mut pool_a, &a);
        assert!(
            frames
                .iter()
                .any(|f| f["event"]["name"] == "harness.wait.opened")
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        // A is alive (its lease TTL is a minute) but the thread is idle there: B takes it.
        let (b, mut pool_b) = refund_host(schema.leased(60_000), &runs);
        let r = send(
            &b,
            &mut pool_b,
            "thread-1",
            json!({"op": "resolve", "resume": [
                {"interruptId": "approval-call_1", "status": "resolved", "payload": {"approved": true}}
            ]}),
        );
        assert_eq!(r["status"], "accepted", "{r}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let frames = read_all(&mut pool_b, &b);
        let owners: Vec<&serde_json::Value> = frames
            .iter()
            .filter(|f| f["event"]["name"] == "harness.ownership.changed")
            .map(|f| &f["event"]["value"])
            .collect();
        assert_eq!(
            owners,
            vec![
                &json!({"epoch": 1, "reason": "acquired"}),
                &json!({"epoch": 2, "reason": "acquired"})
            ]
        );
        let after = frames
            .iter()
            .position(|f| f["event"]["value"] == json!({"epoch": 2, "reason": "acquired"}))
            .unwrap();
        assert!(
            frames[after..]
                .iter()
                .any(|f| f["event"]["type"] == "TOOL_CALL_RESULT")
        );
        assert!(
            frames[after..]
                .iter()
                .any(|f| f["event"]["name"] == "harness.wait.settled")
        );
        // The same approval again, on A: the wait is settled, nothing runs.
        let r = send(
            &a,
            &mut pool_a,
            "thread-1",
            json!({"op": "resolve", "resume": [
                {"interruptId": "approval-call_1", "status": "resolved", "payload": {"approved": true}}
            ]}),
        );
        assert_eq!(r["reason"], "not_waiting", "{r}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
