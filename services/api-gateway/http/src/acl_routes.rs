//! The HTTP routes and the operation each carries out: one table of
//! method, path pattern (as the router spells it) and [`Op`] (whose need
//! is written once, in the core's `acl::ops`, for both transports). A route
//! missing here is refused, so adding a route means adding its line.

use caravan_gateway_core::acl::ops::{self, Op};

/// One route's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// `GET`, `PUT`, `POST`, `DELETE`, or `*` for any.
    pub method: &'static str,
    /// The router's pattern, e.g. `/v1/job/{id}`.
    pub pattern: &'static str,
    /// The operation the route carries out: what it needs, and whether it
    /// is a list filtered to what the token may see.
    pub op: Op,
}

const fn r(method: &'static str, pattern: &'static str, op: Op) -> Rule {
    Rule {
        method,
        pattern,
        op,
    }
}

/// Every route of the HTTP API and its operation (a route registered for
/// POST and PUT has both lines).
pub const RULES: &[Rule] = &[
    r("GET", "/v1/jobs", ops::JOB_LIST),
    r("PUT", "/v1/jobs", ops::JOB_REGISTER),
    r("POST", "/v1/jobs", ops::JOB_REGISTER),
    r("POST", "/v1/jobs/parse", ops::JOB_PARSE),
    r("PUT", "/v1/jobs/parse", ops::JOB_PARSE),
    r("POST", "/v1/validate/job", ops::JOB_VALIDATE),
    r("PUT", "/v1/validate/job", ops::JOB_VALIDATE),
    r("GET", "/v1/job/{id}", ops::JOB_READ),
    r("GET", "/v1/job/{id}/submission", ops::JOB_SUBMISSION),
    r("POST", "/v1/job/{id}", ops::JOB_REGISTER),
    r("PUT", "/v1/job/{id}", ops::JOB_REGISTER),
    r("DELETE", "/v1/job/{id}", ops::JOB_DEREGISTER),
    r("POST", "/v1/job/{id}/plan", ops::JOB_PLAN),
    r("PUT", "/v1/job/{id}/plan", ops::JOB_PLAN),
    r("POST", "/v1/job/{id}/evaluate", ops::JOB_EVALUATE),
    r("PUT", "/v1/job/{id}/evaluate", ops::JOB_EVALUATE),
    r("GET", "/v1/job/{id}/versions", ops::JOB_VERSIONS),
    r("GET", "/v1/job/{id}/allocations", ops::JOB_ALLOCATIONS),
    r("GET", "/v1/job/{id}/evaluations", ops::JOB_EVALUATIONS),
    r("GET", "/v1/job/{id}/summary", ops::JOB_SUMMARY),
    r("POST", "/v1/job/{id}/revert", ops::JOB_REVERT),
    r("PUT", "/v1/job/{id}/revert", ops::JOB_REVERT),
    r("POST", "/v1/job/{id}/stable", ops::JOB_STABILITY),
    r("PUT", "/v1/job/{id}/stable", ops::JOB_STABILITY),
    r("GET", "/v1/job/{id}/scale", ops::JOB_SCALE_STATUS),
    r("POST", "/v1/job/{id}/scale", ops::JOB_SCALE),
    r("PUT", "/v1/job/{id}/scale", ops::JOB_SCALE),
    r("POST", "/v1/job/{id}/dispatch", ops::JOB_DISPATCH),
    r("PUT", "/v1/job/{id}/dispatch", ops::JOB_DISPATCH),
    r(
        "POST",
        "/v1/job/{id}/periodic/force",
        ops::JOB_PERIODIC_FORCE,
    ),
    r(
        "PUT",
        "/v1/job/{id}/periodic/force",
        ops::JOB_PERIODIC_FORCE,
    ),
    r("GET", "/v1/job/{id}/deployments", ops::JOB_DEPLOYMENTS),
    r("GET", "/v1/job/{id}/deployment", ops::JOB_DEPLOYMENT),
    r("GET", "/v1/evaluations", ops::EVAL_LIST),
    r("GET", "/v1/evaluation/{id}", ops::EVAL_READ),
    r(
        "GET",
        "/v1/evaluation/{id}/allocations",
        ops::EVAL_ALLOCATIONS,
    ),
    r("GET", "/v1/allocations", ops::ALLOC_LIST),
    r("GET", "/v1/allocation/{id}", ops::ALLOC_READ),
    r("POST", "/v1/allocation/{id}/stop", ops::ALLOC_STOP),
    r("PUT", "/v1/allocation/{id}/stop", ops::ALLOC_STOP),
    r("GET", "/v1/nodes", ops::NODE_LIST),
    r("GET", "/v1/node/pools", ops::NODE_POOL_LIST),
    r("PUT", "/v1/node/pools", ops::NODE_POOL_WRITE),
    r("POST", "/v1/node/pools", ops::NODE_POOL_WRITE),
    r("GET", "/v1/node/pool/{name}", ops::NODE_POOL_READ),
    r("PUT", "/v1/node/pool/{name}", ops::NODE_POOL_WRITE),
    r("POST", "/v1/node/pool/{name}", ops::NODE_POOL_WRITE),
    r("DELETE", "/v1/node/pool/{name}", ops::NODE_POOL_DELETE),
    r("GET", "/v1/node/pool/{name}/nodes", ops::NODE_POOL_NODES),
    r("GET", "/v1/node/pool/{name}/jobs", ops::NODE_POOL_JOBS),
    r("GET", "/v1/namespaces", ops::NAMESPACE_LIST),
    r("PUT", "/v1/namespace", ops::NAMESPACE_WRITE),
    r("POST", "/v1/namespace", ops::NAMESPACE_WRITE),
    r("*", "/v1/namespace/", ops::INCOMPLETE),
    r("GET", "/v1/namespace/{name}", ops::NAMESPACE_READ),
    r("PUT", "/v1/namespace/{name}", ops::NAMESPACE_WRITE),
    r("POST", "/v1/namespace/{name}", ops::NAMESPACE_WRITE),
    r("DELETE", "/v1/namespace/{name}", ops::NAMESPACE_DELETE),
    r("GET", "/v1/node/{id}", ops::NODE_READ),
    r("GET", "/v1/node/{id}/allocations", ops::NODE_ALLOCATIONS),
    r("POST", "/v1/node/{id}/eligibility", ops::NODE_ELIGIBILITY),
    r("PUT", "/v1/node/{id}/eligibility", ops::NODE_ELIGIBILITY),
    r("POST", "/v1/node/{id}/drain", ops::NODE_DRAIN),
    r("PUT", "/v1/node/{id}/drain", ops::NODE_DRAIN),
    r("POST", "/v1/node/{id}/evaluate", ops::NODE_EVALUATE),
    r("PUT", "/v1/node/{id}/evaluate", ops::NODE_EVALUATE),
    r("POST", "/v1/node/{id}/purge", ops::NODE_PURGE),
    r("PUT", "/v1/node/{id}/purge", ops::NODE_PURGE),
    r("GET", "/v1/deployments", ops::DEPLOYMENT_LIST),
    r("GET", "/v1/deployment/{id}", ops::DEPLOYMENT_READ),
    r(
        "GET",
        "/v1/deployment/allocations/{id}",
        ops::DEPLOYMENT_ALLOCATIONS,
    ),
    r(
        "POST",
        "/v1/deployment/promote/{id}",
        ops::DEPLOYMENT_PROMOTE,
    ),
    r(
        "PUT",
        "/v1/deployment/promote/{id}",
        ops::DEPLOYMENT_PROMOTE,
    ),
    r("POST", "/v1/deployment/fail/{id}", ops::DEPLOYMENT_FAIL),
    r("PUT", "/v1/deployment/fail/{id}", ops::DEPLOYMENT_FAIL),
    r("POST", "/v1/deployment/pause/{id}", ops::DEPLOYMENT_PAUSE),
    r("PUT", "/v1/deployment/pause/{id}", ops::DEPLOYMENT_PAUSE),
    r(
        "POST",
        "/v1/deployment/allocation-health/{id}",
        ops::DEPLOYMENT_ALLOC_HEALTH,
    ),
    r(
        "PUT",
        "/v1/deployment/allocation-health/{id}",
        ops::DEPLOYMENT_ALLOC_HEALTH,
    ),
    r(
        "GET",
        "/v1/operator/scheduler/configuration",
        ops::SCHEDULER_CONFIG_READ,
    ),
    r(
        "PUT",
        "/v1/operator/scheduler/configuration",
        ops::SCHEDULER_CONFIG_WRITE,
    ),
    r(
        "POST",
        "/v1/operator/scheduler/configuration",
        ops::SCHEDULER_CONFIG_WRITE,
    ),
    r("PUT", "/v1/system/gc", ops::SYSTEM_GC),
    r("GET", "/v1/status/leader", ops::STATUS_LEADER),
    r("GET", "/v1/status/peers", ops::STATUS_PEERS),
    r("GET", "/v1/agent/health", ops::AGENT_HEALTH),
    r("GET", "/v1/agent/self", ops::AGENT_SELF),
    r("GET", "/v1/agent/members", ops::AGENT_MEMBERS),
    r("GET", "/v1/agent/servers", ops::AGENT_SERVERS_READ),
    r("PUT", "/v1/agent/servers", ops::AGENT_SERVERS_WRITE),
    r("POST", "/v1/agent/servers", ops::AGENT_SERVERS_WRITE),
    r("PUT", "/v1/agent/join", ops::AGENT_JOIN),
    r("POST", "/v1/agent/join", ops::AGENT_JOIN),
    r("PUT", "/v1/agent/force-leave", ops::AGENT_FORCE_LEAVE),
    r("POST", "/v1/agent/force-leave", ops::AGENT_FORCE_LEAVE),
    r("GET", "/v1/regions", ops::REGIONS),
    r("GET", "/v1/scaling/policies", ops::SCALING_POLICY_LIST),
    r("GET", "/v1/scaling/policy/{id}", ops::SCALING_POLICY_READ),
    r("GET", "/v1/search", ops::SEARCH),
    r("POST", "/v1/search", ops::SEARCH),
    r("PUT", "/v1/search", ops::SEARCH),
    r("POST", "/v1/search/fuzzy", ops::SEARCH_FUZZY),
    r("PUT", "/v1/search/fuzzy", ops::SEARCH_FUZZY),
    r(
        "GET",
        "/v1/operator/raft/configuration",
        ops::RAFT_CONFIG_READ,
    ),
    r("GET", "/v1/client/fs/logs/{alloc_id}", ops::ALLOC_LOGS),
    r("GET", "/v1/client/fs/ls/{alloc_id}", ops::ALLOC_FS_LIST),
    r("GET", "/v1/client/fs/stat/{alloc_id}", ops::ALLOC_FS_STAT),
    r("GET", "/v1/client/fs/cat/{alloc_id}", ops::ALLOC_FS_READ),
    r("GET", "/v1/client/fs/readat/{alloc_id}", ops::ALLOC_FS_READ),
    r("GET", "/v1/client/fs/stream/{alloc_id}", ops::ALLOC_FS_READ),
    r("*", "/v1/client/fs/ls/", ops::INCOMPLETE),
    r("*", "/v1/client/fs/stat/", ops::INCOMPLETE),
    r("*", "/v1/client/fs/cat/", ops::INCOMPLETE),
    r("*", "/v1/client/fs/readat/", ops::INCOMPLETE),
    r("*", "/v1/client/fs/stream/", ops::INCOMPLETE),
    r("GET", "/v1/client/stats", ops::NODE_STATS),
    r(
        "GET",
        "/v1/client/allocation/{alloc_id}/stats",
        ops::ALLOC_STATS,
    ),
    r(
        "GET",
        "/v1/client/allocation/{alloc_id}/checks",
        ops::ALLOC_CHECKS,
    ),
    r(
        "POST",
        "/v1/client/allocation/{alloc_id}/signal",
        ops::ALLOC_SIGNAL,
    ),
    r(
        "PUT",
        "/v1/client/allocation/{alloc_id}/signal",
        ops::ALLOC_SIGNAL,
    ),
    r(
        "POST",
        "/v1/client/allocation/{alloc_id}/restart",
        ops::ALLOC_RESTART,
    ),
    r(
        "PUT",
        "/v1/client/allocation/{alloc_id}/restart",
        ops::ALLOC_RESTART,
    ),
    r(
        "GET",
        "/v1/client/allocation/{alloc_id}/exec",
        ops::ALLOC_EXEC,
    ),
    r("GET", "/v1/client/allocation/{alloc_id}/gc", ops::ALLOC_GC),
    r("POST", "/v1/client/allocation/{alloc_id}/gc", ops::ALLOC_GC),
    r("PUT", "/v1/client/allocation/{alloc_id}/gc", ops::ALLOC_GC),
    r("GET", "/v1/client/gc", ops::NODE_GC),
    r("POST", "/v1/client/gc", ops::NODE_GC),
    r("PUT", "/v1/client/gc", ops::NODE_GC),
    r("GET", "/v1/event/stream", ops::EVENT_STREAM),
    r("GET", "/v1/metrics", ops::METRICS),
    r("GET", "/.well-known/jwks.json", ops::IDENTITY_KEYS),
    r(
        "GET",
        "/.well-known/openid-configuration",
        ops::IDENTITY_DISCOVERY,
    ),
    r("GET", "/metrics", ops::METRICS),
    r("GET", "/v1/services", ops::SERVICE_LIST),
    r("*", "/v1/service/", ops::INCOMPLETE),
    r("GET", "/v1/service/{name}", ops::SERVICE_READ),
    r("DELETE", "/v1/service/{name}/{id}", ops::SERVICE_DELETE),
    r("GET", "/v1/vars", ops::VAR_LIST),
    r("*", "/v1/var/", ops::INCOMPLETE),
    r("GET", "/v1/var/{*path}", ops::VAR_READ),
    r("PUT", "/v1/var/{*path}", ops::VAR_WRITE),
    r("POST", "/v1/var/{*path}", ops::VAR_WRITE),
    r("DELETE", "/v1/var/{*path}", ops::VAR_DELETE),
    r("POST", "/v1/acl/bootstrap", ops::ACL_BOOTSTRAP),
    r("PUT", "/v1/acl/bootstrap", ops::ACL_BOOTSTRAP),
    r("GET", "/v1/acl/policies", ops::ACL_POLICY_LIST),
    r("GET", "/v1/acl/policy/{name}", ops::ACL_POLICY_READ),
    r("PUT", "/v1/acl/policy/{name}", ops::ACL_POLICY_WRITE),
    r("POST", "/v1/acl/policy/{name}", ops::ACL_POLICY_WRITE),
    r("DELETE", "/v1/acl/policy/{name}", ops::ACL_POLICY_DELETE),
    r("GET", "/v1/acl/tokens", ops::ACL_TOKEN_LIST),
    r("PUT", "/v1/acl/token", ops::ACL_TOKEN_WRITE),
    r("POST", "/v1/acl/token", ops::ACL_TOKEN_WRITE),
    r("GET", "/v1/acl/token/self", ops::ACL_TOKEN_SELF),
    r("GET", "/v1/acl/token/{accessor}", ops::ACL_TOKEN_READ),
    r("PUT", "/v1/acl/token/{accessor}", ops::ACL_TOKEN_WRITE),
    r("POST", "/v1/acl/token/{accessor}", ops::ACL_TOKEN_WRITE),
    r("DELETE", "/v1/acl/token/{accessor}", ops::ACL_TOKEN_DELETE),
];

/// What a request to `pattern` with `method` needs: `Ok(None)` when the
/// pattern is known but not for this method (the router answers 405),
/// `Err(())` when the pattern is unknown (refused).
pub(crate) fn lookup(method: &str, pattern: &str) -> Result<Option<&'static Rule>, ()> {
    let mut known = false;
    for rule in RULES {
        if rule.pattern == pattern {
            known = true;
            if rule.method == "*" || rule.method.eq_ignore_ascii_case(method) {
                return Ok(Some(rule));
            }
        }
    }
    if known { Ok(None) } else { Err(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `(method, pattern)` pairs the router registers, read from this
    /// crate's sources: every `.route("pattern", get(..).post(..))`.
    fn registered_routes() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            // This file names `.route(` in its own text.
            if path.extension().and_then(|e| e.to_str()) != Some("rs")
                || path.ends_with("acl_routes.rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let mut rest = text.as_str();
            while let Some(at) = rest.find(".route(") {
                rest = &rest[at + ".route(".len()..];
                let open = rest.find('"').unwrap();
                let close = open + 1 + rest[open + 1..].find('"').unwrap();
                let pattern = rest[open + 1..close].to_string();
                // The method chain runs to the `.route(`'s closing paren.
                let mut depth = 1;
                let mut end = 0;
                for (i, c) in rest.char_indices() {
                    match c {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let chain = &rest[close..end];
                for (call, method) in [
                    ("get(", "GET"),
                    ("post(", "POST"),
                    ("put(", "PUT"),
                    ("delete(", "DELETE"),
                    ("any(", "*"),
                ] {
                    let found = chain
                        .match_indices(call)
                        .any(|(i, _)| i == 0 || !chain.as_bytes()[i - 1].is_ascii_alphanumeric());
                    if found {
                        out.push((method.to_string(), pattern.clone()));
                    }
                }
                rest = &rest[end..];
            }
        }
        out
    }

    #[test]
    fn every_route_of_the_router_has_an_entry() {
        let routes = registered_routes();
        assert!(routes.len() > 50, "too few routes read: {routes:?}");
        let missing: Vec<_> = routes
            .iter()
            .filter(|(method, pattern)| !matches!(lookup(method, pattern), Ok(Some(_))))
            .collect();
        assert!(
            missing.is_empty(),
            "routes without an ACL entry: {missing:?}"
        );
        let stale: Vec<_> = RULES
            .iter()
            .filter(|rule| {
                !routes
                    .iter()
                    .any(|(m, p)| m == rule.method && p == rule.pattern)
            })
            .collect();
        assert!(stale.is_empty(), "entries for no route: {stale:?}");
    }

    #[test]
    fn unknown_patterns_are_refused_and_other_methods_left_to_the_router() {
        assert_eq!(lookup("GET", "/v1/unheard-of"), Err(()));
        assert_eq!(lookup("DELETE", "/v1/jobs"), Ok(None));
        assert_eq!(
            lookup("get", "/v1/jobs").unwrap().unwrap().op,
            ops::JOB_LIST
        );
    }
}
