//! The plan applier: the queue the gRPC service feeds while this replica
//! leads, and the pipeline that verifies plan N+1 while plan N commits.
//!
//! Per plan: the eval broker vouches for the delivery token as the plan
//! arrives (before it is queued), the cache catches up with the plan's
//! snapshot, every node is verified against the
//! cache plus the overlay (including the plan still committing, optimistic
//! view), then the previous commit is awaited (a commit that fell short means
//! the plan is verified again), the job's freshness is checked, and the
//! accepted part is committed in the background. Answers go out only after
//! the real commit.
//!
//! The term's pipeline is `pipeline`'s, a commit under way `in_flight`'s,
//! and the answer to a plan `result`'s.

mod in_flight;
mod pipeline;
mod result;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use caravan_proto::{Plan, PlanResult};
use caravan_runtime::names::PLAN_APPLIER;
use caravan_state::{Informer, Keyspace};
use caravan_store::{GroupLimits, Leadership, Store, current_leader, election_name};
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::commit::plan_commits;
use crate::config::PlanApplierConfig;
use crate::error::ApplierError;
use crate::metrics;
use crate::queue::PlanQueue;
use crate::tokens::TokenCheck;
use crate::verify::validate_plan;

use self::pipeline::Pipeline;

/// The knobs of the pipeline, from [`PlanApplierConfig`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// Most compares plus writes per transaction.
    pub txn_max_ops: usize,
    /// Most bytes per transaction.
    pub txn_max_bytes: usize,
    /// Threads verifying one plan's nodes.
    pub verify_threads: usize,
    /// Retries of a commit after a concurrent write.
    pub conflict_retries: u32,
    /// How long a plan waits for the cache to reach its snapshot.
    pub cache_wait: Duration,
    /// Most commits under way at once (plans touching disjoint objects).
    pub max_in_flight: usize,
}

impl Settings {
    /// What one store transaction may hold.
    fn txn_limits(&self) -> GroupLimits {
        GroupLimits {
            max_ops: self.txn_max_ops,
            max_bytes: self.txn_max_bytes,
        }
    }
}

impl From<&PlanApplierConfig> for Settings {
    fn from(c: &PlanApplierConfig) -> Self {
        Settings {
            txn_max_ops: c.txn_max_ops.max(4),
            txn_max_bytes: c.txn_max_bytes.max(64 * 1024),
            verify_threads: c.verify_threads(),
            conflict_retries: c.conflict_retries,
            cache_wait: Duration::from_millis(c.cache_wait_ms),
            max_in_flight: c.max_in_flight_commits.max(1),
        }
    }
}

/// Counters of what the applier has done since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplierStats {
    /// Plans answered with a result (committed wholly, partly or not at all).
    pub plans: u64,
    /// Allocations placed or updated by committed plans.
    pub placements: u64,
    /// Plans answered with some node refused.
    pub partial: u64,
    /// Plans refused because their snapshot was older than the job's last change.
    pub stale: u64,
}

#[derive(Default)]
struct Counters {
    plans: AtomicU64,
    placements: AtomicU64,
    partial: AtomicU64,
    stale: AtomicU64,
}

/// The plan applier of one replica: serves `SubmitPlan` while leading.
pub struct PlanApplier {
    store: Arc<dyn Store>,
    keyspace: Keyspace,
    election: String,
    tokens: Arc<dyn TokenCheck>,
    settings: Settings,
    queue: RwLock<Option<Arc<PlanQueue>>>,
    /// The watch cache, loaded in this replica's first term and kept after
    /// it: a term won again (after a lease that went unrenewed while etcd
    /// or the machine was saturated) starts at once instead of listing
    /// every allocation again, which would load both further.
    cache: tokio::sync::Mutex<Option<Arc<Informer>>>,
    counters: Counters,
}

impl std::fmt::Debug for PlanApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanApplier")
            .field("election", &self.election)
            .field("leading", &self.is_leading())
            .finish_non_exhaustive()
    }
}

impl PlanApplier {
    /// An applier over the state under `prefix`, checking tokens with `tokens`.
    pub fn new(
        store: Arc<dyn Store>,
        prefix: &str,
        tokens: Arc<dyn TokenCheck>,
        settings: Settings,
    ) -> Self {
        PlanApplier {
            store,
            keyspace: Keyspace::new(prefix),
            election: election_name(prefix, PLAN_APPLIER),
            tokens,
            settings,
            queue: RwLock::new(None),
            cache: tokio::sync::Mutex::new(None),
            counters: Counters::default(),
        }
    }

    /// Whether this replica is leading and taking plans.
    pub fn is_leading(&self) -> bool {
        self.queue.read().is_some()
    }

    /// What the applier has done so far.
    pub fn stats(&self) -> ApplierStats {
        let c = &self.counters;
        ApplierStats {
            plans: c.plans.load(Ordering::Relaxed),
            placements: c.placements.load(Ordering::Relaxed),
            partial: c.partial.load(Ordering::Relaxed),
            stale: c.stale.load(Ordering::Relaxed),
        }
    }

    /// Queues a plan and waits for its answer, given after the real commit.
    pub async fn submit(&self, plan: Plan) -> Result<PlanResult, ApplierError> {
        validate_plan(&plan)?;
        let queue = self.queue.read().clone();
        let Some(queue) = queue else {
            let leader = current_leader(self.store.as_ref(), self.election.as_bytes())
                .await
                .ok()
                .flatten();
            return Err(ApplierError::NotLeader { leader });
        };
        // Checked as the plan arrives, beside the plans ahead of it rather
        // than one after another in the pipeline: the broker's answer takes
        // a round trip the pipeline does not wait out.
        if let Err(err) = self.tokens.check(&plan.eval_id, &plan.eval_token).await {
            tracing::info!(eval = %plan.eval_id, %err, "plan refused");
            metrics::failed();
            return Err(err);
        }
        let answer = queue.push(plan)?;
        answer.await.unwrap_or_else(|_| {
            Err(ApplierError::OutcomeUnknown(
                "the applier dropped the plan while committing it".into(),
            ))
        })
    }

    /// Applies plans for as long as `stop` is not cancelled (leadership held
    /// and no shutdown); then fails what is queued and waits for the commit
    /// in flight, so no clone of `leadership` outlives the term.
    pub async fn lead(self: &Arc<Self>, leadership: Arc<Leadership>, stop: CancellationToken) {
        let started = tokio::select! {
            s = self.cache() => s,
            _ = stop.cancelled() => return,
        };
        let informer = match started {
            Ok(i) => i,
            Err(err) => {
                tracing::warn!(
                    err = format!("{err:#}"),
                    "cannot load the state; giving up this term"
                );
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.cancelled() => {}
                }
                return;
            }
        };
        let queue = Arc::new(PlanQueue::new());
        *self.queue.write() = Some(queue.clone());
        tracing::info!(revision = informer.revision(), "applying plans");
        let (txns, grouping) = plan_commits(leadership, self.settings.txn_limits());
        let mut pipeline = Pipeline::new(self.clone(), txns, informer);
        loop {
            let next = tokio::select! {
                p = queue.pop() => p,
                _ = stop.cancelled() => None,
            };
            let Some(pending) = next else { break };
            pipeline.handle(pending).await;
            if stop.is_cancelled() {
                break;
            }
        }
        *self.queue.write() = None;
        queue.close(|| ApplierError::NotCommitted);
        pipeline.finish().await;
        // The group committer ends with the last handle, its groups answered.
        if let Err(err) = grouping.await {
            tracing::error!(%err, "the group committer failed");
        }
        tracing::info!("stopped applying plans");
    }

    /// The cache, loaded on first use and kept for later terms: the lean
    /// one, shared with the other services of this process that follow the
    /// same prefix on the same store connection. Verification needs no
    /// placement metrics nor the task states of running allocations, and a
    /// commit reads the stored value of every allocation it rewrites.
    async fn cache(&self) -> anyhow::Result<Arc<Informer>> {
        let mut cache = self.cache.lock().await;
        if let Some(informer) = cache.as_ref() {
            return Ok(informer.clone());
        }
        let informer =
            caravan_runtime::cache::start_lean(&self.store, self.keyspace.prefix()).await?;
        *cache = Some(informer.clone());
        Ok(informer)
    }

    fn count(&self, result: &PlanResult) {
        metrics::answered(result);
        let c = &self.counters;
        c.plans.fetch_add(1, Ordering::Relaxed);
        let placed: usize = result
            .node_allocation
            .values()
            .map(|l| l.allocs.len())
            .sum();
        c.placements.fetch_add(placed as u64, Ordering::Relaxed);
        if !result.rejected_nodes.is_empty() {
            c.partial.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use caravan_state::encode;

    use super::*;
    use crate::fixtures::{AnyToken, leader, node, store_with_n1};

    /// Leads one term on `store` until `applier` takes plans; returns the
    /// cache it used.
    async fn one_term(applier: &Arc<PlanApplier>, store: &Arc<dyn Store>) -> Arc<Informer> {
        let leadership = Arc::new(leader(store).await);
        let stop = CancellationToken::new();
        let term = tokio::spawn({
            let (applier, leadership, stop) = (applier.clone(), leadership.clone(), stop.clone());
            async move { applier.lead(leadership, stop).await }
        });
        tokio::time::timeout(Duration::from_secs(10), async {
            while !applier.is_leading() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the term starts");
        let cache = applier.cache.lock().await.clone().expect("loaded");
        stop.cancel();
        term.await.unwrap();
        leadership.resign().await.unwrap();
        assert!(!applier.is_leading());
        cache
    }

    /// A term won again starts on the cache of the first, which kept
    /// following the store in between, instead of listing everything again.
    #[tokio::test]
    async fn a_term_won_again_keeps_the_cache_of_the_first() {
        let (store, ks) = store_with_n1().await;
        let applier = Arc::new(PlanApplier::new(
            store.clone(),
            "/t",
            Arc::new(AnyToken),
            Settings::from(&PlanApplierConfig::default()),
        ));
        let first = one_term(&applier, &store).await;
        let between = store
            .put(&ks.node("n2"), &encode(&node("n2")), 0)
            .await
            .unwrap();
        let second = one_term(&applier, &store).await;
        assert!(Arc::ptr_eq(&first, &second), "the same cache");
        let caught_up = second
            .wait_for_revision(between, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            caught_up.node("n2").is_some(),
            "it followed the store between terms"
        );
        assert_eq!(second.stats().relists, 0);
    }
}
