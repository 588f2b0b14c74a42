//! A group's canaries: those of replaced or failed deployments stop, those of
//! the current deployment are found, and an update places new ones.

use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, DeploymentStatus, DesiredUpdates};

use super::{GroupReconciler, GroupState, new_placement};
use crate::reconcile::filter::{self, AllocSet};
use crate::reconcile::{ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NOT_NEEDED};

impl GroupReconciler<'_, '_> {
    /// Stops canaries of old or failed deployments, and current ones on
    /// tainted nodes; returns the current canaries and the remaining
    /// allocations.
    pub(super) fn handle_canaries(
        &mut self,
        mut all: AllocSet,
        desired: &mut DesiredUpdates,
    ) -> (AllocSet, AllocSet) {
        let mut stop_ids: Vec<String> = Vec::new();
        if let Some(old) = &self.old_deployment {
            for group_state in old.task_groups.values() {
                if !group_state.promoted {
                    stop_ids.extend(group_state.placed_canaries.iter().cloned());
                }
            }
        }
        if let Some(d) = &self.deployment
            && d.status() == DeploymentStatus::Failed
        {
            for group_state in d.task_groups.values() {
                if !group_state.promoted {
                    stop_ids.extend(group_state.placed_canaries.iter().cloned());
                }
            }
        }
        let mut stop_set = AllocSet::new();
        for id in stop_ids {
            if let Some(a) = all.remove(&id)
                && !a.is_terminal()
            {
                stop_set.insert(id, a);
            }
        }
        desired.stop += stop_set.len() as u64;
        self.stop(&stop_set, ALLOC_NOT_NEEDED, None);

        let mut canaries = AllocSet::new();
        if let Some(d) = &self.deployment {
            for group_state in d.task_groups.values() {
                for id in &group_state.placed_canaries {
                    if let Some(a) = all.get(id) {
                        canaries.insert(id.clone(), a.clone());
                    }
                }
            }
        }
        let (untainted, migrate, lost) = filter::by_tainted(canaries, self.input.tainted);
        self.stop(&migrate, ALLOC_MIGRATING, None);
        self.stop(&lost, ALLOC_LOST, Some(AllocClientStatus::Lost));
        for id in migrate.keys().chain(lost.keys()) {
            all.remove(id);
        }
        (untainted, all)
    }

    /// Asks for the canaries an update needs and places the missing ones
    /// unless the deployment is paused or failed; returns whether the group
    /// requires canaries.
    pub(super) fn place_canaries(
        &mut self,
        group: &mut GroupState<'_>,
        destructive: &AllocSet,
    ) -> bool {
        let Some(s) = &group.strategy else {
            return false;
        };
        let canaries = &group.sets.canaries;
        let require = !destructive.is_empty()
            && (canaries.len() as i32) < s.canary
            && !group.deployment_state.promoted;
        if require {
            group.deployment_state.desired_canaries = s.canary;
        }
        if require && !self.paused() && !self.failed() {
            let n = (s.canary as usize).saturating_sub(canaries.len());
            group.desired.canary += n as u64;
            let canary_names: Vec<String> = canaries.values().map(|a| a.name.clone()).collect();
            let destructive_names: Vec<String> = filter::name_order(destructive)
                .iter()
                .map(|a| a.name.clone())
                .collect();
            for name in group
                .names
                .next_canaries(n, &canary_names, &destructive_names)
            {
                self.results
                    .place
                    .push(new_placement(name, &group.tg.name, true));
            }
        }
        require
    }
}
