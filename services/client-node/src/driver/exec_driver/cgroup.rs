//! The cgroup of an `exec` task, under a parent group the client owns
//! (`caravan.slice` on cgroup v2, `caravan` in each v1 controller): it
//! enforces the task's `cpu` (as shares: `cpu.weight` on v2, `cpu.shares`
//! on v1), its `memory` and `memory_max` (the hard limit is `memory_max`
//! when set, else `memory`; `memory` is then the soft one: `memory.low` on
//! v2, `memory.soft_limit_in_bytes` on v1) and its `cores` (`cpuset.cpus`),
//! counts its OOM kills and gives its usage. Both versions are handled,
//! as hosts in containers often still mount the v1 controllers.

use std::path::{Path, PathBuf};

use caravan_proto::{CpuUsage, MemoryUsage, ResourceUsage, TaskResourceUsage};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The parent group's name under each hierarchy.
const PARENT_V2: &str = "caravan.slice";
const PARENT_V1: &str = "caravan";
/// The v1 controllers a task's group is made in.
const V1_CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "cpuset"];
/// The smallest CPU share the kernel takes, and the largest.
const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;

/// Where this host's cgroups are, and which version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// The unified hierarchy, mounted here, with `cpu` and `memory`.
    V2(PathBuf),
    /// One mount per v1 controller, each found.
    V1 {
        /// `memory`.
        memory: PathBuf,
        /// `cpu`.
        cpu: PathBuf,
        /// `cpuacct`.
        cpuacct: PathBuf,
        /// `cpuset`.
        cpuset: PathBuf,
    },
}

/// What a task's group enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// CPU shares (the task's `cpu` in MHz, clamped).
    pub shares: u64,
    /// The hard memory limit in bytes.
    pub memory_max: u64,
    /// The soft limit in bytes, 0 for none.
    pub memory_low: u64,
}

impl Limits {
    /// The limits of a task given `cpu_mhz`, `memory_mb` and `memory_max_mb`
    /// on a node of `node_mhz` in all: shares are the MHz (at least 2,
    /// scaled down when the node has more MHz than the kernel has shares).
    pub fn of(cpu_mhz: u32, memory_mb: u32, memory_max_mb: u32, node_mhz: u64) -> Limits {
        let mut shares = u64::from(cpu_mhz).max(MIN_SHARES);
        if node_mhz >= MAX_SHARES {
            shares = (shares as f64 / node_mhz as f64 * MAX_SHARES as f64) as u64;
        }
        let mb = |m: u32| u64::from(m) * 1024 * 1024;
        let (max, low) = if memory_max_mb > 0 {
            (mb(memory_max_mb), mb(memory_mb))
        } else {
            (mb(memory_mb), 0)
        };
        Limits {
            shares: shares.clamp(MIN_SHARES, MAX_SHARES),
            memory_max: max,
            memory_low: low,
        }
    }
}

/// cgroup v2's `cpu.weight` for v1 shares (the kernel's own mapping of the
/// 2..262144 range onto 1..10000).
pub fn weight_of(shares: u64) -> u64 {
    1 + (shares.clamp(MIN_SHARES, MAX_SHARES) - 2) * 9999 / 262_142
}

impl Hierarchy {
    /// The hierarchy of this host, from its mounts; `Err` says why there is
    /// none the driver can use.
    pub fn detect() -> Result<Hierarchy, String> {
        let mounts = std::fs::read_to_string("/proc/self/mounts")
            .map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
        Self::from_mounts(&mounts)
    }

    /// The hierarchy the mount table `mounts` describes.
    pub fn from_mounts(mounts: &str) -> Result<Hierarchy, String> {
        let mut v1: std::collections::BTreeMap<&str, PathBuf> = Default::default();
        let mut v2_without = None;
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [_, path, fstype, options, ..] = f[..] else {
                continue;
            };
            match fstype {
                "cgroup2" => {
                    let controllers =
                        std::fs::read_to_string(Path::new(path).join("cgroup.controllers"))
                            .unwrap_or_default();
                    let has: Vec<&str> = controllers.split_whitespace().collect();
                    if has.contains(&"cpu") && has.contains(&"memory") {
                        return Ok(Hierarchy::V2(path.into()));
                    }
                    v2_without = Some(path.to_string());
                }
                "cgroup" => {
                    for opt in options.split(',') {
                        if let Some(c) = V1_CONTROLLERS.iter().find(|c| **c == opt) {
                            v1.entry(c).or_insert_with(|| path.into());
                        }
                    }
                }
                _ => {}
            }
        }
        if let (Some(memory), Some(cpu), Some(cpuacct), Some(cpuset)) = (
            v1.remove("memory"),
            v1.remove("cpu"),
            v1.remove("cpuacct"),
            v1.remove("cpuset"),
        ) {
            return Ok(Hierarchy::V1 {
                memory,
                cpu,
                cpuacct,
                cpuset,
            });
        }
        Err(match v2_without {
            Some(p) => format!(
                "cgroup v2 at {p} has no cpu and memory controllers (they are bound to cgroup v1 hierarchies, which lack some of memory, cpu, cpuacct and cpuset)"
            ),
            None => "no cgroup hierarchy with the cpu and memory controllers is mounted".into(),
        })
    }

    /// The version, as the node attribute says it.
    pub fn version(&self) -> &'static str {
        match self {
            Hierarchy::V2(_) => "v2",
            Hierarchy::V1 { .. } => "v1",
        }
    }

    /// The parent group of every task, in each hierarchy.
    fn parents(&self) -> Vec<PathBuf> {
        match self {
            Hierarchy::V2(root) => vec![root.join(PARENT_V2)],
            Hierarchy::V1 {
                memory,
                cpu,
                cpuacct,
                cpuset,
            } => [memory, cpu, cpuacct, cpuset]
                .map(|m| m.join(PARENT_V1))
                .to_vec(),
        }
    }

    /// Creates the client's parent group (where it already exists, checks
    /// it is usable): `Err` names what the client may not do.
    pub fn ensure_parent(&self) -> Result<(), String> {
        for p in self.parents() {
            create_dir(&p)?;
        }
        match self {
            Hierarchy::V2(root) => {
                // The root group is exempt from the no-internal-processes
                // rule; a delegated subtree must have moved its own away.
                for at in [root.clone(), root.join(PARENT_V2)] {
                    let available = read(&at.join("cgroup.controllers"));
                    let control = at.join("cgroup.subtree_control");
                    let on = read(&control);
                    for c in ["cpu", "memory", "cpuset"] {
                        let has = |list: &str| list.split_whitespace().any(|x| x == c);
                        // cpuset is needed only by tasks that reserve cores.
                        if has(&on) || (c == "cpuset" && !has(&available)) {
                            continue;
                        }
                        write(&control, &format!("+{c}")).map_err(|e| {
                            format!("{e} (a delegated cgroup whose own processes were not moved to a leaf group cannot hand controllers down)")
                        })?;
                    }
                }
            }
            Hierarchy::V1 { cpuset, .. } => {
                // A v1 cpuset group takes no task until it has cpus and mems.
                let parent = cpuset.join(PARENT_V1);
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    if read(&parent.join(f)).trim().is_empty() {
                        write(&parent.join(f), read(&cpuset.join(f)).trim())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The group of `task` of `alloc`.
    pub fn task_group(&self, alloc: &str, task: &str) -> TaskCgroup {
        let name = format!("{alloc}.{task}");
        let dirs = self.parents().into_iter().map(|p| p.join(&name)).collect();
        TaskCgroup {
            v2: matches!(self, Hierarchy::V2(_)),
            dirs,
        }
    }

    /// The allocs that have a group under the parent.
    pub fn allocs_with_groups(&self) -> Vec<(String, TaskCgroup)> {
        let Some(first) = self.parents().into_iter().next() else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(first) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (alloc, task) = name.split_once('.')?;
                Some((alloc.to_string(), self.task_group(alloc, task)))
            })
            .collect()
    }
}

/// One task's group (one dir on v2, one per controller on v1: memory, cpu,
/// cpuacct, cpuset, in that order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCgroup {
    v2: bool,
    dirs: Vec<PathBuf>,
}

impl TaskCgroup {
    fn memory(&self) -> &Path {
        &self.dirs[0]
    }

    fn cpu(&self) -> &Path {
        if self.v2 {
            &self.dirs[0]
        } else {
            &self.dirs[1]
        }
    }

    fn cpuacct(&self) -> &Path {
        if self.v2 {
            &self.dirs[0]
        } else {
            &self.dirs[2]
        }
    }

    fn cpuset(&self) -> &Path {
        if self.v2 {
            &self.dirs[0]
        } else {
            &self.dirs[3]
        }
    }

    /// The `cgroup.procs` files a process joins the group through.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The file that holds the CPU weight (`cpu.weight` or `cpu.shares`).
    pub fn weight_file(&self) -> PathBuf {
        self.cpu()
            .join(if self.v2 { "cpu.weight" } else { "cpu.shares" })
    }

    /// The file that holds the hard memory limit.
    pub fn memory_max_file(&self) -> PathBuf {
        self.memory().join(if self.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        })
    }

    /// Creates the group afresh (a group a crashed run left is emptied and
    /// removed first) and writes `limits` and `cores`.
    pub fn create(&self, limits: Limits, cores: &[u32]) -> Result<(), String> {
        self.remove();
        for d in &self.dirs {
            create_dir(d)?;
        }
        if self.v2 {
            write(&self.weight_file(), &weight_of(limits.shares).to_string())?;
        } else {
            write(&self.weight_file(), &limits.shares.to_string())?;
        }
        if limits.memory_max > 0 {
            // On v1 the soft limit goes first: it may not exceed the hard one
            // a group had, which is unlimited in a new group anyway.
            if self.v2 {
                write(&self.memory_max_file(), &limits.memory_max.to_string())?;
                if limits.memory_low > 0 {
                    write(
                        &self.memory().join("memory.low"),
                        &limits.memory_low.to_string(),
                    )?;
                }
            } else {
                write(&self.memory_max_file(), &limits.memory_max.to_string())?;
                if limits.memory_low > 0 {
                    write(
                        &self.memory().join("memory.soft_limit_in_bytes"),
                        &limits.memory_low.to_string(),
                    )?;
                }
                // No swapping the task out to spare its limit.
                let _ = write(&self.memory().join("memory.swappiness"), "0");
            }
        }
        let parent_cpus = self
            .cpuset()
            .parent()
            .map(|p| {
                read(&p.join(if self.v2 {
                    "cpuset.cpus.effective"
                } else {
                    "cpuset.cpus"
                }))
            })
            .unwrap_or_default();
        let cpus = if cores.is_empty() {
            parent_cpus.trim().to_string()
        } else {
            cores
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        // A v2 group inherits its parent's cpus; a v1 one must be given them.
        let inherits = self.v2 && cores.is_empty();
        if !cpus.is_empty() && !inherits {
            write(&self.cpuset().join("cpuset.cpus"), &cpus)?;
        }
        if !self.v2 {
            let mems = self
                .cpuset()
                .parent()
                .map(|p| read(&p.join("cpuset.mems")))
                .unwrap_or_default();
            write(&self.cpuset().join("cpuset.mems"), mems.trim())?;
        }
        Ok(())
    }

    /// Whether the group exists.
    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|d| d.exists())
    }

    /// The pids in the group.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .flat_map(|d| {
                read(&d.join("cgroup.procs"))
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// How many times the kernel's OOM killer killed in the group.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        read(&self.memory().join(file))
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Kills whatever still runs in the group and removes it; a group that
    /// is not there is fine.
    pub fn remove(&self) {
        for _ in 0..50 {
            let pids = self.pids();
            for p in &pids {
                let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
            }
            let mut left = false;
            for d in &self.dirs {
                match std::fs::remove_dir(d) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(_) => left = true,
                }
            }
            if !left {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        tracing::warn!(group = ?self.dirs, "cannot remove a task's cgroup");
    }

    /// The group's CPU time so far: total, user and system, in nanoseconds.
    pub fn cpu_times(&self) -> CpuTimes {
        if self.v2 {
            let stat = read(&self.cpuacct().join("cpu.stat"));
            let field = |k: &str| {
                stat.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
                    * 1000
            };
            CpuTimes {
                total: field("usage_usec "),
                user: field("user_usec "),
                system: field("system_usec "),
            }
        } else {
            let total = read(&self.cpuacct().join("cpuacct.usage"))
                .trim()
                .parse()
                .unwrap_or(0);
            let stat = read(&self.cpuacct().join("cpuacct.stat"));
            let tick_ns = 1_000_000_000
                / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                    .ok()
                    .flatten()
                    .filter(|t| *t > 0)
                    .unwrap_or(100) as u64;
            let field = |k: &str| {
                stat.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
                    * tick_ns
            };
            CpuTimes {
                total,
                user: field("user "),
                system: field("system "),
            }
        }
    }

    /// The group's memory: what `memory.stat` and the usage files say.
    pub fn memory_usage(&self) -> MemoryUsage {
        let stat = read(&self.memory().join("memory.stat"));
        let get = |k: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' ')))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let number = |f: &str| read(&self.memory().join(f)).trim().parse::<u64>().ok();
        let (usage, max_usage) = if self.v2 {
            (number("memory.current"), number("memory.peak"))
        } else {
            (
                number("memory.usage_in_bytes"),
                number("memory.max_usage_in_bytes"),
            )
        };
        MemoryUsage {
            rss: get("rss").or_else(|| get("anon")).unwrap_or(0),
            cache: get("cache").or_else(|| get("file")).unwrap_or(0),
            swap: get("swap").unwrap_or(0),
            mapped_file: get("mapped_file")
                .or_else(|| get("file_mapped"))
                .unwrap_or(0),
            usage: usage.unwrap_or(0),
            max_usage: max_usage.unwrap_or(0),
            measured: ["RSS", "Cache", "Swap", "Usage", "Max Usage"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }
    }
}

/// CPU time in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// In all.
    pub total: u64,
    /// In user mode.
    pub user: u64,
    /// In the kernel.
    pub system: u64,
}

/// The task's usage from two samples of its group's CPU time `elapsed`
/// apart; `cpu_total_mhz` and `cores` are the node's.
pub fn usage(
    memory: MemoryUsage,
    before: CpuTimes,
    now: CpuTimes,
    elapsed: std::time::Duration,
    cpu_total_mhz: u64,
    cores: u64,
) -> TaskResourceUsage {
    let wall = elapsed.as_nanos().max(1) as f64;
    let pct = |a: u64, b: u64| a.saturating_sub(b) as f64 / wall * 100.0;
    let percent = pct(now.total, before.total);
    let cpu = CpuUsage {
        system_mode: pct(now.system, before.system),
        user_mode: pct(now.user, before.user),
        percent,
        total_ticks: percent / 100.0 * cpu_total_mhz as f64 / cores.max(1) as f64,
        measured: ["System Mode", "User Mode", "Percent"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    };
    TaskResourceUsage {
        resource_usage: Some(ResourceUsage {
            memory_stats: Some(memory),
            cpu_stats: Some(cpu),
        }),
        timestamp: caravan_model::now_unix_ns(),
        pids: Default::default(),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("write {value:?} to {}: {e}", path.display()))
}

fn create_dir(path: &Path) -> Result<(), String> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.raw_os_error() == Some(nix::libc::EROFS) => Err(format!(
            "the cgroup tree is read-only here: cannot create {}",
            path.display()
        )),
        Err(e) => Err(format!("cannot create cgroup {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_memory_max_and_shares_clamp() {
        let l = Limits::of(500, 256, 0, 4000);
        assert_eq!(l.shares, 500);
        assert_eq!((l.memory_max, l.memory_low), (256 << 20, 0));
        let l = Limits::of(1, 256, 512, 4000);
        assert_eq!(l.shares, 2);
        assert_eq!((l.memory_max, l.memory_low), (512 << 20, 256 << 20));
        assert_eq!(Limits::of(1000, 1, 0, 524_288).shares, 500);
    }

    #[test]
    fn weights_map_the_share_range() {
        assert_eq!(weight_of(2), 1);
        assert_eq!(weight_of(262_144), 10_000);
        assert_eq!(weight_of(1024), 39);
        assert_eq!(weight_of(0), 1);
    }

    #[test]
    fn hierarchies_are_found_in_the_mount_table() {
        let v1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                  cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
                  cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n\
                  cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n\
                  cgroup2 /nonexistent/unified cgroup2 rw 0 0\n";
        let h = Hierarchy::from_mounts(v1).unwrap();
        assert_eq!(h.version(), "v1");
        let g = h.task_group("a1", "web.x");
        assert_eq!(
            g.weight_file(),
            PathBuf::from("/sys/fs/cgroup/cpu/caravan/a1.web.x/cpu.shares")
        );
        let none = Hierarchy::from_mounts("cgroup2 /nonexistent cgroup2 rw 0 0\n").unwrap_err();
        assert!(none.contains("no cpu and memory controllers"), "{none}");
        assert!(
            Hierarchy::from_mounts("")
                .unwrap_err()
                .contains("no cgroup")
        );
    }
}
