//! Nomad's merge rules for the policies a group inherits: a block that sets some fields
//! takes the rest from the job's block, then from the job type's defaults.

use super::model::*;
use super::to_proto::Conversion;
use crate::defaults;
use crate::error::join_path as join;
use caravan_proto::{JobType, MigrateStrategy, ReschedulePolicy, RestartPolicy, UpdateStrategy};
use serde_json::Value;

pub(super) fn fill_update(u: ApiUpdateStrategy) -> ApiUpdateStrategy {
    let d = defaults::default_update();
    ApiUpdateStrategy {
        stagger: u.stagger.or(Some(d.stagger_ns)),
        max_parallel: u.max_parallel.or(Some(i64::from(d.max_parallel))),
        health_check: u.health_check.or(Some(d.health_check)),
        min_healthy_time: u.min_healthy_time.or(Some(d.min_healthy_time_ns)),
        healthy_deadline: u.healthy_deadline.or(Some(d.healthy_deadline_ns)),
        progress_deadline: u.progress_deadline.or(Some(d.progress_deadline_ns)),
        canary: u.canary.or(Some(i64::from(d.canary))),
        auto_revert: u.auto_revert.or(Some(d.auto_revert)),
        auto_promote: u.auto_promote.or(Some(d.auto_promote)),
    }
}

pub(super) fn merge_update(base: ApiUpdateStrategy, o: ApiUpdateStrategy) -> ApiUpdateStrategy {
    ApiUpdateStrategy {
        stagger: o.stagger.or(base.stagger),
        max_parallel: o.max_parallel.or(base.max_parallel),
        health_check: o.health_check.or(base.health_check),
        min_healthy_time: o.min_healthy_time.or(base.min_healthy_time),
        healthy_deadline: o.healthy_deadline.or(base.healthy_deadline),
        progress_deadline: o.progress_deadline.or(base.progress_deadline),
        canary: o.canary.or(base.canary),
        auto_revert: o.auto_revert.or(base.auto_revert),
        auto_promote: o.auto_promote.or(base.auto_promote),
    }
}

/// Nomad's `UpdateStrategy.Empty`: nothing but zero values.
pub(super) fn update_is_empty(u: &ApiUpdateStrategy) -> bool {
    u.stagger.unwrap_or(0) == 0
        && u.max_parallel.unwrap_or(0) == 0
        && u.health_check.as_deref().unwrap_or("").is_empty()
        && u.min_healthy_time.unwrap_or(0) == 0
        && u.healthy_deadline.unwrap_or(0) == 0
        && u.progress_deadline.unwrap_or(0) == 0
        && !u.auto_revert.unwrap_or(false)
        && !u.auto_promote.unwrap_or(false)
        && u.canary.unwrap_or(0) == 0
}

pub(super) fn update_to_proto(
    u: ApiUpdateStrategy,
    base: &str,
    conv: &mut Conversion,
) -> UpdateStrategy {
    UpdateStrategy {
        stagger_ns: u.stagger.unwrap_or(0),
        max_parallel: conv.narrow(join(base, "max_parallel"), u.max_parallel.unwrap_or(0)),
        health_check: u.health_check.unwrap_or_default(),
        min_healthy_time_ns: u.min_healthy_time.unwrap_or(0),
        healthy_deadline_ns: u.healthy_deadline.unwrap_or(0),
        progress_deadline_ns: u.progress_deadline.unwrap_or(0),
        auto_revert: u.auto_revert.unwrap_or(false),
        auto_promote: u.auto_promote.unwrap_or(false),
        canary: conv.narrow(join(base, "canary"), u.canary.unwrap_or(0)),
    }
}

pub(super) fn merge_reschedule(
    base: ApiReschedulePolicy,
    o: ApiReschedulePolicy,
) -> ApiReschedulePolicy {
    ApiReschedulePolicy {
        attempts: o.attempts.or(base.attempts),
        interval: o.interval.or(base.interval),
        delay: o.delay.or(base.delay),
        delay_function: o.delay_function.or(base.delay_function),
        max_delay: o.max_delay.or(base.max_delay),
        unlimited: o.unlimited.or(base.unlimited),
    }
}

pub(super) fn fill_reschedule(
    r: ApiReschedulePolicy,
    t: JobType,
    base: &str,
    conv: &mut Conversion,
) -> ReschedulePolicy {
    // System jobs have no default; Nomad fills their explicit block with zero values
    // and then rejects it in validation.
    let d = defaults::default_reschedule(t).unwrap_or_default();
    let path = join(base, "reschedule.attempts");
    ReschedulePolicy {
        attempts: r.attempts.map_or(d.attempts, |a| conv.narrow(path, a)),
        interval_ns: r.interval.unwrap_or(d.interval_ns),
        delay_ns: r.delay.unwrap_or(d.delay_ns),
        delay_function: r.delay_function.unwrap_or(d.delay_function),
        max_delay_ns: r.max_delay.unwrap_or(d.max_delay_ns),
        unlimited: r.unlimited.unwrap_or(d.unlimited),
    }
}

pub(super) fn merge_migrate(base: ApiMigrateStrategy, o: ApiMigrateStrategy) -> ApiMigrateStrategy {
    ApiMigrateStrategy {
        max_parallel: o.max_parallel.or(base.max_parallel),
        health_check: o.health_check.or(base.health_check),
        min_healthy_time: o.min_healthy_time.or(base.min_healthy_time),
        healthy_deadline: o.healthy_deadline.or(base.healthy_deadline),
    }
}

pub(super) fn fill_migrate(
    m: ApiMigrateStrategy,
    base: &str,
    conv: &mut Conversion,
) -> MigrateStrategy {
    let d = defaults::default_migrate();
    let path = join(base, "migrate.max_parallel");
    MigrateStrategy {
        max_parallel: m
            .max_parallel
            .map_or(d.max_parallel, |v| conv.narrow(path, v)),
        health_check: m.health_check.unwrap_or(d.health_check),
        min_healthy_time_ns: m.min_healthy_time.unwrap_or(d.min_healthy_time_ns),
        healthy_deadline_ns: m.healthy_deadline.unwrap_or(d.healthy_deadline_ns),
    }
}

/// Overlays the fields a restart block set onto `base` (the type's or the group's policy).
pub(super) fn merge_restart(
    base: RestartPolicy,
    o: Option<ApiRestartPolicy>,
    path: &str,
    conv: &mut Conversion,
) -> RestartPolicy {
    let Some(o) = o else { return base };
    if o.render_templates == Some(true) {
        conv.unsupported("restart", path, "RenderTemplates", Some(&Value::Bool(true)));
    }
    RestartPolicy {
        attempts: o
            .attempts
            .map_or(base.attempts, |a| conv.narrow(join(path, "attempts"), a)),
        interval_ns: o.interval.unwrap_or(base.interval_ns),
        delay_ns: o.delay.unwrap_or(base.delay_ns),
        mode: o.mode.unwrap_or(base.mode),
        on_success: o.on_success.unwrap_or(base.on_success),
    }
}
