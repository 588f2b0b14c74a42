//! The embedded store's leases: TTLs and deadlines on tokio's clock (so tests
//! can pause time), the keys attached to each, and the order they expire in.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::error::{Result, StoreError};
use crate::types::{Lease, LeaseId};

/// The largest TTL etcd accepts (`MaxLeaseTTL`).
pub(super) const MAX_LEASE_TTL_SECS: i64 = 9_000_000_000;

#[derive(Debug)]
struct LeaseEntry {
    ttl: i64,
    deadline: Instant,
    keys: BTreeSet<Vec<u8>>,
}

/// Every live lease.
#[derive(Debug)]
pub(super) struct Leases {
    leases: HashMap<LeaseId, LeaseEntry>,
    deadlines: BTreeSet<(Instant, LeaseId)>,
    next_id: LeaseId,
    min_ttl: i64,
}

impl Leases {
    /// An empty table; TTLs below `min_ttl` seconds are raised to it, as etcd
    /// raises them to its minimum.
    pub fn new(min_ttl: i64) -> Self {
        // Ids that look like etcd's (large, distinct per process start) keep
        // election keys `<name>/<lease hex>` of two stores from colliding in
        // logs, without promising anything about their values.
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(1);
        Leases {
            leases: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_id: (seed & 0x0fff_ffff_ffff_0000).max(1),
            min_ttl: min_ttl.max(1),
        }
    }

    /// Grants a lease expiring `ttl` seconds from `now`.
    pub fn grant(&mut self, ttl: i64, now: Instant) -> Result<Lease> {
        if ttl > MAX_LEASE_TTL_SECS {
            return Err(StoreError::InvalidArgument(format!(
                "lease TTL {ttl} is too large (max {MAX_LEASE_TTL_SECS})"
            )));
        }
        let ttl = ttl.max(self.min_ttl);
        self.next_id += 1;
        let id = self.next_id;
        let deadline = now + secs(ttl);
        self.leases.insert(
            id,
            LeaseEntry {
                ttl,
                deadline,
                keys: BTreeSet::new(),
            },
        );
        self.deadlines.insert((deadline, id));
        Ok(Lease { id, ttl_secs: ttl })
    }

    /// Whether the lease exists.
    pub fn contains(&self, id: LeaseId) -> bool {
        self.leases.contains_key(&id)
    }

    /// Pushes the lease's deadline to `now + ttl`; returns the TTL.
    pub fn keep_alive(&mut self, id: LeaseId, now: Instant) -> Result<i64> {
        let entry = self
            .leases
            .get_mut(&id)
            .ok_or(StoreError::LeaseNotFound(id))?;
        self.deadlines.remove(&(entry.deadline, id));
        entry.deadline = now + secs(entry.ttl);
        self.deadlines.insert((entry.deadline, id));
        Ok(entry.ttl)
    }

    /// Whole seconds left, truncated as etcd reports them; `None` if gone.
    pub fn time_to_live(&self, id: LeaseId, now: Instant) -> Option<i64> {
        self.leases
            .get(&id)
            .map(|entry| entry.deadline.saturating_duration_since(now).as_secs() as i64)
    }

    /// Removes the lease; returns its keys, in key order.
    pub fn remove(&mut self, id: LeaseId) -> Option<BTreeSet<Vec<u8>>> {
        let entry = self.leases.remove(&id)?;
        self.deadlines.remove(&(entry.deadline, id));
        Some(entry.keys)
    }

    /// Records that `key` is attached to `id` (0 attaches nothing).
    pub fn attach(&mut self, id: LeaseId, key: &[u8]) {
        if let Some(entry) = self.leases.get_mut(&id) {
            entry.keys.insert(key.to_vec());
        }
    }

    /// Records that `key` is no longer attached to `id`.
    pub fn detach(&mut self, id: LeaseId, key: &[u8]) {
        if let Some(entry) = self.leases.get_mut(&id) {
            entry.keys.remove(key);
        }
    }

    /// Leases whose deadline is at or before `now`, earliest first.
    pub fn due(&self, now: Instant) -> Vec<LeaseId> {
        self.deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| *id)
            .collect()
    }

    /// The earliest deadline of any lease.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(u64::try_from(ttl).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ttls_are_raised_and_huge_ones_refused() {
        let mut leases = Leases::new(2);
        let now = Instant::now();
        assert_eq!(leases.grant(1, now).unwrap().ttl_secs, 2);
        assert_eq!(leases.grant(-5, now).unwrap().ttl_secs, 2);
        assert!(matches!(
            leases.grant(MAX_LEASE_TTL_SECS + 1, now),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn keepalive_moves_the_deadline() {
        let mut leases = Leases::new(1);
        let t0 = Instant::now();
        let a = leases.grant(5, t0).unwrap().id;
        let b = leases.grant(10, t0).unwrap().id;
        let t1 = t0 + Duration::from_secs(4);
        leases.keep_alive(a, t1).unwrap();
        assert!(leases.due(t0 + Duration::from_secs(8)).is_empty());
        assert_eq!(leases.due(t0 + Duration::from_secs(10)), vec![a, b]);
        assert_eq!(leases.time_to_live(a, t1), Some(5));
        leases.remove(a);
        assert!(leases.keep_alive(a, t1).is_err());
        assert_eq!(leases.time_to_live(a, t1), None);
    }
}
