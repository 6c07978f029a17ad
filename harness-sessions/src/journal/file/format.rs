//! The session file's on-disk form: header, fence and record lines, and their verification.

use serde::{Deserialize, Serialize};

use crate::hash::{ContentHash, hex_into};
use crate::journal::{JournalError, SessionMeta};
use crate::record::{Fence, Record, Seq};
use crate::verify::{ChainCheck, HeadPin, Verified, VerifyError};

/// The version a header names.
pub(super) const FORMAT: u32 = 1;

/// The first line of a session's file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Header {
    pub(super) harness_rs_journal: u32,
    pub(super) session: String,
    pub(super) meta: SessionMeta,
}

impl Header {
    /// The header line (with its `\n`) of a new file for `session`.
    pub(super) fn line(session: &str, meta: &SessionMeta) -> Result<Vec<u8>, JournalError> {
        let header = Header {
            harness_rs_journal: FORMAT,
            session: session.to_owned(),
            meta: meta.clone(),
        };
        let mut bytes = serde_json::to_vec(&header).map_err(|e| JournalError::Io(e.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// One parsed line.
pub(super) enum Line<'a> {
    Record(RawRecord<'a>),
    Fence(Fence),
}

/// A record line's parts, borrowed from the line.
pub(super) struct RawRecord<'a> {
    pub(super) seq: Seq,
    pub(super) prev_hash: Option<ContentHash>,
    pub(super) content_hash: ContentHash,
    pub(super) fence: Fence,
    pub(super) event: &'a [u8],
}

fn take(s: &mut &[u8], lit: &[u8]) -> Result<(), &'static str> {
    match s.strip_prefix(lit) {
        Some(rest) => {
            *s = rest;
            Ok(())
        }
        None => Err("unexpected bytes"),
    }
}

fn take_until_quote<'a>(s: &mut &'a [u8]) -> Result<&'a [u8], &'static str> {
    let i = memchr_quote(s).ok_or("unterminated string")?;
    let (v, rest) = s.split_at(i);
    *s = rest;
    Ok(v)
}

fn memchr_quote(s: &[u8]) -> Option<usize> {
    memchr::memchr(b'"', s)
}

fn number(s: &[u8]) -> Result<u64, &'static str> {
    if s.is_empty() || s.len() > 20 || (s.len() > 1 && s[0] == b'0') {
        return Err("bad number");
    }
    let mut n: u64 = 0;
    for &d in s {
        if !d.is_ascii_digit() {
            return Err("bad number");
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or("number out of range")?;
    }
    Ok(n)
}

/// Parses a record or fence line (without its `\n`), strictly in the form this file writes.
pub(super) fn parse_line(line: &[u8]) -> Result<Line<'_>, &'static str> {
    let mut s = line;
    if s.starts_with(b"{\"fence\":\"") {
        take(&mut s, b"{\"fence\":\"")?;
        let f = number(take_until_quote(&mut s)?)?;
        take(&mut s, b"\"}")?;
        if !s.is_empty() || f == 0 {
            return Err("bad fence line");
        }
        return Ok(Line::Fence(f));
    }
    take(&mut s, b"{\"seq\":\"")?;
    let seq = number(take_until_quote(&mut s)?)?;
    take(&mut s, b"\",\"prev_hash\":\"")?;
    let prev = take_until_quote(&mut s)?;
    let prev_hash = if prev.is_empty() {
        None
    } else {
        Some(ContentHash::from_hex(prev).ok_or("bad prev_hash")?)
    };
    take(&mut s, b"\",\"content_hash\":\"")?;
    let content_hash =
        ContentHash::from_hex(take_until_quote(&mut s)?).ok_or("bad content_hash")?;
    take(&mut s, b"\",\"fence\":\"")?;
    let fence = number(take_until_quote(&mut s)?)?;
    take(&mut s, b"\",\"event\":")?;
    let event = s
        .strip_suffix(b"}")
        .ok_or("record line does not end in }")?;
    if !(event.starts_with(b"{") && event.ends_with(b"}")) {
        return Err("event is not an object");
    }
    Ok(Line::Record(RawRecord {
        seq,
        prev_hash,
        content_hash,
        fence,
        event,
    }))
}

/// Lines of a buffer, each with its `\n` (the last one may lack it).
pub(super) struct Lines<'a>(pub(super) &'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let end = memchr::memchr(b'\n', self.0).map_or(self.0.len(), |i| i + 1);
        let (line, rest) = self.0.split_at(end);
        self.0 = rest;
        Some(line)
    }
}

/// Appends the line of record `r` (with its `\n`) to `out`.
pub(super) fn write_record_line(r: &Record, out: &mut Vec<u8>) {
    let mut s = String::with_capacity(200 + r.canonical().len());
    s.push_str("{\"seq\":\"");
    s.push_str(&r.seq.to_string());
    s.push_str("\",\"prev_hash\":\"");
    if let Some(p) = &r.prev_hash {
        hex_into(&p.0, &mut s);
    }
    s.push_str("\",\"content_hash\":\"");
    hex_into(&r.content_hash.0, &mut s);
    s.push_str("\",\"fence\":\"");
    s.push_str(&r.fence.to_string());
    s.push_str("\",\"event\":");
    s.push_str(r.canonical());
    s.push_str("}\n");
    out.extend_from_slice(s.as_bytes());
}

/// The line a writer's fence `f` is recorded on.
pub(super) fn fence_line(f: Fence) -> Vec<u8> {
    format!("{{\"fence\":\"{f}\"}}\n").into_bytes()
}

/// Why a line after the header does not hold.
pub(super) enum LineFault {
    /// Not in the form this file writes, or a fence line that does not increase.
    Malformed(&'static str),
    /// A record that breaks the chain (seq, link, content hash or fence).
    Chain(VerifyError),
}

/// Checks the lines after the header in order: their form, that fence lines increase, that
/// each record carries the fence of the last fence line before it, and the hash chain.
#[derive(Default)]
pub(super) struct BodyCheck {
    chain: ChainCheck,
    /// The fence of the last fence line.
    marker: Fence,
}

impl BodyCheck {
    /// The seq the next record should have.
    pub(super) fn next_seq(&self) -> Seq {
        self.chain.last_seq + 1
    }

    /// Checks one line (without its `\n`) and returns it parsed.
    pub(super) fn line<'a>(&mut self, body: &'a [u8]) -> Result<Line<'a>, LineFault> {
        let line = parse_line(body).map_err(LineFault::Malformed)?;
        match &line {
            Line::Fence(f) => {
                if *f <= self.marker {
                    return Err(LineFault::Malformed("fence line does not increase"));
                }
                self.marker = *f;
            }
            Line::Record(r) => {
                if r.fence != self.marker {
                    return Err(LineFault::Chain(VerifyError::Fence {
                        seq: r.seq,
                        fence: r.fence,
                        expected: self.marker,
                    }));
                }
                // No UTF-8 check needed here: the hash covers the bytes as written.
                self.chain
                    .check(
                        r.seq,
                        r.prev_hash.as_ref(),
                        &r.content_hash,
                        r.fence,
                        r.event,
                    )
                    .map_err(LineFault::Chain)?;
            }
        }
        Ok(line)
    }

    /// The chain that held, once it reached the pinned head (if any).
    pub(super) fn finish(self) -> Result<Verified, VerifyError> {
        self.chain.finish()
    }
}

/// Verifies a session file's bytes: header, every line's form, seqs, links, content hashes
/// and fences (each record must carry the fence of the last fence line before it).
pub fn verify_file_bytes(session: &str, bytes: &[u8]) -> Result<Verified, VerifyError> {
    check_file_bytes(session, bytes, None)
}

/// [`verify_file_bytes`], and the file reaches `pin` and holds it (see
/// [`verify_records_head`](crate::verify::verify_records_head)).
pub fn verify_file_bytes_head(
    session: &str,
    bytes: &[u8],
    pin: &HeadPin,
) -> Result<Verified, VerifyError> {
    check_file_bytes(session, bytes, Some(*pin))
}

fn check_file_bytes(
    session: &str,
    bytes: &[u8],
    pin: Option<HeadPin>,
) -> Result<Verified, VerifyError> {
    let mut c = BodyCheck::default();
    c.chain.pin = pin;
    let mut lines = Lines(bytes);
    let malformed = |seq: Seq, line: u64, reason: &str| VerifyError::Malformed {
        seq,
        line,
        reason: reason.to_owned(),
    };
    let header = lines.next().ok_or_else(|| malformed(1, 1, "no header"))?;
    if !header.ends_with(b"\n") {
        return Err(VerifyError::Torn { seq: 1, line: 1 });
    }
    match serde_json::from_slice::<Header>(header) {
        Ok(h) if h.harness_rs_journal == FORMAT && h.session == session => {}
        _ => return Err(malformed(1, 1, "bad header")),
    }
    for (i, line) in lines.enumerate() {
        let lineno = i as u64 + 2;
        let next = c.next_seq();
        let Some(body) = line.strip_suffix(b"\n") else {
            return Err(VerifyError::Torn {
                seq: next,
                line: lineno,
            });
        };
        c.line(body).map_err(|f| match f {
            LineFault::Malformed(r) => malformed(next, lineno, r),
            LineFault::Chain(e) => e,
        })?;
    }
    c.finish()
}
