//! Newline-delimited JSON: one JSON value per line, the framing of the stdio transports.
//!
//! [`NdjsonDecoder`] holds partial lines across pushes, tolerates CRLF, skips blank lines and
//! one UTF-8 BOM at the start of the stream (RFC 8259 §8.1 allows it; Windows writers send
//! one), and bounds the length of a line; a line that is not valid JSON (or not the type asked for) is
//! an error for that line only. [`NdjsonEncoder`] writes compact JSON, one value per line.
//! The decoder is driven as [`crate::run_loop`] states: `push`, drain `poll_line`/`poll`.
//!
//! ```
//! use harness_core::ndjson::{NdjsonDecoder, NdjsonEncoder};
//! use serde_json::{json, Value};
//!
//! let mut wire = Vec::new();
//! NdjsonEncoder::encode(&mut wire, &json!({"type": "harness.subscribe", "v": 2}))?;
//! wire.extend_from_slice(b"\r\n{not json}\n{\"type\":\"harness.ping\"}");
//!
//! let mut dec = NdjsonDecoder::new();
//! dec.push(&wire);
//! assert_eq!(dec.poll::<Value>()?.unwrap()["v"], 2);
//! assert!(dec.poll::<Value>().is_err());          // line 3 only; the decoder goes on
//! assert_eq!(dec.poll::<Value>()?, None);          // the last line has no LF yet
//! dec.finish();                                    // end of input: it is a line after all
//! assert_eq!(dec.poll::<Value>()?.unwrap()["type"], "harness.ping");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::Serialize;

/// The UTF-8 byte order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

use crate::buffer::InputBuffer;
use serde::de::DeserializeOwned;

/// Limits of an [`NdjsonDecoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdjsonConfig {
    /// Longest line accepted, without its line end. Default 16 MiB.
    pub max_line_bytes: usize,
}

impl Default for NdjsonConfig {
    fn default() -> Self {
        NdjsonConfig {
            max_line_bytes: 16 << 20,
        }
    }
}

/// An error for one line of an NDJSON stream; the decoder goes on with the next line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NdjsonError {
    /// The line was longer than the limit; it was dropped.
    #[error("NDJSON line {line} is longer than {limit} bytes")]
    LineTooLong {
        /// 1-based line number in the stream.
        line: u64,
        /// The configured `max_line_bytes`.
        limit: usize,
    },
    /// The line is not valid JSON, or not a value of the type asked for.
    #[error("NDJSON line {line}: {message}")]
    Json {
        /// 1-based line number in the stream.
        line: u64,
        /// serde_json's description of the problem (with its column).
        message: String,
    },
}

impl NdjsonError {
    /// The 1-based number of the line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            NdjsonError::LineTooLong { line, .. } | NdjsonError::Json { line, .. } => *line,
        }
    }
}

/// A sans-IO decoder of newline-delimited JSON.
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    cfg: NdjsonConfig,
    input: InputBuffer,
    /// Dropping the rest of an over-long line.
    dropping: bool,
    /// No more input: the unterminated tail is the last line.
    eof: bool,
    /// Lines seen so far (blank ones included).
    line_no: u64,
}

impl NdjsonDecoder {
    /// A decoder with the default limit (16 MiB per line).
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given limit.
    pub fn with_config(cfg: NdjsonConfig) -> Self {
        NdjsonDecoder {
            cfg,
            ..Self::default()
        }
    }

    /// Appends input bytes. Never fails and never parses.
    pub fn push(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Marks the end of input: an unterminated last line becomes a line like the others.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Bytes pushed and not yet consumed.
    pub fn buffered_bytes(&self) -> usize {
        self.input.pending()
    }

    /// The next non-blank line, without its line end (LF or CRLF), not parsed.
    pub fn poll_line(&mut self) -> Result<Option<&[u8]>, NdjsonError> {
        loop {
            let (start, end) = match memchr::memchr(b'\n', &self.input.buf[self.input.scan..]) {
                Some(off) => {
                    let end = self.input.scan + off;
                    let start = self.input.pos;
                    self.input.consume_through(end);
                    (start, end)
                }
                None if self.eof && self.input.pos < self.input.buf.len() => {
                    let start = self.input.pos;
                    self.input.skip_all();
                    (start, self.input.pos)
                }
                None => {
                    self.input.scan = self.input.buf.len();
                    // A CR last may be the first half of a CRLF: not the line's.
                    let mut held = match self.input.buf[self.input.pos..] {
                        [.., b'\r'] => self.input.pending() - 1,
                        _ => self.input.pending(),
                    };
                    if self.line_no == 0 {
                        // Nor is a BOM the first line may start with (an early report
                        // only: the whole line is measured exactly at its line end).
                        held = held.saturating_sub(BOM.len());
                    }
                    if self.dropping {
                        self.input.skip_all();
                    } else if held > self.cfg.max_line_bytes {
                        self.input.skip_all();
                        self.dropping = true;
                        self.line_no += 1;
                        return Err(NdjsonError::LineTooLong {
                            line: self.line_no,
                            limit: self.cfg.max_line_bytes,
                        });
                    }
                    return Ok(None);
                }
            };
            if self.dropping {
                self.dropping = false; // the rest of a line already reported
                continue;
            }
            self.line_no += 1;
            let (mut lo, mut hi) = (start, end);
            if self.input.buf[lo..hi].ends_with(b"\r") {
                hi -= 1;
            }
            if self.line_no == 1 && self.input.buf[lo..hi].starts_with(BOM) {
                lo += BOM.len(); // one BOM at the start of the stream (RFC 8259 §8.1)
            }
            if hi - lo > self.cfg.max_line_bytes {
                return Err(NdjsonError::LineTooLong {
                    line: self.line_no,
                    limit: self.cfg.max_line_bytes,
                });
            }
            if self.input.buf[lo..hi]
                .iter()
                .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
            {
                continue; // blank lines are skipped
            }
            return Ok(Some(&self.input.buf[lo..hi]));
        }
    }

    /// The next line parsed as a `T`. A line that does not parse is an error for that line;
    /// the next call goes on with the next line.
    pub fn poll<T: DeserializeOwned>(&mut self) -> Result<Option<T>, NdjsonError> {
        let Some(line) = self.poll_line()? else {
            return Ok(None);
        };
        match serde_json::from_slice(line) {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(NdjsonError::Json {
                line: self.line_no,
                message: e.to_string(),
            }),
        }
    }

    /// The 1-based number of the last line returned or reported.
    pub fn line_number(&self) -> u64 {
        self.line_no
    }
}

/// Writes one JSON value per line.
#[derive(Clone, Copy, Debug, Default)]
pub struct NdjsonEncoder;

impl NdjsonEncoder {
    /// Appends `value` as compact JSON and a LF. Compact JSON never holds a raw line break
    /// (strings escape theirs), so the line is always one line. On error (a value serde_json
    /// cannot write, such as a map with non-string keys) nothing is appended.
    pub fn encode<T: Serialize + ?Sized>(
        out: &mut Vec<u8>,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let len = out.len();
        if let Err(e) = serde_json::to_writer(&mut *out, value) {
            out.truncate(len); // never half a line: the next frame would join it
            return Err(e);
        }
        out.push(b'\n');
        Ok(())
    }
}
