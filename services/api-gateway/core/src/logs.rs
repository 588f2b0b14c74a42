//! Task logs: found on the client node running the allocation and streamed
//! through the gateway from that node's own API.

use caravan_proto::{LogChunk, ReadLogsRequest};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// The log streams a task has.
pub const STREAMS: [&str; 2] = ["stdout", "stderr"];

/// Checks a log request, defaulting the stream to stdout.
pub fn validate(mut request: ReadLogsRequest) -> Result<ReadLogsRequest> {
    if request.alloc_id.is_empty() {
        return Err(GatewayError::field("alloc_id", "missing allocation ID"));
    }
    if request.task.is_empty() {
        return Err(GatewayError::field("task", "must include task name"));
    }
    if request.stream.is_empty() {
        request.stream = "stdout".into();
    }
    if !STREAMS.contains(&request.stream.as_str()) {
        return Err(GatewayError::field(
            "type",
            format!("must be stdout or stderr, not {:?}", request.stream),
        ));
    }
    // A negative offset counts back from the log's end; so does a positive
    // one from the end.
    if request.from_end && request.offset < 0 {
        return Err(GatewayError::field(
            "offset",
            "must not be negative when read from the end",
        ));
    }
    Ok(request)
}

/// Opens the log stream of a task on the node running its allocation.
pub async fn read_logs(
    gw: &Gateway,
    request: ReadLogsRequest,
) -> Result<tonic::Streaming<LogChunk>> {
    let request = validate(request)?;
    let snap = gw.cache.snapshot();
    let alloc = snap
        .alloc(&request.alloc_id)
        .ok_or_else(|| GatewayError::NotFound(format!("alloc not found: {}", request.alloc_id)))?;
    let group = snap
        .job_version(&alloc.namespace, &alloc.job_id, alloc.job_version)
        .or_else(|| snap.job(&alloc.namespace, &alloc.job_id))
        .and_then(|job| {
            job.task_groups
                .iter()
                .find(|tg| tg.name == alloc.task_group)
                .cloned()
        });
    if let Some(group) = group
        && !group.tasks.iter().any(|t| t.name == request.task)
    {
        return Err(GatewayError::field(
            "task",
            format!("unknown task name {:?}", request.task),
        ));
    }
    let node = snap
        .node(&alloc.node_id)
        .ok_or_else(|| GatewayError::NotFound(format!("node not found: {}", alloc.node_id)))?;
    let mut client = crate::client_fs::dial(node)?;
    let stream = client
        .read_logs(request)
        .await
        .map_err(GatewayError::Upstream)?;
    Ok(stream.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked() {
        let ok = ReadLogsRequest {
            alloc_id: "a".into(),
            task: "t".into(),
            ..Default::default()
        };
        assert_eq!(validate(ok.clone()).unwrap().stream, "stdout");
        let bad = ReadLogsRequest {
            stream: "stdin".into(),
            ..ok.clone()
        };
        assert!(validate(bad).unwrap_err().to_string().starts_with("type"));
        let bad = ReadLogsRequest {
            task: String::new(),
            ..ok.clone()
        };
        assert!(validate(bad).unwrap_err().to_string().starts_with("task"));
        let from_end = ReadLogsRequest { offset: -1, ..ok };
        assert_eq!(validate(from_end).unwrap().offset, -1);
    }
}
