//! The PostgreSQL event log on a real server (feature `postgres`): the shared log suite, then
//! what only a shared database shows: hosts appending to one thread share one cursor space, a
//! reader on another host reads any cursor, and appends reach other hosts by LISTEN/NOTIFY.
//!
//! Needs `HARNESS_PG_URL` (scripts/interop/postgres/run.sh starts a throwaway server and sets
//! it); without it every test fails, saying so. Each test works in a schema of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod log_suite;

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
    fn host(&self) -> PgLog {
        PgLog::with_config(&self.0).unwrap()
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
