//! Any JSON that decodes as a journal event seals into a record whose canonical bytes decode
//! back to the same canonical bytes and the same content hash (the chain is stable under a
//! store/load round trip), and nothing panics on the way.
#![no_main]

use harness_core::event::Event;
use harness_sessions::record::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(ev) = serde_json::from_slice::<Event>(data) else {
        return;
    };
    let Ok(rec) = Record::seal(ev, 1, None, 1) else {
        return;
    };
    let back = Record::from_stored(1, None, rec.content_hash, 1, rec.canonical_arc())
        .expect("canonical JSON of an event decodes as an event");
    let again = Record::seal(back.event.clone(), 1, None, 1).expect("reseal");
    assert_eq!(again.canonical(), rec.canonical());
    assert_eq!(again.content_hash, rec.content_hash);
    assert_eq!(back.recompute_hash(), rec.content_hash);
});
