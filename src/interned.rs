//! A table of distinct values, each numbered in the order first seen: the interning
//! the profile's and the exports' tables share (threads, wakers, strings, frames,
//! stacks), so that a value repeated per sample is held once and referred to by a
//! 4-byte index.
//!
//! Invariants: `ids` maps each entry of `items` to its index, and nothing else.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// Distinct values in first-seen order.
#[derive(Debug, Clone)]
pub struct Interned<K> {
    items: Vec<K>,
    ids: HashMap<K, u32, foldhash::fast::RandomState>,
}

impl<K> Default for Interned<K> {
    fn default() -> Self {
        Interned {
            items: Vec::new(),
            ids: HashMap::default(),
        }
    }
}

impl<K: Clone + Eq + Hash> Interned<K> {
    /// The index of `k`, added on first sight.
    pub fn id<Q>(&mut self, k: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(&i) = self.ids.get(k) {
            return i;
        }
        // Indices fit: every table interned is far smaller than 2^32.
        let i = self.items.len() as u32;
        self.items.push(k.to_owned());
        self.ids.insert(k.to_owned(), i);
        i
    }

    /// The value of index `i`.
    pub fn get(&self, i: u32) -> Option<&K> {
        self.items.get(i as usize)
    }

    /// Every value, by index.
    pub fn items(&self) -> &[K] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_numbered_once_in_first_seen_order() {
        let mut t: Interned<String> = Interned::default();
        assert_eq!((t.id("b"), t.id("a"), t.id("b")), (0, 1, 0));
        assert_eq!(t.items(), ["b".to_string(), "a".to_string()]);
        assert_eq!(t.get(1).map(String::as_str), Some("a"));
        assert_eq!(t.get(2), None);
        let mut p: Interned<(i32, i32)> = Interned::default();
        assert_eq!((p.id(&(1, 2)), p.id(&(1, 2)), p.id(&(2, 1))), (0, 0, 1));
    }
}
