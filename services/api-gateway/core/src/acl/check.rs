//! A token's policies compiled into one [`Acl`], and the checks Nomad makes
//! against it: namespace capabilities (an exact namespace wins, else the
//! closest glob), node pool capabilities (matched the same way), variable
//! path capabilities, and the `agent`, `node` and `operator` levels, where
//! `deny` anywhere wins.

use std::collections::{BTreeMap, BTreeSet};

use super::policy::{DENY, LIST, Policy, READ, WRITE};

/// The namespace that selects every namespace on list endpoints.
pub const ALL_NAMESPACES: &str = "*";

type Caps = BTreeSet<String>;

/// What one token may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    management: bool,
    namespaces: BTreeMap<String, Caps>,
    wildcard_namespaces: BTreeMap<String, Caps>,
    node_pools: BTreeMap<String, Caps>,
    wildcard_node_pools: BTreeMap<String, Caps>,
    /// Keyed `namespace\0path`.
    variables: BTreeMap<String, Caps>,
    wildcard_variables: BTreeMap<String, Caps>,
    host_volumes: BTreeMap<String, Caps>,
    wildcard_host_volumes: BTreeMap<String, Caps>,
    agent: String,
    node: String,
    operator: String,
    quota: String,
    plugin: String,
    /// The workload a workload identity token names: its implicit
    /// variables paths ([`Acl::allow_variable_op`]) and service reads.
    workload: Option<WorkloadClaim>,
}

/// The workload a verified workload identity names, with its group (which
/// the token does not carry; it comes from the allocation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadClaim {
    /// The allocation's namespace.
    pub namespace: String,
    /// The job's id.
    pub job: String,
    /// The allocation's task group.
    pub group: String,
    /// The task.
    pub task: String,
}

impl WorkloadClaim {
    /// Whether `path` in `ns` is one of the workload's own variables:
    /// `nomad/jobs`, `nomad/jobs/<job>`, `nomad/jobs/<job>/<group>` and
    /// `nomad/jobs/<job>/<group>/<task>` of its namespace, exactly (not
    /// what lies below them).
    pub fn owns_variable(&self, ns: &str, path: &str) -> bool {
        if ns != self.namespace {
            return false;
        }
        let Some(rest) = path.strip_prefix("nomad/jobs") else {
            return false;
        };
        let own = [
            String::new(),
            format!("/{}", self.job),
            format!("/{}/{}", self.job, self.group),
            format!("/{}/{}/{}", self.job, self.group, self.task),
        ];
        own.iter().any(|p| p == rest)
    }
}

/// Nomad's `maxPrivilege`: deny wins, then write, read, list.
fn max_privilege(a: &str, b: &str) -> String {
    for level in [DENY, WRITE, READ, LIST] {
        if a == level || b == level {
            return level.to_string();
        }
    }
    String::new()
}

/// Go-glob matching as Nomad uses it: `*` matches any run of characters
/// (none included); without `*` the pattern must equal the name.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) {
        return false;
    }
    let mut rest = &name[first.len()..];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Nomad's `findClosestMatchingGlob`: of the globs matching `name`, the
/// one with the smallest difference in length (each `*` counted).
fn closest_glob<'a>(globs: &'a BTreeMap<String, Caps>, name: &str) -> Option<&'a Caps> {
    let len = name.len() as i64;
    globs
        .iter()
        .filter(|(pattern, _)| glob_matches(pattern, name))
        .min_by_key(|(pattern, _)| len - pattern.len() as i64 + pattern.matches('*').count() as i64)
        .map(|(_, caps)| caps)
}

/// Adds `granted` to `caps` as Nomad's `NewACL` does: `deny`, once in,
/// stays alone.
fn grant(caps: &mut Caps, granted: &[String]) {
    if caps.contains(DENY) {
        return;
    }
    for cap in granted {
        if cap == DENY {
            caps.clear();
            caps.insert(DENY.to_string());
            return;
        }
        caps.insert(cap.clone());
    }
}

impl Acl {
    /// The ACL of a management token: everything is allowed.
    pub fn management() -> Acl {
        Acl {
            management: true,
            ..Acl::default()
        }
    }

    /// Compiles `policies` as Nomad's `NewACL` does.
    pub fn compile<'a>(policies: impl IntoIterator<Item = &'a Policy>) -> Acl {
        let mut acl = Acl::default();
        for policy in policies {
            for ns in &policy.namespaces {
                let glob = ns.name.contains('*');
                for path in &ns.variables {
                    let key = format!("{}\0{}", ns.name, path.path);
                    let table = if glob || path.path.contains('*') {
                        &mut acl.wildcard_variables
                    } else {
                        &mut acl.variables
                    };
                    table
                        .entry(key)
                        .or_default()
                        .extend(path.capabilities.iter().cloned());
                }
                let table = if glob {
                    &mut acl.wildcard_namespaces
                } else {
                    &mut acl.namespaces
                };
                grant(table.entry(ns.name.clone()).or_default(), &ns.capabilities);
            }
            for pool in &policy.node_pools {
                let table = if pool.name.contains('*') {
                    &mut acl.wildcard_node_pools
                } else {
                    &mut acl.node_pools
                };
                grant(
                    table.entry(pool.name.clone()).or_default(),
                    &pool.capabilities,
                );
            }
            for hv in &policy.host_volumes {
                let table = if hv.name.contains('*') {
                    &mut acl.wildcard_host_volumes
                } else {
                    &mut acl.host_volumes
                };
                let caps = table.entry(hv.name.clone()).or_default();
                if caps.contains(DENY) {
                    continue;
                }
                for cap in &hv.capabilities {
                    if cap == DENY {
                        caps.clear();
                        caps.insert(DENY.to_string());
                        break;
                    }
                    caps.insert(cap.clone());
                }
            }
            if let Some(level) = &policy.agent {
                acl.agent = max_privilege(&acl.agent, level);
            }
            if let Some(level) = &policy.node {
                acl.node = max_privilege(&acl.node, level);
            }
            if let Some(op) = &policy.operator {
                acl.operator = max_privilege(&acl.operator, &op.policy);
            }
            if let Some(level) = &policy.quota {
                acl.quota = max_privilege(&acl.quota, level);
            }
            if let Some(level) = &policy.plugin {
                acl.plugin = max_privilege(&acl.plugin, level);
            }
        }
        acl
    }

    /// The ACL of a workload identity: `policies` (none today) plus the
    /// workload's implicit rights.
    pub fn workload<'a>(
        claim: WorkloadClaim,
        policies: impl IntoIterator<Item = &'a Policy>,
    ) -> Acl {
        Acl {
            workload: Some(claim),
            ..Acl::compile(policies)
        }
    }

    /// The workload a workload identity's ACL was made for.
    pub fn workload_claim(&self) -> Option<&WorkloadClaim> {
        self.workload.as_ref()
    }

    /// Whether this is a management token's ACL.
    pub fn is_management(&self) -> bool {
        self.management
    }

    fn namespace_caps(&self, ns: &str) -> Option<&Caps> {
        self.namespaces
            .get(ns)
            .or_else(|| closest_glob(&self.wildcard_namespaces, ns))
    }

    fn any_namespace(&self, cb: impl Fn(&Caps) -> bool) -> bool {
        self.namespaces
            .values()
            .chain(self.wildcard_namespaces.values())
            .any(cb)
    }

    /// Nomad's `AllowHostVolumeOperation`: `op` (`mount-readonly`,
    /// `mount-readwrite`) granted on the host volume `name` by its own
    /// `host_volume` block or the closest glob.
    pub fn allow_host_volume_op(&self, name: &str, op: &str) -> bool {
        if self.management {
            return true;
        }
        self.host_volumes
            .get(name)
            .or_else(|| closest_glob(&self.wildcard_host_volumes, name))
            .is_some_and(|caps| caps.contains(op))
    }

    /// Nomad's `AllowNamespaceOperation`: `op` granted in `ns`; for `*`,
    /// granted in any namespace.
    pub fn allow_ns_op(&self, ns: &str, op: &str) -> bool {
        if self.management {
            return true;
        }
        if ns == ALL_NAMESPACES && self.any_namespace(|c| c.contains(op)) {
            return true;
        }
        self.namespace_caps(ns).is_some_and(|c| c.contains(op))
    }

    /// Nomad's `AllowNamespace`: any operation granted in `ns`.
    pub fn allow_namespace(&self, ns: &str) -> bool {
        if self.management {
            return true;
        }
        let usable = |c: &Caps| !c.is_empty() && !c.contains(DENY);
        if ns == ALL_NAMESPACES && self.any_namespace(usable) {
            return true;
        }
        self.namespace_caps(ns).is_some_and(usable)
    }

    /// Nomad's `AllowNodePoolOperation`: `op` (`read`, `write`, `delete`)
    /// granted on the node pool `pool` (an exact name wins, else the
    /// closest glob).
    pub fn allow_node_pool_op(&self, pool: &str, op: &str) -> bool {
        if self.management {
            return true;
        }
        self.node_pools
            .get(pool)
            .or_else(|| closest_glob(&self.wildcard_node_pools, pool))
            .is_some_and(|c| c.contains(op))
    }

    /// Some read in `ns` (any namespace for `*`), of its variables, or of
    /// nodes: what the event stream and search need before their answers
    /// are cut to what the token may read.
    pub fn allow_any_read(&self, ns: &str) -> bool {
        self.allow_namespace(ns) || self.allow_variable_search(ns) || self.allow_node_read()
    }

    /// Nomad's `AllowVariableOperation`: `op` (`list`, `read`, `write`,
    /// `destroy`) on the variable at `path` in `ns`.
    pub fn allow_variable_op(&self, ns: &str, path: &str, op: &str) -> bool {
        if self.management {
            return true;
        }
        let key = format!("{ns}\0{path}");
        if let Some(caps) = self.variables.get(&key) {
            return caps.contains(op);
        }
        // A workload's own paths come after an exact rule and before globs.
        if let Some(claim) = &self.workload
            && claim.owns_variable(ns, path)
        {
            return op == READ || op == LIST;
        }
        closest_glob(&self.wildcard_variables, &key).is_some_and(|c| c.contains(op))
    }

    /// Whether any variables path of `ns` (any namespace for `*`) is
    /// granted at all: the loose check before a list is filtered by path.
    pub fn allow_variable_search(&self, ns: &str) -> bool {
        if self.management {
            return true;
        }
        if let Some(claim) = &self.workload
            && (ns == ALL_NAMESPACES || ns == claim.namespace)
        {
            return true;
        }
        if ns == ALL_NAMESPACES {
            return !self.variables.is_empty() || !self.wildcard_variables.is_empty();
        }
        let prefix = format!("{ns}\0");
        self.variables.keys().any(|k| k.starts_with(&prefix))
            || self.wildcard_variables.keys().any(|k| {
                let (pattern_ns, _) = k.split_once('\0').unwrap_or((k, ""));
                glob_matches(pattern_ns, ns)
            })
    }

    /// Nomad's `AllowServiceRegistrationReadList`: `read-job` in `ns`, or
    /// any workload identity.
    pub fn allow_service_read(&self, ns: &str) -> bool {
        self.workload.is_some() || self.allow_ns_op(ns, "read-job")
    }

    fn level_allows(&self, level: &str, write: bool) -> bool {
        self.management || level == WRITE || (!write && level == READ)
    }

    /// `agent` read.
    pub fn allow_agent_read(&self) -> bool {
        self.level_allows(&self.agent, false)
    }

    /// `agent` write.
    pub fn allow_agent_write(&self) -> bool {
        self.level_allows(&self.agent, true)
    }

    /// `node` read.
    pub fn allow_node_read(&self) -> bool {
        self.level_allows(&self.node, false)
    }

    /// `node` write.
    pub fn allow_node_write(&self) -> bool {
        self.level_allows(&self.node, true)
    }

    /// `operator` read.
    pub fn allow_operator_read(&self) -> bool {
        self.level_allows(&self.operator, false)
    }

    /// `operator` write.
    pub fn allow_operator_write(&self) -> bool {
        self.level_allows(&self.operator, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::policy::parse;

    fn acl(rules: &[&str]) -> Acl {
        let policies: Vec<Policy> = rules.iter().map(|r| parse(r).unwrap()).collect();
        Acl::compile(&policies)
    }

    #[test]
    fn globs_match_like_go_glob() {
        assert!(glob_matches("*", ""));
        assert!(glob_matches("prod-*", "prod-web"));
        assert!(glob_matches("*-web", "prod-web"));
        assert!(glob_matches("p*d*b", "prod-web"));
        assert!(!glob_matches("prod-*", "dev-web"));
        assert!(!glob_matches("a*a", "a"));
        assert!(glob_matches("a*a", "aa"));
        assert!(!glob_matches("web", "web2"));
    }

    #[test]
    fn the_exact_namespace_wins_then_the_closest_glob() {
        let a = acl(&[r#"
            namespace "*" { policy = "read" }
            namespace "prod-*" { policy = "write" }
            namespace "prod-secret" { policy = "deny" }
        "#]);
        assert!(a.allow_ns_op("dev", "read-job"));
        assert!(!a.allow_ns_op("dev", "submit-job"));
        assert!(a.allow_ns_op("prod-web", "submit-job"));
        assert!(!a.allow_ns_op("prod-secret", "read-job"));
        assert!(!a.allow_namespace("prod-secret"));
        assert!(a.allow_namespace("dev"));
        assert!(a.allow_ns_op("*", "submit-job"));
        assert!(!a.allow_ns_op("*", "alloc-node-exec"));
        let one = acl(&[r#"namespace "a" { policy = "read" }"#]);
        assert!(one.allow_any_read("a") && one.allow_any_read("*"));
        assert!(!one.allow_any_read("b"));
        assert!(!acl(&[]).allow_any_read("*"));
        assert!(acl(&[r#"node { policy = "read" }"#]).allow_any_read("b"));
    }

    #[test]
    fn deny_wins_across_policies_and_levels_merge() {
        let a = acl(&[
            r#"namespace "default" { policy = "write" }
               node { policy = "read" }
               agent { policy = "write" }"#,
            r#"namespace "default" { policy = "deny" }
               node { policy = "write" }
               operator { policy = "read" }"#,
        ]);
        assert!(!a.allow_ns_op("default", "read-job"));
        assert!(a.allow_node_write() && a.allow_node_read());
        assert!(a.allow_agent_write());
        assert!(a.allow_operator_read() && !a.allow_operator_write());
        let none = acl(&[r#"namespace "default" { policy = "read" }"#]);
        assert!(!none.allow_node_read() && !none.allow_agent_read());
        assert!(!none.allow_ns_op("other", "read-job"));
        let m = Acl::management();
        assert!(m.allow_ns_op("x", "submit-job") && m.allow_operator_write());
    }

    #[test]
    fn node_pools_match_exactly_or_by_the_closest_glob() {
        let a = acl(&[
            r#"
            node_pool "*" { policy = "read" }
            node_pool "gpu-*" { policy = "write" }
            node_pool "gpu-secret" { policy = "deny" }
            node_pool "batch" { capabilities = ["read", "delete"] }
        "#,
            r#"node_pool "gpu-secret" { policy = "write" }"#,
        ]);
        assert!(a.allow_node_pool_op("default", "read"));
        assert!(!a.allow_node_pool_op("default", "write"));
        assert!(a.allow_node_pool_op("gpu-a", "write"));
        assert!(a.allow_node_pool_op("gpu-a", "delete"));
        assert!(!a.allow_node_pool_op("gpu-secret", "read"), "deny wins");
        assert!(a.allow_node_pool_op("batch", "delete"));
        assert!(!a.allow_node_pool_op("batch", "write"));
        let none = acl(&[r#"namespace "default" { policy = "write" }"#]);
        assert!(!none.allow_node_pool_op("default", "read"));
        assert!(Acl::management().allow_node_pool_op("x", "delete"));
    }

    #[test]
    fn a_workload_reads_its_own_job_group_and_task_variables_only() {
        let claim = WorkloadClaim {
            namespace: "default".into(),
            job: "web".into(),
            group: "g".into(),
            task: "t".into(),
        };
        let a = Acl::workload(claim, &[]);
        for path in [
            "nomad/jobs",
            "nomad/jobs/web",
            "nomad/jobs/web/g",
            "nomad/jobs/web/g/t",
        ] {
            assert!(a.allow_variable_op("default", path, "read"), "{path}");
            assert!(a.allow_variable_op("default", path, "list"), "{path}");
            assert!(!a.allow_variable_op("default", path, "write"), "{path}");
        }
        for path in [
            "nomad/jobs/db",
            "nomad/jobs/web/g/t/deeper",
            "nomad/jobs/webx",
            "nomad/jobs/web/other",
            "app/x",
        ] {
            assert!(!a.allow_variable_op("default", path, "read"), "{path}");
        }
        assert!(!a.allow_variable_op("prod", "nomad/jobs/web", "read"));
        assert!(a.allow_variable_search("default") && a.allow_variable_search("*"));
        assert!(!a.allow_variable_search("prod"));
        assert!(!a.allow_ns_op("default", "read-job"));
        assert!(!a.allow_namespace("default") && !a.allow_node_read());
        let ruled = Acl::workload(
            a.workload_claim().unwrap().clone(),
            &[parse(r#"namespace "default" { variables { path "nomad/jobs/web" { capabilities = ["deny"] } } }"#).unwrap()],
        );
        assert!(
            !ruled.allow_variable_op("default", "nomad/jobs/web", "read"),
            "an exact rule wins"
        );
    }

    #[test]
    fn variable_paths_match_exactly_or_by_glob() {
        let a = acl(&[r#"
            namespace "default" {
              variables {
                path "app/*" { capabilities = ["read"] }
                path "app/secret" { capabilities = ["deny"] }
                path "ops/db" { capabilities = ["write", "list"] }
              }
            }
            namespace "dev-*" {
              variables { path "*" { capabilities = ["write"] } }
            }
        "#]);
        assert!(a.allow_variable_op("default", "app/web", "read"));
        assert!(a.allow_variable_op("default", "app/web", "list"));
        assert!(!a.allow_variable_op("default", "app/web", "write"));
        assert!(!a.allow_variable_op("default", "app/secret", "read"));
        assert!(a.allow_variable_op("default", "ops/db", "write"));
        assert!(a.allow_variable_op("dev-1", "x", "write"));
        assert!(!a.allow_variable_op("prod", "x", "read"));
        assert!(a.allow_variable_search("default") && a.allow_variable_search("dev-2"));
        assert!(!a.allow_variable_search("prod"));
    }
}
