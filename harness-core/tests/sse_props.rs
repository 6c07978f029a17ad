//! Property tests of the SSE codec: chunking invariance, encode → decode round-trips,
//! arbitrary bytes never panic, memory bounded under the limits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_core::sse::{SseConfig, SseDecoder, SseEncoder, SseError, SseEvent};
use proptest::prelude::*;

#[path = "support/chunks.rs"]
mod chunks;
use chunks::chunks;

type Outcome = (
    Vec<Result<SseEvent, SseError>>,
    Result<(), SseError>,
    Option<String>,
);

fn run(cfg: SseConfig, bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut dec = SseDecoder::with_config(cfg);
    let mut items = Vec::new();
    let drain = |dec: &mut SseDecoder, items: &mut Vec<_>| loop {
        match dec.poll_event() {
            Ok(Some(ev)) => items.push(Ok(ev)),
            Ok(None) => break,
            Err(e) => items.push(Err(e)),
        }
    };
    for chunk in chunks(bytes, cuts) {
        dec.push(chunk);
        drain(&mut dec, &mut items);
    }
    let fin = dec.finish();
    drain(&mut dec, &mut items);
    (items, fin, dec.last_event_id().map(str::to_owned))
}

/// Bytes that look like SSE: fields, comments, all line ends, BOMs, multi-byte characters,
/// invalid UTF-8, NUL.
fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"data".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"id: ".to_vec()),
        Just(b"retry: ".to_vec()),
        Just(b": ".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just("é東🚀".as_bytes().to_vec()),
        Just(b"\xC3".to_vec()),
        Just(b"\xFF".to_vec()),
        Just(b"\0".to_vec()),
        Just(b":".to_vec()),
        Just(b" ".to_vec()),
        "[a-z0-9{}\"]{0,12}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

fn small_limits() -> SseConfig {
    SseConfig {
        max_line_bytes: 24,
        max_event_bytes: 40,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any split of the same bytes gives the same events, errors, finish result and last ID.
    #[test]
    fn chunking_never_changes_the_output(bytes in sse_like(), cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let whole = run(SseConfig::default(), &bytes, &[]);
        prop_assert_eq!(&whole, &run(SseConfig::default(), &bytes, &cuts));
        let singles: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(&whole, &run(SseConfig::default(), &bytes, &singles));
    }

    /// The same with limits small enough to trip on most streams.
    #[test]
    fn chunking_never_changes_the_output_under_limits(bytes in sse_like(), cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let whole = run(small_limits(), &bytes, &[]);
        prop_assert_eq!(&whole, &run(small_limits(), &bytes, &cuts));
    }

    /// Arbitrary bytes never panic, whatever the limits.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), cuts in prop::collection::vec(any::<usize>(), 0..8), line in 0usize..64, ev in 0usize..64) {
        let cfg = SseConfig { max_line_bytes: line, max_event_bytes: ev };
        let a = run(cfg, &bytes, &cuts);
        let b = run(cfg, &bytes, &[]);
        prop_assert_eq!(a, b);
    }

    /// Whatever the encoder writes, the decoder reads back identically (CR and CRLF inside
    /// data are line breaks in SSE, so they come back as LF).
    #[test]
    fn encode_then_decode_round_trips(
        evs in prop::collection::vec((
            "[^\r\n]{0,10}",
            "[^\r\n\0]{0,10}",
            "(?s).{0,40}",
        ), 0..8),
        comment in "(?s).{0,20}",
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut wire = Vec::new();
        let mut want = Vec::new();
        let mut last_id: Option<String> = None;
        for (i, (t, id, data)) in evs.iter().enumerate() {
            let mut ev = SseEvent::new(data.replace("\r\n", "\n").replace('\r', "\n")).with_event_type(t);
            if !id.is_empty() {
                ev = ev.with_id(id);
                last_id = Some(id.clone());
            } else if let Some(l) = &last_id {
                ev = ev.with_id(l); // the decoder carries the last ID forward
            }
            let encoded = SseEvent::new(data.clone()).with_event_type(t).with_id(id);
            SseEncoder::event(&mut wire, &encoded).unwrap();
            if i == 0 {
                SseEncoder::comment(&mut wire, &comment);
            }
            want.push(Ok(ev));
        }
        let (got, fin, _) = run(SseConfig::default(), &wire, &cuts);
        prop_assert_eq!(got, want);
        prop_assert_eq!(fin, Ok(()));
    }

    /// While polling after every push, the decoder never holds more than one push plus one
    /// line limit plus one line end, and an event's data never exceeds its limit.
    #[test]
    fn memory_stays_bounded_under_the_limits(bytes in prop::collection::vec(prop_oneof![Just(b'x'), Just(b'\n'), Just(b':'), Just(b'\r')], 0..4096), chunk in 1usize..300) {
        let cfg = small_limits();
        let mut dec = SseDecoder::with_config(cfg);
        let mut wire = b"data:".to_vec();
        wire.extend_from_slice(&bytes);
        for c in wire.chunks(chunk) {
            dec.push(c);
            loop {
                match dec.poll_event() {
                    Ok(Some(ev)) => prop_assert!(ev.data().len() <= cfg.max_event_bytes),
                    Ok(None) => break,
                    Err(_) => {}
                }
            }
            prop_assert!(dec.buffered_bytes() <= chunk + cfg.max_line_bytes + 1);
        }
    }
}

#[test]
fn retry_round_trips() {
    let mut wire = Vec::new();
    SseEncoder::retry(&mut wire, std::time::Duration::from_millis(2500));
    let mut dec = SseDecoder::new();
    dec.push(&wire);
    assert_eq!(dec.poll_event().unwrap(), None);
    assert_eq!(
        dec.reconnection_time(),
        Some(std::time::Duration::from_millis(2500))
    );
}

#[test]
fn encoder_refuses_what_would_change_meaning() {
    use harness_core::sse::SseEncodeError;
    let mut out = Vec::new();
    assert_eq!(
        SseEncoder::parts(&mut out, Some("a\nb"), None, "x"),
        Err(SseEncodeError::EventTypeHasLineBreak)
    );
    assert_eq!(
        SseEncoder::parts(&mut out, None, Some("1\r"), "x"),
        Err(SseEncodeError::IdHasLineBreak)
    );
    assert_eq!(
        SseEncoder::parts(&mut out, None, Some("1\0"), "x"),
        Err(SseEncodeError::IdHasNul)
    );
    assert!(out.is_empty(), "nothing written on error");
}
