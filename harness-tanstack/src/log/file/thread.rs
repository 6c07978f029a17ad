//! A thread's file as the log knows it: where its records are (a sparse read index), the
//! open file while it is in the pool, its newest records; reading records back.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::format::{parse_line, truncated_marker};
use crate::log::{LogError, LogRecord};

/// A mark of the read index every this many records…
pub(super) const MARK_RECORDS: u64 = 64;
/// …or this many bytes, whichever comes first: a read skips less than this many bytes.
pub(super) const MARK_BYTES: u64 = 64 << 10;

/// What the log knows of one thread. Kept for every thread of the folder (a few hundred
/// bytes); the open file, the read index and the cached records come and go.
#[derive(Debug)]
pub(super) struct FileThread {
    pub(super) path: PathBuf,
    /// The sequence number of the first record.
    pub(super) first: u64,
    /// The records of the file.
    pub(super) count: u64,
    /// End of file: the end of the last whole record.
    pub(super) end: u64,
    /// The length of the file as this log last saw it (a torn tail past `end` included).
    pub(super) len: u64,
    /// The file may hold bytes past `end`: a torn last line found at open, or an append
    /// that failed and so did cutting the file back. The next write cuts them first (and
    /// fails when it cannot).
    pub(super) torn: bool,
    /// The file, opened to read and append, while it is in the pool.
    pub(super) file: Option<File>,
    /// Where the records are, while it is in memory.
    pub(super) index: Option<Index>,
    /// The newest records, rendered.
    pub(super) cache: VecDeque<LogRecord>,
    /// The bytes of `cache`.
    pub(super) cache_bytes: usize,
}

/// Where the records of a thread are in its file, sparsely: the offset of one record every
/// [`MARK_RECORDS`] records or [`MARK_BYTES`] bytes. A read starts at the mark before its
/// record (or where the last read ended) and skips the lines in between.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// `(seq, offset)`, ascending.
    pub(super) marks: Vec<(u64, u64)>,
    /// The record after the last one read, and its offset: sequential reads start there.
    pub(super) next: Option<(u64, u64)>,
}

impl Index {
    /// Adds the record `seq` at `offset` when it is far enough from the last mark.
    pub(super) fn note(&mut self, seq: u64, offset: u64) {
        let far = self
            .marks
            .last()
            .is_none_or(|&(s, o)| seq - s >= MARK_RECORDS || offset - o >= MARK_BYTES);
        if far {
            self.marks.push((seq, offset));
        }
    }

    /// Where to start reading for the record `seq`: a record at or before it, and its offset.
    pub(super) fn start_for(&self, seq: u64) -> Option<(u64, u64)> {
        let i = self.marks.partition_point(|&(s, _)| s <= seq);
        let mark = i.checked_sub(1).and_then(|i| self.marks.get(i)).copied();
        match (mark, self.next) {
            (Some(m), Some(n)) if n.0 <= seq && n.0 >= m.0 => Some(n),
            (m, _) => m,
        }
    }
}

impl FileThread {
    pub(super) fn head(&self) -> u64 {
        (self.first + self.count).saturating_sub(1)
    }

    /// The open file (the caller put it in the pool).
    pub(super) fn file(&mut self) -> Result<&mut File, LogError> {
        self.file
            .as_mut()
            .ok_or_else(|| LogError::Io("thread file not open".into()))
    }

    /// Fails when the file is not the length this log wrote: another writer (a second
    /// [`FileLog`] on the folder, another process) appended to it or cut it. Writing then
    /// would give a cursor the file already has to a second event.
    pub(super) fn check_alone(&mut self) -> Result<(), LogError> {
        let (len, end) = (self.file()?.metadata()?.len(), self.len);
        if len == end {
            return Ok(());
        }
        Err(LogError::Io(format!(
            "{} is {len} bytes, this log wrote {end}: another writer has it",
            self.path.display()
        )))
    }

    pub(super) fn drop_cache(&mut self) -> usize {
        self.cache.clear();
        std::mem::take(&mut self.cache_bytes)
    }
}

/// The offset of the last `byte` before `before` in a file, reading back from it a block at
/// a time.
pub(super) fn last_byte_before(file: &mut File, before: u64, byte: u8) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 << 10];
    let mut end = before;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = usize::try_from(end - start).unwrap_or(buf.len());
        let chunk = &mut buf[..n];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == byte) {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// Up to `n` bytes of a file from `offset`.
pub(super) fn read_prefix(file: &mut File, offset: u64, n: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    file.seek(SeekFrom::Start(offset))?;
    file.take(n).read_to_end(&mut out)?;
    Ok(out)
}

/// Reads the lines of a file up to `end`: the read index, and the number of records.
pub(super) fn scan(file: &mut File, end: u64, first: u64) -> Result<(Index, u64), LogError> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::with_capacity(64 << 10, file.take(end));
    let mut index = Index::default();
    let mut line = Vec::new();
    let (mut pos, mut count) = (0u64, 0u64);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        if !body.is_empty() && truncated_marker(body).is_none() {
            index.note(first + count, pos);
            count += 1;
        }
        pos += n as u64;
    }
    Ok((index, count))
}

/// Reads the record `seq` of an indexed, open thread: its offset and the record. The read
/// starts at the index mark before it (or where the last read ended).
pub(super) fn read_record(t: &mut FileThread, seq: u64) -> Result<(u64, LogRecord), LogError> {
    let start = t
        .index
        .as_ref()
        .and_then(|i| i.start_for(seq))
        .ok_or_else(|| LogError::Corrupt(format!("record {seq} is not in the index")))?;
    let end = t.end;
    let file = t.file()?;
    file.seek(SeekFrom::Start(start.1))?;
    let mut reader = BufReader::new(file.take(end.saturating_sub(start.1)));
    let (mut at, mut pos) = start;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(LogError::Corrupt(format!("record {seq} is past the end")));
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        if body.is_empty() || truncated_marker(body).is_some() {
            pos += n as u64;
            continue;
        }
        if at == seq {
            let (_, got, _, rec) = parse_line(body)?;
            if got != seq {
                return Err(LogError::Corrupt(format!(
                    "expected record {seq}, found {got}"
                )));
            }
            if let Some(i) = t.index.as_mut() {
                i.next = Some((seq + 1, pos + n as u64));
            }
            return Ok((pos, rec));
        }
        at += 1;
        pos += n as u64;
    }
}
