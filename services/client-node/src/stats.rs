//! Resource usage read from `/proc`: the host's (Nomad's HostStats: CPU per
//! core, memory, the data dir's disk, uptime) and a task's (Nomad's
//! ResourceUsage of its process group: RSS and CPU). CPU percentages come
//! from two readings [`SAMPLE`] apart.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{
    AllocResourceUsage, CpuUsage, HostCpuStats, HostDiskStats, HostMemoryStats, HostStats,
    MemoryUsage, ResourceUsage, TaskResourceUsage,
};

/// Time between the two readings a CPU percentage is computed from.
pub const SAMPLE: Duration = Duration::from_millis(100);

/// One core's (or the machine's) times from `/proc/stat`, in ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct CpuTimes {
    user: f64,
    system: f64,
    idle: f64,
    total: f64,
}

/// The `cpuN` lines of `/proc/stat`, by name.
fn parse_proc_stat(text: &str) -> Vec<(String, CpuTimes)> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?.to_string();
            let v: Vec<f64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest is in user).
            let get = |i: usize| v.get(i).copied().unwrap_or(0.0);
            let total = (0..8).map(get).sum();
            Some((
                name,
                CpuTimes {
                    user: get(0) + get(1),
                    system: get(2),
                    idle: get(3) + get(4),
                    total,
                },
            ))
        })
        .collect()
}

fn read_cpus() -> Vec<(String, CpuTimes)> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// `key:   value kB` lines of `/proc/meminfo`, in bytes.
fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let mut f = rest.split_whitespace();
            let n: u64 = f.next()?.parse().ok()?;
            let scale = if f.next() == Some("kB") { 1024 } else { 1 };
            Some((k.to_string(), n * scale))
        })
        .collect()
}

fn memory() -> HostMemoryStats {
    let m = std::fs::read_to_string("/proc/meminfo")
        .map(|t| parse_meminfo(&t))
        .unwrap_or_default();
    let total = m.get("MemTotal").copied().unwrap_or(0);
    let free = m.get("MemFree").copied().unwrap_or(0);
    let available = m.get("MemAvailable").copied().unwrap_or(free);
    HostMemoryStats {
        total,
        available,
        used: total.saturating_sub(available),
        free,
    }
}

fn uptime() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0, |s| s as u64)
}

/// The mount holding `path` (the longest mount point it is under), from
/// `/proc/self/mounts`: device and mount point.
fn mount_of(path: &Path) -> (String, String) {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_string(), f.next()?.replace("\\040", " ")))
        })
        .filter(|(_, mp)| real.starts_with(mp))
        .max_by_key(|(_, mp)| mp.len())
        .unwrap_or_else(|| (String::new(), "/".into()))
}

/// Usage of the file system holding `path`.
pub fn disk(path: &Path) -> Option<HostDiskStats> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frsize = st.fragment_size() as u64;
    let size = st.blocks() as u64 * frsize;
    let free = st.blocks_free() as u64 * frsize;
    let available = st.blocks_available() as u64 * frsize;
    let used = size.saturating_sub(free);
    let used_percent = if used + available > 0 {
        used as f64 / (used + available) as f64 * 100.0
    } else {
        0.0
    };
    let files = st.files() as u64;
    let inodes_used_percent = if files > 0 {
        files.saturating_sub(st.files_free() as u64) as f64 / files as f64 * 100.0
    } else {
        0.0
    };
    let (device, mountpoint) = mount_of(path);
    Some(HostDiskStats {
        device,
        mountpoint,
        size,
        used,
        available,
        used_percent,
        inodes_used_percent,
    })
}

/// The host's usage, with the disk of `data_dir`; `cpu_total_mhz` turns
/// percentages into Nomad's ticks (MHz consumed).
pub async fn host_stats(data_dir: &Path, cpu_total_mhz: u64) -> HostStats {
    let before = read_cpus();
    tokio::time::sleep(SAMPLE).await;
    let after = read_cpus();
    let per_core_mhz = cpu_total_mhz as f64 / after.len().max(1) as f64;
    let cpu: Vec<HostCpuStats> = after
        .iter()
        .map(|(name, now)| {
            let then = before
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| *t)
                .unwrap_or_default();
            let delta = (now.total - then.total).max(1.0);
            let pct = |a: f64, b: f64| ((a - b) / delta * 100.0).clamp(0.0, 100.0);
            let idle = pct(now.idle, then.idle);
            let total_percent = (100.0 - idle).clamp(0.0, 100.0);
            HostCpuStats {
                cpu: name.clone(),
                user: pct(now.user, then.user),
                system: pct(now.system, then.system),
                idle,
                total_percent,
                total_ticks: total_percent / 100.0 * per_core_mhz,
            }
        })
        .collect();
    let cpu_ticks_consumed = cpu.iter().map(|c| c.total_ticks).sum();
    let alloc_dir = disk(data_dir);
    HostStats {
        memory: Some(memory()),
        cpu,
        disk_stats: alloc_dir.iter().cloned().collect(),
        alloc_dir_stats: alloc_dir,
        uptime: uptime(),
        timestamp: now_unix_ns(),
        cpu_ticks_consumed,
    }
}

/// What one process has used: CPU ticks in user and system mode, RSS bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct ProcUsage {
    user_ticks: f64,
    system_ticks: f64,
    rss: u64,
}

/// Process group and usage from the text of `/proc/<pid>/stat`.
fn parse_pid_stat(text: &str, page_size: u64) -> Option<(i32, ProcUsage)> {
    let after = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields from 3 (state): pgrp is 5, utime 14, stime 15, rss 24.
    let pgrp = f.get(2)?.parse().ok()?;
    let user_ticks = f.get(11)?.parse().ok()?;
    let system_ticks = f.get(12)?.parse().ok()?;
    let rss: u64 = f.get(21)?.parse().ok()?;
    Some((
        pgrp,
        ProcUsage {
            user_ticks,
            system_ticks,
            rss: rss * page_size,
        },
    ))
}

/// The processes of the process groups `groups`, by pid.
fn group_members(groups: &[i32], page_size: u64) -> BTreeMap<i32, (i32, ProcUsage)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (pgrp, usage) = parse_pid_stat(&text, page_size)?;
            groups.contains(&pgrp).then_some((pid, (pgrp, usage)))
        })
        .collect()
}

fn sysconf(var: nix::unistd::SysconfVar, default: u64) -> u64 {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

fn usage(
    before: Option<&ProcUsage>,
    now: &ProcUsage,
    ticks_per_sec: f64,
    mhz_per_core: f64,
) -> ResourceUsage {
    let window = SAMPLE.as_secs_f64() * ticks_per_sec;
    let then = before.copied().unwrap_or(*now);
    let user = ((now.user_ticks - then.user_ticks) / window * 100.0).max(0.0);
    let system = ((now.system_ticks - then.system_ticks) / window * 100.0).max(0.0);
    let percent = user + system;
    ResourceUsage {
        memory_stats: Some(MemoryUsage {
            rss: now.rss,
            measured: vec!["RSS".into()],
            ..Default::default()
        }),
        cpu_stats: Some(CpuUsage {
            user_mode: user,
            system_mode: system,
            percent,
            total_ticks: percent / 100.0 * mhz_per_core,
            measured: vec!["System Mode".into(), "User Mode".into(), "Percent".into()],
            ..Default::default()
        }),
    }
}

fn add(into: &mut ResourceUsage, other: &ResourceUsage) {
    let m = into.memory_stats.get_or_insert_with(Default::default);
    if let Some(o) = &other.memory_stats {
        m.rss += o.rss;
        for f in &o.measured {
            if !m.measured.contains(f) {
                m.measured.push(f.clone());
            }
        }
    }
    let c = into.cpu_stats.get_or_insert_with(Default::default);
    if let Some(o) = &other.cpu_stats {
        c.user_mode += o.user_mode;
        c.system_mode += o.system_mode;
        c.percent += o.percent;
        c.total_ticks += o.total_ticks;
        for f in &o.measured {
            if !c.measured.contains(f) {
                c.measured.push(f.clone());
            }
        }
    }
}

/// The usage of a task without a process: nothing used.
pub fn idle_task_usage() -> TaskResourceUsage {
    let mut task_usage = ResourceUsage::default();
    add(
        &mut task_usage,
        &usage(None, &ProcUsage::default(), 100.0, 0.0),
    );
    TaskResourceUsage {
        resource_usage: Some(task_usage),
        timestamp: now_unix_ns(),
        pids: Default::default(),
    }
}

/// The usage of the process group led by `leader`, from two readings
/// [`SAMPLE`] apart; `cpu_total_mhz` turns percentages into MHz.
pub async fn process_group_usage(leader: i32, cpu_total_mhz: u64) -> TaskResourceUsage {
    let page_size = sysconf(nix::unistd::SysconfVar::PAGE_SIZE, 4096);
    let ticks_per_sec = sysconf(nix::unistd::SysconfVar::CLK_TCK, 100) as f64;
    let cores = read_cpus().len().max(1);
    let mhz_per_core = cpu_total_mhz as f64 / cores as f64;
    let groups = [leader];
    let before = group_members(&groups, page_size);
    tokio::time::sleep(SAMPLE).await;
    let after = group_members(&groups, page_size);
    let mut task_usage = ResourceUsage::default();
    let mut pids = BTreeMap::new();
    for (pid, (_, now)) in &after {
        let u = usage(
            before.get(pid).map(|(_, u)| u),
            now,
            ticks_per_sec,
            mhz_per_core,
        );
        add(&mut task_usage, &u);
        pids.insert(pid.to_string(), u);
    }
    if task_usage.memory_stats.is_none() {
        add(
            &mut task_usage,
            &usage(None, &ProcUsage::default(), ticks_per_sec, mhz_per_core),
        );
    }
    TaskResourceUsage {
        resource_usage: Some(task_usage),
        timestamp: now_unix_ns(),
        pids: pids.into_iter().collect(),
    }
}

/// An alloc's usage: its tasks' and their sum.
pub fn alloc_usage(tasks: BTreeMap<String, TaskResourceUsage>) -> AllocResourceUsage {
    let mut total = ResourceUsage::default();
    for t in tasks.values() {
        if let Some(u) = &t.resource_usage {
            add(&mut total, u);
        }
    }
    AllocResourceUsage {
        resource_usage: Some(total),
        timestamp: tasks
            .values()
            .map(|t| t.timestamp)
            .max()
            .unwrap_or_else(now_unix_ns),
        tasks: tasks.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 4 1 5 40 2 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\nintr 1 2\n";
        let cpus = parse_proc_stat(stat);
        assert_eq!(cpus.len(), 2);
        assert_eq!(cpus[0].0, "cpu0");
        assert_eq!(
            cpus[0].1,
            CpuTimes {
                user: 5.0,
                system: 5.0,
                idle: 42.0,
                total: 52.0
            }
        );
        let mem = parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\nHugePages_Total: 0\n");
        assert_eq!(mem["MemTotal"], 1_024_000);
        assert_eq!(mem["HugePages_Total"], 0);
        let (pgrp, u) = parse_pid_stat(
            "42 (a (b) c) S 1 40 40 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 100 9",
            4096,
        )
        .unwrap();
        assert_eq!(pgrp, 40);
        assert_eq!((u.user_ticks, u.system_ticks, u.rss), (7.0, 3.0, 9 * 4096));
    }

    #[tokio::test]
    async fn reads_this_host_and_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let host = host_stats(dir.path(), 4000).await;
        assert!(!host.cpu.is_empty());
        assert!(host.memory.unwrap().total > 0);
        assert!(host.uptime > 0);
        let disk = host.alloc_dir_stats.unwrap();
        assert!(disk.size > 0 && !disk.mountpoint.is_empty());
        // The test process leads no group of its own, but its group is real.
        let pgrp = nix::unistd::getpgrp().as_raw();
        let tasks = BTreeMap::from([
            ("t".to_string(), process_group_usage(pgrp, 4000).await),
            ("idle".to_string(), idle_task_usage()),
        ]);
        let usage = alloc_usage(tasks);
        let t = &usage.tasks["t"];
        assert!(t.pids.contains_key(&std::process::id().to_string()));
        assert!(
            t.resource_usage
                .as_ref()
                .unwrap()
                .memory_stats
                .as_ref()
                .unwrap()
                .rss
                > 0
        );
        let idle = &usage.tasks["idle"];
        assert!(idle.pids.is_empty());
        assert_eq!(
            idle.resource_usage
                .as_ref()
                .unwrap()
                .memory_stats
                .as_ref()
                .unwrap()
                .rss,
            0
        );
    }
}
