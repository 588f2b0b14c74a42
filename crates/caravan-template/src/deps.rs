//! What a template reads from the cluster (its dependencies), the values the client fetches for
//! them, and the parsing of the query strings the template functions take.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// A piece of cluster state a template reads; the client fetches and watches each one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dep {
    /// One variable, read by `nomadVar` and `nomadVarExists`.
    Var {
        /// The variable's namespace.
        namespace: String,
        /// The variable's path, without leading or trailing slashes.
        path: String,
    },
    /// The variables under a prefix, read by `nomadVarList` and `nomadVarListSafe`.
    VarList {
        /// The namespace listed.
        namespace: String,
        /// The path prefix ("" lists every variable of the namespace).
        prefix: String,
    },
    /// The instances of one service, read by `nomadService`.
    Service {
        /// The service's namespace.
        namespace: String,
        /// The service name.
        name: String,
        /// Only instances carrying this tag.
        tag: Option<String>,
    },
    /// The services of a namespace with their tags, read by `nomadServices`.
    Services {
        /// The namespace listed.
        namespace: String,
    },
}

/// The client's answer for a [`Dep`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepValue {
    /// The variable, or `None` when it does not exist.
    Var(Option<Variable>),
    /// The variables under the prefix, ordered by path.
    VarList(Vec<VariableMeta>),
    /// The service's instances (the renderer keeps those with the dep's tag).
    Service(Vec<ServiceInstance>),
    /// The namespace's services.
    Services(Vec<ServiceStub>),
}

/// A variable with its items, as `nomadVar` sees it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Variable {
    /// The variable's namespace.
    pub namespace: String,
    /// The variable's path.
    pub path: String,
    /// The variable's items (key to value).
    pub items: BTreeMap<String, String>,
    /// The store index that created the variable.
    pub create_index: u64,
    /// The store index that last changed the variable.
    pub modify_index: u64,
}

/// A variable without its items, as `nomadVarList` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VariableMeta {
    /// The variable's namespace.
    pub namespace: String,
    /// The variable's path.
    pub path: String,
    /// The store index that created the variable.
    pub create_index: u64,
    /// The store index that last changed the variable.
    pub modify_index: u64,
}

/// One registered instance of a service, as `nomadService` sees it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServiceInstance {
    /// The registration's id.
    pub id: String,
    /// The service name.
    pub service_name: String,
    /// The service's namespace.
    pub namespace: String,
    /// The node the instance runs on.
    pub node_id: String,
    /// The node's datacenter.
    pub datacenter: String,
    /// The job that registered the instance.
    pub job_id: String,
    /// The allocation that registered the instance.
    pub alloc_id: String,
    /// The instance's tags.
    pub tags: Vec<String>,
    /// The address the instance listens on.
    pub address: String,
    /// The port the instance listens on.
    pub port: u32,
    /// The store index that created the registration.
    pub create_index: u64,
    /// The store index that last changed the registration.
    pub modify_index: u64,
}

/// A service name with the union of its instances' tags, as `nomadServices` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServiceStub {
    /// The service name.
    pub name: String,
    /// The tags of the service's instances.
    pub tags: Vec<String>,
}

#[allow(clippy::expect_used)] // constant patterns, checked by the tests
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("constant pattern")
}

// The query grammars of the template functions: "path@namespace.region" for variables,
// "tag.name@region" for services.
static VAR_GET_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\A/?(?P<path>[^@]+)(@(?P<namespace>[\w\-_]+))?(\.(?P<region>[\w\-_]+))?\z")
});
static VAR_LIST_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\A/?(?P<prefix>[^@]*)(@(?P<namespace>[\w\-_]+))?(\.(?P<region>[\w\-_]+))?\z")
});
static SERVICE_RE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\A((?P<tag>[\w=:.\-_]+)\.)?(?P<name>[\w\-_]+)(@(?P<region>[\w.\-_]+))?\z")
});
static SERVICES_RE: LazyLock<Regex> = LazyLock::new(|| re(r"\A(@(?P<region>[\w.\-_]+))?\z"));

/// A parsed query: the dep and the region it names, if any.
pub(crate) struct Query {
    pub dep: Dep,
    pub region: Option<String>,
}

fn group(c: &regex::Captures<'_>, name: &str) -> Option<String> {
    c.name(name)
        .map(|m| m.as_str().to_string())
        .filter(|s| !s.is_empty())
}

/// Parses `nomadVar`'s "path[@namespace[.region]]"; `None` for an empty path.
pub(crate) fn var_query(default_ns: &str, s: &str) -> Result<Option<Query>, String> {
    let s = s.trim().trim_matches('/');
    if s.is_empty() {
        return Ok(None);
    }
    let c = VAR_GET_RE
        .captures(s)
        .ok_or_else(|| format!("nomad.var.get: invalid format: {s:?}"))?;
    Ok(Some(Query {
        dep: Dep::Var {
            namespace: group(&c, "namespace").unwrap_or_else(|| default_ns.to_string()),
            path: group(&c, "path").unwrap_or_default(),
        },
        region: group(&c, "region"),
    }))
}

/// Parses `nomadVarList`'s "[prefix][@namespace[.region]]".
pub(crate) fn var_list_query(default_ns: &str, s: &str) -> Result<Query, String> {
    let c = VAR_LIST_RE
        .captures(s)
        .ok_or_else(|| format!("nomad.var.list: invalid format: {s:?}"))?;
    let mut prefix = group(&c, "prefix").unwrap_or_default();
    if prefix.trim_matches('/').is_empty() {
        prefix.clear();
    }
    Ok(Query {
        dep: Dep::VarList {
            namespace: group(&c, "namespace").unwrap_or_else(|| default_ns.to_string()),
            prefix,
        },
        region: group(&c, "region"),
    })
}

/// Parses `nomadService`'s "[tag.]name[@region]".
pub(crate) fn service_query(default_ns: &str, s: &str) -> Result<Query, String> {
    let c = SERVICE_RE
        .captures(s)
        .ok_or_else(|| format!("nomad.service: invalid format: {s:?}"))?;
    Ok(Query {
        dep: Dep::Service {
            namespace: default_ns.to_string(),
            name: group(&c, "name").unwrap_or_default(),
            tag: group(&c, "tag"),
        },
        region: group(&c, "region"),
    })
}

/// Parses `nomadServices`' "[@region]".
pub(crate) fn services_query(default_ns: &str, s: &str) -> Result<Query, String> {
    let c = SERVICES_RE
        .captures(s)
        .ok_or_else(|| format!("nomad.services: invalid format: {s:?}"))?;
    Ok(Query {
        dep: Dep::Services {
            namespace: default_ns.to_string(),
        },
        region: group(&c, "region"),
    })
}

/// Picks `count` instances by rendezvous hashing on `key`, the stable subset the
/// `nomadService <count> "<key>" "<name>"` form renders: each instance's priority is the
/// hex SHA-256 of its port (8 bytes big-endian), alloc id, id, namespace, address, name,
/// tags and the key; the lowest priorities win, in that order.
pub(crate) fn choose(
    instances: &[ServiceInstance],
    count: i64,
    key: &str,
) -> Result<Vec<ServiceInstance>, String> {
    if count < 0 || key.is_empty() {
        return Err(format!(
            "nomadService: malformed choose parameter \"{count}|{key}\": want a count >= 0 and a non-empty key"
        ));
    }
    use sha2::{Digest, Sha256};
    let mut ranked: Vec<(String, &ServiceInstance)> = instances
        .iter()
        .map(|s| {
            let mut h = Sha256::new();
            h.update(u64::from(s.port).to_be_bytes());
            h.update(s.alloc_id.as_bytes());
            h.update(s.id.as_bytes());
            h.update(s.namespace.as_bytes());
            h.update(s.address.as_bytes());
            h.update(s.service_name.as_bytes());
            for t in &s.tags {
                h.update(t.as_bytes());
            }
            h.update(key.as_bytes());
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            (hex, s)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0)); // stable, as the reference's SliceStable
    let n = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(ranked.len());
    Ok(ranked.into_iter().take(n).map(|(_, s)| s.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(id: &str) -> ServiceInstance {
        ServiceInstance {
            id: id.into(),
            service_name: "s1".into(),
            ..Default::default()
        }
    }

    fn ids(v: Vec<ServiceInstance>) -> Vec<String> {
        v.into_iter().map(|s| s.id).collect()
    }

    #[test]
    fn choose_matches_reference_vectors() {
        let regs = vec![reg("abc001"), reg("abc002"), reg("abc003")];
        assert_eq!(ids(choose(&regs, 1, "aaa").unwrap()), ["abc003"]);
        assert_eq!(ids(choose(&regs, 2, "aaa").unwrap()), ["abc003", "abc001"]);
        assert_eq!(
            ids(choose(&regs, 3, "aaa").unwrap()),
            ["abc003", "abc001", "abc002"]
        );
        assert_eq!(
            ids(choose(&regs, 3, "ddd").unwrap()),
            ["abc001", "abc002", "abc003"]
        );
        assert_eq!(
            ids(choose(&regs, 3, "ccc").unwrap()),
            ["abc003", "abc002", "abc001"]
        );
        assert!(choose(&[], 2, "aaa").unwrap().is_empty());
        assert!(choose(&regs, 1, "").is_err());
        assert!(choose(&regs, -1, "k").is_err());
    }

    #[test]
    fn var_query_forms() {
        let q = var_query("default", "/a/b/").unwrap().unwrap();
        assert_eq!(
            q.dep,
            Dep::Var {
                namespace: "default".into(),
                path: "a/b".into()
            }
        );
        let q = var_query("default", "a/b@prod").unwrap().unwrap();
        assert_eq!(
            q.dep,
            Dep::Var {
                namespace: "prod".into(),
                path: "a/b".into()
            }
        );
        let q = var_query("default", "a/b@prod.eu").unwrap().unwrap();
        assert_eq!(q.region.as_deref(), Some("eu"));
        assert!(var_query("default", "").unwrap().is_none());
        assert!(var_query("default", "a@b@c").is_err());
    }

    #[test]
    fn list_and_service_query_forms() {
        let q = var_list_query("ns", "///").unwrap();
        assert_eq!(
            q.dep,
            Dep::VarList {
                namespace: "ns".into(),
                prefix: "".into()
            }
        );
        let q = var_list_query("ns", "app/@other").unwrap();
        assert_eq!(
            q.dep,
            Dep::VarList {
                namespace: "other".into(),
                prefix: "app/".into()
            }
        );
        let q = service_query("ns", "v1.web@global").unwrap();
        assert_eq!(
            q.dep,
            Dep::Service {
                namespace: "ns".into(),
                name: "web".into(),
                tag: Some("v1".into())
            }
        );
        assert_eq!(q.region.as_deref(), Some("global"));
        assert!(service_query("ns", "bad name").is_err());
        assert!(services_query("ns", "").unwrap().region.is_none());
        assert!(services_query("ns", "x").is_err());
    }
}
