//! Task drivers: start a task and get a handle; wait for it; stop it with a
//! signal and a kill timeout; recover the handle after a client restart.

mod config;
mod mock;
mod proc_stat;
mod raw_exec;
pub mod supervisor;
pub mod task_user;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::DriverInfo;
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::alloc_dir::TaskDirs;
use crate::log_rotate::LogLimits;
use crate::task_env::TaskEnv;

pub use config::TaskConfig;
#[cfg(test)]
pub use config::{number_value, string_value};
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
    /// Set when the outcome is not a plain exit (e.g. unknown after a re-attach).
    pub err: Option<String>,
}

impl ExitResult {
    /// Exited 0, no signal, no error.
    pub fn successful(&self) -> bool {
        self.exit_code == 0 && self.signal == 0 && self.err.is_none()
    }
}

/// What a driver persists to find a running task again after a client restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "driver", rename_all = "snake_case")]
pub enum HandleState {
    /// A child process, identified by pid and kernel start time.
    RawExec {
        /// Process id (also the process group id).
        pid: i32,
        /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
        start_ticks: u64,
        /// Wall-clock start.
        started_at_unix_ns: i64,
        /// The supervisor that waits for the task and records its exit;
        /// absent in records of tasks started without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        supervisor: Option<SupervisorState>,
    },
    /// A simulated task.
    Mock {
        /// Wall-clock start.
        started_at_unix_ns: i64,
        /// How long it runs; `None` is forever.
        run_for_ns: Option<i64>,
        /// Code it exits with.
        exit_code: i32,
        /// Time it takes to honour a stop signal.
        kill_after_ns: i64,
    },
}

/// The supervisor process of a `raw_exec` task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorState {
    /// Its pid.
    pub pid: i32,
    /// Its start time in clock ticks since boot.
    pub start_ticks: u64,
    /// Where it records the task's exit.
    pub exit_record: std::path::PathBuf,
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
}

/// A driver failed to start a task.
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
}

/// A running task.
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
}

/// A task driver.
#[async_trait::async_trait]
pub trait Driver: Send + Sync + Debug {
    /// The driver's name as jobs spell it.
    fn name(&self) -> &'static str;
    /// Fingerprint: detected and healthy.
    fn info(&self) -> DriverInfo;
    /// Whether the task runner should build the task's environment and dirs.
    fn wants_env(&self) -> bool;
    /// Starts the task.
    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError>;
    /// Finds a task again from its persisted state; `None` when it is gone.
    fn recover(&self, state: &HandleState) -> Option<Arc<dyn TaskHandle>>;
    /// A run of the task this driver started whose handle the client may
    /// never have persisted (it died in between): its handle, so the run is
    /// adopted instead of started a second time. Drivers whose tasks don't
    /// outlive the client have none.
    fn adopt(&self, _spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        None
    }
    /// The client has taken the run's end into account: it is not adopted
    /// again.
    fn release(&self, _spec: &TaskSpec) {}
}

/// The drivers of a node.
#[derive(Debug, Clone, Default)]
pub struct Drivers {
    by_name: BTreeMap<String, Arc<dyn Driver>>,
    /// Runs every task with this driver whatever its job says (simulated nodes).
    everything_as: Option<Arc<dyn Driver>>,
}

impl Drivers {
    /// The drivers named in the configuration; `supervisor` is the binary
    /// that supervises `raw_exec` tasks (the client node's own).
    pub fn from_names(names: &[String], supervisor: &Path) -> Drivers {
        let mut d = Drivers::default();
        for n in names {
            match n.as_str() {
                "raw_exec" => d.add(Arc::new(RawExecDriver::new(supervisor.to_path_buf()))),
                "mock" => d.add(Arc::new(MockDriver::new())),
                _ => {}
            }
        }
        d
    }

    /// The drivers of a simulated node: every task runs as a mock that runs
    /// until stopped unless its config sets `run_for`.
    pub fn simulated() -> Drivers {
        let mock: Arc<dyn Driver> = Arc::new(MockDriver::simulated());
        let mut by_name = BTreeMap::new();
        by_name.insert("mock".to_string(), mock.clone());
        by_name.insert("raw_exec".to_string(), mock.clone());
        Drivers {
            by_name,
            everything_as: Some(mock),
        }
    }

    /// Adds (or replaces) a driver.
    pub fn add(&mut self, driver: Arc<dyn Driver>) {
        self.by_name.insert(driver.name().to_string(), driver);
    }

    /// The driver that runs tasks asking for `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Driver>> {
        self.everything_as
            .clone()
            .or_else(|| self.by_name.get(name).cloned())
    }

    /// The driver that recovers `state`.
    pub fn for_state(&self, state: &HandleState) -> Option<Arc<dyn Driver>> {
        let name = match state {
            HandleState::RawExec { .. } => "raw_exec",
            HandleState::Mock { .. } => "mock",
        };
        self.by_name.get(name).cloned()
    }

    /// The drivers map a node registers with.
    pub fn infos(&self) -> BTreeMap<String, DriverInfo> {
        self.by_name
            .iter()
            .map(|(n, d)| (n.clone(), d.info()))
            .collect()
    }
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
    fn simulated_drivers_run_everything_as_mock() {
        let d = Drivers::simulated();
        assert_eq!(d.get("docker").unwrap().name(), "mock");
        assert_eq!(d.get("raw_exec").unwrap().name(), "mock");
        let real = Drivers::from_names(&["raw_exec".into()], Path::new("/bin/true"));
        assert!(real.get("mock").is_none());
        assert_eq!(real.get("raw_exec").unwrap().name(), "raw_exec");
        assert!(real.infos()["raw_exec"].healthy);
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
