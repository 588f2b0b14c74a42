//! Nomad's default values, shared by the parsers' canonicalization and `canonicalize`.

pub use caravan_model::{DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY};
use caravan_proto::{
    EphemeralDisk, JobType, MigrateStrategy, ReschedulePolicy, RestartPolicy, UpdateStrategy,
};

const SECOND: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;

/// Namespace of a job that names none.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Region every Caravan job lives in.
pub const DEFAULT_REGION: &str = "global";
/// The scaling policy type of a task group (Nomad's only open-source one).
pub const SCALING_HORIZONTAL: &str = "horizontal";

/// The id of a task group's scaling policy: a UUID derived from what the
/// policy targets, so it stays the same across versions of the job (as a
/// Nomad policy keeps its id while its target exists).
pub fn scaling_policy_id(namespace: &str, job_id: &str, group: &str) -> String {
    // Lengths first, so no two targets share one name.
    let name = format!(
        "caravan/scaling/{}:{namespace}/{}:{job_id}/{}:{group}",
        namespace.len(),
        job_id.len(),
        group.len()
    );
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string()
}

/// Node pool of a job that names none.
pub const DEFAULT_NODE_POOL: &str = "default";
/// Datacenter glob of a job that names none.
pub const DEFAULT_DATACENTER: &str = "*";
/// Largest count a task group may ask for.
pub const MAX_COUNT: i32 = 50_000;
/// CPU (MHz) of a task that asks for neither cpu nor cores.
pub const DEFAULT_CPU_MHZ: u32 = 100;
/// Memory (MB) of a task that asks for none.
pub const DEFAULT_MEMORY_MB: u32 = 300;
/// Ephemeral disk (MB) of a group that asks for none.
pub const DEFAULT_DISK_MB: u32 = 300;
/// Time between the stop signal and SIGKILL when a task sets none.
pub const DEFAULT_KILL_TIMEOUT_NS: i64 = 5 * SECOND;
/// Log files kept per stream of a task that sets none.
pub const DEFAULT_LOG_MAX_FILES: i32 = 10;
/// Size (MB) at which a task's log file is rotated when it sets none.
pub const DEFAULT_LOG_MAX_FILE_SIZE_MB: i32 = 10;

/// The `logs` block of a task that has none.
pub fn default_log_config() -> caravan_proto::LogConfig {
    caravan_proto::LogConfig {
        max_files: DEFAULT_LOG_MAX_FILES,
        max_file_size_mb: DEFAULT_LOG_MAX_FILE_SIZE_MB,
        disabled: false,
    }
}

/// Weight of an affinity or spread that sets none.
pub const DEFAULT_WEIGHT: i32 = 50;
/// Payload requirement of a parameterized job that sets none.
pub const DEFAULT_PAYLOAD: &str = "optional";
/// Time zone of a periodic job that sets none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// The only periodic spec type.
pub const SPEC_TYPE_CRON: &str = "cron";

/// The job type, treating an unset type as `service` as Nomad does.
pub fn effective_type(t: JobType) -> JobType {
    if t == JobType::Unspecified {
        JobType::Service
    } else {
        t
    }
}

/// The update strategy a service job gets when it sets none.
pub fn default_update() -> UpdateStrategy {
    UpdateStrategy {
        stagger_ns: 30 * SECOND,
        max_parallel: 1,
        health_check: "checks".to_string(),
        min_healthy_time_ns: 10 * SECOND,
        healthy_deadline_ns: 5 * MINUTE,
        progress_deadline_ns: 10 * MINUTE,
        auto_revert: false,
        auto_promote: false,
        canary: 0,
    }
}

/// The migrate strategy a service group gets when it sets none.
pub fn default_migrate() -> MigrateStrategy {
    MigrateStrategy {
        max_parallel: 1,
        health_check: "checks".to_string(),
        min_healthy_time_ns: 10 * SECOND,
        healthy_deadline_ns: 5 * MINUTE,
    }
}

/// The restart policy of a group of a job of this type that sets none.
///
/// System jobs restart like services and sysbatch jobs like batch jobs, as in Nomad.
pub fn default_restart(t: JobType) -> RestartPolicy {
    match effective_type(t) {
        JobType::Batch | JobType::Sysbatch => RestartPolicy {
            attempts: 3,
            interval_ns: 24 * HOUR,
            delay_ns: 15 * SECOND,
            mode: "fail".to_string(),
            on_success: false,
        },
        _ => RestartPolicy {
            attempts: 2,
            interval_ns: 30 * MINUTE,
            delay_ns: 15 * SECOND,
            mode: "fail".to_string(),
            on_success: false,
        },
    }
}

/// The reschedule policy of a group of a job of this type; none for system and sysbatch.
pub fn default_reschedule(t: JobType) -> Option<ReschedulePolicy> {
    match effective_type(t) {
        JobType::Batch => Some(ReschedulePolicy {
            attempts: 1,
            interval_ns: 24 * HOUR,
            delay_ns: 5 * SECOND,
            delay_function: "constant".to_string(),
            max_delay_ns: 0,
            unlimited: false,
        }),
        JobType::System | JobType::Sysbatch => None,
        _ => Some(ReschedulePolicy {
            attempts: 0,
            interval_ns: 0,
            delay_ns: 30 * SECOND,
            delay_function: "exponential".to_string(),
            max_delay_ns: HOUR,
            unlimited: true,
        }),
    }
}

/// The ephemeral disk of a group that asks for none.
pub fn default_ephemeral_disk() -> EphemeralDisk {
    EphemeralDisk {
        sticky: false,
        migrate: false,
        size_mb: DEFAULT_DISK_MB,
    }
}
