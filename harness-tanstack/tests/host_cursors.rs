//! The host against "Cursors and reconnects" and "When events are missing" of the spec
//! (tanstack-harness-wire-protocol.md, version 2): resuming from a cursor, and gaps, on thread
//! streams and `GET host-events`. Each test quotes the words it checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::host::{Host, HostConfig};
use harness_tanstack::log::{EventLog, FileLog, MemoryLog};
use serde_json::Value;
use support::{Net, PROMPT, data_frames, json, net, reply, sse_cfg};

#[test]
fn last_event_id_wins_over_from_and_the_stream_starts_after_the_cursor() {
    let mut n = net();
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    reply(&mut n, "Hi");
    // "When you send both, the header wins." / "The stream starts with the first event after that cursor."
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            Some("1"),
            Some("4"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(frames[1]["cursor"], "5");
}

#[test]
fn memory_eviction_sends_one_gap_with_reason_evicted() {
    let mut n = Net::new(Host::new(HostConfig::default(), MemoryLog::new(5, 1 << 20)));
    n.host.control(n.now, None, PROMPT, "r", None);
    n.pump();
    reply(&mut n, "Hi");
    let head = n.host.log().head_seq("thread-1");
    assert!(head > 5);
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            Some("2"),
            None,
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    let gap = &frames[1];
    // "the stream sends one CUSTOM event with the name harness.gap, and continues from the first event that it has"
    assert_eq!(gap["operationId"], "session");
    assert_eq!(gap["event"]["name"], "harness.gap");
    // "from is the cursor that you sent." "resumeAt is the cursor of this event."
    assert_eq!(gap["event"]["value"]["from"], "2");
    assert_eq!(gap["event"]["value"]["resumeAt"], gap["cursor"]);
    assert_eq!(gap["event"]["value"]["reason"], "evicted");
    let first = n.host.log().first_seq("thread-1");
    assert_eq!(gap["cursor"], (first - 1).to_string().as_str());
    // "The stream continues after it."
    assert_eq!(frames[2]["cursor"], first.to_string().as_str());
    assert_eq!(frames.len(), 2 + (head - first + 1) as usize);
}

#[test]
fn file_log_cursors_survive_a_restart_and_truncation_yields_reason_truncated() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let head;
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        n.host.control(n.now, None, PROMPT, "r", None);
        n.pump();
        reply(&mut n, "Hi");
        head = n.host.log().head_seq("thread-1");
    }
    // "A cursor works on every server and after a restart only on a durable host"
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    assert_eq!(n.host.log().head_seq("thread-1"), head);
    assert_eq!(
        n.host
            .messages("thread-1")
            .iter()
            .map(|m| m.text())
            .collect::<Vec<_>>(),
        vec!["Hello", "Hi"]
    );
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            None,
            Some("3"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(frames[1]["cursor"], "4");
    assert_eq!(frames.len() as u64, 1 + head - 3);
    // New events continue the sequence, and a new run id does not collide.
    n.host.control(
        n.now,
        None,
        br#"{"threadId":"thread-1","input":{"op":"prompt","message":"again"}}"#,
        "r",
        None,
    );
    n.pump();
    assert_eq!(n.turns[0].operation_id, "op-2");
    // "A truncate of the log removes old records" → reason truncated.
    n.host.log_mut().truncate("thread-1", 5).unwrap();
    let c = n
        .host
        .open_sse(
            n.now,
            Some("thread-1"),
            Some("2"),
            None,
            Some("2"),
            None,
            "r",
        )
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    assert_eq!(
        frames[1]["event"]["value"],
        json(r#"{"from":"2","resumeAt":"5","reason":"truncated"}"#)
    );
    assert_eq!(frames[2]["cursor"], "6");
    drop(n);
    // The truncation itself survives a restart.
    let log = FileLog::open(&dir).unwrap();

    assert_eq!(log.first_seq("thread-1"), 6);
    assert_eq!(log.gap_reason(), GapReason::Truncated);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET host-events` reads the host's own bounded log. A reader that fell behind what that
/// log still has must not stall silently: like a thread stream ("the stream sends one
/// CUSTOM event with the name harness.gap, and continues from the first event that it
/// has"), it gets a gap with reason evicted, then the rest.
#[test]
fn a_host_events_reader_behind_evicted_status_events_gets_a_gap_then_the_rest() {
    let cfg = HostConfig {
        max_host_events: 4,
        ..sse_cfg(1.0)
    };
    let mut n = Net::new(Host::new(cfg, MemoryLog::default()));
    let h = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.stalled.push(h);
    n.pump();
    // Five threads: ten status changes, more than the four the host keeps.
    for i in 0..5 {
        let body = format!(r#"{{"threadId":"t-{i}","input":{{"op":"prompt","message":"x"}}}}"#);
        assert_eq!(
            n.host
                .control(n.now, None, body.as_bytes(), "r", None)
                .status,
            200
        );
    }
    n.pump();
    // The reader reads again.
    n.stalled.clear();
    let in_flight = n.host.in_flight(h);
    n.host.sent(n.now, h, in_flight);
    n.pump();
    let frames = data_frames(&n.take(h));
    assert_eq!(frames[0]["type"], "harness.hello");
    let gap = &frames[1]["event"];
    assert_eq!(gap["name"], "harness.gap", "{frames:?}");
    assert_eq!(gap["value"]["from"], "0");
    assert_eq!(gap["value"]["reason"], "evicted");
    assert_eq!(gap["value"]["resumeAt"], frames[1]["cursor"]);
    // Then the four status events the host still has, in order.
    assert_eq!(frames.len(), 2 + 4, "{frames:?}");
    let first: u64 = frames[2]["cursor"].as_str().unwrap().parse().unwrap();
    assert_eq!(frames[1]["cursor"], (first - 1).to_string().as_str());
}

/// `GET host-events` gives each status event an SSE `id` (its cursor), so a reader that
/// lost the stream (a drop, or `slow_consumer`: "After `slow_consumer`, `events()` and
/// `hostEvents()` connect again") comes back with it: "To continue after a disconnect,
/// connect again with the last cursor: On SSE, send it as the `Last-Event-ID` header, or as
/// `?from=`. When you send both, the header wins." and "The stream starts with the first
/// event after that cursor." ("A slow client loses no events.") A cursor the host never
/// handed out (a memory host that restarted) cannot be placed: a gap, then what it has.
#[test]
fn a_host_events_reader_resumes_after_its_last_event_id_and_loses_nothing() {
    let mut n = net();
    let first = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.pump();
    let body =
        |i: usize| format!(r#"{{"threadId":"t-{i}","input":{{"op":"prompt","message":"x"}}}}"#);
    n.host.control(n.now, None, body(0).as_bytes(), "r", None);
    n.pump();
    let seen = data_frames(&n.take(first));
    let cursors: Vec<String> = seen[1..]
        .iter()
        .map(|f| f["cursor"].as_str().unwrap().to_owned())
        .collect();
    assert!(!cursors.is_empty(), "{seen:?}");
    let last = cursors.last().unwrap().clone();
    // The reader goes; status changes happen while it is away.
    n.host.disconnect(first);
    for i in 1..3 {
        n.host.control(n.now, None, body(i).as_bytes(), "r", None);
        n.pump();
    }
    let status = |frames: &[Value]| -> Vec<(String, String)> {
        frames
            .iter()
            .filter(|f| f["type"] == "harness.event")
            .map(|f| {
                let v = &f["event"]["value"];
                (
                    v["threadId"].as_str().unwrap_or_default().to_owned(),
                    v["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    // Everything after the last cursor, nothing before it: by the header, by ?from=, and
    // the header over ?from= when both come.
    let mut resumed = Vec::new();
    for (from, last_event_id) in [
        (None, Some(last.as_str())),
        (Some(last.as_str()), None),
        (Some("0"), Some(last.as_str())),
    ] {
        let c = n
            .host
            .open_host_events(n.now, Some("2"), from, last_event_id, None, "r")
            .unwrap();
        n.pump();
        let frames = data_frames(&n.take(c));
        assert_eq!(frames[0], json(r#"{"type":"harness.hello","v":2}"#));
        let after: u64 = last.parse().unwrap();
        for f in &frames[1..] {
            let cursor: u64 = f["cursor"].as_str().unwrap().parse().unwrap();
            assert!(
                cursor > after,
                "cursor {cursor} replayed after {after}: {frames:?}"
            );
        }
        let got = status(&frames);
        assert!(
            got.iter().any(|(t, _)| t == "t-1") && got.iter().any(|(t, _)| t == "t-2"),
            "the status changes while away are lost: {frames:?}"
        );
        assert!(!got.iter().any(|(t, _)| t == "t-0"), "{frames:?}");
        resumed.push(got);
        n.host.disconnect(c);
    }
    assert_eq!(resumed[0], resumed[1]);
    assert_eq!(resumed[0], resumed[2]);
    // No cursor: the stream starts now, as before.
    let live = n
        .host
        .open_host_events(n.now, Some("2"), None, None, None, "r")
        .unwrap();
    n.pump();
    assert_eq!(data_frames(&n.take(live)).len(), 1);
    // A cursor the host never handed out: one gap (it names the cursor), then what it has.
    let c = n
        .host
        .open_host_events(n.now, Some("2"), None, Some("999999"), None, "r")
        .unwrap();
    n.pump();
    let frames = data_frames(&n.take(c));
    let gap = &frames[1]["event"];
    assert_eq!(gap["name"], "harness.gap", "{frames:?}");
    assert_eq!(gap["value"]["from"], "999999");
    assert_eq!(gap["value"]["resumeAt"], frames[1]["cursor"]);
    assert_eq!(
        status(&frames[2..]).len(),
        cursors.len() + resumed[0].len(),
        "{frames:?}"
    );
}

/// A record of a durable log that no longer reads (a corrupt line in the middle of the
/// file, garbage written after the last record) is an event "the server no longer has":
/// "Then the stream sends one `CUSTOM` event with the name `harness.gap`, and continues
/// from the first event that it has", with "`resumeAt` … the cursor of this event. The
/// stream continues after it." Closing with `internal` ("connect again from the last
/// cursor") sent every reader behind the record back to the same record, for ever.
#[test]
fn a_record_that_no_longer_reads_is_a_gap_not_a_stream_that_never_passes_it() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let mut n = Net::new(Host::new(
            HostConfig::default(),
            FileLog::open(&dir).unwrap(),
        ));
        for i in 1..=3 {
            n.host
                .emit(
                    n.now,
                    "t",
                    "op",
                    AguiEvent::text_content("m", format!("{i}")),
                )
                .unwrap();
        }
    }
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The middle record is overwritten in place, and garbage follows the last one.
    let bad = format!(
        "{}\n{}\n{}\ngarbage\n",
        lines[0],
        "x".repeat(lines[1].len()),
        lines[2]
    );
    std::fs::write(&file, bad).unwrap();
    let mut n = Net::new(Host::new(
        HostConfig::default(),
        FileLog::open(&dir).unwrap(),
    ));
    let after = n
        .host
        .emit(n.now, "t", "op", AguiEvent::text_content("m", "after"))
        .unwrap();
    assert_eq!(after.as_str(), "5");
    for from in [None, Some("1")] {
        let c = n
            .host
            .open_sse(n.now, Some("t"), None, from, None, None, "r")
            .unwrap();
        n.pump();
        let frames = data_frames(&n.take(c));
        let seen: Vec<(String, String)> = frames
            .iter()
            .skip(1)
            .map(|f| {
                let ev = &f["event"];
                let what = if ev["name"] == "harness.gap" {
                    format!(
                        "gap {} {} {}",
                        ev["value"]["from"], ev["value"]["resumeAt"], ev["value"]["reason"]
                    )
                } else {
                    ev["delta"].to_string()
                };
                (f["cursor"].as_str().unwrap().to_owned(), what)
            })
            .collect();
        let mut want = vec![
            ("2".into(), r#"gap "1" "2" "truncated""#.into()),
            ("3".into(), r#""3""#.into()),
            ("4".into(), r#"gap "3" "4" "truncated""#.into()),
            ("5".into(), r#""after""#.into()),
        ];
        if from.is_none() {
            want.insert(0, ("1".into(), r#""1""#.into()));
        }
        assert_eq!(seen, want, "from {from:?}");
        assert_eq!(n.closed(c), None, "from {from:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
