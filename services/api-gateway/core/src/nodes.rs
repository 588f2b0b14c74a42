//! Client nodes as operators see them: reads, scheduling eligibility and
//! drains, and the evaluations a node change owes its jobs.

use caravan_model::{JobTypeExt, now_unix_ns, trigger};
use caravan_proto::{
    Allocation, DrainMetadata, DrainStrategy, Evaluation, Node, QueryMeta, SchedulingEligibility,
};
use caravan_state::{Snapshot, encode};
use caravan_store::{Compare, CompareOp, Op, Revision, Txn};

use crate::cas;
use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::node_fan_out;
use crate::query::{self, Query};

/// The outcome of a node write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUpdated {
    /// Evaluations created with the write.
    pub eval_ids: Vec<String>,
    /// The revision of the write.
    pub revision: Revision,
}

/// `node` as the public APIs show it: without its secret's hash.
pub fn public(mut node: Node) -> Node {
    node.secret_hash.clear();
    node
}

/// Every node whose id has the query's prefix.
pub async fn list(gw: &Gateway, query: &Query) -> (Vec<Node>, QueryMeta) {
    let snap = query::block(gw, query).await;
    let nodes = snap
        .nodes()
        .filter(|n| query.matches_prefix(&n.id))
        .map(|n| public((**n).clone()))
        .collect();
    (nodes, query::meta(gw, &snap))
}

/// One node.
pub async fn get(gw: &Gateway, node_id: &str, query: &Query) -> Result<(Node, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let node = snap
        .node(node_id)
        .map(|n| public((**n).clone()))
        .ok_or_else(|| GatewayError::NotFound(format!("node not found: {node_id}")))?;
    Ok((node, query::meta(gw, &snap)))
}

/// The allocations placed on a node, terminal ones included, whole (as
/// Nomad answers): the cache names them, their stored values carry the
/// placement metrics it leaves out.
pub async fn allocations(
    gw: &Gateway,
    node_id: &str,
    query: &Query,
) -> Result<(Vec<Allocation>, QueryMeta)> {
    let snap = query::block(gw, query).await;
    if snap.node(node_id).is_none() {
        return Err(GatewayError::NotFound(format!("node not found: {node_id}")));
    }
    let ids: Vec<&str> = snap
        .allocs_by_node(node_id)
        .map(|a| a.id.as_str())
        .collect();
    let allocs: Vec<Allocation> =
        caravan_state::read_allocs(gw.store.as_ref(), &gw.keys, &ids, gw.config.max_txn_ops)
            .await?
            .into_iter()
            .flatten()
            .collect();
    let mut meta = query::meta(gw, &snap);
    meta.revision = allocs
        .iter()
        .map(caravan_model::AllocExt::modify_index)
        .fold(meta.revision, Revision::max);
    Ok((allocs, meta))
}

fn require_node_id(node_id: &str) -> Result<()> {
    if node_id.is_empty() {
        return Err(GatewayError::field("node_id", "missing node ID"));
    }
    Ok(())
}

/// How many evals fit the transaction of [`write_node`] next to the node.
fn write_node_room(gw: &Gateway) -> usize {
    gw.config.max_txn_ops.saturating_sub(1).max(1)
}

/// Writes `node` (compared on `read_revision`) with `evals`.
async fn write_node(
    gw: &Gateway,
    node: &Node,
    read_revision: Revision,
    evals: &[Evaluation],
) -> Result<Option<Revision>> {
    let key = gw.keys.node(&node.id);
    let mut txn = Txn::new()
        .when(Compare::mod_revision(
            key.clone(),
            CompareOp::Equal,
            read_revision,
        ))
        .and_then(Op::put(key, encode(node)));
    for eval in evals {
        txn = txn.and_then(Op::put(gw.keys.eval(&eval.id), encode(eval)));
    }
    cas::commit(gw, txn).await
}

fn conflict(node_id: &str) -> GatewayError {
    cas::kept_changing(format_args!("node {node_id}"))
}

/// Sets a node's scheduling eligibility. Becoming eligible creates
/// `node-update` evaluations so system jobs and blocked work can use it.
pub async fn update_eligibility(
    gw: &Gateway,
    node_id: &str,
    eligibility: SchedulingEligibility,
) -> Result<NodeUpdated> {
    require_node_id(node_id)?;
    if eligibility == SchedulingEligibility::Unspecified {
        return Err(GatewayError::field(
            "eligibility",
            "must be \"eligible\" or \"ineligible\"",
        ));
    }
    let key = &gw.keys.node(node_id);
    cas::retry(
        gw,
        || conflict(node_id),
        move |_| async move {
            let Some(node) = gw.read::<Node>(key).await? else {
                return Err(GatewayError::NotFound(format!("node not found: {node_id}")));
            };
            if node.drain_strategy.is_some() && eligibility == SchedulingEligibility::Eligible {
                return Err(GatewayError::FailedPrecondition(
                    "can not set node's scheduling eligibility to eligible while node is draining"
                        .into(),
                ));
            }
            let becomes_eligible = eligibility == SchedulingEligibility::Eligible
                && node.scheduling_eligibility() != SchedulingEligibility::Eligible;
            let mut updated = node.clone();
            updated.set_scheduling_eligibility(eligibility);
            let scope =
                becomes_eligible.then(|| node_fan_out::scope(trigger::NODE_UPDATE, false, false));
            let (evals, eval_ids) = node_fan_out::owed(
                &gw.cache.snapshot(),
                &node,
                &mut updated,
                scope,
                write_node_room(gw),
                now_unix_ns(),
            );
            let Some(revision) = write_node(gw, &updated, node.modify_revision, &evals).await?
            else {
                return Ok(None);
            };
            tracing::info!(node = %node_id, ?eligibility, revision, "node eligibility set");
            Ok(Some(NodeUpdated { eval_ids, revision }))
        },
    )
    .await
}

/// Starts a drain (`strategy` set) or cancels one (`None`, optionally
/// marking the node eligible again). A drain makes the node ineligible and
/// creates `node-drain` evaluations for the jobs with allocations on it.
pub async fn update_drain(
    gw: &Gateway,
    node_id: &str,
    strategy: Option<DrainStrategy>,
    mark_eligible: bool,
) -> Result<NodeUpdated> {
    require_node_id(node_id)?;
    let key = &gw.keys.node(node_id);
    cas::retry(gw, || conflict(node_id), move |_| async move {
        let Some(node) = gw.read::<Node>(key).await? else {
            return Err(GatewayError::NotFound(format!("node not found: {node_id}")));
        };
        let now = now_unix_ns();
        let mut updated = node.clone();
        let snap = gw.cache.snapshot();
        let scope = match &strategy {
            Some(asked) => {
                let mut drain = *asked;
                drain.started_at_unix_ns = now;
                drain.force_deadline_unix_ns = match drain.deadline_ns {
                    d if d > 0 => now.saturating_add(d),
                    d if d < 0 => now,
                    _ => 0,
                };
                updated.drain_strategy = Some(drain);
                updated.set_scheduling_eligibility(SchedulingEligibility::Ineligible);
                updated.last_drain = Some(DrainMetadata {
                    started_at_unix_ns: now,
                    updated_at_unix_ns: now,
                    status: "draining".into(),
                });
                Some(node_fan_out::scope(
                    trigger::NODE_DRAIN,
                    true,
                    asked.ignore_system_jobs,
                ))
            }
            None => {
                updated.drain_strategy = None;
                if let Some(last) = updated.last_drain.as_mut()
                    && node.drain_strategy.is_some()
                {
                    last.status = "canceled".into();
                    last.updated_at_unix_ns = now;
                }
                if mark_eligible {
                    updated.set_scheduling_eligibility(SchedulingEligibility::Eligible);
                }
                mark_eligible.then(|| node_fan_out::scope(trigger::NODE_UPDATE, false, false))
            }
        };
        let (evals, eval_ids) =
            node_fan_out::owed(&snap, &node, &mut updated, scope, write_node_room(gw), now);
        let Some(revision) = write_node(gw, &updated, node.modify_revision, &evals).await? else {
            return Ok(None);
        };
        tracing::info!(node = %node_id, draining = strategy.is_some(), revision, "node drain updated");
        // A node with nothing to move is drained at once.
        let revision = if strategy.is_some() && complete_drain_if_done(gw, node_id).await? {
            gw.cache.revision().max(revision)
        } else {
            revision
        };
        Ok(Some(NodeUpdated { eval_ids, revision }))
    })
    .await
}

/// Creates `node-update` evaluations for the jobs with allocations on a
/// node and the system jobs of its pool (`node eval`).
pub async fn evaluate(gw: &Gateway, node_id: &str) -> Result<NodeUpdated> {
    require_node_id(node_id)?;
    let snap = gw.cache.snapshot();
    let node = snap
        .node(node_id)
        .ok_or_else(|| GatewayError::NotFound(format!("node not found: {node_id}")))?;
    let scope = node_fan_out::scope(trigger::NODE_UPDATE, false, false);
    let evals = node_fan_out::node_evals(&snap, node, &scope);
    let revision = put_evals(gw, &evals).await?.max(snap.revision());
    gw.settle(revision).await;
    Ok(NodeUpdated {
        eval_ids: evals.into_iter().map(|e| e.id).collect(),
        revision,
    })
}

/// Writes new evals in transactions of at most `max_txn_ops`; returns the
/// last commit revision (0 for none).
async fn put_evals(gw: &Gateway, evals: &[Evaluation]) -> Result<Revision> {
    let mut revision = 0;
    for chunk in evals.chunks(gw.config.max_txn_ops.max(1)) {
        let mut txn = Txn::new();
        for eval in chunk {
            txn = txn.and_then(Op::put(gw.keys.eval(&eval.id), encode(eval)));
        }
        revision = gw.store.txn(txn).await?.revision;
    }
    Ok(revision)
}

/// Removes a node and its heartbeat key in one transaction with
/// `node-update` evaluations for the jobs that had allocations on it (the
/// scheduler then replaces them), and revokes its lease.
pub async fn purge(gw: &Gateway, node_id: &str) -> Result<NodeUpdated> {
    require_node_id(node_id)?;
    let key = &gw.keys.node(node_id);
    cas::retry(
        gw,
        || conflict(node_id),
        move |_| async move {
            let Some(node) = gw.read::<Node>(key).await? else {
                return Err(GatewayError::NotFound(format!("node not found: {node_id}")));
            };
            let scope = node_fan_out::scope(trigger::NODE_UPDATE, true, false);
            let mut evals = node_fan_out::node_evals(&gw.cache.snapshot(), &node, &scope);
            // A purged node can't carry a fan-out: what does not fit its
            // transaction is written first (evaluating a job once too often
            // does no harm).
            let room = gw.config.max_txn_ops.saturating_sub(2).max(1);
            if evals.len() > room {
                put_evals(gw, &evals[room..]).await?;
                evals.truncate(room);
            }
            let mut txn = Txn::new()
                .when(Compare::mod_revision(
                    key.clone(),
                    CompareOp::Equal,
                    node.modify_revision,
                ))
                .and_then(Op::delete(key.clone()))
                .and_then(Op::delete(gw.keys.heartbeat(node_id)));
            for eval in &evals {
                txn = txn.and_then(Op::put(gw.keys.eval(&eval.id), encode(eval)));
            }
            // Committed here rather than by `cas::commit`: the lease is revoked
            // before the cache is waited for.
            let result = gw.store.txn(txn).await?;
            if !result.succeeded {
                return Ok(None);
            }
            if node.heartbeat_lease_id != 0
                && let Err(err) = gw.store.lease_revoke(node.heartbeat_lease_id).await
            {
                tracing::debug!(%err, node = %node_id, "the purged node's lease was already gone");
            }
            gw.settle(result.revision).await;
            tracing::info!(node = %node_id, evals = evals.len(), "node purged");
            Ok(Some(NodeUpdated {
                eval_ids: evals.into_iter().map(|e| e.id).collect(),
                revision: result.revision,
            }))
        },
    )
    .await
}

/// Whether an allocation still keeps a drain going: the client hasn't
/// finished with it (a stop the client never started counts as finished).
fn keeps_drain_going(snap: &Snapshot, alloc: &Allocation, ignore_system: bool) -> bool {
    use caravan_proto::{AllocClientStatus as C, AllocDesiredStatus as D};
    let client_done = matches!(alloc.client_status(), C::Complete | C::Failed | C::Lost);
    let never_started = alloc.desired_status() != D::Run
        && matches!(alloc.client_status(), C::Pending | C::Unspecified);
    if client_done || never_started {
        return false;
    }
    let system = snap
        .job(&alloc.namespace, &alloc.job_id)
        .is_some_and(|j| j.r#type().runs_on_every_node());
    !(ignore_system && system)
}

/// Marks a draining node's drain complete once none of its allocations
/// keeps it going: the strategy is cleared, the node stays ineligible, and
/// `last_drain` says `complete`. Returns whether it did.
pub async fn complete_drain_if_done(gw: &Gateway, node_id: &str) -> Result<bool> {
    let key = &gw.keys.node(node_id);
    cas::retry(
        gw,
        || conflict(node_id),
        move |_| async move {
            let Some(node) = gw.read::<Node>(key).await? else {
                return Ok(Some(false));
            };
            let Some(drain) = node.drain_strategy else {
                return Ok(Some(false));
            };
            let snap = gw.cache.snapshot();
            if snap
                .allocs_by_node(node_id)
                .any(|a| keeps_drain_going(&snap, a, drain.ignore_system_jobs))
            {
                return Ok(Some(false));
            }
            let now = now_unix_ns();
            let mut done = node.clone();
            done.drain_strategy = None;
            done.last_drain = Some(DrainMetadata {
                started_at_unix_ns: drain.started_at_unix_ns,
                updated_at_unix_ns: now,
                status: "complete".into(),
            });
            if write_node(gw, &done, node.modify_revision, &[])
                .await?
                .is_none()
            {
                return Ok(None);
            }
            tracing::info!(node = %node_id, "drain complete");
            Ok(Some(true))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_apis_never_show_a_nodes_secret() {
        let node = Node {
            id: "n1".into(),
            secret_hash: "abc".into(),
            ..Default::default()
        };
        let shown = public(node);
        assert!(shown.secret_hash.is_empty());
        assert_eq!(shown.id, "n1");
    }
}
