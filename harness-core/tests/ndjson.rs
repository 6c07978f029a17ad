//! NDJSON framing of the stdio transport: partial lines held across pushes, CRLF tolerated,
//! blank lines skipped, bounded line length, a bad line is an error for that line only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::json_value;
use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder, NdjsonEncoder, NdjsonError};
use proptest::prelude::*;
use serde_json::{Value, json};

fn run(cfg: NdjsonConfig, chunks: &[&[u8]]) -> Vec<Result<Value, NdjsonError>> {
    let mut dec = NdjsonDecoder::with_config(cfg);
    let mut out = Vec::new();
    let drain = |dec: &mut NdjsonDecoder, out: &mut Vec<_>| loop {
        match dec.poll::<Value>() {
            Ok(Some(v)) => out.push(Ok(v)),
            Ok(None) => break,
            Err(e) => out.push(Err(e)),
        }
    };
    for c in chunks {
        dec.push(c);
        drain(&mut dec, &mut out);
    }
    dec.finish();
    drain(&mut dec, &mut out);
    out
}

#[test]
fn partial_lines_are_held_across_pushes() {
    let out = run(
        NdjsonConfig::default(),
        &[b"{\"a\":", b"1}\n{\"b\"", b":2}\n"],
    );
    assert_eq!(out, vec![Ok(json!({"a": 1})), Ok(json!({"b": 2}))]);
}

#[test]
fn crlf_is_tolerated_and_blank_lines_skipped() {
    let out = run(
        NdjsonConfig::default(),
        &[b"\n\r\n{\"a\":1}\r\n  \t\n\r\n{\"b\":2}\r", b"\n\n"],
    );
    assert_eq!(out, vec![Ok(json!({"a": 1})), Ok(json!({"b": 2}))]);
}

#[test]
fn a_bad_line_is_an_error_for_that_line_only() {
    let out = run(
        NdjsonConfig::default(),
        &[b"{\"a\":1}\n{oops}\n[1,2]\n\"s\"\n{\"b\":2}\n"],
    );
    assert_eq!(out.len(), 5);
    assert_eq!(out[0], Ok(json!({"a": 1})));
    match &out[1] {
        Err(NdjsonError::Json { line, .. }) => assert_eq!(*line, 2),
        other => panic!("{other:?}"),
    }
    // Any JSON value is a line's value; the frame layer decides what it accepts.
    assert_eq!(out[2], Ok(json!([1, 2])));
    assert_eq!(out[4], Ok(json!({"b": 2})));
}

#[test]
fn a_typed_poll_reports_a_wrong_shape_as_that_lines_error() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Frame {
        r#type: String,
    }
    let mut dec = NdjsonDecoder::new();
    dec.push(b"{\"type\":\"harness.ping\"}\n{\"v\":2}\n{\"type\":\"x\"}\n");
    assert_eq!(
        dec.poll::<Frame>().unwrap(),
        Some(Frame {
            r#type: "harness.ping".into()
        })
    );
    let err = dec.poll::<Frame>().unwrap_err();
    assert_eq!(err.line(), 2);
    assert_eq!(dec.poll::<Frame>().unwrap().unwrap().r#type, "x");
}

#[test]
fn line_length_is_bounded_and_the_decoder_goes_on() {
    let cfg = NdjsonConfig { max_line_bytes: 10 };
    let mut wire = b"{\"a\":1}\n{\"long\":\"".to_vec();
    wire.extend(std::iter::repeat_n(b'x', 50));
    wire.extend_from_slice(b"\"}\n{\"b\":2}\n");
    for n in [1, 4, 11, 100] {
        let chunks: Vec<&[u8]> = wire.chunks(n).collect();
        let out = run(cfg, &chunks);
        assert_eq!(
            out,
            vec![
                Ok(json!({"a": 1})),
                Err(NdjsonError::LineTooLong { line: 2, limit: 10 }),
                Ok(json!({"b": 2})),
            ],
            "chunk {n}"
        );
    }
    // An endless line is dropped as it arrives: memory stays bounded.
    let mut dec = NdjsonDecoder::with_config(cfg);
    for _ in 0..100 {
        dec.push(&[b'x'; 1000]);
        while dec.poll::<Value>().is_err() {}
        assert!(dec.buffered_bytes() <= 1000 + 10);
    }
}

#[test]
fn the_last_line_needs_no_lf_once_input_ends() {
    let mut dec = NdjsonDecoder::new();
    dec.push(b"{\"a\":1}");
    assert_eq!(dec.poll::<Value>().unwrap(), None);
    dec.finish();
    assert_eq!(dec.poll::<Value>().unwrap(), Some(json!({"a": 1})));
    assert_eq!(dec.poll::<Value>().unwrap(), None);
}

#[test]
fn encoder_writes_one_value_per_line_even_with_newlines_in_strings() {
    let mut out = Vec::new();
    NdjsonEncoder::encode(&mut out, &json!({"text": "two\nlines\r\n"})).unwrap();
    NdjsonEncoder::encode(&mut out, &json!([1])).unwrap();
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 2);
    assert_eq!(
        run(NdjsonConfig::default(), &[&out]),
        vec![Ok(json!({"text": "two\nlines\r\n"})), Ok(json!([1]))]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_then_decode_round_trips_under_any_chunking(vals in prop::collection::vec(json_value(), 0..10), chunk in 1usize..64) {
        let mut wire = Vec::new();
        for v in &vals {
            NdjsonEncoder::encode(&mut wire, v).unwrap();
        }
        let chunks: Vec<&[u8]> = wire.chunks(chunk).collect();
        let got = run(NdjsonConfig::default(), &chunks);
        prop_assert_eq!(got, vals.into_iter().map(Ok).collect::<Vec<_>>());
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_is_invisible(bytes in prop::collection::vec(any::<u8>(), 0..512), chunk in 1usize..40, limit in 0usize..40) {
        let cfg = NdjsonConfig { max_line_bytes: limit };
        let whole = run(cfg, &[&bytes]);
        let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
        prop_assert_eq!(whole, run(cfg, &chunks));
    }
}

/// `max_line_bytes` is the "longest line accepted, without its line end", and "any split of
/// the same bytes" must give the same lines: a line of exactly the limit ending in CRLF,
/// split between its CR and its LF, was reported `LineTooLong` (the CR counted as the line's).
#[test]
fn a_line_of_exactly_the_limit_is_accepted_when_its_crlf_is_split() {
    let cfg = NdjsonConfig { max_line_bytes: 7 };
    let want = vec![Ok(json!({"a": 1})), Ok(json!({"b": 2}))];
    assert_eq!(run(cfg, &[b"{\"a\":1}\r\n{\"b\":2}\r\n"]), want);
    assert_eq!(run(cfg, &[b"{\"a\":1}\r", b"\n{\"b\":2}\r", b"\n"]), want);
    // One byte more is over the limit, however it is split.
    let cfg = NdjsonConfig { max_line_bytes: 6 };
    for chunks in [&[&b"{\"a\":1}\r"[..], b"\n"][..], &[b"{\"a\":1}", b"\r\n"]] {
        assert_eq!(
            run(cfg, chunks),
            vec![Err(NdjsonError::LineTooLong { line: 1, limit: 6 })]
        );
    }
}

/// RFC 8259 §8.1: "implementations that parse JSON texts MAY ignore the presence of a byte
/// order mark rather than treating it as an error" — and Windows writers put one at the start
/// of a stream (PowerShell 5 `Out-File -Encoding utf8`, .NET's `UTF8Encoding(true)`). On the
/// stdio transport the first frame is `harness.subscribe`: failing it fails every frame
/// after it. One BOM at the start of the stream is skipped, under any chunking (Python's
/// `json.loads` skips it too); a BOM anywhere else is an error for its line, as before.
#[test]
fn one_bom_at_the_start_of_the_stream_is_skipped() {
    let wire = b"\xEF\xBB\xBF{\"a\":1}\n\xEF\xBB\xBF{\"b\":2}\n{\"c\":3}\n";
    for n in 1..wire.len() {
        let chunks: Vec<&[u8]> = wire.chunks(n).collect();
        let out = run(NdjsonConfig { max_line_bytes: 7 }, &chunks);
        assert_eq!(out.len(), 3, "chunk {n}: {out:?}");
        assert_eq!(out[0], Ok(json!({"a": 1})), "chunk {n}");
        // Line 2's BOM is not skipped: its line is 10 bytes, over the limit.
        assert_eq!(
            out[1],
            Err(NdjsonError::LineTooLong { line: 2, limit: 7 }),
            "chunk {n}"
        );
        assert_eq!(out[2], Ok(json!({"c": 3})), "chunk {n}");
    }
    // Without the limit, a BOM not at the start is that line's JSON error.
    let out = run(NdjsonConfig::default(), &[&wire[..]]);
    assert!(
        matches!(out[1], Err(NdjsonError::Json { line: 2, .. })),
        "{out:?}"
    );
    // A BOM alone on the first line is a blank line.
    assert_eq!(
        run(NdjsonConfig::default(), &[b"\xEF\xBB", b"\xBF\r\n[1]"]),
        vec![Ok(json!([1]))]
    );
}

/// A value that fails to serialize part-way (here a map with a non-string key, after a
/// field already written) must not leave half a line in `out`: the next frame would be
/// appended to it, and the reader would lose both (one line, not JSON). Nothing is written
/// on error, as `SseEncoder` does.
#[test]
fn a_value_that_fails_to_encode_writes_nothing() {
    #[derive(serde::Serialize)]
    struct Frame {
        r#type: &'static str,
        bad: std::collections::BTreeMap<(u8, u8), u8>,
    }
    let mut out = Vec::new();
    NdjsonEncoder::encode(&mut out, &json!({"a": 1})).unwrap();
    let bad = Frame {
        r#type: "x",
        bad: [((1, 2), 3)].into_iter().collect(),
    };
    assert!(NdjsonEncoder::encode(&mut out, &bad).is_err());
    assert_eq!(out, b"{\"a\":1}\n");
    NdjsonEncoder::encode(&mut out, &json!({"b": 2})).unwrap();
    assert_eq!(
        run(NdjsonConfig::default(), &[&out]),
        vec![Ok(json!({"a": 1})), Ok(json!({"b": 2}))]
    );
}
