//! The PostgreSQL stores against the file stores, on one machine in one run: journal
//! appends/s, TanStack events/s, and the cross-host delivery latency of an event (an append
//! on host A to its bytes read on host B, woken by LISTEN/NOTIFY).
//!
//! ```text
//! bash scripts/pg_figures.sh            # starts a throwaway PostgreSQL, runs this, stops it
//! cargo run --release --features postgres --example pg_figures -- --database-url URL [--n N]
//! ```
//!
//! Every append is sequential (one writer, the next after the previous returned), each
//! journal append one record, each event one `TEXT_MESSAGE_CONTENT`. The server runs with its
//! defaults (`fsync` on, `synchronous_commit` on: each commit waits for its WAL flush); the
//! journal's `Durability::EveryTurn` and `Never` rows turn the wait off for their appends'
//! own transactions, and `EveryTurn` waits once per turn of 8 records, at `sync`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(not(feature = "postgres"))]
fn main() {
    eprintln!(
        "pg_figures needs the postgres feature: cargo run --features postgres --example pg_figures -- --database-url URL"
    );
    std::process::exit(2);
}

#[cfg(feature = "postgres")]
fn main() {
    figures::main();
}

#[cfg(feature = "postgres")]
mod figures {
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use futures::StreamExt;
    use harness_core::event::{Event, EventBody};
    use harness_core::message::Message;
    use harness_core::pg::PgConfig;
    use harness_sessions::journal::{Durability, FileJournal, Journal, PgJournal, SessionMeta};
    use harness_sessions::record::Record;
    use harness_tanstack::agui::AguiEvent;
    use harness_tanstack::driver::Service;
    use harness_tanstack::host::{Host, HostConfig};
    use harness_tanstack::log::{EventLog, FileLog, FileLogConfig, PgLog};

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-figures-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Appends `n` records one at a time; `sync_every` records end a "turn" (Journal::sync).
    fn journal_rate(j: &dyn Journal, n: usize, sync_every: usize) -> f64 {
        j.create("s", &SessionMeta::default()).unwrap();
        let fence = j.acquire_fence("s").unwrap();
        let mut head = j.head("s").unwrap();
        let t = Instant::now();
        for i in 0..n {
            let ev = Event::new(
                "e1",
                EventBody::Output(Message::assistant(format!("record {i} of the figures run"))),
            );
            let r = Record::seal(ev, head.seq + 1, head.hash, fence).unwrap();
            j.append("s", head.seq, fence, std::slice::from_ref(&r))
                .unwrap();
            head.seq = r.seq;
            head.hash = Some(r.content_hash);
            if (i + 1) % sync_every == 0 {
                j.sync("s").unwrap();
            }
        }
        j.sync("s").unwrap();
        n as f64 / t.elapsed().as_secs_f64()
    }

    fn log_rate(log: &mut dyn EventLog, n: usize) -> f64 {
        // The thread's lease first (a PgLog fences every append on it; a file log holds it).
        log.lease("t", "t").unwrap();
        let t = Instant::now();
        for i in 0..n {
            log.append(
                "t",
                "op",
                &AguiEvent::text_content("m", format!("delta {i}")),
            )
            .unwrap();
        }
        n as f64 / t.elapsed().as_secs_f64()
    }

    fn pct(sorted: &[Duration], p: f64) -> Duration {
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i.min(sorted.len() - 1)]
    }

    pub fn main() {
        let mut url = None;
        let mut n = 2000usize;
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            match a.as_str() {
                "--database-url" => url = it.next(),
                "--n" => n = it.next().and_then(|v| v.parse().ok()).unwrap_or(n),
                _ => {
                    eprintln!("usage: pg_figures --database-url URL [--n N]");
                    std::process::exit(2);
                }
            }
        }
        let url = url.unwrap_or_else(|| {
            eprintln!("usage: pg_figures --database-url URL [--n N]");
            std::process::exit(2)
        });
        let schema = |s: &str| {
            PgConfig::new(url.clone()).schema(format!("figures_{}_{s}", std::process::id()))
        };
        // A "turn" of the figures: 8 records, then the durability point.
        const TURN: usize = 8;

        println!("| store | journal appends/s |");
        println!("| --- | ---: |");
        let rows: Vec<(&str, f64)> = vec![
            ("file, no fsync (Durability::Never)", {
                let d = tmp("j-never");
                journal_rate(
                    &FileJournal::with_durability(&d, Durability::Never).unwrap(),
                    n,
                    TURN,
                )
            }),
            ("file, fsync per turn of 8 records (the default)", {
                let d = tmp("j-turn");
                journal_rate(
                    &FileJournal::with_durability(&d, Durability::EveryTurn).unwrap(),
                    n,
                    TURN,
                )
            }),
            ("file, fsync per record", {
                let d = tmp("j-record");
                journal_rate(
                    &FileJournal::with_durability(&d, Durability::EveryRecord).unwrap(),
                    n,
                    TURN,
                )
            }),
            (
                "PostgreSQL, commit waits for the WAL flush per append (Durability::EveryRecord)",
                {
                    journal_rate(
                        &PgJournal::with_config(&schema("journal"))
                            .unwrap()
                            .with_durability(Durability::EveryRecord),
                        n,
                        TURN,
                    )
                },
            ),
            (
                "PostgreSQL, WAL flush waited for per turn of 8 records (the default)",
                {
                    journal_rate(
                        &PgJournal::with_config(&schema("journal_turn"))
                            .unwrap()
                            .with_durability(Durability::EveryTurn),
                        n,
                        TURN,
                    )
                },
            ),
            ("PostgreSQL, never waited for (Durability::Never)", {
                journal_rate(
                    &PgJournal::with_config(&schema("journal_never"))
                        .unwrap()
                        .with_durability(Durability::Never),
                    n,
                    TURN,
                )
            }),
        ];
        for (name, r) in rows {
            println!("| {name} | {r:.0} |");
        }

        println!();
        println!("| store | TanStack events/s |");
        println!("| --- | ---: |");
        let mut no_sync = FileLog::open(tmp("log-nosync")).unwrap();
        let mut sync = FileLog::open_with(
            tmp("log-sync"),
            FileLogConfig {
                sync: true,
                ..FileLogConfig::default()
            },
        )
        .unwrap();
        let mut pg = PgLog::with_config(&schema("log")).unwrap();
        for (name, log) in [
            (
                "file, no fsync (the default)",
                &mut no_sync as &mut dyn EventLog,
            ),
            ("file, fsync per event", &mut sync),
            ("PostgreSQL (one statement, committed, per event)", &mut pg),
        ] {
            println!("| {name} | {:.0} |", log_rate(log, n));
        }

        // Cross-host delivery: host A's service emits an event to a thread; host B's
        // service, woken by NOTIFY (its listener hands the key to a thread that calls
        // `handle_appended`), sends the event's bytes on B's SSE stream of the thread.
        let cfg = schema("latency");
        let host_a = Service::new(
            Host::new(HostConfig::default(), PgLog::with_config(&cfg).unwrap()),
            Instant::now,
        );
        let host_b = Service::new(
            Host::new(HostConfig::default(), PgLog::with_config(&cfg).unwrap()),
            Instant::now,
        );
        host_a
            .with_host(|h, now| {
                h.log_mut().lease("t", "t")?;
                h.emit(now, "t", "op", AguiEvent::text_content("m", "first"))
                    .map_err(|e| harness_tanstack::log::LogError::Io(e.to_string()))
            })
            .unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let _listener = host_b.with_host(|h, _| {
            h.log()
                .listen(move |key, _| {
                    let _ = tx.send(key.to_owned());
                })
                .unwrap()
        });
        let waker = host_b.clone();
        std::thread::spawn(move || {
            while let Ok(key) = rx.recv() {
                waker.handle_appended(&key);
            }
        });
        let mut stream = host_b
            .open_sse(Some("t"), Some("2"), None, Some("1"), None, "figures")
            .unwrap();
        let (out_tx, out) = mpsc::channel::<bytes::Bytes>();
        std::thread::spawn(move || {
            while let Some(b) = futures::executor::block_on(stream.next()) {
                if out_tx.send(b).is_err() {
                    break;
                }
            }
        });
        let samples = n.min(1000);
        let mut lat = Vec::with_capacity(samples);
        for i in 0..samples {
            let t0 = Instant::now();
            let c = host_a
                .with_host(|h, now| {
                    h.emit(
                        now,
                        "t",
                        "op",
                        AguiEvent::text_content("m", format!("delta {i}")),
                    )
                })
                .unwrap();
            let want = format!("id: {}\n", c.as_str());
            loop {
                let b = out.recv_timeout(Duration::from_secs(5)).unwrap();
                if b.starts_with(want.as_bytes()) {
                    break;
                }
            }
            lat.push(t0.elapsed());
        }
        lat.sort();
        println!();
        println!(
            "cross-host delivery (an event emitted on host A -> its bytes on host B's SSE stream), {samples} events: p50 {:.2} ms, p99 {:.2} ms",
            pct(&lat, 0.50).as_secs_f64() * 1e3,
            pct(&lat, 0.99).as_secs_f64() * 1e3,
        );
    }
}
