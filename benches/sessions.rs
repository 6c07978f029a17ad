//! harness-sessions: journal append (memory; file with fsync per turn and with none), replay
//! (events per second), and verify against bare SHA-256 over the same bytes, each group with
//! its baseline in the same run.
//!
//! ```text
//! cargo bench --bench sessions
//! python3 scripts/bench_table.py sessions_append baseline_serde_json+sha256
//! python3 scripts/bench_table.py sessions_replay baseline_read_records
//! python3 scripts/bench_table.py sessions_verify baseline_bare_sha256
//! cargo bench --bench sessions -- 'sessions_connect'
//! python3 scripts/bench_table.py sessions_connect_turn turn_in_process
//! python3 scripts/bench_table.py sessions_connect_frames machines
//! ```
//!
//! `Harness.Connect` (the `grpc` feature): one agent turn driven by a controller with the
//! harness in process against the same harness served over loopback gRPC (two `Describe`s and
//! one `Connect` stream per turn), and frames per second through `Connect`: the two sans-IO
//! machines alone, with prost encoding and decoding every frame, the futures drivers over
//! in-memory channels, and tonic over loopback TCP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use harness_core::event::{Event, EventBody, ExecutionStart, HarnessEnd, ModelCall};
use harness_core::message::{Message, ModelRequest, Usage};
use harness_core::model::ScriptedModel;
use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
use harness_sessions::connect::grpc::{GrpcConnector, serve_listener};
use harness_sessions::connect::{
    ConnectError, Connector, ControllerFrame, HarnessConnect, HarnessConnectEvent, HarnessFrame,
    HostConnect, RemoteHarness, drive_connect, pb, serve_connect,
};
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::hash::ContentHash;
use harness_sessions::journal::{
    Durability, FileJournal, Journal, MemoryJournal, SessionMeta, verify_file_bytes,
};
use harness_sessions::record::Record;
use harness_sessions::verify::verify_records;

const ANSWER: &str = "A prime number is a whole number greater than 1 whose only divisors are 1 and itself; 2, 3, 5 and 7 are the first four.";

/// One turn's events as a host writes them (8 records).
fn turn_events(i: usize) -> Vec<Event> {
    let id = format!("{i:016x}");
    let mut start = ExecutionStart {
        input_count: Some(1),
        harness: "chat".into(),
        harness_version: "1".into(),
        ..Default::default()
    };
    start.config = br#"{"system_prompt":"Answer concisely."}"#.to_vec();
    let req = ModelRequest::new(vec![Message::user("What is a prime number?")]);
    vec![
        Event::new(&id, EventBody::ExecutionStart(start)),
        Event::new(
            &id,
            EventBody::Input(Message::user("What is a prime number?")),
        ),
        Event::new(
            &id,
            EventBody::ModelCall(ModelCall::journaled(
                &req,
                "ab".repeat(32),
                "0123456789abcdef".into(),
            )),
        ),
        Event::new(&id, EventBody::Output(Message::assistant(ANSWER))),
        Event::new(
            &id,
            EventBody::Output(Message::assistant("(checked twice)")),
        ),
        Event::new(
            &id,
            EventBody::Usage(Usage {
                model: "m".into(),
                input_tokens: 12,
                output_tokens: 30,
                reasoning_tokens: 0,
            }),
        ),
        Event::new(&id, EventBody::Output(Message::assistant(ANSWER))),
        Event::new(&id, EventBody::End(HarnessEnd::completed())),
    ]
}

fn append_turn(j: &dyn Journal, session: &str, fence: u64, events: &[Event], sync: bool) {
    for ev in events {
        let h = j.head(session).unwrap();
        let r = Record::seal(ev.clone(), h.seq + 1, h.hash, fence).unwrap();
        j.append(session, h.seq, fence, std::slice::from_ref(&r))
            .unwrap();
    }
    if sync {
        j.sync(session).unwrap();
    }
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

fn tmpdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harness-sessions-bench-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bench_append(c: &mut Criterion) {
    let events = turn_events(1);
    let mut g = c.benchmark_group("sessions_append");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    // The floor: serialize each event with serde_json and SHA-256 it, nothing else.
    g.bench_function("baseline_serde_json+sha256", |b| {
        b.iter(|| {
            for ev in &events {
                let bytes = serde_json::to_vec(ev).unwrap();
                black_box(ContentHash::of(&bytes));
            }
        })
    });
    // Where the time goes: canonicalizing (RFC 8785) and hashing one record.
    g.bench_function("seal_only", |b| {
        b.iter(|| {
            for (i, ev) in events.iter().enumerate() {
                black_box(Record::seal(ev.clone(), i as u64 + 1, None, 1).unwrap());
            }
        })
    });
    let mem = MemoryJournal::new();
    mem.create("s", &SessionMeta::default()).unwrap();
    let f = mem.acquire_fence("s").unwrap();
    g.bench_function("memory", |b| {
        b.iter(|| append_turn(&mem, "s", f, &events, true))
    });
    for (name, durability) in [
        ("file_fsync_per_turn", Durability::EveryTurn),
        ("file_no_fsync", Durability::Never),
    ] {
        let dir = tmpdir();
        let j = FileJournal::with_durability(&dir, durability).unwrap();
        j.create("s", &SessionMeta::default()).unwrap();
        let f = j.acquire_fence("s").unwrap();
        g.bench_function(name, |b| b.iter(|| append_turn(&j, "s", f, &events, true)));
        drop(j);
        let _ = std::fs::remove_dir_all(&dir);
    }
    g.finish();
}

/// A harness doing what an agent loop does per turn: `steps` times a model call on the
/// current input, an output of its own, a usage report, another output.
struct Agent {
    steps: usize,
}

#[async_trait]
impl Harness for Agent {
    async fn describe(&self) -> Result<Descriptor, HarnessError> {
        Ok(Descriptor::new("agent", "1"))
    }
    async fn run(&self, start: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
        for _ in 0..self.steps {
            let resp = sink
                .model(ModelRequest::new(start.inputs.clone()).with_model("m"))
                .await?;
            sink.output("(checked twice)").await?;
            sink.usage(resp.usage.clone()).await?;
            sink.output(&resp.message.text()).await?;
        }
        Ok(())
    }
}

/// A session of `turns` turns of `steps` agent steps each.
fn recorded_session(
    turns: usize,
    steps: usize,
) -> (Arc<MemoryJournal>, Controller, Arc<ScriptedModel>) {
    let journal = Arc::new(MemoryJournal::new());
    let model = Arc::new(ScriptedModel::new().otherwise(|_| Ok(Message::assistant(ANSWER))));
    let host = Controller::builder(journal.clone())
        .model(model.clone())
        .harness("agent", Agent { steps })
        .build();
    host.create_session("s", None).unwrap();
    for i in 0..turns {
        futures::executor::block_on(host.exec(ExecRequest::text("s", format!("question {i}"))))
            .unwrap();
    }
    (journal, host, model)
}

fn bench_replay(c: &mut Criterion) {
    const STEPS: usize = 100;
    let (journal, host, model) = recorded_session(4, STEPS);
    let n = journal.read("s", 1, None).unwrap().len();
    let calls = model.calls();
    let mut g = c.benchmark_group("sessions_replay");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    // The floor: reading the records out of the journal (what replay starts with).
    g.bench_function("baseline_read_records", |b| {
        b.iter(|| black_box(journal.read("s", 1, None).unwrap().len()))
    });
    g.bench_function("replay_memory", |b| {
        b.iter(|| {
            let r = futures::executor::block_on(host.replay("s")).unwrap();
            assert_eq!(r.provider_calls, 0);
            black_box(r.records_reproduced)
        })
    });
    // The same journal on files: every record decoded from its line.
    let dir = tmpdir();
    let fj = Arc::new(FileJournal::with_durability(&dir, Durability::Never).unwrap());
    fj.create(
        "s",
        &SessionMeta {
            harness: "agent".into(),
            parent: None,
        },
    )
    .unwrap();
    let f = fj.acquire_fence("s").unwrap();
    let recs = journal.read("s", 1, None).unwrap();
    let resealed: Vec<Record> = {
        let mut prev = None;
        recs.iter()
            .map(|r| {
                let x = Record::seal(r.event.clone(), r.seq, prev, f).unwrap();
                prev = Some(x.content_hash);
                x
            })
            .collect()
    };
    fj.append("s", 0, f, &resealed).unwrap();
    let fhost = Controller::builder(fj.clone())
        .harness("agent", Agent { steps: STEPS })
        .build();
    g.bench_function("replay_file", |b| {
        b.iter(|| {
            black_box(
                futures::executor::block_on(fhost.replay("s"))
                    .unwrap()
                    .records_reproduced,
            )
        })
    });
    g.finish();
    assert_eq!(model.calls(), calls, "replay never calls the provider");
    // A long conversation: every stateless turn gets the whole prefix as its History, so
    // replaying T turns clones O(T^2) events.
    let (journal, host, _) = recorded_session(300, 1);
    let n = journal.read("s", 1, None).unwrap().len();
    let mut g = c.benchmark_group("sessions_replay_300_turns");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    g.bench_function("baseline_read_records", |b| {
        b.iter(|| black_box(journal.read("s", 1, None).unwrap().len()))
    });
    g.bench_function("replay_memory", |b| {
        b.iter(|| {
            black_box(
                futures::executor::block_on(host.replay("s"))
                    .unwrap()
                    .records_reproduced,
            )
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench_verify(c: &mut Criterion) {
    let dir = tmpdir();
    let j = FileJournal::with_durability(&dir, Durability::Never).unwrap();
    j.create("s", &SessionMeta::default()).unwrap();
    let f = j.acquire_fence("s").unwrap();
    for i in 0..500 {
        append_turn(&j, "s", f, &turn_events(i), false);
    }
    let bytes = std::fs::read(dir.join("s.journal")).unwrap();
    let records = j.read("s", 1, None).unwrap();
    let mut g = c.benchmark_group("sessions_verify");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    g.bench_function("baseline_bare_sha256", |b| {
        b.iter(|| black_box(ContentHash::of(&bytes)))
    });
    g.bench_function("verify_file_bytes", |b| {
        b.iter(|| black_box(verify_file_bytes("s", &bytes).unwrap().records))
    });
    g.bench_function("verify_records_memory", |b| {
        b.iter(|| black_box(verify_records(&records).unwrap().records))
    });
    g.finish();
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The frames of one turn of `Agent { steps }`: the start, per step MODEL_CALL, its `model`
/// frame, OUTPUT, USAGE and OUTPUT, then END.
fn frames_per_turn(steps: usize) -> u64 {
    2 + 5 * steps as u64
}

fn connect_start() -> Start {
    Start {
        execution_id: "0123456789abcdef".into(),
        session_uid: "s".into(),
        inputs: vec![Message::user("What is a prime number?")],
        ..Start::default()
    }
}

/// What the host's sink answers, with nothing behind it: only the exchange is measured.
struct NullSink;

#[async_trait]
impl EventSink for NullSink {
    async fn model(
        &mut self,
        _: ModelRequest,
    ) -> Result<harness_core::message::ModelResponse, harness_core::SinkError> {
        Ok(harness_core::message::ModelResponse {
            message: Message::assistant(ANSWER),
            usage: Usage::default(),
        })
    }
    async fn output(&mut self, _: &str) -> Result<(), harness_core::SinkError> {
        Ok(())
    }
    async fn tool_call(
        &mut self,
        _: harness_core::message::ToolCall,
    ) -> Result<harness_core::message::ToolResult, harness_core::SinkError> {
        Err(harness_core::SinkError::Rejected("no tools".into()))
    }
    async fn report(
        &mut self,
        _: harness_core::message::ToolResult,
    ) -> Result<(), harness_core::SinkError> {
        Ok(())
    }
    async fn usage(&mut self, _: Usage) -> Result<(), harness_core::SinkError> {
        Ok(())
    }
}

/// Through prost and back, as the wire carries a frame.
fn via_prost_c(f: ControllerFrame) -> ControllerFrame {
    use prost::Message as _;
    let bytes = pb::ControllerFrame::from(&f).encode_to_vec();
    pb::ControllerFrame::decode(bytes.as_slice())
        .unwrap()
        .into()
}

fn via_prost_e(f: HarnessFrame) -> HarnessFrame {
    use prost::Message as _;
    let bytes = pb::Event::from(&f).encode_to_vec();
    pb::Event::decode(bytes.as_slice()).unwrap().into()
}

/// One turn of `Agent { steps }` through the two sans-IO machines, frame by frame (through
/// prost when `prost`). Returns the frames carried.
fn pump_machines(steps: usize, prost: bool) -> u64 {
    let start = connect_start();
    let resp = harness_core::message::ModelResponse {
        message: Message::assistant(ANSWER),
        usage: Usage::default(),
    };
    let mut host = HostConnect::new(&start).unwrap();
    let mut h = HarnessConnect::new();
    let mut frames = 0;
    let to_harness = |host: &mut HostConnect, h: &mut HarnessConnect, n: &mut u64| {
        while let Some(f) = host.poll_transmit() {
            *n += 1;
            h.handle_frame(if prost { via_prost_c(f) } else { f })
                .unwrap();
        }
    };
    let to_host = |h: &mut HarnessConnect, host: &mut HostConnect, n: &mut u64| {
        while let Some(f) = h.poll_transmit() {
            *n += 1;
            host.handle_event(if prost { via_prost_e(f) } else { f })
                .unwrap();
        }
    };
    to_harness(&mut host, &mut h, &mut frames);
    assert!(matches!(
        h.poll_event(),
        Some(HarnessConnectEvent::Start(_))
    ));
    for _ in 0..steps {
        h.model(ModelRequest::new(start.inputs.clone()).with_model("m"))
            .unwrap();
        to_host(&mut h, &mut host, &mut frames);
        black_box(host.poll_event());
        host.model_result(resp.clone()).unwrap();
        to_harness(&mut host, &mut h, &mut frames);
        black_box(h.poll_event());
        h.output("(checked twice)").unwrap();
        h.usage(Usage::default()).unwrap();
        h.output(ANSWER).unwrap();
        to_host(&mut h, &mut host, &mut frames);
        while let Some(e) = host.poll_event() {
            black_box(e);
        }
    }
    h.finish(&Ok(())).unwrap();
    to_host(&mut h, &mut host, &mut frames);
    host.handle_close().unwrap();
    frames
}

/// `Agent { steps }` served by `HarnessService` on a loopback port of `rt`.
fn serve_loopback(rt: &tokio::runtime::Runtime, steps: usize) -> GrpcConnector {
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string().parse().unwrap();
        tokio::spawn(serve_listener(listener, Agent { steps }));
        GrpcConnector::new(addr).unwrap()
    })
}

fn bench_connect(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new().otherwise(|_| Ok(Message::assistant(ANSWER))));

    // One turn (one agent step: 8 records), a fresh session each time.
    let one = serve_loopback(&rt, 1);
    let mut g = c.benchmark_group("sessions_connect_turn");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    let host = |remote: Option<&GrpcConnector>| {
        let b = Controller::builder(Arc::new(MemoryJournal::new())).model(model.clone());
        let host = match remote {
            Some(c) => b.remote_harness("agent", RemoteHarness::new(c.clone())),
            None => b.harness("agent", Agent { steps: 1 }),
        }
        .build();
        host.create_session("s", None).unwrap();
        host
    };
    for (name, remote) in [
        ("turn_in_process", None),
        ("turn_grpc_loopback", Some(&one)),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || host(remote),
                |host| {
                    let t = rt
                        .block_on(host.exec(ExecRequest::text("s", "What is a prime number?")))
                        .unwrap();
                    black_box(t.provider_calls)
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
    g.finish();

    // Frames per second: a 100-step turn (502 frames) against a sink that answers at once.
    const STEPS: usize = 100;
    let frames = frames_per_turn(STEPS);
    assert_eq!(pump_machines(STEPS, false), frames);
    let mut g = c.benchmark_group("sessions_connect_frames");
    g.throughput(Throughput::Elements(frames));
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("machines", |b| b.iter(|| pump_machines(STEPS, false)));
    g.bench_function("machines_prost", |b| b.iter(|| pump_machines(STEPS, true)));
    let agent = Agent { steps: STEPS };
    g.bench_function("drivers_in_memory", |b| {
        b.iter(|| {
            futures::executor::block_on(async {
                let (to_h, from_host) = futures::channel::mpsc::unbounded();
                let (to_host, from_h) = futures::channel::mpsc::unbounded();
                let tr =
                    |e: futures::channel::mpsc::SendError| ConnectError::Transport(e.to_string());
                let serve = serve_connect(
                    &agent,
                    from_host.map(Ok),
                    futures::SinkExt::sink_map_err(to_host, tr),
                );
                let mut sink = NullSink;
                let drive = drive_connect(
                    connect_start(),
                    &mut sink,
                    from_h.map(Ok),
                    futures::SinkExt::sink_map_err(to_h, tr),
                );
                let (served, driven) = futures::join!(serve, drive);
                served.unwrap();
                driven.unwrap();
            })
        })
    });
    let many = serve_loopback(&rt, STEPS);
    g.bench_function("grpc_loopback", |b| {
        b.iter(|| {
            rt.block_on(async {
                let c = many.connect().await.unwrap();
                drive_connect(connect_start(), &mut NullSink, c.inbound, c.outbound)
                    .await
                    .unwrap();
            })
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_append,
    bench_replay,
    bench_verify,
    bench_connect
);
criterion_main!(benches);
