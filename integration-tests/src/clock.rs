//! A wall clock that steps, for one service process: the process runs with
//! Debian's libfaketime preloaded, reading its clock offset from a file the
//! test rewrites, and only its wall clock moves (`CLOCK_REALTIME`, what
//! `SystemTime::now` reads). Its monotonic clock, which `Instant` and every
//! tokio timer read, runs on untouched, as on a machine whose NTP daemon
//! steps the time. etcd and the other processes keep the real time.

use std::path::{Path, PathBuf};

/// Where Debian's `libfaketime` package puts the library.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The offset file of one process's stepped clock.
#[derive(Debug)]
pub struct SteppedClock {
    file: PathBuf,
    offset_secs: i64,
}

impl SteppedClock {
    /// A clock at the real time whose offset lives in `dir/<name>.faketime`.
    /// Fails, naming the package, when libfaketime is not installed.
    pub fn new(dir: &Path, name: &str) -> anyhow::Result<SteppedClock> {
        if !Path::new(LIBFAKETIME).exists() {
            anyhow::bail!(
                "{LIBFAKETIME} is missing: install Debian's faketime package (scripts/lib.sh ensure_packages does)"
            );
        }
        let mut clock = SteppedClock {
            file: dir.join(format!("{name}.faketime")),
            offset_secs: 0,
        };
        clock.set_offset(0)?;
        Ok(clock)
    }

    /// The environment that runs a process on this clock (for
    /// [`crate::Cluster::env_for_next_start`]).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("LD_PRELOAD", LIBFAKETIME.to_string()),
            ("FAKETIME_TIMESTAMP_FILE", self.file.display().to_string()),
            // The file is read at every wall-clock read (about 2 µs here,
            // against 20 ns; the monotonic clock does not pay it), so a step
            // lands at once: the library's cache would land it up to two
            // seconds later, at a moment the test cannot know.
            ("FAKETIME_NO_CACHE", "1".to_string()),
            // A step of the wall clock only, as NTP makes it.
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// How far the clock is from the real time now, in seconds.
    pub fn offset_secs(&self) -> i64 {
        self.offset_secs
    }

    /// Steps the clock by `secs` (negative: back), from the process's next
    /// wall-clock read on.
    pub fn step(&mut self, secs: i64) -> anyhow::Result<()> {
        self.set_offset(self.offset_secs + secs)
    }

    /// Sets the clock `secs` from the real time. The file is replaced by a
    /// rename, so the process never reads half of it.
    pub fn set_offset(&mut self, secs: i64) -> anyhow::Result<()> {
        let tmp = self.file.with_extension("faketime.new");
        std::fs::write(&tmp, format!("{secs:+}s\n"))
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &self.file)
            .map_err(|e| anyhow::anyhow!("renaming to {}: {e}", self.file.display()))?;
        self.offset_secs = secs;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_file_holds_a_signed_relative_offset() {
        // Built directly: the file's format needs no library installed.
        let dir = tempfile::tempdir().unwrap();
        let mut clock = SteppedClock {
            file: dir.path().join("p.faketime"),
            offset_secs: 0,
        };
        clock.step(300).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "+300s\n");
        clock.step(-600).unwrap();
        assert_eq!(std::fs::read_to_string(&clock.file).unwrap(), "-300s\n");
        assert_eq!(clock.offset_secs(), -300);
        let env = clock.env();
        assert!(
            env.iter()
                .any(|(k, v)| k == "FAKETIME_DONT_FAKE_MONOTONIC" && v == "1")
        );
    }
}
