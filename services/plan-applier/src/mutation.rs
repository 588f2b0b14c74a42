//! How a plan changes each stored object, as pure functions of the object's
//! current value. A commit computes the values it writes from the values it
//! compares against, so a retry after a concurrent client write recomputes
//! them from the fresh values and loses neither side's change.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, DeploymentStatusUpdate,
    Evaluation,
};

/// The stored object a change applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Target {
    /// `allocs/<id>`.
    Alloc(String),
    /// `deployments/<id>`.
    Deployment(String),
    /// `evals/<id>`.
    Eval(String),
}

/// One change of a plan to one object.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// A new allocation; refused if the id already exists.
    Place(Box<Allocation>),
    /// An in-place update of an existing allocation.
    Update(Box<Allocation>),
    /// A stop or eviction of an existing allocation.
    Stop(StopSpec),
    /// Links a replaced allocation to its replacement.
    LinkNext(String),
    /// The plan's deployment, created or merged into the stored one.
    Deployment(Box<Deployment>),
    /// A status change of a deployment.
    DeploymentStatus(DeploymentStatusUpdate),
    /// Allocations of a deployment placed by this commit, for one group.
    Placed {
        /// The task group.
        group: String,
        /// How many.
        count: i32,
    },
    /// An evaluation created with the plan; kept if it already exists.
    CreateEval(Box<Evaluation>),
}

/// What a stop or eviction sets on an allocation.
#[derive(Clone, Debug, Default)]
pub(crate) struct StopSpec {
    pub(crate) desired_status: i32,
    pub(crate) description: String,
    /// Lost or unknown replace the client's status; any other is ignored.
    pub(crate) client_status: i32,
    pub(crate) followup_eval_id: String,
    pub(crate) preempted_by: String,
}

impl StopSpec {
    /// The stop a plan's `node_update` entry asks for.
    pub(crate) fn stop(a: &Allocation) -> Self {
        let desired = match a.desired_status() {
            AllocDesiredStatus::Evict => AllocDesiredStatus::Evict,
            _ => AllocDesiredStatus::Stop,
        };
        StopSpec {
            desired_status: desired as i32,
            description: a.desired_description.clone(),
            client_status: a.client_status,
            followup_eval_id: a.followup_eval_id.clone(),
            preempted_by: a.preempted_by_allocation.clone(),
        }
    }

    /// The eviction a plan's `node_preemptions` entry asks for.
    pub(crate) fn evict(a: &Allocation) -> Self {
        StopSpec {
            desired_status: AllocDesiredStatus::Evict as i32,
            description: if a.desired_description.is_empty() {
                format!("Preempted by alloc ID {}", a.preempted_by_allocation)
            } else {
                a.desired_description.clone()
            },
            client_status: 0,
            followup_eval_id: String::new(),
            preempted_by: a.preempted_by_allocation.clone(),
        }
    }
}

/// Whether the servers may override the client's view of an allocation: only
/// to declare it lost (node down) or unknown (node disconnected).
pub(crate) fn server_client_status(status: i32) -> bool {
    status == AllocClientStatus::Lost as i32 || status == AllocClientStatus::Unknown as i32
}

/// Clears what is filled from the key on read, and marks the write as a
/// server-side change whose revision resolves to the commit's.
fn as_server_write(a: &mut Allocation, now: i64) {
    a.create_revision = 0;
    a.modify_revision = 0;
    a.alloc_modify_revision = 0;
    a.modify_time_unix_ns = now;
}

/// Applies `changes` in order to an allocation's current value. `Ok(None)`
/// means nothing to write; `Err` refuses the part of the plan the failing
/// change came from.
pub(crate) fn apply_alloc(
    current: Option<&Allocation>,
    changes: &[&Change],
    now: i64,
) -> Result<Option<Allocation>, String> {
    let mut value: Option<Allocation> = current.cloned();
    let mut dirty = false;
    for change in changes {
        match change {
            Change::Place(a) => {
                if let Some(cur) = current {
                    return Err(format!(
                        "allocation {} already exists (on node {})",
                        a.id, cur.node_id
                    ));
                }
                let mut new = (**a).clone();
                as_server_write(&mut new, now);
                if new.create_time_unix_ns == 0 {
                    new.create_time_unix_ns = now;
                }
                if new.desired_status() == AllocDesiredStatus::Unspecified {
                    new.set_desired_status(AllocDesiredStatus::Run);
                }
                if new.client_status() == AllocClientStatus::Unspecified {
                    new.set_client_status(AllocClientStatus::Pending);
                }
                value = Some(new);
                dirty = true;
            }
            Change::Update(a) => {
                let Some(cur) = value.as_ref() else {
                    return Err(format!("allocation {} no longer exists", a.id));
                };
                let mut new = (**a).clone();
                // The client owns what it reports; the plan's copy may be stale.
                new.task_states = cur.task_states.clone();
                // Workers cache allocs without placement metrics: an in-place
                // update keeps the ones of the placement.
                if new.metrics.is_none() {
                    new.metrics = cur.metrics.clone();
                }
                if !server_client_status(new.client_status) {
                    new.client_status = cur.client_status;
                    new.client_description = cur.client_description.clone();
                }
                if new.deployment_id == cur.deployment_id {
                    new.deployment_status = cur.deployment_status;
                }
                new.create_time_unix_ns = cur.create_time_unix_ns;
                new.next_allocation = if new.next_allocation.is_empty() {
                    cur.next_allocation.clone()
                } else {
                    new.next_allocation
                };
                as_server_write(&mut new, now);
                value = Some(new);
                dirty = true;
            }
            Change::Stop(spec) => {
                let Some(cur) = value.as_mut() else {
                    // Already gone (garbage collected): nothing to stop.
                    continue;
                };
                cur.desired_status = spec.desired_status;
                cur.desired_description = spec.description.clone();
                if server_client_status(spec.client_status) {
                    cur.client_status = spec.client_status;
                }
                if !spec.followup_eval_id.is_empty() {
                    cur.followup_eval_id = spec.followup_eval_id.clone();
                }
                if !spec.preempted_by.is_empty() {
                    cur.preempted_by_allocation = spec.preempted_by.clone();
                }
                as_server_write(cur, now);
                dirty = true;
            }
            Change::LinkNext(next) => {
                let Some(cur) = value.as_mut() else {
                    continue;
                };
                if cur.next_allocation != *next {
                    cur.next_allocation = next.clone();
                    as_server_write(cur, now);
                    dirty = true;
                }
            }
            other => {
                return Err(format!(
                    "internal: {other:?} does not apply to an allocation"
                ));
            }
        }
    }
    Ok(if dirty { value } else { None })
}

/// Applies `changes` in order to a deployment's current value.
pub(crate) fn apply_deployment(
    current: Option<&Deployment>,
    changes: &[&Change],
    now: i64,
) -> Result<Option<Deployment>, String> {
    let mut value: Option<Deployment> = current.cloned();
    let mut dirty = false;
    for change in changes {
        match change {
            Change::Deployment(d) => {
                let mut new = (**d).clone();
                if let Some(cur) = value.as_ref() {
                    merge_deployment(&mut new, cur);
                } else if new.create_time_unix_ns == 0 {
                    new.create_time_unix_ns = now;
                }
                new.create_revision = 0;
                new.modify_revision = 0;
                new.modify_time_unix_ns = now;
                value = Some(new);
                dirty = true;
            }
            Change::DeploymentStatus(u) => {
                let Some(cur) = value.as_mut() else {
                    continue;
                };
                cur.status = u.status;
                cur.status_description = u.status_description.clone();
                cur.modify_time_unix_ns = now;
                dirty = true;
            }
            Change::Placed { group, count } => {
                let Some(cur) = value.as_mut() else {
                    continue;
                };
                let state = cur.task_groups.entry(group.clone()).or_default();
                state.placed_allocs = state.placed_allocs.saturating_add(*count);
                cur.modify_time_unix_ns = now;
                dirty = true;
            }
            other => {
                return Err(format!(
                    "internal: {other:?} does not apply to a deployment"
                ));
            }
        }
    }
    Ok(if dirty { value } else { None })
}

/// Keeps what the deployment watcher and earlier commits own (status, health
/// counts, placements, promotion, progress deadline) when a plan rewrites a
/// deployment from an older snapshot.
fn merge_deployment(new: &mut Deployment, cur: &Deployment) {
    new.status = cur.status;
    new.status_description = cur.status_description.clone();
    new.create_time_unix_ns = cur.create_time_unix_ns;
    for (group, old) in &cur.task_groups {
        let state = new.task_groups.entry(group.clone()).or_default();
        state.placed_allocs = old.placed_allocs;
        state.healthy_allocs = old.healthy_allocs;
        state.unhealthy_allocs = old.unhealthy_allocs;
        state.promoted |= old.promoted;
        state.require_progress_by_unix_ns = state
            .require_progress_by_unix_ns
            .max(old.require_progress_by_unix_ns);
        for canary in &old.placed_canaries {
            if !state.placed_canaries.contains(canary) {
                state.placed_canaries.push(canary.clone());
            }
        }
    }
}

/// The evaluation to write, unless one with its id already exists.
pub(crate) fn apply_eval(exists: bool, changes: &[&Change], now: i64) -> Option<Evaluation> {
    if exists {
        return None;
    }
    changes.iter().rev().find_map(|c| match c {
        Change::CreateEval(e) => {
            let mut e = (**e).clone();
            e.create_revision = 0;
            e.modify_revision = 0;
            if e.create_time_unix_ns == 0 {
                e.create_time_unix_ns = now;
            }
            e.modify_time_unix_ns = now;
            Some(e)
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocDeploymentStatus, DeploymentState, TaskState};

    use super::*;

    fn running(id: &str) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            node_id: "n1".into(),
            job_id: "web".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Running as i32,
            create_time_unix_ns: 5,
            alloc_modify_revision: 7,
            modify_revision: 9,
            deployment_id: "d1".into(),
            deployment_status: Some(AllocDeploymentStatus {
                healthy: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        a.task_states.insert(
            "t".into(),
            TaskState {
                state: "running".into(),
                ..Default::default()
            },
        );
        a
    }

    #[test]
    fn a_placement_is_new_and_resolves_its_revision_on_commit() {
        let a = running("a");
        let out = apply_alloc(None, &[&Change::Place(Box::new(a.clone()))], 100)
            .unwrap()
            .unwrap();
        assert_eq!(out.alloc_modify_revision, 0);
        assert_eq!((out.create_revision, out.modify_revision), (0, 0));
        assert_eq!(out.modify_time_unix_ns, 100);
        let err = apply_alloc(Some(&a), &[&Change::Place(Box::new(a.clone()))], 100);
        assert!(err.unwrap_err().contains("already exists"));
    }

    #[test]
    fn an_in_place_update_keeps_what_the_client_reported() {
        let mut cur = running("a");
        cur.metrics = Some(Box::new(caravan_proto::AllocMetric {
            nodes_evaluated: 4,
            ..Default::default()
        }));
        let mut planned = running("a");
        planned.client_status = AllocClientStatus::Pending as i32;
        planned.task_states.clear();
        planned.deployment_status = None;
        planned.job_version = 3;
        let out = apply_alloc(Some(&cur), &[&Change::Update(Box::new(planned))], 50)
            .unwrap()
            .unwrap();
        assert_eq!(out.job_version, 3);
        assert_eq!(out.client_status(), AllocClientStatus::Running);
        assert_eq!(out.task_states.len(), 1);
        assert_eq!(out.deployment_status, cur.deployment_status);
        assert_eq!(out.create_time_unix_ns, 5);
        assert_eq!(
            out.metrics, cur.metrics,
            "a lean plan copy keeps the placement's"
        );
        assert!(apply_alloc(None, &[&Change::Update(Box::new(running("a")))], 1).is_err());
    }

    #[test]
    fn a_stop_sets_what_the_plan_says_and_lost_overrides_the_client() {
        let cur = running("a");
        let mut slim = Allocation {
            id: "a".into(),
            desired_status: AllocDesiredStatus::Stop as i32,
            desired_description: "alloc not needed".into(),
            client_status: AllocClientStatus::Pending as i32,
            ..Default::default()
        };
        let out = apply_alloc(Some(&cur), &[&Change::Stop(StopSpec::stop(&slim))], 1)
            .unwrap()
            .unwrap();
        assert_eq!(out.desired_status(), AllocDesiredStatus::Stop);
        assert_eq!(out.desired_description, "alloc not needed");
        assert_eq!(
            out.client_status(),
            AllocClientStatus::Running,
            "stale copy ignored"
        );
        assert_eq!(out.task_states.len(), 1);
        slim.client_status = AllocClientStatus::Lost as i32;
        let out = apply_alloc(Some(&cur), &[&Change::Stop(StopSpec::stop(&slim))], 1)
            .unwrap()
            .unwrap();
        assert_eq!(out.client_status(), AllocClientStatus::Lost);
        // A stop of an allocation already collected writes nothing.
        assert_eq!(
            apply_alloc(None, &[&Change::Stop(StopSpec::stop(&slim))], 1).unwrap(),
            None
        );
    }

    #[test]
    fn an_eviction_names_the_preempting_alloc() {
        let cur = running("a");
        let slim = Allocation {
            id: "a".into(),
            preempted_by_allocation: "big".into(),
            ..Default::default()
        };
        let out = apply_alloc(Some(&cur), &[&Change::Stop(StopSpec::evict(&slim))], 1)
            .unwrap()
            .unwrap();
        assert_eq!(out.desired_status(), AllocDesiredStatus::Evict);
        assert_eq!(out.preempted_by_allocation, "big");
        assert!(out.desired_description.contains("big"));
    }

    #[test]
    fn stop_and_link_merge_into_one_write() {
        let cur = running("a");
        let slim = Allocation {
            id: "a".into(),
            desired_status: AllocDesiredStatus::Stop as i32,
            ..Default::default()
        };
        let stop = Change::Stop(StopSpec::stop(&slim));
        let link = Change::LinkNext("b".into());
        let out = apply_alloc(Some(&cur), &[&stop, &link], 1)
            .unwrap()
            .unwrap();
        assert_eq!(out.next_allocation, "b");
        assert_eq!(out.desired_status(), AllocDesiredStatus::Stop);
    }

    #[test]
    fn a_deployment_rewrite_keeps_health_and_counts_placements() {
        let mut cur = Deployment {
            id: "d1".into(),
            status: caravan_proto::DeploymentStatus::Paused as i32,
            ..Default::default()
        };
        cur.task_groups.insert(
            "web".into(),
            DeploymentState {
                healthy_allocs: 2,
                placed_allocs: 3,
                placed_canaries: vec!["c1".into()],
                ..Default::default()
            },
        );
        let mut planned = Deployment {
            id: "d1".into(),
            status: caravan_proto::DeploymentStatus::Running as i32,
            ..Default::default()
        };
        planned.task_groups.insert(
            "web".into(),
            DeploymentState {
                desired_total: 5,
                placed_canaries: vec!["c2".into()],
                ..Default::default()
            },
        );
        let changes = [
            Change::Deployment(Box::new(planned)),
            Change::Placed {
                group: "web".into(),
                count: 2,
            },
        ];
        let refs: Vec<&Change> = changes.iter().collect();
        let out = apply_deployment(Some(&cur), &refs, 1).unwrap().unwrap();
        let web = &out.task_groups["web"];
        assert_eq!(web.desired_total, 5);
        assert_eq!(web.healthy_allocs, 2);
        assert_eq!(web.placed_allocs, 5);
        assert_eq!(web.placed_canaries.len(), 2);
        assert_eq!(out.status(), caravan_proto::DeploymentStatus::Paused);
        let status = Change::DeploymentStatus(DeploymentStatusUpdate {
            deployment_id: "d1".into(),
            status: caravan_proto::DeploymentStatus::Cancelled as i32,
            status_description: "newer job".into(),
        });
        let out = apply_deployment(Some(&cur), &[&status], 1)
            .unwrap()
            .unwrap();
        assert_eq!(out.status(), caravan_proto::DeploymentStatus::Cancelled);
        assert_eq!(apply_deployment(None, &[&status], 1).unwrap(), None);
    }

    #[test]
    fn an_existing_eval_is_not_overwritten() {
        let e = Change::CreateEval(Box::new(Evaluation {
            id: "e".into(),
            ..Default::default()
        }));
        assert!(apply_eval(false, &[&e], 3).is_some());
        assert!(apply_eval(true, &[&e], 3).is_none());
    }
}
