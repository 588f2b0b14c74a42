//! A docker task's `config` block, read into what the driver acts on. Jobs
//! reach a node only once `caravan-jobspec` checked the block against the
//! driver's schema, so a key this reading does not know cannot arrive; a
//! value it cannot use still fails the task, naming the key.

use std::collections::BTreeMap;
use std::time::Duration;

use prost_types::value::Kind;

use crate::driver::config::scalar;
use crate::driver::{DriverError, TaskConfig};
use crate::task_env::TaskEnv;

/// Nomad's default `image_pull_timeout`.
const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(300);
/// Nomad's default `cpu_cfs_period`, in microseconds.
const DEFAULT_CFS_PERIOD: u64 = 100_000;

/// How the container is networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    /// Docker's default bridge, ports published on the host.
    Bridge,
    /// The host's network.
    Host,
    /// No network but loopback.
    None,
}

impl NetworkMode {
    /// As Docker names it.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Bridge => "bridge",
            NetworkMode::Host => "host",
            NetworkMode::None => "none",
        }
    }
}

/// A `mount` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountSpec {
    /// `type = "bind"`: `source` (relative to the task dir, or absolute)
    /// at `target`.
    Bind {
        /// The host path as written.
        source: String,
        /// Where it appears in the container.
        target: String,
        /// Read-only.
        readonly: bool,
        /// `bind_options.propagation`.
        propagation: Option<String>,
    },
    /// `type = "tmpfs"`: a memory file system at `target`.
    Tmpfs {
        /// Where it appears in the container.
        target: String,
        /// `tmpfs_options.size`, bytes.
        size: Option<i64>,
        /// `tmpfs_options.mode`.
        mode: Option<i64>,
        /// Read-only.
        readonly: bool,
    },
}

/// What a docker task runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerTask {
    /// `image`, with `:latest` when it names no tag or digest.
    pub image: String,
    /// `command`.
    pub command: Option<String>,
    /// `args`.
    pub args: Vec<String>,
    /// `entrypoint`.
    pub entrypoint: Option<Vec<String>>,
    /// `work_dir`.
    pub work_dir: Option<String>,
    /// `labels`.
    pub labels: BTreeMap<String, String>,
    /// `hostname`.
    pub hostname: Option<String>,
    /// `force_pull`.
    pub force_pull: bool,
    /// `image_pull_timeout`.
    pub pull_timeout: Duration,
    /// `ports`: group port labels to publish.
    pub ports: Vec<String>,
    /// `port_map`: legacy label → container port.
    pub port_map: BTreeMap<String, u32>,
    /// `network_mode`.
    pub network_mode: NetworkMode,
    /// Whether the job wrote a `network_mode`: a task of a `bridge`/`none`
    /// group that did not joins the group's namespace.
    pub own_network_mode: bool,
    /// `volumes`: `source:target[:mode]`.
    pub volumes: Vec<String>,
    /// `mount` and `mounts` blocks.
    pub mounts: Vec<MountSpec>,
    /// `cpu_hard_limit`.
    pub cpu_hard_limit: bool,
    /// `cpu_cfs_period`, microseconds.
    pub cpu_cfs_period: u64,
    /// `memory_hard_limit`, MB.
    pub memory_hard_limit: Option<u64>,
    /// `init`.
    pub init: bool,
    /// `dns_servers`.
    pub dns_servers: Vec<String>,
    /// `dns_search_domains`.
    pub dns_search_domains: Vec<String>,
    /// `dns_options`.
    pub dns_options: Vec<String>,
    /// `extra_hosts`.
    pub extra_hosts: Vec<String>,
    /// `group_add`.
    pub group_add: Vec<String>,
    /// `healthchecks { disable = true }`: the image's health check is off.
    pub healthcheck_disabled: bool,
    /// `interactive`: stdin stays open.
    pub interactive: bool,
    /// `tty`.
    pub tty: bool,
    /// `oom_score_adj`.
    pub oom_score_adj: Option<i64>,
    /// `pids_limit`.
    pub pids_limit: Option<i64>,
    /// `readonly_rootfs`.
    pub readonly_rootfs: bool,
    /// `shm_size`, bytes.
    pub shm_size: Option<i64>,
    /// `sysctl`.
    pub sysctl: BTreeMap<String, String>,
    /// `ulimit`: name → (soft, hard).
    pub ulimits: BTreeMap<String, (i64, i64)>,
}

fn bad(key: &str, why: impl std::fmt::Display) -> DriverError {
    DriverError::fatal(format!("config.{key}: {why}"))
}

/// `image` with the tag Docker would use (`latest` when none).
pub fn with_tag(image: &str) -> String {
    if image.contains('@') {
        return image.to_string();
    }
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.contains(':') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// Whether an image reference asks for `latest` (which is always pulled).
pub fn is_latest(image: &str) -> bool {
    with_tag(image).ends_with(":latest")
}

impl DockerTask {
    /// Reads the config, interpolating `${…}` in its strings with `env`.
    pub fn parse(config: &TaskConfig, env: &TaskEnv) -> Result<DockerTask, DriverError> {
        let s = |k: &str| -> Result<Option<String>, DriverError> {
            Ok(config.string(k)?.map(|v| env.interpolate(&v)))
        };
        let list = |k: &str| -> Result<Vec<String>, DriverError> {
            Ok(config
                .strings(k)?
                .iter()
                .map(|v| env.interpolate(v))
                .collect())
        };
        let image = s("image")?
            .filter(|i| !i.trim().is_empty())
            .ok_or_else(|| bad("image", "required"))?;
        let mode_written = s("network_mode")?;
        let own_network_mode = mode_written.as_deref().is_some_and(|m| !m.is_empty());
        let network_mode = match mode_written.as_deref() {
            None | Some("") | Some("bridge") | Some("default") => NetworkMode::Bridge,
            Some("host") => NetworkMode::Host,
            Some("none") => NetworkMode::None,
            Some(other) => {
                return Err(bad(
                    "network_mode",
                    format!("{other:?} is not supported; use bridge, host or none"),
                ));
            }
        };
        let mut port_map = BTreeMap::new();
        for (label, port) in config.string_map("port_map")? {
            let n: u32 = port
                .parse()
                .ok()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| bad(&format!("port_map.{label}"), "expected a port number"))?;
            port_map.insert(label, n);
        }
        let mut mounts = Vec::new();
        for key in ["mount", "mounts"] {
            for (i, block) in config.blocks(key)?.into_iter().enumerate() {
                mounts.push(mount(block, &format!("{key}[{i}]"), env)?);
            }
        }
        let entrypoint = config
            .strings("entrypoint")
            .map(|e| e.iter().map(|v| env.interpolate(v)).collect::<Vec<_>>())?;
        Ok(DockerTask {
            image: with_tag(image.trim()),
            command: s("command")?.filter(|c| !c.is_empty()),
            args: list("args")?,
            entrypoint: (!entrypoint.is_empty()).then_some(entrypoint),
            work_dir: s("work_dir")?.filter(|w| !w.is_empty()),
            labels: config
                .string_map("labels")?
                .into_iter()
                .map(|(k, v)| (k, env.interpolate(&v)))
                .collect(),
            hostname: s("hostname")?.filter(|h| !h.is_empty()),
            force_pull: config.boolean("force_pull")?.unwrap_or(false),
            pull_timeout: config
                .duration("image_pull_timeout")?
                .filter(|d| !d.is_zero())
                .unwrap_or(DEFAULT_PULL_TIMEOUT),
            ports: list("ports")?,
            port_map,
            network_mode,
            own_network_mode,
            volumes: list("volumes")?,
            mounts,
            cpu_hard_limit: config.boolean("cpu_hard_limit")?.unwrap_or(false),
            cpu_cfs_period: config
                .int("cpu_cfs_period")?
                .and_then(|p| u64::try_from(p).ok())
                .filter(|p| *p > 0)
                .unwrap_or(DEFAULT_CFS_PERIOD),
            memory_hard_limit: config
                .int("memory_hard_limit")?
                .and_then(|m| u64::try_from(m).ok())
                .filter(|m| *m > 0),
            init: config.boolean("init")?.unwrap_or(false),
            dns_servers: list("dns_servers")?,
            dns_search_domains: list("dns_search_domains")?,
            dns_options: list("dns_options")?,
            extra_hosts: list("extra_hosts")?,
            group_add: list("group_add")?,
            healthcheck_disabled: healthcheck_disabled(config)?,
            interactive: config.boolean("interactive")?.unwrap_or(false),
            tty: config.boolean("tty")?.unwrap_or(false),
            oom_score_adj: config.int("oom_score_adj")?,
            pids_limit: config.int("pids_limit")?.filter(|p| *p > 0),
            readonly_rootfs: config.boolean("readonly_rootfs")?.unwrap_or(false),
            shm_size: config.int("shm_size")?.filter(|s| *s > 0),
            sysctl: config.string_map("sysctl")?,
            ulimits: ulimits(config)?,
        })
    }
}

/// `healthchecks { disable = … }`.
fn healthcheck_disabled(config: &TaskConfig) -> Result<bool, DriverError> {
    for block in config.blocks("healthchecks")? {
        match block.fields.get("disable").and_then(|v| v.kind.as_ref()) {
            None => {}
            Some(Kind::BoolValue(b)) => return Ok(*b),
            Some(Kind::StringValue(s)) if matches!(s.as_str(), "true" | "false") => {
                return Ok(s == "true");
            }
            Some(_) => return Err(bad("healthchecks.disable", "expected a bool")),
        }
    }
    Ok(false)
}

/// `ulimit { nofile = "soft:hard" }` (or one number for both).
fn ulimits(config: &TaskConfig) -> Result<BTreeMap<String, (i64, i64)>, DriverError> {
    let mut out = BTreeMap::new();
    for (name, limit) in config.string_map("ulimit")? {
        let number = |s: &str| {
            s.trim().parse::<i64>().map_err(|_| {
                bad(
                    &format!("ulimit.{name}"),
                    "expected \"soft\" or \"soft:hard\" numbers",
                )
            })
        };
        let (soft, hard) = match limit.split_once(':') {
            Some((s, h)) => (number(s)?, number(h)?),
            None => {
                let n = number(&limit)?;
                (n, n)
            }
        };
        out.insert(name, (soft, hard));
    }
    Ok(out)
}

/// One `mount` block.
fn mount(block: &prost_types::Struct, at: &str, env: &TaskEnv) -> Result<MountSpec, DriverError> {
    let field = |k: &str| {
        block
            .fields
            .get(k)
            .and_then(|v| v.kind.as_ref())
            .and_then(scalar)
            .map(|v| env.interpolate(&v))
    };
    let nested = |k: &str| -> Option<&prost_types::Struct> {
        match block.fields.get(k).and_then(|v| v.kind.as_ref()) {
            Some(Kind::StructValue(s)) => Some(s),
            Some(Kind::ListValue(l)) => l.values.first().and_then(|v| match &v.kind {
                Some(Kind::StructValue(s)) => Some(s),
                _ => None,
            }),
            _ => None,
        }
    };
    let target = field("target")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad(&format!("{at}.target"), "required"))?;
    let readonly = match field("readonly").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(bad(
                &format!("{at}.readonly"),
                format!("{other:?} is not a boolean"),
            ));
        }
    };
    match field("type").as_deref().unwrap_or("volume") {
        "bind" => Ok(MountSpec::Bind {
            source: field("source")
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad(&format!("{at}.source"), "required for a bind mount"))?,
            target,
            readonly,
            propagation: nested("bind_options")
                .and_then(|o| o.fields.get("propagation"))
                .and_then(|v| v.kind.as_ref())
                .and_then(scalar)
                .filter(|p| !p.is_empty()),
        }),
        "tmpfs" => {
            let opts = nested("tmpfs_options");
            let number = |k: &str| -> Result<Option<i64>, DriverError> {
                let Some(v) = opts
                    .and_then(|o| o.fields.get(k))
                    .and_then(|v| v.kind.as_ref())
                    .and_then(scalar)
                else {
                    return Ok(None);
                };
                v.parse()
                    .map(Some)
                    .map_err(|_| bad(&format!("{at}.tmpfs_options.{k}"), "expected a number"))
            };
            Ok(MountSpec::Tmpfs {
                target,
                size: number("size")?,
                mode: number("mode")?,
                readonly,
            })
        }
        other => Err(bad(
            &format!("{at}.type"),
            format!("{other:?} is not supported; use bind or tmpfs"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_default_to_latest() {
        assert_eq!(with_tag("redis"), "redis:latest");
        assert_eq!(with_tag("redis:7"), "redis:7");
        assert_eq!(with_tag("localhost:5000/app"), "localhost:5000/app:latest");
        assert_eq!(with_tag("localhost:5000/app:1"), "localhost:5000/app:1");
        assert_eq!(with_tag("app@sha256:abc"), "app@sha256:abc");
        assert!(is_latest("busybox"));
        assert!(!is_latest("busybox:1"));
    }
}
