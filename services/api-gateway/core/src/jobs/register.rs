//! Job writes: register, deregister (stop or purge) and forced evaluation,
//! each one transaction with the evaluation it causes, compared on the job's
//! mod revision and retried from a fresh read when another writer got there
//! first.

use caravan_model::{JobExt, now_unix_ns, trigger};
use caravan_proto::{AllocClientStatus, Evaluation, Job, JobSubmission};
use caravan_state::{Keyspace, decode, encode, register_txn, versions_to_delete};
use caravan_store::{Compare, CompareOp, Op, Range, Revision, Txn};

use crate::cas;
use crate::error::{GatewayError, Result};
use crate::evals;
use crate::gateway::Gateway;
use crate::query::DEFAULT_NAMESPACE;

/// The outcome of a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The evaluation created; empty for periodic and parameterized parents.
    pub eval_id: String,
    /// The revision the evaluation was created at (0 without one).
    pub eval_create_revision: Revision,
    /// The job's spec revision after the write.
    pub job_modify_revision: Revision,
    /// Non-fatal advice about the job.
    pub warnings: Vec<String>,
    /// The revision of the write.
    pub revision: Revision,
}

/// The outcome of a deregistration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deregistered {
    /// The evaluation created; empty for periodic and parameterized parents.
    pub eval_id: String,
    /// The revision the evaluation was created at (0 without one).
    pub eval_create_revision: Revision,
    /// The job's spec revision after the write (the write's, when purged).
    pub job_modify_revision: Revision,
}

/// Fills Nomad's defaults and checks a job's shape and placement rules,
/// and that it asks for at most `max_allocs` allocations in all. Returns
/// the canonical job and its warnings; nothing is written.
pub fn prepare(mut job: Job, max_allocs: u64) -> Result<(Job, Vec<String>)> {
    caravan_jobspec::canonicalize(&mut job);
    caravan_jobspec::validate(&job).map_err(GatewayError::InvalidJob)?;
    check_alloc_total(&job, max_allocs)?;
    caravan_scheduler::validate_job(&job).map_err(|errs| {
        GatewayError::InvalidJob(caravan_jobspec::FieldErrors(
            errs.0
                .into_iter()
                .map(|e| caravan_jobspec::FieldError::new(e.field, e.message))
                .collect(),
        ))
    })?;
    let warnings = caravan_jobspec::warnings(&job);
    Ok((job, warnings))
}

/// Refuses a job whose groups ask for more than `limit` allocations in all:
/// planning and scheduling it would hold every one of them in memory.
fn check_alloc_total(job: &Job, limit: u64) -> Result<()> {
    let total: u64 = job
        .task_groups
        .iter()
        .map(|g| u64::try_from(g.count).unwrap_or(0))
        .sum();
    if total > limit {
        return Err(GatewayError::InvalidJob(caravan_jobspec::FieldErrors(
            vec![caravan_jobspec::FieldError::new(
                "Count",
                format!(
                    "the job's groups ask for {total} allocations in all, more than the \
                     limit of {limit} (api-gateway max_job_allocs)"
                ),
            )],
        )));
    }
    Ok(())
}

/// What a registration writes, decided from what was read.
#[derive(Debug, Clone)]
pub struct RegisterWrite {
    /// The transaction to run.
    pub txn: Txn,
    /// The evaluation it creates, if any.
    pub eval: Option<Evaluation>,
    /// Whether the job itself (and a new version) is written.
    pub changed: bool,
}

/// Builds the registration transaction of `job` over `existing` (as read,
/// revisions resolved) whose kept versions are `versions` (version, stable):
/// the shared registration write plus the evaluation it causes.
pub fn build_register(
    keys: &Keyspace,
    existing: Option<&Job>,
    job: Job,
    versions: &[(u64, bool)],
    trigger: &str,
) -> RegisterWrite {
    let write = register_txn(keys, existing, job, versions, now_unix_ns());
    let mut txn = write.txn;
    let eval = (!write.job.is_template()).then(|| evals::for_job(&write.job, trigger));
    if let Some(eval) = &eval {
        txn = txn.and_then(Op::put(keys.eval(&eval.id), encode(eval)));
    }
    RegisterWrite {
        txn,
        eval,
        changed: write.changed,
    }
}

/// Checks Nomad's `EnforceIndex`: 0 means "only if the job does not exist".
fn check_enforced(existing: Option<&Job>, wanted: Revision) -> Result<()> {
    match existing {
        Some(old) if wanted == 0 => Err(GatewayError::FailedPrecondition(format!(
            "enforcing job modify index 0: job {:?} already exists",
            old.id
        ))),
        Some(old) if old.job_modify_revision != wanted => {
            Err(GatewayError::FailedPrecondition(format!(
                "enforcing job modify index {wanted}: job exists with conflicting job modify index: {}",
                old.job_modify_revision
            )))
        }
        None if wanted != 0 => Err(GatewayError::FailedPrecondition(format!(
            "enforcing job modify index {wanted}: job does not exist"
        ))),
        _ => Ok(()),
    }
}

/// Registers `job`: validates it, then writes job, version and evaluation in
/// one transaction. With `enforce_revision`, registers only if the job's
/// current spec revision equals it (0: only if the job is new).
pub async fn register(
    gw: &Gateway,
    job: Job,
    enforce_revision: Option<Revision>,
) -> Result<Registered> {
    register_with(gw, job, enforce_revision, trigger::JOB_REGISTER).await
}

/// [`register`] with the evaluation's trigger named (`job-scaling` for a
/// scale, `job-register` otherwise).
pub async fn register_with(
    gw: &Gateway,
    job: Job,
    enforce_revision: Option<Revision>,
    trigger: &str,
) -> Result<Registered> {
    register_submitted(gw, job, enforce_revision, trigger, None).await
}

/// Refuses a job whose node pool does not exist (a built-in one, one
/// written, or one a node registered into), as Nomad does.
async fn check_node_pool(gw: &Gateway, job: &Job) -> Result<()> {
    let pool = job.node_pool.as_str();
    if pool.is_empty() || crate::node_pools::get(gw, pool).await?.is_some() {
        return Ok(());
    }
    Err(GatewayError::FailedPrecondition(format!(
        "job {:?} is in nonexistent node pool {pool:?}",
        job.id
    )))
}

/// [`register_with`], keeping `submission` (the job's source) with the
/// version the registration makes.
pub async fn register_submitted(
    gw: &Gateway,
    job: Job,
    enforce_revision: Option<Revision>,
    trigger: &str,
    submission: Option<JobSubmission>,
) -> Result<Registered> {
    let (job, warnings) = prepare(job, gw.config.max_job_allocs)?;
    if gw
        .cache
        .snapshot()
        .scheduler_config()
        .is_some_and(|c| c.reject_job_registration)
    {
        return Err(GatewayError::PermissionDenied(
            "job registration, dispatch, and scale are disabled by the scheduler configuration"
                .into(),
        ));
    }
    check_node_pool(gw, &job).await?;
    let job_key = &gw.keys.job(&job.namespace, &job.id);
    // A new job (the common case) is first tried against the cache's
    // view, which costs the store no read: the write is compared on the
    // job's key, so a cache that missed a change fails it and the next
    // attempt reads the store. A check-index register always reads the
    // store, so it is never refused on a stale copy. The optimistic try
    // comes on top of the gateway's attempts, which all read the store.
    let optimistic_first = enforce_revision.is_none();
    let attempts = gw.attempts().saturating_add(u32::from(optimistic_first));
    let (job, warnings, submission) = (&job, &warnings, submission.as_ref());
    cas::retry_times(
        attempts,
        || conflict(&job.id),
        move |n| async move {
            let optimistic = optimistic_first && n == 0;
            let existing: Option<Job> = if optimistic {
                gw.cache
                    .snapshot()
                    .job(&job.namespace, &job.id)
                    .map(|cached| Job::clone(cached))
            } else {
                // Read from the store, not the cache: the store retries a read
                // on another member through an etcd leader election.
                gw.read(job_key).await?
            };
            if let Some(wanted) = enforce_revision {
                check_enforced(existing.as_ref(), wanted)?;
            }
            let versions = if existing.is_some() {
                read_versions(gw, &job.namespace, &job.id).await?
            } else {
                Vec::new()
            };
            let mut write =
                build_register(&gw.keys, existing.as_ref(), job.clone(), &versions, trigger);
            if let Some(guard) = crate::namespaces::register_guard(gw, &job.namespace) {
                write.txn = write.txn.when(guard);
            }
            if write.changed {
                write.txn = keep_submission(
                    &gw.keys,
                    write.txn,
                    job,
                    existing.as_ref(),
                    &versions,
                    submission,
                );
            }
            let result = match gw.job_writes.txn(write.txn).await {
                Ok(result) => result,
                // A write sent without a read first fails outright through an
                // etcd leader election, where the store's read waits it out:
                // go the read's way. Should the write have landed after all,
                // the next attempt finds the job as registered. A gateway that
                // has heard nothing from the store for a while is cut off from
                // it, not in an election: the read would only wait out the same
                // timeout again, so the caller hears at once.
                Err(err) if optimistic && err.is_retryable() && gw.leader_contact().known => {
                    return Ok(None);
                }
                Err(err) => return Err(err.into()),
            };
            if !result.succeeded {
                let object = format!("job {:?}", job.id);
                crate::namespaces::check_exists(gw, &job.namespace, &object).await?;
                if enforce_revision.is_some() {
                    return Err(GatewayError::FailedPrecondition(format!(
                        "job {:?} changed concurrently; its job modify index no longer matches",
                        job.id
                    )));
                }
                return Ok(None);
            }
            gw.settle(result.revision).await;
            let job_modify_revision = match (&existing, write.changed) {
                (Some(old), false) => old.job_modify_revision,
                _ => result.revision,
            };
            tracing::info!(job = %job.id, namespace = %job.namespace, revision = result.revision,
                changed = write.changed, "job registered");
            if let Some(eval) = &write.eval {
                crate::metrics::eval_created(&eval.triggered_by);
            }
            Ok(Some(Registered {
                eval_id: write
                    .eval
                    .as_ref()
                    .map(|e| e.id.clone())
                    .unwrap_or_default(),
                eval_create_revision: if write.eval.is_some() {
                    result.revision
                } else {
                    0
                },
                job_modify_revision,
                warnings: warnings.clone(),
                revision: result.revision,
            }))
        },
    )
    .await
}

/// Adds to a registration that makes a new version of `job` the write of
/// its submission (when there is one) and the deletes of the submissions of
/// the versions it prunes.
fn keep_submission(
    keys: &Keyspace,
    mut txn: Txn,
    job: &Job,
    existing: Option<&Job>,
    versions: &[(u64, bool)],
    submission: Option<&JobSubmission>,
) -> Txn {
    let version = existing.map_or(0, |old| old.version.saturating_add(1));
    if let Some(submitted) = submission {
        let kept = JobSubmission {
            namespace: job.namespace.clone(),
            job_id: job.id.clone(),
            version,
            job_modify_revision: 0,
            create_revision: 0,
            modify_revision: 0,
            ..submitted.clone()
        };
        txn = txn.and_then(Op::put(
            keys.job_submission(&job.namespace, &job.id, version),
            encode(&kept),
        ));
    }
    for old in versions_to_delete(versions, version) {
        txn = txn.and_then(Op::delete(keys.job_submission(
            &job.namespace,
            &job.id,
            old,
        )));
    }
    txn
}

fn conflict(job_id: &str) -> GatewayError {
    cas::kept_changing(format_args!("job {job_id:?}"))
}

/// The (version, stable) pairs of a job's kept versions, from the store.
pub async fn read_versions(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
) -> Result<Vec<(u64, bool)>> {
    let res = gw
        .store
        .range(Range::prefix(gw.keys.job_versions_of(namespace, job_id)))
        .await?;
    let mut out = Vec::with_capacity(res.kvs.len());
    for kv in &res.kvs {
        let job: Job = decode(kv)?;
        out.push((job.version, job.stable));
    }
    Ok(out)
}

/// Builds the deregistration transaction of `existing`.
pub fn build_deregister(
    keys: &Keyspace,
    existing: &Job,
    purge: bool,
    versions: &[(u64, bool)],
) -> (Txn, Option<Evaluation>) {
    let job_key = keys.job(&existing.namespace, &existing.id);
    let mut txn = Txn::new().when(Compare::mod_revision(
        job_key.clone(),
        CompareOp::Equal,
        existing.modify_revision,
    ));
    let mut eval_job = existing.clone();
    if purge {
        txn = txn
            .and_then(Op::delete(job_key))
            .and_then(Op::Delete(Range::prefix(
                keys.job_versions_of(&existing.namespace, &existing.id),
            )))
            .and_then(Op::delete(keys.job_plan(&existing.namespace, &existing.id)))
            .and_then(Op::Delete(Range::prefix(
                keys.job_submissions_of(&existing.namespace, &existing.id),
            )));
        eval_job.job_modify_revision = 0;
    } else if !existing.stop {
        let mut stopped = existing.clone();
        stopped.stop = true;
        stopped.version = existing.version.saturating_add(1);
        stopped.job_modify_revision = 0;
        stopped.stable = false;
        stopped.submit_time_unix_ns = now_unix_ns();
        let bytes = encode(&stopped);
        txn = txn
            .and_then(Op::put(job_key, bytes.clone()))
            .and_then(Op::put(
                keys.job_version(&stopped.namespace, &stopped.id, stopped.version),
                bytes,
            ));
        for old in versions_to_delete(versions, stopped.version) {
            txn = txn
                .and_then(Op::delete(keys.job_version(
                    &stopped.namespace,
                    &stopped.id,
                    old,
                )))
                .and_then(Op::delete(keys.job_submission(
                    &stopped.namespace,
                    &stopped.id,
                    old,
                )));
        }
        eval_job = stopped;
    }
    let eval =
        (!existing.is_template()).then(|| evals::for_job(&eval_job, trigger::JOB_DEREGISTER));
    if let Some(eval) = &eval {
        txn = txn.and_then(Op::put(keys.eval(&eval.id), encode(eval)));
    }
    (txn, eval)
}

/// Stops a job (or deletes it and its versions with `purge`) and creates the
/// evaluation that stops its allocations.
pub async fn deregister(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    purge: bool,
) -> Result<Deregistered> {
    let namespace = if namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        namespace
    };
    if job_id.is_empty() {
        return Err(GatewayError::field("job_id", "missing job ID"));
    }
    let job_key = &gw.keys.job(namespace, job_id);
    cas::retry(
        gw,
        || conflict(job_id),
        move |_| async move {
            let Some(existing) = gw.read::<Job>(job_key).await? else {
                return Err(GatewayError::NotFound(format!("job not found: {job_id}")));
            };
            let versions = read_versions(gw, namespace, job_id).await?;
            let (txn, eval) = build_deregister(&gw.keys, &existing, purge, &versions);
            let Some(revision) = cas::commit(gw, txn).await? else {
                return Ok(None);
            };
            let job_modify_revision = if purge || !existing.stop {
                revision
            } else {
                existing.job_modify_revision
            };
            tracing::info!(job = %job_id, namespace, purge, revision, "job deregistered");
            if let Some(eval) = &eval {
                crate::metrics::eval_created(&eval.triggered_by);
            }
            Ok(Some(Deregistered {
                eval_id: eval.as_ref().map(|e| e.id.clone()).unwrap_or_default(),
                eval_create_revision: if eval.is_some() { revision } else { 0 },
                job_modify_revision,
            }))
        },
    )
    .await
}

/// Creates a new evaluation of a job (`job eval`); with `force_reschedule`,
/// its failed allocations are also marked to be replaced at once.
pub async fn evaluate(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    force_reschedule: bool,
) -> Result<(String, Revision)> {
    let namespace = if namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        namespace
    };
    let job_key = &gw.keys.job(namespace, job_id);
    cas::retry(
        gw,
        || conflict(job_id),
        move |_| async move {
            let Some(job) = gw.read::<Job>(job_key).await? else {
                return Err(GatewayError::NotFound(format!("job not found: {job_id}")));
            };
            if job.is_periodic() {
                return Err(GatewayError::FailedPrecondition(
                    "can't evaluate periodic job".into(),
                ));
            }
            if job.is_template() {
                return Err(GatewayError::FailedPrecondition(
                    "can't evaluate parameterized job".into(),
                ));
            }
            let eval = evals::for_job(&job, trigger::JOB_REGISTER);
            let mut txn = Txn::new()
                .when(Compare::mod_revision(
                    job_key.clone(),
                    CompareOp::Equal,
                    job.modify_revision,
                ))
                .and_then(Op::put(gw.keys.eval(&eval.id), encode(&eval)));
            if force_reschedule {
                let snap = gw.cache.snapshot();
                let failed = |a: &caravan_proto::Allocation| {
                    a.client_status() == AllocClientStatus::Failed && !not_wanted_running(a)
                };
                let ids: Vec<&str> = snap
                    .allocs_by_job(namespace, job_id)
                    .filter(|a| failed(a))
                    .map(|a| a.id.as_str())
                    .collect();
                // The cache's copies lack the placement metrics: rewrite the
                // stored values.
                let stored = caravan_state::read_allocs(
                    gw.store.as_ref(),
                    &gw.keys,
                    &ids,
                    gw.config.max_txn_ops,
                )
                .await?;
                for mut updated in stored.into_iter().flatten().filter(|a| failed(a)) {
                    let key = gw.keys.alloc(&updated.id);
                    let read_at = updated.modify_revision;
                    updated
                        .desired_transition
                        .get_or_insert_with(Default::default)
                        .force_reschedule = Some(true);
                    txn = txn
                        .when(Compare::mod_revision(
                            key.clone(),
                            CompareOp::Equal,
                            read_at,
                        ))
                        .and_then(Op::put(key, encode(&updated)));
                }
            }
            // Committed here rather than by `cas::commit`: a lost compare
            // waits for the cache too, which may have been behind the
            // allocations the next attempt reads from it.
            let result = gw.store.txn(txn).await?;
            gw.settle(result.revision).await;
            Ok(result.succeeded.then_some((eval.id, result.revision)))
        },
    )
    .await
}

/// Whether the servers want anything but for the allocation to run: stop,
/// evict, or no desired status at all. Only failed allocations still wanted
/// running are forced to reschedule; `AllocExt::is_server_terminal` would
/// also let an allocation with no desired status through.
fn not_wanted_running(alloc: &caravan_proto::Allocation) -> bool {
    alloc.desired_status() != caravan_proto::AllocDesiredStatus::Run
}

#[cfg(test)]
mod tests {
    use caravan_proto::{JobStatus, JobType, PeriodicConfig, Resources, Task, TaskGroup};
    use prost::Message;

    use super::*;

    fn job(count: i32) -> Job {
        let mut job = Job {
            id: "web".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count,
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "mock".into(),
                    resources: Some(Resources {
                        cpu_mhz: 100,
                        memory_mb: 64,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        job.set_type(JobType::Service);
        job
    }

    fn puts(txn: &Txn) -> Vec<(String, Vec<u8>)> {
        txn.success
            .iter()
            .filter_map(|op| match op {
                Op::Put { key, value, .. } => {
                    Some((String::from_utf8_lossy(key).into_owned(), value.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn deletes(txn: &Txn) -> Vec<String> {
        txn.success
            .iter()
            .filter_map(|op| match op {
                Op::Delete(r) => Some(String::from_utf8_lossy(&r.start).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_new_job_is_version_zero_with_a_pending_eval() {
        let keys = Keyspace::new("/t");
        let (job, _) = prepare(job(2), u64::MAX).unwrap();
        let w = build_register(&keys, None, job, &[], trigger::JOB_REGISTER);
        assert!(w.changed);
        assert_eq!(
            w.txn.compares,
            vec![Compare::absent(keys.job("default", "web"))]
        );
        let puts = puts(&w.txn);
        assert_eq!(puts.len(), 3);
        assert_eq!(puts[0].0, "/t/jobs/default/web");
        assert_eq!(
            puts[1].0,
            "/t/job_versions/default/web/00000000000000000000"
        );
        let stored = Job::decode(puts[0].1.as_slice()).unwrap();
        assert_eq!((stored.version, stored.job_modify_revision), (0, 0));
        assert_eq!(stored.status(), JobStatus::Pending);
        let eval = Evaluation::decode(puts[2].1.as_slice()).unwrap();
        let ours = w.eval.unwrap();
        assert_eq!(puts[2].0, format!("/t/evals/{}", ours.id));
        assert_eq!(eval.status(), caravan_proto::EvalStatus::Pending);
        assert_eq!(eval.triggered_by, "job-register");
        assert_eq!(eval.r#type, "service");
        assert_eq!(eval.priority, 50);
        assert_eq!(
            eval.job_modify_revision, 0,
            "resolves to the txn's revision"
        );
    }

    #[test]
    fn a_changed_spec_bumps_the_version_and_prunes_to_six() {
        let keys = Keyspace::new("/t");
        let (mut old, _) = prepare(job(2), u64::MAX).unwrap();
        old.version = 6;
        old.job_modify_revision = 40;
        old.modify_revision = 41;
        let versions: Vec<(u64, bool)> = (1..=6).map(|v| (v, false)).collect();
        let (new, _) = prepare(job(3), u64::MAX).unwrap();
        let w = build_register(&keys, Some(&old), new, &versions, trigger::JOB_REGISTER);
        assert!(w.changed);
        assert_eq!(
            w.txn.compares,
            vec![Compare::mod_revision(
                keys.job("default", "web"),
                CompareOp::Equal,
                41
            )]
        );
        let stored = Job::decode(puts(&w.txn)[0].1.as_slice()).unwrap();
        assert_eq!(stored.version, 7);
        assert_eq!(stored.job_modify_revision, 0);
        assert_eq!(
            deletes(&w.txn),
            vec!["/t/job_versions/default/web/00000000000000000001".to_string()]
        );
    }

    #[test]
    fn an_unchanged_spec_writes_only_an_eval() {
        let keys = Keyspace::new("/t");
        let (mut old, _) = prepare(job(2), u64::MAX).unwrap();
        old.version = 2;
        old.job_modify_revision = 40;
        old.modify_revision = 41;
        let (same, _) = prepare(job(2), u64::MAX).unwrap();
        let w = build_register(
            &keys,
            Some(&old),
            same,
            &[(2, false)],
            trigger::JOB_REGISTER,
        );
        assert!(!w.changed);
        let puts = puts(&w.txn);
        assert_eq!(puts.len(), 1, "only the eval");
        let eval = Evaluation::decode(puts[0].1.as_slice()).unwrap();
        assert_eq!(
            eval.job_modify_revision, 40,
            "the spec revision it evaluates"
        );
    }

    #[test]
    fn a_job_asking_for_more_allocations_than_the_limit_is_invalid() {
        let mut j = job(60);
        let mut second = j.task_groups[0].clone();
        second.name = "other".into();
        second.count = 50;
        j.task_groups.push(second);
        let err = prepare(j.clone(), 100).unwrap_err();
        let GatewayError::InvalidJob(errors) = err else {
            panic!("invalid job expected: {err:?}");
        };
        assert_eq!(errors.0[0].path, "Count");
        assert!(errors.0[0].message.contains("110"), "{errors:?}");
        assert!(prepare(j, 110).is_ok(), "the limit itself is allowed");
    }

    #[test]
    fn periodic_parents_get_no_eval() {
        let keys = Keyspace::new("/t");
        let mut j = job(1);
        j.set_type(JobType::Batch);
        j.periodic = Some(PeriodicConfig {
            enabled: true,
            specs: vec!["*/5 * * * *".into()],
            ..Default::default()
        });
        let (j, _) = prepare(j, u64::MAX).unwrap();
        let w = build_register(&keys, None, j, &[], trigger::JOB_REGISTER);
        assert!(w.eval.is_none());
        assert_eq!(puts(&w.txn).len(), 2);
    }

    #[test]
    fn validation_errors_name_the_field() {
        let err = prepare(job(-1), u64::MAX).unwrap_err();
        assert!(matches!(err, GatewayError::InvalidJob(_)));
        assert!(err.to_string().contains("count"), "{err}");
        let mut j = job(1);
        j.task_groups[0].tasks[0].driver.clear();
        let err = prepare(j, u64::MAX).unwrap_err();
        assert!(err.to_string().contains("driver"), "{err}");
        let mut j = job(1);
        j.constraints.push(caravan_proto::Constraint {
            l_target: "${attr.kernel.name}".into(),
            r_target: "[".into(),
            operand: "regexp".into(),
        });
        let err = prepare(j, u64::MAX).unwrap_err();
        assert!(err.to_string().contains("constraint"), "{err}");
    }

    #[test]
    fn enforced_index_semantics() {
        let old = Job {
            id: "web".into(),
            job_modify_revision: 9,
            ..Default::default()
        };
        assert!(check_enforced(None, 0).is_ok());
        assert!(check_enforced(None, 3).is_err());
        assert!(check_enforced(Some(&old), 0).is_err());
        assert!(check_enforced(Some(&old), 8).is_err());
        assert!(check_enforced(Some(&old), 9).is_ok());
    }

    #[test]
    fn stop_bumps_the_version_and_purge_deletes_everything() {
        let keys = Keyspace::new("/t");
        let (mut old, _) = prepare(job(2), u64::MAX).unwrap();
        old.version = 1;
        old.modify_revision = 12;
        let (txn, eval) = build_deregister(&keys, &old, false, &[(0, false), (1, false)]);
        let stored = Job::decode(puts(&txn)[0].1.as_slice()).unwrap();
        assert!(stored.stop);
        assert_eq!(stored.version, 2);
        assert_eq!(eval.unwrap().triggered_by, "job-deregister");
        let (txn, eval) = build_deregister(&keys, &old, true, &[]);
        assert_eq!(
            deletes(&txn),
            vec![
                "/t/jobs/default/web".to_string(),
                "/t/job_versions/default/web/".to_string(),
                "/t/job_plans/default/web".to_string(),
                "/t/job_submissions/default/web/".to_string(),
            ]
        );
        assert!(eval.is_some());
    }
}
