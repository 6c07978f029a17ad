//! [`FileLog`]: the durable log, one append-only NDJSON file per thread in a folder.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{EventLog, LogError, LogRecord};
use crate::agui::Event;
use crate::catalog::GapReason;

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
