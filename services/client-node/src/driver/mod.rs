//! Task drivers, shaped after Nomad's driver plugins: a driver starts a
//! task and gets a handle; the handle waits for it, stops it with a signal
//! and a kill timeout, signals it, reads its resource usage and runs
//! commands in its context (`exec`). A driver says what it can do
//! ([`Capabilities`]) and whether it works on this node ([`Fingerprint`]),
//! and finds a task again after a client restart from the opaque, versioned
//! [`HandleState`] it wrote, which the client persists without reading.
//! Drivers are registered in one catalog ([`catalog`]): adding one touches
//! only its own module and the catalog.

pub mod catalog;
mod config;
pub mod docker;
mod exec;
pub mod exec_driver;
mod fingerprint;
mod handle_state;
mod mock;
mod proc_stat;
mod raw_exec;
pub mod supervisor;
pub mod task_user;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::TaskResourceUsage;
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::alloc_dir::TaskDirs;
use crate::log_rotate::LogLimits;
use crate::task_env::TaskEnv;

pub use catalog::{DriverContext, Drivers, PluginConfigs};
pub use config::TaskConfig;
#[cfg(test)]
pub use config::{number_value, string_value};
pub use exec::{ExecRequest, TtySize};
pub use exec_driver::ExecDriver;
pub use fingerprint::{Capabilities, Fingerprint, FsIsolation, Health};
pub use handle_state::HandleState;
pub use mock::MockDriver;
pub use proc_stat::{ProcStat, proc_stat};
pub use raw_exec::RawExecDriver;
pub use supervisor::SUPERVISOR_ARG;

/// How one run of a task ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitResult {
    /// The exit code (0 when killed by a signal).
    pub exit_code: i32,
    /// The signal that ended it, 0 if none.
    pub signal: i32,
    /// Set when the outcome is not a plain exit (e.g. unknown after a
    /// re-attach, or `OOM Killed`).
    pub err: Option<String>,
    /// The kernel's out-of-memory killer ended it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
}

impl ExitResult {
    /// Exited 0, no signal, no error.
    pub fn successful(&self) -> bool {
        self.exit_code == 0 && self.signal == 0 && self.err.is_none()
    }
}

/// Everything a driver needs to start a task.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The alloc the task belongs to.
    pub alloc_id: String,
    /// The task's name.
    pub task: String,
    /// The task's driver config, as the job wrote it.
    pub config: TaskConfig,
    /// The environment (for drivers that want one).
    pub env: Option<TaskEnv>,
    /// The task's directories (for drivers that run something).
    pub dirs: Option<TaskDirs>,
    /// How its output is kept (the task's `logs` block).
    pub logs: LogLimits,
    /// The user to run it as (the task's `user`); empty for the client's.
    pub user: String,
    /// What the alloc gives the task (drivers that enforce limits or
    /// publish ports read it); `None` for drivers that want no env.
    pub resources: Option<Arc<TaskResources>>,
    /// The node's host volumes the task mounts (its `volume_mount`s), for
    /// drivers whose [`Capabilities::mounts`] says they can.
    pub volume_mounts: Vec<VolumeMountSpec>,
    /// The alloc's network namespace (a pinned nsfs file) the task runs in;
    /// `None` for the host's network.
    pub netns: Option<std::path::PathBuf>,
    /// What the group's network gives the task beyond its namespace.
    pub group_net: GroupNetSettings,
}

/// The group network's hostname, the alloc's address in it and the group's
/// `dns` block: what drivers whose tasks have a file system of their own
/// write into the task's `/etc/hosts` and `/etc/resolv.conf` (and, for a
/// hostname, the task's UTS namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupNetSettings {
    /// The hostname of a `bridge`/`none` group's namespace, interpolated.
    pub hostname: Option<String>,
    /// The alloc's address in the group's bridge network ("" otherwise).
    pub ip: String,
    /// The group's `dns` block.
    pub dns: Option<caravan_proto::DnsConfig>,
}

/// One host volume mounted into a task (Nomad's `MountConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMountSpec {
    /// The directory on the node.
    pub host_path: std::path::PathBuf,
    /// Where the task sees it: absolute in its image or chroot.
    pub destination: String,
    /// Mounted read-only (the volume, the group's request or the mount says so).
    pub read_only: bool,
}

/// The resources and identity of a task's alloc, for drivers that enforce
/// limits, publish ports or label what they create.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskResources {
    /// The job's id.
    pub job_id: String,
    /// The job's name.
    pub job_name: String,
    /// The job's namespace.
    pub namespace: String,
    /// The task group's name.
    pub group: String,
    /// CPU in MHz.
    pub cpu_mhz: u32,
    /// Cores reserved for the task alone.
    pub cores: Vec<u32>,
    /// Memory in MB.
    pub memory_mb: u32,
    /// Memory the task may burst to, in MB; 0 for none.
    pub memory_max_mb: u32,
    /// The node's total CPU in MHz and cores (for hard CPU limits).
    pub node_cpu_mhz: u64,
    /// The node's core count.
    pub node_cores: u32,
    /// Ports of the group's network (`network { port … }`).
    pub group_ports: Vec<caravan_proto::AllocatedPort>,
    /// Ports of the task's own (legacy) networks.
    pub task_ports: Vec<caravan_proto::AllocatedPort>,
    /// The address ports are published on when they name none.
    pub node_ip: String,
}

/// A driver failed to start a task, or to act on one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DriverError {
    /// What went wrong.
    pub message: String,
    /// Whether starting again may succeed (the restart policy applies).
    pub recoverable: bool,
}

impl DriverError {
    /// An error the restart policy may retry.
    pub fn recoverable(message: impl Into<String>) -> Self {
        DriverError {
            message: message.into(),
            recoverable: true,
        }
    }

    /// An error retrying cannot fix (bad config).
    pub fn fatal(message: impl Into<String>) -> Self {
        DriverError {
            message: message.into(),
            recoverable: false,
        }
    }

    /// What a driver answers for an operation it does not have.
    pub fn unsupported(driver: &str, what: &str) -> Self {
        DriverError::fatal(format!("{what} is not supported by the {driver} driver"))
    }
}

/// A running task (Nomad's task handle plus the driver calls that act on
/// one task: WaitTask, StopTask, SignalTask, TaskStats, ExecTask).
#[async_trait::async_trait]
pub trait TaskHandle: Send + Sync + Debug {
    /// What to persist to recover this handle.
    fn state(&self) -> HandleState;
    /// Waits until the task exits; may be called again and from several places.
    async fn wait(&self) -> ExitResult;
    /// Sends `signal`, waits up to `timeout`, then kills; returns how it ended.
    async fn stop(&self, signal: Signal, timeout: Duration) -> ExitResult;
    /// Until when the run may go unwatched: `None` when someone must wait
    /// on it all along (a process), `Some(None)` when nothing happens to it
    /// until it is stopped, `Some(Some(at))` when it ends by itself at `at`.
    fn unwatched_until(&self) -> Option<Option<tokio::time::Instant>> {
        None
    }
    /// The address of the task's own network (Nomad's driver network), when
    /// its driver gives it one: what `address_mode = "driver"` advertises.
    fn driver_ip(&self) -> Option<String> {
        None
    }
    /// Sends `signal` to the task (`alloc signal`).
    async fn signal(&self, signal: Signal) -> Result<(), DriverError>;
    /// The task's resource usage now; `cpu_total_mhz` is the node's, to
    /// express CPU in MHz.
    async fn stats(&self, cpu_total_mhz: u64) -> Result<TaskResourceUsage, DriverError>;
    /// Runs a command in the task's context with the request's streams;
    /// returns its exit code.
    async fn exec(&self, request: ExecRequest) -> Result<i32, DriverError>;
}

/// A task driver (Nomad's DriverPlugin).
#[async_trait::async_trait]
pub trait Driver: Send + Sync + Debug {
    /// The driver's name as jobs spell it.
    fn name(&self) -> &'static str;
    /// What the driver can do.
    fn capabilities(&self) -> Capabilities;
    /// Whether the driver works on this node, and the attributes it adds.
    async fn fingerprint(&self) -> Fingerprint;
    /// How often the fingerprint may change and is taken again; `None` for
    /// a driver whose fingerprint never changes.
    fn fingerprint_period(&self) -> Option<Duration> {
        None
    }
    /// Whether the task runner should build the task's environment and dirs.
    fn wants_env(&self) -> bool;
    /// Starts the task.
    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError>;
    /// Finds the task `spec` describes again from the state its handle
    /// persisted; `None` when it is gone.
    async fn recover(&self, spec: &TaskSpec, state: &HandleState) -> Option<Arc<dyn TaskHandle>>;
    /// A run of the task this driver started whose handle the client may
    /// never have persisted (it died in between): its handle, so the run is
    /// adopted instead of started a second time. Drivers whose tasks don't
    /// outlive the client have none.
    async fn adopt(&self, _spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        None
    }
    /// The client has taken the run's end into account: it is not adopted
    /// again, and what the run left behind (a container) may go.
    async fn release(&self, _spec: &TaskSpec) {}
    /// Removes what this driver left behind for allocs no longer on the
    /// node: `live` tells whether an alloc id still has a runner.
    async fn remove_orphans(&self, _live: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync)) {}

    /// Starts the container that holds `alloc_id`'s network namespace (a
    /// `bridge`/`none` group with tasks of this driver) and returns the pid
    /// whose `/proc/<pid>/ns/net` is that namespace. Only drivers whose
    /// tasks join another container's namespace have one; `hostname` is the
    /// namespace's (the group network's `hostname`).
    async fn start_infra(
        &self,
        _alloc_id: &str,
        _hostname: Option<&str>,
    ) -> Result<u32, DriverError> {
        Err(DriverError::unsupported(
            self.name(),
            "a network namespace holder",
        ))
    }

    /// Removes the container [`Driver::start_infra`] started for
    /// `alloc_id`; one that is gone already is fine.
    async fn remove_infra(&self, _alloc_id: &str) {}
}

/// Parses a kill signal such as `SIGTERM`, `TERM` or `SIGINT`; empty means SIGTERM.
pub fn parse_signal(name: &str) -> Result<Signal, String> {
    let name = name.trim();
    if name.is_empty() {
        return Ok(Signal::SIGTERM);
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    full.parse::<Signal>()
        .map_err(|_| format!("unknown signal {name:?}"))
}

/// Parses the signal a user sends to a task (`alloc signal`): as
/// [`parse_signal`], but empty means SIGKILL, as Nomad, and a bad name is an
/// "invalid signal".
pub fn parse_signal_name(name: &str) -> Result<Signal, String> {
    if name.trim().is_empty() {
        return Ok(Signal::SIGKILL);
    }
    parse_signal(name).map_err(|_| format!("invalid signal: {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_signals_default_to_kill_and_name_bad_ones() {
        assert_eq!(parse_signal_name(""), Ok(Signal::SIGKILL));
        assert_eq!(parse_signal_name("usr1"), Ok(Signal::SIGUSR1));
        let e = parse_signal_name("SIGNOPE").unwrap_err();
        assert!(e.contains("invalid signal"), "{e}");
    }

    #[test]
    fn signals_parse_with_or_without_prefix() {
        assert_eq!(parse_signal(""), Ok(Signal::SIGTERM));
        assert_eq!(parse_signal("SIGINT"), Ok(Signal::SIGINT));
        assert_eq!(parse_signal("hup"), Ok(Signal::SIGHUP));
        assert!(parse_signal("SIGNOPE").is_err());
    }

    #[test]
    fn exit_results_know_success() {
        assert!(ExitResult::default().successful());
        assert!(
            !ExitResult {
                signal: 15,
                ..Default::default()
            }
            .successful()
        );
        assert!(
            !ExitResult {
                err: Some("unknown".into()),
                ..Default::default()
            }
            .successful()
        );
    }
}
