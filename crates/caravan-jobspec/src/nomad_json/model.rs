//! Mirror structs of Nomad's Go `api` job types, field for field as its JSON spells them.
//!
//! Every field is optional: Nomad's canonicalization depends on whether a field was sent
//! at all (an explicit `Count: 0` is legal, a missing one means 1). Fields Nomad has and
//! Caravan does not model yet are kept as raw JSON so that a non-empty value can be
//! reported as a warning instead of vanishing silently.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Either one string or a list of them (Nomad's periodic `Spec` is typed `interface{}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// A single string.
    One(String),
    /// A list of strings.
    Many(Vec<String>),
}

/// A register request body: `{"Job": {...}, ...}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiJobRequest {
    /// The job.
    #[serde(rename = "Job", skip_serializing_if = "Option::is_none")]
    pub job: Option<ApiJob>,
    /// Register request fields the gateway reads itself; accepted here so they are not
    /// reported as unknown.
    #[serde(rename = "EnforceIndex", skip_serializing_if = "Option::is_none")]
    pub enforce_index: Option<bool>,
    /// See `enforce_index`.
    #[serde(rename = "JobModifyIndex", skip_serializing_if = "Option::is_none")]
    pub job_modify_index: Option<u64>,
    /// See `enforce_index`.
    #[serde(rename = "PolicyOverride", skip_serializing_if = "Option::is_none")]
    pub policy_override: Option<bool>,
    /// See `enforce_index`.
    #[serde(rename = "PreserveCounts", skip_serializing_if = "Option::is_none")]
    pub preserve_counts: Option<bool>,
    /// See `enforce_index`.
    #[serde(rename = "EvalPriority", skip_serializing_if = "Option::is_none")]
    pub eval_priority: Option<i64>,
    /// See `enforce_index`.
    #[serde(rename = "Diff", skip_serializing_if = "Option::is_none")]
    pub diff: Option<bool>,
    /// See `enforce_index`.
    #[serde(rename = "Submission", skip_serializing_if = "Option::is_none")]
    pub submission: Option<Value>,
    /// See `enforce_index`.
    #[serde(rename = "Region", skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// See `enforce_index`.
    #[serde(rename = "Namespace", skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// See `enforce_index`.
    #[serde(rename = "SecretID", skip_serializing_if = "Option::is_none")]
    pub secret_id: Option<String>,
}

/// Nomad's `api.Job`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiJob {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(rename = "ID", skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_at_once: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datacenters: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<ApiConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinities: Option<Vec<ApiAffinity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_groups: Option<Vec<ApiTaskGroup>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<ApiUpdateStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiregion: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spreads: Option<Vec<ApiSpread>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic: Option<ApiPeriodic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameterized_job: Option<ApiParameterized>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reschedule: Option<ApiReschedulePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrate: Option<ApiMigrateStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consul_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consul_namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault_namespace: Option<String>,
    #[serde(rename = "NomadTokenID", skip_serializing_if = "Option::is_none")]
    pub nomad_token_id: Option<String>,
    #[serde(rename = "UI", skip_serializing_if = "Option::is_none")]
    pub ui: Option<ApiJobUi>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_tag: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<bool>,
    #[serde(rename = "ParentID", skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatched: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_idempotency_token: Option<String>,
    /// Base64, as Go encodes `[]byte`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_time: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modify_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_modify_index: Option<u64>,
}

/// Nomad's `api.Constraint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiConstraint {
    #[serde(rename = "LTarget", skip_serializing_if = "Option::is_none")]
    pub l_target: Option<String>,
    #[serde(rename = "RTarget", skip_serializing_if = "Option::is_none")]
    pub r_target: Option<String>,
    #[serde(rename = "Operand", skip_serializing_if = "Option::is_none")]
    pub operand: Option<String>,
}

/// Nomad's `api.Affinity`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiAffinity {
    #[serde(rename = "LTarget", skip_serializing_if = "Option::is_none")]
    pub l_target: Option<String>,
    #[serde(rename = "RTarget", skip_serializing_if = "Option::is_none")]
    pub r_target: Option<String>,
    #[serde(rename = "Operand", skip_serializing_if = "Option::is_none")]
    pub operand: Option<String>,
    #[serde(rename = "Weight", skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
}

/// Nomad's `api.Spread`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiSpread {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread_target: Option<Vec<ApiSpreadTarget>>,
}

/// Nomad's `api.SpreadTarget`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiSpreadTarget {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<i64>,
}

/// Nomad's `api.UpdateStrategy`; durations in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiUpdateStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagger: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_healthy_time: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy_deadline: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_revert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_promote: Option<bool>,
}

/// Nomad's `api.PeriodicConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiPeriodic {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<OneOrMany>,
    /// Newer servers list every cron here as well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub specs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prohibit_overlap: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// Nomad's `api.ParameterizedJobConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiParameterized {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_required: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_optional: Option<Vec<String>>,
}

/// Nomad's `api.ReschedulePolicy`; durations in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiReschedulePolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unlimited: Option<bool>,
}

/// Nomad's `api.JobUIConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiJobUi {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<ApiJobUiLink>>,
}

/// Nomad's `api.JobUILink`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiJobUiLink {
    #[serde(rename = "Label", skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(rename = "URL", skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Nomad's `api.MigrateStrategy`; durations in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiMigrateStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_healthy_time: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy_deadline: Option<i64>,
}

/// Nomad's `api.RestartPolicy`; durations in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiRestartPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render_templates: Option<bool>,
    /// Caravan's extension: restart a batch task that exited successfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_success: Option<bool>,
}

/// Nomad's `api.EphemeralDisk`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiEphemeralDisk {
    #[serde(rename = "Sticky", skip_serializing_if = "Option::is_none")]
    pub sticky: Option<bool>,
    #[serde(rename = "Migrate", skip_serializing_if = "Option::is_none")]
    pub migrate: Option<bool>,
    #[serde(rename = "SizeMB", skip_serializing_if = "Option::is_none")]
    pub size_mb: Option<i64>,
}

/// Nomad's `api.NetworkResource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiNetwork {
    #[serde(rename = "Mode", skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(rename = "MBits", skip_serializing_if = "Option::is_none")]
    pub mbits: Option<i64>,
    #[serde(rename = "ReservedPorts", skip_serializing_if = "Option::is_none")]
    pub reserved_ports: Option<Vec<ApiPort>>,
    #[serde(rename = "DynamicPorts", skip_serializing_if = "Option::is_none")]
    pub dynamic_ports: Option<Vec<ApiPort>>,
    #[serde(rename = "Device", skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(rename = "CIDR", skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(rename = "IP", skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(rename = "Hostname", skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(rename = "DNS", skip_serializing_if = "Option::is_none")]
    pub dns: Option<Value>,
    #[serde(rename = "CNI", skip_serializing_if = "Option::is_none")]
    pub cni: Option<Value>,
}

/// Nomad's `api.Port`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiPort {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_collision: Option<bool>,
}

/// Nomad's `api.RequestedDevice`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiRequestedDevice {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<ApiConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinities: Option<Vec<ApiAffinity>>,
}

/// Nomad's `api.Resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiResources {
    #[serde(rename = "CPU", skip_serializing_if = "Option::is_none")]
    pub cpu: Option<i64>,
    #[serde(rename = "Cores", skip_serializing_if = "Option::is_none")]
    pub cores: Option<i64>,
    #[serde(rename = "MemoryMB", skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<i64>,
    #[serde(rename = "MemoryMaxMB", skip_serializing_if = "Option::is_none")]
    pub memory_max_mb: Option<i64>,
    #[serde(rename = "DiskMB", skip_serializing_if = "Option::is_none")]
    pub disk_mb: Option<i64>,
    #[serde(rename = "Networks", skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<ApiNetwork>>,
    #[serde(rename = "Devices", skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<ApiRequestedDevice>>,
    #[serde(rename = "IOPS", skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(rename = "SecretsMB", skip_serializing_if = "Option::is_none")]
    pub secrets_mb: Option<i64>,
    #[serde(rename = "NUMA", skip_serializing_if = "Option::is_none")]
    pub numa: Option<Value>,
}

/// Nomad's `api.TaskLifecycle`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiLifecycle {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidecar: Option<bool>,
}

/// Nomad's `api.DispatchPayloadConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiDispatchPayload {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// Nomad's `api.LogConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiLogConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_files: Option<i64>,
    #[serde(rename = "MaxFileSizeMB", skip_serializing_if = "Option::is_none")]
    pub max_file_size_mb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Deprecated by Nomad in favour of `Disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Nomad's `api.DisconnectStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiDisconnect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_on_client_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<String>,
}

/// Nomad's `api.TaskGroup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiTaskGroup {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<ApiConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinities: Option<Vec<ApiAffinity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<ApiTask>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spreads: Option<Vec<ApiSpread>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<ApiRestartPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnect: Option<ApiDisconnect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reschedule_policy: Option<ApiReschedulePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral_disk: Option<ApiEphemeralDisk>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<ApiUpdateStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrate: Option<ApiMigrateStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<ApiNetwork>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_after_client_disconnect: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_client_disconnect: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consul: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prevent_reschedule_on_lost: Option<bool>,
}

/// Nomad's `api.Task`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
pub struct ApiTask {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<ApiLifecycle>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<ApiConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinities: Option<Vec<ApiAffinity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ApiResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<ApiRestartPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_timeout: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_config: Option<ApiLogConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vault: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consul: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_payload: Option<ApiDispatchPayload>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Value>,
    #[serde(rename = "CSIPluginConfig", skip_serializing_if = "Option::is_none")]
    pub csi_plugin_config: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_delay: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_policies: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identities: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Value>,
}
