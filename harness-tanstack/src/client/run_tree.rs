//! The run tree a client keeps: the parent of each run, bounded.

use std::collections::{BTreeMap, HashMap};

/// The parent of each run, bounded: when full, the oldest run that ended goes, else the
/// oldest of all ("oldest": first started).
#[derive(Debug, Default)]
pub(super) struct RunTree {
    pub(super) parents: HashMap<String, Option<String>>,
    /// Each run's start number, and whether it ended.
    place: HashMap<String, (u64, bool)>,
    /// Runs that still run, and runs that ended, by start number.
    live: BTreeMap<u64, String>,
    ended: BTreeMap<u64, String>,
    next: u64,
}

impl RunTree {
    pub(super) fn started(&mut self, run: &str, parent: Option<String>, max: usize) {
        if let Some((n, ended)) = self.place.get_mut(run) {
            // Started again: it runs (again), in its old place.
            if *ended {
                *ended = false;
                if let Some(r) = self.ended.remove(n) {
                    self.live.insert(*n, r);
                }
            }
            self.parents.insert(run.to_owned(), parent);
            return;
        }
        while self.parents.len() >= max.max(1) {
            let Some((_, old)) = self.ended.pop_first().or_else(|| self.live.pop_first()) else {
                break;
            };
            self.parents.remove(&old);
            self.place.remove(&old);
        }
        self.next += 1;
        self.parents.insert(run.to_owned(), parent);
        self.place.insert(run.to_owned(), (self.next, false));
        self.live.insert(self.next, run.to_owned());
    }

    pub(super) fn ended(&mut self, run: &str) {
        if let Some((n, ended)) = self.place.get_mut(run) {
            if !*ended {
                *ended = true;
                if let Some(r) = self.live.remove(n) {
                    self.ended.insert(*n, r);
                }
            }
        }
    }
}
