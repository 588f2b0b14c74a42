//! Task logs: found on the client node running the allocation and streamed
//! through the gateway from that node's own API.

use caravan_proto::client_node_service_client::ClientNodeServiceClient;
use caravan_proto::{LogChunk, ReadLogsRequest};
use caravan_runtime::grpc::{channel, propagate_trace};

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
    if request.offset < 0 {
        return Err(GatewayError::field("offset", "must not be negative"));
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
    if node.http_addr.is_empty() {
        return Err(GatewayError::Unavailable(format!(
            "node {} does not serve a client API",
            node.id
        )));
    }
    let ch = channel(&node.http_addr).map_err(|e| {
        GatewayError::Unavailable(format!(
            "client node {} at {}: {e}",
            node.id, node.http_addr
        ))
    })?;
    let mut client = ClientNodeServiceClient::with_interceptor(ch, propagate_trace);
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
        let bad = ReadLogsRequest { offset: -1, ..ok };
        assert!(validate(bad).unwrap_err().to_string().starts_with("offset"));
    }
}
