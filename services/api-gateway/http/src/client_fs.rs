//! Nomad's client endpoints served by the node running an allocation: the
//! alloc file system (`/v1/client/fs/{ls,stat,cat,readat,stream}`), resource
//! usage (`/v1/client/stats`, `/v1/client/allocation/:id/stats`) and alloc
//! lifecycle (`signal`, `restart`, `gc`, `/v1/client/gc`).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query as QueryString, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use base64::Engine;
use caravan_proto::{
    AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage, AllocStatsRequest,
    CpuUsage, GcAllocRequest, GcNodeRequest, HostDiskStats, HostStats, HostStatsRequest,
    MemoryUsage, ReadAllocFileRequest, ResourceUsage, RestartAllocRequest, SignalAllocRequest,
};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use crate::render::time;
use crate::{
    ApiError, ApiResult, Http, Params, bool_field, flag, optional_body, params, text_field,
};
use caravan_gateway_core::client_fs;

/// The routes of this module.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/client/fs/ls/{alloc_id}", get(ls))
        .route("/v1/client/fs/stat/{alloc_id}", get(stat))
        .route("/v1/client/fs/cat/{alloc_id}", get(cat))
        .route("/v1/client/fs/readat/{alloc_id}", get(readat))
        .route("/v1/client/fs/stream/{alloc_id}", get(stream))
        .route("/v1/client/stats", get(host_stats))
        .route("/v1/client/allocation/{alloc_id}/stats", get(alloc_stats))
        .route(
            "/v1/client/allocation/{alloc_id}/signal",
            post(signal).put(signal),
        )
        .route(
            "/v1/client/allocation/{alloc_id}/restart",
            post(restart).put(restart),
        )
        .route(
            "/v1/client/allocation/{alloc_id}/gc",
            get(gc_alloc).post(gc_alloc).put(gc_alloc),
        )
        .route("/v1/client/gc", get(gc_node).post(gc_node).put(gc_node))
        .route("/v1/client/fs/ls/", any(no_alloc_id))
        .route("/v1/client/fs/stat/", any(no_alloc_id))
        .route("/v1/client/fs/cat/", any(no_alloc_id))
        .route("/v1/client/fs/readat/", any(no_alloc_id))
        .route("/v1/client/fs/stream/", any(no_alloc_id))
}

/// Nomad's answer to a file system path without an alloc id.
async fn no_alloc_id() -> ApiResult {
    Err(ApiError::field("alloc_id", "must provide a valid alloc id"))
}

fn json_response(body: Value) -> Response {
    axum::Json(body).into_response()
}

/// Nomad's AllocFileInfo.
fn file_info(f: &AllocFileInfo) -> Value {
    let mut v = json!({
        "Name": f.name,
        "IsDir": f.is_dir,
        "Size": f.size,
        "FileMode": f.file_mode,
        "ModTime": time(f.mod_time_unix_ns),
    });
    if !f.content_type.is_empty() {
        v["ContentType"] = json!(f.content_type);
    }
    v
}

fn path_param(p: &Params) -> Result<String, ApiError> {
    match p.get("path") {
        Some(path) if !path.is_empty() => Ok(path.clone()),
        _ => Err(ApiError::field("path", "must provide a file name")),
    }
}

async fn ls(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let path = p
        .get("path")
        .filter(|p| !p.is_empty())
        .cloned()
        .unwrap_or_else(|| "/".into());
    let listed = client_fs::list(&http.gw, AllocPathRequest { alloc_id, path }).await?;
    Ok(json_response(Value::Array(
        listed.files.iter().map(file_info).collect(),
    )))
}

async fn stat(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let path = path_param(&p)?;
    let info = client_fs::stat(&http.gw, AllocPathRequest { alloc_id, path }).await?;
    Ok(json_response(file_info(&info)))
}

/// A file's bytes as they come, as `cat` and `readat` answer.
async fn plain(http: &Http, req: ReadAllocFileRequest) -> ApiResult {
    let chunks = client_fs::read(&http.gw, req).await?;
    let body = Body::from_stream(chunks.map(|c| c.map(|chunk| chunk.data)));
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(response)
}

async fn cat(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let path = path_param(&p)?;
    let req = ReadAllocFileRequest {
        alloc_id,
        path,
        ..Default::default()
    };
    plain(&http, req).await
}

async fn readat(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let path = path_param(&p)?;
    let offset = params::integer(&p, "offset", "offset")?
        .ok_or_else(|| ApiError::field("offset", "error parsing offset: missing"))?;
    let limit = params::integer(&p, "limit", "limit")?.unwrap_or(0);
    let req = ReadAllocFileRequest {
        alloc_id,
        path,
        offset,
        limit,
        ..Default::default()
    };
    plain(&http, req).await
}

/// Nomad's StreamFrame: fields left out when empty.
fn frame(chunk: &AllocFileChunk) -> Vec<u8> {
    let mut f = Map::new();
    if chunk.offset != 0 {
        f.insert("Offset".into(), json!(chunk.offset));
    }
    if !chunk.data.is_empty() {
        f.insert(
            "Data".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(&chunk.data)),
        );
    }
    if !chunk.file.is_empty() {
        f.insert("File".into(), json!(chunk.file));
    }
    if !chunk.file_event.is_empty() {
        f.insert("FileEvent".into(), json!(chunk.file_event));
    }
    Value::Object(f).to_string().into_bytes()
}

async fn stream(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let path = path_param(&p)?;
    let follow = match p.get("follow") {
        None => true,
        Some(_) => flag(&p, "follow")?,
    };
    let offset = params::integer(&p, "offset", "offset")?.unwrap_or(0);
    let from_end = match p.get("origin").map(String::as_str) {
        None | Some("") | Some("start") => false,
        Some("end") => true,
        Some(_) => return Err(ApiError::field("origin", "origin must be start or end")),
    };
    let req = ReadAllocFileRequest {
        alloc_id,
        path,
        offset,
        from_end,
        follow,
        limit: 0,
    };
    let chunks = client_fs::read(&http.gw, req).await?;
    let body = Body::from_stream(chunks.map(|c| c.map(|chunk| frame(&chunk))));
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn disk(d: &HostDiskStats) -> Value {
    json!({
        "Device": d.device,
        "Mountpoint": d.mountpoint,
        "Size": d.size,
        "Used": d.used,
        "Available": d.available,
        "UsedPercent": d.used_percent,
        "InodesUsedPercent": d.inodes_used_percent,
    })
}

/// Nomad's HostStats.
fn host(h: &HostStats) -> Value {
    let m = h.memory.unwrap_or_default();
    json!({
        "Memory": {
            "Total": m.total,
            "Available": m.available,
            "Used": m.used,
            "Free": m.free,
        },
        "CPU": h.cpu.iter().map(|c| json!({
            "CPU": c.cpu,
            "User": c.user,
            "System": c.system,
            "Idle": c.idle,
            "TotalPercent": c.total_percent,
            "TotalTicks": c.total_ticks,
        })).collect::<Vec<_>>(),
        "DiskStats": h.disk_stats.iter().map(disk).collect::<Vec<_>>(),
        "AllocDirStats": h.alloc_dir_stats.as_ref().map(disk),
        "DeviceStats": [],
        "Uptime": h.uptime,
        "Timestamp": h.timestamp,
        "CPUTicksConsumed": h.cpu_ticks_consumed,
    })
}

async fn host_stats(State(http): State<Http>, QueryString(p): QueryString<Params>) -> ApiResult {
    let node_id = p.get("node_id").cloned().unwrap_or_default();
    let (_, stats) = client_fs::host_stats(&http.gw, HostStatsRequest { node_id }).await?;
    Ok(json_response(host(&stats)))
}

fn memory(m: &MemoryUsage) -> Value {
    json!({
        "RSS": m.rss,
        "Cache": m.cache,
        "Swap": m.swap,
        "MappedFile": m.mapped_file,
        "Usage": m.usage,
        "MaxUsage": m.max_usage,
        "KernelUsage": m.kernel_usage,
        "KernelMaxUsage": m.kernel_max_usage,
        "Measured": m.measured,
    })
}

fn cpu(c: &CpuUsage) -> Value {
    json!({
        "SystemMode": c.system_mode,
        "UserMode": c.user_mode,
        "TotalTicks": c.total_ticks,
        "ThrottledPeriods": c.throttled_periods,
        "ThrottledTime": c.throttled_time,
        "Percent": c.percent,
        "Measured": c.measured,
    })
}

/// Nomad's ResourceUsage.
fn resource_usage(r: Option<&ResourceUsage>) -> Value {
    let r = r.cloned().unwrap_or_default();
    json!({
        "MemoryStats": memory(&r.memory_stats.unwrap_or_default()),
        "CpuStats": cpu(&r.cpu_stats.unwrap_or_default()),
        "DeviceStats": [],
    })
}

/// Nomad's AllocResourceUsage.
fn alloc_usage(u: &AllocResourceUsage) -> Value {
    let tasks: Map<String, Value> = u
        .tasks
        .iter()
        .map(|(name, t)| {
            let pids: Map<String, Value> = t
                .pids
                .iter()
                .map(|(pid, r)| (pid.clone(), resource_usage(Some(r))))
                .collect();
            let v = json!({
                "ResourceUsage": resource_usage(t.resource_usage.as_ref()),
                "Timestamp": t.timestamp,
                "Pids": pids,
            });
            (name.clone(), v)
        })
        .collect();
    json!({
        "ResourceUsage": resource_usage(u.resource_usage.as_ref()),
        "Tasks": tasks,
        "Timestamp": u.timestamp,
    })
}

async fn alloc_stats(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let task = p.get("task").cloned().unwrap_or_default();
    let usage = client_fs::alloc_stats(&http.gw, AllocStatsRequest { alloc_id, task }).await?;
    Ok(json_response(alloc_usage(&usage)))
}

/// `{"Signal": "SIGUSR1", "Task": ""}` (Nomad's AllocSignalRequest); the
/// body and both fields may be left out or `null`.
async fn signal(State(http): State<Http>, Path(alloc_id): Path<String>, body: Bytes) -> ApiResult {
    let b = optional_body(&body)?;
    let req = SignalAllocRequest {
        alloc_id,
        signal: text_field(&b, "Signal")?,
        task: text_field(&b, "Task")?,
    };
    client_fs::signal(&http.gw, req).await?;
    Ok(json_response(json!({"Index": 0})))
}

/// `{"TaskName": "", "AllTasks": false}`; the body and both fields may be
/// left out or `null`.
async fn restart(State(http): State<Http>, Path(alloc_id): Path<String>, body: Bytes) -> ApiResult {
    let b = optional_body(&body)?;
    let req = RestartAllocRequest {
        alloc_id,
        task: text_field(&b, "TaskName")?,
        all_tasks: bool_field(&b, "AllTasks")?,
    };
    client_fs::restart(&http.gw, req).await?;
    Ok(json_response(json!({"Index": 0})))
}

async fn gc_alloc(State(http): State<Http>, Path(alloc_id): Path<String>) -> ApiResult {
    client_fs::gc_alloc(&http.gw, GcAllocRequest { alloc_id }).await?;
    Ok(json_response(Value::Null))
}

async fn gc_node(State(http): State<Http>, QueryString(p): QueryString<Params>) -> ApiResult {
    let node_id = p.get("node_id").cloned().unwrap_or_default();
    client_fs::gc_node(&http.gw, GcNodeRequest { node_id }).await?;
    Ok(json_response(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_leave_out_empty_fields_as_nomad() {
        let f = frame(&AllocFileChunk {
            data: b"hi".to_vec(),
            offset: 0,
            file: "alloc/x".into(),
            file_event: String::new(),
        });
        let f: Value = serde_json::from_slice(&f).unwrap();
        assert_eq!(f, json!({"Data": "aGk=", "File": "alloc/x"}));
        let f = frame(&AllocFileChunk {
            offset: 5,
            file_event: "file truncated".into(),
            ..Default::default()
        });
        let f: Value = serde_json::from_slice(&f).unwrap();
        assert_eq!(f, json!({"Offset": 5, "FileEvent": "file truncated"}));
    }

    #[test]
    fn usage_has_nomads_shape() {
        let u = AllocResourceUsage::default();
        let v = alloc_usage(&u);
        assert!(v["ResourceUsage"]["MemoryStats"]["RSS"].is_u64());
        assert!(v["ResourceUsage"]["CpuStats"]["Percent"].is_f64());
        assert!(v["Tasks"].is_object());
    }
}
