//! Allocation names of one task group: which indexes are taken, which to use next.

use std::collections::BTreeSet;

use caravan_model::{alloc_index, alloc_name};

/// The indexes in use among a group's allocations.
#[derive(Debug, Clone)]
pub struct NameIndex {
    job: String,
    group: String,
    count: u32,
    used: BTreeSet<u32>,
}

impl NameIndex {
    /// Builds the index from the names in use.
    pub fn new<'a>(
        job: &str,
        group: &str,
        count: u32,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Self {
            job: job.to_string(),
            group: group.to_string(),
            count,
            used: names.into_iter().filter_map(alloc_index).collect(),
        }
    }

    fn name(&self, i: u32) -> String {
        alloc_name(&self.job, &self.group, i)
    }

    /// Frees an index.
    pub fn unset(&mut self, name: &str) {
        if let Some(i) = alloc_index(name) {
            self.used.remove(&i);
        }
    }

    /// The next `n` names: free indexes below the count first, then beyond it.
    pub fn next(&mut self, n: usize) -> Vec<String> {
        let mut out = Vec::with_capacity(n);
        let mut i = 0u32;
        while out.len() < n {
            if !self.used.contains(&i) && (i < self.count || out.len() < n) {
                self.used.insert(i);
                out.push(self.name(i));
            }
            i += 1;
        }
        out
    }

    /// The `n` highest names in use, which are freed.
    pub fn highest(&mut self, n: usize) -> BTreeSet<String> {
        let pick: Vec<u32> = self.used.iter().rev().take(n).copied().collect();
        pick.into_iter()
            .map(|i| {
                self.used.remove(&i);
                self.name(i)
            })
            .collect()
    }

    /// Names for `n` canaries: those of allocations being replaced first (so a
    /// promoted canary takes over a name), then free ones.
    pub fn next_canaries(
        &mut self,
        n: usize,
        canaries: &[String],
        destructive: &[String],
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(n);
        let taken: BTreeSet<u32> = canaries.iter().filter_map(|c| alloc_index(c)).collect();
        let mut prefer: Vec<u32> = destructive.iter().filter_map(|d| alloc_index(d)).collect();
        prefer.sort_unstable();
        prefer.dedup();
        for i in prefer {
            if out.len() >= n {
                return out;
            }
            if !taken.contains(&i) && i < self.count {
                out.push(self.name(i));
            }
        }
        let mut i = 0u32;
        while out.len() < n {
            let name = self.name(i);
            if !taken.contains(&i)
                && !out.contains(&name)
                && (i >= self.count || !self.used.contains(&i))
            {
                self.used.insert(i);
                out.push(name);
            }
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_fills_gaps_then_overflows() {
        let mut n = NameIndex::new("j", "g", 3, ["j.g[1]"]);
        assert_eq!(n.next(3), vec!["j.g[0]", "j.g[2]", "j.g[3]"]);
    }

    #[test]
    fn highest_and_canaries() {
        let mut n = NameIndex::new("j", "g", 3, ["j.g[0]", "j.g[1]", "j.g[2]"]);
        let h = n.highest(2);
        assert!(h.contains("j.g[2]") && h.contains("j.g[1]"));
        let mut n = NameIndex::new("j", "g", 3, ["j.g[0]", "j.g[1]", "j.g[2]"]);
        let c = n.next_canaries(2, &["j.g[0]".into()], &["j.g[0]".into(), "j.g[2]".into()]);
        assert_eq!(c, vec!["j.g[2]", "j.g[3]"]);
    }
}
