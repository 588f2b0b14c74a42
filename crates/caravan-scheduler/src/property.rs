//! Counts of a job's allocations per value of a node property, kept up to date as
//! the plan grows, for `spread` and `distinct_property`.

use std::collections::HashMap;

/// Marks a node whose property value has not been looked up yet.
const UNKNOWN: u32 = u32::MAX;
/// Marks a node that does not have the property.
pub const MISSING: u32 = u32::MAX - 1;

/// Allocation counts per property value.
#[derive(Debug, Clone)]
pub struct PropertyCounts {
    /// The property, e.g. `${meta.rack}`.
    pub target: String,
    /// Only allocations of this group count; `None` counts the whole job.
    pub group: Option<String>,
    values: Vec<String>,
    index: HashMap<String, u32>,
    counts: Vec<u32>,
    node_values: Vec<u32>,
}

impl PropertyCounts {
    /// An empty counter for `target`, sized for `nodes` table entries.
    pub fn new(target: &str, group: Option<&str>, nodes: usize) -> Self {
        Self {
            target: target.to_string(),
            group: group.map(str::to_string),
            values: Vec::new(),
            index: HashMap::new(),
            counts: Vec::new(),
            node_values: vec![UNKNOWN; nodes],
        }
    }

    /// Whether an allocation of `group` counts here.
    pub fn in_scope(&self, group: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == group)
    }

    /// The value id of a table node, if already looked up.
    #[inline]
    pub fn cached(&self, node: u32) -> Option<u32> {
        self.node_values
            .get(node as usize)
            .copied()
            .filter(|v| *v != UNKNOWN)
    }

    /// Records the value of a table node and returns its id.
    pub fn set_node_value(&mut self, node: u32, value: Option<String>) -> u32 {
        let id = match value {
            Some(v) => self.intern(v),
            None => MISSING,
        };
        let i = node as usize;
        if i >= self.node_values.len() {
            self.node_values.resize(i + 1, UNKNOWN);
        }
        self.node_values[i] = id;
        id
    }

    /// The id of a value, adding it if new.
    pub fn intern(&mut self, value: String) -> u32 {
        if let Some(&id) = self.index.get(&value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.index.insert(value.clone(), id);
        self.values.push(value);
        self.counts.push(0);
        id
    }

    /// The id of a value, if it was seen.
    #[cfg(test)]
    pub fn lookup(&self, value: &str) -> Option<u32> {
        self.index.get(value).copied()
    }

    /// Adjusts the count of a value id.
    pub fn bump(&mut self, value: u32, up: bool) {
        if let Some(c) = self.counts.get_mut(value as usize) {
            *c = if up { *c + 1 } else { c.saturating_sub(1) };
        }
    }

    /// The count of a value id.
    pub fn count(&self, value: u32) -> u32 {
        self.counts.get(value as usize).copied().unwrap_or(0)
    }

    /// Smallest and largest non-zero count, if any value is in use.
    pub fn min_max_used(&self) -> Option<(u32, u32)> {
        let mut it = self.counts.iter().copied().filter(|c| *c > 0);
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), c| (lo.min(c), hi.max(c))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_bumps() {
        let mut p = PropertyCounts::new("${meta.rack}", Some("web"), 3);
        let r1 = p.set_node_value(0, Some("r1".into()));
        let r2 = p.set_node_value(1, Some("r2".into()));
        assert_eq!(p.set_node_value(2, None), MISSING);
        assert_eq!(p.cached(0), Some(r1));
        assert_eq!(p.cached(5), None);
        p.bump(r1, true);
        p.bump(r1, true);
        p.bump(r2, true);
        assert_eq!(p.min_max_used(), Some((1, 2)));
        p.bump(r2, false);
        p.bump(r2, false);
        assert_eq!(p.count(r2), 0);
        assert_eq!(p.min_max_used(), Some((2, 2)));
        assert!(p.in_scope("web") && !p.in_scope("db"));
        assert_eq!(p.lookup("r2"), Some(r2));
    }
}
