//! The Nomad-compatible HTTP API on :4646: thin axum handlers over the same
//! domain functions as the gRPC API, Nomad's JSON shapes, blocking queries
//! (`?index=&wait=`) and its response headers.

mod acl;
mod acl_guard;
pub mod acl_routes;
mod agent;
pub(crate) mod alloc_exec;
mod client_fs;
mod cluster;
mod events;
mod filter;
mod job_ops;
mod jobs;
mod logs;
mod metrics;
mod namespaces;
mod node_pools;
mod operator;
mod paging;
pub mod params;
pub mod render;
mod routes;
mod scaling;
mod search;
mod service_registry;
mod vars;
mod well_known;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use caravan_jobspec::JobspecError;
use caravan_proto::QueryMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tonic::Code;

use caravan_gateway_core::Bound;
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::query::Query;

/// What every handler shares.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    pub(crate) gw: Gateway,
    pub(crate) bound: Bound,
}

impl Http {
    /// The gRPC address this gateway tells others to use.
    pub(crate) fn advertised(&self) -> String {
        if self.gw.config.advertise_addr.is_empty() {
            self.bound.grpc.to_string()
        } else {
            self.gw.config.advertise_addr.clone()
        }
    }
}

/// The HTTP API's routes, with the body limit applied to every request.
pub fn router(gw: Gateway, bound: Bound) -> Router {
    let limit = gw.config.max_body_bytes;
    let contact = gw.clone();
    let guarded = gw.acl.is_some().then(|| gw.clone());
    let state = Http { gw, bound };
    let mut api = routes::api().fallback(not_found);
    if let Some(gw) = guarded {
        api = with_acl_guard(api, gw, limit);
    }
    // The web UI's files, and `/` redirected to it, outside the ACL layer:
    // they are public, as Nomad's are; the app's API calls carry the token.
    let all = api.merge(caravan_ui::routes());
    with_request_layers(all, limit, contact).with_state(state)
}

/// `routes` with each request checked against its route's entry in the ACL
/// table (over every route, and the fallback, `routes` has so far).
fn with_acl_guard(routes: Router<Http>, gw: Gateway, limit: usize) -> Router<Http> {
    routes.layer(axum::middleware::from_fn(move |req, next| {
        acl_guard::guard(gw.clone(), limit, req, next)
    }))
}

/// `routes` under what wraps every request, innermost first: the body
/// limit, the refusal of an announced oversize body, the leader headers and
/// the request's span.
fn with_request_layers(routes: Router<Http>, limit: usize, contact: Gateway) -> Router<Http> {
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn(move |req, next| {
            refuse_announced_oversize(limit, req, next)
        }))
        .layer(axum::middleware::from_fn(move |req, next| {
            leader_headers(contact.clone(), req, next)
        }))
        .layer(axum::middleware::from_fn(request_span))
}

/// Runs each request in an `http` span named by its method and route, the
/// child of the caller's trace when it sent a `traceparent` header: the
/// evaluations a request creates carry this span's context.
async fn request_span(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use tracing::Instrument;
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let span = tracing::info_span!("http", method = %req.method(), route = %route);
    caravan_runtime::trace::follow_headers(&span, req.headers());
    next.run(req).instrument(span).await
}

/// Answers 413 at once to a request whose Content-Length is over `limit`,
/// before any of its body is read. (A body without a length is still cut at
/// the limit while it is read.)
async fn refuse_announced_oversize(
    limit: usize,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match announced {
        Some(length) if length > limit as u64 => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "length limit exceeded: the body is {length} bytes, over the {limit}-byte limit"
            ),
        )
            .into_response(),
        _ => next.run(req).await,
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "Invalid URL path").into_response()
}

/// A handler's failure, answered as Nomad does: a status code and a plain
/// message.
#[derive(Debug)]
pub(crate) struct ApiError(GatewayError);

impl From<GatewayError> for ApiError {
    fn from(err: GatewayError) -> Self {
        ApiError(err)
    }
}

impl ApiError {
    /// A 400 naming `field`.
    pub(crate) fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError(GatewayError::field(field, message))
    }
}

fn status_of(err: &GatewayError) -> StatusCode {
    if let GatewayError::Jobspec(JobspecError::TooLarge { .. }) = err {
        return StatusCode::PAYLOAD_TOO_LARGE;
    }
    if err.is_bad_input() {
        return StatusCode::BAD_REQUEST;
    }
    // 507, not 503: a full store stays full until an operator compacts,
    // defragments and disarms it, and 503 tells clients to simply retry.
    if err.is_store_full() {
        return StatusCode::INSUFFICIENT_STORAGE;
    }
    match err.code() {
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
        Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(&self.0);
        // A full store is logged once, when its alarm is first seen
        // (`store_health`), not once per refused request.
        if status.is_server_error() && !self.0.is_store_full() {
            tracing::warn!(error = %self.0, "HTTP request failed");
        }
        (status, self.0.to_string()).into_response()
    }
}

/// A handler's answer.
pub(crate) type ApiResult = Result<Response, ApiError>;

pub(crate) use params::Params;

impl From<params::ParamError> for ApiError {
    fn from(err: params::ParamError) -> Self {
        ApiError::field(err.field, err.message)
    }
}

/// Whether a boolean query parameter is set (`?purge=true`), read as Go's
/// `strconv.ParseBool`; absent or empty is false.
pub(crate) fn flag(params: &Params, name: &str) -> Result<bool, ApiError> {
    Ok(params::flag(params, name)?)
}

/// The blocking-query options of a request: `index`, `wait`, `namespace`,
/// `prefix`.
pub(crate) fn query(http: &Http, params: &Params) -> Result<Query, ApiError> {
    // Every read is answered from the gateway's watch cache, which a stale
    // read would accept as well; `?stale` is only checked for its spelling.
    params::stale(params)?;
    let options = params::blocking(params)?;
    Ok(Query::new(Some(&options), http.gw.config.max_query_wait()))
}

/// A JSON answer with Nomad's query headers.
pub(crate) fn read_answer(meta: &QueryMeta, body: Value) -> Response {
    with_index(render::index(meta.revision), body)
}

/// A JSON answer carrying `X-Nomad-Index` (the leader headers are added by
/// [`leader_headers`]).
pub(crate) fn with_index(index: u64, body: Value) -> Response {
    let mut response = axum::Json(body).into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&index.to_string()) {
        headers.insert("X-Nomad-Index", v);
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Adds Nomad's `X-Nomad-KnownLeader` and `X-Nomad-LastContact` to every
/// answer carrying `X-Nomad-Index`, from how fresh the gateway's view of
/// the store is.
async fn leader_headers(
    gw: Gateway,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(req).await;
    if response.headers().contains_key("X-Nomad-Index") {
        let contact = gw.leader_contact();
        let headers = response.headers_mut();
        let known = if contact.known { "true" } else { "false" };
        headers.insert("X-Nomad-KnownLeader", HeaderValue::from_static(known));
        headers.insert(
            "X-Nomad-LastContact",
            HeaderValue::from(contact.last_contact_ms),
        );
    }
    response
}

/// A field of a request body read as Nomad's Go decoder reads it: the
/// exact key, else a key that differs only in case (python-nomad sends
/// `UnHealthyAllocationIDs`, Nomad reads it as `UnhealthyAllocationIDs`).
pub(crate) fn body_field<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    let object = body.as_object()?;
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    })
}

/// A body that may be left out: an empty one reads as `{}`.
pub(crate) fn optional_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(Value::Object(serde_json::Map::new()))
    } else {
        decode(body)
    }
}

/// A text field of a body: absent or `null` reads as empty, as Go's decoder
/// leaves a string it is given `null` for.
pub(crate) fn text_field(body: &Value, name: &str) -> Result<String, ApiError> {
    match body_field(body, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(ApiError::field(name, "must be a string")),
    }
}

/// A boolean field of a body: absent or `null` reads as false.
pub(crate) fn bool_field(body: &Value, name: &str) -> Result<bool, ApiError> {
    match body_field(body, name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::field(name, "must be a boolean")),
    }
}

/// Decodes a JSON body, answering 400 with the parser's complaint.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::field("body", "request body is empty"));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError(GatewayError::Jobspec(JobspecError::JsonSyntax {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_fields_are_found_whatever_their_case() {
        let body = serde_json::json!({"UnHealthyAllocationIDs": ["a"], "All": true, "all": false});
        assert_eq!(
            body_field(&body, "UnhealthyAllocationIDs"),
            Some(&serde_json::json!(["a"]))
        );
        // The exact key wins over one that differs in case.
        assert_eq!(body_field(&body, "All"), Some(&Value::Bool(true)));
        assert_eq!(body_field(&body, "Missing"), None);
        assert_eq!(body_field(&Value::Null, "All"), None);
    }

    #[test]
    fn text_and_bool_fields_take_null_as_unset() {
        let body = serde_json::json!({"Signal": "SIGUSR1", "Task": null, "allTasks": true});
        assert_eq!(text_field(&body, "Signal").unwrap(), "SIGUSR1");
        assert_eq!(text_field(&body, "Task").unwrap(), "");
        assert_eq!(text_field(&body, "Missing").unwrap(), "");
        assert!(bool_field(&body, "AllTasks").unwrap());
        let err = text_field(&serde_json::json!({"Task": 3}), "Task").unwrap_err();
        assert!(format!("{err:?}").contains("Task"), "{err:?}");
        assert!(bool_field(&serde_json::json!({"AllTasks": "yes"}), "AllTasks").is_err());
    }

    #[test]
    fn errors_map_to_nomads_codes() {
        let cases = [
            (GatewayError::field("x", "y"), StatusCode::BAD_REQUEST),
            (GatewayError::NotFound("x".into()), StatusCode::NOT_FOUND),
            (
                GatewayError::FailedPrecondition("x".into()),
                StatusCode::BAD_REQUEST,
            ),
            (GatewayError::Conflict("x".into()), StatusCode::CONFLICT),
            (
                GatewayError::PermissionDenied("x".into()),
                StatusCode::FORBIDDEN,
            ),
            (
                GatewayError::Jobspec(JobspecError::TooLarge { size: 2, limit: 1 }),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                GatewayError::Unavailable("x".into()),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                GatewayError::Store(caravan_store::StoreError::NoSpace(
                    "etcdserver: mvcc: database space exceeded".into(),
                )),
                StatusCode::INSUFFICIENT_STORAGE,
            ),
        ];
        for (err, want) in cases {
            assert_eq!(status_of(&err), want, "{err}");
        }
    }

    #[test]
    fn flags_parse_like_nomad() {
        let mut p = Params::new();
        assert!(!flag(&p, "purge").unwrap());
        p.insert("purge".into(), "true".into());
        assert!(flag(&p, "purge").unwrap());
        p.insert("purge".into(), "maybe".into());
        assert!(flag(&p, "purge").is_err());
    }

    #[test]
    fn bad_json_is_a_client_error() {
        let err = decode::<Value>(b"{\"Job\": ").unwrap_err();
        assert_eq!(status_of(&err.0), StatusCode::BAD_REQUEST);
        let err = decode::<Value>(b"  ").unwrap_err();
        assert!(err.0.to_string().contains("empty"));
    }
}
