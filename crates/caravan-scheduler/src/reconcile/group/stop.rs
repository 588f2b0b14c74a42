//! Stopping what a group no longer needs (Nomad's `computeStop`): its lost
//! allocations, and those beyond its count.

use caravan_model::AllocExt;
use std::sync::Arc;

use caravan_proto::{AllocClientStatus, Allocation, DesiredUpdates};

use super::{GroupReconciler, GroupState};
use crate::reconcile::filter::{self, AllocSet};
use crate::reconcile::names::NameIndex;
use crate::reconcile::{ALLOC_LOST, ALLOC_NOT_NEEDED, Stop};

/// The allocations beyond a group's count, and how many of them must stop.
struct Excess {
    /// How many more must stop.
    remove: i64,
    /// The live allocations that count toward the group.
    counted: AllocSet,
}

impl GroupReconciler<'_, '_> {
    /// Stops the group's lost allocations; then, while more run than its count,
    /// old allocations sharing a promoted canary's name, allocations that were
    /// migrating anyway, the highest indexes, and what duplicate names leave
    /// over.
    pub(super) fn compute_stop(&mut self, group: &mut GroupState<'_>, canarying: bool) {
        group.desired.stop += group.sets.lost.len() as u64;
        self.stop(&group.sets.lost, ALLOC_LOST, Some(AllocClientStatus::Lost));
        // Unknown allocations (their node is away) are neither counted nor
        // stopped here: their replacements run beside them.
        let mut counted: AllocSet = group.sets.untainted.clone();
        counted.retain(|_, a| a.client_status() != AllocClientStatus::Unknown);
        if canarying {
            for id in group.sets.canaries.keys() {
                counted.remove(id);
            }
        }
        let remove = counted.len() as i64 + group.sets.migrate.len() as i64
            - i64::from(group.tg.count.max(0));
        if remove <= 0 {
            return;
        }
        // Terminal allocations count toward the total but need no stop.
        counted.retain(|_, a| !a.is_terminal());
        let mut excess = Excess { remove, counted };
        if !canarying && !group.sets.canaries.is_empty() {
            self.stop_canary_namesakes(group, &mut excess);
        }
        if !group.sets.migrate.is_empty() {
            self.stop_migrating(group, &mut excess);
        }
        self.stop_highest(group, &mut excess);
        self.stop_duplicates(group, &mut excess, canarying);
    }

    /// After promotion, old allocations sharing a canary's name go first.
    fn stop_canary_namesakes(&mut self, group: &mut GroupState<'_>, excess: &mut Excess) {
        let canaries = &group.sets.canaries;
        let canary_names: Vec<&str> = canaries.values().map(|a| a.name.as_str()).collect();
        for a in filter::name_order(&excess.counted) {
            if excess.remove == 0 {
                return;
            }
            if !canaries.contains_key(&a.id) && canary_names.contains(&a.name.as_str()) {
                excess.counted.remove(&a.id);
                self.stop_unneeded(a, &mut group.sets.untainted, &mut group.desired);
                excess.remove -= 1;
            }
        }
    }

    /// Then allocations that were migrating anyway, highest names first.
    fn stop_migrating(&mut self, group: &mut GroupState<'_>, excess: &mut Excess) {
        let mut migrating_names = NameIndex::new(
            &self.job.id,
            &group.tg.name,
            0,
            group.sets.migrate.values().map(|a| a.name.as_str()),
        );
        let highest = migrating_names.highest(excess.remove as usize);
        for a in filter::name_order(&group.sets.migrate).into_iter().rev() {
            if excess.remove == 0 {
                return;
            }
            if highest.contains(&a.name) {
                group.sets.migrate.remove(&a.id);
                group.names.unset(&a.name);
                group.desired.stop += 1;
                self.results.stop.push(Stop {
                    alloc: a,
                    description: ALLOC_NOT_NEEDED,
                    client_status: None,
                });
                excess.remove -= 1;
            }
        }
    }

    /// Then the highest indexes.
    fn stop_highest(&mut self, group: &mut GroupState<'_>, excess: &mut Excess) {
        let highest = group.names.highest(excess.remove as usize);
        for a in filter::name_order(&excess.counted).into_iter().rev() {
            if excess.remove == 0 {
                return;
            }
            if highest.contains(&a.name) {
                excess.counted.remove(&a.id);
                self.stop_unneeded(a, &mut group.sets.untainted, &mut group.desired);
                excess.remove -= 1;
            }
        }
    }

    /// Duplicate names can leave some over; unpromoted canaries stay.
    fn stop_duplicates(
        &mut self,
        group: &mut GroupState<'_>,
        excess: &mut Excess,
        canarying: bool,
    ) {
        for a in filter::name_order(&excess.counted).into_iter().rev() {
            if excess.remove == 0 {
                return;
            }
            if canarying && group.sets.canaries.contains_key(&a.id) {
                continue;
            }
            self.stop_unneeded(a, &mut group.sets.untainted, &mut group.desired);
            excess.remove -= 1;
        }
    }

    /// Stops an allocation the group no longer needs.
    fn stop_unneeded(
        &mut self,
        a: Arc<Allocation>,
        untainted: &mut AllocSet,
        desired: &mut DesiredUpdates,
    ) {
        untainted.remove(&a.id);
        desired.stop += 1;
        self.results.stop.push(Stop {
            alloc: a,
            description: ALLOC_NOT_NEEDED,
            client_status: None,
        });
    }
}
