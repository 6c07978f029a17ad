//! The event logs: rendering once, eviction, durability across reopen, torn writes,
//! truncation, and thread ids that are not file-name safe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

use harness_tanstack::agui::Event;
use harness_tanstack::catalog::GapReason;
use harness_tanstack::log::{EventLog, FileLog, LogRecord, MemoryLog};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harness-tanstack-log-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_record_is_one_buffer_with_its_three_wire_forms() {
    let r = LogRecord::render("thread-1", 4, "op-1", &Event::text_content("m-1", "Hi"));
    let json = r#"{"type":"harness.event","cursor":"4","threadId":"thread-1","operationId":"op-1","event":{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi"}}"#;
    assert_eq!(&r.sse()[..], format!("id: 4\ndata: {json}\n\n").as_bytes());
    assert_eq!(&r.json()[..], json.as_bytes());
    assert_eq!(&r.ndjson()[..], format!("{json}\n").as_bytes());
    assert_eq!(
        &r.event_json()[..],
        br#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"Hi"}"#
    );
    assert_eq!(r.event().unwrap(), Event::text_content("m-1", "Hi"));
}

#[test]
fn memory_log_evicts_the_oldest_by_count_and_by_bytes() {
    let mut log = MemoryLog::new(3, 1 << 20);
    for i in 0..5 {
        log.append("t", "op", &Event::text_content("m", format!("{i}")))
            .unwrap();
    }
    assert_eq!((log.first_seq("t"), log.head_seq("t")), (3, 5));
    assert!(log.get("t", 2).unwrap().is_none());
    assert_eq!(log.get("t", 3).unwrap().unwrap().seq, 3);
    assert_eq!(log.gap_reason(), GapReason::Evicted);
    let mut small = MemoryLog::new(1000, 300);
    for _ in 0..10 {
        small
            .append("t", "op", &Event::text_content("m", "x".repeat(50)))
            .unwrap();
    }
    assert!(small.first_seq("t") > 1);
    assert!(!small.is_durable());
}

#[test]
fn file_log_survives_reopen_a_torn_write_and_odd_thread_ids() {
    let d = dir("torn");
    let odd = "user/42 ☃ ../etc";
    {
        let mut log = FileLog::open(&d).unwrap();
        for i in 0..3 {
            log.append(odd, "op-1", &Event::text_content("m", format!("{i}")))
                .unwrap();
        }
    }
    // A crash in the middle of a write leaves half a line.
    let file = std::fs::read_dir(&d)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(b"{\"type\":\"harness.ev")
        .unwrap();
    let mut log = FileLog::open(&d).unwrap();
    assert_eq!(log.threads(), vec![odd.to_string()]);
    assert_eq!(log.head_seq(odd), 3);
    let rec = log
        .append(odd, "op-2", &Event::text_content("m", "after"))
        .unwrap();
    assert_eq!(rec.seq, 4);
    drop(log);
    let mut log = FileLog::open(&d).unwrap();
    for seq in 1..=4 {
        // Read from the file itself (a fresh log has an empty cache).
        assert_eq!(log.get(odd, seq).unwrap().unwrap().seq, seq);
    }
    assert!(log.is_durable());
    log.truncate(odd, 2).unwrap();
    assert_eq!((log.first_seq(odd), log.head_seq(odd)), (3, 4));
    assert!(log.get(odd, 2).unwrap().is_none());
    let _ = std::fs::remove_dir_all(&d);
}
