//! [`Lru`]: keys in the order they were last used, for the bounded pools of the host and
//! of the file log (thread states in memory, open files, read indexes, cached records).

use std::collections::{BTreeMap, HashMap};

/// Keys by when they were last used: [`touch`](Self::touch) makes a key the newest,
/// [`pop_oldest_except`](Self::pop_oldest_except) takes the oldest. Each in `O(log n)`.
#[derive(Debug, Default)]
pub(crate) struct Lru {
    tick: u64,
    order: BTreeMap<u64, String>,
    at: HashMap<String, u64>,
}

impl Lru {
    /// Makes `key` the most recently used (adding it).
    pub(crate) fn touch(&mut self, key: &str) {
        // Already the newest (a turn touches its thread at every event): found without
        // hashing the key.
        if self
            .order
            .last_key_value()
            .is_some_and(|(&t, newest)| t == self.tick && newest == key)
        {
            return;
        }
        self.tick += 1;
        let owned = match self.at.get_mut(key) {
            Some(t) => {
                let owned = self.order.remove(t);
                *t = self.tick;
                owned.unwrap_or_else(|| key.to_owned())
            }
            None => {
                self.at.insert(key.to_owned(), self.tick);
                key.to_owned()
            }
        };
        self.order.insert(self.tick, owned);
    }

    /// Forgets `key`.
    pub(crate) fn remove(&mut self, key: &str) {
        if let Some(t) = self.at.remove(key) {
            self.order.remove(&t);
        }
    }

    /// How many keys it has.
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }

    /// The keys, least recently used first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.order.values().map(String::as_str)
    }

    /// Takes the least recently used key that is not `except` (the one in use).
    pub(crate) fn pop_oldest_except(&mut self, except: &str) -> Option<String> {
        let key = self.iter().find(|k| *k != except)?.to_owned();
        self.remove(&key);
        Some(key)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::Lru;

    #[test]
    fn the_oldest_goes_first_and_a_touch_makes_a_key_new() {
        let mut l = Lru::default();
        for k in ["a", "b", "c"] {
            l.touch(k);
        }
        l.touch("a");
        assert_eq!(l.iter().collect::<Vec<_>>(), ["b", "c", "a"]);
        assert_eq!(l.pop_oldest_except("b").as_deref(), Some("c"));
        l.remove("a");
        assert_eq!(l.len(), 1);
        assert_eq!(l.pop_oldest_except("b"), None);
        assert_eq!(l.pop_oldest_except("x").as_deref(), Some("b"));
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn touching_the_newest_again_changes_nothing_and_an_older_key_still_moves() {
        let mut l = Lru::default();
        for k in ["a", "b", "a", "a", "c", "a"] {
            l.touch(k);
        }
        assert_eq!(l.iter().collect::<Vec<_>>(), ["b", "c", "a"]);
        l.touch("b");
        l.touch("b");
        assert_eq!(l.iter().collect::<Vec<_>>(), ["c", "a", "b"]);
        assert_eq!(l.pop_oldest_except("a").as_deref(), Some("c"));
        l.touch("c");
        assert_eq!(l.iter().collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
