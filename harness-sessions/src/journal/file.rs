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
//! (no `\n`); opening the session moves those bytes to `<session>.journal.torn-<offset>`
//! (`…torn-<offset>.<n>` if that name is taken: nothing set aside is overwritten),
//! truncates the file to its last complete line, and reports a [`TornTail`]. Nothing before
//! the torn line is touched. Opening a session also checks its whole chain (the checks of
//! [`verify_file_bytes`]): a session whose records do not hold is refused with
//! [`JournalError::Corrupt`], never served nor extended. Sessions are created and forked by writing a temporary file and
//! linking it into place (never over an existing journal).
//!
//! ## Durability
//!
//! Every append reaches the kernel before `append` returns, so a process crash loses
//! nothing. What survives a power loss depends on [`Durability`]: by default the file is
//! fsynced at the end of every turn.
//!
//! An open session holds an exclusive lock on its file: a second writer (another process,
//! or another `FileJournal` on the same folder) cannot open it until the first closes it.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::{Journal, JournalError, SessionMeta, check_append};
use crate::hash::{ContentHash, hex_into};
use crate::record::{Fence, Head, Record, Seq};
use crate::verify::{ChainCheck, Verified, VerifyError};

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

/// Bytes found after the last complete line of a session's file on open, and set aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The session.
    pub session: String,
    /// Where the torn bytes started in the file (the file was truncated to this length).
    pub offset: u64,
    /// How many bytes were set aside.
    pub len: u64,
    /// Where they were moved.
    pub saved_to: PathBuf,
}

const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    harness_rs_journal: u32,
    session: String,
    meta: SessionMeta,
}

/// One parsed line.
enum Line<'a> {
    Record(RawRecord<'a>),
    Fence(Fence),
}

/// A record line's parts, borrowed from the line.
struct RawRecord<'a> {
    seq: Seq,
    prev_hash: Option<ContentHash>,
    content_hash: ContentHash,
    fence: Fence,
    event: &'a [u8],
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
fn parse_line(line: &[u8]) -> Result<Line<'_>, &'static str> {
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
struct Lines<'a>(&'a [u8]);

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

fn write_record_line(r: &Record, out: &mut Vec<u8>) {
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

fn fence_line(f: Fence) -> Vec<u8> {
    format!("{{\"fence\":\"{f}\"}}\n").into_bytes()
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
/// (no `\n`); opening the session moves those bytes to `<session>.journal.torn-<offset>`
/// (`…torn-<offset>.<n>` if that name is taken: nothing set aside is overwritten),
/// truncates the file to its last complete line, and reports a [`TornTail`]. Nothing before
/// the torn line is touched. Opening a session also checks its whole chain (the checks of
/// [`verify_file_bytes`]): a session whose records do not hold is refused with
/// [`JournalError::Corrupt`], never served nor extended. Sessions are created and forked by writing a temporary file and
/// linking it into place (never over an existing journal).
///
/// ## Durability
///
/// Every append reaches the kernel before `append` returns, so a process crash loses
/// nothing. What survives a power loss depends on [`Durability`]: by default the file is
/// fsynced at the end of every turn.
///
/// An open session holds an exclusive lock on its file: a second writer (another process,
/// or another `FileJournal` on the same folder) cannot open it until the first closes it.
#[derive(Debug)]
pub struct FileJournal {
    dir: PathBuf,
    durability: Durability,
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
            open: Mutex::new(HashMap::new()),
            torn: Mutex::new(Vec::new()),
        })
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

    /// Torn tails set aside since this journal was opened.
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

    /// Opens a session file, sets aside a torn tail, and indexes its lines.
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
        let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JournalError::NotFound(session.to_owned()));
            }
            Err(e) => return Err(JournalError::Io(format!("{}: {e}", path.display()))),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Busy(session.to_owned()));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete < bytes.len() {
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
                    saved_to,
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
        let mut chain = ChainCheck::default();
        let mut marker: Fence = 0;
        for (i, line) in lines.enumerate() {
            let lineno = i as u64 + 2;
            let body = &line[..line.len() - 1];
            match parse_line(body).map_err(|r| corrupt(session, lineno, r))? {
                Line::Fence(f) => {
                    if f <= marker {
                        return Err(corrupt(session, lineno, "fence line does not increase"));
                    }
                    marker = f;
                    head.fence = f;
                }
                Line::Record(r) => {
                    if r.fence != marker {
                        let e = VerifyError::Fence {
                            seq: r.seq,
                            fence: r.fence,
                            expected: marker,
                        };
                        return Err(corrupt(session, lineno, e.to_string()));
                    }
                    chain
                        .check(
                            r.seq,
                            r.prev_hash.as_ref(),
                            &r.content_hash,
                            r.fence,
                            r.event,
                        )
                        .map_err(|e| corrupt(session, lineno, e.to_string()))?;
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

/// Verifies a session file's bytes: header, every line's form, seqs, links, content hashes
/// and fences (each record must carry the fence of the last fence line before it).
pub fn verify_file_bytes(session: &str, bytes: &[u8]) -> Result<Verified, VerifyError> {
    let mut c = ChainCheck::default();
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
    let mut marker: Fence = 0;
    for (i, line) in lines.enumerate() {
        let lineno = i as u64 + 2;
        let next = c.last_seq + 1;
        let Some(body) = line.strip_suffix(b"\n") else {
            return Err(VerifyError::Torn {
                seq: next,
                line: lineno,
            });
        };
        match parse_line(body).map_err(|r| malformed(next, lineno, r))? {
            Line::Fence(f) => {
                if f <= marker {
                    return Err(malformed(next, lineno, "fence line does not increase"));
                }
                marker = f;
            }
            Line::Record(r) => {
                if r.fence != marker {
                    return Err(VerifyError::Fence {
                        seq: r.seq,
                        fence: r.fence,
                        expected: marker,
                    });
                }
                // No UTF-8 check needed here: the hash covers the bytes as written.
                c.check(
                    r.seq,
                    r.prev_hash.as_ref(),
                    &r.content_hash,
                    r.fence,
                    r.event,
                )?;
            }
        }
    }
    Ok(c.finish())
}

impl Journal for FileJournal {
    fn create(&self, session: &str, meta: &SessionMeta) -> Result<(), JournalError> {
        validate(session)?;
        let _guard = self.lock()?;
        let header = Header {
            harness_rs_journal: FORMAT,
            session: session.to_owned(),
            meta: meta.clone(),
        };
        let mut bytes = serde_json::to_vec(&header).map_err(|e| JournalError::Io(e.to_string()))?;
        bytes.push(b'\n');
        self.write_new(session, &bytes)
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
        let header = Header {
            harness_rs_journal: FORMAT,
            session: child.to_owned(),
            meta: meta.clone(),
        };
        let mut bytes = serde_json::to_vec(&header).map_err(|e| JournalError::Io(e.to_string()))?;
        bytes.push(b'\n');
        bytes.extend_from_slice(&body);
        self.write_new(child, &bytes)
    }

    fn sync(&self, session: &str) -> Result<(), JournalError> {
        let mut open = self.lock()?;
        let sf = self.load(&mut open, session)?;
        if sf.dirty && self.durability == Durability::EveryTurn {
            sf.file.sync_data()?;
        }
        sf.dirty = false;
        Ok(())
    }

    fn verify(&self, session: &str) -> Result<Verified, VerifyError> {
        validate(session)?;
        let bytes = match fs::read(self.path_of(session)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JournalError::NotFound(session.to_owned()).into());
            }
            Err(e) => return Err(JournalError::from(e).into()),
        };
        verify_file_bytes(session, &bytes)
    }
}
