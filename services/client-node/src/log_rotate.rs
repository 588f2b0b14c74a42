//! Task log files rotated as Nomad's logmon rotates them: a stream's output
//! goes to `<task>.<stream>.<index>` in `alloc/logs/`; when a file reaches
//! the size limit the next index starts, and only the newest `max_files`
//! files of the stream are kept.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a task's logs are kept (the job's `logs` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Files kept per stream.
    pub max_files: u32,
    /// Size at which a file is rotated, in bytes.
    pub max_file_bytes: u64,
    /// Keep no output at all.
    pub disabled: bool,
}

const MB: u64 = 1024 * 1024;

impl Default for LogLimits {
    /// Nomad's defaults: 10 files of 10 MB.
    fn default() -> Self {
        LogLimits {
            max_files: 10,
            max_file_bytes: 10 * MB,
            disabled: false,
        }
    }
}

impl LogLimits {
    /// The limits a task's `logs` block asks for (validated jobs have
    /// positive ones; anything else falls back to the smallest).
    pub fn of(config: Option<&caravan_proto::LogConfig>) -> Self {
        config.map_or_else(LogLimits::default, |c| LogLimits {
            max_files: u32::try_from(c.max_files).unwrap_or(1).max(1),
            max_file_bytes: u64::try_from(c.max_file_size_mb).unwrap_or(1).max(1) * MB,
            disabled: c.disabled,
        })
    }
}

/// The indices of a stream's log files in `dir`, oldest first.
pub fn indices(dir: &Path, task: &str, stream: &str) -> Vec<u64> {
    let prefix = format!("{task}.{stream}.");
    let mut out: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let rest = name.to_str()?.strip_prefix(&prefix)?;
            rest.parse().ok()
        })
        .collect();
    out.sort_unstable();
    out
}

/// The file of a stream's log with `index`.
pub fn file_path(dir: &Path, task: &str, stream: &str, index: u64) -> PathBuf {
    dir.join(format!("{task}.{stream}.{index}"))
}

/// One stream's log, written through rotation.
#[derive(Debug)]
pub struct RotatingLog {
    dir: PathBuf,
    task: String,
    stream: String,
    limits: LogLimits,
    index: u64,
    file: File,
    size: u64,
}

impl RotatingLog {
    /// Opens the stream's newest file for appending (a task restarted in the
    /// same alloc continues where the last run stopped).
    pub fn open(
        dir: &Path,
        task: &str,
        stream: &str,
        limits: LogLimits,
    ) -> std::io::Result<RotatingLog> {
        let limits = LogLimits {
            max_files: limits.max_files.max(1),
            max_file_bytes: limits.max_file_bytes.max(1),
            ..limits
        };
        let index = indices(dir, task, stream).last().copied().unwrap_or(0);
        let file = append(&file_path(dir, task, stream, index))?;
        let size = file.metadata()?.len();
        let log = RotatingLog {
            dir: dir.to_path_buf(),
            task: task.to_string(),
            stream: stream.to_string(),
            limits,
            index,
            file,
            size,
        };
        log.prune();
        Ok(log)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.index += 1;
        self.file = append(&file_path(&self.dir, &self.task, &self.stream, self.index))?;
        self.size = self.file.metadata()?.len();
        self.prune();
        Ok(())
    }

    /// Deletes the files older than the newest `max_files`.
    fn prune(&self) {
        let keep_from = (self.index + 1).saturating_sub(u64::from(self.limits.max_files));
        for i in indices(&self.dir, &self.task, &self.stream) {
            if i >= keep_from {
                break;
            }
            let path = file_path(&self.dir, &self.task, &self.stream, i);
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove an old log file");
            }
        }
    }

    /// Appends `buf`, starting new files as each fills up.
    pub fn write_all(&mut self, mut buf: &[u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            let room = self.limits.max_file_bytes.saturating_sub(self.size);
            if room == 0 {
                self.rotate()?;
                continue;
            }
            let n = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
            self.file.write_all(&buf[..n])?;
            self.size += n as u64;
            buf = &buf[n..];
        }
        Ok(())
    }
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_max_files_none_bigger_than_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let limits = LogLimits {
            max_files: 3,
            max_file_bytes: 100,
            disabled: false,
        };
        let mut log = RotatingLog::open(dir.path(), "web", "stdout", limits).unwrap();
        for _ in 0..50 {
            log.write_all(&[b'x'; 37]).unwrap();
        }
        // 1850 bytes: files 0..=18, the last three kept.
        assert_eq!(indices(dir.path(), "web", "stdout"), vec![16, 17, 18]);
        for i in [16, 17, 18] {
            let len = std::fs::metadata(file_path(dir.path(), "web", "stdout", i))
                .unwrap()
                .len();
            assert!(len <= 100, "{i}: {len}");
        }
        assert!(indices(dir.path(), "web", "stderr").is_empty());
        // Reopening continues with the newest file.
        drop(log);
        let mut log = RotatingLog::open(dir.path(), "web", "stdout", limits).unwrap();
        log.write_all(&[b'y'; 60]).unwrap();
        assert_eq!(indices(dir.path(), "web", "stdout"), vec![17, 18, 19]);
    }

    #[test]
    fn limits_come_from_the_logs_block() {
        assert_eq!(LogLimits::of(None), LogLimits::default());
        let l = LogLimits::of(Some(&caravan_proto::LogConfig {
            max_files: 2,
            max_file_size_mb: 3,
            disabled: true,
        }));
        assert_eq!(
            l,
            LogLimits {
                max_files: 2,
                max_file_bytes: 3 * MB,
                disabled: true
            }
        );
    }
}
