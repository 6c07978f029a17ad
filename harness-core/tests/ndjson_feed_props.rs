//! Property tests of NDJSON's in-place path (`NdjsonDecoder::feed`): lines and parsed values,
//! mixed with `push`/`poll` and with feeds dropped half-read, are exactly those of `push`
//! then `poll`, under any chunking and any limit; a bad line stays that line's error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder, NdjsonError};
use proptest::prelude::*;

#[path = "support/chunks.rs"]
mod chunks;
use chunks::chunks;
use serde_json::Value;

#[path = "support/ndjson_reference.rs"]
mod ndjson_reference;
use ndjson_reference::{Item, drain, reference};

/// Each chunk pushed and polled, fed as values, fed as raw lines, fed and dropped after at
/// most one value, or fed behind unpolled pushed bytes, as `modes` says.
fn mixed(cfg: NdjsonConfig, bytes: &[u8], cuts: &[usize], modes: &[u8]) -> Vec<Item> {
    let mut dec = NdjsonDecoder::with_config(cfg);
    let mut out = Vec::new();
    let values = |feed: &mut harness_core::ndjson::NdjsonFeed<'_, '_>, out: &mut Vec<Item>| {
        loop {
            let item = match feed.next_value::<Value>() {
                None => break,
                Some(r) => r,
            };
            out.push(item.map(|v| (feed.line_number(), v)));
        }
    };
    for (i, chunk) in chunks(bytes, cuts).into_iter().enumerate() {
        match modes.get(i).copied().unwrap_or(0) % 6 {
            0 => {
                dec.push(chunk);
                drain(&mut dec, &mut out);
            }
            1 => values(&mut dec.feed(chunk), &mut out),
            2 => {
                let mut feed = dec.feed(chunk);
                while let Some(line) = feed.next_line() {
                    let item = line.map(|l| serde_json::from_slice::<Value>(l).ok());
                    match item {
                        Ok(Some(v)) => out.push(Ok((feed.line_number(), v))),
                        Ok(None) => out.push(Err(NdjsonError::Json {
                            line: feed.line_number(),
                            message: String::new(),
                        })),
                        Err(e) => out.push(Err(e)),
                    }
                }
            }
            3 => {
                let mut feed = dec.feed(chunk);
                if let Some(item) = feed.next_value::<Value>() {
                    out.push(item.map(|v| (feed.line_number(), v)));
                }
                drop(feed);
                drain(&mut dec, &mut out);
            }
            4 => {
                let (a, b) = chunk.split_at(chunk.len() / 2);
                dec.push(a);
                values(&mut dec.feed(b), &mut out);
            }
            // Owned values with one deserializer kept across lines (`values`), stopped after
            // at most `modes[i] / 6 % 4` values, the rest read by a second `values` of the same
            // feed (whose deserializer starts afresh).
            _ => {
                let mut feed = dec.feed(chunk);
                let first = usize::from(modes.get(i).copied().unwrap_or(0) / 6 % 4);
                let mut vals = feed.values::<Value>();
                for _ in 0..first {
                    let Some(item) = vals.next() else { break };
                    out.push(item.map(|v| (vals.line_number(), v)));
                }
                let mut vals = feed.values::<Value>();
                while let Some(item) = vals.next() {
                    out.push(item.map(|v| (vals.line_number(), v)));
                }
            }
        }
    }
    dec.finish();
    drain(&mut dec, &mut out);
    out
}

/// Mode 2 reads raw lines and cannot know serde's message: compare errors by kind and line.
fn normalize(items: Vec<Item>) -> Vec<Item> {
    items
        .into_iter()
        .map(|i| match i {
            Err(NdjsonError::Json { line, .. }) => Err(NdjsonError::Json {
                line,
                message: String::new(),
            }),
            other => other,
        })
        .collect()
}

fn ndjson_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"{\"a\":1}".to_vec()),
        Just(b"[1,\"x\"]".to_vec()),
        Just(b"\"s\\n\"".to_vec()),
        Just(b"{oops".to_vec()),
        Just(b"[1,\n2]".to_vec()), // JSON whitespace holding a line end: two bad lines
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b" \t".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\xFF".to_vec()),
        "[a-z0-9{}\":,]{0,12}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..50).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn feed_equals_push_then_poll(bytes in ndjson_like(), cuts in prop::collection::vec(any::<usize>(), 0..12), modes in prop::collection::vec(any::<u8>(), 0..13), limit in prop_oneof![Just(16usize << 20), 0usize..24]) {
        let cfg = NdjsonConfig { max_line_bytes: limit };
        let want = normalize(reference(cfg, &bytes));
        prop_assert_eq!(&want, &normalize(mixed(cfg, &bytes, &cuts, &modes)));
        let singles: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(&want, &normalize(mixed(cfg, &bytes, &singles, &modes)));
    }

    #[test]
    fn feed_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512), cuts in prop::collection::vec(any::<usize>(), 0..8), modes in prop::collection::vec(any::<u8>(), 0..9)) {
        let cfg = NdjsonConfig { max_line_bytes: 40 };
        prop_assert_eq!(normalize(reference(cfg, &bytes)), normalize(mixed(cfg, &bytes, &cuts, &modes)));
    }

    /// Fed and drained, the decoder keeps only an incomplete line, bounded by the limit (and
    /// a CR or a first line's BOM).
    #[test]
    fn feed_keeps_only_the_incomplete_tail(bytes in prop::collection::vec(prop_oneof![Just(b'x'), Just(b'\n'), Just(b'1'), Just(b'\r')], 0..4096), chunk in 1usize..300) {
        let cfg = NdjsonConfig { max_line_bytes: 24 };
        let mut dec = NdjsonDecoder::with_config(cfg);
        for c in bytes.chunks(chunk) {
            let mut feed = dec.feed(c);
            while feed.next_line().is_some() {}
            drop(feed);
            prop_assert!(dec.buffered_bytes() <= cfg.max_line_bytes + 1 + 3);
            prop_assert!(!c.ends_with(b"\n") || dec.buffered_bytes() == 0);
        }
    }
}

/// The one-pass parse of `next_value` (a value parsed before its line end is found) agrees
/// with the framing path on every line it could get wrong: two values on a line, trailing
/// garbage, trailing whitespace and CRs, a value spread over two lines, a valid line past the limit, a line cut by the end
/// of the push, a value of the wrong type.
#[test]
fn one_pass_values_agree_with_framing_on_edge_lines() {
    let cases: &[&[u8]] = &[
        b"{\"a\":1} {\"b\":2}\n{\"c\":3}\n",
        b"{\"a\":1}x\n[1]\n",
        b"{\"a\":1}  \t\r\r\n[2] \n",
        b"{\"a\":\"0123456789012345678901234567890123456789\"}\n{}\n",
        b"[1,2]\n{\"a\":",
        b"{\"a\":[1,{\"b\":\"\\n\"}]}\r\n\n  \n{\"z\":null}\n",
        b"{\"a\":1}\n\"str\"\n7\n[]\n",
        // A value whose whitespace holds a line end is two bad lines, not one value
        // (every value of NDJSON is on its own line).
        b"{\"a\":\n1}\n[2]\n",
        b"[1,\r\n2] \n{}\n",
        b"{\n}\n",
    ];
    for (i, bytes) in cases.iter().enumerate() {
        for limit in [16usize << 20, 24] {
            let cfg = NdjsonConfig {
                max_line_bytes: limit,
            };
            for split in 0..=bytes.len() {
                assert_eq!(
                    reference(cfg, bytes),
                    mixed(cfg, bytes, &[split], &[1, 1]),
                    "case {i}, limit {limit}, split at {split}"
                );
                // `values`, its deserializer kept across the lines (5, 5: read whole).
                assert_eq!(
                    reference(cfg, bytes),
                    mixed(cfg, bytes, &[split], &[5, 5]),
                    "values: case {i}, limit {limit}, split at {split}"
                );
            }
        }
    }
    // A typed value: the wrong shape is that line's error, with serde_json's own message.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Frame {
        n: u64,
    }
    let mut dec = NdjsonDecoder::new();
    let mut feed = dec.feed(b"{\"n\":1}\n{\"n\":\"x\"}\n{\"n\":3}\n");
    assert_eq!(feed.next_value::<Frame>().unwrap().unwrap(), Frame { n: 1 });
    match feed.next_value::<Frame>().unwrap() {
        Err(NdjsonError::Json { line: 2, message }) => assert!(message.contains("invalid type")),
        other => panic!("{other:?}"),
    }
    assert_eq!(feed.next_value::<Frame>().unwrap().unwrap(), Frame { n: 3 });
    assert!(feed.next_value::<Frame>().is_none());
}

/// After `finish`, an unterminated buffered rest is a line of its own: a feed then gives the
/// same lines as polls then a push (the in-place paths do not complete it from the fed bytes).
#[test]
fn a_feed_after_finish_equals_a_push_after_finish() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"{\"a\":1}\n{\"b\"", b":2}\n[3]\n"),
        (b"[1", b"]\n"),
        (b"{\"a\":1}\r", b"\n{}\n"),
        (b"", b"{}\n[1]"),
    ];
    for (i, (first, second)) in cases.iter().enumerate() {
        let mut pushed = NdjsonDecoder::new();
        let mut want = Vec::new();
        pushed.push(first);
        drain(&mut pushed, &mut want);
        pushed.finish();
        drain(&mut pushed, &mut want);
        pushed.push(second);
        drain(&mut pushed, &mut want);
        for mode in 0..2 {
            let mut fed = NdjsonDecoder::new();
            let mut got = Vec::new();
            let mut read = |fed: &mut NdjsonDecoder, bytes: &[u8]| {
                let mut feed = fed.feed(bytes);
                if mode == 0 {
                    while let Some(item) = feed.next_value::<Value>() {
                        got.push(item.map(|v| (feed.line_number(), v)));
                    }
                } else {
                    let mut vals = feed.values::<Value>();
                    while let Some(item) = vals.next() {
                        got.push(item.map(|v| (vals.line_number(), v)));
                    }
                }
            };
            read(&mut fed, first); // the unterminated rest is held
            fed.finish();
            read(&mut fed, second);
            drain(&mut fed, &mut got);
            assert_eq!(want, got, "case {i}, mode {mode}");
        }
    }
}
