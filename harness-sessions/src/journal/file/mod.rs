//! The file journal: one append-only file per session in a folder.
//!
//! ## Format
//!
//! `<dir>/<session>.journal`, one JSON object per line, each ending in `\n`:
//!
//! ```text
//! {"harness_rs_journal":1,"session":"s1","meta":{"harness":"echo"}}      header (line 1)
//! {"fence":"1"}                                                           a writer's fence
//! {"seq":"1","prev_hash":"","content_hash":"…","fence":"1","event":{…}}   a record
//! ```
//!
//! A record line's `event` is the event's RFC 8785 canonical JSON, the exact bytes its
//! `content_hash` covers, and comes last so that `verify` hashes it in place without parsing
//! it. A fence line is written whenever a writer acquires a fence; every record carries the
//! fence of the last fence line before it, so `verify` also catches a changed fence.
//!
//! ## Crash safety
//!
//! Each append is one `write` of whole lines. A crash can leave the last line incomplete
//! (no `\n`). Only a writer repairs: a journal opened with [`FileJournal::open`] moves those
//! bytes, when it opens the session, to `<session>.journal.torn-<offset>`
//! (`…torn-<offset>.<n>` if that name is taken: nothing set aside is overwritten),
//! truncates the file to its last complete line, and reports a [`TornTail`]. Nothing before
//! the torn line is touched. A reader reports: a journal opened with
//! [`FileJournal::open_read_only`] never changes a file; it serves the complete records before
//! the torn line and reports a [`TornTail`] it left in place. Opening a session also checks
//! its whole chain (the checks of [`verify_file_bytes`]): a session whose records do not hold
//! is refused with [`JournalError::Corrupt`], never served nor extended. Sessions are created
//! and forked by writing a temporary file and linking it into place (never over an existing
//! journal).
//!
//! ## Durability
//!
//! Every append reaches the kernel before `append` returns, so a process crash loses
//! nothing. What survives a power loss depends on [`Durability`]: by default the file is
//! fsynced at the end of every turn.
//!
//! An open session holds a lock on its file: exclusive in a writer, so that a second writer
//! (another process, or another `FileJournal` on the same folder) cannot open it until the
//! first closes it; shared in a read-only journal, so that readers do not exclude each other
//! but wait for (and keep out) a writer.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

mod format;

pub use self::format::{verify_file_bytes, verify_file_bytes_head};

use self::format::{
    BodyCheck, FORMAT, Header, Line, LineFault, Lines, fence_line, parse_line, write_record_line,
};
use super::{Journal, JournalError, SessionMeta, check_append};
use crate::record::{Fence, Head, Record, Seq};
use crate::verify::{HeadPin, Verified, VerifyError};

/// When the file journal forces writes to stable storage (fsync).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// fsync after every append: each record is on disk before the effect it precedes runs.
    /// Survives power loss at any point; slowest.
    EveryRecord,
    /// fsync when a turn ends (completed, failed or parked), at [`Journal::sync`]. A power
    /// loss can lose the records of the turn in flight (never those of earlier turns): the
    /// turn is gone, not interrupted, and its effects may have run (an executor with durable
    /// receipts still answers a re-issued identical turn from them). The default.
    #[default]
    EveryTurn,
    /// Never fsync; the OS writes back when it likes. Survives process crashes only.
    Never,
}

/// Bytes found after the last complete line of a session's file on open: set aside by a
/// writer, left in place by a read-only journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The session.
    pub session: String,
    /// Where the torn bytes start in the file (a writer truncated the file to this length).
    pub offset: u64,
    /// How many bytes are torn.
    pub len: u64,
    /// Where a writer moved them; `None` when a read-only journal found them and left the
    /// file as it was (the next writer to open the session sets them aside).
    pub saved_to: Option<PathBuf>,
}

/// An open session file.
struct SessionFile {
    file: File,
    meta: SessionMeta,
    /// Length of the file (all complete lines).
    len: u64,
    /// Byte offset and length (without `\n`) of each record line; index i is seq i + 1.
    index: Vec<(u64, usize)>,
    /// Offset just past the header line.
    body_start: u64,
    head: Head,
    dirty: bool,
}

/// The file journal: one append-only file per session in a folder.
///
/// ## Format
///
/// `<dir>/<session>.journal`, one JSON object per line, each ending in `\n`:
///
/// ```text
/// {"harness_rs_journal":1,"session":"s1","meta":{"harness":"echo"}}      header (line 1)
/// {"fence":"1"}                                                           a writer's fence
/// {"seq":"1","prev_hash":"","content_hash":"…","fence":"1","event":{…}}   a record
/// ```
///
/// A record line's `event` is the event's RFC 8785 canonical JSON, the exact bytes its
/// `content_hash` covers, and comes last so that `verify` hashes it in place without parsing
/// it. A fence line is written whenever a writer acquires a fence; every record carries the
/// fence of the last fence line before it, so `verify` also catches a changed fence.
///
/// ## Crash safety
///
/// Each append is one `write` of whole lines. A crash can leave the last line incomplete
/// (no `\n`). Only a writer repairs: a journal opened with [`FileJournal::open`] moves those
/// bytes, when it opens the session, to `<session>.journal.torn-<offset>`
/// (`…torn-<offset>.<n>` if that name is taken: nothing set aside is overwritten),
/// truncates the file to its last complete line, and reports a [`TornTail`]. Nothing before
/// the torn line is touched. A reader reports: a journal opened with
/// [`FileJournal::open_read_only`] never changes a file; it serves the complete records before
/// the torn line and reports a [`TornTail`] it left in place. Opening a session also checks
/// its whole chain (the checks of [`verify_file_bytes`]): a session whose records do not hold
/// is refused with [`JournalError::Corrupt`], never served nor extended. Sessions are created
/// and forked by writing a temporary file and linking it into place (never over an existing
/// journal).
///
/// ## Durability
///
/// Every append reaches the kernel before `append` returns, so a process crash loses
/// nothing. What survives a power loss depends on [`Durability`]: by default the file is
/// fsynced at the end of every turn.
///
/// An open session holds a lock on its file: exclusive in a writer, so that a second writer
/// (another process, or another `FileJournal` on the same folder) cannot open it until the
/// first closes it; shared in a read-only journal, so that readers do not exclude each other
/// but wait for (and keep out) a writer.
#[derive(Debug)]
pub struct FileJournal {
    dir: PathBuf,
    durability: Durability,
    read_only: bool,
    open: Mutex<HashMap<String, SessionFile>>,
    torn: Mutex<Vec<TornTail>>,
}

impl std::fmt::Debug for SessionFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionFile")
            .field("len", &self.len)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

fn validate(session: &str) -> Result<(), JournalError> {
    let ok = !session.is_empty()
        && session.len() <= 128
        && !session.starts_with('.')
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(JournalError::InvalidSession(session.to_owned()))
    }
}

fn corrupt(session: &str, line: u64, reason: impl Into<String>) -> JournalError {
    JournalError::Corrupt {
        session: session.to_owned(),
        line,
        reason: reason.into(),
    }
}

impl FileJournal {
    /// A journal in `dir` (created if missing) with the default durability (fsync per turn).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, JournalError> {
        Self::with_durability(dir, Durability::default())
    }

    /// A journal in `dir` with an explicit durability policy.
    pub fn with_durability(
        dir: impl Into<PathBuf>,
        durability: Durability,
    ) -> Result<Self, JournalError> {
        let dir = dir.into();
        if let Err(e) = fs::create_dir_all(&dir) {
            let why = if dir.exists() && !dir.is_dir() {
                "not a directory".to_owned()
            } else {
                e.to_string()
            };
            return Err(JournalError::Io(format!("{}: {why}", dir.display())));
        }
        Ok(FileJournal {
            dir,
            durability,
            read_only: false,
            open: Mutex::new(HashMap::new()),
            torn: Mutex::new(Vec::new()),
        })
    }

    /// A journal in `dir` that never changes anything there: for readers (listing, reading,
    /// replay, verify). It does not create the folder, opens session files read-only under a
    /// shared lock, and leaves a torn last record in place: it serves the complete records
    /// before it and reports it in [`torn_tails`](Self::torn_tails) with no `saved_to`.
    /// Every operation that writes (create, acquire a fence, append, fork) fails with
    /// [`JournalError::ReadOnly`].
    pub fn open_read_only(dir: impl Into<PathBuf>) -> Result<Self, JournalError> {
        let dir = dir.into();
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(JournalError::Io(format!(
                    "{}: not a directory",
                    dir.display()
                )));
            }
            Err(e) => return Err(JournalError::Io(format!("{}: {e}", dir.display()))),
        }
        Ok(FileJournal {
            dir,
            durability: Durability::default(),
            read_only: true,
            open: Mutex::new(HashMap::new()),
            torn: Mutex::new(Vec::new()),
        })
    }

    /// Whether this journal was opened with [`open_read_only`](Self::open_read_only).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Refuses `operation` on a read-only journal.
    fn writable(&self, session: &str, operation: &'static str) -> Result<(), JournalError> {
        if self.read_only {
            return Err(JournalError::ReadOnly {
                session: session.to_owned(),
                operation,
            });
        }
        Ok(())
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The durability policy.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The file of a session.
    pub fn path_of(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.journal"))
    }

    /// Torn last records found since this journal was opened: set aside (a writer) or left
    /// in place (a read-only journal).
    pub fn torn_tails(&self) -> Vec<TornTail> {
        self.torn.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Closes a session's file (releasing its lock); the next use reopens it.
    pub fn close(&self, session: &str) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(session);
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, HashMap<String, SessionFile>>, JournalError> {
        self.open
            .lock()
            .map_err(|_| JournalError::Io("journal lock poisoned".into()))
    }

    fn sync_dir(&self) -> Result<(), JournalError> {
        if self.durability != Durability::Never {
            // Make a rename durable. Opening a directory read-only works on Unix.
            if let Ok(d) = File::open(&self.dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Writes a complete file atomically: temporary file, fsync, rename.
    fn write_new(&self, session: &str, bytes: &[u8]) -> Result<(), JournalError> {
        let path = self.path_of(session);
        let tmp = self.dir.join(format!("{session}.journal.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            if self.durability != Durability::Never {
                f.sync_data()?;
            }
        }
        // Never replace an existing journal (hard_link fails if the target exists).
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(JournalError::AlreadyExists(session.to_owned()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Opens a session file, sets aside (a writer) or reports (a reader) a torn tail, and
    /// indexes its lines.
    fn load<'m>(
        &self,
        open: &'m mut HashMap<String, SessionFile>,
        session: &str,
    ) -> Result<&'m mut SessionFile, JournalError> {
        if !open.contains_key(session) {
            validate(session)?;
            let sf = self.load_file(session)?;
            open.insert(session.to_owned(), sf);
        }
        open.get_mut(session)
            .ok_or_else(|| JournalError::NotFound(session.to_owned()))
    }

    fn load_file(&self, session: &str) -> Result<SessionFile, JournalError> {
        let path = self.path_of(session);
        let mut file = match OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JournalError::NotFound(session.to_owned()));
            }
            Err(e) => return Err(JournalError::Io(format!("{}: {e}", path.display()))),
        };
        // Readers share the lock; a writer holds it alone.
        let locked = if self.read_only {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match locked {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Busy(session.to_owned()));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete < bytes.len() && self.read_only {
            // A reader reports and serves what is complete; only a writer repairs.
            if let Ok(mut torn) = self.torn.lock() {
                torn.push(TornTail {
                    session: session.to_owned(),
                    offset: complete as u64,
                    len: (bytes.len() - complete) as u64,
                    saved_to: None,
                });
            }
            bytes.truncate(complete);
        } else if complete < bytes.len() {
            let offset = complete as u64;
            // Never overwrite what an earlier recovery set aside at the same offset.
            let mut n = 0u32;
            let (saved_to, mut t) = loop {
                let name = match n {
                    0 => format!("{session}.journal.torn-{offset}"),
                    n => format!("{session}.journal.torn-{offset}.{n}"),
                };
                let p = self.dir.join(name);
                match OpenOptions::new().write(true).create_new(true).open(&p) {
                    Ok(f) => break (p, f),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                    Err(e) => return Err(e.into()),
                }
            };
            t.write_all(&bytes[complete..])?;
            t.sync_data()?;
            drop(t);
            file.set_len(offset)?;
            file.sync_data()?;
            if let Ok(mut torn) = self.torn.lock() {
                torn.push(TornTail {
                    session: session.to_owned(),
                    offset,
                    len: (bytes.len() - complete) as u64,
                    saved_to: Some(saved_to),
                });
            }
            bytes.truncate(complete);
        }
        let mut lines = Lines(&bytes);
        let header_line = lines
            .next()
            .ok_or_else(|| corrupt(session, 1, "empty file (no header)"))?;
        let header: Header =
            serde_json::from_slice(header_line).map_err(|_| corrupt(session, 1, "bad header"))?;
        if header.harness_rs_journal != FORMAT || header.session != session {
            return Err(corrupt(
                session,
                1,
                "header names another format or session",
            ));
        }
        let body_start = header_line.len() as u64;
        let mut offset = body_start;
        let mut index = Vec::new();
        let mut head = Head::default();
        // The whole chain must hold (the checks of `verify_file_bytes`): a session whose
        // records were changed after they were written is refused, never served as History
        // nor extended (new records would vouch for a prefix that does not verify).
        let mut check = BodyCheck::default();
        for (i, line) in lines.enumerate() {
            let lineno = i as u64 + 2;
            let body = &line[..line.len() - 1];
            let fault = |f: LineFault| match f {
                LineFault::Malformed(r) => corrupt(session, lineno, r),
                LineFault::Chain(e) => corrupt(session, lineno, e.to_string()),
            };
            match check.line(body).map_err(fault)? {
                Line::Fence(f) => head.fence = f,
                Line::Record(r) => {
                    head.seq = r.seq;
                    head.hash = Some(r.content_hash);
                    index.push((offset, body.len()));
                }
            }
            offset += line.len() as u64;
        }
        file.seek(SeekFrom::End(0))?;
        Ok(SessionFile {
            file,
            meta: header.meta,
            len: offset,
            index,
            body_start,
            head,
            dirty: false,
        })
    }

    fn write_lines(&self, sf: &mut SessionFile, buf: &[u8]) -> Result<(), JournalError> {
        let res = sf
            .file
            .seek(SeekFrom::Start(sf.len))
            .and_then(|_| sf.file.write_all(buf));
        if let Err(e) = res {
            // Leave no partial line behind.
            let _ = sf.file.set_len(sf.len);
            return Err(e.into());
        }
        sf.len += buf.len() as u64;
        sf.dirty = true;
        if self.durability == Durability::EveryRecord {
            sf.file.sync_data()?;
            sf.dirty = false;
        }
        Ok(())
    }

    fn read_span(sf: &mut SessionFile, start: u64, end: u64) -> Result<Vec<u8>, JournalError> {
        let len = usize::try_from(end - start)
            .map_err(|_| JournalError::Io("read span too large".into()))?;
        let mut buf = vec![0u8; len];
        sf.file.seek(SeekFrom::Start(start))?;
        sf.file.read_exact(&mut buf)?;
        Ok(buf)
    }
}

impl Journal for FileJournal {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        validate(session)?;
        self.writable(session, "create")?;
        let _guard = self.lock()?;
        self.write_new(session, &Header::line(session, meta)?)
    }

    fn meta(&self, session: &str) -> Result<SessionMeta, JournalError> {
        let mut open = self.lock()?;
        Ok(self.load(&mut open, session)?.meta.clone())
    }

    fn sessions(&self) -> Result<Vec<String>, JournalError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            if let Some(s) = name.to_str().and_then(|n| n.strip_suffix(".journal"))
                && validate(s).is_ok()
            {
                out.push(s.to_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    fn head(&self, session: &str) -> Result<Head, JournalError> {
        let mut open = self.lock()?;
        Ok(self.load(&mut open, session)?.head)
    }

    fn acquire_fence(&self, session: &str) -> Result<Fence, JournalError> {
        self.writable(session, "acquire_fence")?;
        let mut open = self.lock()?;
        let sf = self.load(&mut open, session)?;
        let f =
            sf.head.fence.checked_add(1).ok_or_else(|| {
                corrupt(session, 0, "the stored fence is u64::MAX: no fence left")
            })?;
        self.write_lines(sf, &fence_line(f))?;
        sf.head.fence = f;
        Ok(f)
    }

    fn append(
        &self,
        session: &str,
        expected_last_seq: Seq,
        fence: Fence,
        records: &[Record],
    ) -> Result<(), JournalError> {
        self.writable(session, "append")?;
        let mut open = self.lock()?;
        let sf = self.load(&mut open, session)?;
        check_append(session, &sf.head, expected_last_seq, fence, records)?;
        let mut buf = Vec::with_capacity(records.len() * 400);
        let mut spans = Vec::with_capacity(records.len());
        for r in records {
            let start = buf.len();
            write_record_line(r, &mut buf);
            spans.push((sf.len + start as u64, buf.len() - start - 1));
        }
        self.write_lines(sf, &buf)?;
        sf.index.extend(spans);
        if let Some(last) = records.last() {
            sf.head.seq = last.seq;
            sf.head.hash = Some(last.content_hash);
        }
        Ok(())
    }

    fn read(&self, session: &str, from: Seq, to: Option<Seq>) -> Result<Vec<Record>, JournalError> {
        let mut open = self.lock()?;
        let sf = self.load(&mut open, session)?;
        let len = sf.index.len();
        let lo = usize::try_from(from.max(1) - 1)
            .unwrap_or(usize::MAX)
            .min(len);
        let hi = to
            .map(|t| usize::try_from(t).unwrap_or(usize::MAX).min(len))
            .unwrap_or(len);
        if lo >= hi {
            return Ok(Vec::new());
        }
        let (start, _) = sf.index[lo];
        let (last_off, last_len) = sf.index[hi - 1];
        let bytes = Self::read_span(sf, start, last_off + last_len as u64)?;
        let mut out = Vec::with_capacity(hi - lo);
        for &(off, l) in &sf.index[lo..hi] {
            let rel = usize::try_from(off - start).unwrap_or(usize::MAX);
            let line = bytes
                .get(rel..rel + l)
                .ok_or_else(|| corrupt(session, 0, "index out of range"))?;
            let seq = out.len() as u64 + lo as u64 + 1;
            let Line::Record(r) = parse_line(line).map_err(|e| corrupt(session, seq, e))? else {
                return Err(corrupt(session, seq, "expected a record line"));
            };
            let text = std::str::from_utf8(r.event)
                .map_err(|_| corrupt(session, seq, "event is not UTF-8"))?;
            let rec =
                Record::from_stored(r.seq, r.prev_hash, r.content_hash, r.fence, Arc::from(text))
                    .map_err(|e| corrupt(session, seq, format!("event does not decode: {e}")))?;
            out.push(rec);
        }
        Ok(out)
    }

    fn fork(
        &self,
        parent: &str,
        at: Seq,
        child: &str,
        meta: &SessionMeta,
    ) -> Result<(), JournalError> {
        validate(child)?;
        self.writable(child, "fork")?;
        let mut open = self.lock()?;
        if open.contains_key(child) || self.path_of(child).exists() {
            return Err(JournalError::AlreadyExists(child.to_owned()));
        }
        let sf = self.load(&mut open, parent)?;
        if at > sf.head.seq {
            return Err(JournalError::ForkPoint {
                session: parent.to_owned(),
                at,
                head: sf.head.seq,
            });
        }
        let end = match usize::try_from(at).ok().and_then(|a| a.checked_sub(1)) {
            Some(i) => {
                let (off, l) = sf.index[i];
                off + l as u64 + 1
            }
            None => sf.body_start,
        };
        let body = if at == 0 {
            Vec::new()
        } else {
            let start = sf.body_start;
            Self::read_span(sf, start, end)?
        };
        let mut bytes = Header::line(child, meta)?;
        bytes.extend_from_slice(&body);
        self.write_new(child, &bytes)
    }

    fn sync(&self, session: &str) -> Result<(), JournalError> {
        if self.read_only {
            // Nothing was written.
            return Ok(());
        }
        let mut open = self.lock()?;
        let sf = self.load(&mut open, session)?;
        if sf.dirty && self.durability == Durability::EveryTurn {
            sf.file.sync_data()?;
        }
        sf.dirty = false;
        Ok(())
    }

    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        verify_file_bytes(session, &self.file_bytes(session)?)
    }

    fn verify_head(&self, session: &str, pin: &HeadPin) -> Result<Verified, VerifyError> {
        verify_file_bytes_head(session, &self.file_bytes(session)?, pin)
    }
}

impl FileJournal {
    /// The bytes of a session's file, as they are (what `verify` checks).
    fn file_bytes(&self, session: &str) -> Result<Vec<u8>, JournalError> {
        validate(session)?;
        match fs::read(self.path_of(session)) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(JournalError::NotFound(session.to_owned()))
            }
            Err(e) => Err(JournalError::from(e)),
        }
    }
}
