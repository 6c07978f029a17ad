//! jambonz frame codec throughput against bare serde_json on the same frames, a whole
//! simulated call, and the memory of idle calls.
//!
//! Baselines, in the same run: serde_json into a flat struct with the same typed fields
//! (what a hand-written reader of one known frame type would do; the floor), and serde's
//! internally tagged enum (`#[serde(tag = "type")]`, the obvious typed decode).
//!
//! ```text
//! cargo bench --bench jambonz
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use futures::SinkExt;
use futures::channel::mpsc;
use harness_core::agent::ToolLoopAgent;
use harness_core::message::ToolDefinition;
use harness_core::model::ScriptedModel;
use harness_core::{Tool, Tools};
use harness_jambonz::driver::{Incoming, ServeConfig, serve};
use harness_jambonz::frame::{HarnessMessage, JambonzMessage};
use harness_jambonz::harness_side::{CallEvent, HarnessCall, Transmit};
use harness_jambonz::reply::{Chunk, ReplyChunk};
use harness_jambonz::simulator::{Script, SimConfig, Simulator};
use harness_jambonz::testing::simulate_call;
use harness_jambonz::turn::{Transcript, TurnInput, TurnStart};
use serde::{Deserialize, Serialize};

const N: usize = 1000;

// ---- baselines: flat structs with the same typed fields ------------------------------

#[derive(Deserialize, Serialize)]
struct FlatDelta {
    content: Option<String>,
}
#[derive(Deserialize, Serialize)]
struct FlatChoice {
    delta: Option<FlatDelta>,
}
#[derive(Deserialize, Serialize)]
struct FlatChunkBody {
    choices: Vec<FlatChoice>,
}
#[derive(Deserialize, Serialize)]
struct FlatReplyChunk {
    #[serde(rename = "type")]
    kind: String,
    reply_id: String,
    turn_id: Option<u64>,
    chunk: FlatChunkBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupt: Option<bool>,
}
#[derive(Deserialize, Serialize)]
struct FlatTranscript {
    #[serde(rename = "type")]
    kind: String,
    call_sid: Option<String>,
    turn_id: Option<u64>,
    text: String,
    #[serde(rename = "final")]
    is_final: bool,
}
#[derive(Deserialize, Serialize)]
struct FlatInput {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    language: Option<String>,
}
#[derive(Deserialize, Serialize)]
struct FlatTurnStart {
    #[serde(rename = "type")]
    kind: String,
    call_sid: Option<String>,
    turn_id: Option<u64>,
    input: FlatInput,
}

/// The serde-derived typed decode: an internally tagged enum.
#[derive(Deserialize)]
#[serde(tag = "type")]
#[allow(dead_code)]
enum Tagged {
    #[serde(rename = "reply:chunk")]
    ReplyChunk {
        reply_id: String,
        turn_id: Option<u64>,
        chunk: FlatChunkBody,
        interrupt: Option<bool>,
    },
    #[serde(rename = "transcript")]
    Transcript {
        call_sid: Option<String>,
        turn_id: Option<u64>,
        text: String,
        #[serde(rename = "final")]
        is_final: bool,
    },
    #[serde(rename = "turn:start")]
    TurnStart {
        call_sid: Option<String>,
        turn_id: Option<u64>,
        input: FlatInput,
    },
    #[serde(other)]
    Other,
}

// ---- frames ------------------------------------------------------------------------

const WORDS: &[&str] = &[
    "We're ",
    "open ",
    "eight ",
    "to ",
    "six ",
    "on ",
    "week\u{e9}days, ",
    "\"really\" ",
    "truly.\n",
];

fn chunk_frames() -> Vec<String> {
    (0..N)
        .map(|i| {
            HarnessMessage::ReplyChunk(ReplyChunk {
                reply_id: format!("r{}", i / 20 + 1),
                turn_id: Some((i / 20 + 1) as u64),
                chunk: Chunk::text(WORDS[i % WORDS.len()]),
                interrupt: None,
                extra: Default::default(),
            })
            .encode()
        })
        .collect()
}

/// The same chunks as OpenAI streams them (id, object, created, model, index, logprobs, …):
/// every extra field is kept by our decoder, ignored by the baseline.
fn openai_chunk_frames() -> Vec<String> {
    (0..N)
        .map(|i| {
            serde_json::json!({"type":"reply:chunk","reply_id":format!("r{}", i / 20 + 1),"turn_id":i / 20 + 1,
                "chunk":{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,
                "model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5",
                "choices":[{"index":0,"delta":{"content":WORDS[i % WORDS.len()]},"logprobs":null,"finish_reason":null}]}})
            .to_string()
        })
        .collect()
}

fn transcript_frames() -> Vec<String> {
    (0..N)
        .map(|i| {
            JambonzMessage::Transcript(Transcript {
                call_sid: Some("CA5f4c4c6e2f0a4b1c9d8e7f6a5b4c3d2e".into()),
                turn_id: Some((i / 8 + 2) as u64),
                text: WORDS[..=(i % WORDS.len())].concat(),
                is_final: i % 8 == 7,
                extra: Default::default(),
            })
            .encode()
        })
        .collect()
}

fn turn_start_frames() -> Vec<String> {
    (0..N)
        .map(|i| {
            JambonzMessage::TurnStart(TurnStart {
                call_sid: Some("CA5f4c4c6e2f0a4b1c9d8e7f6a5b4c3d2e".into()),
                turn_id: Some(i as u64 + 1),
                input: TurnInput::speech(
                    WORDS[..=(i % WORDS.len())].concat(),
                    Some("en-US".into()),
                ),
                extra: Default::default(),
            })
            .encode()
        })
        .collect()
}

fn codec(c: &mut Criterion) {
    let sets: [(&str, Vec<String>, bool); 4] = [
        ("reply_chunk", chunk_frames(), false),
        ("reply_chunk_openai", openai_chunk_frames(), false),
        ("transcript", transcript_frames(), true),
        ("turn_start", turn_start_frames(), true),
    ];
    for (name, frames, from_jambonz) in &sets {
        let bytes: usize = frames.iter().map(String::len).sum();
        let mut g = c.benchmark_group(format!("jambonz_decode_{name}"));
        g.throughput(Throughput::Elements(N as u64));
        g.measurement_time(Duration::from_secs(3));
        g.bench_function("harness_jambonz", |b| {
            b.iter(|| {
                for f in frames {
                    if *from_jambonz {
                        black_box(JambonzMessage::decode(black_box(f)).unwrap());
                    } else {
                        black_box(HarnessMessage::decode(black_box(f)).unwrap());
                    }
                }
            })
        });
        g.bench_function("serde_flat_struct", |b| {
            b.iter(|| {
                for f in frames {
                    match *name {
                        "transcript" => drop(black_box(
                            serde_json::from_str::<FlatTranscript>(black_box(f)).unwrap(),
                        )),
                        "turn_start" => drop(black_box(
                            serde_json::from_str::<FlatTurnStart>(black_box(f)).unwrap(),
                        )),
                        _ => drop(black_box(
                            serde_json::from_str::<FlatReplyChunk>(black_box(f)).unwrap(),
                        )),
                    }
                }
            })
        });
        g.bench_function("serde_tagged_enum", |b| {
            b.iter(|| {
                for f in frames {
                    black_box(serde_json::from_str::<Tagged>(black_box(f)).unwrap());
                }
            })
        });
        g.finish();
        let _ = bytes;
    }

    // Encoding: ours into a reused buffer vs serde_json of the flat struct into a reused buffer.
    let chunks: Vec<HarnessMessage> = chunk_frames()
        .iter()
        .map(|f| HarnessMessage::decode(f).unwrap())
        .collect();
    let flat_chunks: Vec<FlatReplyChunk> = chunk_frames()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let transcripts: Vec<JambonzMessage> = transcript_frames()
        .iter()
        .map(|f| JambonzMessage::decode(f).unwrap())
        .collect();
    let flat_transcripts: Vec<FlatTranscript> = transcript_frames()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let starts: Vec<JambonzMessage> = turn_start_frames()
        .iter()
        .map(|f| JambonzMessage::decode(f).unwrap())
        .collect();
    let flat_starts: Vec<FlatTurnStart> = turn_start_frames()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let mut buf = Vec::with_capacity(4096);
    macro_rules! enc {
        ($name:literal, $ours:expr, $flat:expr) => {{
            let mut g = c.benchmark_group(concat!("jambonz_encode_", $name));
            g.throughput(Throughput::Elements(N as u64));
            g.measurement_time(Duration::from_secs(3));
            g.bench_function("harness_jambonz", |b| {
                b.iter(|| {
                    for m in $ours.iter() {
                        buf.clear();
                        m.encode_into(&mut buf);
                        black_box(&buf);
                    }
                })
            });
            g.bench_function("serde_flat_struct", |b| {
                b.iter(|| {
                    for m in $flat.iter() {
                        buf.clear();
                        serde_json::to_writer(&mut buf, m).unwrap();
                        black_box(&buf);
                    }
                })
            });
            g.finish();
        }};
    }
    enc!("reply_chunk", chunks, flat_chunks);
    enc!("transcript", transcripts, flat_transcripts);
    enc!("turn_start", starts, flat_starts);
}

fn faq() -> (ToolLoopAgent, ScriptedModel) {
    let agent = ToolLoopAgent::new("faq")
        .with_tool(ToolDefinition::new("get_hours", "hours"))
        .with_command_tool(ToolDefinition::new("hangup", "end"), "hangup");
    let model = ScriptedModel::new()
        .reply("Thanks for calling Acme.")
        .tool_call("get_hours", serde_json::json!({}))
        .reply("We're open eight to six on weekdays.")
        .tool_call("hangup", serde_json::json!({"reason": "resolved"}));
    (agent, model)
}

fn whole_call_sim(start: Instant) -> Simulator {
    Simulator::new(
        start,
        SimConfig::default(),
        Script::new()
            .greeting()
            .say("When are you open")
            .barge_in(Duration::from_millis(1100), "Thanks, bye"),
    )
    .with_tool(Tool::json("get_hours", "hours", |_| {
        Ok(serde_json::json!({"weekdays": "8am to 6pm"}))
    }))
}

fn whole_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("jambonz_whole_call");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(4));
    // The spec's whole call: driver + ToolLoopAgent + ScriptedModel against the simulator,
    // every frame encoded and decoded on both sides, on a virtual clock.
    g.bench_function("driver_and_simulator", |b| {
        b.iter(|| {
            let (agent, model) = faq();
            let start = Instant::now();
            let call = simulate_call(
                agent,
                model,
                Tools::new(),
                whole_call_sim(start),
                start,
                ServeConfig::default(),
            );
            assert_eq!(call.transcript.ended.as_ref().unwrap().0, "harness_hangup");
            black_box(call.frames.len())
        })
    });
    // The state machines alone: HarnessCall answering from a fixed script, no agent.
    g.bench_function("state_machines_only", |b| {
        b.iter(|| {
            let start = Instant::now();
            let mut now = start;
            let mut sim = whole_call_sim(start);
            let mut h = HarnessCall::new();
            sim.start(now);
            while !sim.is_ended() {
                while let Some(Transmit::Text(f)) = sim.poll_transmit() {
                    let _ = h.handle_frame(now, &f);
                }
                while let Some(ev) = h.poll_event() {
                    if let CallEvent::TurnStarted(t) = ev {
                        {
                            let id = t.turn_id.unwrap();
                            if t.input.speech_text() == Some("Thanks, bye") {
                                h.hang_up(Some("resolved")).unwrap();
                            } else {
                                let r = h.start_reply(Some(id)).unwrap();
                                for w in WORDS {
                                    h.push_chunk(&r, w).unwrap();
                                }
                                h.finish_reply(&r, None).unwrap();
                            }
                        }
                    }
                }
                while let Some(Transmit::Text(f)) = h.poll_transmit() {
                    sim.handle_frame(now, &f);
                }
                if let Some(t) = sim.poll_timeout() {
                    now = now.max(t);
                    sim.handle_timeout(now);
                }
            }
            black_box(sim.transcript().lines.len())
        })
    });
    g.finish();
}

criterion_group!(benches, codec, whole_call);

fn rss_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// 10,000 concurrent simulated calls held idle (greeting spoken, waiting for the caller):
/// each a simulator, the driver's future serving the FAQ agent, and the channels between.
fn idle_call_memory() {
    const CALLS: usize = 10_000;
    let (agent, _) = faq();
    let agent = Arc::new(agent);
    let model = Arc::new(ScriptedModel::new().otherwise(|_| {
        Ok(harness_core::message::Message::assistant(
            "Thanks for calling Acme.",
        ))
    }));
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let before = rss_bytes();
    let t0 = Instant::now();
    let mut calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        let mut sim = whole_call_sim(start);
        let (to_h, incoming) = mpsc::unbounded::<Incoming>();
        let (outgoing, mut from_h) = mpsc::unbounded::<Transmit>();
        let mut fut = Box::pin(serve(
            agent.clone(),
            model.clone(),
            Tools::new(),
            Instant::now,
            incoming,
            outgoing.sink_map_err(|e| e.to_string()),
            ServeConfig::default(),
        ));
        sim.start(start);
        loop {
            let mut progress = matches!(fut.as_mut().poll(&mut cx), Poll::Ready(_));
            while let Some(Transmit::Text(t)) = sim.poll_transmit() {
                to_h.unbounded_send(Incoming::Text(t)).unwrap();
                progress = true;
            }
            while let Ok(Transmit::Text(t)) = from_h.try_recv() {
                sim.handle_frame(start, &t);
                progress = true;
            }
            while sim.poll_event().is_some() {}
            if !progress {
                break;
            }
        }
        assert_eq!(sim.transcript().turn(1).unwrap().first_chunk_ms, Some(0));
        calls.push((sim, to_h, from_h, fut));
    }
    let after = rss_bytes();
    let built = t0.elapsed();
    if let (Some(a), Some(b)) = (before, after) {
        let total = b.saturating_sub(a);
        println!(
            "jambonz idle calls: {CALLS} concurrent calls (simulator + driver + channels) hold {:.1} MB RSS, {:.1} KB per call; set up in {:.0} ms",
            total as f64 / 1e6,
            total as f64 / CALLS as f64 / 1e3,
            built.as_secs_f64() * 1e3
        );
    }
    drop(calls);
}

/// Ratios that survive a noisy, shared machine: ours and the flat-struct baseline timed in
/// alternation, round after round, on the same frames; the median of the per-round ratios.
fn alternating_ratios() {
    fn time(f: &mut dyn FnMut()) -> f64 {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64()
    }
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    }
    let rounds = 301;
    let sets: [(&str, Vec<String>); 4] = [
        ("reply_chunk", chunk_frames()),
        ("reply_chunk_openai", openai_chunk_frames()),
        ("transcript", transcript_frames()),
        ("turn_start", turn_start_frames()),
    ];
    println!(
        "jambonz decode, median of {rounds} alternating rounds of {N} frames (ratio = time / flat-struct time):"
    );
    for (name, frames) in &sets {
        let from_jambonz = matches!(*name, "transcript" | "turn_start");
        let mut ours = || {
            for f in frames {
                if from_jambonz {
                    black_box(JambonzMessage::decode(black_box(f)).unwrap());
                } else {
                    black_box(HarnessMessage::decode(black_box(f)).unwrap());
                }
            }
        };
        let mut flat = || {
            for f in frames {
                match *name {
                    "transcript" => drop(black_box(
                        serde_json::from_str::<FlatTranscript>(black_box(f)).unwrap(),
                    )),
                    "turn_start" => drop(black_box(
                        serde_json::from_str::<FlatTurnStart>(black_box(f)).unwrap(),
                    )),
                    _ => drop(black_box(
                        serde_json::from_str::<FlatReplyChunk>(black_box(f)).unwrap(),
                    )),
                }
            }
        };
        let mut tagged = || {
            for f in frames {
                black_box(serde_json::from_str::<Tagged>(black_box(f)).unwrap());
            }
        };
        let (mut r_ours, mut r_tagged, mut t_flat) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let a = time(&mut ours);
            let b = time(&mut flat);
            let c = time(&mut tagged);
            r_ours.push(a / b);
            r_tagged.push(c / b);
            t_flat.push(b);
        }
        let per_s = N as f64 / median(t_flat);
        println!(
            "  {name:<20} flat struct {:.2} M frames/s; harness-jambonz {:.2}x; serde tagged enum {:.2}x",
            per_s / 1e6,
            median(r_ours),
            median(r_tagged)
        );
    }
}

fn main() {
    alternating_ratios();
    idle_call_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
