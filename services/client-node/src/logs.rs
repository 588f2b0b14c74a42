//! Task logs: reads a task's stdout or stderr from an offset across its
//! rotated files (`<task>.<stream>.<index>`, in index order, as Nomad's logs
//! API reads them), and follows them as they grow and rotate.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_proto::{LogChunk, ReadLogsRequest};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::alloc_dir::{allocs_root, check_segment};
use crate::error::ClientError;
use crate::log_rotate::{file_path, indices};

/// Largest chunk sent at once.
pub const CHUNK: usize = 64 * 1024;
/// How often a followed file is checked for growth.
pub(crate) const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// A validated request for one stream of a task's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    /// `alloc/logs` of the alloc.
    pub dir: PathBuf,
    /// The task.
    pub task: String,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// Where to start: from the start when ≥ 0, from the end when < 0.
    pub offset: i64,
    /// `offset` counts back from the end, whatever its sign.
    pub from_end: bool,
    /// Keep sending what is appended.
    pub follow: bool,
}

impl LogRequest {
    /// Checks the request's fields and finds the log under `data_dir`.
    pub fn parse(data_dir: &Path, req: &ReadLogsRequest) -> Result<LogRequest, ClientError> {
        check_segment("alloc_id", &req.alloc_id)?;
        check_segment("task", &req.task)?;
        let stream = if req.stream.is_empty() {
            "stdout"
        } else {
            req.stream.as_str()
        };
        if stream != "stdout" && stream != "stderr" {
            return Err(ClientError::invalid(
                "stream",
                format!("{stream:?} is neither stdout nor stderr"),
            ));
        }
        let alloc_dir = allocs_root(data_dir).join(&req.alloc_id);
        let dir = alloc_dir.join("alloc").join("logs");
        if indices(&dir, &req.task, stream).is_empty() {
            return Err(ClientError::NotFound(if alloc_dir.exists() {
                format!(
                    "{stream} log of task {:?} in alloc {}",
                    req.task, req.alloc_id
                )
            } else {
                format!("alloc {} on this node", req.alloc_id)
            }));
        }
        Ok(LogRequest {
            dir,
            task: req.task.clone(),
            stream: stream.to_string(),
            offset: req.offset,
            from_end: req.from_end,
            follow: req.follow,
        })
    }

    fn path(&self, index: u64) -> PathBuf {
        file_path(&self.dir, &self.task, &self.stream, index)
    }

    /// The file's name as the logs API shows it, relative to the alloc dir.
    fn shown(&self, index: u64) -> String {
        format!("alloc/logs/{}.{}.{index}", self.task, self.stream)
    }

    /// The newest index after `index`, if the log has rotated past it.
    fn next_after(&self, index: u64) -> Option<u64> {
        indices(&self.dir, &self.task, &self.stream)
            .into_iter()
            .find(|i| *i > index)
    }

    /// The file and position the offset points at, across the files there are.
    fn start(&self) -> (u64, u64) {
        let files: Vec<(u64, u64)> = indices(&self.dir, &self.task, &self.stream)
            .into_iter()
            .map(|i| {
                let len = std::fs::metadata(self.path(i)).map_or(0, |m| m.len());
                (i, len)
            })
            .collect();
        let (Some(&(first, _)), Some(&(last, last_len))) = (files.first(), files.last()) else {
            return (0, 0);
        };
        if self.offset >= 0 && !self.from_end {
            let mut skip = self.offset.unsigned_abs();
            for &(i, len) in &files {
                if skip < len {
                    return (i, skip);
                }
                skip -= len;
            }
            (last, last_len)
        } else {
            let mut back = self.offset.unsigned_abs();
            for &(i, len) in files.iter().rev() {
                if back <= len {
                    return (i, len - back);
                }
                back -= len;
            }
            (first, 0)
        }
    }
}

async fn fail(out: &mpsc::Sender<Result<LogChunk, tonic::Status>>, e: ClientError) {
    let _ = out.send(Err(e.into())).await;
}

/// Sends the log's chunks into `out` until its end (or, when following,
/// until `out` closes or `stop` fires).
pub async fn stream_log(
    req: LogRequest,
    out: mpsc::Sender<Result<LogChunk, tonic::Status>>,
    stop: CancellationToken,
) {
    let (mut index, mut pos) = req.start();
    let mut buf = vec![0u8; CHUNK];
    'files: loop {
        let path = req.path(index);
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            // Rotated away before we got to it: go on with the next one.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match req.next_after(index) {
                Some(next) => {
                    (index, pos) = (next, 0);
                    continue 'files;
                }
                None => return fail(&out, ClientError::io("open", &path, e)).await,
            },
            Err(e) => return fail(&out, ClientError::io("open", &path, e)).await,
        };
        if let Err(e) = file.seek(SeekFrom::Start(pos)).await {
            return fail(&out, ClientError::io("seek", &path, e)).await;
        }
        // Whether a newer file was seen: what is left in this one is all it gets.
        let mut rotated = None;
        loop {
            let n = match file.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => return fail(&out, ClientError::io("read", &path, e)).await,
            };
            if n > 0 {
                let chunk = LogChunk {
                    data: buf[..n].to_vec(),
                    offset: i64::try_from(pos).unwrap_or(i64::MAX),
                    file: req.shown(index),
                };
                pos += n as u64;
                if out.send(Ok(chunk)).await.is_err() {
                    return;
                }
                continue;
            }
            if let Some(next) = rotated {
                (index, pos) = (next, 0);
                continue 'files;
            }
            if let Some(next) = req.next_after(index) {
                // Read this one to its end once more, then move on.
                rotated = Some(next);
                continue;
            }
            if !req.follow {
                return;
            }
            // A file truncated under us starts over from its new end.
            if let Ok(m) = tokio::fs::metadata(&path).await
                && m.len() < pos
            {
                pos = m.len();
                if file.seek(SeekFrom::Start(pos)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
                _ = out.closed() => return,
                _ = stop.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(alloc: &str, task: &str, stream: &str) -> ReadLogsRequest {
        ReadLogsRequest {
            alloc_id: alloc.into(),
            task: task.into(),
            stream: stream.into(),
            follow: false,
            offset: 0,
            from_end: false,
        }
    }

    #[test]
    fn bad_requests_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let e = LogRequest::parse(dir.path(), &req("a", "t", "stdin")).unwrap_err();
        assert!(e.to_string().starts_with("stream"), "{e}");
        let e = LogRequest::parse(dir.path(), &req("../x", "t", "stdout")).unwrap_err();
        assert!(e.to_string().starts_with("alloc_id"), "{e}");
        let e = LogRequest::parse(dir.path(), &req("a", "t", "stdout")).unwrap_err();
        assert!(matches!(e, ClientError::NotFound(_)));
    }

    async fn collect(r: LogRequest) -> (String, Vec<(String, i64)>) {
        let (tx, mut rx) = mpsc::channel(8);
        stream_log(r, tx, CancellationToken::new()).await;
        let mut out = Vec::new();
        let mut at = Vec::new();
        while let Some(c) = rx.recv().await {
            let c = c.unwrap();
            at.push((c.file.clone(), c.offset));
            out.extend(c.data);
        }
        (String::from_utf8(out).unwrap(), at)
    }

    fn logs_dir(data: &Path) -> PathBuf {
        let dir = allocs_root(data).join("a/alloc/logs");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn reads_from_offsets_and_follows_growth() {
        let dir = tempfile::tempdir().unwrap();
        let path = logs_dir(dir.path()).join("t.stdout.0");
        std::fs::write(&path, b"hello world\n").unwrap();
        let at = |offset: i64| {
            let mut r = LogRequest::parse(dir.path(), &req("a", "t", "stdout")).unwrap();
            r.offset = offset;
            r
        };
        assert_eq!(collect(at(0)).await.0, "hello world\n");
        assert_eq!(collect(at(6)).await.0, "world\n");
        assert_eq!(collect(at(-6)).await.0, "world\n");
        assert_eq!(collect(at(1000)).await.0, "");
        let back = |offset: i64| {
            let mut r = at(offset);
            r.from_end = true;
            r
        };
        assert_eq!(collect(back(0)).await.0, "");
        assert_eq!(collect(back(6)).await.0, "world\n");

        let parsed = LogRequest::parse(
            dir.path(),
            &ReadLogsRequest {
                follow: true,
                ..req("a", "t", "")
            },
        )
        .unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let stop = CancellationToken::new();
        let task = tokio::spawn(stream_log(parsed, tx, stop.clone()));
        let first = rx.recv().await.unwrap().unwrap();
        assert_eq!(first.offset, 0);
        assert_eq!(first.file, "alloc/logs/t.stdout.0");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"more\n").unwrap();
        let second = rx.recv().await.unwrap().unwrap();
        assert_eq!(second.data, b"more\n");
        assert_eq!(second.offset, 12);
        // Rotation: the follow moves on to the next file.
        std::fs::write(path.with_extension("1"), b"next\n").unwrap();
        let third = rx.recv().await.unwrap().unwrap();
        assert_eq!(third.data, b"next\n");
        assert_eq!(
            (third.file.as_str(), third.offset),
            ("alloc/logs/t.stdout.1", 0)
        );
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn reads_across_rotated_files_in_index_order() {
        let dir = tempfile::tempdir().unwrap();
        let logs = logs_dir(dir.path());
        // 0 and 1 were rotated away; 10 sorts after 9 by number, not by name.
        for (i, text) in [(2, "aaa"), (9, "bbb"), (10, "cc")] {
            std::fs::write(logs.join(format!("t.stderr.{i}")), text).unwrap();
        }
        let at = |offset: i64| {
            let mut r = LogRequest::parse(dir.path(), &req("a", "t", "stderr")).unwrap();
            r.offset = offset;
            r
        };
        let (all, chunks) = collect(at(0)).await;
        assert_eq!(all, "aaabbbcc");
        assert_eq!(
            chunks,
            vec![
                ("alloc/logs/t.stderr.2".to_string(), 0),
                ("alloc/logs/t.stderr.9".to_string(), 0),
                ("alloc/logs/t.stderr.10".to_string(), 0),
            ]
        );
        assert_eq!(collect(at(4)).await.0, "bbcc");
        assert_eq!(collect(at(-4)).await.0, "bbcc");
        assert_eq!(collect(at(-100)).await.0, "aaabbbcc");
        assert_eq!(collect(at(100)).await.0, "");
    }
}
