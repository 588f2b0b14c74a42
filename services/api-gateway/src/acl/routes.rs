//! What each HTTP route needs when ACLs are on: one table of method, path
//! pattern (as the router spells it) and [`Need`]. A route missing here is
//! refused, so adding a route means adding its line.

use super::check::{ALL_NAMESPACES, Acl};

/// What a request must be allowed to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: Nomad answers without a token.
    Public,
    /// A token (not anonymous); the handler decides the rest.
    Token,
    /// A namespace capability in the request's namespace.
    Ns(&'static str),
    /// Any capability in the namespace the URL names
    /// (`/v1/namespace/{name}`): Nomad's `AllowNamespace`.
    NamespaceAny,
    /// `node` read.
    NodeRead,
    /// `node` write.
    NodeWrite,
    /// `agent` read.
    AgentRead,
    /// `agent` write.
    AgentWrite,
    /// `operator` read.
    OperatorRead,
    /// `operator` write.
    OperatorWrite,
    /// A management token.
    Management,
    /// A variables capability (`list`, `read`, `write`, `destroy`) on the
    /// URL's path (any path of the namespace for `list`).
    Var(&'static str),
    /// Some read in the namespace (any namespace for `*`), of its
    /// variables, or of nodes; the event stream and search then answer
    /// only what the token may read.
    AnyRead,
    /// A node pool capability (`read`, `write`, `delete`) on the pool the
    /// URL names, or a written body names; a list of pools shows the pools
    /// the token has it on (Nomad's `AllowNodePoolOperation`).
    NodePool(&'static str),
    /// `node` read and node pool `read` on the URL's pool: its nodes.
    PoolNodes,
    /// Node pool `read` on the URL's pool and `list-jobs` in the request's
    /// namespace: its jobs, the list keeping to namespaces with `list-jobs`.
    PoolJobs,
    /// Reading registered services: `read-job` in the namespace, or any
    /// workload identity (Nomad's `AllowServiceRegistrationReadList`), so
    /// a task's templates find services with the task's own token.
    ServiceRead,
    /// `alloc-exec` in the alloc's namespace, as [`Need::Ns`]; but a
    /// WebSocket that asks for the handshake (`?ws_handshake=true`) presents
    /// its token in its first frame, so its handler decides.
    Exec,
}

impl Need {
    /// A short name (`ns:read-job`, `node:read`, ...), for tests and logs.
    pub fn name(self) -> String {
        match self {
            Need::Public => "public".into(),
            Need::Token => "token".into(),
            Need::Ns(cap) => format!("ns:{cap}"),
            Need::NamespaceAny => "ns:any".into(),
            Need::NodeRead => "node:read".into(),
            Need::NodeWrite => "node:write".into(),
            Need::AgentRead => "agent:read".into(),
            Need::AgentWrite => "agent:write".into(),
            Need::OperatorRead => "operator:read".into(),
            Need::OperatorWrite => "operator:write".into(),
            Need::Management => "management".into(),
            Need::Var(cap) => format!("var:{cap}"),
            Need::AnyRead => "any-read".into(),
            Need::Exec => "ns:alloc-exec".into(),
            Need::ServiceRead => "service:read".into(),
            Need::NodePool(cap) => format!("node_pool:{cap}"),
            Need::PoolNodes => "node:read+node_pool:read".into(),
            Need::PoolJobs => "node_pool:read+ns:list-jobs".into(),
        }
    }

    /// Whether `acl` grants this need in namespace `ns` on `path` (the
    /// variable's path, or the node pool's name). [`Need::Public`] and
    /// [`Need::Token`] are decided by the caller.
    pub fn allowed(self, acl: &Acl, ns: &str, path: &str) -> bool {
        match self {
            Need::Public | Need::Token => true,
            Need::Ns(cap) => acl.allow_ns_op(ns, cap),
            Need::NamespaceAny => acl.allow_namespace(ns),
            Need::NodeRead => acl.allow_node_read(),
            Need::NodeWrite => acl.allow_node_write(),
            Need::AgentRead => acl.allow_agent_read(),
            Need::AgentWrite => acl.allow_agent_write(),
            Need::OperatorRead => acl.allow_operator_read(),
            Need::OperatorWrite => acl.allow_operator_write(),
            Need::Management => acl.is_management(),
            Need::Var("list") => acl.allow_variable_search(ns),
            Need::Var(cap) => acl.allow_variable_op(ns, path, cap),
            Need::AnyRead => acl.allow_any_read(ns),
            Need::Exec => acl.allow_ns_op(ns, crate::alloc_exec::ALLOC_EXEC),
            Need::ServiceRead => acl.allow_service_read(ns),
            Need::NodePool(cap) => acl.allow_node_pool_op(path, cap),
            Need::PoolNodes => acl.allow_node_read() && acl.allow_node_pool_op(path, "read"),
            Need::PoolJobs => {
                acl.allow_node_pool_op(path, "read") && acl.allow_ns_op(ns, "list-jobs")
            }
        }
    }

    /// Whether `acl` may make a request needing this in `ns` (on `path`)
    /// through either transport. Over every namespace (`*`) a namespace
    /// capability is enough only for lists, whose answers are then cut to
    /// what the token may read ([`Need::shows`]); elsewhere `*` takes a
    /// management token.
    pub fn permits(self, acl: &Acl, ns: &str, path: &str, list: bool) -> bool {
        // The list of every pool is anyone's, cut to the pools they may see.
        if list && matches!(self, Need::NodePool(_)) {
            return true;
        }
        if ns == ALL_NAMESPACES
            && !list
            && matches!(self, Need::Ns(_) | Need::Exec)
            && !acl.is_management()
        {
            return false;
        }
        self.allowed(acl, ns, path)
    }

    /// Whether a list needing this shows `acl` an item of namespace `ns`
    /// (a variable at `path`, a node pool named `path`): the capability
    /// granted there (for variables, `list` on the item's path; for node
    /// lists, `read-job`).
    pub fn shows(self, acl: &Acl, ns: &str, path: &str) -> bool {
        match self {
            Need::Var(_) => acl.allow_variable_op(ns, path, "list"),
            Need::Ns(cap) => acl.allow_ns_op(ns, cap),
            Need::NodePool(cap) => acl.allow_node_pool_op(path, cap),
            Need::PoolJobs => acl.allow_ns_op(ns, "list-jobs"),
            Need::ServiceRead => acl.allow_service_read(ns),
            _ => acl.allow_ns_op(ns, "read-job"),
        }
    }
}

/// One route's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// `GET`, `PUT`, `POST`, `DELETE`, or `*` for any.
    pub method: &'static str,
    /// The router's pattern, e.g. `/v1/job/{id}`.
    pub pattern: &'static str,
    /// What the request needs.
    pub need: Need,
    /// A list whose items (JSON objects with `Namespace`) are filtered to
    /// what the token may see, as Nomad's lists with `?namespace=*`.
    pub list: bool,
}

const fn r(method: &'static str, pattern: &'static str, need: Need) -> Rule {
    Rule {
        method,
        pattern,
        need,
        list: false,
    }
}

const fn list(pattern: &'static str, need: Need) -> Rule {
    Rule {
        method: "GET",
        pattern,
        need,
        list: true,
    }
}

/// The namespace capabilities Nomad's job endpoints check.
const LIST_JOBS: Need = Need::Ns("list-jobs");
const READ_JOB: Need = Need::Ns("read-job");
const SUBMIT_JOB: Need = Need::Ns("submit-job");

/// Every route of the HTTP API and what it needs (a route registered for
/// POST and PUT has both lines).
pub const RULES: &[Rule] = &[
    list("/v1/jobs", LIST_JOBS),
    r("PUT", "/v1/jobs", SUBMIT_JOB),
    r("POST", "/v1/jobs", SUBMIT_JOB),
    r("POST", "/v1/jobs/parse", Need::Ns("parse-job")),
    r("PUT", "/v1/jobs/parse", Need::Ns("parse-job")),
    r("POST", "/v1/validate/job", READ_JOB),
    r("PUT", "/v1/validate/job", READ_JOB),
    r("GET", "/v1/job/{id}", READ_JOB),
    r("GET", "/v1/job/{id}/submission", READ_JOB),
    r("POST", "/v1/job/{id}", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}", SUBMIT_JOB),
    r("DELETE", "/v1/job/{id}", SUBMIT_JOB),
    r("POST", "/v1/job/{id}/plan", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}/plan", SUBMIT_JOB),
    r("POST", "/v1/job/{id}/evaluate", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}/evaluate", SUBMIT_JOB),
    r("GET", "/v1/job/{id}/versions", READ_JOB),
    r("GET", "/v1/job/{id}/allocations", READ_JOB),
    r("GET", "/v1/job/{id}/evaluations", READ_JOB),
    r("GET", "/v1/job/{id}/summary", READ_JOB),
    r("POST", "/v1/job/{id}/revert", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}/revert", SUBMIT_JOB),
    r("POST", "/v1/job/{id}/stable", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}/stable", SUBMIT_JOB),
    r("GET", "/v1/job/{id}/scale", Need::Ns("read-job-scaling")),
    r("POST", "/v1/job/{id}/scale", Need::Ns("scale-job")),
    r("PUT", "/v1/job/{id}/scale", Need::Ns("scale-job")),
    r("POST", "/v1/job/{id}/dispatch", Need::Ns("dispatch-job")),
    r("PUT", "/v1/job/{id}/dispatch", Need::Ns("dispatch-job")),
    r("POST", "/v1/job/{id}/periodic/force", SUBMIT_JOB),
    r("PUT", "/v1/job/{id}/periodic/force", SUBMIT_JOB),
    r("GET", "/v1/job/{id}/deployments", READ_JOB),
    r("GET", "/v1/job/{id}/deployment", READ_JOB),
    list("/v1/evaluations", READ_JOB),
    r("GET", "/v1/evaluation/{id}", READ_JOB),
    r("GET", "/v1/evaluation/{id}/allocations", READ_JOB),
    list("/v1/allocations", READ_JOB),
    r("GET", "/v1/allocation/{id}", READ_JOB),
    r(
        "POST",
        "/v1/allocation/{id}/stop",
        Need::Ns("alloc-lifecycle"),
    ),
    r(
        "PUT",
        "/v1/allocation/{id}/stop",
        Need::Ns("alloc-lifecycle"),
    ),
    r("GET", "/v1/nodes", Need::NodeRead),
    // Node pools, as Nomad's: a pool capability on the pool named (by the
    // URL, or the body of a write to /v1/node/pools); the list shows the
    // pools the token reads.
    list("/v1/node/pools", Need::NodePool("read")),
    r("PUT", "/v1/node/pools", Need::NodePool("write")),
    r("POST", "/v1/node/pools", Need::NodePool("write")),
    r("GET", "/v1/node/pool/{name}", Need::NodePool("read")),
    r("PUT", "/v1/node/pool/{name}", Need::NodePool("write")),
    r("POST", "/v1/node/pool/{name}", Need::NodePool("write")),
    r("DELETE", "/v1/node/pool/{name}", Need::NodePool("delete")),
    r("GET", "/v1/node/pool/{name}/nodes", Need::PoolNodes),
    list("/v1/node/pool/{name}/jobs", Need::PoolJobs),
    // Reads show what the token is granted anything in (the handlers
    // filter); writes are a management token's, as Nomad's.
    r("GET", "/v1/namespaces", Need::Public),
    r("PUT", "/v1/namespace", Need::Management),
    r("POST", "/v1/namespace", Need::Management),
    r("*", "/v1/namespace/", Need::Public),
    r("GET", "/v1/namespace/{name}", Need::NamespaceAny),
    r("PUT", "/v1/namespace/{name}", Need::Management),
    r("POST", "/v1/namespace/{name}", Need::Management),
    r("DELETE", "/v1/namespace/{name}", Need::Management),
    r("GET", "/v1/node/{id}", Need::NodeRead),
    list("/v1/node/{id}/allocations", Need::NodeRead),
    r("POST", "/v1/node/{id}/eligibility", Need::NodeWrite),
    r("PUT", "/v1/node/{id}/eligibility", Need::NodeWrite),
    r("POST", "/v1/node/{id}/drain", Need::NodeWrite),
    r("PUT", "/v1/node/{id}/drain", Need::NodeWrite),
    r("POST", "/v1/node/{id}/evaluate", Need::NodeWrite),
    r("PUT", "/v1/node/{id}/evaluate", Need::NodeWrite),
    r("POST", "/v1/node/{id}/purge", Need::NodeWrite),
    r("PUT", "/v1/node/{id}/purge", Need::NodeWrite),
    list("/v1/deployments", READ_JOB),
    r("GET", "/v1/deployment/{id}", READ_JOB),
    r("GET", "/v1/deployment/allocations/{id}", READ_JOB),
    r("POST", "/v1/deployment/promote/{id}", SUBMIT_JOB),
    r("PUT", "/v1/deployment/promote/{id}", SUBMIT_JOB),
    r("POST", "/v1/deployment/fail/{id}", SUBMIT_JOB),
    r("PUT", "/v1/deployment/fail/{id}", SUBMIT_JOB),
    r("POST", "/v1/deployment/pause/{id}", SUBMIT_JOB),
    r("PUT", "/v1/deployment/pause/{id}", SUBMIT_JOB),
    r("POST", "/v1/deployment/allocation-health/{id}", SUBMIT_JOB),
    r("PUT", "/v1/deployment/allocation-health/{id}", SUBMIT_JOB),
    r(
        "GET",
        "/v1/operator/scheduler/configuration",
        Need::OperatorRead,
    ),
    r(
        "PUT",
        "/v1/operator/scheduler/configuration",
        Need::OperatorWrite,
    ),
    r(
        "POST",
        "/v1/operator/scheduler/configuration",
        Need::OperatorWrite,
    ),
    r("PUT", "/v1/system/gc", Need::Management),
    r("GET", "/v1/status/leader", Need::Public),
    r("GET", "/v1/status/peers", Need::Public),
    // Load balancers and orchestrators probe it without a token, as Nomad allows.
    r("GET", "/v1/agent/health", Need::Public),
    r("GET", "/v1/agent/self", Need::AgentRead),
    r("GET", "/v1/agent/members", Need::NodeRead),
    r("GET", "/v1/agent/servers", Need::AgentRead),
    r("PUT", "/v1/agent/servers", Need::AgentWrite),
    r("POST", "/v1/agent/servers", Need::AgentWrite),
    r("PUT", "/v1/agent/join", Need::AgentWrite),
    r("POST", "/v1/agent/join", Need::AgentWrite),
    r("PUT", "/v1/agent/force-leave", Need::AgentWrite),
    r("POST", "/v1/agent/force-leave", Need::AgentWrite),
    r("GET", "/v1/regions", Need::Public),
    list("/v1/scaling/policies", Need::Ns("list-scaling-policies")),
    r(
        "GET",
        "/v1/scaling/policy/{id}",
        Need::Ns("read-scaling-policy"),
    ),
    // Search keeps to what the token may read (see `crate::search`).
    r("GET", "/v1/search", Need::AnyRead),
    r("POST", "/v1/search", Need::AnyRead),
    r("PUT", "/v1/search", Need::AnyRead),
    r("POST", "/v1/search/fuzzy", Need::AnyRead),
    r("PUT", "/v1/search/fuzzy", Need::AnyRead),
    r("GET", "/v1/operator/raft/configuration", Need::OperatorRead),
    r(
        "GET",
        "/v1/client/fs/logs/{alloc_id}",
        Need::Ns("read-logs"),
    ),
    r("GET", "/v1/client/fs/ls/{alloc_id}", Need::Ns("read-fs")),
    r("GET", "/v1/client/fs/stat/{alloc_id}", Need::Ns("read-fs")),
    r("GET", "/v1/client/fs/cat/{alloc_id}", Need::Ns("read-fs")),
    r(
        "GET",
        "/v1/client/fs/readat/{alloc_id}",
        Need::Ns("read-fs"),
    ),
    r(
        "GET",
        "/v1/client/fs/stream/{alloc_id}",
        Need::Ns("read-fs"),
    ),
    // Without an alloc id these only answer 400.
    r("*", "/v1/client/fs/ls/", Need::Public),
    r("*", "/v1/client/fs/stat/", Need::Public),
    r("*", "/v1/client/fs/cat/", Need::Public),
    r("*", "/v1/client/fs/readat/", Need::Public),
    r("*", "/v1/client/fs/stream/", Need::Public),
    r("GET", "/v1/client/stats", Need::NodeRead),
    r("GET", "/v1/client/allocation/{alloc_id}/stats", READ_JOB),
    r("GET", "/v1/client/allocation/{alloc_id}/checks", READ_JOB),
    r(
        "POST",
        "/v1/client/allocation/{alloc_id}/signal",
        Need::Ns("alloc-lifecycle"),
    ),
    r(
        "PUT",
        "/v1/client/allocation/{alloc_id}/signal",
        Need::Ns("alloc-lifecycle"),
    ),
    r(
        "POST",
        "/v1/client/allocation/{alloc_id}/restart",
        Need::Ns("alloc-lifecycle"),
    ),
    r(
        "PUT",
        "/v1/client/allocation/{alloc_id}/restart",
        Need::Ns("alloc-lifecycle"),
    ),
    r("GET", "/v1/client/allocation/{alloc_id}/exec", Need::Exec),
    // Nomad takes submit-job or gc-allocation; the table holds one.
    r("GET", "/v1/client/allocation/{alloc_id}/gc", SUBMIT_JOB),
    r("POST", "/v1/client/allocation/{alloc_id}/gc", SUBMIT_JOB),
    r("PUT", "/v1/client/allocation/{alloc_id}/gc", SUBMIT_JOB),
    r("GET", "/v1/client/gc", Need::NodeWrite),
    r("POST", "/v1/client/gc", Need::NodeWrite),
    r("PUT", "/v1/client/gc", Need::NodeWrite),
    r("GET", "/v1/event/stream", Need::AnyRead),
    r("GET", "/v1/metrics", Need::Public),
    // Workload identity verification keys and OIDC discovery: public.
    r("GET", "/.well-known/jwks.json", Need::Public),
    r("GET", "/.well-known/openid-configuration", Need::Public),
    r("GET", "/metrics", Need::Public),
    // Service discovery, as Nomad's: reading a service is reading jobs (or
    // holding a workload identity); removing an instance takes submit-job.
    list("/v1/services", Need::ServiceRead),
    r("*", "/v1/service/", Need::Public),
    r("GET", "/v1/service/{name}", Need::ServiceRead),
    r("DELETE", "/v1/service/{name}/{id}", SUBMIT_JOB),
    list("/v1/vars", Need::Var("list")),
    r("*", "/v1/var/", Need::Public),
    r("GET", "/v1/var/{*path}", Need::Var("read")),
    r("PUT", "/v1/var/{*path}", Need::Var("write")),
    r("POST", "/v1/var/{*path}", Need::Var("write")),
    r("DELETE", "/v1/var/{*path}", Need::Var("destroy")),
    r("POST", "/v1/acl/bootstrap", Need::Public),
    r("PUT", "/v1/acl/bootstrap", Need::Public),
    r("GET", "/v1/acl/policies", Need::Token),
    r("GET", "/v1/acl/policy/{name}", Need::Token),
    r("PUT", "/v1/acl/policy/{name}", Need::Management),
    r("POST", "/v1/acl/policy/{name}", Need::Management),
    r("DELETE", "/v1/acl/policy/{name}", Need::Management),
    r("GET", "/v1/acl/tokens", Need::Management),
    r("PUT", "/v1/acl/token", Need::Management),
    r("POST", "/v1/acl/token", Need::Management),
    r("GET", "/v1/acl/token/self", Need::Token),
    r("GET", "/v1/acl/token/{accessor}", Need::Token),
    r("PUT", "/v1/acl/token/{accessor}", Need::Management),
    r("POST", "/v1/acl/token/{accessor}", Need::Management),
    r("DELETE", "/v1/acl/token/{accessor}", Need::Management),
];

/// What a request to `pattern` with `method` needs: `Ok(None)` when the
/// pattern is known but not for this method (the router answers 405),
/// `Err(())` when the pattern is unknown (refused).
pub fn lookup(method: &str, pattern: &str) -> Result<Option<&'static Rule>, ()> {
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

    /// The `(method, pattern)` pairs the router registers, read from the
    /// HTTP sources: every `.route("pattern", get(..).post(..))`.
    fn registered_routes() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
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
    fn every_namespace_is_open_to_lists_and_cut_to_what_is_read() {
        let policy = crate::acl::policy::parse(r#"namespace "a" { policy = "read" }"#).unwrap();
        let acl = Acl::compile([&policy]);
        let read_job = Need::Ns("read-job");
        assert!(read_job.permits(&acl, "*", "", true));
        assert!(!read_job.permits(&acl, "*", "", false));
        assert!(read_job.permits(&Acl::management(), "*", "", false));
        assert!(!read_job.permits(&Acl::default(), "*", "", true));
        assert!(Need::AnyRead.permits(&acl, "*", "", false));
        assert!(read_job.shows(&acl, "a", "") && !read_job.shows(&acl, "b", ""));
        assert!(Need::NodeRead.shows(&acl, "a", "") && !Need::NodeRead.shows(&acl, "b", ""));
    }

    #[test]
    fn unknown_patterns_are_refused_and_other_methods_left_to_the_router() {
        assert_eq!(lookup("GET", "/v1/unheard-of"), Err(()));
        assert_eq!(lookup("DELETE", "/v1/jobs"), Ok(None));
        assert_eq!(
            lookup("get", "/v1/jobs").unwrap().unwrap().need,
            Need::Ns("list-jobs")
        );
    }
}
