//! Arbitrary bytes as a session journal file (and as a chat config) never panic `verify`,
//! opening the file or reading it; a file that verifies and reads back holds records that
//! each re-hash to their stored hash, as many as `verify` counted.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};

use harness_sessions::harnesses::parse_system_prompt;
use harness_sessions::journal::{FileJournal, Journal, verify_file_bytes};
use libfuzzer_sys::fuzz_target;

static RUN: AtomicU64 = AtomicU64::new(0);

fuzz_target!(|data: &[u8]| {
    let _ = parse_system_prompt(data);
    let mut file = br#"{"harness_rs_journal":1,"session":"s","meta":{"harness":"x"}}"#.to_vec();
    file.push(b'\n');
    file.extend_from_slice(data);
    let _ = verify_file_bytes("s", data);
    let verified = verify_file_bytes("s", &file);
    if let Ok(v) = &verified {
        assert!(v.records <= data.len() as u64);
    }
    // The same bytes as a file on disk: open (setting a torn tail aside), read, verify.
    let dir = std::env::temp_dir().join(format!(
        "harness-sessions-fuzz-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::create_dir_all(&dir).is_err()
        || std::fs::write(dir.join("s.journal"), &file).is_err()
    {
        return;
    }
    if let Ok(j) = FileJournal::open(&dir) {
        let head = j.head("s");
        if let (Ok(records), Ok(v)) = (j.read("s", 1, None), &verified) {
            for r in &records {
                assert_eq!(r.recompute_hash(), r.content_hash, "record {}", r.seq);
            }
            assert_eq!(records.len() as u64, v.records);
            assert_eq!(head.map(|h| h.seq).ok(), Some(v.records));
        }
        let _ = j.verify("s");
    }
    let _ = std::fs::remove_dir_all(&dir);
});
