//! Group network namespaces: an alloc whose group asks for `bridge` (or
//! `none`) networking gets a namespace of its own, pinned under
//! `<data_dir>/netns/<alloc id>`, attached with CNI plugins; its tasks run
//! inside it. What was attached is recorded beside the namespace
//! (`<alloc id>.json`) so teardown, after a client restart too, undoes
//! exactly that.

pub mod bridge;
pub mod cni;
pub mod etc_files;
pub mod netns;

use std::path::{Path, PathBuf};

use caravan_proto::{AllocatedPort, TaskGroup};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use cni::{Attachment, CniError, CniRunner};

/// Where Debian's `containernetworking-plugins` puts the plugins.
pub const DEFAULT_PLUGIN_DIR: &str = "/usr/lib/cni";
/// The interface the alloc sees.
const IFNAME: &str = "eth0";

/// Setups and teardowns one at a time: the bridge plugin creates the bridge
/// on first use, and two doing so at once race.
static ATTACH: Mutex<()> = Mutex::new(());

/// The networking a group asks for that needs a namespace of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupNetwork {
    /// `mode = "bridge"`: the `nomad` bridge, with port mappings.
    Bridge,
    /// `mode = "none"`: loopback only.
    Isolated,
}

impl GroupNetwork {
    /// What `group`'s network block asks for; `None` for host networking.
    pub fn of(group: &TaskGroup) -> Option<GroupNetwork> {
        match group.networks.first().map(|n| n.mode.as_str()) {
            Some("bridge") => Some(GroupNetwork::Bridge),
            Some("none") => Some(GroupNetwork::Isolated),
            _ => None,
        }
    }
}

/// An alloc's attached namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocNetwork {
    /// The pinned namespace tasks enter.
    pub netns: PathBuf,
    /// The alloc's address on the bridge (empty for `none`).
    pub ip: String,
}

/// What teardown needs: the config list and runtime config the alloc was
/// attached with, and the result ADD returned.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    network: AllocNetwork,
    conflist: Value,
    runtime: Value,
    result: Value,
}

/// Networking could not be set up or torn down.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// Creating, removing or recording the namespace failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A CNI plugin failed.
    #[error(transparent)]
    Cni(#[from] CniError),
}

/// The namespaces of one client's allocs.
#[derive(Debug, Clone)]
pub struct Networks {
    dir: PathBuf,
    cni: CniRunner,
}

impl Networks {
    /// The namespaces under `<data_dir>/netns`, attached with the plugins in `plugin_dir`.
    pub fn new(data_dir: &Path, plugin_dir: impl Into<PathBuf>) -> Self {
        Networks {
            dir: data_dir.join("netns"),
            cni: CniRunner::new(plugin_dir),
        }
    }

    fn netns(&self, alloc_id: &str) -> PathBuf {
        self.dir.join(alloc_id)
    }

    fn record_path(&self, alloc_id: &str) -> PathBuf {
        self.dir.join(format!("{alloc_id}.json"))
    }

    /// Creates the alloc's namespace (or, given `holder`, pins the
    /// namespace of that process: the infra container of a group with
    /// docker tasks) and attaches it; `ports` are the group's ports to map
    /// (bridge mode). Anything half made is undone on failure.
    pub fn setup(
        &self,
        alloc_id: &str,
        mode: GroupNetwork,
        ports: &[AllocatedPort],
        holder: Option<u32>,
    ) -> Result<AllocNetwork, NetworkError> {
        let _one = ATTACH.lock();
        if mode == GroupNetwork::Bridge {
            bridge::ensure_forwarding_rule().map_err(|source| NetworkError::Io {
                what: "accept forwarding to the bridge in",
                path: PathBuf::from(bridge::ADMIN_CHAIN),
                source,
            })?;
        }
        let path = self.netns(alloc_id);
        match holder {
            Some(pid) => netns::pin(pid, &path),
            None => netns::create(&path),
        }
        .map_err(|source| NetworkError::Io {
            what: "create network namespace",
            path: path.clone(),
            source,
        })?;
        let (conflist, runtime) = match mode {
            GroupNetwork::Bridge => (bridge::conflist(), bridge::port_mappings(ports)),
            GroupNetwork::Isolated => (bridge::loopback_only(), Value::Object(Default::default())),
        };
        let at = self.attachment(alloc_id);
        let result = match self.cni.add(&conflist, &at, &runtime) {
            Ok(r) => r,
            Err(e) => {
                let _ = netns::remove(&path);
                return Err(e.into());
            }
        };
        let network = AllocNetwork {
            netns: path.clone(),
            ip: match mode {
                GroupNetwork::Bridge => bridge::alloc_ip(&result).unwrap_or_default(),
                // Loopback's own 127.0.0.1 is no address of the alloc.
                GroupNetwork::Isolated => String::new(),
            },
        };
        let record = Record {
            network: network.clone(),
            conflist,
            runtime,
            result,
        };
        let file = self.record_path(alloc_id);
        let written = serde_json::to_vec_pretty(&record)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomic(&file, &bytes));
        if let Err(source) = written {
            let _ = self
                .cni
                .del(&record.conflist, &at, &record.runtime, Some(&record.result));
            let _ = netns::remove(&path);
            return Err(NetworkError::Io {
                what: "record network of",
                path: file,
                source,
            });
        }
        Ok(network)
    }

    /// The alloc's attached namespace, if it has one.
    pub fn load(&self, alloc_id: &str) -> Option<AllocNetwork> {
        let bytes = std::fs::read(self.record_path(alloc_id)).ok()?;
        let record: Record = serde_json::from_slice(&bytes).ok()?;
        netns::is_pinned(&record.network.netns).then_some(record.network)
    }

    /// Detaches the alloc (CNI DEL with what it was attached with), unpins
    /// its namespace and removes both files. Nothing there is fine; a record
    /// lost with the namespace still pinned is detached with the bridge
    /// config and no port mappings known, which the plugins accept.
    pub fn teardown(&self, alloc_id: &str) -> Result<(), NetworkError> {
        let _one = ATTACH.lock();
        let path = self.netns(alloc_id);
        let file = self.record_path(alloc_id);
        let record: Option<Record> = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let pinned = netns::is_pinned(&path);
        let mut failed = None;
        if record.is_some() || pinned {
            let (conflist, runtime, result) = match record {
                Some(r) => (r.conflist, r.runtime, Some(r.result)),
                None => (bridge::conflist(), Value::Object(Default::default()), None),
            };
            let mut at = self.attachment(alloc_id);
            if !pinned {
                // Gone with a reboot: the plugins still free the address
                // and rules; there is no interface left to remove.
                at.netns = PathBuf::new();
            }
            if let Err(e) = self.cni.del(&conflist, &at, &runtime, result.as_ref()) {
                failed = Some(NetworkError::from(e));
            }
        }
        netns::remove(&path).map_err(|source| NetworkError::Io {
            what: "remove network namespace",
            path: path.clone(),
            source,
        })?;
        if let Some(e) = failed {
            // The record stays: a later teardown tries the plugins again.
            return Err(e);
        }
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(NetworkError::Io {
                what: "remove network record",
                path: file,
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// The allocs that have a namespace or a record here.
    pub fn allocs(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .map(|n| n.strip_suffix(".json").map(str::to_string).unwrap_or(n))
            // Alloc ids hold no dot: this skips half-written records.
            .filter(|n| !n.contains('.'))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn attachment(&self, alloc_id: &str) -> Attachment {
        Attachment {
            container_id: alloc_id.to_string(),
            netns: self.netns(alloc_id),
            ifname: IFNAME.to_string(),
        }
    }
}

/// Whether bridge networking can work here: root, and every plugin of the
/// bridge config list installed in `plugin_dir`.
pub fn bridge_available(plugin_dir: &Path) -> bool {
    nix::unistd::Uid::effective().is_root()
        && bridge::PLUGINS.iter().all(|p| plugin_dir.join(p).is_file())
}

/// The version of every executable plugin in `plugin_dir`, as the plugin
/// prints it when run without arguments (the first token that reads as a
/// semantic version, `v` allowed), else `unknown`: the node's
/// `plugins.cni.version.<name>` attributes.
pub fn plugin_versions(plugin_dir: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(plugin_dir) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let out = std::process::Command::new(e.path())
                .env_clear()
                .stdin(std::process::Stdio::null())
                .output()
                .ok();
            let text = out
                .map(|o| {
                    format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )
                })
                .unwrap_or_default();
            Some((name, version_in(&text).unwrap_or("unknown").to_string()))
        })
        .collect()
}

/// The first whitespace-separated token of `text` that is a semantic
/// version (`1.2.3`, `v1.2.3`, `1.2.3-rc1`).
fn version_in(text: &str) -> Option<&str> {
    text.split_whitespace().find(|t| {
        let core = t.strip_prefix('v').unwrap_or(t);
        let core = core.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = core.split('.').collect();
        (1..=3).contains(&parts.len())
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests;
