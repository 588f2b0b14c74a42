//! What the operator's steering does to a deployment (promote, pause,
//! resume, fail, set allocation health): the checks Nomad makes and the
//! changed values, as pure functions of what was read.

use caravan_model::{DeploymentStatusExt, NomadName};
use caravan_proto::{AllocDeploymentStatus, Allocation, Deployment, DeploymentStatus};

use crate::assess::{DESC_PAUSED, health, promoted, running_description};
use crate::error::WatcherError;

/// Checks that a request names a deployment.
pub fn check_id(deployment_id: &str) -> Result<(), WatcherError> {
    if deployment_id.is_empty() {
        return Err(WatcherError::field(
            "deployment_id",
            "missing deployment ID",
        ));
    }
    Ok(())
}

fn require_active(d: &Deployment, verb: &str) -> Result<(), WatcherError> {
    if d.status().is_followed() {
        return Ok(());
    }
    Err(WatcherError::FailedPrecondition(format!(
        "can't {verb} terminal deployment (status {})",
        d.status().nomad_name()
    )))
}

/// Promotes the canaries of `d` (every group with `all`, else those named
/// in `groups`), given the allocations of its job. Every group promoted
/// must have as many healthy canaries as it wants.
pub fn promote<'a>(
    d: &Deployment,
    allocs: impl IntoIterator<Item = &'a Allocation>,
    all: bool,
    groups: &[String],
    now_unix_ns: i64,
) -> Result<Deployment, WatcherError> {
    require_active(d, "promote")?;
    if !all && groups.is_empty() {
        return Err(WatcherError::field(
            "groups",
            "name the task groups to promote, or set all",
        ));
    }
    for (i, g) in groups.iter().enumerate() {
        if !d.task_groups.contains_key(g) {
            return Err(WatcherError::field(
                format!("groups[{i}]"),
                format!("deployment has no task group {g:?}"),
            ));
        }
    }
    let chosen = |name: &String| all || groups.contains(name);
    if !d
        .task_groups
        .iter()
        .any(|(name, s)| chosen(name) && s.desired_canaries > 0)
    {
        return Err(WatcherError::FailedPrecondition(
            "deployment has no canaries to promote".into(),
        ));
    }
    let healthy: Vec<&Allocation> = allocs
        .into_iter()
        .filter(|a| a.deployment_id == d.id && health(a) == Some(true))
        .collect();
    let mut short = Vec::new();
    for (name, s) in &d.task_groups {
        if !chosen(name) || s.desired_canaries == 0 || s.promoted {
            continue;
        }
        let have = healthy
            .iter()
            .filter(|a| s.placed_canaries.contains(&a.id))
            .count() as i32;
        if have < s.desired_canaries {
            short.push(format!(
                "Task group {name:?} has {have}/{} healthy allocations",
                s.desired_canaries
            ));
        }
    }
    if !short.is_empty() {
        return Err(WatcherError::FailedPrecondition(format!(
            "One or more task groups do not meet promotion criteria: {}",
            short.join("; ")
        )));
    }
    let only = (!all).then_some(groups);
    Ok(promoted(d, only, now_unix_ns))
}

/// Pauses (`pause`) or resumes `d`; the boolean says whether the change
/// needs an evaluation (a resume does, so the scheduler places again).
pub fn pause(
    d: &Deployment,
    pause: bool,
    now_unix_ns: i64,
) -> Result<(Deployment, bool), WatcherError> {
    require_active(d, if pause { "pause" } else { "resume" })?;
    let mut next = d.clone();
    if pause {
        next.set_status(DeploymentStatus::Paused);
        next.status_description = DESC_PAUSED.to_string();
    } else {
        next.set_status(DeploymentStatus::Running);
        next.status_description = running_description(&next).to_string();
        // The pause does not count against progress.
        for s in next.task_groups.values_mut() {
            if s.progress_deadline_ns > 0 && s.require_progress_by_unix_ns != 0 {
                s.require_progress_by_unix_ns = s
                    .require_progress_by_unix_ns
                    .max(now_unix_ns.saturating_add(s.progress_deadline_ns));
            }
        }
    }
    next.modify_time_unix_ns = now_unix_ns;
    Ok((next, !pause))
}

/// Checks that `d` can be failed by hand.
pub fn fail(d: &Deployment) -> Result<(), WatcherError> {
    require_active(d, "fail")
}

/// Checks a health request's ids: at least one, none empty, none both
/// healthy and unhealthy. Returns (alloc id, healthy) pairs.
pub fn health_marks(
    healthy: &[String],
    unhealthy: &[String],
) -> Result<Vec<(String, bool)>, WatcherError> {
    if healthy.is_empty() && unhealthy.is_empty() {
        return Err(WatcherError::field(
            "healthy_alloc_ids",
            "name at least one allocation, healthy or unhealthy",
        ));
    }
    let mut out = Vec::with_capacity(healthy.len() + unhealthy.len());
    for (field, ids, value) in [
        ("healthy_alloc_ids", healthy, true),
        ("unhealthy_alloc_ids", unhealthy, false),
    ] {
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() {
                return Err(WatcherError::field(
                    format!("{field}[{i}]"),
                    "missing allocation ID",
                ));
            }
            if out.iter().any(|(seen, _): &(String, bool)| seen == id) {
                return Err(WatcherError::field(
                    format!("{field}[{i}]"),
                    format!("allocation {id} is named twice"),
                ));
            }
            out.push((id.clone(), value));
        }
    }
    Ok(out)
}

/// `alloc` with its deployment health set by hand; refused when it belongs
/// to another deployment than `d`, which must be active.
pub fn set_health(
    d: &Deployment,
    alloc: &Allocation,
    healthy: bool,
    now_unix_ns: i64,
) -> Result<Allocation, WatcherError> {
    require_active(d, "set health of allocations of")?;
    if alloc.deployment_id != d.id {
        return Err(WatcherError::FailedPrecondition(format!(
            "allocation {} is not part of deployment {}",
            alloc.id, d.id
        )));
    }
    let mut next = alloc.clone();
    let status = next
        .deployment_status
        .get_or_insert_with(AllocDeploymentStatus::default);
    status.healthy = Some(healthy);
    status.timestamp_unix_ns = now_unix_ns;
    next.modify_time_unix_ns = now_unix_ns;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use caravan_proto::DeploymentState;

    use super::*;
    use crate::assess::{DESC_NEEDS_PROMOTION, DESC_RUNNING};

    fn canary_deployment() -> Deployment {
        let mut d = Deployment {
            id: "d1".into(),
            status: DeploymentStatus::Running as i32,
            status_description: DESC_NEEDS_PROMOTION.into(),
            ..Default::default()
        };
        d.task_groups.insert(
            "web".into(),
            DeploymentState {
                desired_total: 3,
                desired_canaries: 1,
                placed_canaries: vec!["c1".into()],
                progress_deadline_ns: 100,
                ..Default::default()
            },
        );
        d.task_groups.insert(
            "api".into(),
            DeploymentState {
                desired_total: 1,
                ..Default::default()
            },
        );
        d
    }

    fn canary(healthy: Option<bool>) -> Allocation {
        Allocation {
            id: "c1".into(),
            deployment_id: "d1".into(),
            task_group: "web".into(),
            deployment_status: Some(AllocDeploymentStatus {
                healthy,
                canary: true,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn promote_needs_healthy_canaries_in_the_named_groups() {
        let d = canary_deployment();
        let err = promote(&d, &[canary(None)], true, &[], 5).unwrap_err();
        assert!(matches!(err, WatcherError::FailedPrecondition(_)));
        assert!(err.to_string().contains("\"web\" has 0/1 healthy"), "{err}");
        let p = promote(&d, &[canary(Some(true))], true, &[], 5).unwrap();
        assert!(p.task_groups["web"].promoted);
        assert_eq!(p.task_groups["web"].require_progress_by_unix_ns, 105);
        assert_eq!(p.status_description, DESC_RUNNING);
        let p = promote(&d, &[canary(Some(true))], false, &["web".into()], 5).unwrap();
        assert!(p.task_groups["web"].promoted);
        // Groups without canaries, unknown groups, no groups at all.
        let err = promote(&d, &[], false, &["api".into()], 5).unwrap_err();
        assert!(err.to_string().contains("no canaries"), "{err}");
        let err = promote(&d, &[], false, &["nope".into()], 5).unwrap_err();
        assert!(err.to_string().starts_with("groups[0]"), "{err}");
        assert!(promote(&d, &[], false, &[], 5).is_err());
        let mut done = d.clone();
        done.set_status(DeploymentStatus::Successful);
        let err = promote(&done, &[canary(Some(true))], true, &[], 5).unwrap_err();
        assert!(err.to_string().contains("terminal"), "{err}");
    }

    #[test]
    fn pause_and_resume() {
        let mut d = canary_deployment();
        d.task_groups
            .get_mut("web")
            .unwrap()
            .require_progress_by_unix_ns = 50;
        let (paused, eval) = pause(&d, true, 10).unwrap();
        assert_eq!(paused.status(), DeploymentStatus::Paused);
        assert_eq!(paused.status_description, DESC_PAUSED);
        assert!(!eval);
        let (resumed, eval) = pause(&paused, false, 70).unwrap();
        assert_eq!(resumed.status(), DeploymentStatus::Running);
        assert_eq!(resumed.status_description, DESC_NEEDS_PROMOTION);
        assert_eq!(resumed.task_groups["web"].require_progress_by_unix_ns, 170);
        assert!(eval);
        let mut failed = d.clone();
        failed.set_status(DeploymentStatus::Failed);
        assert!(pause(&failed, true, 1).is_err());
        assert!(fail(&failed).is_err());
        assert!(fail(&d).is_ok());
    }

    #[test]
    fn health_marks_are_checked_and_applied() {
        assert!(health_marks(&[], &[]).is_err());
        let err = health_marks(&["a".into()], &["a".into()]).unwrap_err();
        assert!(
            err.to_string().starts_with("unhealthy_alloc_ids[0]"),
            "{err}"
        );
        assert!(health_marks(&["".into()], &[]).is_err());
        assert_eq!(
            health_marks(&["a".into()], &["b".into()]).unwrap(),
            vec![("a".to_string(), true), ("b".to_string(), false)]
        );
        let d = canary_deployment();
        let a = set_health(&d, &canary(None), true, 9).unwrap();
        let s = a.deployment_status.unwrap();
        assert_eq!(
            (s.healthy, s.timestamp_unix_ns, s.canary),
            (Some(true), 9, true)
        );
        let mut other = canary(None);
        other.deployment_id = "d0".into();
        assert!(set_health(&d, &other, true, 9).is_err());
    }
}
