//! Nomad's defaults for a `Job` built in code (gRPC callers, tests, dispatch).
//!
//! The parsers already return canonical jobs: they apply the defaults while they still know
//! which fields were written. Here proto3 cannot tell an unset scalar from a zero, so only
//! what is plainly unset is filled: missing messages, empty strings and lists, and zeros
//! that Nomad never accepts or that mean "default" in the schema (priority, weights,
//! kill timeout, disk size). Zeros inside a present `resources` block are left alone so
//! that an explicit `cpu = 0` still fails validation.

use crate::defaults::{self, effective_type};
use caravan_proto::{Job, JobType, Resources, UpdateStrategy};

/// Fills Nomad's defaults into a job; applying it twice changes nothing more.
pub fn canonicalize(job: &mut Job) {
    let job_type = match JobType::try_from(job.r#type) {
        Ok(t) => effective_type(t),
        // An unknown enum value is left for validation to report.
        Err(_) => return canonicalize_groups_only(job),
    };
    job.set_type(job_type);
    if job.namespace.is_empty() {
        job.namespace = defaults::DEFAULT_NAMESPACE.to_string();
    }
    if job.name.is_empty() {
        job.name = job.id.clone();
    }
    if job.priority == 0 {
        job.priority = defaults::DEFAULT_PRIORITY;
    }
    if job.datacenters.is_empty() {
        job.datacenters = vec![defaults::DEFAULT_DATACENTER.to_string()];
    }
    if job.node_pool.is_empty() {
        job.node_pool = defaults::DEFAULT_NODE_POOL.to_string();
    }
    if job.update.is_none() && job_type == JobType::Service {
        job.update = Some(defaults::default_update());
    }
    if let Some(p) = job.periodic.as_mut() {
        if p.spec_type.is_empty() {
            p.spec_type = defaults::SPEC_TYPE_CRON.to_string();
        }
        if p.time_zone.is_empty() {
            p.time_zone = defaults::DEFAULT_TIME_ZONE.to_string();
        }
    }
    if let Some(p) = job.parameterized.as_mut()
        && p.payload.is_empty()
    {
        p.payload = defaults::DEFAULT_PAYLOAD.to_string();
    }
    default_weights(&mut job.affinities, &mut job.spreads);

    let inherited_update = job.update.clone().filter(|u| !update_is_empty(u));
    for group in &mut job.task_groups {
        if group.update.is_none() {
            group.update = inherited_update.clone();
        }
        if group.restart_policy.is_none() {
            group.restart_policy = Some(defaults::default_restart(job_type));
        }
        if group.reschedule_policy.is_none() {
            group.reschedule_policy = defaults::default_reschedule(job_type);
        }
        if group.migrate.is_none() && job_type == JobType::Service {
            group.migrate = Some(defaults::default_migrate());
        }
    }
    canonicalize_groups_only(job);
}

/// The defaults that do not depend on the job type.
fn canonicalize_groups_only(job: &mut Job) {
    let job_name = if job.name.is_empty() {
        job.id.clone()
    } else {
        job.name.clone()
    };
    for group in &mut job.task_groups {
        if let Some(scaling) = &mut group.scaling
            && scaling.r#type.is_empty()
        {
            scaling.r#type = defaults::SCALING_HORIZONTAL.to_string();
        }
        let disk = group
            .ephemeral_disk
            .get_or_insert_with(defaults::default_ephemeral_disk);
        if disk.size_mb == 0 {
            disk.size_mb = defaults::DEFAULT_DISK_MB;
        }
        default_weights(&mut group.affinities, &mut group.spreads);
        for task in &mut group.tasks {
            if task.resources.is_none() {
                task.resources = Some(Resources {
                    cpu_mhz: defaults::DEFAULT_CPU_MHZ,
                    memory_mb: defaults::DEFAULT_MEMORY_MB,
                    ..Default::default()
                });
            }
            if task.restart_policy.is_none() {
                task.restart_policy = group.restart_policy.clone();
            }
            if task.log_config.is_none() {
                task.log_config = Some(defaults::default_log_config());
            }
            if task.kill_timeout_ns == 0 {
                task.kill_timeout_ns = defaults::DEFAULT_KILL_TIMEOUT_NS;
            }
            default_weights(&mut task.affinities, &mut []);
            crate::task_defaults::fill(task);
            for mount in &mut task.volume_mounts {
                if mount.propagation_mode.is_empty() {
                    mount.propagation_mode = "private".to_string();
                }
            }
        }
        crate::service_defaults::fill(&job_name, group);
    }
}

fn default_weights(
    affinities: &mut [caravan_proto::Affinity],
    spreads: &mut [caravan_proto::Spread],
) {
    for a in affinities {
        if a.weight == 0 {
            a.weight = defaults::DEFAULT_WEIGHT;
        }
    }
    for s in spreads {
        if s.weight == 0 {
            s.weight = defaults::DEFAULT_WEIGHT;
        }
    }
}

/// Nomad's `UpdateStrategy.Empty`: nothing but zero values, so nothing to inherit.
fn update_is_empty(u: &UpdateStrategy) -> bool {
    *u == UpdateStrategy::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{Task, TaskGroup};

    fn bare(job_type: JobType) -> Job {
        let mut job = Job {
            id: "web".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count: 0,
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "mock".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        job.set_type(job_type);
        job
    }

    #[test]
    fn fills_job_defaults() {
        let mut job = bare(JobType::Unspecified);
        canonicalize(&mut job);
        assert_eq!(job.r#type(), JobType::Service);
        assert_eq!(job.namespace, "default");
        assert_eq!(job.name, "web");
        assert_eq!(job.priority, 50);
        assert_eq!(job.datacenters, vec!["*".to_string()]);
        assert_eq!(job.node_pool, "default");
        let g = &job.task_groups[0];
        assert_eq!(g.count, 0, "an explicit zero count is legal and kept");
        assert_eq!(g.update, Some(defaults::default_update()));
        assert_eq!(g.migrate, Some(defaults::default_migrate()));
        assert_eq!(g.restart_policy.as_ref().map(|r| r.attempts), Some(2));
        assert_eq!(g.ephemeral_disk.as_ref().map(|d| d.size_mb), Some(300));
        let t = &g.tasks[0];
        assert_eq!(t.kill_timeout_ns, 5_000_000_000);
        let r = t.resources.as_ref().expect("resources");
        assert_eq!((r.cpu_mhz, r.memory_mb), (100, 300));
    }

    #[test]
    fn system_jobs_get_no_reschedule_policy_and_no_update() {
        let mut job = bare(JobType::System);
        canonicalize(&mut job);
        let g = &job.task_groups[0];
        assert!(g.reschedule_policy.is_none());
        assert!(g.update.is_none());
        assert!(g.migrate.is_none());
        assert_eq!(g.restart_policy.as_ref().map(|r| r.attempts), Some(2));
    }

    #[test]
    fn batch_defaults() {
        let mut job = bare(JobType::Batch);
        canonicalize(&mut job);
        let g = &job.task_groups[0];
        assert_eq!(
            g.restart_policy
                .as_ref()
                .map(|r| (r.attempts, r.interval_ns)),
            Some((3, 86_400_000_000_000))
        );
        assert_eq!(
            g.reschedule_policy
                .as_ref()
                .map(|r| (r.attempts, r.delay_function.as_str())),
            Some((1, "constant"))
        );
        assert!(g.update.is_none());
    }

    #[test]
    fn explicit_zero_resources_are_kept_for_validation() {
        let mut job = bare(JobType::Service);
        job.task_groups[0].tasks[0].resources = Some(Resources::default());
        canonicalize(&mut job);
        assert_eq!(
            job.task_groups[0].tasks[0]
                .resources
                .as_ref()
                .map(|r| r.cpu_mhz),
            Some(0)
        );
    }

    #[test]
    fn idempotent() {
        let mut once = bare(JobType::Batch);
        canonicalize(&mut once);
        let mut twice = once.clone();
        canonicalize(&mut twice);
        assert_eq!(once, twice);
    }
}
