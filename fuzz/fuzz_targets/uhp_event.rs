//! harness-uhp: arbitrary data payloads through `StreamEvent::parse` never panic, and every
//! accessor and the typed view work on whatever decodes.
#![no_main]

use harness_uhp::{StreamEvent, TaskAccumulator};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let mut task = TaskAccumulator::new();
    match StreamEvent::parse(text) {
        Ok(ev) => {
            let _ = (
                ev.kind(),
                ev.missing_field(),
                ev.delta(),
                ev.text(),
                ev.to_value(),
            );
            task.add(&ev);
            task.add(&ev);
        }
        Err(f) => task.add_finding(&f),
    }
    let _ = task.summary();
});
