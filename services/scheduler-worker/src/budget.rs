//! How much a replica schedules at once. Many worker loops keep the cores
//! busy while evaluations wait on the broker, the cache and the applier's
//! commit, and small evaluations then share the applier's group commits.
//! Large evaluations are another matter: several scheduled at once against
//! snapshots of the same moment pick the same nodes, and what the applier
//! refuses is scheduled again. So each evaluation weighs the allocations
//! its job asks for, up to [`LARGE_EVAL`], and the loops share a budget of
//! `large_evals` large ones: 32 loops schedule 32 evaluations of ten
//! allocations at once, but no more than `large_evals` of a thousand.

use caravan_proto::{Job, JobType};
use tokio::sync::{Semaphore, SemaphorePermit};

/// The allocations from which an evaluation counts as large: it takes a
/// whole share of the budget.
pub const LARGE_EVAL: u32 = 256;

/// The budget the worker loops of one replica share.
#[derive(Debug)]
pub(crate) struct PlacementBudget {
    permits: Semaphore,
    total: u32,
}

impl PlacementBudget {
    /// Room for `large_evals` large evaluations at once (at least one).
    pub(crate) fn new(large_evals: usize) -> Self {
        let large = u32::try_from(large_evals.max(1)).unwrap_or(u32::MAX / LARGE_EVAL);
        let total = large
            .saturating_mul(LARGE_EVAL)
            .min(Semaphore::MAX_PERMITS as u32);
        PlacementBudget {
            permits: Semaphore::new(total as usize),
            total,
        }
    }

    /// What an evaluation of `job` weighs: the allocations it asks for, at
    /// least one, at most [`LARGE_EVAL`]. A system or sysbatch job runs on
    /// every eligible node and weighs as a large one; an evaluation whose
    /// job is gone (a deregistration: it only stops allocations) weighs one.
    pub(crate) fn weight(job: Option<&Job>) -> u32 {
        let Some(job) = job else { return 1 };
        if matches!(job.r#type(), JobType::System | JobType::Sysbatch) {
            return LARGE_EVAL;
        }
        let asked: u64 = job
            .task_groups
            .iter()
            .map(|g| u64::try_from(g.count).unwrap_or(0))
            .sum();
        u32::try_from(asked.clamp(1, u64::from(LARGE_EVAL))).unwrap_or(LARGE_EVAL)
    }

    /// Waits until `weight` fits, then holds it until the permit drops.
    /// None only if the budget were closed, which it never is.
    pub(crate) async fn acquire(&self, weight: u32) -> Option<SemaphorePermit<'_>> {
        self.permits
            .acquire_many(weight.clamp(1, self.total))
            .await
            .ok()
    }

    /// What is free now.
    #[cfg(test)]
    fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use caravan_proto::TaskGroup;

    fn job(kind: JobType, counts: &[i32]) -> Job {
        let mut job = Job {
            task_groups: counts
                .iter()
                .map(|&count| TaskGroup {
                    count,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        job.set_type(kind);
        job
    }

    #[test]
    fn an_evaluation_weighs_what_its_job_asks_for_up_to_a_large_one() {
        assert_eq!(PlacementBudget::weight(None), 1);
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::Service, &[0]))),
            1
        );
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::Service, &[3, 7]))),
            10
        );
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::Batch, &[1000]))),
            LARGE_EVAL
        );
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::Service, &[-5, 2]))),
            2
        );
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::System, &[1]))),
            LARGE_EVAL
        );
        assert_eq!(
            PlacementBudget::weight(Some(&job(JobType::Sysbatch, &[1]))),
            LARGE_EVAL
        );
    }

    #[tokio::test]
    async fn small_evaluations_share_what_one_large_one_holds_alone() {
        let budget = PlacementBudget::new(2);
        let small: Vec<_> = acquire_each(&budget, 51, 10).await;
        assert_eq!(
            small.len(),
            51,
            "51 evaluations of ten fit in two large ones"
        );
        assert_eq!(budget.available(), 2 * LARGE_EVAL as usize - 510);
        drop(small);

        let first = budget.acquire(LARGE_EVAL).await.unwrap();
        let second = budget.acquire(LARGE_EVAL).await.unwrap();
        let third = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            budget.acquire(LARGE_EVAL),
        )
        .await;
        assert!(third.is_err(), "a third large evaluation waits for a share");
        drop(first);
        let third = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            budget.acquire(LARGE_EVAL),
        )
        .await
        .unwrap();
        assert!(third.is_some());
        drop(second);
    }

    #[tokio::test]
    async fn a_weight_beyond_the_budget_takes_all_of_it_rather_than_waiting_forever() {
        let budget = PlacementBudget::new(1);
        let all = budget.acquire(u32::MAX).await.unwrap();
        assert_eq!(budget.available(), 0);
        drop(all);
        assert_eq!(budget.available(), LARGE_EVAL as usize);
    }

    /// Acquires `n` weights of `weight` one after another, none waiting.
    async fn acquire_each(
        budget: &PlacementBudget,
        n: usize,
        weight: u32,
    ) -> Vec<SemaphorePermit<'_>> {
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            let permit =
                tokio::time::timeout(std::time::Duration::from_millis(50), budget.acquire(weight))
                    .await
                    .unwrap()
                    .unwrap();
            held.push(permit);
        }
        held
    }
}
