//! The periodic launcher of one leadership term: follows the active
//! periodic jobs in the watch cache, sleeps until the next launch is due,
//! and launches children (fenced, guarded by the child not existing), or
//! skips a launch that `prohibit_overlap` forbids. `ForcePeriodic` launches
//! at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::Job;
use caravan_state::{Snapshot, StateError};
use caravan_store::Revision;
use tokio::time::Instant;

use crate::error::BrokerError;
use crate::periodic::{self, CronSchedule, LaunchDecision};
use crate::term::{LeaderTerm, now};

/// Least time between two scans of the jobs for new, changed or stopped
/// periodic parents: the cache may change many times a second.
const RESCAN_EVERY: Duration = Duration::from_millis(200);
/// Longest sleep without looking again, as a safety net.
const MAX_IDLE: Duration = Duration::from_secs(5);
/// Wait before retrying after the store failed.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// How long a launch waits for the cache to show it, so the next decision
/// about the same parent sees the child.
const SETTLE: Duration = Duration::from_secs(5);

/// A parent the launcher follows.
#[derive(Debug)]
struct Tracked {
    /// The parent's spec revision the schedule was read from.
    spec_revision: Revision,
    /// Its schedule; `None` when it does not parse (logged once).
    schedule: Option<CronSchedule>,
    /// When it launches next (Unix seconds); `None` when never again.
    due: Option<i64>,
}

/// What a forced launch created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launched {
    /// The child job's id.
    pub child_id: String,
    /// The child's eval.
    pub eval_id: String,
    /// The revision of the launch.
    pub revision: Revision,
}

type JobKey = (String, String);

/// The launcher of one term.
pub struct PeriodicLauncher {
    term: Arc<LeaderTerm>,
    tracked: BTreeMap<JobKey, Tracked>,
    last_scan: Option<Instant>,
    dirty: bool,
}

fn now_secs() -> i64 {
    now().unix_ns.div_euclid(1_000_000_000)
}

/// The instant a Unix time (seconds) falls at, by the wall clock now.
fn instant_of(unix_secs: i64) -> Instant {
    let now = now();
    let wait_ns = unix_secs
        .saturating_mul(1_000_000_000)
        .saturating_sub(now.unix_ns);
    now.instant + Duration::from_nanos(u64::try_from(wait_ns).unwrap_or(0))
}

impl PeriodicLauncher {
    /// A launcher for `term`; it reads the parents when it runs.
    pub fn new(term: Arc<LeaderTerm>) -> Self {
        PeriodicLauncher {
            term,
            tracked: BTreeMap::new(),
            last_scan: None,
            dirty: true,
        }
    }

    /// Launches until the term stops; an error means leadership was lost or
    /// the cache stopped.
    pub async fn run(mut self) -> Result<(), BrokerError> {
        let mut revisions = self.term.informer.subscribe();
        revisions.borrow_and_update();
        self.scan(true);
        loop {
            if self.term.stop.is_cancelled() {
                return Ok(());
            }
            let rescan_at = self.last_scan.map(|at| at + RESCAN_EVERY);
            if self.dirty && rescan_at.is_none_or(|at| at <= Instant::now()) {
                self.scan(false);
            }
            let retry = match self.launch_due().await {
                Ok(()) => None,
                Err(err) if err.is_deposed() => return Err(err),
                Err(err) => {
                    tracing::warn!(error = %err, "periodic launch failed; retrying");
                    Some(Instant::now() + RETRY_DELAY)
                }
            };
            let mut wake = Instant::now() + MAX_IDLE;
            if let Some(due) = self.tracked.values().filter_map(|t| t.due).min() {
                wake = wake.min(instant_of(due));
            }
            if self.dirty
                && let Some(at) = rescan_at
            {
                wake = wake.min(at);
            }
            if let Some(at) = retry {
                wake = wake.max(at);
            }
            tokio::select! {
                _ = self.term.stop.cancelled() => return Ok(()),
                changed = revisions.changed(), if !self.dirty => {
                    if changed.is_err() {
                        return Err(StateError::Closed.into());
                    }
                    self.dirty = true;
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Brings the followed parents in line with the cache: new and changed
    /// parents get their first launch, stopped, disabled and deleted ones
    /// are dropped. `restoring` on the term's first look.
    fn scan(&mut self, restoring: bool) {
        let snap = self.term.informer.snapshot();
        let now = now_secs();
        let mut active = BTreeMap::new();
        for job in snap.jobs().filter(|j| periodic::is_active(j)) {
            let key = (job.namespace.clone(), job.id.clone());
            let tracked = match self.tracked.remove(&key) {
                Some(t) if t.spec_revision == job.job_modify_revision => t,
                _ => track(&snap, job, now, restoring),
            };
            active.insert(key, tracked);
        }
        for (ns, id) in self.tracked.keys() {
            tracing::info!(namespace = %ns, job_id = %id, "periodic job no longer launched");
        }
        self.tracked = active;
        self.last_scan = Some(Instant::now());
        self.dirty = false;
    }

    /// Launches (or skips) every launch that is due.
    async fn launch_due(&mut self) -> Result<(), BrokerError> {
        let now = now_secs();
        let due: Vec<(JobKey, i64)> = self
            .tracked
            .iter()
            .filter_map(|(k, t)| t.due.filter(|d| *d <= now).map(|d| (k.clone(), d)))
            .collect();
        for ((ns, id), at) in due {
            self.launch_one(&ns, &id, at).await?;
        }
        Ok(())
    }

    async fn launch_one(&mut self, ns: &str, id: &str, at: i64) -> Result<(), BrokerError> {
        let snap = self.term.informer.snapshot();
        let key = (ns.to_string(), id.to_string());
        let parent = match snap.job(ns, id) {
            Some(p) if periodic::is_active(p) => Arc::clone(p),
            _ => {
                self.tracked.remove(&key);
                return Ok(());
            }
        };
        let stale = self
            .tracked
            .get(&key)
            .is_none_or(|t| t.spec_revision != parent.job_modify_revision);
        if stale {
            self.tracked
                .insert(key, track(&snap, &parent, now_secs(), false));
            return Ok(());
        }
        match periodic::decide(&snap, &parent, at) {
            LaunchDecision::Launch { child_id } => {
                let (_, revision) = launch(&self.term, &parent, at).await?;
                match revision {
                    Ok(revision) => {
                        tracing::info!(namespace = ns, parent = id, child = %child_id, revision,
                            "periodic job launched");
                        self.settle(revision).await;
                    }
                    Err(current) => {
                        // The parent changed or the child appeared: look again
                        // once the cache shows why.
                        self.settle(current).await;
                        self.dirty = true;
                        return Ok(());
                    }
                }
            }
            LaunchDecision::AlreadyLaunched => {
                tracing::debug!(
                    namespace = ns,
                    parent = id,
                    at,
                    "periodic launch made already"
                );
            }
            LaunchDecision::Overlap => {
                tracing::info!(
                    namespace = ns,
                    parent = id,
                    at,
                    "skipping a periodic launch: prohibit_overlap and a child still runs"
                );
            }
        }
        if let Some(t) = self.tracked.get_mut(&key) {
            t.due = t
                .schedule
                .as_ref()
                .and_then(|s| periodic::due_after(s, at, now_secs()));
        }
        Ok(())
    }

    async fn settle(&self, revision: Revision) {
        if let Err(err) = self.term.informer.wait_for_revision(revision, SETTLE).await {
            tracing::debug!(error = %err, revision, "cache behind a periodic launch");
        }
    }
}

/// Starts following `parent`: its schedule and first launch.
fn track(snap: &Snapshot, parent: &Job, now: i64, restoring: bool) -> Tracked {
    let schedule = parent
        .periodic
        .as_ref()
        .map(CronSchedule::parse)
        .transpose()
        .unwrap_or_else(|err| {
            tracing::warn!(namespace = %parent.namespace, job_id = %parent.id, error = %err,
                "periodic job has an unusable schedule; not launching it");
            None
        });
    let due = schedule
        .as_ref()
        .and_then(|s| periodic::first_due(s, periodic::last_launch(snap, parent), now, restoring));
    tracing::debug!(namespace = %parent.namespace, job_id = %parent.id, ?due, restoring,
        "following periodic job");
    Tracked {
        spec_revision: parent.job_modify_revision,
        schedule,
        due,
    }
}

/// Launches the child of `parent` for `at`: `Ok(Ok(revision))` once
/// written, `Ok(Err(current revision))` when the parent changed or that
/// child exists already.
async fn launch(
    term: &LeaderTerm,
    parent: &Job,
    at: i64,
) -> Result<(Launched, Result<Revision, Revision>), BrokerError> {
    let now_ns = now().unix_ns;
    let child = periodic::derive_child(parent, at, now_ns);
    let eval = periodic::launch_eval(&child, now_ns);
    let res = term.writer.launch_child(parent, &child, &eval).await?;
    let launched = Launched {
        child_id: child.id,
        eval_id: eval.id,
        revision: res.revision,
    };
    let outcome = if res.succeeded {
        Ok(res.revision)
    } else {
        Err(res.revision)
    };
    Ok((launched, outcome))
}

/// Launches a child of a periodic job now, whatever `prohibit_overlap`
/// says (`job periodic force`). The parent is read from the store, so a job
/// registered a moment ago is found.
pub async fn force(
    term: &LeaderTerm,
    namespace: &str,
    job_id: &str,
) -> Result<Launched, BrokerError> {
    let namespace = if namespace.is_empty() {
        "default"
    } else {
        namespace
    };
    if job_id.is_empty() {
        return Err(BrokerError::InvalidArgument {
            field: "job_id".into(),
            problem: "must not be empty".into(),
        });
    }
    let parent = term
        .writer
        .read_job(namespace, job_id)
        .await?
        .ok_or_else(|| BrokerError::JobNotFound(job_id.to_string()))?;
    if parent.periodic.is_none() {
        return Err(BrokerError::FailedPrecondition(
            "can't force launch non-periodic job".into(),
        ));
    }
    if !periodic::is_active(&parent) {
        return Err(BrokerError::FailedPrecondition(format!(
            "can't force run non-tracked job {job_id} ({namespace}): it is stopped, disabled or parameterized"
        )));
    }
    let at = now_secs();
    let result = launch(term, &parent, at).await;
    let (launched, outcome) = match result {
        Ok(done) => done,
        Err(err) => {
            if err.is_deposed() {
                term.stop.cancel();
            }
            return Err(err);
        }
    };
    match outcome {
        Ok(revision) => {
            tracing::info!(namespace, parent = job_id, child = %launched.child_id, revision,
                "periodic job force-launched");
            Ok(launched)
        }
        Err(_) => match term.writer.read_job(namespace, &launched.child_id).await? {
            Some(_) => Err(BrokerError::AlreadyLaunched(launched.child_id)),
            None => Err(BrokerError::FailedPrecondition(format!(
                "periodic job {job_id} changed while it was launched; try again"
            ))),
        },
    }
}
