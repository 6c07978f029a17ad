//! Property tests of the in-place path (`SseDecoder::feed`): owned and borrowed events, mixed
//! with `push`/`poll_event` and with feeds dropped half-read, give exactly the events, errors,
//! finish result and last event ID of `push` then `poll_event`, whatever the chunking
//! (WHATWG HTML §9.2.6: the parse does not depend on how the bytes arrive).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_core::sse::{SseConfig, SseDecoder, SseError, SseEvent};
use proptest::prelude::*;

#[path = "support/chunks.rs"]
mod chunks;
use chunks::chunks;

type Outcome = (
    Vec<Result<SseEvent, SseError>>,
    Result<(), SseError>,
    Option<String>,
);

fn drain(dec: &mut SseDecoder, items: &mut Vec<Result<SseEvent, SseError>>) {
    loop {
        match dec.poll_event() {
            Ok(Some(ev)) => items.push(Ok(ev)),
            Ok(None) => break,
            Err(e) => items.push(Err(e)),
        }
    }
}

/// The reference: every chunk pushed, then polled.
fn reference(cfg: SseConfig, bytes: &[u8]) -> Outcome {
    let mut dec = SseDecoder::with_config(cfg);
    let mut items = Vec::new();
    dec.push(bytes);
    drain(&mut dec, &mut items);
    let fin = dec.finish();
    drain(&mut dec, &mut items);
    (items, fin, dec.last_event_id().map(str::to_owned))
}

/// Each chunk goes in one of five ways, chosen by `modes`: pushed and polled; fed as owned
/// events; fed as borrowed events; fed and dropped after at most one event (the rest is
/// polled); fed while earlier pushed bytes are still unpolled.
fn mixed(cfg: SseConfig, bytes: &[u8], cuts: &[usize], modes: &[u8]) -> Outcome {
    let mut dec = SseDecoder::with_config(cfg);
    let mut items = Vec::new();
    for (i, chunk) in chunks(bytes, cuts).into_iter().enumerate() {
        match modes.get(i).copied().unwrap_or(0) % 5 {
            0 => {
                dec.push(chunk);
                drain(&mut dec, &mut items);
            }
            1 => items.extend(dec.feed(chunk)),
            2 => {
                let mut feed = dec.feed(chunk);
                while let Some(ev) = feed.next_ref() {
                    items.push(ev.map(|e| e.to_event()));
                }
            }
            3 => {
                if let Some(ev) = dec.feed(chunk).next_ref() {
                    items.push(ev.map(|e| e.to_event()));
                }
                drain(&mut dec, &mut items);
            }
            _ => {
                let (a, b) = chunk.split_at(chunk.len() / 2);
                dec.push(a); // not polled: the feed must parse it first
                let mut feed = dec.feed(b);
                while let Some(ev) = feed.next_ref() {
                    items.push(ev.map(|e| e.to_event()));
                }
            }
        }
    }
    let fin = dec.finish();
    let mut feed = dec.feed(&[]); // what finish queued, through the borrowed path
    while let Some(ev) = feed.next_ref() {
        items.push(ev.map(|e| e.to_event()));
    }
    drop(feed);
    (items, fin, dec.last_event_id().map(str::to_owned))
}

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

/// Whole lines in the shapes a real stream has (and near misses): what the in-place fast
/// lane takes (`id:`, `data:` and the blank line, comments and blank lines between events)
/// next to what it must leave to the line machine.
fn stream_like() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        4 => "[a-z0-9{}\"é]{0,10}".prop_map(|v| format!("data: {v}\n\n").into_bytes()),
        2 => "[a-z0-9]{0,4}".prop_map(|v| format!("id: {v}\n").into_bytes()),
        1 => Just(b"id:\n".to_vec()),
        1 => Just(b"id:  two spaces\n".to_vec()),
        1 => Just(b"id: a\0b\n".to_vec()),
        1 => Just(b"id: \xFF\n".to_vec()),
        1 => Just(b": ping\n".to_vec()),
        1 => Just(b":\n".to_vec()),
        1 => Just(b"\n".to_vec()),
        1 => Just(b"data:x\n\n".to_vec()),
        1 => Just(b"data:\n\n".to_vec()),
        1 => Just(b"data:  x\n\n".to_vec()),
        1 => Just(b"data: a\ndata: b\n\n".to_vec()),
        1 => Just(b"data: x\r\n\r\n".to_vec()),
        1 => Just(b"data: x\r\r".to_vec()),
        1 => Just(b"data: \xC3(\n\n".to_vec()),
        2 => "[a-z.]{0,12}".prop_map(|v| format!("event: {v}\n").into_bytes()),
        1 => Just(b"event:\n".to_vec()),
        1 => Just(b"event:  x\n".to_vec()),
        1 => Just(b"event: x\r\n".to_vec()),
        1 => Just(b"event: \xFF\n".to_vec()),
        1 => Just(b"event: a type name longer than the small limits\n".to_vec()),
        1 => Just(b"event: cut".to_vec()),
        1 => Just(b"retry: 7\n".to_vec()),
        1 => Just(b": a comment that is longer than the small limits\n".to_vec()),
        1 => Just(b"data: a value that is longer than the small limits\n\n".to_vec()),
        1 => Just(b"\xEF\xBB\xBF".to_vec()),
        1 => Just(b"data: cut".to_vec()),
        1 => Just(b"id: cut".to_vec()),
    ];
    prop::collection::vec(line, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Streams of realistic lines, with and without small limits: the in-place fast lane
    /// gives exactly the events, errors and last event ID of push-then-poll.
    #[test]
    fn feed_fast_lane_equals_push_then_poll(bytes in stream_like(), cuts in prop::collection::vec(any::<usize>(), 0..12), modes in prop::collection::vec(any::<u8>(), 0..13), line in 8usize..24, ev in 0usize..24) {
        let limits = SseConfig { max_line_bytes: line, max_event_bytes: ev };
        for cfg in [SseConfig::default(), limits] {
            let want = reference(cfg, &bytes);
            prop_assert_eq!(&want, &mixed(cfg, &bytes, &cuts, &modes));
            // Every chunk fed, borrowed then owned: the lane sees all of the stream.
            prop_assert_eq!(&want, &mixed(cfg, &bytes, &cuts, &[2; 13]));
            prop_assert_eq!(&want, &mixed(cfg, &bytes, &cuts, &[1; 13]));
        }
    }

    /// Owned and borrowed in-place events equal push-then-poll, under any chunking.
    #[test]
    fn feed_equals_push_then_poll(bytes in sse_like(), cuts in prop::collection::vec(any::<usize>(), 0..12), modes in prop::collection::vec(any::<u8>(), 0..13)) {
        let cfg = SseConfig::default();
        prop_assert_eq!(reference(cfg, &bytes), mixed(cfg, &bytes, &cuts, &modes));
        let singles: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(reference(cfg, &bytes), mixed(cfg, &bytes, &singles, &modes));
    }

    /// The same under limits small enough to trip on most streams.
    #[test]
    fn feed_equals_push_then_poll_under_limits(bytes in sse_like(), cuts in prop::collection::vec(any::<usize>(), 0..12), modes in prop::collection::vec(any::<u8>(), 0..13), line in 0usize..40, ev in 0usize..60) {
        let cfg = SseConfig { max_line_bytes: line, max_event_bytes: ev };
        prop_assert_eq!(reference(cfg, &bytes), mixed(cfg, &bytes, &cuts, &modes));
    }

    /// Arbitrary bytes never panic on the in-place path and agree with the buffered one.
    #[test]
    fn feed_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512), cuts in prop::collection::vec(any::<usize>(), 0..8), modes in prop::collection::vec(any::<u8>(), 0..9)) {
        let cfg = SseConfig { max_line_bytes: 64, max_event_bytes: 128 };
        prop_assert_eq!(reference(cfg, &bytes), mixed(cfg, &bytes, &cuts, &modes));
    }

    /// Fed in place and drained, the decoder keeps only an incomplete line, never more than
    /// the line limit (a BOM's first bytes aside).
    #[test]
    fn feed_keeps_only_the_incomplete_tail(bytes in prop::collection::vec(prop_oneof![Just(b'x'), Just(b'\n'), Just(b':'), Just(b'\r')], 0..4096), chunk in 1usize..300) {
        let cfg = SseConfig { max_line_bytes: 24, max_event_bytes: 40 };
        let mut dec = SseDecoder::with_config(cfg);
        let mut wire = b"data:".to_vec();
        wire.extend_from_slice(&bytes);
        for c in wire.chunks(chunk) {
            let mut feed = dec.feed(c);
            while let Some(ev) = feed.next_ref() {
                if let Ok(ev) = ev {
                    prop_assert!(ev.data().len() <= cfg.max_event_bytes);
                }
            }
            drop(feed);
            prop_assert!(dec.buffered_bytes() <= cfg.max_line_bytes.max(2));
            prop_assert!(!c.ends_with(b"\n") || dec.buffered_bytes() == 0);
        }
    }
}

/// An `id:` line past the line limit makes its event an error on the in-place path too
/// (WHATWG leaves limits to the implementation; ours apply to every line alike), and the
/// event after it is read normally.
#[test]
fn fed_id_line_past_the_limit_is_an_error() {
    let cfg = SseConfig {
        max_line_bytes: 10,
        max_event_bytes: 40,
    };
    let bytes = b"data: a\n\nid:  two spaces\ndata: b\n\ndata: c\n\n";
    let want = reference(cfg, bytes);
    assert_eq!(want.0.len(), 3);
    assert_eq!(want.0[1], Err(SseError::LineTooLong { limit: 10 }));
    assert_eq!(want, mixed(cfg, bytes, &[], &[2]));
    assert_eq!(want, mixed(cfg, bytes, &[], &[1]));
}
