//! Caravan `Job` → Nomad `api.Job` mirror, for `GET /v1/job/:id` and `job inspect`.
//!
//! Every modelled field is rendered, defaults included, so that parsing the rendering
//! back yields the same job.

use super::model::*;
use crate::defaults;
use base64::Engine as _;
use caravan_model::NomadName;
use caravan_proto::{
    Affinity, Constraint, Job, MigrateStrategy, NetworkResource, Port, ReschedulePolicy, Resources,
    RestartPolicy, Spread, Task, TaskGroup, UpdateStrategy,
};
use serde_json::Value;

/// Renders a job as Nomad's API shows it.
pub(crate) fn job_to_api(job: &Job) -> ApiJob {
    ApiJob {
        region: Some(defaults::DEFAULT_REGION.to_string()),
        namespace: Some(job.namespace.clone()),
        id: Some(job.id.clone()),
        name: Some(job.name.clone()),
        r#type: Some(job.r#type().nomad_name().to_string()),
        priority: Some(i64::from(job.priority)),
        all_at_once: Some(job.all_at_once),
        datacenters: Some(job.datacenters.clone()),
        node_pool: Some(job.node_pool.clone()),
        constraints: Some(constraints(&job.constraints)),
        affinities: Some(affinities(&job.affinities)),
        task_groups: Some(
            job.task_groups
                .iter()
                .map(|tg| group_to_api(job, tg))
                .collect(),
        ),
        update: job.update.as_ref().map(update_to_api),
        spreads: Some(spreads(&job.spreads)),
        periodic: job.periodic.as_ref().map(|p| ApiPeriodic {
            enabled: Some(p.enabled),
            spec: Some(match p.specs.as_slice() {
                [] => OneOrMany::One(String::new()),
                [one] => OneOrMany::One(one.clone()),
                many => OneOrMany::Many(many.to_vec()),
            }),
            specs: None,
            spec_type: Some(p.spec_type.clone()),
            prohibit_overlap: Some(p.prohibit_overlap),
            time_zone: Some(p.time_zone.clone()),
        }),
        parameterized_job: job.parameterized.as_ref().map(|p| ApiParameterized {
            payload: Some(p.payload.clone()),
            meta_required: Some(p.meta_required.clone()),
            meta_optional: Some(p.meta_optional.clone()),
        }),
        meta: Some(job.meta.clone()),
        ui: job.ui.as_ref().map(|u| ApiJobUi {
            description: Some(u.description.clone()),
            links: Some(
                u.links
                    .iter()
                    .map(|l| ApiJobUiLink {
                        label: Some(l.label.clone()),
                        url: Some(l.url.clone()),
                    })
                    .collect(),
            ),
        }),
        stop: Some(job.stop),
        parent_id: Some(job.parent_id.clone()),
        dispatched: Some(job.dispatched),
        payload: (!job.payload.is_empty())
            .then(|| base64::engine::general_purpose::STANDARD.encode(&job.payload)),
        status: Some(job.status().nomad_name().to_string()),
        status_description: Some(job.status_description.clone()),
        stable: Some(job.stable),
        version: Some(job.version),
        submit_time: Some(job.submit_time_unix_ns),
        create_index: Some(index(job.create_revision)),
        modify_index: Some(index(job.modify_revision)),
        job_modify_index: Some(index(job.job_modify_revision)),
        ..Default::default()
    }
}

/// Revisions are never negative in etcd; a negative one renders as 0 rather than wrapping.
fn index(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// A group's scaling policy as Nomad's job JSON shows it, with its id,
/// target and the job's indexes.
pub(crate) fn scaling_to_api(job: &Job, tg: &TaskGroup) -> Option<Value> {
    let s = tg.scaling.as_ref()?;
    Some(serde_json::json!({
        "ID": defaults::scaling_policy_id(&job.namespace, &job.id, &tg.name),
        "Type": s.r#type,
        "Target": {"Namespace": job.namespace, "Job": job.id, "Group": tg.name},
        "Policy": s.policy.as_ref().map_or(Value::Null, |p| Value::Object(struct_to_json_map(p))),
        "Min": s.min,
        "Max": s.max,
        "Enabled": s.enabled,
        "CreateIndex": index(job.create_revision),
        "ModifyIndex": index(job.job_modify_revision),
    }))
}

fn group_to_api(job: &Job, tg: &TaskGroup) -> ApiTaskGroup {
    ApiTaskGroup {
        name: Some(tg.name.clone()),
        count: Some(i64::from(tg.count)),
        constraints: Some(constraints(&tg.constraints)),
        affinities: Some(affinities(&tg.affinities)),
        tasks: Some(tg.tasks.iter().map(task_to_api).collect()),
        spreads: Some(spreads(&tg.spreads)),
        restart_policy: tg.restart_policy.as_ref().map(restart_to_api),
        reschedule_policy: tg.reschedule_policy.as_ref().map(reschedule_to_api),
        ephemeral_disk: tg.ephemeral_disk.as_ref().map(|d| ApiEphemeralDisk {
            sticky: Some(d.sticky),
            migrate: Some(d.migrate),
            size_mb: Some(i64::from(d.size_mb)),
        }),
        update: tg.update.as_ref().map(update_to_api),
        migrate: tg.migrate.as_ref().map(migrate_to_api),
        networks: Some(networks(&tg.networks)),
        meta: Some(tg.meta.clone()),
        shutdown_delay: Some(tg.shutdown_delay_ns),
        max_client_disconnect: (tg.max_client_disconnect_ns != 0)
            .then_some(tg.max_client_disconnect_ns),
        scaling: scaling_to_api(job, tg),
        disconnect: tg.disconnect.as_ref().map(|d| ApiDisconnect {
            lost_after: Some(d.lost_after_ns),
            stop_on_client_after: d.stop_on_client_after_ns,
            replace: Some(d.replace.unwrap_or(true)),
            reconcile: Some(d.reconcile.clone()),
        }),
        volumes: super::volumes::volumes_to_api(&tg.volumes),
        services: super::services::services_to_api(&tg.services),
        ..Default::default()
    }
}

fn task_to_api(t: &Task) -> ApiTask {
    let (identity, identities) = super::identities::identities_to_api(&t.identities);
    ApiTask {
        name: Some(t.name.clone()),
        driver: Some(t.driver.clone()),
        user: Some(t.user.clone()),
        lifecycle: t.lifecycle.as_ref().map(|l| ApiLifecycle {
            hook: Some(l.hook.clone()),
            sidecar: Some(l.sidecar),
        }),
        config: t.config.as_ref().map(struct_to_json_map),
        constraints: Some(constraints(&t.constraints)),
        affinities: Some(affinities(&t.affinities)),
        env: Some(t.env.clone()),
        resources: t.resources.as_ref().map(resources_to_api),
        restart_policy: t.restart_policy.as_ref().map(restart_to_api),
        meta: Some(t.meta.clone()),
        kill_timeout: Some(t.kill_timeout_ns),
        shutdown_delay: Some(t.shutdown_delay_ns),
        dispatch_payload: (!t.dispatch_payload_file.is_empty()).then(|| ApiDispatchPayload {
            file: Some(t.dispatch_payload_file.clone()),
        }),
        leader: Some(t.leader),
        kill_signal: Some(t.kill_signal.clone()),
        log_config: Some({
            let lc = t
                .log_config
                .unwrap_or_else(crate::defaults::default_log_config);
            ApiLogConfig {
                max_files: Some(i64::from(lc.max_files)),
                max_file_size_mb: Some(i64::from(lc.max_file_size_mb)),
                disabled: Some(lc.disabled),
                enabled: None,
            }
        }),
        volume_mounts: super::volumes::mounts_to_api(&t.volume_mounts),
        services: super::services::services_to_api(&t.services),
        artifacts: super::artifacts::artifacts_to_api(&t.artifacts),
        templates: super::templates::templates_to_api(&t.templates),
        identity,
        identities,
        ..Default::default()
    }
}

fn resources_to_api(r: &Resources) -> ApiResources {
    ApiResources {
        cpu: Some(i64::from(r.cpu_mhz)),
        cores: Some(i64::from(r.cores)),
        memory_mb: Some(i64::from(r.memory_mb)),
        memory_max_mb: Some(i64::from(r.memory_max_mb)),
        disk_mb: Some(i64::from(r.disk_mb)),
        networks: Some(networks(&r.networks)),
        devices: Some(
            r.devices
                .iter()
                .map(|d| ApiRequestedDevice {
                    name: Some(d.name.clone()),
                    count: Some(i64::from(d.count)),
                    constraints: Some(constraints(&d.constraints)),
                    affinities: Some(affinities(&d.affinities)),
                })
                .collect(),
        ),
        ..Default::default()
    }
}

fn networks(nets: &[NetworkResource]) -> Vec<ApiNetwork> {
    let ports = |ports: &[Port], with_value: bool| -> Vec<ApiPort> {
        ports
            .iter()
            .map(|p| ApiPort {
                label: Some(p.label.clone()),
                value: Some(if with_value { i64::from(p.value) } else { 0 }),
                to: Some(i64::from(p.to)),
                host_network: Some(p.host_network.clone()),
                ignore_collision: None,
            })
            .collect()
    };
    nets.iter()
        .map(|n| ApiNetwork {
            mode: Some(n.mode.clone()),
            mbits: Some(i64::from(n.mbits)),
            reserved_ports: Some(ports(&n.reserved_ports, true)),
            dynamic_ports: Some(ports(&n.dynamic_ports, false)),
            hostname: (!n.hostname.is_empty()).then(|| n.hostname.clone()),
            dns: n.dns.as_ref().map(super::dns::dns_from_proto),
            ..Default::default()
        })
        .collect()
}

fn constraints(list: &[Constraint]) -> Vec<ApiConstraint> {
    list.iter()
        .map(|c| ApiConstraint {
            l_target: Some(c.l_target.clone()),
            r_target: Some(c.r_target.clone()),
            operand: Some(c.operand.clone()),
        })
        .collect()
}

fn affinities(list: &[Affinity]) -> Vec<ApiAffinity> {
    list.iter()
        .map(|a| ApiAffinity {
            l_target: Some(a.l_target.clone()),
            r_target: Some(a.r_target.clone()),
            operand: Some(a.operand.clone()),
            weight: Some(i64::from(a.weight)),
        })
        .collect()
}

fn spreads(list: &[Spread]) -> Vec<ApiSpread> {
    list.iter()
        .map(|s| ApiSpread {
            attribute: Some(s.attribute.clone()),
            weight: Some(i64::from(s.weight)),
            spread_target: Some(
                s.targets
                    .iter()
                    .map(|t| ApiSpreadTarget {
                        value: Some(t.value.clone()),
                        percent: Some(i64::from(t.percent)),
                    })
                    .collect(),
            ),
        })
        .collect()
}

fn update_to_api(u: &UpdateStrategy) -> ApiUpdateStrategy {
    ApiUpdateStrategy {
        stagger: Some(u.stagger_ns),
        max_parallel: Some(i64::from(u.max_parallel)),
        health_check: Some(u.health_check.clone()),
        min_healthy_time: Some(u.min_healthy_time_ns),
        healthy_deadline: Some(u.healthy_deadline_ns),
        progress_deadline: Some(u.progress_deadline_ns),
        canary: Some(i64::from(u.canary)),
        auto_revert: Some(u.auto_revert),
        auto_promote: Some(u.auto_promote),
    }
}

fn migrate_to_api(m: &MigrateStrategy) -> ApiMigrateStrategy {
    ApiMigrateStrategy {
        max_parallel: Some(i64::from(m.max_parallel)),
        health_check: Some(m.health_check.clone()),
        min_healthy_time: Some(m.min_healthy_time_ns),
        healthy_deadline: Some(m.healthy_deadline_ns),
    }
}

fn restart_to_api(r: &RestartPolicy) -> ApiRestartPolicy {
    ApiRestartPolicy {
        interval: Some(r.interval_ns),
        attempts: Some(i64::from(r.attempts)),
        delay: Some(r.delay_ns),
        mode: Some(r.mode.clone()),
        render_templates: Some(false),
        on_success: r.on_success.then_some(true),
    }
}

fn reschedule_to_api(r: &ReschedulePolicy) -> ApiReschedulePolicy {
    ApiReschedulePolicy {
        attempts: Some(i64::from(r.attempts)),
        interval: Some(r.interval_ns),
        delay: Some(r.delay_ns),
        delay_function: Some(r.delay_function.clone()),
        max_delay: Some(r.max_delay_ns),
        unlimited: Some(r.unlimited),
    }
}

/// A protobuf `Struct` (task `config`) as a JSON object.
pub(crate) fn struct_to_json_map(s: &prost_types::Struct) -> serde_json::Map<String, Value> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect()
}

fn value_to_json(v: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number_to_json(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value_to_json).collect()),
        Some(Kind::StructValue(s)) => Value::Object(struct_to_json_map(s)),
    }
}

/// Whole numbers render as JSON integers (`80`, not `80.0`), as Nomad shows them.
fn number_to_json(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact in f64
    if n.fract() == 0.0 && n.abs() < EXACT {
        // The guard above makes the cast exact.
        #[allow(clippy::cast_possible_truncation)]
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}
