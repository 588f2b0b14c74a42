//! Scenario 8: garbage collection with thresholds of seconds removes old
//! terminal evals and dead jobs (with their allocs and versions) and keeps
//! what live objects still use.

use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, EvalStatus, Job};
use caravan_state::Kind;
use serde_json::json;

use crate::{
    Reaper, STEP, job, job_allocs, pid_dir, register, running, set, sleeper_script,
    wait_running_version,
};

const LIVE: &str = "keeper";
const DEAD: &str = "goner";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_old_evals_and_dead_jobs_and_keeps_live_ones() {
    let mut c = Cluster::new("gc").await.unwrap();
    c.start_control_plane_with(&[
        ("gc.interval_ms", "500"),
        ("gc.eval_threshold_ms", "3000"),
        ("gc.batch_eval_threshold_ms", "3000"),
        ("gc.job_threshold_ms", "3000"),
        ("gc.deployment_threshold_ms", "3000"),
    ])
    .await
    .unwrap();
    c.start_client("gc-a", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    for id in [LIVE, DEAD] {
        let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(&sleeper_script(&pids_dir, id)));
        set(
            &mut job,
            "/Job/TaskGroups/0/Update",
            json!({"MaxParallel": 0}),
        );
        register(&http, &job).await;
        wait_running_version(&c, id, 1, 0).await;
    }
    let live_alloc = running(&job_allocs(&c.state, LIVE).await.unwrap())[0].clone();
    let live_register_eval = live_alloc.eval_id.clone();

    // An eval of the live job that changes nothing: terminal, and nothing
    // live names it.
    let reply = http
        .put_json(&format!("/v1/job/{LIVE}/evaluate"), &json!({}))
        .await
        .unwrap();
    let idle_eval = jobs::eval_id(&reply.ok_json().unwrap()).unwrap();
    // The dead job: stopped, its alloc complete.
    http.delete(&format!("/v1/job/{DEAD}"))
        .await
        .unwrap()
        .ok_json()
        .unwrap();

    let state = c.state.clone();
    let idle = idle_eval.clone();
    wait_for("the dead job and the idle eval to be collected", STEP, async || {
        let evals = state.evals().await?;
        let dead_evals = evals.iter().filter(|e| e.job_id == DEAD).count();
        let idle_left = evals.iter().any(|e| e.id == idle);
        let dead_job = job(&state, DEAD).await?.is_some();
        let dead_allocs = job_allocs(&state, DEAD).await?.len();
        let dead_versions = state
            .list::<Job>(Kind::JobVersions)
            .await?
            .iter()
            .filter(|v| v.id == DEAD)
            .count();
        Ok(
            if !dead_job && dead_evals == 0 && dead_allocs == 0 && dead_versions == 0 && !idle_left {
                Progress::Done(())
            } else {
                Progress::Waiting(format!(
                    "dead job present {dead_job}, its evals {dead_evals}, allocs {dead_allocs}, \
                     versions {dead_versions}; idle eval present {idle_left}"
                ))
            },
        )
    })
    .await
    .unwrap();

    // The live job, its running alloc and the eval that placed it stay.
    let kept = job(&c.state, LIVE).await.unwrap();
    assert!(kept.is_some(), "the live job was collected");
    let allocs = job_allocs(&c.state, LIVE).await.unwrap();
    assert!(
        allocs.iter().any(|a| a.id == live_alloc.id && a.is_live()),
        "{}",
        crate::describe(&allocs)
    );
    let evals = c.state.evals().await.unwrap();
    let register_eval = evals
        .iter()
        .find(|e| e.id == live_register_eval)
        .unwrap_or_else(|| panic!("the eval of a running alloc was collected"));
    assert_eq!(register_eval.status(), EvalStatus::Complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_gc_collects_at_once_whatever_the_thresholds() {
    // Default thresholds (an hour and more): only the forced sweep collects.
    let (c, _nodes) = crate::raw_exec_cluster("system-gc", &["system-gc-a"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    for id in [LIVE, DEAD] {
        let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(&sleeper_script(&pids_dir, id)));
        set(
            &mut job,
            "/Job/TaskGroups/0/Update",
            json!({"MaxParallel": 0}),
        );
        register(&http, &job).await;
        wait_running_version(&c, id, 1, 0).await;
    }
    http.delete(&format!("/v1/job/{DEAD}"))
        .await
        .unwrap()
        .ok_json()
        .unwrap();
    let state = c.state.clone();
    wait_for("the stopped job's alloc to finish", STEP, async || {
        let allocs = job_allocs(&state, DEAD).await?;
        let evals = crate::job_evals(&state, DEAD).await?;
        Ok(
            if allocs
                .iter()
                .all(|a| a.client_status() == AllocClientStatus::Complete)
                && evals.iter().all(|e| e.status() == EvalStatus::Complete)
            {
                Progress::Done(())
            } else {
                Progress::Waiting(crate::describe(&allocs))
            },
        )
    })
    .await
    .unwrap();
    assert!(job(&c.state, DEAD).await.unwrap().is_some());

    let reply = http.put_bytes("/v1/system/gc", Vec::new()).await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(
        job(&c.state, DEAD).await.unwrap().is_none(),
        "the dead job stays after system gc"
    );
    assert!(job_allocs(&c.state, DEAD).await.unwrap().is_empty());
    assert!(crate::job_evals(&c.state, DEAD).await.unwrap().is_empty());
    assert!(job(&c.state, LIVE).await.unwrap().is_some());
    let live = job_allocs(&c.state, LIVE).await.unwrap();
    assert_eq!(running(&live).len(), 1, "{}", crate::describe(&live));
    let placed_by = &running(&live)[0].eval_id;
    assert!(
        crate::job_evals(&c.state, LIVE)
            .await
            .unwrap()
            .iter()
            .any(|e| &e.id == placed_by),
        "the eval of a running alloc was collected"
    );
}
