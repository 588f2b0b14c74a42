//! The placement metrics of cached allocations as stored, for a cache that
//! leaves them out of its allocations (they are large once decoded and
//! rarely read) but whose owner rewrites allocations whole: the informer
//! keeps each allocation's metrics bytes here, with the revision they were
//! stored at.

use std::collections::HashMap;

use caravan_store::Revision;
use parking_lot::Mutex;

/// The revision an allocation was stored at, and its metrics fields exactly
/// as stored (tag, length and body; empty for none).
type Held = (Revision, Box<[u8]>);

/// Allocation id → its stored metrics.
#[derive(Debug, Default)]
pub struct StoredMetrics {
    by_alloc: Mutex<HashMap<Box<str>, Held>>,
}

impl StoredMetrics {
    /// Allocation `id` was stored at `revision` with `metrics`.
    pub fn put(&self, id: &str, revision: Revision, metrics: &[u8]) {
        let mut by_alloc = self.by_alloc.lock();
        match by_alloc.get_mut(id) {
            Some(held) if held.0 < revision => {
                held.0 = revision;
                if *held.1 != *metrics {
                    held.1 = metrics.into();
                }
            }
            Some(_) => {}
            None => {
                by_alloc.insert(id.into(), (revision, metrics.into()));
            }
        }
    }

    /// Allocation `id` was deleted.
    pub fn delete(&self, id: &str) {
        self.by_alloc.lock().remove(id);
    }

    /// The metrics of allocation `id` as stored at `revision`; `None` when
    /// the bytes held are of another revision, or there are none.
    pub fn at(&self, id: &str, revision: Revision) -> Option<Vec<u8>> {
        let by_alloc = self.by_alloc.lock();
        let (held, metrics) = by_alloc.get(id)?;
        (*held == revision).then(|| metrics.to_vec())
    }

    /// How many allocations are held.
    pub fn len(&self) -> usize {
        self.by_alloc.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_answer_only_for_the_revision_they_were_stored_at() {
        let m = StoredMetrics::default();
        m.put("a", 5, b"m5");
        assert_eq!(m.at("a", 5).as_deref(), Some(&b"m5"[..]));
        assert_eq!(m.at("a", 4), None);
        m.put("a", 7, b"m7");
        assert_eq!(m.at("a", 5), None);
        assert_eq!(m.at("a", 7).as_deref(), Some(&b"m7"[..]));
        // An older write arriving late (a relist) does not win.
        m.put("a", 6, b"m6");
        assert_eq!(m.at("a", 7).as_deref(), Some(&b"m7"[..]));
        m.delete("a");
        assert_eq!(m.at("a", 7), None);
        assert!(m.is_empty());
    }
}
