//! A proto `map<string, Message>` of a few entries, held as a vector.
//!
//! The maps an allocation carries (its task states, its tasks' resources)
//! hold one entry per task, and every service caches an allocation per
//! placement. As a `BTreeMap` each costs a whole B-tree leaf (room for
//! eleven entries, about 1.2 KB); as a vector it costs its entries. The
//! wire format is the map's: each entry is a length-delimited record of the
//! field's tag with the key as field 1 and the value as field 2, default
//! key or value left out, so the bytes are exactly a `BTreeMap`'s and
//! either side reads the other's.
//!
//! Entries are kept sorted by key, with no key twice, by every method that
//! builds or changes the map. A map decoded from another encoder may hold
//! them in its order or hold a key twice (the last one counts, as in any
//! proto map); every reading method honours that, and the first change
//! sorts it.

use std::fmt;
use std::ops::{Deref, DerefMut, Index};

use prost::Message;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{self, DecodeContext, WireType};

/// One entry of a [`SmallMap`], encoded as a proto map entry.
#[derive(Clone, PartialEq, Default)]
pub struct MapEntry<V> {
    /// The key (field 1).
    pub key: String,
    /// The value (field 2).
    pub value: V,
}

impl<V: fmt::Debug> fmt::Debug for MapEntry<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MapEntry")
            .field(&self.key)
            .field(&self.value)
            .finish()
    }
}

impl<V: Message + Default + PartialEq> Message for MapEntry<V> {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.key.is_empty() {
            encoding::string::encode(1, &self.key, buf);
        }
        if self.value != V::default() {
            encoding::message::encode(2, &self.value, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => encoding::string::merge(wire_type, &mut self.key, buf, ctx),
            2 => encoding::message::merge(wire_type, &mut self.value, buf, ctx),
            _ => encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let key = if self.key.is_empty() {
            0
        } else {
            encoding::string::encoded_len(1, &self.key)
        };
        let value = if self.value == V::default() {
            0
        } else {
            encoding::message::encoded_len(2, &self.value)
        };
        key + value
    }

    fn clear(&mut self) {
        self.key.clear();
        self.value.clear();
    }
}

/// A proto map with string keys held as a vector of entries; see the module
/// documentation. Its API follows `BTreeMap`'s where it can; iterating a
/// reference yields the raw entries, which prost's generated code encodes,
/// so use [`SmallMap::iter`] for key/value pairs. The `Deref` to the entries
/// exists for the generated code too: read and change the map through its
/// own methods.
#[derive(Clone)]
pub struct SmallMap<V> {
    entries: Vec<MapEntry<V>>,
}

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<V> SmallMap<V> {
    /// An empty map; allocates nothing.
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Whether the entries are sorted with no key twice, as this type keeps
    /// them; false only for a map decoded from another encoder.
    fn is_normal(&self) -> bool {
        self.entries.windows(2).all(|w| w[0].key < w[1].key)
    }

    /// Whether entry `i` is shadowed by a later one with its key.
    fn shadowed(&self, i: usize) -> bool {
        let key = &self.entries[i].key;
        self.entries[i + 1..].iter().any(|e| &e.key == key)
    }

    /// Sorts the entries by key and keeps the last of each key, as decoding
    /// a proto map does.
    fn normalize(&mut self) {
        if self.is_normal() {
            return;
        }
        self.entries.sort_by(|a, b| a.key.cmp(&b.key));
        // `dedup_by` drops the later of two equal neighbours: move the later
        // value into the one that stays first.
        self.entries.dedup_by(|later, earlier| {
            let same = later.key == earlier.key;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
    }

    /// Sorts as [`SmallMap::normalize`] does and gives back spare capacity:
    /// for a map about to be held for long, such as one in a cache.
    pub fn shrink(&mut self) {
        self.normalize();
        self.entries.shrink_to_fit();
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().rposition(|e| e.key == key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.position(key).map(|i| &self.entries[i].value)
    }

    /// The value of `key`, to change in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.position(key).map(|i| &mut self.entries[i].value)
    }

    /// Whether the map holds `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`, returning the value it replaced. The vector
    /// grows by exactly one entry: these maps stay small.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        self.normalize();
        match self
            .entries
            .binary_search_by(|e| e.key.as_str().cmp(key.as_str()))
        {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].value, value)),
            Err(i) => {
                self.entries.reserve_exact(1);
                self.entries.insert(i, MapEntry { key, value });
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.normalize();
        let i = self.position(key)?;
        Some(self.entries.remove(i).value)
    }

    /// The value of `key`, inserted from `make` if the map lacks it.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                self.insert(key.to_owned(), make());
                self.position(key).expect("just inserted")
            }
        };
        &mut self.entries[i].value
    }

    /// The key and value pairs, in key order (in the encoder's order for a
    /// map decoded unsorted, each key once).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &V)> + '_ {
        let normal = self.is_normal();
        self.entries
            .iter()
            .enumerate()
            .filter(move |(i, _)| normal || !self.shadowed(*i))
            .map(|(_, e)| (&e.key, &e.value))
    }

    /// The pairs with the values to change in place, in key order.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&String, &mut V)> + '_ {
        self.normalize();
        self.entries.iter_mut().map(|e| (&e.key, &mut e.value))
    }

    /// The keys, in key order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// The values, in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// The values to change in place, in key order.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + '_ {
        self.iter_mut().map(|(_, v)| v)
    }

    /// How many keys the map holds.
    pub fn len(&self) -> usize {
        if self.is_normal() {
            self.entries.len()
        } else {
            self.iter().count()
        }
    }

    /// Whether the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Keeps the entries `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut V) -> bool) {
        self.normalize();
        self.entries.retain_mut(|e| keep(&e.key, &mut e.value));
    }
}

impl<V> Deref for SmallMap<V> {
    type Target = Vec<MapEntry<V>>;
    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl<V> DerefMut for SmallMap<V> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.entries
    }
}

/// The raw entries, as prost's generated code encodes them.
impl<'a, V> IntoIterator for &'a SmallMap<V> {
    type Item = &'a MapEntry<V>;
    type IntoIter = std::slice::Iter<'a, MapEntry<V>>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

impl<V> IntoIterator for SmallMap<V> {
    type Item = (String, V);
    type IntoIter = std::iter::Map<std::vec::IntoIter<MapEntry<V>>, fn(MapEntry<V>) -> (String, V)>;
    fn into_iter(mut self) -> Self::IntoIter {
        self.normalize();
        self.entries.into_iter().map(|e| (e.key, e.value))
    }
}

impl<V, K: Into<String>> FromIterator<(K, V)> for SmallMap<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = Self {
            entries: iter
                .into_iter()
                .map(|(key, value)| MapEntry {
                    key: key.into(),
                    value,
                })
                .collect(),
        };
        map.shrink();
        map
    }
}

impl<V, K: Into<String>> Extend<(K, V)> for SmallMap<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (key, value) in iter {
            self.insert(key.into(), value);
        }
    }
}

impl<V, K: Into<String>, const N: usize> From<[(K, V); N]> for SmallMap<V> {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl<V> From<std::collections::BTreeMap<String, V>> for SmallMap<V> {
    fn from(map: std::collections::BTreeMap<String, V>) -> Self {
        map.into_iter().collect()
    }
}

impl<V> Index<&str> for SmallMap<V> {
    type Output = V;
    fn index(&self, key: &str) -> &V {
        self.get(key).expect("no entry for the key in the map")
    }
}

/// Equal when they map the same keys to equal values, whatever order or
/// repeats their entries hold.
impl<V: PartialEq> PartialEq for SmallMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<V: fmt::Debug> fmt::Debug for SmallMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
