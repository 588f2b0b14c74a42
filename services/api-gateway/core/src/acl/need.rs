//! What an operation needs when ACLs are on ([`Need`]), and how a
//! compiled [`Acl`] decides it.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
