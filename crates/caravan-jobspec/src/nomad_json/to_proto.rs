//! Nomad `api.Job` mirror → Caravan `Job`, applying Nomad's client-side canonicalization.
//!
//! Defaults that depend on whether a field was sent (a missing `Count` is 1, an explicit 0
//! stays 0; a partial `restart` block is merged over the job type's defaults) are applied
//! here, where presence is still known. The result is canonical: calling
//! [`crate::canonicalize`] on it changes nothing.

use super::model::*;
use super::policies::{
    fill_migrate, fill_reschedule, fill_update, merge_migrate, merge_reschedule, merge_restart,
    merge_update, update_is_empty, update_to_proto,
};
use crate::defaults;
use crate::error::{FieldError, join_path as join};
use base64::Engine as _;
use caravan_model::NomadName;
use caravan_proto::{
    Affinity, Constraint, EphemeralDisk, Job, JobStatus, JobType, LogConfig, NetworkResource,
    ParameterizedJobConfig, PeriodicConfig, Port, RequestedDevice, Resources, RestartPolicy,
    ScalingPolicy, Spread, SpreadTarget, Task, TaskGroup, TaskLifecycle,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// Errors and warnings collected while converting one job.
#[derive(Debug, Default)]
pub(crate) struct Conversion {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

impl Conversion {
    pub(super) fn err(&mut self, path: String, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    /// Refuses a part of Nomad's job specification Caravan does not implement (listed in
    /// [`crate::refused::REFUSED`] under `within`), when the job gives it a meaningful value.
    pub(super) fn unsupported(
        &mut self,
        within: &str,
        base: &str,
        json: &str,
        value: Option<&Value>,
    ) {
        if !value.is_some_and(is_meaningful) {
            return;
        }
        let base = if base.is_empty() { "job" } else { base };
        let message = match crate::refused::by_json(within, json) {
            Some(r) => crate::refused::message(r),
            None => format!("{json} is not supported by Caravan"),
        };
        self.err(base.to_string(), message);
    }

    /// Narrows an integer into the proto's type, reporting the field when it does not fit.
    pub(super) fn narrow<T: TryFrom<i64> + Default>(&mut self, path: String, value: i64) -> T {
        T::try_from(value).unwrap_or_else(|_| {
            let message = if value < 0 {
                format!("must be >= 0 (got {value})")
            } else {
                format!("value {value} is out of range")
            };
            self.err(path, message);
            T::default()
        })
    }

    fn revision(&mut self, path: &str, value: Option<u64>) -> i64 {
        value.map_or(0, |v| {
            i64::try_from(v).unwrap_or_else(|_| {
                self.err(path.to_string(), format!("value {v} is out of range"));
                0
            })
        })
    }
}

/// Whether a raw JSON value carries something a user meant (not null, empty or zero).
pub(super) fn is_meaningful(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => a.iter().any(is_meaningful),
        Value::Object(o) => o.values().any(is_meaningful),
    }
}

fn str_meaningful(s: &Option<String>) -> Option<Value> {
    s.as_ref()
        .filter(|s| !s.is_empty())
        .map(|s| Value::String(s.clone()))
}

/// Converts a Nomad job into Caravan's model, canonicalizing it as Nomad's API client does.
pub(crate) fn job_to_proto(api: ApiJob, conv: &mut Conversion) -> Job {
    let job_type = match api.r#type.as_deref() {
        None | Some("") => JobType::Service,
        Some(t) => JobType::from_nomad_name(t).unwrap_or_else(|| {
            conv.err(
                "type".into(),
                format!("invalid job type {t:?}; must be one of service, batch, system, sysbatch"),
            );
            JobType::Service
        }),
    };
    if let Some(region) = api
        .region
        .as_deref()
        .filter(|r| !r.is_empty() && *r != defaults::DEFAULT_REGION)
    {
        conv.warnings.push(format!(
            "job: region {region:?} was ignored: Caravan runs a single region ({:?})",
            defaults::DEFAULT_REGION
        ));
    }
    conv.unsupported("job", "", "Multiregion", api.multiregion.as_ref());
    conv.unsupported(
        "job",
        "",
        "ConsulToken",
        str_meaningful(&api.consul_token).as_ref(),
    );
    conv.unsupported(
        "job",
        "",
        "VaultToken",
        str_meaningful(&api.vault_token).as_ref(),
    );
    conv.unsupported(
        "job",
        "",
        "ConsulNamespace",
        str_meaningful(&api.consul_namespace).as_ref(),
    );
    conv.unsupported(
        "job",
        "",
        "VaultNamespace",
        str_meaningful(&api.vault_namespace).as_ref(),
    );

    let id = api.id.unwrap_or_default();
    let name = api
        .name
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| id.clone());
    let priority = match api.priority {
        None => defaults::DEFAULT_PRIORITY,
        Some(p) => conv.narrow("priority".into(), p),
    };
    let datacenters = api
        .datacenters
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| vec![defaults::DEFAULT_DATACENTER.to_string()]);

    // The job-level update is canonicalized before groups inherit it, as Nomad does; a
    // service job that sets none gets the default strategy (and so deployments).
    let job_update = match api.update {
        Some(u) => Some(fill_update(u)),
        None if job_type == JobType::Service => Some(fill_update(ApiUpdateStrategy::default())),
        None => None,
    };
    let inherited = Inherited {
        job_type,
        update: job_update.clone(),
        reschedule: api.reschedule,
        migrate: api.migrate,
    };
    let task_groups = api
        .task_groups
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, tg)| group_to_proto(tg, i, &inherited, conv))
        .collect();

    let payload = match api.payload.as_deref() {
        None | Some("") => Vec::new(),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_else(|e| {
                conv.err("payload".into(), format!("not valid base64: {e}"));
                Vec::new()
            }),
    };
    let status = match api.status.as_deref() {
        None | Some("") => JobStatus::Unspecified,
        Some(name) => JobStatus::from_nomad_name(name).unwrap_or_else(|| {
            conv.warnings
                .push(format!("job: unknown status {name:?} was ignored"));
            JobStatus::Unspecified
        }),
    };

    let mut job = Job {
        id,
        namespace: api
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| defaults::DEFAULT_NAMESPACE.to_string()),
        name,
        priority,
        datacenters,
        node_pool: api
            .node_pool
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| defaults::DEFAULT_NODE_POOL.to_string()),
        all_at_once: api.all_at_once.unwrap_or(false),
        constraints: constraints(api.constraints),
        affinities: affinities(api.affinities, "", conv),
        spreads: spreads(api.spreads, "", conv),
        task_groups,
        update: job_update.map(|u| update_to_proto(u, "update", conv)),
        periodic: api.periodic.map(periodic_to_proto),
        parameterized: api.parameterized_job.map(|p| ParameterizedJobConfig {
            payload: p
                .payload
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| defaults::DEFAULT_PAYLOAD.to_string()),
            meta_required: p.meta_required.unwrap_or_default(),
            meta_optional: p.meta_optional.unwrap_or_default(),
        }),
        payload,
        parent_id: api.parent_id.unwrap_or_default(),
        meta: api.meta.unwrap_or_default(),
        status_description: api.status_description.unwrap_or_default(),
        stop: api.stop.unwrap_or(false),
        stable: api.stable.unwrap_or(false),
        version: api.version.unwrap_or(0),
        submit_time_unix_ns: api.submit_time.unwrap_or(0),
        create_revision: conv.revision("CreateIndex", api.create_index),
        modify_revision: conv.revision("ModifyIndex", api.modify_index),
        job_modify_revision: conv.revision("JobModifyIndex", api.job_modify_index),
        dispatched: api.dispatched.unwrap_or(false),
        ui: api.ui.map(|u| caravan_proto::JobUi {
            description: u.description.unwrap_or_default(),
            links: u
                .links
                .unwrap_or_default()
                .into_iter()
                .map(|l| caravan_proto::JobUiLink {
                    label: l.label.unwrap_or_default(),
                    url: l.url.unwrap_or_default(),
                })
                .collect(),
        }),
        ..Default::default()
    };
    job.set_type(job_type);
    job.set_status(status);
    let job_name = job.name.clone();
    for group in &mut job.task_groups {
        crate::service_defaults::fill(&job_name, group);
    }
    job
}

/// What a group inherits from its job.
struct Inherited {
    job_type: JobType,
    update: Option<ApiUpdateStrategy>,
    reschedule: Option<ApiReschedulePolicy>,
    migrate: Option<ApiMigrateStrategy>,
}

fn group_to_proto(
    tg: ApiTaskGroup,
    index: usize,
    job: &Inherited,
    conv: &mut Conversion,
) -> TaskGroup {
    let base = match tg.name.as_deref() {
        Some(n) if !n.is_empty() => format!("group {n:?}"),
        _ => format!("group #{}", index + 1),
    };
    let services = super::services::services_to_proto(tg.services, &base, conv);
    if let Some(consul) = tg.consul.as_ref().filter(|c| !is_default_consul(c)) {
        conv.unsupported("group", &base, "Consul", Some(consul));
    }
    conv.unsupported(
        "group",
        &base,
        "MaxRunDuration",
        tg.max_run_duration.map(Value::from).as_ref(),
    );
    conv.unsupported(
        "group",
        &base,
        "PreventRescheduleOnLost",
        tg.prevent_reschedule_on_lost.map(Value::from).as_ref(),
    );

    // Without a count, Nomad starts a scaled group at its scaling minimum.
    let scaling_min = tg
        .scaling
        .as_ref()
        .and_then(|s| s.get("Min"))
        .and_then(Value::as_i64);
    let count = match tg.count.or(scaling_min) {
        None => 1,
        Some(c) => conv.narrow(join(&base, "count"), c),
    };

    let update = match (&job.update, tg.update) {
        (Some(ju), Some(gu)) => Some(fill_update(merge_update(ju.clone(), gu))),
        (Some(ju), None) if !update_is_empty(ju) => Some(ju.clone()),
        (_, Some(gu)) => Some(fill_update(gu)),
        _ => None,
    };
    let reschedule = match (job.reschedule.clone(), tg.reschedule_policy) {
        (Some(jr), Some(gr)) => Some(merge_reschedule(jr, gr)),
        (Some(jr), None) => Some(jr),
        (None, gr) => gr,
    };
    let reschedule = match reschedule {
        Some(r) => Some(fill_reschedule(r, job.job_type, &base, conv)),
        None => defaults::default_reschedule(job.job_type),
    };
    let migrate = match (job.migrate.clone(), tg.migrate) {
        (Some(jm), Some(gm)) => Some(merge_migrate(jm, gm)),
        (Some(jm), None) => Some(jm),
        (None, gm) => gm,
    };
    let migrate = match migrate {
        Some(m) => Some(fill_migrate(m, &base, conv)),
        None if job.job_type == JobType::Service => Some(defaults::default_migrate()),
        None => None,
    };
    let restart = merge_restart(
        defaults::default_restart(job.job_type),
        tg.restart_policy,
        &join(&base, "restart"),
        conv,
    );

    let (max_client_disconnect_ns, disconnect) = disconnect_to_proto(
        tg.max_client_disconnect,
        tg.stop_after_client_disconnect,
        tg.disconnect,
        &base,
        conv,
    );

    let scaling = tg
        .scaling
        .and_then(|s| scaling_to_proto(s, count, &join(&base, "scaling"), conv));

    let tasks = tg
        .tasks
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, t)| task_to_proto(t, i, &base, &restart, conv))
        .collect();

    TaskGroup {
        name: tg.name.unwrap_or_default(),
        count,
        constraints: constraints(tg.constraints),
        affinities: affinities(tg.affinities, &base, conv),
        spreads: spreads(tg.spreads, &base, conv),
        tasks,
        restart_policy: Some(restart),
        reschedule_policy: reschedule,
        migrate,
        update: update.map(|u| update_to_proto(u, &join(&base, "update"), conv)),
        ephemeral_disk: Some(ephemeral_disk(tg.ephemeral_disk, &base, conv)),
        networks: networks(tg.networks, &base, conv),
        meta: tg.meta.unwrap_or_default(),
        shutdown_delay_ns: tg.shutdown_delay.unwrap_or(0),
        max_client_disconnect_ns,
        scaling,
        disconnect,
        volumes: super::volumes::volumes_to_proto(tg.volumes, &base, conv),
        services,
    }
}

/// A group's `disconnect` block with Nomad's defaults (`replace` true,
/// `reconcile` best_score), and the older `max_client_disconnect` and
/// `stop_after_client_disconnect`: each stands in for its field of the block
/// when the block leaves it out, and writing both is refused.
fn disconnect_to_proto(
    max_client_disconnect: Option<i64>,
    stop_after_client_disconnect: Option<i64>,
    block: Option<ApiDisconnect>,
    base: &str,
    conv: &mut Conversion,
) -> (i64, Option<caravan_proto::DisconnectStrategy>) {
    if let (Some(_), Some(b)) = (max_client_disconnect, &block)
        && b.lost_after.is_some()
    {
        conv.err(
            join(base, "max_client_disconnect"),
            "conflicts with disconnect.lost_after: write only disconnect.lost_after",
        );
    }
    if let (Some(_), Some(b)) = (stop_after_client_disconnect, &block)
        && b.stop_on_client_after.is_some()
    {
        conv.err(
            join(base, "stop_after_client_disconnect"),
            "conflicts with disconnect.stop_on_client_after: write only disconnect.stop_on_client_after",
        );
    }
    let max_ns = max_client_disconnect.unwrap_or(0);
    if block.is_none() && stop_after_client_disconnect.is_none() {
        // The older field alone: kept as written, read as a lost_after.
        return (max_ns, None);
    }
    let b = block.unwrap_or_default();
    let strategy = caravan_proto::DisconnectStrategy {
        lost_after_ns: b.lost_after.or(max_client_disconnect).unwrap_or(0),
        stop_on_client_after_ns: b.stop_on_client_after.or(stop_after_client_disconnect),
        replace: Some(b.replace.unwrap_or(true)),
        reconcile: match b.reconcile.as_deref() {
            None | Some("") => caravan_model::disconnect::BEST_SCORE.to_string(),
            Some(r) => r.to_string(),
        },
    };
    (max_ns, Some(strategy))
}

/// A group's `Scaling` block as Nomad reads it: `Enabled` defaults to true,
/// `Min` to the group's count, `Type` to `horizontal`; a missing `Max` is
/// left negative for validation to refuse. `ID`, `Target` and the indexes
/// are derived, so a rendered job reads back unchanged.
fn scaling_to_proto(
    value: Value,
    count: i32,
    path: &str,
    conv: &mut Conversion,
) -> Option<ScalingPolicy> {
    let mut block = match value {
        Value::Null => return None,
        Value::Object(block) => block,
        other => {
            conv.err(path.to_string(), format!("must be an object (got {other})"));
            return None;
        }
    };
    let mut int = |name: &str, default: i64, conv: &mut Conversion| match block.remove(name) {
        None | Some(Value::Null) => default,
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().unwrap_or(default),
        Some(other) => {
            conv.err(
                join(path, name),
                format!("must be an integer (got {other})"),
            );
            default
        }
    };
    let min = int("Min", i64::from(count), conv);
    let max = int("Max", -1, conv);
    let enabled = match block.remove("Enabled") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            conv.err(
                join(path, "Enabled"),
                format!("must be true or false (got {other})"),
            );
            true
        }
    };
    let policy_type = match block.remove("Type") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t,
        Some(other) => {
            conv.err(
                join(path, "Type"),
                format!("must be a string (got {other})"),
            );
            String::new()
        }
    };
    let policy = match block.remove("Policy") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(json_map_to_struct(map)),
        Some(other) => {
            conv.err(
                join(path, "Policy"),
                format!("must be an object (got {other})"),
            );
            None
        }
    };
    Some(ScalingPolicy {
        min,
        max,
        enabled,
        r#type: if policy_type.is_empty() {
            defaults::SCALING_HORIZONTAL.to_string()
        } else {
            policy_type
        },
        policy,
    })
}

fn task_to_proto(
    t: ApiTask,
    index: usize,
    group_base: &str,
    group_restart: &RestartPolicy,
    conv: &mut Conversion,
) -> Task {
    let base = match t.name.as_deref() {
        Some(n) if !n.is_empty() => join(group_base, &format!("task {n:?}")),
        _ => join(group_base, &format!("task #{}", index + 1)),
    };
    let services = super::services::services_to_proto(t.services, &base, conv);
    let artifacts = super::artifacts::artifacts_to_proto(t.artifacts, &base, conv);
    let templates = super::templates::templates_to_proto(t.templates, &base, conv);
    let identities = super::identities::identities_to_proto(t.identity, t.identities, &base, conv);
    conv.unsupported("task", &base, "Vault", t.vault.as_ref());
    conv.unsupported("task", &base, "Consul", t.consul.as_ref());
    conv.unsupported(
        "task",
        &base,
        "CSIPluginConfig",
        t.csi_plugin_config.as_ref(),
    );
    conv.unsupported(
        "task",
        &base,
        "ScalingPolicies",
        t.scaling_policies.as_ref(),
    );
    conv.unsupported("task", &base, "Actions", t.actions.as_ref());
    conv.unsupported("task", &base, "Schedule", t.schedule.as_ref());
    conv.unsupported("task", &base, "Secrets", t.secrets.as_ref());
    conv.unsupported("task", &base, "Kind", str_meaningful(&t.kind).as_ref());
    let log_config = log_config(t.log_config, &join(&base, "LogConfig"), conv);

    let restart_policy = match t.restart_policy {
        None => group_restart.clone(),
        Some(r) => merge_restart(
            group_restart.clone(),
            Some(r),
            &join(&base, "restart"),
            conv,
        ),
    };
    Task {
        name: t.name.unwrap_or_default(),
        driver: t.driver.unwrap_or_default(),
        config: t.config.map(json_map_to_struct),
        env: t.env.unwrap_or_default(),
        resources: Some(resources(t.resources.unwrap_or_default(), &base, conv)),
        constraints: constraints(t.constraints),
        affinities: affinities(t.affinities, &base, conv),
        kill_timeout_ns: t.kill_timeout.unwrap_or(defaults::DEFAULT_KILL_TIMEOUT_NS),
        leader: t.leader.unwrap_or(false),
        lifecycle: t.lifecycle.map(|l| TaskLifecycle {
            hook: l.hook.unwrap_or_default(),
            sidecar: l.sidecar.unwrap_or(false),
        }),
        meta: t.meta.unwrap_or_default(),
        kill_signal: t.kill_signal.unwrap_or_default(),
        dispatch_payload_file: t.dispatch_payload.and_then(|d| d.file).unwrap_or_default(),
        restart_policy: Some(restart_policy),
        user: t.user.unwrap_or_default(),
        log_config: Some(log_config),
        shutdown_delay_ns: t.shutdown_delay.unwrap_or(0),
        volume_mounts: super::volumes::mounts_to_proto(t.volume_mounts, &base, conv),
        services,
        artifacts,
        templates,
        identities,
    }
}

/// A task's `LogConfig` with Nomad's defaults for what it leaves out.
fn log_config(lc: Option<ApiLogConfig>, base: &str, conv: &mut Conversion) -> LogConfig {
    let lc = lc.unwrap_or_default();
    let mut out = defaults::default_log_config();
    if let Some(n) = lc.max_files {
        out.max_files = conv.narrow(join(base, "MaxFiles"), n);
    }
    if let Some(n) = lc.max_file_size_mb {
        out.max_file_size_mb = conv.narrow(join(base, "MaxFileSizeMB"), n);
    }
    out.disabled = lc.disabled.unwrap_or(false) || lc.enabled == Some(false);
    out
}

/// Nomad servers fill `Consul { Cluster: "default" }` into every group.
fn is_default_consul(v: &Value) -> bool {
    v.as_object().is_some_and(|o| {
        o.iter().all(|(k, v)| match k.as_str() {
            "Cluster" => matches!(v.as_str(), Some("" | "default")) || v.is_null(),
            _ => !is_meaningful(v),
        })
    })
}

fn resources(r: ApiResources, base: &str, conv: &mut Conversion) -> Resources {
    let path = |f: &str| join(base, &format!("resources.{f}"));
    // Nomad's rule: the cpu default applies only when neither cpu nor cores was asked for.
    let cpu = match (r.cpu, r.cores) {
        (Some(c), _) => c,
        (None, None) => i64::from(defaults::DEFAULT_CPU_MHZ),
        (None, Some(_)) => 0,
    };
    // Nomad only warns about both: IOPS is long deprecated, and its HTTP API drops a
    // task's disk (disk is the group's `ephemeral_disk`).
    if r.iops.is_some_and(|v| v != 0) {
        conv.warnings.push(format!(
            "{}: IOPS has been deprecated as of Nomad 0.9.0. Please remove IOPS from resource block.",
            join(base, "resources")
        ));
    }
    if r.disk_mb.is_some_and(|v| v != 0) {
        conv.warnings.push(format!(
            "{}: disk was ignored, as Nomad's API ignores it: a task's disk is its group's ephemeral_disk",
            join(base, "resources")
        ));
    }
    conv.unsupported(
        "resources",
        &join(base, "resources"),
        "SecretsMB",
        r.secrets_mb.map(Value::from).as_ref(),
    );
    conv.unsupported(
        "resources",
        &join(base, "resources"),
        "NUMA",
        r.numa.as_ref(),
    );
    Resources {
        cpu_mhz: conv.narrow(path("cpu"), cpu),
        cores: conv.narrow(path("cores"), r.cores.unwrap_or(0)),
        memory_mb: conv.narrow(
            path("memory"),
            r.memory_mb
                .unwrap_or(i64::from(defaults::DEFAULT_MEMORY_MB)),
        ),
        memory_max_mb: conv.narrow(path("memory_max"), r.memory_max_mb.unwrap_or(0)),
        disk_mb: 0,
        networks: networks(r.networks, &join(base, "resources"), conv),
        devices: r
            .devices
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                let dbase = join(base, &format!("resources.device[{i}]"));
                RequestedDevice {
                    name: d.name.unwrap_or_default(),
                    count: conv.narrow(join(&dbase, "count"), d.count.unwrap_or(1)),
                    constraints: constraints(d.constraints),
                    affinities: affinities(d.affinities, &dbase, conv),
                }
            })
            .collect(),
    }
}

fn networks(
    nets: Option<Vec<ApiNetwork>>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<NetworkResource> {
    let mut out = Vec::new();
    for (i, n) in nets.unwrap_or_default().into_iter().enumerate() {
        let nbase = join(base, &format!("network[{i}]"));
        conv.unsupported(
            "network",
            &nbase,
            "Device",
            str_meaningful(&n.device).as_ref(),
        );
        conv.unsupported("network", &nbase, "CIDR", str_meaningful(&n.cidr).as_ref());
        conv.unsupported("network", &nbase, "IP", str_meaningful(&n.ip).as_ref());
        conv.unsupported("network", &nbase, "CNI", n.cni.as_ref());
        let ports =
            |list: Option<Vec<ApiPort>>, keep_value: bool, conv: &mut Conversion| -> Vec<Port> {
                list.unwrap_or_default()
                    .into_iter()
                    .map(|p| {
                        let label = p.label.unwrap_or_default();
                        let pbase = join(&nbase, &format!("port {label:?}"));
                        if p.ignore_collision == Some(true) {
                            conv.unsupported(
                                "port",
                                &pbase,
                                "IgnoreCollision",
                                Some(&Value::Bool(true)),
                            );
                        }
                        // Nomad spells "map to the host port" as To = -1; Caravan as 0.
                        let to = match p.to {
                            None | Some(-1) => 0,
                            Some(t) => conv.narrow(join(&pbase, "to"), t),
                        };
                        let value = match p.value {
                            Some(v) if keep_value => conv.narrow(join(&pbase, "static"), v),
                            _ => 0,
                        };
                        Port {
                            label,
                            value,
                            to,
                            host_network: p.host_network.unwrap_or_default(),
                        }
                    })
                    .collect()
            };
        let reserved_ports = ports(n.reserved_ports, true, conv);
        let dynamic_ports = ports(n.dynamic_ports, false, conv);
        out.push(NetworkResource {
            mode: n.mode.unwrap_or_default(),
            mbits: conv.narrow(join(&nbase, "mbits"), n.mbits.unwrap_or(0)),
            reserved_ports,
            dynamic_ports,
            hostname: n.hostname.unwrap_or_default(),
            dns: super::dns::dns_to_proto(n.dns, &nbase, conv),
        });
    }
    out
}

fn ephemeral_disk(d: Option<ApiEphemeralDisk>, base: &str, conv: &mut Conversion) -> EphemeralDisk {
    let d = d.unwrap_or_default();
    let dbase = join(base, "ephemeral_disk");
    conv.unsupported(
        "ephemeral_disk",
        &dbase,
        "Sticky",
        d.sticky.map(Value::from).as_ref(),
    );
    conv.unsupported(
        "ephemeral_disk",
        &dbase,
        "Migrate",
        d.migrate.map(Value::from).as_ref(),
    );
    EphemeralDisk {
        sticky: d.sticky.unwrap_or(false),
        migrate: d.migrate.unwrap_or(false),
        size_mb: conv.narrow(
            join(base, "ephemeral_disk.size"),
            d.size_mb.unwrap_or(i64::from(defaults::DEFAULT_DISK_MB)),
        ),
    }
}

fn constraints(list: Option<Vec<ApiConstraint>>) -> Vec<Constraint> {
    list.unwrap_or_default()
        .into_iter()
        .map(|c| Constraint {
            l_target: c.l_target.unwrap_or_default(),
            r_target: c.r_target.unwrap_or_default(),
            operand: c.operand.unwrap_or_default(),
        })
        .collect()
}

fn affinities(list: Option<Vec<ApiAffinity>>, base: &str, conv: &mut Conversion) -> Vec<Affinity> {
    list.unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, a)| Affinity {
            l_target: a.l_target.unwrap_or_default(),
            r_target: a.r_target.unwrap_or_default(),
            operand: a.operand.unwrap_or_default(),
            weight: conv.narrow(
                join(base, &format!("affinity[{i}].weight")),
                a.weight.unwrap_or(i64::from(defaults::DEFAULT_WEIGHT)),
            ),
        })
        .collect()
}

fn spreads(list: Option<Vec<ApiSpread>>, base: &str, conv: &mut Conversion) -> Vec<Spread> {
    list.unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let sbase = join(base, &format!("spread[{i}]"));
            Spread {
                attribute: s.attribute.unwrap_or_default(),
                weight: conv.narrow(
                    join(&sbase, "weight"),
                    s.weight.unwrap_or(i64::from(defaults::DEFAULT_WEIGHT)),
                ),
                targets: s
                    .spread_target
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        let value = t.value.unwrap_or_default();
                        SpreadTarget {
                            percent: conv.narrow(
                                join(&sbase, &format!("target {value:?}: percent")),
                                t.percent.unwrap_or(0),
                            ),
                            value,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

fn periodic_to_proto(p: ApiPeriodic) -> PeriodicConfig {
    let from_spec = match p.spec {
        Some(OneOrMany::One(s)) if !s.is_empty() => vec![s],
        Some(OneOrMany::Many(v)) => v,
        _ => Vec::new(),
    };
    let specs = match p.specs {
        Some(v) if !v.is_empty() => v,
        _ => from_spec,
    };
    PeriodicConfig {
        enabled: p.enabled.unwrap_or(true),
        specs,
        spec_type: p
            .spec_type
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| defaults::SPEC_TYPE_CRON.to_string()),
        prohibit_overlap: p.prohibit_overlap.unwrap_or(false),
        time_zone: p
            .time_zone
            .filter(|z| !z.is_empty())
            .unwrap_or_else(|| defaults::DEFAULT_TIME_ZONE.to_string()),
    }
}

/// A JSON object as a protobuf `Struct`, the form task `config` is stored in.
pub(crate) fn json_map_to_struct(map: serde_json::Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .into_iter()
            .map(|(k, v)| (k, json_to_value(v)))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn json_to_value(v: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(json_to_value).collect(),
        }),
        Value::Object(o) => Kind::StructValue(json_map_to_struct(o)),
    };
    prost_types::Value { kind: Some(kind) }
}
