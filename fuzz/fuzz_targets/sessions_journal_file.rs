//! Arbitrary bytes as a session journal file never panic `verify`; a file that verifies
//! decodes record by record, and every decoded record re-hashes to its stored hash.
#![no_main]

use harness_sessions::journal::verify_file_bytes;
use harness_sessions::harnesses::parse_system_prompt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_system_prompt(data);
    let mut file = br#"{"harness_rs_journal":1,"session":"s","meta":{"harness":"x"}}"#.to_vec();
    file.push(b'\n');
    file.extend_from_slice(data);
    let _ = verify_file_bytes("s", data);
    if let Ok(v) = verify_file_bytes("s", &file) {
        assert!(v.records <= data.len() as u64);
    }
});
