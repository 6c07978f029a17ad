//! The realistic streams of the conformance vectors (tests/fixtures/streams, copied from the
//! shared vectors), decoded and accumulated under many chunkings, against their expected
//! answers: the peer's where it is right, the spec-correct one in peer_wrong/, and the
//! corrections in corrections.json where the rules differ from a vector.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use harness_uhp::{Finding, StreamDecoder, TaskAccumulator};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams")
}

struct Run {
    events: Vec<Value>,
    findings: Vec<Finding>,
    task: TaskAccumulator,
}

fn run(body: &[u8], sizes: &[usize]) -> Run {
    let mut dec = StreamDecoder::new();
    let mut task = TaskAccumulator::new();
    let mut events = Vec::new();
    let mut findings = Vec::new();
    let mut finished = None;
    let mut drain =
        |dec: &mut StreamDecoder, task: &mut TaskAccumulator, fin: &mut Option<Finding>| loop {
            if let Some(f) = fin.take() {
                task.add_finding(&f);
                findings.push(f);
            }
            match dec.poll_event() {
                Ok(Some(ev)) => {
                    task.add(&ev);
                    events.push(ev.to_value());
                }
                Ok(None) => break,
                Err(f) => {
                    task.add_finding(&f);
                    findings.push(f);
                }
            }
        };
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        dec.push(&rest[..n]);
        rest = &rest[n..];
        i += 1;
        drain(&mut dec, &mut task, &mut finished);
    }
    // finish() queues the complete events still buffered ahead of its own report.
    let end = dec.finish().err();
    drain(&mut dec, &mut task, &mut None);
    finished = end;
    drain(&mut dec, &mut task, &mut finished);
    Run {
        events,
        findings,
        task,
    }
}

/// Chunkings: whole, 1 byte (small files), 7, 4 KiB, 64 KiB, and an irregular pattern.
fn chunkings(len: usize) -> Vec<Vec<usize>> {
    let mut c = vec![
        vec![usize::MAX],
        vec![7],
        vec![4096],
        vec![65536],
        vec![3, 1, 4, 1, 5, 9, 2, 6, 53, 589, 7],
    ];
    if len < 200_000 {
        c.push(vec![1]);
    }
    c
}

fn check(name: &str, sse: &Path, expected: &Value, correction: Option<&Value>) {
    let body = std::fs::read(sse).unwrap();
    for sizes in chunkings(body.len()) {
        let r = run(&body, &sizes);
        let ctx = format!("{name} chunks {sizes:?}");
        let s = serde_json::to_value(r.task.summary()).unwrap();
        let want = |key: &str| -> Option<Value> {
            correction
                .and_then(|c| c.get(key))
                .or_else(|| expected.get(key))
                .cloned()
        };
        if let Some(ev) = want("events") {
            assert_eq!(Value::Array(r.events.clone()), ev, "{ctx}: events");
        }
        if let Some(n) = want("events_count") {
            assert_eq!(
                r.events.len() as u64,
                n.as_u64().unwrap(),
                "{ctx}: events_count"
            );
        }
        assert_eq!(s["text"], want("text").unwrap(), "{ctx}: text");
        match want("status").unwrap() {
            // "A status of null means no terminal event arrived."
            Value::Null => {
                assert!(!r.task.is_terminal(), "{ctx}: terminal");
                assert_eq!(s["status"], "in_progress", "{ctx}: status");
            }
            st => assert_eq!(s["status"], st, "{ctx}: status"),
        }
        assert_eq!(
            s["tool_calls"],
            want("tool_calls").unwrap(),
            "{ctx}: tool_calls"
        );
        assert_eq!(
            s["annotations"],
            want("annotations").unwrap(),
            "{ctx}: annotations"
        );
        let seq = want("sequence").unwrap();
        assert_eq!(s["sequence"]["ok"], seq[0], "{ctx}: sequence ok");
        assert_eq!(s["sequence"]["missing"], seq[1], "{ctx}: sequence missing");
        if let Some(reasoning) = want("reasoning") {
            assert_eq!(s["reasoning"], reasoning, "{ctx}: reasoning");
        }
        if let Some(error) = want("error") {
            assert_eq!(s["error"], error, "{ctx}: error");
        }
        // Nothing the stream delivered as an event was reported as a finding as well.
        for f in &r.findings {
            assert!(
                matches!(
                    f,
                    Finding::DoneSentinel | Finding::NotObject { .. } | Finding::Sse(_)
                ),
                "{ctx}: unexpected finding {f}"
            );
        }
    }
}

fn cases(dir: &Path) -> Vec<(String, PathBuf, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("sse") {
            let name = p.file_stem().unwrap().to_str().unwrap().to_owned();
            let exp = dir.join(format!("{name}.expected.json"));
            let expected: Value = serde_json::from_slice(&std::fs::read(exp).unwrap()).unwrap();
            out.push((name, p, expected));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn streams_where_the_peer_is_right() {
    let corrections: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("corrections.json")).unwrap())
            .unwrap();
    let cases = cases(&fixtures());
    assert!(cases.len() >= 17, "fixtures missing");
    for (name, sse, expected) in cases {
        check(&name, &sse, &expected, corrections.get(&name));
    }
}

#[test]
fn streams_where_the_peer_is_wrong() {
    let cases = cases(&fixtures().join("peer_wrong"));
    assert!(cases.len() >= 9, "fixtures missing");
    for (name, sse, expected) in cases {
        check(&name, &sse, &expected, None);
    }
}
