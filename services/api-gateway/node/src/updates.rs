//! Client status updates of allocations: checked per node, then written by
//! the gateway's [`StatusWrites`](crate::status_writes::StatusWrites)
//! together with other nodes' updates as one status batch per job
//! (`caravan_state::status_batch`), each allocation's status key compared
//! so a mark the servers set since is re-read and the write retried. An
//! allocation that turns failed (or, in a job whose allocations run until
//! stopped, complete) while it should run gets an `alloc-failure` evaluation
//! of its job in the same transaction, so its replacement never depends on
//! another process noticing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use caravan_model::{AllocClientStatusExt, AllocExt, JobTypeExt, trigger};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocStatus, AllocUpdate, Allocation, Evaluation, Job,
};
use caravan_state::status_batch::encode_batch;
use caravan_state::{Keyspace, Snapshot, encode, lay_status, status_guard};
use caravan_store::{Op, Revision, Txn};

use crate::NodeApi;
use crate::registered;
use caravan_gateway_core::error::{GatewayError, Result};
use caravan_gateway_core::evals;

/// One node's updates with the allocations they apply to.
pub(crate) type Current = Vec<(AllocUpdate, Option<Arc<Allocation>>)>;

/// Checks a batch before anything is read or written.
pub fn validate(node_id: &str, updates: &[AllocUpdate]) -> Result<()> {
    if node_id.is_empty() {
        return Err(GatewayError::field("node_id", "missing node ID"));
    }
    for (i, u) in updates.iter().enumerate() {
        if u.alloc_id.is_empty() {
            return Err(GatewayError::field(
                format!("updates[{i}].alloc_id"),
                "missing allocation ID",
            ));
        }
        if u.client_status == AllocClientStatus::Unspecified as i32
            || AllocClientStatus::try_from(u.client_status).is_err()
        {
            return Err(GatewayError::field(
                format!("updates[{i}].client_status"),
                format!("invalid client status {}", u.client_status),
            ));
        }
        registered::validate(i, u)?;
        storage_only_codes(i, u)?;
    }
    Ok(())
}

/// Refuses the numbers the store keeps for well-known strings (event types
/// and messages, task states; docs/state-layout.md, "Allocation status"): a
/// client sends the strings.
fn storage_only_codes(i: usize, u: &AllocUpdate) -> Result<()> {
    for (task, state) in u.task_states.iter() {
        if state.state_code != 0 {
            return Err(GatewayError::field(
                format!("updates[{i}].task_states[{task}].state_code"),
                "is kept by the store only; send the string itself",
            ));
        }
        for (j, e) in state.events.iter().enumerate() {
            for (name, code) in [("type_code", e.type_code), ("message_code", e.message_code)] {
                if code != 0 {
                    return Err(GatewayError::field(
                        format!("updates[{i}].task_states[{task}].events[{j}].{name}"),
                        "is kept by the store only; send the string itself",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The client's part of `alloc` once `update` is applied: what its job's
/// status batch stores. Built from the update and the allocation's own
/// client fields alone, without a copy of the allocation: a report changes
/// only those.
pub(crate) fn reported(alloc: &Allocation, update: &AllocUpdate, now: i64) -> AllocStatus {
    let (task_states, running_since_unix_ns) = if update.task_states.is_empty() {
        (alloc.task_states.clone(), alloc.running_since_unix_ns)
    } else {
        let started = update
            .task_states
            .values()
            .map(|t| t.started_at_unix_ns)
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(0);
        (update.task_states.clone(), started)
    };
    let held = alloc.deployment_status.as_ref();
    // Canary is the servers' to set; health and its time are the client's.
    let (deployment_healthy, deployment_timestamp_unix_ns) = match &update.deployment_status {
        Some(reported) => (
            reported.healthy,
            if reported.timestamp_unix_ns != 0 {
                reported.timestamp_unix_ns
            } else {
                now
            },
        ),
        None => (
            held.and_then(|d| d.healthy),
            held.map_or(0, |d| d.timestamp_unix_ns),
        ),
    };
    AllocStatus {
        client_status: update.client_status,
        client_description: update.client_description.clone(),
        task_states,
        running_since_unix_ns,
        deployment_healthy,
        deployment_timestamp_unix_ns,
        modify_time_unix_ns: now,
        client_description_code: 0,
        times_relative: false,
    }
}

/// Whether `status` says the allocation is healthy in its deployment.
fn healthy(status: &AllocStatus) -> bool {
    status.deployment_healthy == Some(true)
}

/// Whether a client may report `update` for `alloc`: a finished allocation
/// (complete, failed, lost) never becomes pending, running or unknown
/// again, whatever a client says (a late report, or a node lying), so it
/// can neither hold its node's resources again nor share its name with its
/// replacement. The check is against the version the write compares, so a
/// status the servers set meanwhile fails the write and is checked again.
pub(crate) fn may_report(alloc: &Allocation, update: &AllocUpdate) -> bool {
    !alloc.client_status().is_terminal() || update.client_status().is_terminal()
}

/// Whether applying `next` over `prev` is the moment the allocation
/// finished on its client while the servers still want it running, in a way
/// its scheduler replaces: failed, or (for a job whose allocations run until
/// stopped: service, system) complete. Nothing else would look at the job
/// again, so the write carries an evaluation of it; a batch allocation that
/// completes is done.
fn needs_replacing(prev: &Allocation, next: &AllocStatus, job: &Job) -> bool {
    if prev.desired_status() != AllocDesiredStatus::Run
        || next.client_status() == prev.client_status()
    {
        return false;
    }
    match next.client_status() {
        AllocClientStatus::Failed => true,
        AllocClientStatus::Complete => {
            !job.r#type().runs_to_completion() && !prev.client_status().is_terminal()
        }
        _ => false,
    }
}

/// Whether `next` is the first report of an allocation the servers marked
/// unknown (its node was disconnected) since its node came back.
fn reconnected(prev: &Allocation, next: &AllocStatus) -> bool {
    prev.client_status() == AllocClientStatus::Unknown
        && next.client_status() != AllocClientStatus::Unknown
}

/// The nodes being drained, and for each job asked about, whether it still
/// has live allocations on one of them. Built once per batch: most clusters
/// drain nothing, and a job's allocations are scanned at most once.
struct Drains<'a> {
    snap: &'a Snapshot,
    nodes: HashSet<&'a str>,
    jobs: HashMap<(String, String), bool>,
}

impl<'a> Drains<'a> {
    fn of(snap: &'a Snapshot) -> Self {
        Drains {
            snap,
            nodes: snap
                .nodes()
                .filter(|n| n.drain_strategy.is_some())
                .map(|n| n.id.as_str())
                .collect(),
            jobs: HashMap::new(),
        }
    }

    /// Whether `next` started running, or turned healthy, while its job
    /// still has live allocations on a draining node: the replacement of the
    /// last migration batch is up (a service replacement counts once healthy
    /// by its migrate strategy), so the job needs another evaluation to move
    /// the next batch (nothing else would wake it, as no process drives
    /// drains).
    fn progressed(&mut self, prev: &Allocation, next: &AllocStatus) -> bool {
        if self.nodes.is_empty() {
            return false;
        }
        let was_healthy = prev
            .deployment_status
            .as_ref()
            .is_some_and(|d| d.healthy == Some(true));
        let started = next.client_status() == AllocClientStatus::Running
            && prev.client_status() != AllocClientStatus::Running;
        let turned_healthy = healthy(next) && !was_healthy;
        if !(started || turned_healthy) {
            return false;
        }
        let (snap, nodes) = (self.snap, &self.nodes);
        *self
            .jobs
            .entry((prev.namespace.clone(), prev.job_id.clone()))
            .or_insert_with(|| {
                snap.allocs_by_job(&prev.namespace, &prev.job_id)
                    .any(|a| a.is_live() && nodes.contains(a.node_id.as_str()))
            })
    }
}

/// A status a batch writes, with the allocation it was checked against.
#[derive(Clone, Debug)]
pub(crate) struct Written {
    pub(crate) base: Arc<Allocation>,
    pub(crate) status: AllocStatus,
}

impl Written {
    /// The allocation as a reader will fold it once the status is written
    /// at `revision`.
    pub(crate) fn folded(&self, revision: Revision) -> Allocation {
        let mut alloc = Allocation::clone(&self.base);
        lay_status(&mut alloc, &self.status, revision);
        alloc
    }
}

/// One batch's transaction, the evaluations it creates and the statuses it
/// writes.
pub(crate) struct Batch {
    pub(crate) txn: Txn,
    pub(crate) evals: Vec<Evaluation>,
    pub(crate) written: Vec<Written>,
}

/// The transaction of one batch: each present allocation's status key
/// compared ([`status_guard`]: no server marked it since it was checked;
/// the record is the servers'), its status put in its job's status batch
/// (one new key per job, named `batch`), its service instances put or
/// deleted, and one failure evaluation per job (or one drain evaluation
/// when a running replacement lets a drain move on). The transaction has no
/// failure branch: conflicts are rare, and reading every allocation back
/// there would put each key into the store's log once more on every write.
pub(crate) fn build_batch<'a>(
    keys: &Keyspace,
    snap: &Snapshot,
    current: impl IntoIterator<Item = (&'a AllocUpdate, Option<&'a Arc<Allocation>>)>,
    batch: &str,
    now: i64,
) -> Batch {
    let mut txn = Txn::new();
    // Each job's statuses (their places in `written`), in the order reported.
    let mut statuses: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    // One evaluation per job; a failure's wins over a drain's.
    let mut failed_jobs: BTreeMap<(String, String), Evaluation> = BTreeMap::new();
    let mut drains = Drains::of(snap);
    let mut written = Vec::new();
    for (update, stored) in current {
        let Some(alloc) = stored else { continue };
        if !may_report(alloc, update) {
            tracing::warn!(
                alloc = %alloc.id,
                node = %alloc.node_id,
                from = ?alloc.client_status(),
                to = ?update.client_status(),
                "a finished allocation stays finished; the report is dropped"
            );
            // Its instances' removal still stands.
            for op in registered::ops(keys, snap, alloc, None, update) {
                txn = txn.and_then(op);
            }
            continue;
        }
        let next = reported(alloc, update, now);
        if let Some(job) = snap.job(&alloc.namespace, &alloc.job_id)
            && !job.stop
            && needs_replacing(alloc, &next, job)
        {
            failed_jobs
                .entry((job.namespace.clone(), job.id.clone()))
                .or_insert_with(|| failure_eval(job))
                .related_alloc_ids
                .push(alloc.id.clone());
        } else if reconnected(alloc, &next)
            && let Some(job) = snap.job(&alloc.namespace, &alloc.job_id)
            && !job.stop
        {
            // Which copy of the name survives is the scheduler's to decide.
            failed_jobs
                .entry((job.namespace.clone(), job.id.clone()))
                .or_insert_with(|| evals::for_job(job, trigger::RECONNECT))
                .related_alloc_ids
                .push(alloc.id.clone());
        } else if drains.progressed(alloc, &next)
            && let Some(job) = snap.job(&alloc.namespace, &alloc.job_id)
            && !job.stop
        {
            failed_jobs
                .entry((job.namespace.clone(), job.id.clone()))
                .or_insert_with(|| evals::for_job(job, trigger::NODE_DRAIN));
        }
        txn = txn.when(status_guard(keys, alloc));
        for op in registered::ops(keys, snap, alloc, Some(next.client_status()), update) {
            txn = txn.and_then(op);
        }
        statuses
            .entry((&alloc.namespace, &alloc.job_id))
            .or_default()
            .push(written.len());
        written.push(Written {
            base: Arc::clone(alloc),
            status: next,
        });
    }
    for ((namespace, job_id), places) in statuses {
        let entries = places.iter().map(|&i| {
            let w: &Written = &written[i];
            (w.base.id.as_str(), &w.status, 0)
        });
        txn = txn.and_then(Op::put(
            keys.job_status(namespace, job_id, batch),
            encode_batch(entries),
        ));
    }
    let evals: Vec<Evaluation> = failed_jobs.into_values().collect();
    for eval in &evals {
        txn = txn.and_then(Op::put(keys.eval(&eval.id), encode(eval)));
    }
    Batch {
        txn,
        evals,
        written,
    }
}

fn failure_eval(job: &Job) -> Evaluation {
    evals::for_job(job, trigger::ALLOC_FAILURE)
}

/// Applies a node's batch of client updates; returns the revision of the
/// last write (the cache's revision when there was nothing to write).
pub async fn update_allocations(
    gw: &NodeApi,
    node_id: &str,
    updates: Vec<AllocUpdate>,
) -> Result<Revision> {
    validate(node_id, &updates)?;
    let mut room = gw.status_writes.admit(updates.len()).await?;
    let mut revision = gw.cache.revision();
    let per_write = gw.config.status_batch_max_allocs.max(1);
    let mut updates = updates.into_iter();
    let mut first_index = 0;
    loop {
        let chunk: Vec<AllocUpdate> = updates.by_ref().take(per_write).collect();
        if chunk.is_empty() {
            break;
        }
        let snap = gw.cache.snapshot();
        let mut current: Current = chunk
            .into_iter()
            .map(|u| {
                let alloc = snap.alloc(&u.alloc_id).cloned();
                (u, alloc)
            })
            .collect();
        // Another gateway's cache may be ahead of ours: an allocation we don't
        // know yet is looked up in the store before it is taken for gone.
        for (update, alloc) in current.iter_mut() {
            if alloc.is_none() {
                *alloc = gw.read_alloc(&update.alloc_id).await?.map(Arc::new);
            }
        }
        // A node reports only its own allocations. The whole request is
        // refused rather than the stranger skipped: an honest node never
        // names another node's allocation (placements never move), so the
        // caller is broken or lying and should hear so, and nothing of a
        // request it forged is written.
        for (i, (update, alloc)) in current.iter().enumerate() {
            if let Some(alloc) = alloc
                && alloc.node_id != node_id
            {
                return Err(GatewayError::PermissionDenied(format!(
                    "updates[{}].alloc_id: allocation {} is not placed on node {node_id}",
                    first_index + i,
                    update.alloc_id
                )));
            }
        }
        first_index += current.len();
        // An allocation found nowhere is gone and its update writes nothing.
        // Dropping it here also keeps the writer's re-read after a conflict
        // from finding it later (created meanwhile, on any node) and writing
        // an update that was never checked against its node.
        current.retain(|(_, alloc)| alloc.is_some());
        if current.is_empty() {
            continue;
        }
        revision = gw
            .status_writes
            .write(current, &mut room)
            .await
            .map_err(|err| match err {
                GatewayError::Conflict(message) => {
                    GatewayError::Conflict(format!("allocations of node {node_id}: {message}"))
                }
                other => other,
            })?;
    }
    // The node's last live allocation may just have finished its drain.
    if gw
        .cache
        .snapshot()
        .node(node_id)
        .is_some_and(|n| n.drain_strategy.is_some())
    {
        gw.settle(revision).await;
        if let Err(err) = caravan_gateway_core::nodes::complete_drain_if_done(gw, node_id).await {
            tracing::warn!(%err, node = %node_id, "could not mark the drain complete");
        }
    }
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocDeploymentStatus, TaskState};

    use super::*;

    /// [`build_batch`] of allocations in hand, as if read from the store.
    fn batch_of(
        keys: &Keyspace,
        snap: &Snapshot,
        current: &[(AllocUpdate, Option<Arc<Allocation>>)],
        now: i64,
    ) -> Batch {
        let checked = current.iter().map(|(u, a)| (u, a.as_ref()));
        build_batch(keys, snap, checked, "b1", now)
    }

    fn alloc(id: &str) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            node_id: "n1".into(),
            modify_revision: 10,
            ..Default::default()
        };
        a.set_desired_status(AllocDesiredStatus::Run);
        a.set_client_status(AllocClientStatus::Running);
        a
    }

    #[test]
    fn updates_carry_the_clients_fields_only() {
        let mut a = alloc("a1");
        a.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            ..Default::default()
        });
        let mut update = AllocUpdate {
            alloc_id: "a1".into(),
            client_description: "Tasks are running".into(),
            deployment_status: Some(AllocDeploymentStatus {
                healthy: Some(true),
                canary: false,
                ..Default::default()
            }),
            ..Default::default()
        };
        update.set_client_status(AllocClientStatus::Running);
        update.task_states.insert(
            "app".into(),
            TaskState {
                state: "running".into(),
                ..Default::default()
            },
        );
        let status = reported(&a, &update, 99);
        let next = Written {
            base: Arc::new(a),
            status,
        }
        .folded(7);
        assert_eq!(next.client_description, "Tasks are running");
        assert_eq!(next.task_states["app"].state, "running");
        let ds = next.deployment_status.unwrap();
        assert_eq!(ds.healthy, Some(true));
        assert!(ds.canary, "the server's canary flag stays");
        assert_eq!(ds.timestamp_unix_ns, 99);
        assert_eq!(next.modify_time_unix_ns, 99);
        assert_eq!(next.client_modify_revision, 7);
    }

    /// A report without task states or health keeps the allocation's own,
    /// as the status a reader folds.
    #[test]
    fn a_report_keeps_what_it_does_not_carry() {
        let mut a = alloc("a1");
        a.task_states.insert(
            "app".into(),
            TaskState {
                state: "running".into(),
                started_at_unix_ns: 40,
                ..Default::default()
            },
        );
        a.running_since_unix_ns = 40;
        a.deployment_status = Some(AllocDeploymentStatus {
            healthy: Some(true),
            timestamp_unix_ns: 50,
            canary: true,
        });
        let mut update = AllocUpdate {
            alloc_id: "a1".into(),
            client_description: "still running".into(),
            ..Default::default()
        };
        update.set_client_status(AllocClientStatus::Running);
        let status = reported(&a, &update, 99);
        assert_eq!(status.task_states["app"].started_at_unix_ns, 40);
        assert_eq!(status.running_since_unix_ns, 40);
        assert_eq!(
            (
                status.deployment_healthy,
                status.deployment_timestamp_unix_ns
            ),
            (Some(true), 50)
        );
        assert_eq!(status.modify_time_unix_ns, 99);
    }

    #[test]
    fn invalid_updates_name_the_field() {
        let err = validate("n1", &[AllocUpdate::default()]).unwrap_err();
        assert!(err.to_string().starts_with("updates[0].alloc_id"), "{err}");
        let err = validate(
            "n1",
            &[AllocUpdate {
                alloc_id: "a".into(),
                ..Default::default()
            }],
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("updates[0].client_status"),
            "{err}"
        );
        assert!(validate("", &[]).is_err());
        let mut coded = AllocUpdate {
            alloc_id: "a".into(),
            ..Default::default()
        };
        coded.set_client_status(AllocClientStatus::Running);
        coded.task_states.insert(
            "web".into(),
            caravan_proto::TaskState {
                events: vec![caravan_proto::TaskEvent {
                    message_code: 3,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        let err = validate("n1", &[coded.clone()]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("updates[0].task_states[web].events[0].message_code"),
            "{err}"
        );
        coded.task_states.get_mut("web").unwrap().state_code = 2;
        let err = validate("n1", &[coded]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("updates[0].task_states[web].state_code"),
            "{err}"
        );
    }

    #[test]
    fn a_running_replacement_moves_a_drain_on() {
        let keys = Keyspace::new("/t");
        let mut tables = caravan_state::Tables::new();
        let mut job = Job {
            id: "web".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        job.set_type(caravan_proto::JobType::Service);
        tables.apply(caravan_state::Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(std::sync::Arc::new(job)),
        });
        let draining = caravan_proto::Node {
            id: "n1".into(),
            drain_strategy: Some(Default::default()),
            ..Default::default()
        };
        tables.apply(caravan_state::Change::Node {
            id: "n1".into(),
            node: Some(std::sync::Arc::new(draining)),
        });
        tables.apply(caravan_state::Change::Alloc {
            id: "old".into(),
            alloc: Some(std::sync::Arc::new(alloc("old"))),
        });
        let snap = Snapshot::new(tables);
        let mut replacement = alloc("new");
        replacement.node_id = "n2".into();
        replacement.set_client_status(AllocClientStatus::Pending);
        let mut running = AllocUpdate {
            alloc_id: "new".into(),
            ..Default::default()
        };
        running.set_client_status(AllocClientStatus::Running);
        let evals = batch_of(
            &keys,
            &snap,
            &[(running.clone(), Some(Arc::new(replacement.clone())))],
            5,
        )
        .evals;
        assert_eq!(evals.len(), 1);
        assert_eq!(evals[0].triggered_by, "node-drain");
        // Already running: no news, no eval.
        replacement.set_client_status(AllocClientStatus::Running);
        let evals = batch_of(
            &keys,
            &snap,
            &[(running.clone(), Some(Arc::new(replacement.clone())))],
            5,
        )
        .evals;
        assert!(evals.is_empty());
        // Turning healthy moves it on again.
        let mut healthy = running;
        healthy.deployment_status = Some(AllocDeploymentStatus {
            healthy: Some(true),
            ..Default::default()
        });
        let evals = batch_of(&keys, &snap, &[(healthy, Some(Arc::new(replacement)))], 5).evals;
        assert_eq!(evals.len(), 1);
        assert_eq!(evals[0].triggered_by, "node-drain");
    }

    #[test]
    fn a_finished_allocation_never_runs_again() {
        let keys = Keyspace::new("/t");
        let snap = Snapshot::new(caravan_state::Tables::new());
        let mut running = AllocUpdate {
            alloc_id: "a1".into(),
            ..Default::default()
        };
        running.set_client_status(AllocClientStatus::Running);
        for finished in [
            AllocClientStatus::Complete,
            AllocClientStatus::Failed,
            AllocClientStatus::Lost,
        ] {
            let mut a = alloc("a1");
            a.set_client_status(finished);
            let current = vec![(running.clone(), Some(Arc::new(a)))];
            let batch = batch_of(&keys, &snap, &current, 5);
            assert!(
                batch.txn.success.is_empty(),
                "{finished:?}: nothing written"
            );
        }
        // Finished to finished, and running to finished, are reports.
        let mut complete = running.clone();
        complete.set_client_status(AllocClientStatus::Complete);
        let mut lost = alloc("a1");
        lost.set_client_status(AllocClientStatus::Lost);
        assert!(may_report(&lost, &complete));
        assert!(may_report(&alloc("a1"), &complete));
        assert!(may_report(&alloc("a1"), &running));
    }

    /// An allocation the servers marked unknown (its node disconnected)
    /// that its client reports again gets a `reconnect` evaluation, which
    /// picks the copy of its name to keep; a later report does not.
    #[test]
    fn an_unknown_allocation_reported_again_gets_a_reconnect_eval() {
        let keys = Keyspace::new("/t");
        let mut tables = caravan_state::Tables::new();
        tables.apply(caravan_state::Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(std::sync::Arc::new(Job {
                id: "web".into(),
                namespace: "default".into(),
                ..Default::default()
            })),
        });
        let snap = Snapshot::new(tables);
        let mut running = AllocUpdate {
            alloc_id: "a1".into(),
            ..Default::default()
        };
        running.set_client_status(AllocClientStatus::Running);
        running.task_states.insert(
            "t".into(),
            TaskState {
                state: "running".into(),
                started_at_unix_ns: 42,
                ..Default::default()
            },
        );
        let mut unknown = alloc("a1");
        unknown.set_client_status(AllocClientStatus::Unknown);
        unknown.unknown_since_unix_ns = 3;
        let batch = batch_of(
            &keys,
            &snap,
            &[(running.clone(), Some(Arc::new(unknown)))],
            5,
        );
        assert_eq!(batch.evals.len(), 1, "{:?}", batch.evals);
        assert_eq!(batch.evals[0].triggered_by, "reconnect");
        assert_eq!(batch.evals[0].related_alloc_ids, vec!["a1"]);
        let written = &batch.written[0].folded(6);
        assert_eq!(written.client_status(), AllocClientStatus::Running);
        assert_eq!(written.running_since_unix_ns, 42, "when its tasks started");
        assert_eq!(
            written.unknown_since_unix_ns, 3,
            "the scheduler, not the client, records the reconnect"
        );
        let mut again = alloc("a1");
        again.set_client_status(AllocClientStatus::Running);
        let batch = batch_of(&keys, &snap, &[(running, Some(Arc::new(again)))], 5);
        assert!(batch.evals.is_empty(), "{:?}", batch.evals);
    }

    /// A service allocation its client reports complete while the servers
    /// want it running (its tasks killed by the client, say) is one the
    /// scheduler replaces: the write carries the evaluation that does. A
    /// batch allocation that completes, or one asked to stop, needs none.
    #[test]
    fn a_service_allocation_complete_while_wanted_running_gets_an_eval() {
        let keys = Keyspace::new("/t");
        let mut tables = caravan_state::Tables::new();
        for (id, kind) in [
            ("web", caravan_proto::JobType::Service),
            ("etl", caravan_proto::JobType::Batch),
        ] {
            let mut job = Job {
                id: id.into(),
                namespace: "default".into(),
                ..Default::default()
            };
            job.set_type(kind);
            tables.apply(caravan_state::Change::Job {
                namespace: "default".into(),
                id: id.into(),
                job: Some(std::sync::Arc::new(job)),
            });
        }
        let snap = Snapshot::new(tables);
        let mut complete = AllocUpdate {
            alloc_id: "a1".into(),
            ..Default::default()
        };
        complete.set_client_status(AllocClientStatus::Complete);
        let evals = |a: Allocation| {
            batch_of(&keys, &snap, &[(complete.clone(), Some(Arc::new(a)))], 5).evals
        };
        let service = evals(alloc("a1"));
        assert_eq!(service.len(), 1, "{service:?}");
        assert_eq!(service[0].job_id, "web");
        assert_eq!(service[0].triggered_by, "alloc-failure");
        assert_eq!(service[0].related_alloc_ids, vec!["a1"]);
        let mut batch = alloc("a1");
        batch.job_id = "etl".into();
        assert!(
            evals(batch).is_empty(),
            "a batch alloc that completes is done"
        );
        let mut stopping = alloc("a1");
        stopping.set_desired_status(AllocDesiredStatus::Stop);
        assert!(evals(stopping).is_empty(), "asked to stop, it did");
        let mut already = alloc("a1");
        already.set_client_status(AllocClientStatus::Complete);
        assert!(evals(already).is_empty(), "no news, no eval");
    }

    #[test]
    fn a_failed_allocation_gets_one_eval_per_job() {
        let keys = Keyspace::new("/t");
        let mut tables = caravan_state::Tables::new();
        let mut job = Job {
            id: "web".into(),
            namespace: "default".into(),
            priority: 60,
            ..Default::default()
        };
        job.set_type(caravan_proto::JobType::Service);
        tables.apply(caravan_state::Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(std::sync::Arc::new(job)),
        });
        let snap = Snapshot::new(tables);
        let mut failed = AllocUpdate {
            alloc_id: "a1".into(),
            ..Default::default()
        };
        failed.set_client_status(AllocClientStatus::Failed);
        let mut failed2 = failed.clone();
        failed2.alloc_id = "a2".into();
        let current = vec![
            (failed, Some(Arc::new(alloc("a1")))),
            (failed2, Some(Arc::new(alloc("a2")))),
        ];
        let Batch { txn, evals, .. } = batch_of(&keys, &snap, &current, 5);
        assert_eq!(evals.len(), 1);
        assert_eq!(evals[0].triggered_by, "alloc-failure");
        assert_eq!(evals[0].priority, 60);
        assert_eq!(evals[0].related_alloc_ids, vec!["a1", "a2"]);
        assert_eq!(txn.compares.len(), 2, "each alloc's status key");
        assert_eq!(
            txn.success.len(),
            2,
            "one batch of the job's statuses, one eval"
        );
        let Op::Put { key, value, .. } = &txn.success[0] else {
            panic!("{:?}", txn.success[0]);
        };
        assert_eq!(key, &keys.job_status("default", "web", "b1"));
        let stored = caravan_store::KeyValue {
            key: key.clone(),
            value: value.clone(),
            create_revision: 9,
            mod_revision: 9,
            version: 1,
            lease: 0,
        };
        let entries = caravan_state::status_batch::decode_batch(&stored).unwrap();
        let reported: Vec<(&str, AllocClientStatus, Revision)> = entries
            .iter()
            .map(|e| (e.alloc_id.as_str(), e.status.client_status(), e.revision))
            .collect();
        assert_eq!(
            reported,
            [
                ("a1", AllocClientStatus::Failed, 9),
                ("a2", AllocClientStatus::Failed, 9)
            ],
            "each written at the batch's own revision"
        );
        assert!(txn.failure.is_empty(), "a conflict is read again apart");
    }
}
