//! [`MemoryLog`]: the bounded in-memory log, which evicts the oldest events of a thread.

use std::collections::{HashMap, VecDeque};

use super::{EventLog, LogError, LogRecord};
use crate::agui::Event;
use crate::catalog::GapReason;

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
