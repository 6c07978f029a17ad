//! Arbitrary bytes never panic the NDJSON decoder, and neither the chunking nor the path
//! (`push` + `poll`, or in place with `feed`, value by value or with `values`' kept
//! deserializer) changes what comes out.
#![no_main]

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder, NdjsonError};
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

/// The same through `feed` and `next_value` (or `values`).
fn run_fed(chunks: &[&[u8]], kept: bool) -> Vec<String> {
    let mut dec = NdjsonDecoder::with_config(NdjsonConfig { max_line_bytes: 64 });
    let mut out = Vec::new();
    let mut put = |v: Result<serde_json::Value, NdjsonError>| match v {
        Ok(v) => out.push(v.to_string()),
        Err(e) => out.push(format!("error {e}")),
    };
    for c in chunks {
        let mut feed = dec.feed(c);
        if kept {
            feed.values::<serde_json::Value>().for_each(&mut put);
        } else {
            while let Some(v) = feed.next_value::<serde_json::Value>() {
                put(v);
            }
        }
    }
    dec.finish();
    loop {
        match dec.poll::<serde_json::Value>() {
            Ok(Some(v)) => out.push(v.to_string()),
            Ok(None) => break,
            Err(e) => out.push(format!("error {e}")),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let body = &data[1..];
    let split = (usize::from(data[0]) % data.len()).min(body.len());
    let whole = run(&[body]);
    assert_eq!(whole, run(&[&body[..split], &body[split..]]));
    assert_eq!(whole, run_fed(&[&body[..split], &body[split..]], false));
    assert_eq!(whole, run_fed(&[&body[..split], &body[split..]], true));
});
