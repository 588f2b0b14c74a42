//! Batch work that must run exactly once through a fault: `mock` batch jobs
//! registered as a fault begins (their tasks run for a few seconds, so the
//! fault meets them running), checked afterwards for one complete
//! allocation per name and nothing else: no replacement, no second copy,
//! none left unfinished.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation};
use serde_json::{Value, json};

use crate::wait::{Progress, wait_for};
use crate::{ClusterState, HttpApi, jobs};

/// How long each batch task runs.
pub const RUN_FOR: &str = "3s";

/// A batch job `id` of one `mock` task that runs for [`RUN_FOR`], `count`
/// allocations.
pub fn batch_job(id: &str, count: i64) -> Value {
    let mut job = jobs::service_job(
        id,
        count,
        json!({
            "Name": "t",
            "Driver": "mock",
            "Config": {"run_for": RUN_FOR},
            "Resources": {"CPU": 10, "MemoryMB": 16},
        }),
    );
    job["Job"]["Type"] = json!("batch");
    job
}

/// Registers `n` batch jobs `<tag>-batch-<i>` of two allocations each
/// through `http`; returns their ids. Registered before a fault, they are
/// placed and running as it hits.
pub async fn register(http: &HttpApi, tag: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("{tag}-batch-{i}");
        http.put_json("/v1/jobs", &batch_job(&id, 2))
            .await?
            .ok_json()
            .map_err(|e| anyhow::anyhow!("registering {id}: {e:#}"))?;
        ids.push(id);
    }
    Ok(ids)
}

/// The names of `jobs`' allocations that did not run exactly once: every
/// name must have exactly one allocation, and it must be complete. Each
/// entry says what the name had instead.
pub fn not_run_once(jobs: &[String], allocs: &[Allocation], count: usize) -> Vec<String> {
    let mut by_name: BTreeMap<&str, Vec<&Allocation>> = BTreeMap::new();
    for a in allocs.iter().filter(|a| jobs.contains(&a.job_id)) {
        by_name.entry(a.name.as_str()).or_default().push(a);
    }
    let mut wrong = Vec::new();
    for job in jobs {
        let names = by_name
            .keys()
            .filter(|n| n.starts_with(&format!("{job}.")))
            .count();
        if names != count {
            wrong.push(format!("{job}: {names} allocation names of {count}"));
        }
    }
    for (name, list) in by_name {
        match list.as_slice() {
            [a] if a.client_status() == AllocClientStatus::Complete => {}
            other => wrong.push(format!(
                "{name}: {:?}",
                other
                    .iter()
                    .map(|a| {
                        format!(
                            "{:?}/{:?} alloc {} eval {} node {} previous {:?} created at revision {}",
                            a.client_status(),
                            a.desired_status(),
                            a.id,
                            a.eval_id,
                            a.node_id,
                            a.previous_allocation,
                            a.create_revision
                        )
                    })
                    .collect::<Vec<_>>()
            )),
        }
    }
    wrong
}

/// Waits up to `within` for every allocation of `jobs` (registered by
/// [`register`]) to have ended, then fails naming each one that did not
/// run exactly once.
pub async fn assert_ran_once(state: &ClusterState, jobs: &[String], within: Duration) {
    let allocs = wait_for("the batch allocations to end", within, async || {
        let allocs: Vec<Allocation> = state
            .allocs()
            .await?
            .into_iter()
            .filter(|a| jobs.contains(&a.job_id))
            .collect();
        let ended = allocs.iter().filter(|a| a.is_client_terminal()).count();
        Ok(if allocs.len() >= 2 * jobs.len() && ended == allocs.len() {
            Progress::Done(allocs)
        } else {
            Progress::Waiting(format!("{ended} of {} ended", allocs.len()))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    let wrong = not_run_once(jobs, &allocs, 2);
    assert!(
        wrong.is_empty(),
        "batch work not run exactly once: {wrong:#?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(job: &str, name: &str, status: AllocClientStatus) -> Allocation {
        Allocation {
            job_id: job.into(),
            name: name.into(),
            client_status: status as i32,
            ..Default::default()
        }
    }

    #[test]
    fn one_complete_allocation_per_name_and_nothing_else() {
        let jobs = vec!["b".to_string()];
        let ok = [
            alloc("b", "b.g[0]", AllocClientStatus::Complete),
            alloc("b", "b.g[1]", AllocClientStatus::Complete),
            alloc("other", "other.g[0]", AllocClientStatus::Lost),
        ];
        assert!(not_run_once(&jobs, &ok, 2).is_empty());
        let twice = [
            alloc("b", "b.g[0]", AllocClientStatus::Complete),
            alloc("b", "b.g[0]", AllocClientStatus::Complete),
            alloc("b", "b.g[1]", AllocClientStatus::Complete),
        ];
        assert_eq!(not_run_once(&jobs, &twice, 2).len(), 1);
        let missing = [alloc("b", "b.g[0]", AllocClientStatus::Complete)];
        assert_eq!(
            not_run_once(&jobs, &missing, 2),
            vec!["b: 1 allocation names of 2"]
        );
        let lost = [
            alloc("b", "b.g[0]", AllocClientStatus::Lost),
            alloc("b", "b.g[1]", AllocClientStatus::Complete),
        ];
        assert_eq!(not_run_once(&jobs, &lost, 2).len(), 1);
    }
}
