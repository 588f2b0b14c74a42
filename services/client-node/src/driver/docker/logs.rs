//! A container's output into the task's rotated log files: the daemon's log
//! stream, followed with timestamps, written to `alloc/logs/<task>.stdout.N`
//! and `.stderr.N` as `raw_exec`'s supervisor writes them, so `alloc logs`
//! reads both alike. The timestamp of the last line written is kept beside
//! the alloc's records: after the daemon or the client went away, the
//! stream is followed again from it, and lines already written are skipped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::daemon::not_found;
use crate::log_rotate::{LogLimits, RotatingLog};

/// How often the cursor is written while lines come.
const CURSOR_EVERY: Duration = Duration::from_secs(1);
/// Between attempts to follow again while the daemon does not answer.
const RETRY: Duration = Duration::from_millis(500);
/// How long a followed stream may bring nothing new before it is followed
/// again from the cursor, doubling while nothing new comes, up to the
/// second bound. The daemon's follow of a json-file log can miss the end of
/// a burst (it waits for a write notification it missed): a container that
/// then goes quiet would keep its last lines from the task's logs until it
/// writes again.
const IDLE_FIRST: Duration = Duration::from_secs(2);
const IDLE_MOST: Duration = Duration::from_secs(60);

/// Where a task's logs go.
#[derive(Debug, Clone)]
pub struct LogTarget {
    /// `alloc/logs`.
    pub dir: PathBuf,
    /// The task (the files' prefix).
    pub task: String,
    /// Rotation.
    pub limits: LogLimits,
    /// Where the last line's timestamp is kept.
    pub cursor: PathBuf,
}

/// A point in a container's log: its id and a line's timestamp, in
/// nanoseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    container: String,
    at_ns: i128,
}

impl Cursor {
    fn read(path: &PathBuf, container: &str) -> Option<i128> {
        let text = std::fs::read_to_string(path).ok()?;
        let (id, at) = text.trim().split_once(' ')?;
        (id == container).then(|| at.parse().ok()).flatten()
    }

    fn write(&self, path: &PathBuf) {
        let tmp = path.with_extension("tmp");
        let text = format!("{} {}", self.container, self.at_ns);
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
            tracing::debug!(path = %path.display(), error = %e, "cannot keep the log cursor");
        }
    }
}

/// A frame's timestamp (RFC 3339, as `timestamps=true` prefixes each line)
/// and the rest.
fn split_stamp(frame: &[u8]) -> Option<(i128, &[u8])> {
    let space = frame.iter().position(|b| *b == b' ')?;
    let stamp = std::str::from_utf8(&frame[..space]).ok()?;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    let ns = i128::from(at.timestamp()) * 1_000_000_000 + i128::from(at.timestamp_subsec_nanos());
    Some((ns, &frame[space + 1..]))
}

/// Copies the container's output to the task's log files until the
/// container stops (its stream ends and the daemon says it is not running)
/// or `stop` fires.
pub async fn follow(docker: Docker, container: String, target: LogTarget, stop: CancellationToken) {
    let open = |stream: &str| RotatingLog::open(&target.dir, &target.task, stream, target.limits);
    let (mut out, mut err) = match (open("stdout"), open("stderr")) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(container = %container, error = %e, "cannot open the task's logs");
            return;
        }
    };
    let mut last = Cursor::read(&target.cursor, &container).unwrap_or(i128::MIN);
    let mut saved = Instant::now();
    let mut idle = IDLE_FIRST;
    loop {
        let since = if last == i128::MIN {
            0
        } else {
            i32::try_from(last / 1_000_000_000).unwrap_or(0)
        };
        let options = LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            timestamps: true,
            since,
            ..Default::default()
        };
        let mut stream = docker.logs(&container, Some(options));
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                () = tokio::time::sleep(idle) => {
                    idle = (idle * 2).min(IDLE_MOST);
                    break;
                }
                _ = stop.cancelled() => {
                    save(&target, &container, last);
                    return;
                }
            };
            let frame = match item {
                None => break,
                Some(Ok(f)) => f,
                Some(Err(e)) if not_found(&e) => {
                    save(&target, &container, last);
                    return;
                }
                Some(Err(e)) => {
                    tracing::debug!(container = %container, error = %e, "the log stream broke");
                    break;
                }
            };
            let (log, bytes) = match &frame {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    (&mut out, message)
                }
                LogOutput::StdErr { message } => (&mut err, message),
                LogOutput::StdIn { .. } => continue,
            };
            let (at, line) = split_stamp(bytes).unwrap_or((last, bytes.as_ref()));
            if at <= last && last != i128::MIN {
                continue;
            }
            if let Err(e) = log.write_all(line) {
                tracing::warn!(container = %container, error = %e, "cannot write the task's log");
            }
            last = at;
            idle = IDLE_FIRST;
            if saved.elapsed() >= CURSOR_EVERY {
                save(&target, &container, last);
                saved = Instant::now();
            }
        }
        save(&target, &container, last);
        // The stream ends (or idles) when the container stops, or when the
        // daemon went away: only the daemon's word ends the copy.
        loop {
            match docker.inspect_container(&container, None).await {
                Ok(c) if c.state.as_ref().and_then(|s| s.running) == Some(true) => break,
                Ok(_) => return,
                Err(e) if not_found(&e) => return,
                Err(_) => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = stop.cancelled() => return,
            }
        }
    }
}

fn save(target: &LogTarget, container: &str, last: i128) {
    if last != i128::MIN {
        Cursor {
            container: container.to_string(),
            at_ns: last,
        }
        .write(&target.cursor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_timestamp() {
        let (at, rest) = split_stamp(b"2024-11-26T03:45:54.000000123Z hello\n").unwrap();
        assert_eq!(at % 1_000_000_000, 123);
        assert_eq!(rest, b"hello\n");
        let (later, _) = split_stamp(b"2024-11-26T03:45:55Z x").unwrap();
        assert!(later > at);
        assert!(split_stamp(b"no stamp here").is_none());
    }

    #[test]
    fn the_cursor_belongs_to_one_container() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".t.docker-logs");
        Cursor {
            container: "c1".into(),
            at_ns: 42,
        }
        .write(&path);
        assert_eq!(Cursor::read(&path, "c1"), Some(42));
        assert_eq!(Cursor::read(&path, "c2"), None);
    }
}
