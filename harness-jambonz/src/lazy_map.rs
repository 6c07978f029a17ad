//! A map allocated only while it holds something: the tables a call keeps for answers it
//! waits for (tool results, command results) are empty between turns, and an empty
//! `HashMap` is still 48 bytes of every call's state (memory per idle call); this is 8.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// A `HashMap` boxed on its first entry and freed with its last.
// The box is the point: 8 bytes while empty, not the 48 of an empty `HashMap`.
#[allow(clippy::box_collection)]
#[derive(Debug)]
pub(crate) struct LazyMap<K, V>(Option<Box<HashMap<K, V>>>);

impl<K, V> Default for LazyMap<K, V> {
    fn default() -> Self {
        LazyMap(None)
    }
}

impl<K: Hash + Eq, V> LazyMap<K, V> {
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        self.0.get_or_insert_with(Box::default).insert(k, v)
    }

    pub(crate) fn remove<Q>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let map = self.0.as_mut()?;
        let v = map.remove(k);
        if map.is_empty() {
            self.0 = None;
        }
        v
    }

    pub(crate) fn retain(&mut self, f: impl FnMut(&K, &mut V) -> bool) {
        if let Some(map) = &mut self.0 {
            map.retain(f);
            if map.is_empty() {
                self.0 = None;
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |m| m.len())
    }

    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::LazyMap;

    #[test]
    fn boxed_with_its_first_entry_and_freed_with_its_last() {
        let mut m = LazyMap::default();
        assert!(m.0.is_none());
        m.insert("a".to_owned(), 1);
        m.insert("b".to_owned(), 2);
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove("a"), Some(1));
        assert!(m.0.is_some());
        assert_eq!(m.remove("a"), None);
        m.retain(|_, v| *v != 2);
        assert!(m.0.is_none());
        assert_eq!(m.remove("b"), None);
        m.insert("c".to_owned(), 3);
        m.clear();
        assert_eq!(m.len(), 0);
    }
}
