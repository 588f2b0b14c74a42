//! `job status`: the jobs table and one job's page (summary, latest
//! deployment, placement failures, allocations).

use std::collections::BTreeMap;

use caravan_model::{JobExt, NomadName};
use caravan_proto::{Deployment, EvalStatus, Evaluation, Job, TaskGroupSummary};

use crate::format::{kv, rfc3339, table};
use crate::placement::alloc_metrics;
use crate::views::alloc_list;
use crate::views::deployment_block;

/// `service`, or `batch/periodic`, `batch/parameterized` for templates.
pub fn job_type(job: &Job) -> String {
    let mut t = job.r#type().nomad_name().to_string();
    if job.is_periodic() {
        t.push_str("/periodic");
    }
    if job.parameterized.is_some() {
        t.push_str("/parameterized");
    }
    t
}

/// `running`, or `dead (stopped)` for a stopped job.
fn status_text(job: &Job) -> String {
    let s = job.status().nomad_name();
    if job.stop {
        format!("{s} (stopped)")
    } else {
        s.to_string()
    }
}

/// The jobs table of `job status` and `status`, sorted by id.
pub fn job_list(jobs: &[Job]) -> String {
    let mut sorted: Vec<&Job> = jobs.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let mut rows = vec![
        ["ID", "Type", "Priority", "Status", "Submit Date"]
            .map(String::from)
            .to_vec(),
    ];
    for j in sorted {
        rows.push(vec![
            j.id.clone(),
            job_type(j),
            j.priority.to_string(),
            status_text(j),
            rfc3339(j.submit_time_unix_ns),
        ]);
    }
    table(rows)
}

/// Everything one job's status page shows.
#[derive(Debug, Clone, Default)]
pub struct JobPage {
    /// The job, with its derived status.
    pub job: Job,
    /// Allocation counts per task group.
    pub summary: BTreeMap<String, TaskGroupSummary>,
    /// The job's allocations.
    pub allocs: Vec<caravan_proto::Allocation>,
    /// The job's evaluations.
    pub evals: Vec<Evaluation>,
    /// The job's newest deployment.
    pub deployment: Option<Deployment>,
}

/// The lines at the head of a job's page (all `job status -short` prints).
pub fn job_header(job: &Job) -> String {
    kv(&[
        ("ID", job.id.clone()),
        ("Name", job.name.clone()),
        ("Submit Date", rfc3339(job.submit_time_unix_ns)),
        ("Type", job.r#type().nomad_name().to_string()),
        ("Priority", job.priority.to_string()),
        ("Datacenters", job.datacenters.join(",")),
        ("Namespace", job.namespace.clone()),
        ("Node Pool", job.node_pool.clone()),
        ("Status", status_text(job)),
        ("Periodic", job.is_periodic().to_string()),
        ("Parameterized", job.parameterized.is_some().to_string()),
    ])
}

/// One job's status page.
pub fn job_page(page: &JobPage, now: i64) -> String {
    let mut out = job_header(&page.job);
    out.push_str("\n\nSummary\n");
    let mut rows = vec![
        [
            "Task Group",
            "Queued",
            "Starting",
            "Running",
            "Failed",
            "Complete",
            "Lost",
            "Unknown",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (group, s) in &page.summary {
        rows.push(vec![
            group.clone(),
            s.queued.to_string(),
            s.starting.to_string(),
            s.running.to_string(),
            s.failed.to_string(),
            s.complete.to_string(),
            s.lost.to_string(),
            s.unknown.to_string(),
        ]);
    }
    out.push_str(&table(rows));
    if let Some(failures) = placement_failure(&page.evals) {
        out.push_str("\n\nPlacement Failure\n");
        out.push_str(&failures);
    }
    if let Some(d) = &page.deployment {
        out.push_str("\n\nLatest Deployment\n");
        out.push_str(&deployment_block(d));
    }
    out.push_str("\n\nAllocations\n");
    if page.allocs.is_empty() {
        out.push_str("No allocations placed");
    } else {
        out.push_str(&alloc_list(&page.allocs, now));
    }
    out
}

/// The failures of the newest eval that failed to place, shown while the
/// job has a blocked eval waiting for capacity.
fn placement_failure(evals: &[Evaluation]) -> Option<String> {
    if !evals.iter().any(|e| e.status() == EvalStatus::Blocked) {
        return None;
    }
    let latest = evals
        .iter()
        .filter(|e| !e.failed_tg_allocs.is_empty())
        .max_by_key(|e| e.create_revision)?;
    let groups: Vec<String> = latest
        .failed_tg_allocs
        .iter()
        .map(|(group, m)| {
            let metrics = alloc_metrics(m, "  ");
            if metrics.is_empty() {
                format!("Task Group {group:?}:")
            } else {
                format!("Task Group {group:?}:\n{metrics}")
            }
        })
        .collect();
    Some(groups.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocMetric, DeploymentState, DeploymentStatus, JobStatus, JobType, PeriodicConfig,
    };

    use super::*;
    use crate::views::fixtures::*;

    fn hello() -> Job {
        let mut job = Job {
            id: "hello".into(),
            name: "hello".into(),
            namespace: "default".into(),
            priority: 50,
            datacenters: vec!["*".into()],
            node_pool: "default".into(),
            submit_time_unix_ns: NOW,
            ..Default::default()
        };
        job.set_type(JobType::Service);
        job.set_status(JobStatus::Running);
        job
    }

    #[test]
    fn the_jobs_table_marks_templates_and_stopped_jobs() {
        let mut cron = hello();
        cron.id = "crunch".into();
        cron.set_type(JobType::Batch);
        cron.periodic = Some(PeriodicConfig {
            enabled: true,
            ..Default::default()
        });
        let mut stopped = hello();
        stopped.id = "old".into();
        stopped.stop = true;
        stopped.set_status(JobStatus::Dead);
        assert_eq!(
            job_list(&[hello(), stopped, cron]),
            "ID      Type            Priority  Status          Submit Date\n\
             crunch  batch/periodic  50        running         2023-11-14T22:13:20Z\n\
             hello   service         50        running         2023-11-14T22:13:20Z\n\
             old     service         50        dead (stopped)  2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn the_job_page_has_summary_and_allocations() {
        let page = JobPage {
            job: hello(),
            summary: [(
                "hello".to_string(),
                TaskGroupSummary {
                    running: 1,
                    ..Default::default()
                },
            )]
            .into(),
            allocs: vec![alloc("0af996ed-1111", 10)],
            ..Default::default()
        };
        assert_eq!(
            job_page(&page, NOW),
            "ID            = hello\n\
             Name          = hello\n\
             Submit Date   = 2023-11-14T22:13:20Z\n\
             Type          = service\n\
             Priority      = 50\n\
             Datacenters   = *\n\
             Namespace     = default\n\
             Node Pool     = default\n\
             Status        = running\n\
             Periodic      = false\n\
             Parameterized = false\n\
             \n\
             Summary\n\
             Task Group  Queued  Starting  Running  Failed  Complete  Lost  Unknown\n\
             hello       0       0         1        0       0         0     0\n\
             \n\
             Allocations\n\
             ID        Node ID   Task Group  Version  Desired  Status   Created   Modified\n\
             0af996ed  f7476465  hello       0        run      running  1m5s ago  5s ago"
        );
    }

    #[test]
    fn a_blocked_job_shows_its_placement_failure_and_deployment() {
        let mut blocked = Evaluation {
            create_revision: 9,
            ..Default::default()
        };
        blocked.set_status(EvalStatus::Blocked);
        let mut failed = Evaluation {
            create_revision: 8,
            failed_tg_allocs: [(
                "hello".to_string(),
                AllocMetric {
                    nodes_evaluated: 1,
                    nodes_exhausted: 1,
                    dimension_exhausted: [("memory".to_string(), 1)].into(),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        failed.set_status(EvalStatus::Complete);
        let mut d = Deployment {
            id: "5ca611b5-0000".into(),
            status_description: "Deployment is running".into(),
            task_groups: [(
                "hello".to_string(),
                DeploymentState {
                    desired_total: 1,
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        d.set_status(DeploymentStatus::Running);
        let page = JobPage {
            job: hello(),
            evals: vec![failed, blocked],
            deployment: Some(d),
            ..Default::default()
        };
        let out = job_page(&page, NOW);
        assert!(out.contains(
            "\n\nPlacement Failure\nTask Group \"hello\":\n  * Resources exhausted on 1 nodes\n  \
             * Dimension \"memory\" exhausted on 1 nodes\n\n"
        ));
        assert!(out.contains(
            "Latest Deployment\nID          = 5ca611b5\nStatus      = running\n\
             Description = Deployment is running\n\nDeployed\n\
             Task Group  Desired  Placed  Healthy  Unhealthy  Progress Deadline\n\
             hello       1        0       0        0          N/A\n"
        ));
        assert!(out.ends_with("Allocations\nNo allocations placed"));
    }
}
