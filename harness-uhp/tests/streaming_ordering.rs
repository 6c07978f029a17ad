//! streaming.md §3 "Ordering guarantees" (spec/uhp-2026-08-11), in the task accumulator and the
//! sequence check: `response.created` first, `sequence_number` 0, 1, 2 … without gaps, duplicates
//! or reordering, deltas joined in that order; each broken rule a bounded finding. Quotes: [spec]
//! is spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{created, delta, response, run, sse};
use harness_uhp::{ProtocolFinding, ResponseStatus, SequenceCheck, TaskAccumulator};
use serde_json::json;

/// Before a terminal event the text is the deltas, in `sequence_number` order; [S] "Text
/// deltas MUST be concatenated in sequence_number order".
#[test]
fn deltas_are_joined_in_sequence_number_order() {
    let body = sse(&[
        created(0),
        delta(1, "a"),
        delta(3, "c"),
        delta(2, "b"),
        delta(4, "d"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "abcd");
    let seq = r.task.sequence();
    assert_eq!(seq.out_of_order, vec![2]);
    assert!(seq.missing.is_empty() && seq.duplicates.is_empty() && !seq.ok);
    assert_eq!(r.task.status(), &ResponseStatus::InProgress);
    assert!(!r.task.is_terminal());
}

/// A replayed delta (same `sequence_number`) is counted once, and reported as a duplicate.
#[test]
fn a_replayed_delta_is_counted_once() {
    let body = sse(&[
        created(0),
        delta(1, "a"),
        delta(2, "b"),
        delta(2, "b"),
        delta(3, "c"),
        delta(1, "a"),
    ]);
    let r = run(&body);
    assert_eq!(r.task.text(), "abc");
    assert_eq!(r.task.sequence().duplicates, vec![2, 1]);
    assert!(r.task.sequence().missing.is_empty());
}

/// [S] "First event response.created".
#[test]
fn first_event_must_be_created() {
    let r = run(&sse(&[delta(0, "x")]));
    assert!(matches!(
        r.task.findings()[0],
        ProtocolFinding::FirstEventNotCreated { .. }
    ));
    // Not after a resume: the stream starts wherever the server resumed.
    let mut task = TaskAccumulator::resumed_after(9);
    let ev = harness_uhp::StreamEvent::parse(delta(10, "x").to_string()).unwrap();
    task.add(&ev);
    assert!(task.findings().is_empty());
    assert!(task.sequence().ok);
}

/// [S] "Every event MUST carry type and sequence_number (integer ≥0)".
#[test]
fn events_without_a_valid_number_are_reported() {
    let mut e = delta(1, "x");
    e.as_object_mut().unwrap().remove("sequence_number");
    let r = run(&sse(&[created(0), e, delta(2, "y")]));
    assert_eq!(r.task.text(), "xy");
    assert_eq!(r.task.sequence().unnumbered, 1);
    assert!(!r.task.sequence().ok);
    assert!(matches!(
        r.task.findings()[0],
        ProtocolFinding::Unnumbered { .. }
    ));
}

/// The sequence check: missing, duplicates and out-of-order reported separately.
#[test]
fn sequence_check_reports_each_kind_separately() {
    let mut s = SequenceCheck::new();
    for n in [0, 1, 3, 3, 6, 2, 9] {
        s.record(Some(n));
    }
    let r = s.report();
    assert!(!r.ok);
    assert_eq!(r.missing, vec![4..=5, 7..=8]);
    assert_eq!(r.duplicates, vec![3]);
    assert_eq!(r.out_of_order, vec![2]);
    assert_eq!(r.missing_count(), 4);
    assert_eq!(r.missing_numbers().collect::<Vec<_>>(), vec![4, 5, 7, 8]);
    assert_eq!(s.last_seen(), Some(9));
}

/// [S] "`seqs == list(range(len(seqs)))`" — ok exactly when the numbers are 0, 1, 2, ….
#[test]
fn sequence_ok_is_the_conformance_check() {
    for (seqs, ok) in [
        (vec![0, 1, 2], true),
        (vec![], true),
        (vec![1, 2], false),
        (vec![0, 2], false),
        (vec![0, 1, 1, 2], false),
        (vec![0, 2, 1, 3], false),
    ] {
        let mut s = SequenceCheck::new();
        for n in &seqs {
            s.record(Some(*n));
        }
        let conformance = seqs.iter().enumerate().all(|(i, n)| *n == i as u64);
        assert_eq!(s.report().ok, ok, "{seqs:?}");
        assert_eq!(s.report().ok, conformance, "{seqs:?}");
    }
}

/// Linear, not O(max sequence number): `[0, 5000000]` is one missing range, checked at once;
/// a million events take well under a second.
#[test]
fn sequence_check_is_linear_in_the_events() {
    let mut s = SequenceCheck::new();
    s.record(Some(0));
    s.record(Some(5_000_000));
    assert_eq!(s.report().missing, vec![1..=4_999_999]);
    s.record(Some(u64::MAX));
    s.record(Some(u64::MAX));
    assert_eq!(s.report().duplicates, vec![u64::MAX]);

    let start = Instant::now();
    let mut s = SequenceCheck::new();
    for n in 0..1_000_000u64 {
        // every 1000th number arrives one place late
        let n = if n % 1000 == 1 {
            n + 1
        } else if n % 1000 == 2 {
            n - 1
        } else {
            n
        };
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.out_of_order.len(), 1000);
    assert!(r.missing.is_empty());
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// Memory bounds: a replaying proxy can send the same event forever. The replays add no
/// content, so they must not add memory either: the duplicate and out-of-order numbers are
/// listed up to `MAX_LISTED` each and counted beyond, and the check stays exact (`ok` is
/// false, the counts are right).
#[test]
fn replays_are_counted_not_hoarded() {
    use harness_uhp::sequence::MAX_LISTED;
    let mut s = SequenceCheck::new();
    s.record(Some(0));
    s.record(Some(3));
    for _ in 0..100_000 {
        s.record(Some(0));
    }
    for n in [2, 1] {
        s.record(Some(n));
    }
    let r = s.report();
    assert_eq!(r.duplicates.len(), MAX_LISTED);
    assert_eq!(r.duplicate_count, 100_000);
    assert_eq!(
        (r.out_of_order.clone(), r.out_of_order_count),
        (vec![2, 1], 2)
    );
    assert!(!r.ok && r.missing.is_empty());
    let summary = harness_uhp::SequenceSummary::from(&r);
    assert_eq!(summary.duplicates.len(), MAX_LISTED);
    assert_eq!(summary.duplicate_count, 100_000);
}

/// Memory bounds: findings are kept (up to `MAX_FINDINGS`), so what each keeps of the
/// peer's bytes is bounded too. An event type, a status or a decoder message that repeats
/// a megabyte of the payload is cut to an excerpt: 1024 such findings cannot pin a
/// gigabyte of a hostile stream.
#[test]
fn findings_keep_bounded_excerpts_of_the_payload() {
    let big = "x".repeat(1 << 20);
    let mut resp = response("completed", "ok");
    resp["status"] = json!(big.clone());
    let mut unnumbered = json!({"type": big.clone()});
    unnumbered["note"] = json!(1);
    let r = run(&sse(&[
        json!({"type": big.clone(), "sequence_number": 0}), // first event not `created`
        unnumbered,
        json!({"type": "response.completed", "sequence_number": 2, "response": resp}),
        json!({"type": big.clone(), "sequence_number": 3}), // after the terminal event
        // A known type with a megabyte where an integer belongs: the decoder's message.
        json!({"type": "response.output_text.delta", "sequence_number": 4,
               "output_index": big.clone(), "delta": "d"}),
    ]));
    assert_eq!(r.task.status().as_str(), big); // the task itself keeps what it was told
    let kinds: Vec<_> = r
        .task
        .findings()
        .iter()
        .map(std::mem::discriminant)
        .collect();
    assert!(kinds.len() >= 4, "{:?}", r.task.findings());
    for f in r.task.findings() {
        let shown = f.to_string();
        assert!(shown.len() < 2048, "a finding of {} bytes", shown.len());
        assert!(format!("{f:?}").len() < 2048);
    }
    for f in &r.findings {
        assert!(
            f.to_string().len() < 2048,
            "a decoder finding of {} bytes",
            f.to_string().len()
        );
    }
}
