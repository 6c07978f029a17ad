//! Arbitrary bytes never panic the NDJSON decoder, whatever the chunking.
#![no_main]

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder};
use libfuzzer_sys::fuzz_target;

fn run(chunks: &[&[u8]]) -> Vec<String> {
    let mut dec = NdjsonDecoder::with_config(NdjsonConfig { max_line_bytes: 64 });
    let mut out = Vec::new();
    let drain = |dec: &mut NdjsonDecoder, out: &mut Vec<String>| loop {
        match dec.poll::<serde_json::Value>() {
            Ok(Some(v)) => out.push(v.to_string()),
            Ok(None) => break,
            Err(e) => out.push(format!("error {e}")),
        }
    };
    for c in chunks {
        dec.push(c);
        drain(&mut dec, &mut out);
    }
    dec.finish();
    drain(&mut dec, &mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let body = &data[1..];
    let split = (usize::from(data[0]) % data.len()).min(body.len());
    assert_eq!(run(&[body]), run(&[&body[..split], &body[split..]]));
});
