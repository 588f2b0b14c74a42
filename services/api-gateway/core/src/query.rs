//! Blocking queries: every read may wait until the watch cache passes a
//! revision (Nomad's `?index=&wait=`), then answers from one snapshot and
//! reports that snapshot's revision.

use std::time::Duration;

use caravan_proto::{QueryMeta, QueryOptions};
use caravan_state::Snapshot;
use caravan_store::Revision;
use rand::Rng;

use crate::gateway::Gateway;

/// The namespace reads and writes use when the caller names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The namespace wildcard of list endpoints (`?namespace=*`).
pub const ALL_NAMESPACES: &str = "*";

/// A read's options, resolved against the gateway's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The namespace read; [`ALL_NAMESPACES`] matches every one.
    pub namespace: String,
    /// Answer only once the state is past this revision (0: at once).
    pub min_revision: Revision,
    /// How long to wait for that at most.
    pub wait: Duration,
    /// Only objects whose id starts with this.
    pub prefix: String,
}

impl Query {
    /// Resolves `options` (absent means a plain read) with `max_wait` as the
    /// default and the cap of the wait.
    pub fn new(options: Option<&QueryOptions>, max_wait: Duration) -> Query {
        let options = options.cloned().unwrap_or_default();
        let asked = u64::try_from(options.wait_ns).unwrap_or(0);
        let wait = if asked == 0 {
            max_wait
        } else {
            Duration::from_nanos(asked).min(max_wait)
        };
        Query {
            namespace: if options.namespace.is_empty() {
                DEFAULT_NAMESPACE.to_string()
            } else {
                options.namespace
            },
            min_revision: options.min_revision.max(0),
            wait,
            prefix: options.prefix,
        }
    }

    /// Whether `namespace` is one this query reads.
    pub fn matches_namespace(&self, namespace: &str) -> bool {
        self.namespace == ALL_NAMESPACES || self.namespace == namespace
    }

    /// Whether `id` passes the prefix filter.
    pub fn matches_prefix(&self, id: &str) -> bool {
        id.starts_with(&self.prefix)
    }

    /// The wait with Nomad's jitter of up to 1/16 added, so many clients
    /// blocked on one index don't all come back at the same instant.
    fn jittered_wait(&self) -> Duration {
        let sixteenth = self.wait / 16;
        if sixteenth.is_zero() {
            return self.wait;
        }
        let extra = rand::rng().random_range(0..=sixteenth.as_nanos().min(u128::from(u64::MAX)));
        self.wait + Duration::from_nanos(u64::try_from(extra).unwrap_or(0))
    }
}

/// Waits until the cache has passed `query.min_revision`, the wait ends or
/// the gateway shuts down, and returns the snapshot to answer from.
pub async fn block(gw: &Gateway, query: &Query) -> Snapshot {
    if query.min_revision <= 0 || gw.cache.revision() > query.min_revision {
        return gw.cache.snapshot();
    }
    let deadline = tokio::time::Instant::now() + query.jittered_wait();
    let mut revisions = gw.cache.subscribe();
    // Subscribed first: a change after this is seen.
    let _waiting = gw.waiting.enter();
    loop {
        if *revisions.borrow_and_update() > query.min_revision {
            break;
        }
        tokio::select! {
            changed = revisions.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            _ = tokio::time::sleep_until(deadline) => break,
            _ = gw.shutdown.cancelled() => break,
        }
    }
    gw.cache.snapshot()
}

/// The metadata of an answer given from `snapshot` by `gw`.
pub fn meta(gw: &Gateway, snapshot: &Snapshot) -> QueryMeta {
    QueryMeta {
        revision: snapshot.revision(),
        known_leader: gw.leader_contact().known,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_default_to_and_are_capped_by_the_maximum() {
        let max = Duration::from_secs(300);
        let q = Query::new(None, max);
        assert_eq!(q.wait, max);
        assert_eq!(q.namespace, DEFAULT_NAMESPACE);
        let q = Query::new(
            Some(&QueryOptions {
                wait_ns: 3_600_000_000_000,
                ..Default::default()
            }),
            max,
        );
        assert_eq!(q.wait, max);
        let q = Query::new(
            Some(&QueryOptions {
                wait_ns: 1_000_000_000,
                min_revision: 7,
                namespace: "*".into(),
                prefix: "ab".into(),
            }),
            max,
        );
        assert_eq!(q.wait, Duration::from_secs(1));
        assert!(q.matches_namespace("anything"));
        assert!(q.matches_prefix("abc") && !q.matches_prefix("b"));
        for _ in 0..100 {
            let w = q.jittered_wait();
            assert!(w >= q.wait && w <= q.wait + q.wait / 16, "{w:?}");
        }
    }
}
