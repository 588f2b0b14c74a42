//! ACL enforcement on every HTTP route, in one place: a layer over the
//! whole router that resolves the request's token, looks the matched
//! route up in [`routes::RULES`] (a route missing there is refused), checks
//! what it needs in the request's namespace (and in the namespace a
//! written body names), hands the resolved [`Caller`] to the handler, and
//! filters the items of list answers to the namespaces the token may read.

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::acl::{permission_denied, token_not_found};
use crate::acl_routes::{self as routes, Rule};
use crate::params;
use caravan_gateway_core::acl::need::Need;
use caravan_gateway_core::acl::owner::{Object, owner_namespace};
use caravan_gateway_core::acl::store::ResolveError;
use caravan_gateway_core::acl::{Acl, Caller, token_from_headers};
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::query::DEFAULT_NAMESPACE;

/// The namespace a request names (`?namespace=`), else `default`.
fn request_namespace(query: Option<&str>) -> String {
    params::pairs(query.unwrap_or_default())
        .into_iter()
        .rev()
        .find(|(k, v)| k == "namespace" && !v.is_empty())
        .map_or_else(|| DEFAULT_NAMESPACE.to_string(), |(_, v)| v)
}

/// The variable path of a `/v1/var/<path>` request, decoded.
fn variable_path(path: &str) -> String {
    path.strip_prefix("/v1/var/")
        .map(|p| params::percent_decode(&p.replace('+', "%2B")))
        .unwrap_or_default()
}

/// The namespaces a written body names: its `Namespace` and its job's.
fn body_namespaces(body: &[u8]) -> Vec<String> {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut take = |v: Option<&Value>| {
        if let Some(Value::String(ns)) = v
            && !ns.is_empty()
        {
            out.push(ns.clone());
        }
    };
    take(obj.get("Namespace"));
    if let Some(Value::Object(job)) = obj.get("Job") {
        take(job.get("Namespace"));
    }
    out
}

/// The value of the `{param}` segment of `pattern` in `path`.
fn path_param(pattern: &str, path: &str, param: &str) -> Option<String> {
    let at = pattern.split('/').position(|seg| seg == param)?;
    path.split('/').nth(at).map(params::percent_decode)
}

/// The object a route names by id (an allocation, evaluation,
/// deployment or scaling policy), checked where it lives.
fn named_object(pattern: &str, path: &str) -> Option<Object> {
    if let Some(id) = path_param(pattern, path, "{alloc_id}") {
        return Some(Object::Alloc(id));
    }
    let id = path_param(pattern, path, "{id}")?;
    if pattern.starts_with("/v1/allocation/") {
        Some(Object::Alloc(id))
    } else if pattern.starts_with("/v1/evaluation/") {
        Some(Object::Eval(id))
    } else if pattern.starts_with("/v1/deployment/") {
        Some(Object::Deployment(id))
    } else if pattern.starts_with("/v1/scaling/policy/") {
        Some(Object::ScalingPolicy(id))
    } else {
        None
    }
}

/// The `Name` a written body gives (a node pool's).
fn body_name(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(obj)) => obj
            .get("Name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// Whether `need` is about the node pool a route names.
fn about_a_pool(need: Need) -> bool {
    matches!(need, Need::NodePool(_) | Need::PoolNodes | Need::PoolJobs)
}

/// Keeps the items of a JSON list the token may see: those in a namespace
/// where `rule`'s capability is granted (for variables, `list` on the
/// item's path; for node pools, the capability on the pool by `Name`).
/// Other items without a namespace are kept.
fn filter_list(acl: &Acl, rule: &Rule, items: Vec<Value>) -> Vec<Value> {
    items
        .into_iter()
        .filter(|item| {
            if let Need::NodePool(_) = rule.op.need {
                let name = item.get("Name").and_then(Value::as_str).unwrap_or_default();
                return rule.op.need.shows(acl, "", name);
            }
            // Scaling policies carry theirs in `Target`.
            let ns = item
                .get("Namespace")
                .or_else(|| item.get("Target").and_then(|t| t.get("Namespace")))
                .and_then(Value::as_str);
            let Some(ns) = ns else {
                return true;
            };
            let path = item.get("Path").and_then(Value::as_str).unwrap_or_default();
            rule.op.need.shows(acl, ns, path)
        })
        .collect()
}

async fn filtered(acl: &Acl, rule: &Rule, response: Response) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the answer was cut off").into_response();
    };
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(items)) => {
            let kept = Value::Array(filter_list(acl, rule, items));
            parts.headers.remove(header::CONTENT_LENGTH);
            axum::body::Bytes::from(kept.to_string())
        }
        _ => bytes,
    };
    Response::from_parts(parts, Body::from(bytes))
}

/// A body past the gateway's limit.
fn too_large(err: &axum::Error) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("length limit exceeded: {err}"),
    )
        .into_response()
}

/// The guard: see the module documentation.
pub(crate) async fn guard(gw: Gateway, limit: usize, mut req: Request, next: Next) -> Response {
    let Some(cache) = gw.acl.clone() else {
        return next.run(req).await;
    };
    // No route matched: the router's 404 says nothing a token would hide.
    let Some(pattern) = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
    else {
        return next.run(req).await;
    };
    let rule = match routes::lookup(req.method().as_str(), &pattern) {
        Ok(Some(rule)) => rule,
        // Another method of a known route: the router answers 405.
        Ok(None) => return next.run(req).await,
        Err(()) => {
            tracing::warn!(pattern, "HTTP route without an ACL entry refused");
            return permission_denied();
        }
    };
    let need = rule.op.need;
    if !cache.ready().await {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "ACL state not loaded yet; try again",
        )
            .into_response();
    }
    // The token of an exec that asks for the handshake comes in its first
    // frame: its handler checks it there.
    if need == Need::Exec && crate::alloc_exec::wants_handshake(req.uri().query()) {
        return next.run(req).await;
    }
    let secret = token_from_headers(req.headers());
    let caller: Caller =
        match caravan_gateway_core::acl::workload::resolve(&gw, &cache, secret.as_deref()).await {
            Ok(caller) => caller,
            Err(ResolveError::NotFound) => return token_not_found(),
            Err(ResolveError::Unavailable(why)) => {
                return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
            }
            Err(err) => return (StatusCode::FORBIDDEN, err.message()).into_response(),
        };
    let acl = caller.acl.clone();
    if need == Need::Token && caller.token.is_none() {
        return permission_denied();
    }
    // A namespace's own route is about the namespace it names.
    let namespace = if need == Need::NamespaceAny {
        path_param(&pattern, req.uri().path(), "{name}").unwrap_or_default()
    } else {
        request_namespace(req.uri().query())
    };
    let writes = matches!(*req.method(), Method::PUT | Method::POST);
    // What a variable or node pool need is checked on: the variable's path,
    // the pool the URL names, or else the pool a written body names.
    let mut var_path = if about_a_pool(need) {
        path_param(&pattern, req.uri().path(), "{name}").unwrap_or_default()
    } else {
        variable_path(req.uri().path())
    };
    if writes && about_a_pool(need) && var_path.is_empty() {
        let (parts, body) = req.into_parts();
        let bytes = match to_bytes(body, limit).await {
            Ok(bytes) => bytes,
            Err(err) => return too_large(&err),
        };
        var_path = body_name(&bytes);
        req = Request::from_parts(parts, Body::from(bytes));
    }
    if !need.permits(&acl, &namespace, &var_path, rule.op.list) {
        return permission_denied();
    }
    if matches!(need, Need::Ns(_) | Need::Exec)
        && let Some(object) = named_object(&pattern, req.uri().path())
        && let Some(owner) = owner_namespace(&gw.cache.snapshot(), &object)
        && !need.allowed(&acl, &owner, &var_path)
    {
        return permission_denied();
    }
    if writes && matches!(need, Need::Ns(_) | Need::Var(_)) {
        let (parts, body) = req.into_parts();
        let bytes = match to_bytes(body, limit).await {
            Ok(bytes) => bytes,
            Err(err) => return too_large(&err),
        };
        for ns in body_namespaces(&bytes) {
            if !need.allowed(&acl, &ns, &var_path) {
                return permission_denied();
            }
        }
        req = Request::from_parts(parts, Body::from(bytes));
    }
    req.extensions_mut().insert(caller);
    let response = next.run(req).await;
    if rule.op.list && !acl.is_management() {
        return filtered(&acl, rule, response).await;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_gateway_core::acl::policy::parse;

    #[test]
    fn the_namespace_comes_from_the_query_or_defaults() {
        assert_eq!(request_namespace(None), "default");
        assert_eq!(request_namespace(Some("namespace=prod&x=1")), "prod");
        assert_eq!(request_namespace(Some("namespace=%2A")), "*");
        assert_eq!(request_namespace(Some("namespace=")), "default");
        assert_eq!(variable_path("/v1/var/a%2Fb/c"), "a/b/c");
        assert_eq!(variable_path("/v1/var/a+b"), "a+b");
    }

    #[test]
    fn path_params_are_read_by_position() {
        let pattern = "/v1/deployment/promote/{id}";
        assert_eq!(
            path_param(pattern, "/v1/deployment/promote/d-1", "{id}").as_deref(),
            Some("d-1")
        );
        assert_eq!(
            path_param(pattern, "/v1/deployment/promote/d-1", "{alloc_id}"),
            None
        );
        assert_eq!(
            named_object(pattern, "/v1/deployment/promote/d-1"),
            Some(Object::Deployment("d-1".into()))
        );
        assert_eq!(
            named_object("/v1/client/fs/ls/{alloc_id}", "/v1/client/fs/ls/a-1"),
            Some(Object::Alloc("a-1".into()))
        );
        assert_eq!(named_object("/v1/job/{id}", "/v1/job/web"), None);
    }

    #[test]
    fn bodies_name_their_namespaces() {
        assert_eq!(
            body_namespaces(br#"{"Job": {"ID": "x", "Namespace": "prod"}}"#),
            vec!["prod"]
        );
        assert_eq!(
            body_namespaces(br#"{"Namespace": "a", "Items": {}}"#),
            vec!["a"]
        );
        assert!(body_namespaces(b"job \"x\" {}").is_empty());
    }

    #[test]
    fn lists_keep_what_the_token_may_read() {
        let acl = Acl::compile([&parse(r#"namespace "default" { policy = "read" }"#).unwrap()]);
        let rule = routes::lookup("GET", "/v1/jobs").unwrap().unwrap();
        let items = vec![
            serde_json::json!({"ID": "a", "Namespace": "default"}),
            serde_json::json!({"ID": "b", "Namespace": "prod"}),
            serde_json::json!({"ID": "n"}),
            serde_json::json!({"ID": "s", "Target": {"Namespace": "prod"}}),
        ];
        let kept = filter_list(&acl, rule, items);
        let ids: Vec<&str> = kept.iter().filter_map(|v| v["ID"].as_str()).collect();
        assert_eq!(ids, vec!["a", "n"]);
    }
}
