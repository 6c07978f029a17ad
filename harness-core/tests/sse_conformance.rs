//! The official UHP conformance suite's framing cases (HarnessRouter/harnessrouter
//! `protocol/conformance/tests/test_stream_framing.py`) and the SSE defect cases of the Python
//! peer (research/uhp-peer.md), decoded as the spec requires under many chunkings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

use harness_core::sse::{SseDecoder, SseError};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Decodes `chunks`, returning every data payload that is a JSON object (what a UHP client
/// treats as an event) and the finish result.
fn objects(chunks: &[&[u8]]) -> (Vec<Value>, Result<(), SseError>) {
    let mut dec = SseDecoder::new();
    let mut out = Vec::new();
    let mut take = |dec: &mut SseDecoder| {
        while let Some(ev) = dec.poll_event().unwrap() {
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(ev.data()) {
                out.push(v);
            }
        }
    };
    for c in chunks {
        dec.push(c);
        take(&mut dec);
    }
    let fin = dec.finish();
    take(&mut dec);
    (out, fin)
}

fn types(objs: &[Value]) -> Vec<String> {
    objs.iter()
        .map(|o| o["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Chunkings tried on every stream: whole, 1 byte, 2, 3, 7 bytes, 4 KiB, and a seeded
/// pseudo-random split.
fn chunkings(bytes: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut all: Vec<Vec<&[u8]>> = vec![vec![bytes]];
    for n in [1, 2, 3, 7, 4096] {
        all.push(bytes.chunks(n).collect());
    }
    let mut rand = Vec::new();
    let (mut i, mut seed) = (0usize, 0x9E37_79B9_7F4A_7C15u64);
    while i < bytes.len() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let n = 1 + usize::try_from(seed % 97).unwrap();
        let end = (i + n).min(bytes.len());
        rand.push(&bytes[i..end]);
        i = end;
    }
    all.push(rand);
    all
}

#[test]
fn official_framing_cases_give_the_expected_event_types() {
    let dir = fixtures().join("conformance_framing");
    let expected: Value =
        serde_json::from_slice(&fs::read(dir.join("EXPECTED.json")).unwrap()).unwrap();
    let mut checked = 0;
    for (name, want) in expected.as_object().unwrap() {
        if name.starts_with('_') {
            continue;
        }
        let bytes = fs::read(dir.join(name)).unwrap();
        let want: Vec<String> = serde_json::from_value(want.clone()).unwrap();
        for chunks in chunkings(&bytes) {
            let (objs, fin) = objects(&chunks);
            assert_eq!(types(&objs), want, "{name}");
            if name == "comments_fields_non_object.sse" {
                // `data: {"type": "b"}\n` has no blank line: not dispatched, and reported.
                assert!(
                    matches!(fin, Err(SseError::IncompleteEvent { .. })),
                    "{name}"
                );
            } else {
                assert_eq!(fin, Ok(()), "{name}");
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn comments_fields_case_keeps_id_and_retry() {
    // The same file: `id: 1` and `retry: 10` on the first event, a keep-alive comment.
    let bytes =
        fs::read(fixtures().join("conformance_framing/comments_fields_non_object.sse")).unwrap();
    let mut dec = SseDecoder::new();
    dec.push(&bytes);
    let first = dec.poll_event().unwrap().unwrap();
    assert_eq!(first.event_type(), "response.created");
    assert_eq!(first.id(), Some("1"));
    assert_eq!(
        dec.reconnection_time(),
        Some(std::time::Duration::from_millis(10))
    );
    // `[DONE]` and `[1, 2]` are dispatched as events; it is the JSON layer's job to refuse
    // them as UHP events, never the framing's to drop them.
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "[DONE]");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "[1, 2]");
    assert_eq!(dec.poll_event().unwrap(), None);
}

#[derive(serde::Deserialize)]
struct Chunks {
    chunks_hex: Vec<String>,
    expected_types: Option<Vec<String>>,
    expected_types_at_eof: Option<Vec<String>>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn official_chunked_cases() {
    for name in [
        "crlf_split_across_reads.chunks.json",
        "trailing_cr.chunks.json",
    ] {
        let case: Chunks = serde_json::from_slice(
            &fs::read(fixtures().join("conformance_framing").join(name)).unwrap(),
        )
        .unwrap();
        let raw: Vec<Vec<u8>> = case.chunks_hex.iter().map(|h| unhex(h)).collect();
        let chunks: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        let (objs, fin) = objects(&chunks);
        let want = case.expected_types.or(case.expected_types_at_eof).unwrap();
        assert_eq!(types(&objs), want, "{name}");
        assert_eq!(fin, Ok(()), "{name}");
    }
}

/// Every realistic stream (and every stream the Python peer gets wrong) gives exactly the
/// spec-correct events under every chunking.
#[test]
fn realistic_streams_and_peer_defect_cases_decode_as_the_spec_requires() {
    let dir = fixtures().join("streams");
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sse"))
        .collect();
    names.sort();
    assert!(names.len() >= 20);
    for path in names {
        let bytes = fs::read(&path).unwrap();
        let want: Vec<Value> =
            serde_json::from_slice(&fs::read(path.with_extension("events.json")).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for chunks in chunkings(&bytes) {
            let (got, fin) = objects(&chunks);
            assert_eq!(got, want, "{name} ({} chunks)", chunks.len());
            if name.starts_with("35_unterminated_final_event") {
                assert!(
                    matches!(fin, Err(SseError::IncompleteEvent { .. })),
                    "{name}"
                );
            }
        }
    }
}

// The peer's specific failures, named: CRLF and lone-CR framing, a BOM, split UTF-8.
#[test]
fn the_python_peers_sse_defects_are_not_ours() {
    let dir = fixtures().join("streams");
    for (name, min_events) in [
        ("30_crlf_framing", 10),
        ("31_cr_framing", 10),
        ("33_bom_at_start", 5),
        ("15_unicode_text", 5),
    ] {
        let bytes = fs::read(dir.join(format!("{name}.sse"))).unwrap();
        let (objs, _) = objects(&bytes.chunks(1).collect::<Vec<_>>());
        assert!(objs.len() >= min_events, "{name}: {} events", objs.len());
        assert_eq!(objs[0]["type"], "response.created", "{name}");
        let text: String = objs.iter().filter_map(|o| o["delta"].as_str()).collect();
        assert!(!text.contains('\u{FFFD}'), "{name}: replacement characters");
    }
}
