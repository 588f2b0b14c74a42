//! Reading a cluster's state straight from etcd, decoded as the services
//! store it, and the invariants every test checks against it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, EvalStatus, Evaluation, Job, Node};
use caravan_state::{Keyspace, Kind, StateObject, decode};
use caravan_store::{KeyValue, Range, Store};

pub use crate::overcommit::overcommitted_nodes;

/// Keys per page of [`ClusterState::list`]: about 10 MB of allocations.
const LIST_PAGE: i64 = 10_000;

/// How many times a list at one revision starts again at a newer one when
/// compaction (the broker's, every `compaction_interval_ms`) removed its
/// revision between two pages.
const COMPACTED_RESTARTS: usize = 5;

/// Runs `read` again, up to [`COMPACTED_RESTARTS`] times, while the store
/// answers that the revision it reads at was compacted.
async fn restarting_when_compacted<T, F, Fut>(read: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut restarts = 0;
    loop {
        match read().await {
            Err(err)
                if restarts < COMPACTED_RESTARTS
                    && matches!(
                        err.downcast_ref::<caravan_store::StoreError>(),
                        Some(caravan_store::StoreError::Compacted { .. })
                    ) =>
            {
                restarts += 1;
            }
            answer => return answer,
        }
    }
}

/// The keys of one cluster (one prefix) in etcd.
#[derive(Clone)]
pub struct ClusterState {
    store: Arc<dyn Store>,
    keys: Keyspace,
}

impl std::fmt::Debug for ClusterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterState")
            .field("prefix", &self.keys.prefix())
            .finish_non_exhaustive()
    }
}

impl ClusterState {
    /// The state under `keys` in `store`.
    pub fn new(store: Arc<dyn Store>, keys: Keyspace) -> ClusterState {
        ClusterState { store, keys }
    }

    /// The store itself.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The cluster's key layout.
    pub fn keys(&self) -> &Keyspace {
        &self.keys
    }

    /// Every object of one kind, read in pages of [`LIST_PAGE`] keys at one
    /// revision: a million allocations are more than one etcd reply may carry.
    pub async fn list<T: StateObject>(&self, kind: Kind) -> anyhow::Result<Vec<T>> {
        let (kvs, _) = restarting_when_compacted(|| self.list_values(kind, 0)).await?;
        Ok(kvs.iter().map(decode::<T>).collect::<Result<_, _>>()?)
    }

    /// The stored values of one kind, in pages of [`LIST_PAGE`] keys at one
    /// revision (`revision`, or the first page's when 0), with that
    /// revision.
    async fn list_values(&self, kind: Kind, revision: i64) -> anyhow::Result<(Vec<KeyValue>, i64)> {
        let mut range = self.keys.range_of(kind);
        range.limit = LIST_PAGE;
        range.revision = revision;
        let mut out = Vec::new();
        loop {
            let res = self.store.range(range.clone()).await?;
            // Every page at the first one's revision.
            if range.revision == 0 {
                range.revision = res.revision;
            }
            let more = res.more;
            let next = res
                .kvs
                .last()
                .map(|last| last.key.iter().copied().chain([0]).collect());
            out.extend(res.kvs);
            match next {
                Some(start) if more => range.start = start,
                _ => return Ok((out, range.revision)),
            }
        }
    }

    /// Every allocation, its record folded with its client's statuses.
    pub async fn allocs(&self) -> anyhow::Result<Vec<Allocation>> {
        let (records, statuses) = restarting_when_compacted(|| async {
            let (records, revision) = self.list_values(Kind::Allocs, 0).await?;
            let (mut statuses, _) = self.list_values(Kind::AllocStatus, revision).await?;
            statuses.extend(self.list_values(Kind::JobStatus, revision).await?.0);
            Ok((records, statuses))
        })
        .await?;
        Ok(caravan_state::fold_listed(
            &self.keys,
            &records,
            &statuses,
            caravan_state::AllocDetail::Full,
        )?)
    }

    /// Every evaluation.
    pub async fn evals(&self) -> anyhow::Result<Vec<Evaluation>> {
        self.list(Kind::Evals).await
    }

    /// Every node.
    pub async fn nodes(&self) -> anyhow::Result<Vec<Node>> {
        self.list(Kind::Nodes).await
    }

    /// The current version of every job.
    pub async fn jobs(&self) -> anyhow::Result<Vec<Job>> {
        self.list(Kind::Jobs).await
    }

    /// Every key under the prefix with its mod revision: a fingerprint that
    /// changes with any write.
    pub async fn key_revisions(&self) -> anyhow::Result<BTreeMap<String, i64>> {
        let res = self
            .store
            .range(Range {
                keys_only: true,
                ..self.keys.range()
            })
            .await?;
        Ok(res
            .kvs
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(&kv.key).into_owned(),
                    kv.mod_revision,
                )
            })
            .collect())
    }

    /// How many keys the cluster has in etcd.
    pub async fn key_count(&self) -> anyhow::Result<u64> {
        let res = self
            .store
            .range(Range {
                keys_only: true,
                limit: 1,
                ..self.keys.range()
            })
            .await?;
        Ok(u64::try_from(res.count).unwrap_or(0))
    }

    /// The advertised address of the leader of `service`, if one is elected.
    pub async fn leader(&self, service: &str) -> anyhow::Result<Option<String>> {
        let name = caravan_store::election_name(self.keys.prefix(), service);
        Ok(caravan_store::current_leader(self.store.as_ref(), name.as_bytes()).await?)
    }

    /// Deletes every key of the cluster.
    pub async fn purge(&self) -> anyhow::Result<()> {
        self.store.delete(self.keys.range()).await?;
        Ok(())
    }
}

/// The evals of each status, for messages.
pub fn eval_histogram(evals: &[Evaluation]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for e in evals {
        *counts.entry(format!("{:?}", e.status())).or_insert(0) += 1;
    }
    counts
}

/// The allocations of each (desired, client) status pair, for messages.
pub fn alloc_histogram(allocs: &[Allocation]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for a in allocs {
        let key = format!("{:?}/{:?}", a.desired_status(), a.client_status());
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// Whether every eval is finished: complete, canceled, blocked waiting for
/// capacity (which only a cluster change ends), or failed with its work
/// handed to a follow-up that finished (see [`failed_with_follow_up`]).
pub fn evals_settled(evals: &[Evaluation]) -> bool {
    evals.iter().all(|e| match e.status() {
        EvalStatus::Complete | EvalStatus::Blocked | EvalStatus::Canceled => true,
        EvalStatus::Failed => failed_with_follow_up(e, evals),
        _ => false,
    })
}

/// A failed eval whose work lives on, as Nomad settles it: one that ran out
/// of plan attempts (a plan-applier failover can refuse several plans in a
/// row) hands its job to a `max-plan-attempts` blocked eval, and one that ran
/// out of deliveries to a `failed-follow-up` eval; either way the follow-up
/// must have completed.
pub fn failed_with_follow_up(failed: &Evaluation, evals: &[Evaluation]) -> bool {
    let follow_up = evals.iter().find(|e| {
        (!failed.blocked_eval.is_empty() && e.id == failed.blocked_eval)
            || (!failed.next_eval.is_empty() && e.id == failed.next_eval)
            || e.previous_eval == failed.id
    });
    follow_up.is_some_and(|f| f.status() == EvalStatus::Complete)
}

/// Pairs of live allocations of one job with the same name (`job.group[i]`).
/// An `unknown` allocation (its node disconnected within its group's
/// `lost_after`) shares its name with its replacement by design until its
/// node returns and one of them is stopped: it is not counted.
pub fn duplicated_allocs(allocs: &[Allocation]) -> Vec<String> {
    let mut by_name: HashMap<(&str, &str, &str), Vec<&str>> = HashMap::new();
    for a in allocs
        .iter()
        .filter(|a| a.is_live() && a.client_status() != AllocClientStatus::Unknown)
    {
        by_name
            .entry((a.namespace.as_str(), a.job_id.as_str(), a.name.as_str()))
            .or_default()
            .push(a.id.as_str());
    }
    let mut dups: Vec<String> = by_name
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|((ns, job, name), ids)| format!("{ns}/{job} {name}: {}", ids.join(", ")))
        .collect();
    dups.sort();
    dups
}

/// Jobs whose current version has no evaluation: a registration writes the
/// job, its version and its evaluation in one transaction, so a job without
/// one was half-written. Named `namespace/id@job_modify_revision`.
pub fn jobs_without_eval(jobs: &[Job], evals: &[Evaluation]) -> Vec<String> {
    let registered: std::collections::HashSet<(&str, &str, i64)> = evals
        .iter()
        .map(|e| {
            (
                e.namespace.as_str(),
                e.job_id.as_str(),
                e.job_modify_revision,
            )
        })
        .collect();
    jobs.iter()
        .filter(|j| {
            !registered.contains(&(j.namespace.as_str(), j.id.as_str(), j.job_modify_revision))
        })
        .map(|j| format!("{}/{}@{}", j.namespace, j.id, j.job_modify_revision))
        .collect()
}

/// The live allocations of each job.
pub fn live_per_job(allocs: &[Allocation]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for a in allocs.iter().filter(|a| a.is_live()) {
        *counts.entry(a.job_id.clone()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use caravan_store::{MemStore, RangeResult};
    use caravan_testkit::layered::{Layered, StoreLayer};

    use super::*;

    /// Refuses a reply of more than a page, as etcd refuses one beyond its
    /// message limit, and writes a new allocation after every read, so a
    /// list that does not hold to one revision sees it.
    struct PageLimit {
        keys: Keyspace,
        writes: AtomicUsize,
    }

    #[async_trait]
    impl StoreLayer for PageLimit {
        async fn range(
            &self,
            inner: &Arc<dyn Store>,
            range: Range,
        ) -> caravan_store::Result<RangeResult> {
            let res = inner.range(range).await?;
            if res.kvs.len() > LIST_PAGE as usize {
                return Err(caravan_store::StoreError::InvalidArgument(
                    "reply larger than a page".into(),
                ));
            }
            let id = format!("late{}", self.writes.fetch_add(1, Ordering::Relaxed));
            inner.put(&self.keys.alloc(&id), &[], 0).await?;
            Ok(res)
        }
    }

    /// An embedded store holding `n` allocations under `keys`.
    async fn with_allocs(keys: &Keyspace, n: usize) -> Arc<dyn Store> {
        let mem: Arc<dyn Store> = Arc::new(MemStore::new());
        for i in 0..n {
            let alloc = Allocation {
                id: format!("a{i:06}"),
                ..Default::default()
            };
            mem.put(&keys.alloc(&alloc.id), &caravan_state::encode(&alloc), 0)
                .await
                .unwrap();
        }
        mem
    }

    /// Compacts the store up to its current revision after the first page
    /// of the first list, as the broker's compaction may between two pages.
    struct CompactsOnce {
        compacted: AtomicUsize,
    }

    #[async_trait]
    impl StoreLayer for CompactsOnce {
        async fn range(
            &self,
            inner: &Arc<dyn Store>,
            range: Range,
        ) -> caravan_store::Result<RangeResult> {
            let res = inner.range(range).await?;
            if self.compacted.fetch_add(1, Ordering::Relaxed) == 0 {
                let put = inner.put(b"/list-test/other", b"x", 0).await?;
                inner.compact(put).await?;
            }
            Ok(res)
        }
    }

    #[tokio::test]
    async fn a_list_whose_revision_is_compacted_starts_again() {
        let keys = Keyspace::new("/list-test");
        let n = LIST_PAGE as usize + 3;
        let mem = with_allocs(&keys, n).await;
        let layer = CompactsOnce {
            compacted: AtomicUsize::new(0),
        };
        let state = ClusterState::new(Layered::wrap(mem, layer), keys);
        let allocs = state
            .allocs()
            .await
            .expect("listed again at a newer revision");
        assert_eq!(allocs.len(), n);
    }

    #[tokio::test]
    async fn a_list_longer_than_a_reply_comes_whole_once_and_at_one_revision() {
        let keys = Keyspace::new("/list-test");
        let n = 2 * LIST_PAGE as usize + 7;
        let mem = with_allocs(&keys, n).await;
        let layer = PageLimit {
            keys: keys.clone(),
            writes: AtomicUsize::new(0),
        };
        let state = ClusterState::new(Layered::wrap(mem, layer), keys);
        let ids: Vec<String> = state
            .allocs()
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(
            ids.len(),
            n,
            "every allocation, none written after the first page"
        );
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "in key order, none twice"
        );
    }
}
