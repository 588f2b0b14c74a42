//! Task logs: reads a task's stdout or stderr file from an offset, and
//! follows it as it grows.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_proto::{LogChunk, ReadLogsRequest};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::alloc_dir::{check_segment, log_path};
use crate::error::ClientError;

/// Largest chunk sent at once.
pub const CHUNK: usize = 64 * 1024;
/// How often a followed file is checked for growth.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// A validated request for one log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    /// The file.
    pub path: PathBuf,
    /// Where to start: from the start when ≥ 0, from the end when < 0.
    pub offset: i64,
    /// Keep sending what is appended.
    pub follow: bool,
}

impl LogRequest {
    /// Checks the request's fields and finds the file under `data_dir`.
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
        let path = log_path(data_dir, &req.alloc_id, &req.task, stream);
        if !path.exists() {
            let alloc_dir = data_dir.join("allocs").join(&req.alloc_id);
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
            path,
            offset: req.offset,
            follow: req.follow,
        })
    }
}

/// Sends the file's chunks into `out` until the end (or, when following,
/// until `out` closes or `stop` fires).
pub async fn stream_log(
    req: LogRequest,
    out: mpsc::Sender<Result<LogChunk, tonic::Status>>,
    stop: CancellationToken,
) {
    let mut file = match tokio::fs::File::open(&req.path).await {
        Ok(f) => f,
        Err(e) => {
            let _ = out
                .send(Err(ClientError::io("open", &req.path, e).into()))
                .await;
            return;
        }
    };
    let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    let start = if req.offset >= 0 {
        u64::try_from(req.offset).unwrap_or(0).min(len)
    } else {
        len.saturating_sub(req.offset.unsigned_abs())
    };
    let mut pos = start;
    if let Err(e) = file.seek(SeekFrom::Start(pos)).await {
        let _ = out
            .send(Err(ClientError::io("seek", &req.path, e).into()))
            .await;
        return;
    }
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut buf).await {
            Ok(n) => n,
            Err(e) => {
                let _ = out
                    .send(Err(ClientError::io("read", &req.path, e).into()))
                    .await;
                return;
            }
        };
        if n > 0 {
            let chunk = LogChunk {
                data: buf[..n].to_vec(),
                offset: i64::try_from(pos).unwrap_or(i64::MAX),
            };
            pos += n as u64;
            if out.send(Ok(chunk)).await.is_err() {
                return;
            }
            continue;
        }
        if !req.follow {
            return;
        }
        // A file truncated under us starts over from its new end.
        if let Ok(m) = tokio::fs::metadata(&req.path).await
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

    #[tokio::test]
    async fn reads_from_offsets_and_follows_growth() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_path(dir.path(), "a", "t", "stdout");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"hello world\n").unwrap();
        let collect = |offset: i64| {
            let r = LogRequest {
                path: path.clone(),
                offset,
                follow: false,
            };
            async move {
                let (tx, mut rx) = mpsc::channel(8);
                stream_log(r, tx, CancellationToken::new()).await;
                let mut out = Vec::new();
                while let Some(c) = rx.recv().await {
                    out.extend(c.unwrap().data);
                }
                String::from_utf8(out).unwrap()
            }
        };
        assert_eq!(collect(0).await, "hello world\n");
        assert_eq!(collect(6).await, "world\n");
        assert_eq!(collect(-6).await, "world\n");
        assert_eq!(collect(1000).await, "");

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
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"more\n").unwrap();
        let second = rx.recv().await.unwrap().unwrap();
        assert_eq!(second.data, b"more\n");
        assert_eq!(second.offset, 12);
        stop.cancel();
        task.await.unwrap();
    }
}
