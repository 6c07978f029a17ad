//! Properties: any chunking gives the same task; arbitrary bytes never panic; the text is
//! the terminal text whenever a terminal response carries one; encode → decode round-trips.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{run, run_chunked, sse};
use harness_uhp::builder::StreamBuilder;
use harness_uhp::{StreamDecoder, StreamEvent, TaskAccumulator};
use proptest::prelude::*;
use serde_json::Value;

fn small_fixtures() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams");
    let mut out = Vec::new();
    for d in [dir.clone(), dir.join("peer_wrong")] {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sse")
                && std::fs::metadata(&p).unwrap().len() < 100_000
            {
                out.push(std::fs::read(p).unwrap());
            }
        }
    }
    out.sort();
    out
}

fn outcome(r: &common::Run) -> (Value, Vec<String>, Vec<String>) {
    (
        serde_json::to_value(r.task.summary()).unwrap(),
        r.events.iter().map(|e| e.raw_json().to_owned()).collect(),
        r.findings.iter().map(ToString::to_string).collect(),
    )
}

/// A task built from arbitrary text, then mangled: events dropped, replayed, swapped.
fn task_stream() -> impl Strategy<Value = (Vec<Value>, bool)> {
    (
        prop::collection::vec("[a-zé東🚀 \"\\\\\n\t]{0,6}", 0..12),
        prop::collection::vec("[a-z{}\":]{0,4}", 0..4),
        prop::collection::vec((0usize..64, 0u8..4), 0..6),
        any::<bool>(),
    )
        .prop_map(|(deltas, args, edits, end)| {
            let mut b = StreamBuilder::new("resp_p");
            b.created();
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            b.tool_call("call_p", "tool", &a);
            let d: Vec<&str> = deltas.iter().map(String::as_str).collect();
            b.message(&d, &[]);
            if end {
                b.completed();
            }
            let mut events = b.events().to_vec();
            for (at, op) in edits {
                let i = at % events.len();
                match op {
                    0 => {
                        events.remove(i);
                    }
                    1 => {
                        let e = events[i].clone();
                        events.insert(i, e);
                    }
                    2 if i + 1 < events.len() => events.swap(i, i + 1),
                    _ => {}
                }
                if events.is_empty() {
                    break;
                }
            }
            (events, end)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Any chunking of any fixture stream gives the same events, findings and task.
    #[test]
    fn any_chunking_of_a_fixture_gives_the_same_task(
        pick in any::<prop::sample::Index>(),
        sizes in prop::collection::vec(1usize..300, 1..8),
    ) {
        let fixtures = small_fixtures();
        let body = &fixtures[pick.index(fixtures.len())];
        prop_assert_eq!(outcome(&run_chunked(body, &sizes)), outcome(&run(body)));
    }

    /// Any chunking of any (mangled) generated stream gives the same task.
    #[test]
    fn any_chunking_of_a_generated_stream((events, _) in task_stream(), sizes in prop::collection::vec(1usize..64, 1..6)) {
        let body = sse(&events);
        prop_assert_eq!(outcome(&run_chunked(&body, &sizes)), outcome(&run(&body)));
    }

    /// The accumulator's text equals the terminal response's text whenever a terminal
    /// response (with text) is present, whatever happened to the deltas.
    #[test]
    fn text_is_the_terminal_text((events, _) in task_stream()) {
        let r = run(&sse(&events));
        if let Some(resp) = r.task.response() {
            let t = resp.output_text();
            if !t.is_empty() {
                prop_assert_eq!(r.task.text().into_owned(), t);
            }
        }
    }

    /// Unmangled: the text is the concatenated deltas, with or without a terminal event, and
    /// the sequence is ok.
    #[test]
    fn unmangled_stream(deltas in prop::collection::vec("[a-zé🚀 \"\\\\\n]{0,6}", 0..12), end in any::<bool>()) {
        let mut b = StreamBuilder::new("resp_q");
        b.created();
        b.message_start();
        for d in &deltas {
            b.message_delta(d);
        }
        if end {
            b.message_end(&[]).completed();
        }
        let r = run(&b.to_sse());
        prop_assert_eq!(r.task.text().into_owned(), deltas.concat());
        prop_assert!(r.task.sequence().ok);
        prop_assert_eq!(r.task.is_terminal(), end);
        prop_assert!(r.task.findings().is_empty());
    }

    /// Deltas of two interleaved parts, delivered in any order (some replayed): each part's
    /// text is its deltas in sequence_number order, each once.
    #[test]
    fn deltas_in_any_order(
        parts in prop::collection::vec((0u64..2, "[a-z]{1,3}"), 1..24),
        order in any::<prop::sample::Index>(),
        replays in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let mut events: Vec<(u64, Value)> = parts.iter().enumerate().map(|(i, (p, d))| {
            let seq = i as u64 + 1;
            (seq, serde_json::json!({"type": "response.output_text.delta", "sequence_number": seq,
                "output_index": p, "content_index": 0, "delta": d}))
        }).collect();
        // A deterministic shuffle driven by `order`, then some replays.
        let n = events.len();
        let k = order.index(n.max(1));
        events.rotate_left(k);
        for i in (1..n).step_by(3) {
            events.swap(i - 1, i);
        }
        for r in &replays {
            let e = events[r.index(n)].clone();
            events.push(e);
        }
        let mut body = vec![common::created(0)];
        body.extend(events.into_iter().map(|(_, v)| v));
        let r = run(&sse(&body));
        let want: String = [0u64, 1]
            .iter()
            .flat_map(|p| parts.iter().filter(move |(q, _)| q == p).map(|(_, d)| d.as_str()))
            .collect();
        prop_assert_eq!(r.task.text().into_owned(), want);
    }

    /// Encode → decode: the builder's events come back exactly.
    #[test]
    fn encode_decode_round_trip((events, _) in task_stream()) {
        let r = run(&sse(&events));
        let back: Vec<Value> = r.events.iter().map(StreamEvent::to_value).collect();
        prop_assert_eq!(back, events);
        prop_assert!(r.findings.is_empty());
    }

    /// Arbitrary bytes never panic, and their chunking does not matter either.
    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..600), split in 1usize..50) {
        let a = run(&body);
        let b = run_chunked(&body, &[split]);
        prop_assert_eq!(outcome(&a), outcome(&b));
    }

    /// Arbitrary SSE-shaped data lines with JSON-ish payloads never panic.
    #[test]
    fn arbitrary_json_payloads_never_panic(lines in prop::collection::vec("[\\[\\]{}\":,0-9a-z_. -]{0,40}", 0..20)) {
        let mut dec = StreamDecoder::new();
        let mut task = TaskAccumulator::new();
        for l in &lines {
            dec.push(format!("data: {{\"type\":\"response.output_text.delta\",{l}\n\n").as_bytes());
            dec.push(format!("data: {l}\n\n").as_bytes());
        }
        loop {
            match dec.poll_event() {
                Ok(Some(ev)) => {
                    let _ = ev.kind();
                    task.add(&ev);
                }
                Ok(None) => break,
                Err(f) => task.add_finding(&f),
            }
        }
        let _ = task.summary();
    }
}

/// Decodes `body` in place with `StreamDecoder::feed` in chunks of the given sizes (cycled):
/// owned events, lent events (cloned as they come), or straight into the task with
/// `TaskAccumulator::feed`, as `mode` says. Then `finish_decoder`.
fn run_fed(body: &[u8], sizes: &[usize], mode: u8) -> common::Run {
    let mut dec = StreamDecoder::new();
    let mut r = common::Run {
        events: Vec::new(),
        findings: Vec::new(),
        task: TaskAccumulator::new(),
    };
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        let chunk = &rest[..n];
        rest = &rest[n..];
        i += 1;
        match mode % 3 {
            0 => {
                for ev in dec.feed(chunk) {
                    match ev {
                        Ok(ev) => {
                            r.task.add(&ev);
                            r.events.push(ev);
                        }
                        Err(f) => {
                            r.task.add_finding(&f);
                            r.findings.push(f);
                        }
                    }
                }
            }
            1 => {
                let mut feed = dec.feed(chunk);
                while let Some(ev) = feed.next_ref() {
                    match ev {
                        Ok(ev) => {
                            r.task.add_ref(ev);
                            r.events.push(ev.to_event());
                        }
                        Err(f) => {
                            r.task.add_finding(&f);
                            r.findings.push(f);
                        }
                    }
                }
            }
            _ => r.task.feed(&mut dec, chunk),
        }
    }
    let end = dec.finish();
    loop {
        match dec.poll_event() {
            Ok(Some(ev)) => {
                r.task.add(&ev);
                r.events.push(ev);
            }
            Ok(None) => break,
            Err(f) => {
                r.task.add_finding(&f);
                r.findings.push(f);
            }
        }
    }
    if let Err(f) = end {
        r.task.add_finding(&f);
        r.findings.push(f);
    }
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Decoding in place (owned, lent, or into the task) gives the events, findings and
    /// task of push-then-poll, under any chunking of any fixture.
    #[test]
    fn feeding_a_fixture_in_place_gives_the_same_task(
        pick in any::<prop::sample::Index>(),
        sizes in prop::collection::vec(1usize..300, 1..8),
        mode in 0u8..3,
    ) {
        let fixtures = small_fixtures();
        let body = &fixtures[pick.index(fixtures.len())];
        let fed = run_fed(body, &sizes, mode);
        let want = outcome(&run(body));
        prop_assert_eq!(&serde_json::to_value(fed.task.summary()).unwrap(), &want.0);
        if mode != 2 {
            prop_assert_eq!(outcome(&fed), want);
        }
    }

    /// The same over arbitrary bytes (which never panic).
    #[test]
    fn feeding_arbitrary_bytes_in_place(body in prop::collection::vec(any::<u8>(), 0..600), split in 1usize..50, mode in 0u8..3) {
        let fed = run_fed(&body, &[split], mode);
        let want = outcome(&run(&body));
        prop_assert_eq!(&serde_json::to_value(fed.task.summary()).unwrap(), &want.0);
        if mode != 2 {
            prop_assert_eq!(outcome(&fed), want);
        }
    }
}

/// The events of `body` fed in chunks of `sizes` (cycled), each lent by
/// `StreamFeed::next_ref` and compared, field by field, with the owned event the same feed
/// gives as an iterator (a second decoder fed the same chunks); findings likewise.
fn lent_matches_owned(body: &[u8], sizes: &[usize]) -> Result<usize, TestCaseError> {
    let (mut lent_dec, mut owned_dec) = (StreamDecoder::new(), StreamDecoder::new());
    let (mut rest, mut i, mut n) = (body, 0, 0);
    while !rest.is_empty() {
        let k = sizes[i % sizes.len()].clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(k);
        rest = tail;
        i += 1;
        let mut owned = owned_dec.feed(chunk);
        let mut lent = lent_dec.feed(chunk);
        while let Some(ev) = lent.next_ref() {
            let want = owned.next();
            match (ev, want) {
                (Ok(ev), Some(Ok(want))) => {
                    prop_assert_eq!(ev, want.view());
                    prop_assert_eq!(ev.kind(), want.kind());
                    prop_assert_eq!(&ev.to_event(), &want);
                    n += 1;
                }
                (Err(f), Some(Err(g))) => prop_assert_eq!(f, g),
                (ev, want) => prop_assert!(false, "lent {:?}, owned {:?}", ev, want),
            }
        }
        prop_assert!(owned.next().is_none());
    }
    Ok(n)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// A lent event (its text borrowed from the fed bytes, or decoded the serde way) is the
    /// owned event, for any fixture under any chunking.
    #[test]
    fn a_lent_event_is_the_owned_event(
        pick in any::<prop::sample::Index>(),
        sizes in prop::collection::vec(1usize..300, 1..8),
    ) {
        let fixtures = small_fixtures();
        lent_matches_owned(&fixtures[pick.index(fixtures.len())], &sizes)?;
    }

    /// The same over built streams of arbitrary text (escapes, non-ASCII), whose done and
    /// terminal events nest it.
    #[test]
    fn a_lent_event_of_any_text_is_the_owned_event(
        deltas in prop::collection::vec("[a-zé東🚀 \"\\\\\n\t\u{1}/]{0,8}", 1..12),
        sizes in prop::collection::vec(1usize..200, 1..6),
    ) {
        let mut b = StreamBuilder::new("resp_1");
        b.created();
        b.message_start();
        for d in &deltas {
            b.message_delta(d);
        }
        b.message_end(&[]);
        b.completed();
        let n = lent_matches_owned(&b.to_sse(), &sizes)?;
        prop_assert_eq!(n, b.len());
    }
}
