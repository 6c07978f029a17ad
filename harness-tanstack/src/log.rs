//! The event log of each thread, behind one trait: [`MemoryLog`] (bounded, evicts the oldest
//! events: a client behind them gets `harness.gap` with reason `evicted`) and [`FileLog`]
//! (durable, the embedded default: cursors survive a restart, and a truncate yields reason
//! `truncated`).
//!
//! A record is stored already rendered: the `harness.event` frame is serialized once, at
//! append, into one buffer that holds its SSE form (`id: N\ndata: {…}\n\n`); the WebSocket
//! text and the NDJSON line are slices of it. Fan-out to any number of subscribers clones a
//! [`Bytes`] handle.
//!
//! Cursors are the decimal sequence number of the record in its thread (`1`, `2`, …). They
//! are the host's own format: clients never parse them (spec: "A cursor is an opaque
//! string. Store the last one, and do not parse it.").
//!
//! The file log does file I/O (it is the storage), and nothing else: no clock, no thread.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use harness_core::Cursor;

use crate::agui::Event;
use crate::catalog::GapReason;

/// One event of a thread's log, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRecord {
    /// Its sequence number in the thread (from 1).
    pub seq: u64,
    /// The run that made it.
    pub operation_id: Arc<str>,
    sse: Bytes,
    json: Range<usize>,
    event: Range<usize>,
}

impl LogRecord {
    /// Renders a record: the `harness.event` frame, once.
    pub fn render(thread_id: &str, seq: u64, operation_id: &str, event: &Event) -> LogRecord {
        let event_json = event.to_json();
        Self::render_raw(thread_id, seq, operation_id, &event_json)
    }

    fn render_raw(thread_id: &str, seq: u64, operation_id: &str, event_json: &str) -> LogRecord {
        let cursor = seq.to_string();
        let mut out = Vec::with_capacity(event_json.len() + thread_id.len() + 96);
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(cursor.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        let start = out.len();
        out.extend_from_slice(b"{\"type\":\"harness.event\",\"cursor\":\"");
        out.extend_from_slice(cursor.as_bytes());
        out.extend_from_slice(b"\",\"threadId\":");
        json_string(&mut out, thread_id);
        out.extend_from_slice(b",\"operationId\":");
        json_string(&mut out, operation_id);
        out.extend_from_slice(b",\"event\":");
        let ev_start = out.len();
        out.extend_from_slice(event_json.as_bytes());
        let ev_end = out.len();
        out.push(b'}');
        let end = out.len();
        out.extend_from_slice(b"\n\n");
        LogRecord {
            seq,
            operation_id: Arc::from(operation_id),
            sse: Bytes::from(out),
            json: start..end,
            event: ev_start..ev_end,
        }
    }

    /// Its cursor.
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.seq.to_string())
    }

    /// The SSE event: `id: <cursor>\ndata: <frame>\n\n`.
    pub fn sse(&self) -> Bytes {
        self.sse.clone()
    }

    /// The frame JSON (a WebSocket text frame).
    pub fn json(&self) -> Bytes {
        self.sse.slice(self.json.clone())
    }

    /// The frame JSON and a LF (an NDJSON line).
    pub fn ndjson(&self) -> Bytes {
        self.sse.slice(self.json.start..self.json.end + 1)
    }

    /// The AG-UI event JSON alone (what `POST run` streams, without a frame around it).
    pub fn event_json(&self) -> Bytes {
        self.sse.slice(self.event.clone())
    }

    /// The frame JSON as text.
    pub fn json_str(&self) -> &str {
        std::str::from_utf8(&self.sse[self.json.clone()]).unwrap_or("")
    }

    /// The AG-UI event, parsed back.
    pub fn event(&self) -> Result<Event, LogError> {
        match crate::frame::HostFrame::from_json(self.json_str()) {
            Ok(crate::frame::HostFrame::Event(f)) => Ok(f.event),
            Ok(_) => Err(LogError::Corrupt("not an event frame".into())),
            Err(e) => Err(LogError::Corrupt(e.message)),
        }
    }
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // ok: serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Why the log failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// File I/O failed.
    #[error("event log I/O: {0}")]
    Io(String),
    /// A stored record does not read.
    #[error("event log record is corrupt: {0}")]
    Corrupt(String),
}

impl From<std::io::Error> for LogError {
    fn from(e: std::io::Error) -> Self {
        LogError::Io(e.to_string())
    }
}

/// The event logs of every thread.
pub trait EventLog: Send {
    /// Appends an event to a thread (creating the thread) and returns its record.
    fn append(
        &mut self,
        thread_id: &str,
        operation_id: &str,
        event: &Event,
    ) -> Result<LogRecord, LogError>;

    /// The record with this sequence number, when the log still has it.
    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError>;

    /// The sequence number of the last record of the thread (0: none yet).
    fn head_seq(&self, thread_id: &str) -> u64;

    /// The sequence number of the first record the log still has (`head_seq + 1` when it
    /// has none). Records before it were dropped.
    fn first_seq(&self, thread_id: &str) -> u64;

    /// Why records before [`first_seq`](Self::first_seq) are gone.
    fn gap_reason(&self) -> GapReason;

    /// The threads that have a log.
    fn threads(&self) -> Vec<String>;

    /// Whether cursors survive a restart of the host.
    fn is_durable(&self) -> bool;

    /// Keeps the user who owns a thread (`membersOnly()`: the user whose input made it), so
    /// that a durable log keeps access rules over a restart. The default keeps nothing.
    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        let _ = (thread_id, owner);
        Ok(())
    }

    /// The owner [`set_owner`](Self::set_owner) kept, if any.
    fn owner(&self, thread_id: &str) -> Option<String> {
        let _ = thread_id;
        None
    }
}

#[derive(Debug, Default)]
struct MemThread {
    first: u64,
    records: VecDeque<LogRecord>,
    bytes: usize,
}

/// A bounded in-memory log. When a thread holds more than `max_events` records (or
/// `max_bytes` of rendered frames), the oldest are evicted; a client behind them gets
/// `harness.gap` with reason `evicted`. Cursors do not survive a restart.
#[derive(Debug)]
pub struct MemoryLog {
    threads: HashMap<String, MemThread>,
    max_events: usize,
    max_bytes: usize,
}

impl Default for MemoryLog {
    fn default() -> Self {
        MemoryLog::new(100_000, 64 << 20)
    }
}

impl MemoryLog {
    /// A log that keeps at most `max_events` records and `max_bytes` per thread (each at
    /// least 1).
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        MemoryLog {
            threads: HashMap::new(),
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
        }
    }
}

impl EventLog for MemoryLog {
    fn append(
        &mut self,
        thread_id: &str,
        operation_id: &str,
        event: &Event,
    ) -> Result<LogRecord, LogError> {
        let t = self
            .threads
            .entry(thread_id.to_owned())
            .or_insert_with(|| MemThread {
                first: 1,
                ..MemThread::default()
            });
        let seq = t.first + t.records.len() as u64;
        let rec = LogRecord::render(thread_id, seq, operation_id, event);
        t.bytes += rec.sse.len();
        t.records.push_back(rec.clone());
        while t.records.len() > self.max_events || (t.bytes > self.max_bytes && t.records.len() > 1)
        {
            if let Some(old) = t.records.pop_front() {
                t.bytes -= old.sse.len();
                t.first += 1;
            }
        }
        Ok(rec)
    }

    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        let Some(t) = self.threads.get(thread_id) else {
            return Ok(None);
        };
        if seq < t.first {
            return Ok(None);
        }
        let i = usize::try_from(seq - t.first).unwrap_or(usize::MAX);
        Ok(t.records.get(i).cloned())
    }

    fn head_seq(&self, thread_id: &str) -> u64 {
        self.threads
            .get(thread_id)
            .map(|t| (t.first + t.records.len() as u64).saturating_sub(1))
            .unwrap_or(0)
    }

    fn first_seq(&self, thread_id: &str) -> u64 {
        self.threads.get(thread_id).map(|t| t.first).unwrap_or(1)
    }

    fn gap_reason(&self) -> GapReason {
        GapReason::Evicted
    }

    fn threads(&self) -> Vec<String> {
        self.threads.keys().cloned().collect()
    }

    fn is_durable(&self) -> bool {
        false
    }
}

/// How a [`FileLog`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLogConfig {
    /// `fsync` each append (slower, survives a power loss). Default: off (survives a
    /// process restart: the data is in the OS cache).
    pub sync: bool,
    /// Records per thread kept in memory for fast fan-out and reconnects. Default 4096.
    pub cache_records: usize,
}

impl Default for FileLogConfig {
    fn default() -> Self {
        FileLogConfig {
            sync: false,
            cache_records: 4096,
        }
    }
}

#[derive(Debug)]
struct FileThread {
    path: PathBuf,
    file: File,
    /// Sequence number of `offsets[0]`.
    first: u64,
    /// Byte offset and length of each retained record's line (without its LF).
    offsets: Vec<(u64, u32)>,
    /// End of file: the end of the last whole record.
    end: u64,
    /// The file may hold bytes past `end`: an append failed and so did cutting the file
    /// back. The next write cuts them first (and fails when it cannot).
    torn: bool,
    cache: VecDeque<LogRecord>,
}

impl FileThread {
    /// Fails when the file is not the length this log wrote: another writer (a second
    /// [`FileLog`] on the folder, another process) appended to it or cut it. Writing then
    /// would give a cursor the file already has to a second event.
    fn check_alone(&self) -> Result<(), LogError> {
        let len = self.file.metadata()?.len();
        if len == self.end {
            return Ok(());
        }
        Err(LogError::Io(format!(
            "{} is {len} bytes, this log wrote {}: another writer has it",
            self.path.display(),
            self.end
        )))
    }
}

/// A durable log: one append-only NDJSON file per thread in a folder, each line a
/// `harness.event` frame. Cursors survive a restart. [`truncate`](Self::truncate) drops the
/// oldest records; a client behind them gets `harness.gap` with reason `truncated`.
///
/// An append is all or nothing: when its write fails part way (a full disk, a short
/// write, a failed `fsync`), the file is cut back to its length before it, the record gets
/// no sequence number, and the next append takes that number. A crash in the middle of a
/// write leaves a torn last line, which the next [`open`](Self::open) drops.
///
/// One `FileLog` writes a folder at a time. A second one on the same folder (another
/// process, a restart while the old host still runs) is not locked out, but each append
/// first checks that the file is the length this log left it: when another writer wrote
/// to it, the append (and a truncate) fails rather than give a second event a cursor the
/// file already has. Reopen the log to take over.
///
/// A truncated file starts with a marker line `{"truncatedBefore":N}`. The owner of a thread
/// (see [`EventLog::set_owner`]) is kept beside it, in a file of the same name ending in
/// `.harness-owner`.
///
/// Any thread id can be stored. The files of a thread id of up to 120 bytes are named by
/// its hex form (`<hex>.harness-log`, as earlier versions named every file). A longer id
/// does not fit in a file name (255 bytes), so its files are named by its SHA-256
/// (`sha256-<64 hex>.harness-log`), and the id itself is kept beside them, in
/// `sha256-<64 hex>.harness-id`, written before them: a reopen maps each file back to its
/// exact thread id. A digest-named file with no (or a mismatched) id file beside it is not
/// read, as is any file whose name is not one of these.
#[derive(Debug)]
pub struct FileLog {
    dir: PathBuf,
    cfg: FileLogConfig,
    threads: HashMap<String, FileThread>,
    owners: HashMap<String, String>,
    /// Test hook: the next append writes this many bytes of its line, then fails (what a
    /// full disk or a short write leaves behind); with `true`, cutting the file back after
    /// it fails too.
    #[cfg(test)]
    fail_next_write: Option<(usize, bool)>,
}

const SUFFIX: &str = ".harness-log";
const OWNER_SUFFIX: &str = ".harness-owner";
const ID_SUFFIX: &str = ".harness-id";
const DIGEST_PREFIX: &str = "sha256-";
/// The longest thread id (in bytes) whose files are named by its hex form: the hex and the
/// longest suffix, `.harness-owner`, fit in a file name of 255 bytes.
const HEX_NAME_MAX: usize = 120;

/// The name of a thread's files, before their suffix: the hex form of the id, or the
/// digest of a long one (see [`FileLog`]).
fn file_stem(thread_id: &str) -> String {
    if thread_id.len() <= HEX_NAME_MAX {
        return hex(thread_id);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(thread_id.as_bytes());
    let mut stem = String::with_capacity(DIGEST_PREFIX.len() + 64);
    stem.push_str(DIGEST_PREFIX);
    for b in digest {
        stem.push_str(&format!("{b:02x}"));
    }
    stem
}

impl FileLog {
    /// Opens (or creates) the log in `dir`, reading what earlier runs wrote.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileLog, LogError> {
        Self::open_with(dir, FileLogConfig::default())
    }

    /// Opens the log with a configuration.
    pub fn open_with(dir: impl AsRef<Path>, cfg: FileLogConfig) -> Result<FileLog, LogError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        let mut log = FileLog {
            dir: dir.clone(),
            cfg,
            threads: HashMap::new(),
            owners: HashMap::new(),
            #[cfg(test)]
            fail_next_write: None,
        };
        let mut paths = Vec::new();
        for entry in fs::read_dir(&dir)? {
            paths.push(entry?.path());
        }
        // The ids of long thread ids first: the files named by their digest need them.
        let mut long_ids: HashMap<String, String> = HashMap::new();
        for path in &paths {
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(ID_SUFFIX))
                .filter(|s| s.starts_with(DIGEST_PREFIX))
            else {
                continue;
            };
            // A file whose id is not the one its name was made from is not that thread's.
            let Ok(id) = String::from_utf8(fs::read(path)?) else {
                continue;
            };
            if file_stem(&id) == stem {
                long_ids.insert(stem.to_owned(), id);
            }
        }
        let thread_id = |stem: &str| -> Option<String> {
            if stem.starts_with(DIGEST_PREFIX) {
                long_ids.get(stem).cloned()
            } else {
                unhex(stem)
            }
        };
        for path in &paths {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some(id) = name.strip_suffix(OWNER_SUFFIX).and_then(thread_id) {
                let owner = fs::read_to_string(path)?;
                log.owners.insert(id, owner);
            } else if let Some(id) = name.strip_suffix(SUFFIX).and_then(thread_id) {
                let t = Self::load(path)?;
                log.threads.insert(id, t);
            }
        }
        Ok(log)
    }

    /// The path of one of a thread's files. For a long thread id, the id is first kept
    /// beside it (see [`FileLog`]), so that the file can be read back after a restart.
    fn named_path(&self, thread_id: &str, suffix: &str) -> Result<PathBuf, LogError> {
        let stem = file_stem(thread_id);
        if stem.starts_with(DIGEST_PREFIX) {
            let id_path = self.dir.join(format!("{stem}{ID_SUFFIX}"));
            if id_path.exists() {
                // Never two threads in one file (SHA-256 makes a collision infeasible; a
                // tampered id file is caught here too).
                if fs::read(&id_path)? != thread_id.as_bytes() {
                    return Err(LogError::Corrupt(format!(
                        "{stem}{ID_SUFFIX} holds another thread id"
                    )));
                }
            } else {
                let tmp = id_path.with_extension("id-tmp");
                {
                    let mut f = File::create(&tmp)?;
                    f.write_all(thread_id.as_bytes())?;
                    if self.cfg.sync {
                        f.sync_all()?;
                    }
                }
                fs::rename(&tmp, &id_path)?;
            }
        }
        Ok(self.dir.join(format!("{stem}{suffix}")))
    }

    fn load(path: &Path) -> Result<FileThread, LogError> {
        let file = OpenOptions::new().read(true).append(true).open(path)?;
        let mut reader = BufReader::new(file.try_clone()?);
        let mut offsets = Vec::new();
        let mut first = 1;
        let mut pos = 0u64;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let complete = line.last() == Some(&b'\n');
            let body = if complete { &line[..n - 1] } else { &line[..] };
            if !complete {
                // A torn last write: drop it, the file ends before it.
                file.set_len(pos)?;
                break;
            }
            if let Some(before) = truncated_marker(body) {
                if offsets.is_empty() {
                    first = before;
                }
            } else if !body.is_empty() {
                let len = u32::try_from(body.len())
                    .map_err(|_| LogError::Corrupt("record too long".into()))?;
                offsets.push((pos, len));
            }
            pos += n as u64;
        }
        Ok(FileThread {
            path: path.to_path_buf(),
            file,
            first,
            offsets,
            end: pos,
            torn: false,
            cache: VecDeque::new(),
        })
    }

    /// Drops the records of a thread up to and including `through` (a sequence number).
    /// Clients whose cursor is behind the new first record get `harness.gap` with reason
    /// `truncated`.
    pub fn truncate(&mut self, thread_id: &str, through: u64) -> Result<(), LogError> {
        let Some(t) = self.threads.get_mut(thread_id) else {
            return Ok(());
        };
        let head = (t.first + t.offsets.len() as u64).saturating_sub(1);
        let through = through.min(head);
        if through < t.first {
            return Ok(());
        }
        if !t.torn {
            t.check_alone()?;
        }
        let drop_n = usize::try_from(through - t.first + 1).unwrap_or(usize::MAX);
        let keep_from = t.offsets.get(drop_n).map(|o| o.0).unwrap_or(t.end);
        // The whole records only: a torn tail past `end` stays behind.
        let mut rest = Vec::new();
        t.file.seek(SeekFrom::Start(keep_from))?;
        (&mut t.file)
            .take(t.end.saturating_sub(keep_from))
            .read_to_end(&mut rest)?;
        let tmp = t.path.with_extension("tmp");
        let marker = format!("{{\"truncatedBefore\":{}}}\n", through + 1);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(marker.as_bytes())?;
            f.write_all(&rest)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &t.path)?;
        let reloaded = Self::load(&t.path)?;
        let cache: VecDeque<LogRecord> = t.cache.drain(..).filter(|r| r.seq > through).collect();
        *t = reloaded;
        t.cache = cache;
        Ok(())
    }
}

fn truncated_marker(line: &[u8]) -> Option<u64> {
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

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
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
fn write_line(
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
fn parse_line(line: &[u8]) -> Result<(String, u64, String, LogRecord), LogError> {
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

impl EventLog for FileLog {
    fn append(
        &mut self,
        thread_id: &str,
        operation_id: &str,
        event: &Event,
    ) -> Result<LogRecord, LogError> {
        if !self.threads.contains_key(thread_id) {
            let path = self.named_path(thread_id, SUFFIX)?;
            let t = Self::load_or_create(&path)?;
            self.threads.insert(thread_id.to_owned(), t);
        }
        let cache_max = self.cfg.cache_records;
        let sync = self.cfg.sync;
        let Some(t) = self.threads.get_mut(thread_id) else {
            return Err(LogError::Io("thread vanished".into()));
        };
        let seq = t.first + t.offsets.len() as u64;
        let rec = LogRecord::render(thread_id, seq, operation_id, event);
        let line = rec.ndjson();
        let len = u32::try_from(line.len() - 1)
            .map_err(|_| LogError::Corrupt("record too long".into()))?;
        if t.torn {
            t.file.set_len(t.end)?;
            t.torn = false;
        } else {
            t.check_alone()?;
        }
        #[cfg(test)]
        let (fail, fail_cut) = match self.fail_next_write.take() {
            Some((n, cut)) => (Some(n), cut),
            None => (None, false),
        };
        #[cfg(not(test))]
        let (fail, fail_cut) = (None, false);
        if let Err(e) = write_line(&mut t.file, &line, sync, fail) {
            // All or nothing: cut the file back to its length before this append (the file
            // is opened to append, so the next write starts there). The record has no
            // number and nothing in memory changed. When the cut fails too, the next
            // append tries it again before it writes, and reads never look past `end`.
            let cut = if fail_cut {
                Err(std::io::Error::other("injected cut failure"))
            } else {
                t.file
                    .set_len(t.end)
                    .and_then(|()| if sync { t.file.sync_data() } else { Ok(()) })
            };
            t.torn = cut.is_err();
            return Err(e.into());
        }
        t.offsets.push((t.end, len));
        t.end += line.len() as u64;
        t.cache.push_back(rec.clone());
        while t.cache.len() > cache_max {
            t.cache.pop_front();
        }
        Ok(rec)
    }

    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        let Some(t) = self.threads.get_mut(thread_id) else {
            return Ok(None);
        };
        if seq < t.first {
            return Ok(None);
        }
        if let Some(front) = t.cache.front() {
            if seq >= front.seq {
                let i = usize::try_from(seq - front.seq).unwrap_or(usize::MAX);
                return Ok(t.cache.get(i).cloned());
            }
        }
        let i = usize::try_from(seq - t.first).unwrap_or(usize::MAX);
        let Some(&(off, len)) = t.offsets.get(i) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; len as usize];
        t.file.seek(SeekFrom::Start(off))?;
        t.file.read_exact(&mut buf)?;
        let (_, got, _, rec) = parse_line(&buf)?;
        if got != seq {
            return Err(LogError::Corrupt(format!(
                "expected record {seq}, found {got}"
            )));
        }
        Ok(Some(rec))
    }

    fn head_seq(&self, thread_id: &str) -> u64 {
        self.threads
            .get(thread_id)
            .map(|t| (t.first + t.offsets.len() as u64).saturating_sub(1))
            .unwrap_or(0)
    }

    fn first_seq(&self, thread_id: &str) -> u64 {
        self.threads.get(thread_id).map(|t| t.first).unwrap_or(1)
    }

    fn gap_reason(&self) -> GapReason {
        GapReason::Truncated
    }

    fn threads(&self) -> Vec<String> {
        self.threads.keys().cloned().collect()
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        let path = self.named_path(thread_id, OWNER_SUFFIX)?;
        let tmp = path.with_extension("owner-tmp");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(owner.as_bytes())?;
            if self.cfg.sync {
                f.sync_all()?;
            }
        }
        fs::rename(&tmp, &path)?;
        self.owners.insert(thread_id.to_owned(), owner.to_owned());
        Ok(())
    }

    fn owner(&self, thread_id: &str) -> Option<String> {
        self.owners.get(thread_id).cloned()
    }
}

impl FileLog {
    fn load_or_create(path: &Path) -> Result<FileThread, LogError> {
        if !path.exists() {
            File::create(path)?;
        }
        Self::load(path)
    }
}

impl<L: EventLog + ?Sized> EventLog for Box<L> {
    fn append(
        &mut self,
        thread_id: &str,
        operation_id: &str,
        event: &Event,
    ) -> Result<LogRecord, LogError> {
        (**self).append(thread_id, operation_id, event)
    }
    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        (**self).get(thread_id, seq)
    }
    fn head_seq(&self, thread_id: &str) -> u64 {
        (**self).head_seq(thread_id)
    }
    fn first_seq(&self, thread_id: &str) -> u64 {
        (**self).first_seq(thread_id)
    }
    fn gap_reason(&self) -> GapReason {
        (**self).gap_reason()
    }
    fn threads(&self) -> Vec<String> {
        (**self).threads()
    }
    fn is_durable(&self) -> bool {
        (**self).is_durable()
    }
    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        (**self).set_owner(thread_id, owner)
    }
    fn owner(&self, thread_id: &str) -> Option<String> {
        (**self).owner(thread_id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "harness-tanstack-log-unit-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn text(i: usize) -> Event {
        Event::text_content("m", format!("record {i}"))
    }

    fn file_len(d: &Path) -> u64 {
        let mut n = 0;
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.to_string_lossy().ends_with(SUFFIX) {
                n += fs::metadata(&p).unwrap().len();
            }
        }
        n
    }

    /// An append is all or nothing: a write that fails part way (a full disk, a short
    /// write) leaves the file as it was before it, so the records after it, and the thread
    /// after a reopen, read back whole.
    #[test]
    fn a_failed_append_leaves_no_partial_line() {
        // `Some(10)`: a few bytes of the line reached the file; `Some(usize::MAX)`: all of it
        // did (the line and its LF), and the sync after it failed.
        for written in [0, 10, usize::MAX] {
            let d = dir(&format!("failed-append-{written}"));
            let mut log = FileLog::open(&d).unwrap();
            for i in 1..=2 {
                log.append("t", "op", &text(i)).unwrap();
            }
            let before = file_len(&d);
            log.fail_next_write = Some((written, false));
            assert!(matches!(
                log.append("t", "op", &text(99)),
                Err(LogError::Io(_))
            ));
            assert_eq!(
                file_len(&d),
                before,
                "cut back to its length before the append"
            );
            assert_eq!(log.head_seq("t"), 2, "the failed record has no number");
            let rec = log.append("t", "op", &text(3)).unwrap();
            assert_eq!(rec.seq, 3);
            // Read from the file itself: a fresh log, and the same one past its cache.
            log.threads.get_mut("t").unwrap().cache.clear();
            for seq in 1..=3 {
                let r = log.get("t", seq).unwrap().unwrap();
                assert_eq!(r.event().unwrap(), text(seq as usize), "written {written}");
            }
            drop(log);
            let mut log = FileLog::open(&d).unwrap();
            assert_eq!(log.head_seq("t"), 3);
            for seq in 1..=3 {
                let r = log.get("t", seq).unwrap().unwrap();
                assert_eq!(r.event().unwrap(), text(seq as usize), "written {written}");
            }
            let _ = fs::remove_dir_all(&d);
        }
    }

    /// When cutting the file back fails too, the torn tail is cut before the next write,
    /// and a truncate in between copies the whole records only.
    #[test]
    fn a_torn_tail_that_could_not_be_cut_is_cut_before_the_next_write() {
        for (written, truncate_first) in [(10, false), (10, true), (usize::MAX, true)] {
            let d = dir(&format!("torn-tail-{written}-{truncate_first}"));
            let mut log = FileLog::open(&d).unwrap();
            for i in 1..=2 {
                log.append("t", "op", &text(i)).unwrap();
            }
            let before = file_len(&d);
            log.fail_next_write = Some((written, true));
            assert!(log.append("t", "op", &text(99)).is_err());
            assert!(file_len(&d) > before, "the torn tail is still there");
            assert_eq!(log.head_seq("t"), 2);
            if truncate_first {
                log.truncate("t", 1).unwrap();
            }
            assert_eq!(log.append("t", "op", &text(3)).unwrap().seq, 3);
            drop(log);
            let mut log = FileLog::open(&d).unwrap();
            assert_eq!(log.head_seq("t"), 3);
            for seq in log.first_seq("t")..=3 {
                let r = log.get("t", seq).unwrap().unwrap();
                assert_eq!(r.event().unwrap(), text(seq as usize));
            }
            let _ = fs::remove_dir_all(&d);
        }
    }

    /// A digest-named file is read only when the id kept beside it is the one its name was
    /// made from, and a thread is never given the files of another id.
    #[test]
    fn an_id_file_that_does_not_match_its_name_is_not_used() {
        let d = dir("id-mismatch");
        fs::create_dir_all(&d).unwrap();
        let long = "l".repeat(200);
        let stem = file_stem(&long);
        assert!(stem.starts_with(DIGEST_PREFIX) && stem.len() == 71);
        fs::write(d.join(format!("{stem}{ID_SUFFIX}")), "another id").unwrap();
        let rec = LogRecord::render(&long, 1, "op", &text(1));
        fs::write(d.join(format!("{stem}{SUFFIX}")), rec.ndjson()).unwrap();
        let mut log = FileLog::open(&d).unwrap();
        assert!(log.threads().is_empty());
        assert!(matches!(
            log.append(&long, "op", &text(1)),
            Err(LogError::Corrupt(_))
        ));
        assert!(matches!(
            log.set_owner(&long, "ann"),
            Err(LogError::Corrupt(_))
        ));
        assert!(log.threads().is_empty());
        let _ = fs::remove_dir_all(&d);
    }
}
