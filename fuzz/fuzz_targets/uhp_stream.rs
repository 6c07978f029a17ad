//! harness-uhp: arbitrary bytes through the stream decoder and the task accumulator never
//! panic, and splitting them at an arbitrary point changes nothing.
#![no_main]

use harness_core::sse::SseConfig;
use harness_uhp::{StreamDecoder, TaskAccumulator};
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]]) -> String {
    let mut dec = StreamDecoder::with_config(SseConfig {
        max_line_bytes: 4096,
        max_event_bytes: 8192,
    });
    let mut task = TaskAccumulator::new();
    let mut out = Vec::new();
    let drain = |dec: &mut StreamDecoder, task: &mut TaskAccumulator, out: &mut Vec<String>| loop {
        match dec.poll_event() {
            Ok(Some(ev)) => {
                out.push(format!("{:?}", ev.kind()));
                task.add(&ev);
            }
            Ok(None) => break,
            Err(f) => {
                out.push(f.to_string());
                task.add_finding(&f);
            }
        }
    };
    for c in chunks {
        dec.push(c);
        drain(&mut dec, &mut task, &mut out);
    }
    let end = dec.finish();
    drain(&mut dec, &mut task, &mut out);
    if let Err(f) = end {
        task.add_finding(&f);
    }
    format!(
        "{out:?}\n{}",
        serde_json::to_string(&task.summary()).unwrap_or_default()
    )
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let body = &data[1..];
    let split = (usize::from(data[0]) * 7).min(body.len());
    assert_eq!(run(&[body]), run(&[&body[..split], &body[split..]]));
});
