//! The key types of the cache's tables: shared ids and maps keyed by
//! (namespace, job id).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};

/// Longest id kept inline; UUIDs (36 bytes) fit.
const INLINE: usize = 38;

/// An object id as the tables key it. Ids up to 38 bytes (UUIDs, most job
/// ids) live inline, so the B-tree searches that dominate applying an event
/// compare bytes inside the node instead of chasing a pointer per probe;
/// longer ids share one heap copy.
#[derive(Clone)]
pub struct Id(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl Id {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        // Built only from `&str`, so the bytes are always valid UTF-8.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(s) => s.as_bytes(),
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Id {}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    /// Byte order, which is `str` order.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

/// Sound: `Id`'s equality, order and hash are those of its `str`.
impl std::borrow::Borrow<str> for Id {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Deref for Id {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Id(Repr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            Id(Repr::Shared(Arc::from(s)))
        }
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id::from(s.as_str())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A persistent map keyed by (namespace, job id). Nested rather than keyed
/// by a pair so lookups borrow `&str`s instead of building a key.
#[derive(Clone, Debug)]
pub struct JobMap<V: Clone> {
    by_ns: OrdMap<Id, OrdMap<Id, V>>,
    len: usize,
}

impl<V: Clone> Default for JobMap<V> {
    fn default() -> Self {
        JobMap {
            by_ns: OrdMap::new(),
            len: 0,
        }
    }
}

impl<V: Clone> JobMap<V> {
    /// The value of one job.
    pub fn get(&self, namespace: &str, job_id: &str) -> Option<&V> {
        self.by_ns.get(&Id::from(namespace))?.get(&Id::from(job_id))
    }

    /// The value of one job, for in-place change (copying shared nodes).
    pub fn get_mut(&mut self, namespace: &str, job_id: &str) -> Option<&mut V> {
        self.by_ns
            .get_mut(&Id::from(namespace))?
            .get_mut(&Id::from(job_id))
    }

    /// Sets the value of one job; returns the previous one.
    pub fn insert(&mut self, namespace: &str, job_id: &str, value: V) -> Option<V> {
        let (namespace, job_id) = (Id::from(namespace), Id::from(job_id));
        if let Some(jobs) = self.by_ns.get_mut(&namespace) {
            if let Some(slot) = jobs.get_mut(&job_id) {
                return Some(std::mem::replace(slot, value));
            }
            jobs.insert(job_id, value);
        } else {
            self.by_ns.insert(namespace, OrdMap::unit(job_id, value));
        }
        self.len += 1;
        None
    }

    /// Removes one job; returns its value.
    pub fn remove(&mut self, namespace: &str, job_id: &str) -> Option<V> {
        let namespace = Id::from(namespace);
        let jobs = self.by_ns.get_mut(&namespace)?;
        let old = jobs.remove(&Id::from(job_id))?;
        if jobs.is_empty() {
            self.by_ns.remove(&namespace);
        }
        self.len -= 1;
        Some(old)
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no jobs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every (namespace, job id, value), ordered by namespace then job id.
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &Id, &V)> + '_ {
        self.by_ns
            .iter()
            .flat_map(|(ns, jobs)| jobs.iter().map(move |(id, v)| (ns, id, v)))
    }

    /// Every (job id, value) of one namespace, ordered by job id.
    pub fn iter_namespace<'a>(
        &'a self,
        namespace: &str,
    ) -> impl Iterator<Item = (&'a Id, &'a V)> + 'a {
        self.by_ns
            .get(&Id::from(namespace))
            .into_iter()
            .flat_map(|jobs| jobs.iter())
    }
}

/// The members of one job in a by-job index: ids with their values (evals,
/// deployments) or bare ids (allocations, resolved through their table).
pub(crate) trait JobSet: Clone + Default {
    /// What is kept beside each member's id.
    type Value;
    fn put(&mut self, member: Id, value: Self::Value);
    fn take(&mut self, member: &Id);
    fn is_empty(&self) -> bool;
}

impl<T> JobSet for OrdMap<Id, Arc<T>> {
    type Value = Arc<T>;
    fn put(&mut self, member: Id, value: Arc<T>) {
        self.insert(member, value);
    }
    fn take(&mut self, member: &Id) {
        self.remove(member);
    }
    fn is_empty(&self) -> bool {
        OrdMap::is_empty(self)
    }
}

impl JobSet for OrdSet<Id> {
    type Value = ();
    fn put(&mut self, member: Id, _: ()) {
        self.insert(member);
    }
    fn take(&mut self, member: &Id) {
        self.remove(member);
    }
    fn is_empty(&self) -> bool {
        OrdSet::is_empty(self)
    }
}

/// Adds `value` under `member` in the set of one job, creating the set.
pub(crate) fn job_set_insert<S: JobSet>(
    map: &mut JobMap<S>,
    namespace: &str,
    job_id: &str,
    member: Id,
    value: S::Value,
) {
    if let Some(set) = map.get_mut(namespace, job_id) {
        set.put(member, value);
    } else {
        let mut set = S::default();
        set.put(member, value);
        map.insert(namespace, job_id, set);
    }
}

/// Removes `member` from the set of one job, dropping the set once empty so
/// deleted jobs leave nothing behind.
pub(crate) fn job_set_remove<S: JobSet>(
    map: &mut JobMap<S>,
    namespace: &str,
    job_id: &str,
    member: &str,
) {
    let now_empty = match map.get_mut(namespace, job_id) {
        Some(set) => {
            set.take(&Id::from(member));
            set.is_empty()
        }
        None => false,
    };
    if now_empty {
        map.remove(namespace, job_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_inline_or_shared_compare_as_strings() {
        let long = "x".repeat(100);
        let mut ids: Vec<Id> = [
            "b",
            "",
            "a",
            "ab",
            long.as_str(),
            "b7c3f1e2-0000-4000-8000-1234567890ab",
        ]
        .into_iter()
        .map(Id::from)
        .collect();
        ids.sort();
        let strs: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        let mut want = strs.clone();
        want.sort();
        assert_eq!(strs, want);
        assert_eq!(Id::from(long.as_str()), Id::from(long.clone()));
        assert_eq!(Id::from(long.as_str()).as_str(), long);
        assert_eq!(format!("{}", Id::from("web")), "web");
        assert!(std::mem::size_of::<Id>() <= 40);
    }

    #[test]
    fn job_map_insert_replace_remove() {
        let mut m: JobMap<u32> = JobMap::default();
        assert_eq!(m.insert("default", "web", 1), None);
        assert_eq!(m.insert("default", "web", 2), Some(1));
        assert_eq!(m.insert("prod", "web", 3), None);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get("default", "web"), Some(&2));
        assert_eq!(m.get("default", "api"), None);
        let ns: Vec<_> = m
            .iter()
            .map(|(ns, id, v)| (ns.to_string(), id.to_string(), *v))
            .collect();
        assert_eq!(
            ns,
            vec![
                ("default".into(), "web".into(), 2),
                ("prod".into(), "web".into(), 3)
            ]
        );
        assert_eq!(m.remove("default", "web"), Some(2));
        assert_eq!(m.remove("default", "web"), None);
        assert_eq!(m.len(), 1);
        assert_eq!(m.iter_namespace("default").count(), 0);
        assert_eq!(m.iter_namespace("prod").count(), 1);
    }

    #[test]
    fn job_sets_drop_empty_jobs() {
        let mut m: JobMap<OrdMap<Id, Arc<u8>>> = JobMap::default();
        job_set_insert(&mut m, "default", "web", Id::from("a"), Arc::new(1));
        job_set_insert(&mut m, "default", "web", Id::from("b"), Arc::new(2));
        assert_eq!(m.get("default", "web").map(|s| s.len()), Some(2));
        job_set_remove(&mut m, "default", "web", "a");
        job_set_remove(&mut m, "default", "web", "b");
        assert!(m.is_empty());
        job_set_remove(&mut m, "default", "web", "b");
        assert!(m.is_empty());
    }
}

/// A table value: an object shared by every snapshot that holds it, equal to
/// another only when it is the same object. Snapshot diffs compare values of
/// tree nodes that were copied but not changed; an object's identity is what
/// tells a change, since every write decodes a new one, and comparing whole
/// messages field by field cost more than the rest of a diff.
#[derive(Debug)]
pub(crate) struct Shared<T>(pub(crate) Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
