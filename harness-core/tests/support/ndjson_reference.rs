//! The per-line reference the NDJSON property tests hold the in-place paths to: everything
//! pushed, then polled line by line (values with their line numbers, and errors).

use harness_core::ndjson::{NdjsonConfig, NdjsonDecoder, NdjsonError};
use serde_json::Value;

/// A value with the line number it was read at, or a line's error.
pub type Item = Result<(u64, Value), NdjsonError>;

/// Polls `dec` until it needs more bytes.
pub fn drain(dec: &mut NdjsonDecoder, out: &mut Vec<Item>) {
    loop {
        match dec.poll::<Value>() {
            Ok(Some(v)) => out.push(Ok((dec.line_number(), v))),
            Ok(None) => break,
            Err(e) => out.push(Err(e)),
        }
    }
}

/// `bytes` pushed at once, polled, finished and polled again.
pub fn reference(cfg: NdjsonConfig, bytes: &[u8]) -> Vec<Item> {
    let mut dec = NdjsonDecoder::with_config(cfg);
    let mut out = Vec::new();
    dec.push(bytes);
    drain(&mut dec, &mut out);
    dec.finish();
    drain(&mut dec, &mut out);
    out
}
