//! Node registration and heartbeats: a node is written ready with a
//! `heartbeats/<node>` key on a fresh lease (TTL = heartbeat TTL + grace),
//! and each heartbeat is a keepalive of that lease. Both are made by the
//! holder of the node's secret only (see [`identity`](super::identity)).

use std::time::Duration;

use caravan_model::{NomadName, now_unix_ns, trigger};
use caravan_proto::{Node, NodeStatus, SchedulingEligibility};
use caravan_state::encode;
use caravan_store::{Compare, CompareOp, LeaseId, Op, Revision, Store, StoreError, Txn};
use rand::Rng;

use crate::NodeApi;
use crate::identity::Presented;
use caravan_gateway_core::cas;
use caravan_gateway_core::error::{GatewayError, Result};
use caravan_gateway_core::gateway::read_from;
use caravan_gateway_core::node_fan_out;

/// The outcome of a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRegistered {
    /// Heartbeat within this interval.
    pub heartbeat_ttl: Duration,
    /// The revision of the write.
    pub revision: Revision,
}

/// Nomad's heartbeat TTL before stagger: at least `min`, and long enough
/// that `nodes` heartbeating once per TTL stay under `per_second`.
pub fn base_heartbeat_ttl(min: Duration, per_second: f64, nodes: usize) -> Duration {
    let per_second = if per_second.is_finite() && per_second > 0.0 {
        per_second
    } else {
        50.0
    };
    let scaled = Duration::from_secs_f64(nodes as f64 / per_second);
    scaled.max(min)
}

/// The base TTL plus a random stagger of up to itself, so nodes that
/// registered together don't heartbeat together.
fn staggered(base: Duration) -> Duration {
    let nanos = u64::try_from(base.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return base;
    }
    base + Duration::from_nanos(rand::rng().random_range(0..nanos))
}

/// Lease TTL in whole seconds covering `ttl + grace`.
fn lease_secs(ttl: Duration, grace: Duration) -> i64 {
    let total = ttl + grace;
    i64::try_from(total.as_secs() + u64::from(total.subsec_nanos() > 0)).unwrap_or(i64::MAX)
}

/// Checks what a node must carry to be registered.
pub fn validate(node: &Node) -> Result<()> {
    if node.id.is_empty() {
        return Err(GatewayError::field("node.id", "missing node ID"));
    }
    if node.id.contains('/') || node.id.chars().any(char::is_whitespace) {
        return Err(GatewayError::field(
            "node.id",
            "must not contain '/' or whitespace",
        ));
    }
    if node.name.is_empty() {
        return Err(GatewayError::field("node.name", "missing node name"));
    }
    if node.datacenter.is_empty() {
        return Err(GatewayError::field("node.datacenter", "missing datacenter"));
    }
    if node.node_pool == "all" {
        return Err(GatewayError::field(
            "node.node_pool",
            "node can't be registered in the built-in node pool \"all\"",
        ));
    }
    if node.status == NodeStatus::Down as i32 {
        return Err(GatewayError::field(
            "node.status",
            "a node can't register as down",
        ));
    }
    validate_host_networks(node)
}

/// A node's host networks: named once each, on an IP address, with reserved
/// ports that parse; the scheduler binds ports to these addresses.
fn validate_host_networks(node: &Node) -> Result<()> {
    for (i, n) in node.host_networks.iter().enumerate() {
        let field = |f: &str| format!("node.host_networks[{i}].{f}");
        if n.name.is_empty() || n.name == "default" {
            return Err(GatewayError::field(
                field("name"),
                "a host network needs a name other than \"default\"",
            ));
        }
        if node.host_networks[..i].iter().any(|o| o.name == n.name) {
            return Err(GatewayError::field(
                field("name"),
                format!("host network {:?} is listed twice", n.name),
            ));
        }
        if n.address.parse::<std::net::IpAddr>().is_err() {
            return Err(GatewayError::field(
                field("address"),
                format!("{:?} is not an IP address", n.address),
            ));
        }
        if caravan_scheduler::ports::PortSet::parse(&n.reserved_ports).is_err() {
            return Err(GatewayError::field(
                field("reserved_ports"),
                "expected ports and ranges like 22,80,8000-8100",
            ));
        }
    }
    Ok(())
}

/// The node as stored: ready, on `lease`, with the server-side computed
/// class and `secret_hash`, keeping the operator's eligibility and drain from
/// `existing`.
fn as_registered(
    mut node: Node,
    existing: Option<&Node>,
    secret_hash: &str,
    lease: LeaseId,
    now: i64,
) -> Node {
    node.secret_hash = secret_hash.to_string();
    if node.node_pool.is_empty() {
        node.node_pool = caravan_jobspec::DEFAULT_NODE_POOL.to_string();
    }
    node.computed_class = caravan_scheduler::compute_node_class(&node);
    node.set_status(NodeStatus::Ready);
    node.status_description = "node registered".into();
    node.status_updated_at_unix_ns = now;
    node.heartbeat_lease_id = lease;
    node.create_revision = 0;
    node.modify_revision = 0;
    match existing {
        Some(old) => {
            node.scheduling_eligibility = old.scheduling_eligibility;
            node.drain_strategy = old.drain_strategy;
            node.last_drain = old.last_drain.clone();
            node.pending_fan_outs = old.pending_fan_outs.clone();
        }
        None => {
            node.set_scheduling_eligibility(SchedulingEligibility::Eligible);
            node.drain_strategy = None;
            node.pending_fan_outs.clear();
        }
    }
    node
}

/// Registers (or re-registers) a node: one transaction writes it ready with
/// its heartbeat key on a new lease, and `node-update` evaluations when it
/// was new or not ready; a previous lease is revoked afterwards. The first
/// registration records the secret's hash; a later one with another secret
/// is refused, checked against the version the transaction compares, so two
/// callers racing for a new node id cannot both win.
/// Its store operations go to `store`: the gateway's, or the connection of
/// the lane registrations run on.
pub async fn register(
    gw: &NodeApi,
    store: &dyn Store,
    node: Node,
    secret: &str,
) -> Result<NodeRegistered> {
    validate(&node)?;
    let presented = Presented::new(secret)?;
    let secret_hash = presented.to_record()?.to_string();
    let snap = gw.cache.snapshot();
    let known = snap.node(&node.id).is_some();
    let nodes = snap.node_count() + usize::from(!known);
    let ttl = staggered(base_heartbeat_ttl(
        gw.config.min_heartbeat_ttl(),
        gw.config.max_heartbeats_per_second,
        nodes,
    ));
    let lease = store
        .lease_grant(lease_secs(ttl, gw.config.heartbeat_grace()))
        .await?;
    let lease = Lease { id: lease.id, ttl };
    let written = cas::retry(
        gw,
        || {
            GatewayError::Conflict(format!(
                "node {} kept changing concurrently; register again",
                node.id
            ))
        },
        |_| register_once(gw, store, &node, &presented, &secret_hash, lease),
    )
    .await;
    if written.is_err() {
        // Nothing hangs on the new lease.
        revoke(store, lease.id).await;
    }
    written
}

/// The lease a registration puts the node's heartbeat key on.
#[derive(Clone, Copy)]
struct Lease {
    id: LeaseId,
    ttl: Duration,
}

/// One attempt at registering `node` on `lease`: `None` when the node
/// changed since it was read.
async fn register_once(
    gw: &NodeApi,
    store: &dyn Store,
    node: &Node,
    presented: &Presented,
    secret_hash: &str,
    lease: Lease,
) -> Result<Option<NodeRegistered>> {
    let key = gw.keys.node(&node.id);
    let existing: Option<Node> = read_from(store, &key).await?;
    if let Some(old) = &existing {
        presented.verify(old)?;
    }
    let now = now_unix_ns();
    let mut stored = as_registered(node.clone(), existing.as_ref(), secret_hash, lease.id, now);
    let scope = node_fan_out::scope(trigger::NODE_UPDATE, false, false);
    let evals = match &existing {
        Some(old) if old.status() == NodeStatus::Ready => Vec::new(),
        _ => node_fan_out::node_evals(&gw.cache.snapshot(), &stored, &scope),
    };
    // The node and its heartbeat key take two operations.
    let room = gw.config.max_txn_ops.saturating_sub(2).max(1);
    let (evals, _) = node_fan_out::fit(&mut stored, evals, scope, room, now);
    let mut txn = Txn::new()
        .when(match &existing {
            Some(old) => Compare::mod_revision(key.clone(), CompareOp::Equal, old.modify_revision),
            None => Compare::absent(key.clone()),
        })
        .and_then(Op::put(key.clone(), encode(&stored)))
        .and_then(Op::put_with_lease(
            gw.keys.heartbeat(&node.id),
            Vec::new(),
            lease.id,
        ));
    for eval in &evals {
        txn = txn.and_then(Op::put(gw.keys.eval(&eval.id), encode(eval)));
    }
    let result = store.txn(txn).await?;
    if !result.succeeded {
        return Ok(None);
    }
    if let Some(old) = existing.as_ref().map(|n| n.heartbeat_lease_id)
        && old != 0
        && old != lease.id
    {
        // The heartbeat key now hangs on the new lease, so this deletes nothing.
        revoke(store, old).await;
    }
    gw.settle(result.revision).await;
    tracing::info!(node = %node.id, name = %node.name, lease = format!("{:x}", lease.id),
        ttl_ms = lease.ttl.as_millis() as u64, evals = evals.len(), "node registered");
    Ok(Some(NodeRegistered {
        heartbeat_ttl: lease.ttl,
        revision: result.revision,
    }))
}

async fn revoke(store: &dyn Store, lease: LeaseId) {
    match store.lease_revoke(lease).await {
        Ok(()) | Err(StoreError::LeaseNotFound(_)) => {}
        Err(err) => tracing::warn!(%err, lease = format!("{lease:x}"), "revoking a lease failed"),
    }
}

/// A heartbeat from the holder of the node's secret: keeps the node's lease
/// alive. NOT_FOUND tells the client to register again (unknown node,
/// expired lease, or a node marked down); PERMISSION_DENIED, that the caller
/// is not the node.
pub async fn heartbeat(gw: &NodeApi, node_id: &str, secret: &str) -> Result<Duration> {
    let (known, from_store) = super::identity::authenticate_read(gw, node_id, secret).await?;
    if known.status() == NodeStatus::Ready
        && let Some(ttl) = keep_alive(gw, known.heartbeat_lease_id).await?
    {
        return Ok(ttl);
    }
    // The cache may lag a re-registration: ask the store before giving up
    // (unless the node just came from there).
    let node = if from_store {
        known
    } else {
        let stored: Option<Node> = gw.read(&gw.keys.node(node_id)).await?;
        let Some(node) = stored else {
            return Err(GatewayError::NotFound(format!(
                "node not registered: {node_id}"
            )));
        };
        Presented::new(secret)?.verify(&node)?;
        std::sync::Arc::new(node)
    };
    if node.status() != NodeStatus::Ready {
        return Err(GatewayError::NotFound(format!(
            "node {node_id} is {}; register again",
            node.status().api_name()
        )));
    }
    match keep_alive(gw, node.heartbeat_lease_id).await? {
        Some(ttl) => Ok(ttl),
        None => Err(GatewayError::NotFound(format!(
            "heartbeat lease of node {node_id} expired; register again"
        ))),
    }
}

/// Renews `lease`; `None` when it is gone.
async fn keep_alive(gw: &NodeApi, lease: LeaseId) -> Result<Option<Duration>> {
    if lease == 0 {
        return Ok(None);
    }
    match gw.heartbeats.renew(lease).await {
        Ok(secs) => {
            let total = Duration::from_secs(u64::try_from(secs).unwrap_or(0));
            let ttl = total
                .saturating_sub(gw.config.heartbeat_grace())
                .max(Duration::from_secs(1));
            Ok(Some(ttl))
        }
        Err(StoreError::LeaseNotFound(_)) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_scales_with_the_cluster() {
        let min = Duration::from_secs(10);
        assert_eq!(base_heartbeat_ttl(min, 50.0, 10), min);
        assert_eq!(
            base_heartbeat_ttl(min, 50.0, 5000),
            Duration::from_secs(100)
        );
        assert_eq!(base_heartbeat_ttl(min, 0.0, 5000), Duration::from_secs(100));
        for _ in 0..50 {
            let t = staggered(min);
            assert!(t >= min && t < min * 2, "{t:?}");
        }
        assert_eq!(
            lease_secs(Duration::from_millis(10_500), Duration::from_secs(10)),
            21
        );
        assert_eq!(
            lease_secs(Duration::from_secs(10), Duration::from_secs(10)),
            20
        );
    }

    #[test]
    fn host_networks_need_a_unique_name_an_address_and_valid_reserved_ports() {
        let net = |name: &str, address: &str, reserved: &str| caravan_proto::NodeHostNetwork {
            name: name.into(),
            address: address.into(),
            reserved_ports: reserved.into(),
            ..Default::default()
        };
        let mut node = Node {
            id: "n1".into(),
            name: "one".into(),
            datacenter: "dc1".into(),
            host_networks: vec![net("lo", "127.0.0.1", "22"), net("v6", "::1", "")],
            ..Default::default()
        };
        assert!(validate(&node).is_ok());
        let field_of = |node: &Node| match validate(node) {
            Err(GatewayError::InvalidField { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        node.host_networks.push(net("lo", "127.0.0.2", ""));
        assert_eq!(field_of(&node), "node.host_networks[2].name");
        node.host_networks[2] = net("x", "localhost", "");
        assert_eq!(field_of(&node), "node.host_networks[2].address");
        node.host_networks[2] = net("x", "10.0.0.1", "70000");
        assert_eq!(field_of(&node), "node.host_networks[2].reserved_ports");
        node.host_networks[2] = net("default", "10.0.0.1", "");
        assert_eq!(field_of(&node), "node.host_networks[2].name");
    }

    #[test]
    fn registration_keeps_operator_state_and_computes_the_class() {
        let node = Node {
            id: "n1".into(),
            name: "n1".into(),
            datacenter: "dc1".into(),
            computed_class: "forged".into(),
            ..Default::default()
        };
        validate(&node).unwrap();
        let mut old = node.clone();
        old.set_scheduling_eligibility(SchedulingEligibility::Ineligible);
        let owed = caravan_proto::NodeFanOut {
            id: "f1".into(),
            triggered_by: "node-update".into(),
            created_at_unix_ns: 1,
            ..Default::default()
        };
        old.pending_fan_outs = vec![owed.clone()];
        let mut forged = node.clone();
        forged.secret_hash = "chosen by the client".into();
        forged.pending_fan_outs = vec![caravan_proto::NodeFanOut::default()];
        let stored = as_registered(forged.clone(), Some(&old), "h", 7, 1);
        assert_eq!(
            stored.pending_fan_outs,
            vec![owed],
            "the evals it still owes stay"
        );
        assert_eq!(
            stored.scheduling_eligibility(),
            SchedulingEligibility::Ineligible
        );
        assert_eq!(stored.status(), NodeStatus::Ready);
        assert_eq!(stored.heartbeat_lease_id, 7);
        assert_eq!(
            stored.secret_hash, "h",
            "the server's hash, not the client's"
        );
        assert_eq!(stored.node_pool, "default");
        assert_eq!(
            stored.computed_class,
            caravan_scheduler::compute_node_class(&stored)
        );
        let fresh = as_registered(forged, None, "h", 8, 1);
        assert!(
            fresh.pending_fan_outs.is_empty(),
            "a client can't claim fan-outs"
        );
        assert_eq!(
            fresh.scheduling_eligibility(),
            SchedulingEligibility::Eligible
        );
    }

    #[test]
    fn invalid_nodes_name_the_field() {
        let ok = Node {
            id: "n1".into(),
            name: "n1".into(),
            datacenter: "dc1".into(),
            ..Default::default()
        };
        let cases = [
            (
                Node {
                    id: String::new(),
                    ..ok.clone()
                },
                "node.id",
            ),
            (
                Node {
                    id: "a/b".into(),
                    ..ok.clone()
                },
                "node.id",
            ),
            (
                Node {
                    name: String::new(),
                    ..ok.clone()
                },
                "node.name",
            ),
            (
                Node {
                    datacenter: String::new(),
                    ..ok.clone()
                },
                "node.datacenter",
            ),
            (
                Node {
                    node_pool: "all".into(),
                    ..ok.clone()
                },
                "node.node_pool",
            ),
        ];
        for (node, field) in cases {
            let err = validate(&node).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }
}
