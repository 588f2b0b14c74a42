//! What one attempt works with: the evaluated job as read from the state, the
//! context it plans in, and the rules it builds as it goes.

use std::sync::Arc;

use caravan_proto::{Allocation, Job};

use crate::context::EvalContext;
use crate::inplace::InPlaceRules;
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::filter::{self, Tainted};
use crate::retry::EvalRun;
use crate::select::Selector;
use crate::state::State;
use crate::validate;

/// The evaluated job as one attempt sees it.
pub(crate) struct JobSnapshot {
    /// The job; `None` when it was purged.
    pub job: Option<Arc<Job>>,
    /// The job unless it is stopped or purged: what placements are made for.
    pub runnable: Option<Arc<Job>>,
    /// Every allocation of the job.
    pub allocs: Vec<Arc<Allocation>>,
    /// The tainted nodes among the allocations'.
    pub tainted: Tainted,
}

/// The order placements visit candidate nodes in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CandidateOrder {
    /// Shuffled with the attempt's seed, so placements spread over equal nodes.
    Shuffled,
    /// By node id, as the state lists them.
    ById,
}

impl JobSnapshot {
    /// Reads the job and its allocations; `Err` carries the reason a job that
    /// cannot be scheduled is refused.
    pub fn read(state: &dyn State, run: &EvalRun<'_>) -> Result<Self, String> {
        let eval = run.eval;
        let job = state.job(&eval.namespace, &eval.job_id);
        if let Some(reason) = job
            .as_ref()
            .filter(|j| !j.stop)
            .and_then(|j| validate::refusal(j))
        {
            return Err(reason);
        }
        let allocs = state.allocs_by_job(&eval.namespace, &eval.job_id);
        let tainted = filter::tainted_nodes(state, &allocs);
        let runnable = job.clone().filter(|j| !j.stop);
        Ok(Self {
            job,
            runnable,
            allocs,
            tainted,
        })
    }

    /// The attempt's context: the ready nodes as candidates when the job runs
    /// (scope filtering happens inside the node table's single pass), with the
    /// job's existing allocations counted.
    pub fn context<'a>(
        &self,
        state: &'a dyn State,
        run: &EvalRun<'a>,
        order: CandidateOrder,
    ) -> EvalContext<'a> {
        let nodes = match &self.runnable {
            Some(_) => state.ready_nodes(),
            None => Vec::new(),
        };
        let mut ctx = EvalContext::new(
            state,
            run.eval,
            self.job.clone(),
            nodes,
            run.now,
            run.attempt,
        );
        if order == CandidateOrder::Shuffled {
            ctx.shuffle_candidates();
        }
        ctx.count_existing(&self.allocs);
        ctx
    }

    /// The number of task groups placements are made for.
    pub fn group_count(&self) -> usize {
        self.runnable.as_ref().map_or(0, |j| j.task_groups.len())
    }
}

/// The rules an attempt builds as it needs them: the job's, each group's, and
/// the selection state they share.
pub(crate) struct AttemptRules {
    /// Job-level feasibility, once built.
    pub job: Option<JobRules>,
    /// Per task group of the job (by index), built on first use.
    pub groups: Vec<Option<GroupRules>>,
    /// Where selections continue from, and the fits they cached.
    pub selector: Selector,
}

impl AttemptRules {
    /// Rules for `group_count` groups, none of them built yet.
    pub fn new(job: Option<JobRules>, group_count: usize) -> Self {
        Self {
            job,
            groups: (0..group_count).map(|_| None).collect(),
            selector: Selector::default(),
        }
    }

    /// What in-place checks use; `None` until the job's rules are built.
    pub fn in_place<'r>(
        &'r mut self,
        batch: bool,
        allocs: &'r [Arc<Allocation>],
    ) -> Option<InPlaceRules<'r>> {
        let job = self.job.as_mut()?;
        Some(InPlaceRules {
            job,
            groups: &mut self.groups,
            selector: &mut self.selector,
            batch,
            allocs,
        })
    }
}
