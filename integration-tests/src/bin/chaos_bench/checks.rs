//! What etcd holds after the faults, checked against what the run asked
//! for: no lost eval, every job at its desired state, no node over-committed,
//! no duplicate alloc names among live allocs, and every batch task's side
//! effect exactly once (runs beyond the first reported with what etcd says
//! of their allocs, so a rerun's cause is named).

use std::collections::{BTreeMap, HashMap};

use caravan_integration_tests::ClusterState;
use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, failed_with_follow_up, overcommitted_nodes,
};
use caravan_model::AllocExt;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, EvalStatus, Evaluation, Job,
    ServiceRegistration,
};
use caravan_state::Kind as StateKind;
use serde::Serialize;

use crate::workload::{Kind, Workload};

/// The checks of one reading of the cluster's state.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Checks {
    /// Evals in etcd.
    pub evals: usize,
    /// Allocations in etcd.
    pub allocs: usize,
    /// Evals not finished: pending, or failed with no completed follow-up.
    pub lost_evals: Vec<String>,
    /// Jobs whose latest eval is blocked.
    pub blocked_jobs: Vec<String>,
    /// Jobs not at the state the run asked for, with what was found.
    pub jobs_not_at_desired_state: Vec<String>,
    /// Nodes whose live allocations exceed what they offer.
    pub overcommitted: Vec<String>,
    /// Live allocations of one job sharing a name.
    pub duplicated: Vec<String>,
    /// Batch allocs whose task never left its side effect.
    pub batch_never_ran: Vec<String>,
    /// Batch allocs whose task ran more than once, with the cause etcd shows.
    pub batch_ran_more_than_once: Vec<String>,
    /// Batch allocs whose task ran exactly once.
    pub batch_ran_once: usize,
    /// Service registrations in etcd.
    pub registrations: usize,
    /// Registrations whose alloc is gone, stopped or finished.
    pub ghost_registrations: Vec<String>,
}

impl Checks {
    /// Reads the state and the side-effect file and checks them.
    pub async fn read(state: &ClusterState, work: &Workload) -> anyhow::Result<Checks> {
        let evals = state.evals().await?;
        let allocs = state.allocs().await?;
        let nodes = state.nodes().await?;
        let jobs = state.jobs().await?;
        let runs = side_effects(work)?;
        let registrations: Vec<ServiceRegistration> = state.list(StateKind::Services).await?;
        let mut checks = Checks {
            evals: evals.len(),
            allocs: allocs.len(),
            overcommitted: overcommitted_nodes(&nodes, &allocs),
            duplicated: duplicated_allocs(&allocs),
            ..Checks::default()
        };
        let node_name: HashMap<&str, &str> = nodes
            .iter()
            .map(|n| (n.id.as_str(), n.name.as_str()))
            .collect();
        checks.check_evals(&evals);
        checks.check_jobs(work, &jobs, &allocs, &node_name);
        checks.check_runs(work, &allocs, &node_name, &runs);
        checks.check_registrations(&registrations, &allocs);
        Ok(checks)
    }

    /// What went wrong, one line each; empty for a clean state.
    pub fn failures(&self) -> Vec<String> {
        let mut failed = Vec::new();
        let mut each = |what: &str, list: &[String]| {
            failed.extend(list.iter().map(|l| format!("{what}: {l}")));
        };
        each("lost eval", &self.lost_evals);
        each("blocked job", &self.blocked_jobs);
        each("job not at desired state", &self.jobs_not_at_desired_state);
        each("over-committed", &self.overcommitted);
        each("duplicate alloc name", &self.duplicated);
        each("batch task never ran", &self.batch_never_ran);
        each(
            "batch task ran more than once",
            &self.batch_ran_more_than_once,
        );
        each(
            "registration without a live alloc",
            &self.ghost_registrations,
        );
        failed
    }

    /// Every registration belongs to an alloc that exists, is wanted running
    /// and has not finished (a lost node's allocs, once marked lost, count
    /// as finished: their registrations must go too).
    fn check_registrations(&mut self, regs: &[ServiceRegistration], allocs: &[Allocation]) {
        self.registrations = regs.len();
        let by_id: HashMap<&str, &Allocation> = allocs.iter().map(|a| (a.id.as_str(), a)).collect();
        for reg in regs {
            let why = match by_id.get(reg.alloc_id.as_str()) {
                None => "its alloc is gone".to_string(),
                Some(a) if a.desired_status() != AllocDesiredStatus::Run => {
                    format!("its alloc is {:?}", a.desired_status())
                }
                Some(a)
                    if matches!(
                        a.client_status(),
                        AllocClientStatus::Complete
                            | AllocClientStatus::Failed
                            | AllocClientStatus::Lost
                    ) =>
                {
                    format!("its alloc is {:?}", a.client_status())
                }
                Some(_) => continue,
            };
            self.ghost_registrations
                .push(format!("{} {}: {why}", reg.service_name, reg.id));
        }
    }

    fn check_evals(&mut self, evals: &[Evaluation]) {
        let mut latest: HashMap<&str, &Evaluation> = HashMap::new();
        for e in evals {
            let settled = match e.status() {
                EvalStatus::Complete | EvalStatus::Canceled | EvalStatus::Blocked => true,
                EvalStatus::Failed => failed_with_follow_up(e, evals),
                _ => false,
            };
            if !settled {
                self.lost_evals.push(describe_eval(e));
            }
            if e.job_id.is_empty() {
                continue;
            }
            let slot = latest.entry(e.job_id.as_str()).or_insert(e);
            if e.create_revision > slot.create_revision {
                *slot = e;
            }
        }
        self.blocked_jobs = latest
            .values()
            .filter(|e| e.status() == EvalStatus::Blocked)
            .map(|e| describe_eval(e))
            .collect();
        self.lost_evals.sort();
        self.blocked_jobs.sort();
    }

    fn check_jobs(
        &mut self,
        work: &Workload,
        jobs: &[Job],
        allocs: &[Allocation],
        node_name: &HashMap<&str, &str>,
    ) {
        let by_id: HashMap<&str, &Job> = jobs.iter().map(|j| (j.id.as_str(), j)).collect();
        let mut of_job: HashMap<&str, Vec<&Allocation>> = HashMap::new();
        for a in allocs {
            of_job.entry(a.job_id.as_str()).or_default().push(a);
        }
        for spec in &work.jobs {
            let Some(job) = by_id.get(spec.id.as_str()) else {
                self.jobs_not_at_desired_state
                    .push(format!("{}: not in etcd", spec.id));
                continue;
            };
            let mine = of_job.remove(spec.id.as_str()).unwrap_or_default();
            let live = mine.iter().filter(|a| a.is_live()).count();
            let count = spec.count as usize;
            let problem = if spec.stopped {
                (!job.stop)
                    .then(|| "registered, should be stopped".to_string())
                    .or_else(|| (live > 0).then(|| format!("stopped, {live} allocs still live")))
            } else {
                match spec.kind {
                    Kind::Service => {
                        let running = mine
                            .iter()
                            .filter(|a| {
                                a.is_live()
                                    && a.client_status() == AllocClientStatus::Running
                                    && a.job_version == job.version
                            })
                            .count();
                        (running != count || live != count).then(|| {
                            format!(
                                "{running} running at version {} ({live} live), {count} wanted",
                                job.version
                            )
                        })
                    }
                    Kind::Batch => {
                        let mut complete: Vec<&str> = mine
                            .iter()
                            .filter(|a| a.client_status() == AllocClientStatus::Complete)
                            .map(|a| a.name.as_str())
                            .collect();
                        complete.sort_unstable();
                        complete.dedup();
                        (complete.len() != count || live > 0).then(|| {
                            format!("{} complete ({live} live), {count} wanted", complete.len())
                        })
                    }
                }
            };
            if let Some(problem) = problem {
                let owned: Vec<Allocation> = mine.iter().map(|a| (*a).clone()).collect();
                self.jobs_not_at_desired_state.push(format!(
                    "{}: {problem}; allocs {:?} [{}]",
                    spec.id,
                    alloc_histogram(&owned),
                    history(&mine, node_name)
                ));
            }
        }
    }

    fn check_runs(
        &mut self,
        work: &Workload,
        allocs: &[Allocation],
        node_name: &HashMap<&str, &str>,
        runs: &BTreeMap<String, usize>,
    ) {
        let mut by_name: HashMap<&str, Vec<&Allocation>> = HashMap::new();
        for a in allocs {
            by_name.entry(a.name.as_str()).or_default().push(a);
        }
        for spec in work.jobs.iter().filter(|j| j.kind == Kind::Batch) {
            for name in spec.alloc_names() {
                let ran = runs
                    .get(&format!("{}/{name}", spec.id))
                    .copied()
                    .unwrap_or(0);
                let history = || {
                    history(
                        by_name.get(name.as_str()).map_or(&[][..], Vec::as_slice),
                        node_name,
                    )
                };
                match ran {
                    1 => self.batch_ran_once += 1,
                    0 if spec.stopped => {}
                    0 => self
                        .batch_never_ran
                        .push(format!("{name}: allocs [{}]", history())),
                    n => self
                        .batch_ran_more_than_once
                        .push(format!("{name}: ran {n} times; allocs [{}]", history())),
                }
            }
        }
    }
}

/// What etcd says of each alloc, oldest first: where it ran, its desired and
/// client status, and its tasks' events with their messages (so a task
/// started twice, adopted after a client restart, killed by its client or
/// restarted shows how), for a failure to explain itself.
fn history(allocs: &[&Allocation], node_name: &HashMap<&str, &str>) -> String {
    let mut list: Vec<&Allocation> = allocs.to_vec();
    list.sort_by_key(|a| a.create_revision);
    list.iter()
        .map(|a| {
            let short = |id: &str| id[..id.len().min(8)].to_string();
            let tasks: Vec<String> = a
                .task_states
                .iter()
                .map(|(task, s)| {
                    let events: Vec<String> = s
                        .events
                        .iter()
                        .map(|e| format!("{}: {}", e.r#type, e.message))
                        .collect();
                    format!(
                        "{task} {} restarts {} [{}]",
                        s.state,
                        s.restarts,
                        events.join(" | ")
                    )
                })
                .collect();
            format!(
                "{} on {} {:?}/{:?} {:?} ({}){}",
                short(&a.id),
                node_name.get(a.node_id.as_str()).unwrap_or(&"?"),
                a.desired_status(),
                a.client_status(),
                a.client_description,
                tasks.join("; "),
                if a.previous_allocation.is_empty() {
                    String::new()
                } else {
                    format!(" replacing {}", short(&a.previous_allocation))
                }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One eval, for a message.
fn describe_eval(e: &Evaluation) -> String {
    format!(
        "{} job {} {:?} by {} ({})",
        &e.id[..e.id.len().min(8)],
        e.job_id,
        e.status(),
        e.triggered_by,
        e.status_description
    )
}

/// How many times each `<job>/<alloc name>` line was appended.
fn side_effects(work: &Workload) -> anyhow::Result<BTreeMap<String, usize>> {
    let text = match std::fs::read_to_string(&work.side_effects) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => anyhow::bail!("reading {}: {err}", work.side_effects.display()),
    };
    let mut runs = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        *runs.entry(line.to_string()).or_insert(0) += 1;
    }
    Ok(runs)
}
