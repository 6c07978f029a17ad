//! The files' format: record lines (`harness.event` frames), the truncation marker, and the
//! names of a thread's files.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::log::{LogError, LogRecord};

pub(super) const DIGEST_PREFIX: &str = "sha256-";

/// The longest thread key (in bytes) whose files are named by its hex form: the hex and the
/// longest suffix, `.harness-owner`, fit in a file name of 255 bytes.
pub(super) const HEX_NAME_MAX: usize = 120;

/// How every record line starts: its cursor follows.
pub(super) const RECORD_HEAD: &[u8] = b"{\"type\":\"harness.event\",\"cursor\":\"";

/// The name of a thread's files, before their suffix: the hex form of the key, or the
/// digest of a long one (see [`FileLog`]).
pub(super) fn file_stem(key: &str) -> String {
    if key.len() <= HEX_NAME_MAX {
        return hex(key);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut stem = String::with_capacity(DIGEST_PREFIX.len() + 64);
    stem.push_str(DIGEST_PREFIX);
    for b in digest {
        stem.push_str(&format!("{b:02x}"));
    }
    stem
}

/// Writes a small file whole: to a temporary file beside it (its extension `tmp_ext`),
/// renamed over it, so that a crash leaves the old content or the new one.
pub(super) fn replace_file(path: &Path, tmp_ext: &str, bytes: &[u8], sync: bool) -> io::Result<()> {
    let tmp = path.with_extension(tmp_ext);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, path)
}

/// The first line of some bytes, without its LF.
pub(super) fn line_of(bytes: &[u8]) -> &[u8] {
    bytes.split(|&b| b == b'\n').next().unwrap_or(bytes)
}

/// The cursor at the head of a record line this log wrote.
pub(super) fn cursor_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(RECORD_HEAD)?;
    let digits = rest.iter().position(|&b| b == b'"')?;
    std::str::from_utf8(rest.get(..digits)?).ok()?.parse().ok()
}

pub(super) fn truncated_marker(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct M {
        #[serde(rename = "truncatedBefore")]
        truncated_before: u64,
    }
    if !line.starts_with(b"{\"truncatedBefore\"") {
        return None;
    }
    serde_json::from_slice::<M>(line)
        .ok()
        .map(|m| m.truncated_before)
}

pub(super) fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Writes one record line at the end of a thread's file (opened to append). `_fail_after`
/// is the test hook of [`FileLog`]: write that many bytes, then fail.
pub(super) fn write_line(
    file: &mut File,
    line: &[u8],
    sync: bool,
    _fail_after: Option<usize>,
) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(n) = _fail_after {
        file.write_all(line.get(..n).unwrap_or(line))?;
        return Err(std::io::Error::other("injected write failure"));
    }
    file.write_all(line)?;
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

/// Reads the thread, seq and operation of a stored frame line.
pub(super) fn parse_line(line: &[u8]) -> Result<(String, u64, String, LogRecord), LogError> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        cursor: &'a str,
        #[serde(rename = "threadId", borrow)]
        thread_id: std::borrow::Cow<'a, str>,
        #[serde(rename = "operationId", borrow)]
        operation_id: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        event: &'a serde_json::value::RawValue,
    }
    let h: Head<'_> = serde_json::from_slice(line).map_err(|e| LogError::Corrupt(e.to_string()))?;
    let seq: u64 = h
        .cursor
        .parse()
        .map_err(|_| LogError::Corrupt(format!("cursor {:?}", h.cursor)))?;
    let rec = LogRecord::render_raw(&h.thread_id, seq, &h.operation_id, h.event.get());
    Ok((
        h.thread_id.into_owned(),
        seq,
        h.operation_id.into_owned(),
        rec,
    ))
}
