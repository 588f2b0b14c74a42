//! `exec`: a task runs in mount, PID and IPC namespaces of its own, with its
//! task dir as its root (the host's `chroot_env` paths bound read-only in
//! it), in a cgroup that enforces its `cpu`, `memory`, `memory_max` and
//! `cores`, as its `user` (`nobody` unless it names one), with the default
//! capabilities less its `cap_drop` plus its `cap_add`.
//!
//! It runs under the same supervisor as `raw_exec` (logs, exit records,
//! re-attaching after a client restart), which runs the client binary's
//! isolate step ([`isolate`]) as the task's command; `alloc exec` enters the
//! running task's namespaces the same way. The driver works only
//! where the client is root and finds a cgroup hierarchy with the cpu and
//! memory controllers it may write; elsewhere its fingerprint says why it
//! is not detected.

mod caps;
mod cgroup;
mod config;
mod handle;
pub mod isolate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::unistd::Uid;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

use super::task_user::{self, TaskUser};
use super::{
    Capabilities, Driver, DriverError, Fingerprint, FsIsolation, HandleState, Health,
    RawExecDriver, TaskConfig, TaskHandle, TaskSpec,
};
use crate::network::etc_files;
use caps::CapSet;
use cgroup::{Hierarchy, Limits};
pub use config::ExecConfig;
use handle::{ExecContext, ExecHandle};
use isolate::{Entry, ISOLATE_ARG, IsolationSpec, PROBE_ARG, TaskStart};

/// The driver's name.
pub const NAME: &str = "exec";
/// The format of the handle state: the supervised run's state as JSON.
const STATE_VERSION: u32 = 1;
/// The user a task runs as when it names none.
const DEFAULT_USER: &str = "nobody";

/// The host paths bound into every task's root, where they exist (the
/// client's default `chroot_env`).
const CHROOT_ENV: [&str; 9] = [
    "/bin",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/run/resolvconf",
    "/sbin",
    "/usr",
    "/run/systemd/resolve",
];

/// Runs tasks isolated in namespaces, a chroot and a cgroup.
#[derive(Debug)]
pub struct ExecDriver {
    /// The client-node binary: supervisor and isolate step.
    supervisor: PathBuf,
    /// Runs the supervisor, as for `raw_exec`.
    inner: RawExecDriver,
    /// This host's cgroups, or why there are none to use.
    hierarchy: Result<Hierarchy, String>,
    /// The capabilities a task may have.
    allow: CapSet,
    /// Its client configuration.
    config: ExecConfig,
}

impl ExecDriver {
    /// A driver whose tasks are supervised by `supervisor` (the client-node
    /// binary), configured by `config` (checked when the client's
    /// configuration was loaded).
    pub fn new(supervisor: PathBuf, config: &ExecConfig) -> Self {
        ExecDriver {
            inner: RawExecDriver::new(supervisor.clone()),
            supervisor,
            hierarchy: Hierarchy::detect(),
            allow: config.allowed().unwrap_or_default(),
            config: config.clone(),
        }
    }

    fn hierarchy(&self) -> Result<&Hierarchy, DriverError> {
        self.hierarchy
            .as_ref()
            .map_err(|why| DriverError::fatal(format!("exec driver: {why}")))
    }

    /// Where the isolation of `spec`'s task is written, beside its records.
    fn isolation_file(spec: &TaskSpec) -> Option<PathBuf> {
        let dirs = spec.dirs.as_ref()?;
        Some(
            dirs.exit_record
                .with_file_name(format!(".{}.isolation.json", spec.task)),
        )
    }

    /// The supervised run's spec: the isolate step is its command, with the
    /// task's environment; the credentials are the isolate step's to take.
    fn inner_spec(&self, spec: &TaskSpec) -> TaskSpec {
        let text = |s: &str| Value {
            kind: Some(Kind::StringValue(s.to_string())),
        };
        let file = Self::isolation_file(spec).unwrap_or_default();
        let args = [ISOLATE_ARG.to_string(), file.display().to_string()];
        let config = Struct {
            fields: [
                (
                    "command".to_string(),
                    text(&self.supervisor.display().to_string()),
                ),
                (
                    "args".to_string(),
                    Value {
                        kind: Some(Kind::ListValue(ListValue {
                            values: args.iter().map(|a| text(a)).collect(),
                        })),
                    },
                ),
            ]
            .into_iter()
            .collect(),
        };
        TaskSpec {
            config: TaskConfig(config),
            user: String::new(),
            ..spec.clone()
        }
    }

    fn node_cores(spec: &TaskSpec) -> u64 {
        spec.resources
            .as_ref()
            .map(|r| u64::from(r.node_cores))
            .filter(|c| *c > 0)
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get() as u64)
                    .unwrap_or(1)
            })
    }

    fn wrap(&self, spec: &TaskSpec, inner: Arc<dyn TaskHandle>) -> Option<Arc<dyn TaskHandle>> {
        let group = self
            .hierarchy
            .as_ref()
            .ok()?
            .task_group(&spec.alloc_id, &spec.task);
        Some(Arc::new(ExecHandle::new(
            inner,
            group,
            Self::node_cores(spec),
            self.exec_context(spec),
        )))
    }

    /// What `alloc exec` needs of the task: its isolation as written at its
    /// start, and its environment.
    fn exec_context(&self, spec: &TaskSpec) -> Option<Arc<ExecContext>> {
        let file = Self::isolation_file(spec)?;
        let isolation: IsolationSpec = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
        Some(Arc::new(ExecContext {
            binary: self.supervisor.clone(),
            entry: Entry {
                cgroup_procs: isolation.cgroup_procs,
                task: isolation.task,
            },
            env: spec.env.as_ref()?.process_env(),
        }))
    }

    /// Whether this host lets the client make the namespaces of a task.
    async fn namespaces_work(&self) -> Result<(), String> {
        let out = tokio::process::Command::new(&self.supervisor)
            .args([ISOLATE_ARG, PROBE_ARG])
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", self.supervisor.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "cannot create mount, PID and IPC namespaces: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The isolation of `spec`'s task: its options read and checked.
    fn isolation(&self, spec: &TaskSpec, user: &TaskUser) -> Result<IsolationSpec, DriverError> {
        let (Some(env), Some(dirs)) = (spec.env.as_ref(), spec.dirs.as_ref()) else {
            return Err(DriverError::fatal("exec needs the task's env and dirs"));
        };
        let c = &spec.config;
        let command = c
            .string("command")?
            .map(|s| env.interpolate(&s))
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| DriverError::fatal("config.command: required"))?;
        let args = c
            .strings("args")?
            .iter()
            .map(|a| env.interpolate(a))
            .collect();
        let mode = |key: &str, default: &str| -> Result<bool, DriverError> {
            let asked = c.string(key)?.filter(|m| !m.trim().is_empty());
            config::private_mode(asked.as_deref().unwrap_or(default))
                .map_err(|e| DriverError::fatal(format!("config.{key}: {e}")))
        };
        let caps_of = |key: &str| -> Result<CapSet, DriverError> {
            CapSet::parse(&c.strings(key)?)
                .map_err(|e| DriverError::fatal(format!("config.{key}: {e}")))
        };
        let caps = caps::task_set(self.allow, caps_of("cap_add")?, caps_of("cap_drop")?)
            .map_err(|e| DriverError::fatal(format!("config.cap_add: {e}")))?;
        let work_dir = match c.string("work_dir")?.map(|w| env.interpolate(&w)) {
            Some(w) if !w.trim().is_empty() => Path::new("/").join(w),
            _ => PathBuf::from("/"),
        };
        let group = self.hierarchy()?.task_group(&spec.alloc_id, &spec.task);
        Ok(IsolationSpec {
            root: dirs.task_dir.clone(),
            alloc_dir: dirs.alloc_dir.clone(),
            chroot_env: CHROOT_ENV
                .iter()
                .map(|p| (PathBuf::from(p), PathBuf::from(p)))
                .collect(),
            cgroup_procs: group.procs_files(),
            pid_private: mode("pid_mode", &self.config.default_pid_mode)?,
            ipc_private: mode("ipc_mode", &self.config.default_ipc_mode)?,
            pivot_root: !self.config.no_pivot_root,
            task: TaskStart {
                caps: caps.0,
                uid: user.uid,
                gid: user.gid,
                groups: if user.groups.is_empty() {
                    vec![user.gid]
                } else {
                    user.groups.clone()
                },
                work_dir,
                command,
                args,
                defaults: vec![
                    ("HOME".into(), user.home.display().to_string()),
                    ("USER".into(), user.name.clone()),
                ],
            },
            volumes: spec
                .volume_mounts
                .iter()
                .map(|m| {
                    isolate::chroot_target(&m.destination)
                        .map(|target| (m.host_path.clone(), target, !m.read_only))
                        .map_err(|why| {
                            DriverError::fatal(format!("volume_mount {:?}: {why}", m.destination))
                        })
                })
                .collect::<Result<_, _>>()?,
            hostname: spec.group_net.hostname.clone(),
        })
        .and_then(|mut iso| {
            iso.volumes.extend(etc_binds(spec, &dirs.task_dir)?);
            Ok(iso)
        })
    }
}

/// The group network's files bound over the task's own (which its chroot
/// takes from the node): the resolv.conf of the group's `dns` block, and a
/// hosts file naming the alloc under the group's hostname.
fn etc_binds(
    spec: &TaskSpec,
    task_dir: &Path,
) -> Result<Vec<(PathBuf, PathBuf, bool)>, DriverError> {
    let io = |what: &str, e: std::io::Error| {
        DriverError::recoverable(format!("failed to write the task's {what}: {e}"))
    };
    let mut out = Vec::new();
    if let Some(dns) = &spec.group_net.dns {
        let path = etc_files::write_resolv_conf(task_dir, dns).map_err(|e| io("resolv.conf", e))?;
        out.push((path, PathBuf::from("/etc/resolv.conf"), false));
    }
    if let Some(name) = &spec.group_net.hostname {
        let text = etc_files::hosts(&spec.group_net.ip, name, &[]).map_err(DriverError::fatal)?;
        let path = etc_files::write(task_dir, "hosts", &text).map_err(|e| io("hosts file", e))?;
        out.push((path, PathBuf::from("/etc/hosts"), true));
    }
    Ok(out)
}

#[async_trait::async_trait]
impl Driver for ExecDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: true,
            fs_isolation: FsIsolation::Chroot,
            network_isolation: false,
            mounts: true,
        }
    }

    async fn fingerprint(&self) -> Fingerprint {
        if !Uid::effective().is_root() {
            return Fingerprint::failed(
                Health::Undetected,
                "exec driver must run as root: the client is not root, so it cannot create namespaces and cgroups",
            );
        }
        let hierarchy = match &self.hierarchy {
            Ok(h) => h.clone(),
            Err(why) => return Fingerprint::failed(Health::Undetected, why.clone()),
        };
        let made = {
            let h = hierarchy.clone();
            tokio::task::spawn_blocking(move || h.ensure_parent())
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
        };
        if let Err(why) = made {
            return Fingerprint::failed(Health::Undetected, why);
        }
        if let Err(why) = self.namespaces_work().await {
            return Fingerprint::failed(Health::Undetected, why);
        }
        Fingerprint::healthy(
            [
                ("driver.exec".to_string(), "1".to_string()),
                (
                    "driver.exec.cgroup".to_string(),
                    hierarchy.version().to_string(),
                ),
            ]
            .into_iter()
            .collect(),
        )
    }

    fn wants_env(&self) -> bool {
        true
    }

    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
        let hierarchy = self.hierarchy()?.clone();
        let Some(dirs) = spec.dirs.clone() else {
            return Err(DriverError::fatal("exec needs the task's dirs"));
        };
        let name = if spec.user.is_empty() {
            DEFAULT_USER
        } else {
            &spec.user
        };
        let user = task_user::resolve(name)?
            .ok_or_else(|| DriverError::fatal(format!("user {name:?} not found on this node")))?;
        let isolation = self.isolation(&spec, &user)?;
        if user.switch {
            task_user::hand_over(
                &user,
                &[
                    &dirs.task_dir,
                    &dirs.local_dir,
                    &dirs.secrets_dir,
                    &dirs.task_dir.join("tmp"),
                ],
            )?;
            task_user::open_shared(&[&dirs.alloc_dir.join("data"), &dirs.alloc_dir.join("tmp")])?;
        }
        let file = Self::isolation_file(&spec)
            .ok_or_else(|| DriverError::fatal("exec needs the task's dirs"))?;
        let json = serde_json::to_vec_pretty(&isolation)
            .map_err(|e| DriverError::fatal(format!("isolation of the task: {e}")))?;
        std::fs::write(&file, json).map_err(|e| {
            DriverError::recoverable(format!("cannot write {}: {e}", file.display()))
        })?;
        let res = spec.resources.clone().unwrap_or_default();
        let limits = Limits::of(
            res.cpu_mhz,
            res.memory_mb,
            res.memory_max_mb,
            res.node_cpu_mhz,
        );
        let group = hierarchy.task_group(&spec.alloc_id, &spec.task);
        let cores = res.cores.clone();
        {
            let (h, g) = (hierarchy.clone(), group.clone());
            tokio::task::spawn_blocking(move || {
                h.ensure_parent()?;
                g.create(limits, &cores)
            })
            .await
            .map_err(|e| DriverError::recoverable(e.to_string()))?
            .map_err(|e| DriverError::recoverable(format!("task cgroup: {e}")))?;
        }
        match self.inner.start(self.inner_spec(&spec)).await {
            Ok(inner) => Ok(Arc::new(ExecHandle::new(
                inner,
                group,
                Self::node_cores(&spec),
                self.exec_context(&spec),
            ))),
            Err(e) => {
                let _ = tokio::task::spawn_blocking(move || group.remove()).await;
                Err(e)
            }
        }
    }

    async fn recover(&self, spec: &TaskSpec, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let inner_state = ExecHandle::inner_state(state)?;
        let inner = self
            .inner
            .recover(&self.inner_spec(spec), &inner_state)
            .await?;
        self.wrap(spec, inner)
    }

    async fn adopt(&self, spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        let inner = self.inner.adopt(&self.inner_spec(spec)).await?;
        self.wrap(spec, inner)
    }

    async fn release(&self, spec: &TaskSpec) {
        self.inner.release(&self.inner_spec(spec)).await;
    }

    async fn remove_orphans(&self, live: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync)) {
        let Ok(h) = &self.hierarchy else { return };
        let gone: Vec<_> = h
            .allocs_with_groups()
            .into_iter()
            .filter(|(alloc, _)| !live(alloc))
            .map(|(_, g)| g)
            .collect();
        if gone.is_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || {
            for g in gone {
                g.remove();
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests;
