//! A container's usage from the daemon's stats (one sample with the one
//! before it), as Nomad's docker driver reports it: memory from the cgroup
//! (RSS, cache, swap, usage), CPU as a percentage of the host and as MHz.

use bollard::models::{ContainerCpuStats, ContainerStatsResponse};
use caravan_model::now_unix_ns;
use caravan_proto::{CpuUsage, MemoryUsage, ResourceUsage, TaskResourceUsage};

/// CPU time used between two samples, as percentages of one core: total,
/// kernel and user.
fn cpu_percent(now: &ContainerCpuStats, before: &ContainerCpuStats) -> (f64, f64, f64) {
    let usage = |s: &ContainerCpuStats| s.cpu_usage.clone().unwrap_or_default();
    let (u_now, u_before) = (usage(now), usage(before));
    let system =
        now.system_cpu_usage.unwrap_or(0) as f64 - before.system_cpu_usage.unwrap_or(0) as f64;
    let cores = now
        .online_cpus
        .map(f64::from)
        .or_else(|| u_now.percpu_usage.as_ref().map(|p| p.len() as f64))
        .unwrap_or(1.0)
        .max(1.0);
    let pct = |a: Option<u64>, b: Option<u64>| {
        let delta = a.unwrap_or(0) as f64 - b.unwrap_or(0) as f64;
        if system > 0.0 && delta > 0.0 {
            delta / system * cores * 100.0
        } else {
            0.0
        }
    };
    (
        pct(u_now.total_usage, u_before.total_usage),
        pct(u_now.usage_in_kernelmode, u_before.usage_in_kernelmode),
        pct(u_now.usage_in_usermode, u_before.usage_in_usermode),
    )
}

/// The task's usage from one stats answer; `cpu_total_mhz` is the node's.
pub fn task_usage(s: &ContainerStatsResponse, cpu_total_mhz: u64) -> TaskResourceUsage {
    let mem = s.memory_stats.clone().unwrap_or_default();
    let detail = mem.stats.clone().unwrap_or_default();
    let get = |k: &str| detail.get(k).copied().unwrap_or(0);
    // cgroup v1 names RSS `rss`, v2 `anon`.
    let rss = detail
        .get("rss")
        .or_else(|| detail.get("anon"))
        .copied()
        .unwrap_or(0);
    let cache = detail
        .get("cache")
        .or_else(|| detail.get("file"))
        .copied()
        .unwrap_or(0);
    let memory = MemoryUsage {
        rss,
        cache,
        swap: get("swap"),
        mapped_file: get("mapped_file"),
        usage: mem.usage.unwrap_or(0),
        max_usage: mem.max_usage.unwrap_or(0),
        measured: ["RSS", "Cache", "Swap", "Usage", "Max Usage"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    };
    let now = s.cpu_stats.clone().unwrap_or_default();
    let before = s.precpu_stats.clone().unwrap_or_default();
    let (percent, system, user) = cpu_percent(&now, &before);
    let host_cores = now.online_cpus.map(f64::from).unwrap_or(1.0).max(1.0);
    let throttling = now.throttling_data.clone().unwrap_or_default();
    let cpu = CpuUsage {
        system_mode: system,
        user_mode: user,
        percent,
        total_ticks: percent / 100.0 * cpu_total_mhz as f64 / host_cores,
        throttled_periods: throttling.throttled_periods.unwrap_or(0),
        throttled_time: throttling.throttled_time.unwrap_or(0),
        measured: [
            "Throttled Periods",
            "Throttled Time",
            "Percent",
            "System Mode",
            "User Mode",
        ]
        .map(String::from)
        .to_vec(),
    };
    TaskResourceUsage {
        resource_usage: Some(ResourceUsage {
            memory_stats: Some(memory),
            cpu_stats: Some(cpu),
        }),
        timestamp: now_unix_ns(),
        pids: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerCpuUsage, ContainerMemoryStats};

    #[test]
    fn cpu_is_the_share_of_the_host_between_samples() {
        let cpu = |total: u64, system: u64| ContainerCpuStats {
            cpu_usage: Some(ContainerCpuUsage {
                total_usage: Some(total),
                usage_in_usermode: Some(total),
                ..Default::default()
            }),
            system_cpu_usage: Some(system),
            online_cpus: Some(2),
            ..Default::default()
        };
        let s = ContainerStatsResponse {
            cpu_stats: Some(cpu(1_500, 10_000)),
            precpu_stats: Some(cpu(1_000, 8_000)),
            memory_stats: Some(ContainerMemoryStats {
                usage: Some(4096),
                stats: Some([("rss".to_string(), 1024u64)].into_iter().collect()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let u = task_usage(&s, 4000);
        let r = u.resource_usage.unwrap();
        let c = r.cpu_stats.unwrap();
        // 500 of 2,000 ns of two cores: half a core.
        assert!((c.percent - 50.0).abs() < 1e-9, "{c:?}");
        assert!((c.total_ticks - 1000.0).abs() < 1e-9, "{c:?}");
        let m = r.memory_stats.unwrap();
        assert_eq!((m.rss, m.usage), (1024, 4096));
    }
}
