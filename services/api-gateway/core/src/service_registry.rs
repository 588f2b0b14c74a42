//! The registry of Nomad's native service discovery: one key per instance
//! of a service, `services/<ns>/<name>/<id>` (a `ServiceRegistration`),
//! read by name, listed per namespace with the tags of each service, and
//! deleted by id. Not in the watch cache: a read ranges over the one
//! service's prefix, and a blocking read watches it.

use std::collections::{BTreeMap, BTreeSet};

use caravan_proto::{CheckResult, QueryMeta, ServiceRegistration};
use caravan_state::{Kind, StateKey, decode};
use caravan_store::{Compare, Op, Revision, Txn};
use sha2::{Digest, Sha256};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{ALL_NAMESPACES, Query};
use crate::uncached;

/// One service of a namespace with the union of its instances' tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceStub {
    /// The service's name.
    pub name: String,
    /// Every tag of any instance, sorted, once each.
    pub tags: Vec<String>,
}

/// The services of one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceServices {
    /// The namespace.
    pub namespace: String,
    /// Its services, sorted by name.
    pub services: Vec<ServiceStub>,
}

fn meta(gw: &Gateway, revision: Revision) -> QueryMeta {
    QueryMeta {
        revision,
        known_leader: gw.leader_contact().known,
    }
}

/// Decodes a registration, its namespace, name and id taken from its key
/// and its revisions from the key's metadata.
fn registration(gw: &Gateway, kv: &caravan_store::KeyValue) -> Result<ServiceRegistration> {
    let mut reg: ServiceRegistration = decode(kv)?;
    if let StateKey::Service {
        namespace,
        name,
        id,
    } = gw.keys.parse(&kv.key)?
    {
        reg.namespace = namespace;
        reg.service_name = name;
        reg.id = id;
    }
    Ok(reg)
}

/// The services of `q.namespace` (every namespace for `*`) whose names
/// start with `q.prefix`, grouped by namespace, as Nomad's `/v1/services`
/// answers them.
pub async fn list(gw: &Gateway, q: &Query) -> Result<(Vec<NamespaceServices>, QueryMeta)> {
    let prefix = if q.namespace == ALL_NAMESPACES {
        gw.keys.prefix_of(Kind::Services)
    } else {
        gw.keys.services_in(&q.namespace, None)
    };
    uncached::wait_for_change(gw, &prefix, q, |_| true).await;
    let (kvs, revision) = uncached::range_all(gw, &prefix).await?;
    let mut grouped: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for kv in &kvs {
        let reg = registration(gw, kv)?;
        if !reg.service_name.starts_with(&q.prefix) {
            continue;
        }
        grouped
            .entry(reg.namespace)
            .or_default()
            .entry(reg.service_name)
            .or_default()
            .extend(reg.tags);
    }
    let out = grouped
        .into_iter()
        .map(|(namespace, services)| NamespaceServices {
            namespace,
            services: services
                .into_iter()
                .map(|(name, tags)| ServiceStub {
                    name,
                    tags: tags.into_iter().collect(),
                })
                .collect(),
        })
        .collect();
    Ok((out, meta(gw, revision)))
}

/// The instances of service `name` in `q.namespace`, sorted by id; with
/// `tag`, only those carrying it.
pub async fn get(
    gw: &Gateway,
    name: &str,
    tag: Option<&str>,
    q: &Query,
) -> Result<(Vec<ServiceRegistration>, QueryMeta)> {
    if q.namespace == ALL_NAMESPACES {
        return Err(GatewayError::field(
            "namespace",
            "a service is read in one namespace, not \"*\"",
        ));
    }
    let prefix = gw.keys.services_in(&q.namespace, Some(name));
    uncached::wait_for_change(gw, &prefix, q, |_| true).await;
    let (kvs, revision) = uncached::range_all(gw, &prefix).await?;
    let mut out = Vec::with_capacity(kvs.len());
    for kv in &kvs {
        let reg = registration(gw, kv)?;
        if tag.is_none_or(|t| reg.tags.iter().any(|have| have == t)) {
            out.push(reg);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((out, meta(gw, revision)))
}

/// Deletes the instance `id` of service `name` in `namespace`; NOT_FOUND
/// when there is none.
pub async fn delete(gw: &Gateway, namespace: &str, name: &str, id: &str) -> Result<Revision> {
    let key = gw.keys.service(namespace, name, id);
    let res = gw
        .store
        .txn(
            Txn::new()
                .when(Compare::present(key.clone()))
                .and_then(Op::delete(key)),
        )
        .await?;
    if !res.succeeded {
        return Err(GatewayError::NotFound(format!(
            "service registration {id:?} of {name:?} not found"
        )));
    }
    Ok(res.revision)
}

/// The instances registered for allocation `alloc_id`, with their checks'
/// latest results: the registrations of its namespace, read from the store
/// (an allocation runs few instances, and this is asked per allocation,
/// rarely), sorted by id. NOT_FOUND when the allocation is unknown.
pub async fn of_alloc(gw: &Gateway, alloc_id: &str) -> Result<Vec<ServiceRegistration>> {
    let namespace = gw
        .cache
        .snapshot()
        .alloc(alloc_id)
        .map(|a| a.namespace.clone())
        .ok_or_else(|| GatewayError::NotFound(format!("Unknown allocation {alloc_id:?}")))?;
    let prefix = gw.keys.services_in(&namespace, None);
    let (kvs, _) = uncached::range_all(gw, &prefix).await?;
    let mut out = Vec::new();
    for kv in &kvs {
        let reg = registration(gw, kv)?;
        if reg.alloc_id == alloc_id {
            out.push(reg);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A check's ID within its allocation, stable across its results: SHA-256
/// over the allocation, group, task, service and check names, in hex.
pub fn check_id(alloc_id: &str, check: &CheckResult) -> String {
    let mut sum = Sha256::new();
    for part in [
        alloc_id,
        &check.group,
        &check.task,
        &check.service,
        &check.check_name,
    ] {
        // Length-prefixed, so no two different lists hash alike.
        sum.update((part.len() as u64).to_be_bytes());
        sum.update(part.as_bytes());
    }
    sum.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A check status as Nomad's check query answers it: `success`, `failure`
/// or `pending` (a warning is not a success).
pub fn check_status(status: &str) -> &str {
    match status {
        "passing" | "success" => "success",
        "warning" | "critical" | "failure" => "failure",
        "" | "pending" => "pending",
        other => other,
    }
}

/// Nomad's `?choose=<n>|<key>`: the `n` instances that rank first for
/// `key` by rendezvous hashing, so each caller with its own key gets a
/// stable subset that moves little when instances come and go.
pub fn choose(
    mut regs: Vec<ServiceRegistration>,
    parameter: &str,
) -> Result<Vec<ServiceRegistration>> {
    let malformed = || {
        GatewayError::field(
            "choose",
            "Parameter for choose must be in form '<number>|<key>'",
        )
    };
    let (n, key) = parameter.split_once('|').ok_or_else(malformed)?;
    let n: usize = n.parse().map_err(|_| malformed())?;
    if key.is_empty() {
        return Err(malformed());
    }
    let mut ranked: Vec<(String, ServiceRegistration)> = regs
        .drain(..)
        .map(|reg| (rendezvous_hash(&reg, key), reg))
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(ranked.into_iter().take(n).map(|(_, reg)| reg).collect())
}

/// The hash an instance ranks by for `key`: SHA-256 over its port, alloc,
/// id, namespace, address, service name, tags and the key, in hex (the
/// order and encoding Nomad uses, so a key picks the same instances).
fn rendezvous_hash(reg: &ServiceRegistration, key: &str) -> String {
    let mut sum = Sha256::new();
    sum.update(u64::try_from(reg.port).unwrap_or(0).to_be_bytes());
    sum.update(reg.alloc_id.as_bytes());
    sum.update(reg.id.as_bytes());
    sum.update(reg.namespace.as_bytes());
    sum.update(reg.address.as_bytes());
    sum.update(reg.service_name.as_bytes());
    for tag in &reg.tags {
        sum.update(tag.as_bytes());
    }
    sum.update(key.as_bytes());
    sum.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(id: &str, port: i32) -> ServiceRegistration {
        ServiceRegistration {
            id: id.into(),
            service_name: "web".into(),
            namespace: "default".into(),
            alloc_id: format!("alloc-{id}"),
            address: "10.0.0.1".into(),
            port,
            tags: vec!["v1".into()],
            ..Default::default()
        }
    }

    #[test]
    fn choose_is_stable_per_key_and_keeps_the_top_n() {
        let all: Vec<_> = (0..6).map(|i| reg(&format!("r{i}"), 8000 + i)).collect();
        let a = choose(all.clone(), "2|caller-a").unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(choose(all.clone(), "2|caller-a").unwrap(), a, "stable");
        // The first pick of three is the first pick of two.
        assert_eq!(choose(all.clone(), "3|caller-a").unwrap()[..2], a[..]);
        // Removing an instance not chosen changes nothing.
        let unchosen = all.iter().find(|r| !a.contains(r)).unwrap().id.clone();
        let fewer: Vec<_> = all.iter().filter(|r| r.id != unchosen).cloned().collect();
        assert_eq!(choose(fewer, "2|caller-a").unwrap(), a);
        assert_eq!(
            choose(all.clone(), "10|k").unwrap().len(),
            6,
            "n past the end"
        );
    }

    #[test]
    fn choose_refuses_a_malformed_parameter() {
        for bad in ["2", "x|k", "2|", "-1|k"] {
            let err = choose(vec![reg("r", 1)], bad).unwrap_err();
            assert!(format!("{err}").contains("<number>|<key>"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_hash_covers_what_nomad_hashes_in_its_order() {
        // SHA-256 of 8 big-endian bytes of 8080, then the strings, then the key.
        let r = reg("id1", 8080);
        let mut sum = Sha256::new();
        sum.update(8080u64.to_be_bytes());
        for part in ["alloc-id1", "id1", "default", "10.0.0.1", "web", "v1", "k"] {
            sum.update(part.as_bytes());
        }
        let want: String = sum.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(rendezvous_hash(&r, "k"), want);
    }

    #[test]
    fn check_ids_are_stable_and_distinct_and_statuses_read_as_nomads() {
        let check = |service: &str, name: &str| CheckResult {
            check_name: name.into(),
            group: "web".into(),
            service: service.into(),
            status: "passing".into(),
            ..Default::default()
        };
        let id = check_id("a1", &check("web", "alive"));
        assert_eq!(id.len(), 64);
        assert_eq!(id, check_id("a1", &check("web", "alive")), "stable");
        assert_ne!(id, check_id("a2", &check("web", "alive")));
        assert_ne!(
            check_id("a1", &check("webal", "ive")),
            check_id("a1", &check("web", "alive")),
            "names are not run together"
        );
        assert_eq!(check_status("passing"), "success");
        assert_eq!(check_status("critical"), "failure");
        assert_eq!(check_status("warning"), "failure");
        assert_eq!(check_status(""), "pending");
    }
}
