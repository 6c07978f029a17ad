//! [`FileLog`]: the durable log, one append-only NDJSON file per thread in a folder, read
//! lazily, with a bounded pool of open files and bounded memory.

mod format;
mod thread;

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{EventLog, LogError, LogRecord};
use crate::agui::AguiEvent;
use crate::catalog::GapReason;
use crate::lru::Lru;
use format::{
    DIGEST_PREFIX, cursor_of, file_stem, line_of, replace_file, truncated_marker, unhex, write_line,
};
use thread::{FileThread, last_byte_before, read_prefix, read_record, scan};

/// How a [`FileLog`] writes, and what it keeps in memory and open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLogConfig {
    /// `fsync` each append (slower, survives a power loss). Default: off (survives a
    /// process restart: the data is in the OS cache).
    pub sync: bool,
    /// Records per thread kept in memory for fast fan-out and reconnects. Default 4096.
    pub cache_records: usize,
    /// Bytes those records may hold, all threads together: past it the records of the
    /// least recently used thread go first. Default 16 MiB.
    pub cache_bytes: usize,
    /// Thread files open at once: a file is opened when its thread is read or written, and
    /// the least recently used one is closed past this. Default 32.
    pub max_open_files: usize,
    /// Threads whose read index (where their records are in the file) stays in memory;
    /// past this the least recently used one is dropped, and read again from the file when
    /// the thread is next read. Default 1,024.
    pub max_indexed_threads: usize,
}

impl Default for FileLogConfig {
    fn default() -> Self {
        FileLogConfig {
            sync: false,
            cache_records: 4096,
            cache_bytes: 16 << 20,
            max_open_files: 32,
            max_indexed_threads: 1024,
        }
    }
}

/// A durable log: one append-only NDJSON file per thread in a folder, each line a
/// `harness.event` frame. Cursors survive a restart. [`truncate`](Self::truncate) drops the
/// oldest records; a client behind them gets `harness.gap` with reason `truncated`.
///
/// Bounded, however many threads and records the folder holds:
///
/// - [`open`](Self::open) reads no thread whole: per file it reads the first and the last
///   line (for the first and the last cursor), one file at a time.
/// - A thread's file is open only while it is in a pool of
///   [`max_open_files`](FileLogConfig::max_open_files) (the least recently used is closed),
///   so the host never runs out of file descriptors.
/// - Reading a thread builds its read index (a mark per 64 records or 64 KiB, so about
///   0.02% of its file), kept for [`max_indexed_threads`](FileLogConfig::max_indexed_threads)
///   threads; the newest records are cached up to
///   [`cache_bytes`](FileLogConfig::cache_bytes), all threads together.
///
/// An append is all or nothing: when its write fails part way (a full disk, a short
/// write, a failed `fsync`), the file is cut back to its length before it, the record gets
/// no sequence number, and the next append takes that number. A crash in the middle of a
/// write leaves a torn last line, which is never read and is cut before the next write.
///
/// One `FileLog` writes a folder at a time. A second one on the same folder (another
/// process, a restart while the old host still runs) is not locked out, but each append
/// first checks that the file is the length this log last saw (at open, or at its own last
/// write): when another writer wrote to it, the append (and a truncate) fails rather than
/// give a second event a cursor the file already has. Reopen the log to take over.
///
/// A truncated file starts with a marker line `{"truncatedBefore":N}`. The owner of a thread
/// (see [`EventLog::set_owner`]) is kept beside it, in a file of the same name ending in
/// `.harness-owner`, and its waits record (see [`EventLog::set_waits`] and the
/// [module docs](super)) in one ending in `.harness-waits`, replaced whole (a temporary file
/// renamed over it) and removed when no wait is open.
///
/// Any thread key can be stored. The files of a key of up to 120 bytes are named by its
/// hex form (`<hex>.harness-log`, as earlier versions named every file). A longer key does
/// not fit in a file name (255 bytes), so its files are named by its SHA-256
/// (`sha256-<64 hex>.harness-log`), and the key itself is kept beside them, in
/// `sha256-<64 hex>.harness-id`, written before them: a reopen maps each file back to its
/// exact key. A digest-named file with no (or a mismatched) id file beside it is not read,
/// as is any file whose name is not one of these.
#[derive(Debug)]
pub struct FileLog {
    dir: PathBuf,
    cfg: FileLogConfig,
    threads: HashMap<String, FileThread>,
    owners: HashMap<String, String>,
    /// Threads with a waits record (its file is read only when asked for).
    waits: std::collections::HashSet<String>,
    /// Threads whose file is open.
    open: Lru,
    /// Threads whose read index is in memory.
    indexed: Lru,
    /// Threads with cached records, and the bytes of them all.
    cached: Lru,
    cache_bytes: usize,
    /// Test hook: the next append writes this many bytes of its line, then fails (what a
    /// full disk or a short write leaves behind); with `true`, cutting the file back after
    /// it fails too.
    #[cfg(test)]
    fail_next_write: Option<(usize, bool)>,
}

const SUFFIX: &str = ".harness-log";
const OWNER_SUFFIX: &str = ".harness-owner";
const WAITS_SUFFIX: &str = ".harness-waits";
/// The largest waits record read back (the host writes much smaller ones, see
/// `HostConfig::max_parked_bytes`): a larger file is not read whole into memory.
const MAX_WAITS_FILE: u64 = 64 << 20;
const ID_SUFFIX: &str = ".harness-id";

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
            waits: std::collections::HashSet::new(),
            open: Lru::default(),
            indexed: Lru::default(),
            cached: Lru::default(),
            cache_bytes: 0,
            #[cfg(test)]
            fail_next_write: None,
        };
        let mut paths = Vec::new();
        for entry in fs::read_dir(&dir)? {
            paths.push(entry?.path());
        }
        // The keys of long thread keys first: the files named by their digest need them.
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
            // A file whose key is not the one its name was made from is not that thread's.
            let Ok(id) = String::from_utf8(fs::read(path)?) else {
                continue;
            };
            if file_stem(&id) == stem {
                long_ids.insert(stem.to_owned(), id);
            }
        }
        let thread_key = |stem: &str| -> Option<String> {
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
            if let Some(key) = name.strip_suffix(OWNER_SUFFIX).and_then(thread_key) {
                let owner = fs::read_to_string(path)?;
                log.owners.insert(key, owner);
            } else if let Some(key) = name.strip_suffix(WAITS_SUFFIX).and_then(thread_key) {
                log.waits.insert(key);
            } else if let Some(key) = name.strip_suffix(SUFFIX).and_then(thread_key) {
                let t = log.probe(path, &key)?;
                log.threads.insert(key, t);
            }
        }
        Ok(log)
    }

    /// The path of one of a thread's files. For a long key, the key is first kept beside
    /// it (see [`FileLog`]), so that the file can be read back after a restart.
    fn named_path(&self, key: &str, suffix: &str) -> Result<PathBuf, LogError> {
        let stem = file_stem(key);
        if stem.starts_with(DIGEST_PREFIX) {
            let id_path = self.dir.join(format!("{stem}{ID_SUFFIX}"));
            if id_path.exists() {
                // Never two threads in one file (SHA-256 makes a collision infeasible; a
                // tampered id file is caught here too).
                if fs::read(&id_path)? != key.as_bytes() {
                    return Err(LogError::Corrupt(format!(
                        "{stem}{ID_SUFFIX} holds another thread key"
                    )));
                }
            } else {
                replace_file(&id_path, "id-tmp", key.as_bytes(), self.cfg.sync)?;
            }
        }
        Ok(self.dir.join(format!("{stem}{suffix}")))
    }

    /// What a thread's file holds, from its first and last lines only: the first and the
    /// last cursor, and where its whole records end. The file is closed again. A file
    /// whose last line does not read as a record is counted line by line instead.
    fn probe(&mut self, path: &Path, key: &str) -> Result<FileThread, LogError> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let end = match last_byte_before(&mut file, len, b'\n')? {
            Some(nl) => nl + 1,
            None => 0,
        };
        let mut t = FileThread {
            path: path.to_path_buf(),
            first: 1,
            count: 0,
            end,
            len,
            torn: len > end,
            file: None,
            index: None,
            cache: VecDeque::new(),
            cache_bytes: 0,
        };
        if end == 0 {
            return Ok(t);
        }
        let first_line = read_prefix(&mut file, 0, 64)?;
        if let Some(before) = truncated_marker(line_of(&first_line)) {
            t.first = before;
        }
        let last_start = last_byte_before(&mut file, end - 1, b'\n')?.map_or(0, |nl| nl + 1);
        let last_line = read_prefix(&mut file, last_start, 64)?;
        if truncated_marker(line_of(&last_line)).is_some() && last_start == 0 {
            return Ok(t);
        }
        match cursor_of(&last_line) {
            Some(head) if head + 1 >= t.first => t.count = head + 1 - t.first,
            _ => {
                // Not a file this log wrote line for line: count its records.
                let (index, count) = scan(&mut file, t.end, t.first)?;
                t.count = count;
                t.index = Some(index);
                self.indexed.touch(key);
            }
        }
        Ok(t)
    }

    /// Puts a thread's file in the pool of open files (opening it), closing the least
    /// recently used one past the limit.
    fn open_file(&mut self, key: &str) -> Result<&mut FileThread, LogError> {
        let t = self
            .threads
            .get_mut(key)
            .ok_or_else(|| LogError::Io("no such thread".into()))?;
        if t.file.is_none() {
            t.file = Some(OpenOptions::new().read(true).append(true).open(&t.path)?);
        }
        self.open.touch(key);
        while self.open.len() > self.cfg.max_open_files.max(1) {
            let Some(old) = self.open.pop_oldest_except(key) else {
                break;
            };
            if let Some(o) = self.threads.get_mut(&old) {
                o.file = None;
            }
        }
        self.threads
            .get_mut(key)
            .ok_or_else(|| LogError::Io("no such thread".into()))
    }

    /// Opens a thread's file and builds its read index when it has none, dropping the
    /// index of the least recently read thread past the limit.
    fn indexed_file(&mut self, key: &str) -> Result<&mut FileThread, LogError> {
        let t = self.open_file(key)?;
        if t.index.is_none() {
            let (end, first) = (t.end, t.first);
            let (index, count) = scan(t.file()?, end, first)?;
            t.count = count;
            t.index = Some(index);
        }
        self.indexed.touch(key);
        while self.indexed.len() > self.cfg.max_indexed_threads.max(1) {
            let Some(old) = self.indexed.pop_oldest_except(key) else {
                break;
            };
            if let Some(o) = self.threads.get_mut(&old) {
                o.index = None;
            }
        }
        self.threads
            .get_mut(key)
            .ok_or_else(|| LogError::Io("no such thread".into()))
    }

    /// Keeps a record in the cache of its thread, within the cache's limits.
    fn cache(&mut self, key: &str, rec: &LogRecord) {
        let max_records = self.cfg.cache_records;
        let Some(t) = self.threads.get_mut(key) else {
            return;
        };
        t.cache.push_back(rec.clone());
        t.cache_bytes += rec.sse.len();
        self.cache_bytes += rec.sse.len();
        while t.cache.len() > max_records {
            if let Some(old) = t.cache.pop_front() {
                t.cache_bytes -= old.sse.len();
                self.cache_bytes -= old.sse.len();
            }
        }
        self.cached.touch(key);
        // Past the bytes of all threads: the least recently used thread's records go
        // (this thread's own last, oldest first).
        while self.cache_bytes > self.cfg.cache_bytes {
            let Some(old) = self.cached.pop_oldest_except(key) else {
                break;
            };
            if let Some(o) = self.threads.get_mut(&old) {
                self.cache_bytes -= o.drop_cache();
            }
        }
        if let Some(t) = self.threads.get_mut(key) {
            while self.cache_bytes > self.cfg.cache_bytes {
                let Some(old) = t.cache.pop_front() else {
                    break;
                };
                t.cache_bytes -= old.sse.len();
                self.cache_bytes -= old.sse.len();
            }
            if t.cache.is_empty() {
                self.cached.remove(key);
            }
        }
    }

    /// Drops the records of a thread up to and including `through` (a sequence number).
    /// Clients whose cursor is behind the new first record get `harness.gap` with reason
    /// `truncated`.
    pub fn truncate(&mut self, thread_id: &str, through: u64) -> Result<(), LogError> {
        let Some(t) = self.threads.get(thread_id) else {
            return Ok(());
        };
        let through = through.min(t.head());
        if through < t.first {
            return Ok(());
        }
        let t = self.indexed_file(thread_id)?;
        if !t.torn {
            t.check_alone()?;
        }
        let keep_from = if through == t.head() {
            t.end
        } else {
            read_record(t, through + 1)?.0
        };
        // The whole records only, copied a buffer at a time: a torn tail past `end` stays
        // behind.
        let tmp = t.path.with_extension("tmp");
        let marker = format!("{{\"truncatedBefore\":{}}}\n", through + 1);
        let rest = t.end.saturating_sub(keep_from);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(marker.as_bytes())?;
            let src = t.file()?;
            src.seek(SeekFrom::Start(keep_from))?;
            let copied = io::copy(&mut src.take(rest), &mut f)?;
            if copied != rest {
                return Err(LogError::Io("the file ended early".into()));
            }
            f.sync_all()?;
        }
        fs::rename(&tmp, &t.path)?;
        t.count = t.head() - through;
        t.first = through + 1;
        t.end = marker.len() as u64 + rest;
        t.len = t.end;
        t.torn = false;
        // The old file is gone: read the new one afresh.
        t.file = None;
        t.index = None;
        let mut dropped = 0;
        while t.cache.front().is_some_and(|r| r.seq <= through) {
            if let Some(r) = t.cache.pop_front() {
                t.cache_bytes -= r.sse.len();
                dropped += r.sse.len();
            }
        }
        self.cache_bytes -= dropped;
        self.open.remove(thread_id);
        self.indexed.remove(thread_id);
        Ok(())
    }

    /// Thread files open right now (at most
    /// [`max_open_files`](FileLogConfig::max_open_files)).
    pub fn open_files(&self) -> usize {
        self.open.len()
    }

    fn new_thread(&mut self, key: &str) -> Result<(), LogError> {
        let path = self.named_path(key, SUFFIX)?;
        // A file another writer made since the open is read as it is.
        OpenOptions::new().create(true).append(true).open(&path)?;
        let t = self.probe(&path, key)?;
        self.threads.insert(key.to_owned(), t);
        Ok(())
    }
}

impl EventLog for FileLog {
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        if !self.threads.contains_key(key) {
            self.new_thread(key)?;
        }
        let sync = self.cfg.sync;
        #[cfg(test)]
        let (fail, fail_cut) = match self.fail_next_write.take() {
            Some((n, cut)) => (Some(n), cut),
            None => (None, false),
        };
        #[cfg(not(test))]
        let (fail, fail_cut) = (None, false);
        let t = self.open_file(key)?;
        let seq = t.first + t.count;
        let rec = LogRecord::render(thread_id, seq, operation_id, event);
        let line = rec.ndjson();
        if t.torn {
            let end = t.end;
            t.file()?.set_len(end)?;
            t.torn = false;
            t.len = end;
        } else {
            t.check_alone()?;
        }
        if let Err(e) = write_line(t.file()?, &line, sync, fail) {
            // All or nothing: cut the file back to its length before this append (the file
            // is opened to append, so the next write starts there). The record has no
            // number and nothing in memory changed. When the cut fails too, the next
            // append tries it again before it writes, and reads never look past `end`.
            let end = t.end;
            let cut = match t.file.as_mut() {
                _ if fail_cut => Err(io::Error::other("injected cut failure")),
                Some(f) => f
                    .set_len(end)
                    .and_then(|()| if sync { f.sync_data() } else { Ok(()) }),
                None => Err(io::Error::other("thread file not open")),
            };
            t.torn = cut.is_err();
            return Err(e.into());
        }
        let offset = t.end;
        if let Some(i) = t.index.as_mut() {
            i.note(seq, offset);
        }
        t.count += 1;
        t.end += line.len() as u64;
        t.len = t.end;
        self.cache(key, &rec);
        Ok(rec)
    }

    fn get(&mut self, thread_id: &str, seq: u64) -> Result<Option<LogRecord>, LogError> {
        let Some(t) = self.threads.get(thread_id) else {
            return Ok(None);
        };
        if seq < t.first || seq > t.head() {
            return Ok(None);
        }
        if let Some(front) = t.cache.front() {
            if seq >= front.seq {
                let i = usize::try_from(seq - front.seq).unwrap_or(usize::MAX);
                let rec = t.cache.get(i).cloned();
                self.cached.touch(thread_id);
                return Ok(rec);
            }
        }
        let t = self.indexed_file(thread_id)?;
        if seq > t.head() {
            // The file held fewer records than its last line said.
            return Ok(None);
        }
        read_record(t, seq).map(|(_, rec)| Some(rec))
    }

    fn head_seq(&self, thread_id: &str) -> u64 {
        self.threads.get(thread_id).map_or(0, FileThread::head)
    }

    fn first_seq(&self, thread_id: &str) -> u64 {
        self.threads.get(thread_id).map_or(1, |t| t.first)
    }

    fn gap_reason(&self) -> GapReason {
        GapReason::Truncated
    }

    fn threads(&self) -> Vec<String> {
        super::thread_keys(&self.threads, &self.owners)
    }

    fn contains(&self, thread_id: &str) -> bool {
        self.threads.contains_key(thread_id) || self.owners.contains_key(thread_id)
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        let path = self.named_path(thread_id, OWNER_SUFFIX)?;
        replace_file(&path, "owner-tmp", owner.as_bytes(), self.cfg.sync)?;
        self.owners.insert(thread_id.to_owned(), owner.to_owned());
        Ok(())
    }

    fn owner(&self, thread_id: &str) -> Option<String> {
        self.owners.get(thread_id).cloned()
    }

    fn set_waits(&mut self, thread_id: &str, record: Option<&str>) -> Result<(), LogError> {
        let Some(record) = record else {
            if self.waits.remove(thread_id) {
                let path = self.named_path(thread_id, WAITS_SUFFIX)?;
                match fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
            return Ok(());
        };
        let path = self.named_path(thread_id, WAITS_SUFFIX)?;
        replace_file(&path, "waits-tmp", record.as_bytes(), self.cfg.sync)?;
        self.waits.insert(thread_id.to_owned());
        Ok(())
    }

    fn waits(&mut self, thread_id: &str) -> Result<Option<String>, LogError> {
        if !self.waits.contains(thread_id) {
            return Ok(None);
        }
        let path = self.named_path(thread_id, WAITS_SUFFIX)?;
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(f) => f.take(MAX_WAITS_FILE + 1).read_to_end(&mut bytes)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if bytes.len() as u64 > MAX_WAITS_FILE {
            return Err(LogError::Corrupt(format!(
                "the waits record of a thread is larger than {MAX_WAITS_FILE} bytes"
            )));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| LogError::Corrupt("a waits record is not UTF-8".into()))
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

    fn text(i: usize) -> AguiEvent {
        AguiEvent::text_content("m", format!("record {i}"))
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
            let cached = log.threads.get_mut("t").unwrap().drop_cache();
            log.cache_bytes -= cached;
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
