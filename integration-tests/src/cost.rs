//! What a process has cost so far, read from `/proc`: CPU time (user and
//! system) and peak resident memory.

use std::time::Duration;

use nix::unistd::{SysconfVar, sysconf};

/// One reading of a process's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessCost {
    /// User plus system CPU time since the process started.
    pub cpu: Duration,
    /// Peak resident set size (`VmHWM`), in bytes.
    pub peak_rss_bytes: u64,
}

/// Why a process's counters could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// The `/proc` file is gone (the process exited) or unreadable.
    #[error("reading /proc/{pid}/{file}: {source}")]
    Read {
        /// The process.
        pid: u32,
        /// `stat` or `status`.
        file: &'static str,
        /// What the read reported.
        #[source]
        source: std::io::Error,
    },
    /// The file did not have the expected shape.
    #[error("/proc/{pid}/{file}: {what}")]
    Malformed {
        /// The process.
        pid: u32,
        /// `stat` or `status`.
        file: &'static str,
        /// What was missing.
        what: &'static str,
    },
}

impl ProcessCost {
    /// Reads the counters of process `pid`.
    pub fn read(pid: u32) -> Result<ProcessCost, CostError> {
        let read = |file: &'static str| {
            std::fs::read_to_string(format!("/proc/{pid}/{file}"))
                .map_err(|source| CostError::Read { pid, file, source })
        };
        let malformed = |file, what| CostError::Malformed { pid, file, what };
        let ticks = cpu_ticks(&read("stat")?).ok_or_else(|| malformed("stat", "utime/stime"))?;
        let peak_kib =
            peak_rss_kib(&read("status")?).ok_or_else(|| malformed("status", "VmHWM"))?;
        Ok(ProcessCost {
            cpu: Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second()),
            peak_rss_bytes: peak_kib * 1024,
        })
    }

    /// The CPU used since `earlier`, with the peak of the later reading.
    pub fn since(&self, earlier: &ProcessCost) -> ProcessCost {
        ProcessCost {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            peak_rss_bytes: self.peak_rss_bytes.max(earlier.peak_rss_bytes),
        }
    }
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in clock ticks.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name is parenthesised and may hold spaces: count fields
    // after its closing parenthesis, where the state (field 3) comes first.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), i.e. 11 and 12 after
    // the state.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmHWM` of a `/proc/<pid>/status`, in KiB.
fn peak_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `sysconf(_SC_CLK_TCK)`, the unit of the stat file's times.
fn clock_ticks_per_second() -> f64 {
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        // Linux has reported 100 on every architecture for decades.
        _ => 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "1234 (tokio rt) S 1 1234 1234 0 -1 4194560 500 0 0 0 \
                    250 75 0 0 20 0 8 0 100 123456 789 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn parses_vmhwm() {
        let status = "Name:\tetcd\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(peak_rss_kib(status), Some(51200));
        assert_eq!(peak_rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn reads_this_process() {
        let cost = ProcessCost::read(std::process::id()).expect("own /proc entry");
        assert!(cost.peak_rss_bytes > 0);
        let later = ProcessCost::read(std::process::id()).expect("own /proc entry");
        assert!(later.since(&cost).cpu <= later.cpu);
    }
}
