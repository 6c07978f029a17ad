//! One test per parsing rule of the WHATWG HTML "server-sent events" section
//! (§9.2.6 "Interpreting an event stream"), each citing the rule's words.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use harness_core::sse::{SseConfig, SseDecoder, SseError, SseEvent};

/// Everything the decoder says for a stream pushed in `chunks`, then `finish()`.
#[derive(Debug, PartialEq)]
struct Outcome {
    items: Vec<Result<SseEvent, SseError>>,
    finish: Result<(), SseError>,
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

fn decode_chunks_with(cfg: SseConfig, chunks: &[&[u8]]) -> Outcome {
    let mut dec = SseDecoder::with_config(cfg);
    let mut items = Vec::new();
    for c in chunks {
        dec.push(c);
        drain(&mut dec, &mut items);
    }
    let finish = dec.finish();
    drain(&mut dec, &mut items);
    Outcome {
        items,
        finish,
        last_event_id: dec.last_event_id().map(str::to_owned),
        retry: dec.reconnection_time(),
    }
}

fn drain(dec: &mut SseDecoder, items: &mut Vec<Result<SseEvent, SseError>>) {
    loop {
        match dec.poll_event() {
            Ok(Some(ev)) => items.push(Ok(ev)),
            Ok(None) => break,
            Err(e) => items.push(Err(e)),
        }
    }
}

fn decode_chunks(chunks: &[&[u8]]) -> Outcome {
    decode_chunks_with(SseConfig::default(), chunks)
}

/// Decodes whole, and byte by byte, and checks both agree (chunking never changes output).
fn decode(bytes: &[u8]) -> Outcome {
    let whole = decode_chunks(&[bytes]);
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(whole, decode_chunks(&singles), "byte-by-byte differs");
    whole
}

fn events(bytes: &[u8]) -> Vec<SseEvent> {
    let out = decode(bytes);
    out.items.into_iter().map(|r| r.unwrap()).collect()
}

fn data(bytes: &[u8]) -> Vec<String> {
    events(bytes).into_iter().map(SseEvent::into_data).collect()
}

// "Lines must be separated by either a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF)
// character pair, a single U+000A LINE FEED (LF) character, or a single U+000D CARRIAGE
// RETURN (CR) character."
#[test]
fn lines_end_in_crlf_lf_or_lone_cr() {
    assert_eq!(data(b"data: a\n\n"), ["a"]);
    assert_eq!(data(b"data: a\r\n\r\n"), ["a"]);
    assert_eq!(data(b"data: a\r\r"), ["a"]);
    // Mixed in one stream.
    assert_eq!(data(b"data: a\r\ndata: b\rdata: c\n\r\n"), ["a\nb\nc"]);
}

// A CRLF pair split across two pushes is one line end, not a CR line end followed by an
// empty (dispatching) LF line.
#[test]
fn crlf_split_across_pushes_is_one_line_end() {
    let out = decode_chunks(&[b"data: a\r", b"\ndata: b\r\n\r\n"]);
    let evs: Vec<_> = out.items.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].data(), "a\nb");
}

// A CR ends its line at once: an event terminated by CR CR is dispatched without waiting for
// a possible LF.
#[test]
fn lone_cr_dispatches_without_waiting_for_more_bytes() {
    let mut dec = SseDecoder::new();
    dec.push(b"data: a\r\r");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "a");
    // An LF that then arrives is the second half of the CRLF, not another blank line.
    dec.push(b"\ndata: b\n\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "b");
}

// "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are present."
#[test]
fn one_leading_bom_is_ignored() {
    assert_eq!(data(b"\xEF\xBB\xBFdata: a\n\n"), ["a"]);
    // Only one: a second BOM is part of the first line, which is then not a `data` field.
    assert_eq!(
        data(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"),
        ["b"]
    );
    // A BOM later in the stream is not skipped either.
    assert_eq!(data(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"), ["a"]);
}

#[test]
fn bom_split_across_pushes_is_still_skipped() {
    let out = decode_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]);
    assert_eq!(out.items, vec![Ok(SseEvent::new("a"))]);
}

// "If the line starts with a U+003A COLON character (:) → Ignore the line."
#[test]
fn comment_lines_are_ignored() {
    assert_eq!(data(b": ping\ndata: a\n: another\n\n:\n\n"), ["a"]);
}

// "Collect the characters on the line after the first U+003A COLON character (:), and let
// value be that string. If value starts with a U+0020 SPACE character, remove it from value."
#[test]
fn exactly_one_leading_space_is_removed() {
    assert_eq!(data(b"data:a\n\n"), ["a"]);
    assert_eq!(data(b"data: a\n\n"), ["a"]);
    assert_eq!(data(b"data:  a\n\n"), [" a"]);
    // A tab is not a space.
    assert_eq!(data(b"data:\ta\n\n"), ["\ta"]);
    // Only the first colon splits: the rest belongs to the value.
    assert_eq!(data(b"data: a: b:c\n\n"), ["a: b:c"]);
}

// "Otherwise, the string is not empty but does not contain a U+003A COLON character (:) →
// Process the field using the whole line as the field name, and the empty string as the
// field value."
#[test]
fn a_line_without_colon_is_a_field_with_empty_value() {
    // `data` alone appends an empty line to the data buffer.
    assert_eq!(data(b"data\n\n"), [""]);
    assert_eq!(data(b"data\ndata\n\n"), ["\n"]);
    assert_eq!(data(b"data: a\ndata\n\n"), ["a\n"]);
    // `event` alone sets the empty type, which means `message`.
    let evs = events(b"event: x\nevent\ndata: a\n\n");
    assert_eq!(evs[0].event_type(), "message");
}

// data: "Append the field value to the data buffer, then append a single U+000A LINE FEED
// (LF) character to the data buffer." … "If the data buffer's last character is a U+000A
// LINE FEED (LF) character, then remove the last character from the data buffer."
#[test]
fn data_lines_are_joined_with_lf() {
    assert_eq!(data(b"data: a\ndata: b\ndata: c\n\n"), ["a\nb\nc"]);
    assert_eq!(data(b"data:\n\n"), [""]);
    assert_eq!(data(b"data: a\ndata:\n\n"), ["a\n"]);
}

// event: "Set the event type buffer to field value." … "If the event type buffer has a
// value other than the empty string, change the type of the newly created event to equal
// the value of the event type buffer." The default type is "message".
#[test]
fn event_sets_the_type_and_message_is_the_default() {
    let evs = events(b"event: greeting\ndata: a\n\ndata: b\n\nevent: x\nevent: y\ndata: c\n\n");
    assert_eq!(evs[0].event_type(), "greeting");
    assert!(evs[0].has_explicit_type());
    // "Set the data buffer and the event type buffer to the empty string" after dispatch.
    assert_eq!(evs[1].event_type(), "message");
    assert!(!evs[1].has_explicit_type());
    // The last event field wins.
    assert_eq!(evs[2].event_type(), "y");
}

// "If the data buffer is an empty string, set the data buffer and the event type buffer to
// the empty string and return." — nothing is dispatched, and the type does not leak into the
// next event.
#[test]
fn an_event_without_data_dispatches_nothing_and_resets_the_type() {
    let evs = events(b"event: x\n\ndata: a\n\nevent: y\nid: 3\n\n");
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_type(), "message");
}

// id: "If the field value does not contain U+0000 NULL, then set the last event ID buffer
// to the field value. Otherwise, ignore the field."
#[test]
fn id_sets_the_last_event_id_unless_it_contains_nul() {
    let out = decode(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n");
    let evs: Vec<_> = out.items.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(evs[0].id(), Some("1"));
    assert_eq!(evs[1].id(), Some("1"), "an id with NUL is ignored");
    assert_eq!(out.last_event_id.as_deref(), Some("1"));
}

// The last event ID buffer is not reset by dispatch: later events carry it until an `id`
// field changes it; an empty `id` field empties it.
#[test]
fn the_last_event_id_persists_across_events_and_an_empty_id_clears_it() {
    let out = decode(b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n");
    let evs: Vec<_> = out.items.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(evs[0].id(), Some("7"));
    assert_eq!(evs[1].id(), Some("7"));
    assert_eq!(evs[2].id(), None);
    assert_eq!(out.last_event_id, None);
}

// The id applies to the event it appears in even after its data lines ("Initialize event's
// … lastEventId attribute to the last event ID string of the event source" at dispatch), and
// an id in an event that dispatches nothing still updates the buffer.
#[test]
fn id_is_read_at_dispatch_and_updated_by_events_without_data() {
    let out = decode(b"data: a\nid: 5\n\nid: 6\n\n");
    let evs: Vec<_> = out.items.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(evs[0].id(), Some("5"));
    assert_eq!(out.last_event_id.as_deref(), Some("6"));
}

// The last event ID a client resumes with is the "last event ID string", which only step 1
// of "dispatch the event" sets ("Set the last event ID string of the event source to the
// value of the last event ID buffer"), and only a blank line dispatches; "Once the end of the
// file is reached, any pending data must be discarded. (If the file ends in the middle of an
// event, before the final empty line, the incomplete event is not dispatched.)" So the `id:`
// of an event that never got its blank line is not the last event ID: resuming from it would
// skip that lost event. Found by the differential test against eventsource-parser
// (scripts/interop/core-sse).
#[test]
fn an_id_counts_only_once_its_event_is_dispatched() {
    for wire in [
        &b"id: 1\ndata: a\n\nid: 2\ndata: b\n"[..],
        b"id: 1\ndata: a\n\nid: 2\ndata: b",
        b"id: 1\ndata: a\n\ndata: b\nid\n",
        b"id: 1\ndata: a\n\nid: 2\n",
        b"id: 1\r\ndata: a\r\n\r\nid: 2\r",
        // Two `id:` lines in the lost event: neither is the last event ID.
        b"id: 1\ndata: a\n\nid: 2\nid: 3\ndata: b\n",
        b"id: 1\ndata: a\n\nid: 2\ndata: b\nid: 3\n",
        b"id: 1\ndata: a\n\nid: 1\nid: 2\n",
    ] {
        let out = decode(wire);
        assert_eq!(
            out.items,
            vec![Ok(SseEvent::new("a").with_id("1"))],
            "{wire:?}"
        );
        assert_eq!(out.last_event_id.as_deref(), Some("1"), "{wire:?}");
    }

    // Mid-stream too: the id of an event still arriving is not the last event ID yet.
    let mut dec = SseDecoder::new();
    dec.push(b"id: 1\ndata: a\n\nid: 2\ndata: b\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().id(), Some("1"));
    assert_eq!(dec.poll_event().unwrap(), None);
    assert_eq!(dec.last_event_id(), Some("1"));
    dec.push(b"\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().id(), Some("2"));
    assert_eq!(dec.last_event_id(), Some("2"));
    // However many `id:` lines the arriving event has.
    dec.push(b"id: 4\nid: 5\n");
    assert_eq!(dec.poll_event().unwrap(), None);
    assert_eq!(dec.last_event_id(), Some("2"));
    dec.push(b"data: d\n\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().id(), Some("5"));
    assert_eq!(dec.last_event_id(), Some("5"));
    dec.push(b"id: 2\ndata: e\n\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().id(), Some("2"));

    // After finish() the next stream (a reconnection) goes on from the dispatched id.
    dec.push(b"id: 3\ndata: torn");
    assert_eq!(dec.poll_event().unwrap(), None);
    assert!(dec.finish().is_err());
    assert_eq!(dec.last_event_id(), Some("2"));
    dec.push(b"data: c\n\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().id(), Some("2"));
}

// retry: "If the field value consists of only ASCII digits, then interpret the field value
// as an integer in base ten, and set the event stream's reconnection time to that integer.
// Otherwise, ignore the field."
#[test]
fn retry_is_taken_only_when_all_ascii_digits() {
    assert_eq!(
        decode(b"retry: 1500\n\n").retry,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        decode(b"retry: 1500\nretry: 15x\n\n").retry,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(decode(b"retry: -1\n\n").retry, None);
    assert_eq!(decode(b"retry: 1.5\n\n").retry, None);
    assert_eq!(
        decode(b"retry:  10\n\n").retry,
        None,
        "a second space is not a digit"
    );
    assert_eq!(decode(b"retry\n\n").retry, None);
    // A value too large for u64 saturates instead of overflowing.
    assert_eq!(
        decode(b"retry: 99999999999999999999999999\n\n").retry,
        Some(Duration::from_millis(u64::MAX))
    );
    // `retry` alone dispatches nothing.
    assert!(decode(b"retry: 10\n\n").items.is_empty());
}

// "Otherwise → The field is ignored." Field names are compared exactly (case-sensitive).
#[test]
fn unknown_fields_are_ignored_and_names_are_case_sensitive() {
    assert_eq!(data(b"foo: bar\ndata: a\nData: b\nDATA: c\n\n"), ["a"]);
    let evs = events(b"Event: x\nID: 9\ndata: a\n\n");
    assert_eq!(evs[0].event_type(), "message");
    assert_eq!(evs[0].id(), None);
}

// "Streams must be decoded using the UTF-8 decode algorithm": a character split across two
// pushes is decoded whole, never replaced.
#[test]
fn utf8_split_across_pushes_is_not_replaced() {
    let text = "café 東京 🚀";
    let wire = format!("data: {text}\n\n");
    let bytes = wire.as_bytes();
    for split in 0..bytes.len() {
        let out = decode_chunks(&[&bytes[..split], &bytes[split..]]);
        assert_eq!(out.items, vec![Ok(SseEvent::new(text))], "split at {split}");
    }
}

// The UTF-8 decode algorithm replaces invalid sequences with U+FFFD (maximal subparts).
#[test]
fn invalid_utf8_becomes_replacement_characters() {
    assert_eq!(data(b"data: a\xFFb\n\n"), ["a\u{FFFD}b"]);
    // A truncated sequence before the line end is one U+FFFD.
    assert_eq!(data(b"data: caf\xC3\n\n"), ["caf\u{FFFD}"]);
    // Invalid bytes in event types and ids are replaced too.
    let evs = events(b"event: t\xFE\nid: i\xFF\ndata: x\n\n");
    assert_eq!(evs[0].event_type(), "t\u{FFFD}");
    assert_eq!(evs[0].id(), Some("i\u{FFFD}"));
}

// NUL only matters to `id`: data may hold it.
#[test]
fn nul_in_data_is_kept() {
    assert_eq!(data(b"data: a\x00b\n\n"), ["a\0b"]);
}

// "Once the end of the file is reached, any pending data must be discarded. (If the file
// ends in the middle of an event, before the final empty line, the incomplete event is not
// dispatched.)"
#[test]
fn an_unterminated_event_at_eof_is_not_dispatched_and_finish_reports_it() {
    let out = decode(b"data: a\n\ndata: b\n");
    assert_eq!(out.items, vec![Ok(SseEvent::new("a"))]);
    assert_eq!(out.finish, Err(SseError::IncompleteEvent { data_bytes: 1 }));

    // The final line itself unterminated.
    let out = decode(b"data: a\n\ndata: bc");
    assert_eq!(out.items.len(), 1);
    assert_eq!(out.finish, Err(SseError::IncompleteEvent { data_bytes: 2 }));

    // Only a comment or a field that would not dispatch is pending: nothing is lost.
    assert_eq!(decode(b"data: a\n\n: bye").finish, Ok(()));
    assert_eq!(decode(b"data: a\n\nevent: x\n").finish, Ok(()));
    assert_eq!(decode(b"data: a\n\n").finish, Ok(()));
}

// A CR at the very end of the stream still ends its line (the conformance suite's
// trailing_cr case: `data: {"type": "a"}\r\r` dispatches "a").
#[test]
fn trailing_cr_at_eof_ends_the_line() {
    let out = decode(b"data: a\r\r");
    assert_eq!(out.items, vec![Ok(SseEvent::new("a"))]);
    assert_eq!(out.finish, Ok(()));
    let out = decode(b"data: a\r");
    assert!(out.items.is_empty());
    assert!(out.finish.is_err(), "the line ended but the event did not");
}

// After finish the decoder reads a new stream (a reconnection): the BOM check applies again,
// and the last event ID and the reconnection time are kept (the client sends the ID back as
// Last-Event-ID).
#[test]
fn finish_rearms_for_a_reconnection_and_keeps_id_and_retry() {
    let mut dec = SseDecoder::new();
    dec.push(b"retry: 3000\nid: 41\ndata: a\n\ndata: torn");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "a");
    assert!(dec.finish().is_err());
    assert_eq!(dec.last_event_id(), Some("41"));
    dec.push(b"\xEF\xBB\xBFdata: b\n\n");
    let ev = dec.poll_event().unwrap().unwrap();
    assert_eq!((ev.data(), ev.id()), ("b", Some("41")));
    assert_eq!(dec.reconnection_time(), Some(Duration::from_secs(3)));
    assert_eq!(dec.finish(), Ok(()));
}

// finish() before the caller drained the events loses none of them.
#[test]
fn finish_keeps_events_not_yet_polled() {
    let mut dec = SseDecoder::new();
    dec.push(b"data: a\n\ndata: b\n\ndata: c");
    assert!(dec.finish().is_err());
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "a");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "b");
    assert_eq!(dec.poll_event().unwrap(), None);
}

// Limits: a line past max_line_bytes is an error for its event; the decoder skips to the next
// event and stays usable.
#[test]
fn a_line_past_the_limit_skips_its_event_only() {
    let cfg = SseConfig {
        max_line_bytes: 16,
        max_event_bytes: 1024,
    };
    let mut wire = b"data: before\n\nevent: big\ndata: ".to_vec();
    wire.extend(std::iter::repeat_n(b'x', 100));
    wire.extend_from_slice(b"\ndata: rest of big\nid: 9\n\ndata: after\n\n");
    for chunk in [1, 3, 7, 16, 17, 1000] {
        let chunks: Vec<&[u8]> = wire.chunks(chunk).collect();
        let out = decode_chunks_with(cfg, &chunks);
        assert_eq!(
            out.items,
            vec![
                Ok(SseEvent::new("before")),
                Err(SseError::LineTooLong { limit: 16 }),
                Ok(SseEvent::new("after")),
            ],
            "chunk {chunk}"
        );
        // The skipped event's id was skipped with it.
        assert_eq!(out.last_event_id, None);
        assert_eq!(out.finish, Ok(()));
    }
}

// A skipped event's id is skipped with it, also when it came before the line past the limit.
#[test]
fn an_id_before_the_line_past_the_limit_is_skipped_with_its_event() {
    let cfg = SseConfig {
        max_line_bytes: 16,
        max_event_bytes: 1024,
    };
    let mut wire = b"id: 1\ndata: a\n\nid: 9\ndata: ".to_vec();
    wire.extend(std::iter::repeat_n(b'x', 100));
    wire.extend_from_slice(b"\n\ndata: after\n\n");
    for chunk in [1, 5, 16, 1000] {
        let chunks: Vec<&[u8]> = wire.chunks(chunk).collect();
        let out = decode_chunks_with(cfg, &chunks);
        assert_eq!(
            out.items,
            vec![
                Ok(SseEvent::new("a").with_id("1")),
                Err(SseError::LineTooLong { limit: 16 }),
                Ok(SseEvent::new("after").with_id("1")),
            ],
            "chunk {chunk}"
        );
        assert_eq!(out.last_event_id.as_deref(), Some("1"));
    }
}

#[test]
fn an_event_past_the_data_limit_skips_that_event_only() {
    let cfg = SseConfig {
        max_line_bytes: 64,
        max_event_bytes: 10,
    };
    let wire = b"data: 12345\ndata: 67890\n\ndata: 1234567890\n\ndata: ok\n\n";
    let chunks: Vec<&[u8]> = wire.chunks(5).collect();
    let out = decode_chunks_with(cfg, &chunks);
    assert_eq!(
        out.items,
        vec![
            Err(SseError::EventTooLarge { limit: 10 }),
            Ok(SseEvent::new("1234567890")),
            Ok(SseEvent::new("ok")),
        ]
    );
}

// Memory stays bounded while an over-long line streams in: the decoder drops it as it comes.
#[test]
fn an_endless_line_does_not_grow_the_buffer() {
    let cfg = SseConfig {
        max_line_bytes: 1024,
        max_event_bytes: 1024,
    };
    let mut dec = SseDecoder::with_config(cfg);
    dec.push(b"data: ");
    let chunk = [b'y'; 4096];
    let mut errors = 0;
    for _ in 0..1000 {
        dec.push(&chunk);
        while let Err(e) = dec.poll_event() {
            assert_eq!(e, SseError::LineTooLong { limit: 1024 });
            errors += 1;
        }
        assert!(dec.buffered_bytes() <= 4096 + 1024);
    }
    assert_eq!(errors, 1, "one error for the one event");
    dec.push(b"\n\ndata: next\n\n");
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "next");
}

// Polling is lazy: nothing is parsed until asked, and an unread event costs nothing more.
#[test]
fn push_does_not_parse_and_poll_parses_one_event_at_a_time() {
    let mut dec = SseDecoder::new();
    dec.push(b"data: a\n\ndata: b\n\n");
    assert_eq!(dec.buffered_bytes(), 18);
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "a");
    assert_eq!(dec.buffered_bytes(), 9);
    assert_eq!(dec.poll_event().unwrap().unwrap().data(), "b");
    assert_eq!(dec.poll_event().unwrap(), None);
}
