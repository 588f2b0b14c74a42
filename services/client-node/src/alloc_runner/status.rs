//! What an alloc runner tells others: its client status (computed as Nomad
//! does), the record it persists for a client restart, its reports to the
//! servers, and its deployment health.

use caravan_model::now_unix_ns;
use caravan_proto::{
    AllocClientStatus, AllocDeploymentStatus, AllocUpdate, Allocation, SmallMap, TaskState,
};
use tokio::time::Instant;

use super::AllocRunner;
use crate::state_dir::{AllocRecord, TaskRecord, TaskStateRecord};
use crate::task_runner::states;

/// The alloc's status from its tasks' states, as Nomad computes it.
pub fn client_status(tasks: &SmallMap<TaskState>) -> (AllocClientStatus, &'static str) {
    let (mut pending, mut running, mut dead, mut failed) = (false, false, false, false);
    for s in tasks.values() {
        match s.state.as_str() {
            states::RUNNING => running = true,
            states::DEAD if s.failed => failed = true,
            states::DEAD => dead = true,
            _ => pending = true,
        }
    }
    if failed {
        (AllocClientStatus::Failed, "Failed tasks")
    } else if running {
        (AllocClientStatus::Running, "Tasks are running")
    } else if pending {
        (AllocClientStatus::Pending, "No tasks have started")
    } else if dead {
        (AllocClientStatus::Complete, "All tasks have completed")
    } else {
        (AllocClientStatus::Pending, "No tasks")
    }
}

impl AllocRunner {
    pub(super) fn check_health(&mut self) {
        if self.health.is_none() {
            return;
        }
        self.sync_services();
        let states = self.task_states();
        let checks_pass = self.services.checks_healthy();
        let (Some(health), Some(group)) = (self.health.as_mut(), self.group.as_ref()) else {
            return;
        };
        if let Some(healthy) = health.observe(Instant::now(), group, &states, checks_pass) {
            tracing::debug!(alloc = %self.alloc.id, healthy, "deployment health decided");
            self.health_verdict = Some((healthy, now_unix_ns()));
            self.health = None;
        }
    }

    pub(super) fn task_states(&self) -> SmallMap<TaskState> {
        self.slots
            .iter()
            .map(|(k, s)| (k.clone(), s.state.clone()))
            .collect()
    }

    /// Saves the alloc's record; false when it could not be written.
    pub(super) fn persist(&self) -> bool {
        let Some(state) = &self.ctx.state else {
            return true;
        };
        let (status, _) = client_status(&self.task_states());
        let rec = AllocRecord {
            alloc_id: self.alloc.id.clone(),
            client_status: status as i32,
            revision: self.alloc.modify_revision,
            tasks: self
                .slots
                .iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        TaskRecord {
                            state: TaskStateRecord::from(&s.state),
                            handle: s.handle.as_ref().map(|h| h.state()),
                        },
                    )
                })
                .collect(),
        };
        match state.save(&rec) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(alloc = %self.alloc.id, error = %e, "cannot persist alloc state");
                false
            }
        }
    }

    pub(super) fn report(&mut self) {
        let states = self.task_states();
        let (status, desc) = client_status(&states);
        self.report_states(status, desc, states);
    }

    pub(super) fn report_with(&mut self, status: AllocClientStatus, desc: &str) {
        let states = self.task_states();
        self.report_states(status, desc, states);
    }

    pub(super) fn report_states(
        &mut self,
        status: AllocClientStatus,
        desc: &str,
        states: SmallMap<TaskState>,
    ) {
        self.sync_services();
        let u = self.update_of(status, desc, states);
        if self.quiet || (self.last_reported.as_ref() == Some(&u) && !self.services.has_unsent()) {
            return;
        }
        let mut sent = u.clone();
        // Registrations ride on this update: one write for both.
        (sent.registered, sent.deregistered) = self.services.take_unsent();
        if self
            .last_reported
            .as_ref()
            .is_some_and(|last| last.task_states == u.task_states)
        {
            // Unchanged since the last report (a health verdict, a new
            // description): the servers keep what they have.
            sent.task_states = SmallMap::new();
        }
        self.last_reported = Some(u);
        self.ctx.sink.report(sent);
    }

    /// What [`Self::report`] would send now.
    pub(super) fn current_update(&self) -> AllocUpdate {
        let states = self.task_states();
        let (status, desc) = client_status(&states);
        self.update_of(status, desc, states)
    }

    fn update_of(
        &self,
        status: AllocClientStatus,
        desc: &str,
        states: SmallMap<TaskState>,
    ) -> AllocUpdate {
        update_of(&self.alloc, self.health_verdict, status, desc, states)
    }
}

/// The report of `alloc` with its tasks in `states` and its deployment
/// health `verdict` (healthy, when), if decided.
pub(super) fn update_of(
    alloc: &Allocation,
    verdict: Option<(bool, i64)>,
    status: AllocClientStatus,
    desc: &str,
    states: SmallMap<TaskState>,
) -> AllocUpdate {
    let mut u = AllocUpdate {
        alloc_id: alloc.id.clone(),
        client_description: desc.to_string(),
        task_states: states,
        ..Default::default()
    };
    u.set_client_status(status);
    if let Some((healthy, at)) = verdict {
        u.deployment_status = Some(AllocDeploymentStatus {
            healthy: Some(healthy),
            timestamp_unix_ns: at,
            canary: alloc.deployment_status.as_ref().is_some_and(|d| d.canary),
        });
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: &str, failed: bool) -> TaskState {
        TaskState {
            state: state.into(),
            failed,
            ..Default::default()
        }
    }

    #[test]
    fn client_status_follows_nomad() {
        let mut m = SmallMap::new();
        m.insert("a".to_string(), st("pending", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Pending);
        m.insert("b".to_string(), st("running", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Running);
        m.insert("a".to_string(), st("dead", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Running);
        m.insert("b".to_string(), st("dead", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Complete);
        m.insert("c".to_string(), st("dead", true));
        assert_eq!(client_status(&m).0, AllocClientStatus::Failed);
        m.insert("d".to_string(), st("running", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Failed);
    }
}
