//! Property tests of `NdjsonFeed::values` (one deserializer kept across the lines of a
//! feed) against the per-line reference: a value spread over lines (JSON whitespace holding
//! a LF, which serde_json skips), a blank or whitespace-led line, a CRLF, trailing spaces, a
//! line over the limit or a line that does not parse must each come out exactly as `push` +
//! `poll` reports it: the same values, the same errors (serde_json's own messages) and the
//! same line numbers, under any chunking, in long runs of good lines, and when the iterator
//! is dropped halfway and the feed finished another way. Any reader that parses ahead of
//! the line ends (a kept deserializer, or values parsed a window of lines ahead and checked
//! afterwards) must pass these. The stdio transport carries "one JSON object per line"
//! (tanstack-harness-wire-protocol.md:151).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder};
use proptest::prelude::*;

#[path = "support/chunks.rs"]
mod chunks;
use chunks::chunks;
use serde_json::Value;

#[path = "support/ndjson_reference.rs"]
mod ndjson_reference;
use ndjson_reference::{Item, drain, reference};

/// The stream fed in chunks cut at `cuts`, each read with `values`; `stops[i]`, when set,
/// stops the chunk's iterator after that many items, and the rest of the chunk is read by
/// the way `stops[i] % 3` says: a second `values` of the same feed, `next_value`, or the feed
/// dropped (its rest buffered) and polled.
fn fed_values(cfg: NdjsonConfig, bytes: &[u8], cuts: &[usize], stops: &[Option<u8>]) -> Vec<Item> {
    let mut dec = NdjsonDecoder::with_config(cfg);
    let mut out = Vec::new();
    for (i, chunk) in chunks(bytes, cuts).into_iter().enumerate() {
        let mut feed = dec.feed(chunk);
        let stop = stops.get(i).copied().flatten();
        let mut vals = feed.values::<Value>();
        let mut taken = 0;
        while stop.is_none_or(|s| taken < usize::from(s / 3)) {
            let Some(item) = vals.next() else { break };
            out.push(item.map(|v| (vals.line_number(), v)));
            taken += 1;
        }
        drop(vals);
        match stop.map(|s| s % 3) {
            None => {}
            Some(0) => {
                let mut vals = feed.values::<Value>();
                while let Some(item) = vals.next() {
                    out.push(item.map(|v| (vals.line_number(), v)));
                }
            }
            Some(1) => {
                while let Some(item) = feed.next_value::<Value>() {
                    out.push(item.map(|v| (feed.line_number(), v)));
                }
            }
            Some(_) => {
                drop(feed);
                drain(&mut dec, &mut out);
            }
        }
    }
    dec.finish();
    drain(&mut dec, &mut out);
    out
}

/// One line (without its LF) of the kinds a parse-ahead reader must take or refuse, the limit
/// in mind.
fn line(limit: usize) -> impl Strategy<Value = Vec<u8>> {
    let long = move |n: usize| {
        let mut l = b"{\"k\":\"".to_vec();
        l.resize(n.saturating_sub(2).max(6), b'x');
        l.extend_from_slice(b"\"}");
        l
    };
    prop_oneof![
        // Good lines (weighted: long runs of them).
        8 => (0u32..1000).prop_map(|n| format!("{{\"a\":{n},\"t\":\"tok\"}}").into_bytes()),
        3 => (0u32..1000).prop_map(|n| format!("[{n},\"x\",{{\"b\":null}}]").into_bytes()),
        1 => Just(b"{\"a\": 1, \"b\": [1, 2]}".to_vec()), // spaces inside: still one line
        1 => Just(b"7".to_vec()),
        1 => Just(b"\"s\\n\"".to_vec()),
        1 => Just(b"true".to_vec()),
        // A LF inside the JSON whitespace of a value: two bad lines, never one value.
        1 => Just(b"{\"a\":\n1}".to_vec()),
        1 => Just(b"[1,\n2]".to_vec()),
        1 => Just(b"{\"a\":\r\n1}".to_vec()),
        1 => Just(b"{\n}".to_vec()),
        // Blank, whitespace-led, CRLF-ended, trailing whitespace.
        1 => Just(Vec::new()),
        1 => Just(b"  \t".to_vec()),
        1 => Just(b" {\"a\":1}".to_vec()),
        1 => Just(b"\r{\"a\":1}".to_vec()),
        2 => Just(b"{\"a\":1}\r".to_vec()),
        1 => Just(b"[2]\r\r".to_vec()),
        1 => Just(b"{\"a\":1}  ".to_vec()),
        1 => Just(b"{\"a\":1}\t\r".to_vec()),
        // Lines at, and one past, the limit (with and without a CR).
        1 => Just(long(limit)),
        1 => Just(long(limit + 1)),
        1 => Just([long(limit), b"\r".to_vec()].concat()),
        // Not valid JSON, two values, trailing garbage, a BOM.
        1 => Just(b"{oops".to_vec()),
        1 => Just(b"]".to_vec()),
        1 => Just(b"{\"a\":1}x".to_vec()),
        1 => Just(b"{\"a\":1} {\"b\":2}".to_vec()),
        1 => Just(b"\xEF\xBB\xBF{\"bom\":1}".to_vec()),
        1 => Just(b"{\"a\":\"\xFF\"}".to_vec()),
    ]
}

/// A stream of such lines, LF-separated, with or without a last LF.
fn stream() -> impl Strategy<Value = (NdjsonConfig, Vec<u8>)> {
    prop_oneof![Just(16usize << 20), 20usize..48]
        .prop_flat_map(|limit| {
            (
                Just(limit),
                prop::collection::vec(line(limit.min(64)), 0..160),
                any::<bool>(),
            )
        })
        .prop_map(|(limit, lines, last_lf)| {
            let mut bytes = lines.join(&b'\n');
            if last_lf {
                bytes.push(b'\n');
            }
            (
                NdjsonConfig {
                    max_line_bytes: limit,
                },
                bytes,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// Any chunking, any stop: exactly push + poll.
    #[test]
    fn values_equal_push_then_poll((cfg, bytes) in stream(), cuts in prop::collection::vec(any::<usize>(), 0..10), stops in prop::collection::vec(prop::option::of(any::<u8>()), 0..11)) {
        let want = reference(cfg, &bytes);
        prop_assert_eq!(&want, &fed_values(cfg, &bytes, &cuts, &stops));
        // The whole stream in one feed: the longest runs, read whole, then stopped halfway
        // and finished each way.
        prop_assert_eq!(&want, &fed_values(cfg, &bytes, &[], &[]));
        prop_assert_eq!(&want, &fed_values(cfg, &bytes, &[], &stops[..stops.len().min(1)]));
    }
}

/// A bad line of each kind amid 80 good ones (a value with a LF inside is caught however far
/// into a run of good lines it is), at many splits of the stream, with every way to finish a
/// stopped feed.
#[test]
fn a_value_holding_a_lf_deep_in_a_run_is_two_bad_lines() {
    // 40 lines of 50 bytes on each side (runs of many lines past 1 KiB).
    let good: String = (0..40)
        .map(|i| format!("{{\"n\":{i:2},\"pad\":\"{}\"}}\n", "x".repeat(33)))
        .collect();
    let cases = [
        format!("{good}{{\"a\":\n1}}\n{good}"),
        format!("{good}[1,\r\n2]\r\n{good}"),
        format!("{good}{{\"a\":1}}\n\n{good}"),
        format!("{good} [1]\n{good}"),
        format!("{good}{{\"a\":1}}  \n{good}"),
        format!("{good}{{\"a\":1}}\r\n{good}"),
        format!("{good}{{oops\n{good}"),
    ];
    for (i, case) in cases.iter().enumerate() {
        let bytes = case.as_bytes();
        for limit in [16usize << 20, 49, 50] {
            let cfg = NdjsonConfig {
                max_line_bytes: limit,
            };
            let want = reference(cfg, bytes);
            assert_eq!(
                want,
                fed_values(cfg, bytes, &[], &[]),
                "case {i}, limit {limit}"
            );
            for split in (0..=bytes.len()).step_by(13) {
                // 6 values from each feed, then the rest by `values`, `next_value`, a poll.
                for stop in [18, 19, 20] {
                    assert_eq!(
                        want,
                        fed_values(cfg, bytes, &[split], &[Some(stop), Some(stop)]),
                        "case {i}, limit {limit}, split at {split}, stop {stop}"
                    );
                }
            }
        }
    }
}

/// A feed that starts inside a held line (the buffer holds its start) never parses from its
/// first byte as from a line start: `1` held and `2345` fed are the line `12345`, not 2345.
#[test]
fn a_feed_inside_a_held_line_never_parses_from_its_first_byte() {
    let good: String = (0..30)
        .map(|i| format!("{{\"n\":{i:2},\"pad\":\"{}\"}}\n", "x".repeat(33)))
        .collect();
    let bytes = format!("{good}12345\n[1]\n{good}").into_bytes();
    let cfg = NdjsonConfig::default();
    let want = reference(cfg, &bytes);
    for split in good.len()..good.len() + 10 {
        assert_eq!(
            want,
            fed_values(cfg, &bytes, &[split], &[]),
            "split at {split}"
        );
    }
}
