//! `GET /v1/client/fs/logs/:alloc_id`: a task's log, proxied from its node,
//! as raw bytes (`plain=true`) or Nomad's stream frames.

use axum::body::Body;
use axum::extract::{Path, Query as QueryString, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use base64::Engine;
use caravan_proto::ReadLogsRequest;
use futures::StreamExt;
use serde_json::json;

use crate::{ApiError, ApiResult, Http, Params, flag, params};
use caravan_gateway_core::logs;

/// Streams a task's log.
pub(crate) async fn logs(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let offset = params::integer(&p, "offset", "offset")?.unwrap_or(0);
    let from_end = match p.get("origin").map(String::as_str) {
        None | Some("start") => false,
        Some("end") => true,
        Some(other) => {
            return Err(ApiError::field(
                "origin",
                format!("must be start or end, not {other:?}"),
            ));
        }
    };
    let stream_name = p.get("type").cloned().unwrap_or_default();
    let task = p.get("task").cloned().unwrap_or_default();
    let request = ReadLogsRequest {
        alloc_id,
        task: task.clone(),
        stream: stream_name,
        follow: flag(&p, "follow")?,
        offset,
        from_end,
    };
    let plain = flag(&p, "plain")?;
    let request = logs::validate(request)?;
    let file = format!("alloc/logs/{task}.{}.0", request.stream);
    let chunks = logs::read_logs(&http.gw, request).await?;
    let body = if plain {
        Body::from_stream(chunks.map(|c| c.map(|chunk| chunk.data)))
    } else {
        Body::from_stream(chunks.map(move |c| {
            c.map(|chunk| {
                // A task's log is rotated: each chunk says which file it is from.
                let frame = json!({
                    "Offset": chunk.offset,
                    "Data": base64::engine::general_purpose::STANDARD.encode(&chunk.data),
                    "File": if chunk.file.is_empty() { file.as_str() } else { chunk.file.as_str() },
                });
                frame.to_string().into_bytes()
            })
        }))
    };
    let mut response = body.into_response();
    let content_type = if plain {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(response)
}
