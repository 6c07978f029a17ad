//! [`MemoryLog`]: the bounded in-memory log, which evicts the oldest events of a thread.

use std::collections::{HashMap, VecDeque};

use super::{EventLog, LogError, LogRecord};
use crate::agui::AguiEvent;
use crate::catalog::GapReason;

#[derive(Debug, Default)]
struct MemThread {
    first: u64,
    records: VecDeque<LogRecord>,
    bytes: usize,
}

impl MemThread {
    fn evict_oldest(&mut self) -> usize {
        match self.records.pop_front() {
            Some(old) => {
                self.bytes -= old.sse.len();
                self.first += 1;
                old.sse.len()
            }
            None => 0,
        }
    }
}

/// A bounded in-memory log. When a thread holds more than `max_events` records (or
/// `max_bytes` of rendered frames), its oldest are evicted; when all threads together hold
/// more than [`with_max_total_bytes`](Self::with_max_total_bytes), the oldest records of
/// the thread that holds the most go first. A client behind evicted records gets
/// `harness.gap` with reason `evicted`. A thread whose records all went keeps its cursors
/// (the next record takes the next number). Cursors do not survive a restart.
///
/// The waits records of its threads ([`EventLog::set_waits`]) are kept apart from the
/// records, never evicted, within [`with_max_waits_bytes`](Self::with_max_waits_bytes) all
/// together: past it a new record is refused (the turn that would wait fails).
#[derive(Debug)]
pub struct MemoryLog {
    threads: HashMap<String, MemThread>,
    owners: HashMap<String, String>,
    waits: HashMap<String, String>,
    waits_bytes: usize,
    max_waits_bytes: usize,
    max_events: usize,
    max_bytes: usize,
    max_total_bytes: usize,
    total_bytes: usize,
}

impl Default for MemoryLog {
    /// 100,000 records and 64 MiB per thread, 256 MiB in all.
    fn default() -> Self {
        MemoryLog::new(100_000, 64 << 20)
    }
}

impl MemoryLog {
    /// A log that keeps at most `max_events` records and `max_bytes` per thread (each at
    /// least 1), and 256 MiB in all.
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        MemoryLog {
            threads: HashMap::new(),
            owners: HashMap::new(),
            waits: HashMap::new(),
            waits_bytes: 0,
            max_waits_bytes: 64 << 20,
            max_events: max_events.max(1),
            max_bytes: max_bytes.max(1),
            max_total_bytes: 256 << 20,
            total_bytes: 0,
        }
    }

    /// The bytes of rendered frames all threads together may hold (at least 1; the newest
    /// record of the thread written last always stays).
    #[must_use]
    pub fn with_max_total_bytes(mut self, max_total_bytes: usize) -> Self {
        self.max_total_bytes = max_total_bytes.max(1);
        self
    }

    /// The bytes the waits records of all threads may hold together (default 64 MiB).
    #[must_use]
    pub fn with_max_waits_bytes(mut self, max_waits_bytes: usize) -> Self {
        self.max_waits_bytes = max_waits_bytes;
        self
    }

    /// The bytes of rendered frames it holds, all threads together.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Past the total: the thread with the most bytes gives its oldest records, until the
    /// total fits (the newest record of `keep` stays).
    fn evict_over_total(&mut self, keep: &str) {
        while self.total_bytes > self.max_total_bytes {
            let Some((key, t)) = self
                .threads
                .iter_mut()
                .filter(|(k, t)| t.records.len() > usize::from(k.as_str() == keep))
                .max_by_key(|(_, t)| t.bytes)
            else {
                return;
            };
            let min = usize::from(key.as_str() == keep);
            while self.total_bytes > self.max_total_bytes && t.records.len() > min {
                self.total_bytes -= t.evict_oldest();
            }
        }
    }
}

impl EventLog for MemoryLog {
    fn append_as(
        &mut self,
        key: &str,
        thread_id: &str,
        operation_id: &str,
        event: &AguiEvent,
    ) -> Result<LogRecord, LogError> {
        let t = self
            .threads
            .entry(key.to_owned())
            .or_insert_with(|| MemThread {
                first: 1,
                ..MemThread::default()
            });
        let seq = t.first + t.records.len() as u64;
        let rec = LogRecord::render_after(t.records.back(), thread_id, seq, operation_id, event);
        t.bytes += rec.sse.len();
        self.total_bytes += rec.sse.len();
        t.records.push_back(rec.clone());
        while t.records.len() > self.max_events || (t.bytes > self.max_bytes && t.records.len() > 1)
        {
            self.total_bytes -= t.evict_oldest();
        }
        self.evict_over_total(key);
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
        super::thread_keys(&self.threads, &self.owners)
    }

    fn contains(&self, thread_id: &str) -> bool {
        self.threads.contains_key(thread_id) || self.owners.contains_key(thread_id)
    }

    fn is_durable(&self) -> bool {
        false
    }

    /// Keeps the owner in memory: a host that drops an idle thread from its own memory
    /// reads it back from here.
    fn set_owner(&mut self, thread_id: &str, owner: &str) -> Result<(), LogError> {
        self.owners.insert(thread_id.to_owned(), owner.to_owned());
        Ok(())
    }

    fn owner(&self, thread_id: &str) -> Option<String> {
        self.owners.get(thread_id).cloned()
    }

    fn set_waits(&mut self, thread_id: &str, record: Option<&str>) -> Result<(), LogError> {
        let old = self.waits.get(thread_id).map_or(0, String::len);
        match record {
            None => {
                self.waits.remove(thread_id);
                self.waits_bytes -= old;
            }
            Some(r) => {
                let total = self.waits_bytes - old + r.len();
                if total > self.max_waits_bytes {
                    return Err(LogError::Io(format!(
                        "the memory log keeps at most {} bytes of waits",
                        self.max_waits_bytes
                    )));
                }
                self.waits.insert(thread_id.to_owned(), r.to_owned());
                self.waits_bytes = total;
            }
        }
        Ok(())
    }

    fn waits(&mut self, thread_id: &str) -> Result<Option<String>, LogError> {
        Ok(self.waits.get(thread_id).cloned())
    }
}
