//! Scenario 1: a rolling update of four raw_exec allocations, two at a time.

use caravan_integration_tests::jobs;
use caravan_integration_tests::process::{command_line, process_alive};
use caravan_proto::DeploymentStatus;
use serde_json::json;

use crate::{
    Reaper, SECOND_NS, job, pid_dir, raw_exec_cluster, register, set, sleeper_script,
    wait_deployment, wait_exited, wait_pids, wait_running_version,
};

const JOB: &str = "rolling";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_replaces_four_processes_two_at_a_time() {
    let (c, _nodes) = raw_exec_cluster("rollout", &["roll-a", "roll-b"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let spec = |greeting: &str| {
        let mut job = jobs::service_job(
            JOB,
            4,
            jobs::raw_exec_task(&sleeper_script(&pids_dir, greeting)),
        );
        set(
            &mut job,
            "/Job/TaskGroups/0/Update",
            json!({
                "MaxParallel": 2,
                "MinHealthyTime": SECOND_NS,
                "HealthyDeadline": 20 * SECOND_NS,
                "ProgressDeadline": 30 * SECOND_NS,
            }),
        );
        job
    };

    register(&http, &spec("v0")).await;
    let old = wait_running_version(&c, JOB, 4, 0).await;
    wait_deployment(&c, JOB, 0, DeploymentStatus::Successful).await;
    let old_pids = wait_pids(&pids_dir, &old).await;

    register(&http, &spec("v1")).await;
    let new = wait_running_version(&c, JOB, 4, 1).await;
    let deployment = wait_deployment(&c, JOB, 1, DeploymentStatus::Successful).await;
    let group = &deployment.task_groups["g"];
    assert_eq!(
        (
            group.desired_total,
            group.placed_allocs,
            group.healthy_allocs,
            group.unhealthy_allocs
        ),
        (4, 4, 4, 0),
        "{deployment:?}"
    );

    // Two batches: the second pair was placed only once the first pair had
    // been healthy, and never more than two old allocs were replaced at once.
    let mut placed = new.clone();
    placed.sort_by_key(|a| a.create_time_unix_ns);
    let healthy_at = |a: &caravan_proto::Allocation| {
        a.deployment_status
            .as_ref()
            .filter(|d| d.healthy == Some(true))
            .map(|d| d.timestamp_unix_ns)
            .unwrap_or_else(|| panic!("{} has no healthy deployment status: {a:?}", a.id))
    };
    let first_batch_healthy = placed[..2].iter().map(healthy_at).max().unwrap();
    for a in &placed[2..] {
        assert!(
            a.create_time_unix_ns >= first_batch_healthy,
            "{} was placed before the first batch was healthy",
            a.name
        );
    }
    for a in &placed {
        assert_eq!(a.deployment_id, deployment.id);
    }

    // Every old process is gone; four new ones run the new version.
    wait_exited(&old_pids.values().copied().collect::<Vec<_>>()).await;
    let new_pids = wait_pids(&pids_dir, &new).await;
    for (id, pid) in &new_pids {
        assert!(
            process_alive(*pid),
            "task of {id} (pid {pid}) is not running"
        );
        assert_eq!(command_line(*pid).unwrap_or_default(), "sleep 300");
        assert!(!old_pids.values().any(|p| p == pid));
    }

    let current = job(&c.state, JOB).await.unwrap().unwrap();
    assert_eq!(current.version, 1);
    wait_for_stable(&c, 1).await;
}

/// Waits until the job's version `version` is marked stable.
async fn wait_for_stable(c: &caravan_integration_tests::Cluster, version: u64) {
    let state = c.state.clone();
    caravan_integration_tests::wait_for(
        &format!("version {version} of {JOB} to be stable"),
        crate::STEP,
        async || {
            let j = job(&state, JOB).await?;
            Ok(match j {
                Some(j) if j.version == version && j.stable => {
                    caravan_integration_tests::Progress::Done(())
                }
                other => caravan_integration_tests::Progress::Waiting(format!(
                    "{:?}",
                    other.map(|j| (j.version, j.stable))
                )),
            })
        },
    )
    .await
    .unwrap()
}

/// A service scaled 3 → 1 → 2 under an update strategy: the last version's
/// deployment counts the allocation updated in place and the one placed,
/// judges both healthy and succeeds (it used to wait on one placement
/// forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_down_then_up_completes_the_deployment() {
    const SCALED: &str = "scaled";
    let (c, _nodes) = raw_exec_cluster("rescale", &["rescale-a"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let mut spec = jobs::service_job(
        SCALED,
        3,
        jobs::raw_exec_task(&sleeper_script(&pids_dir, "v0")),
    );
    set(
        &mut spec,
        "/Job/TaskGroups/0/Update",
        json!({
            "MaxParallel": 1,
            "MinHealthyTime": SECOND_NS,
            "HealthyDeadline": 20 * SECOND_NS,
            "ProgressDeadline": 30 * SECOND_NS,
        }),
    );
    register(&http, &spec).await;
    wait_running_version(&c, SCALED, 3, 0).await;
    wait_deployment(&c, SCALED, 0, DeploymentStatus::Successful).await;
    for (count, version) in [(1, 1), (2, 2)] {
        let reply = http
            .put_json(
                &format!("/v1/job/{SCALED}/scale"),
                &json!({"Count": count, "Target": {"Group": "g"}}),
            )
            .await
            .unwrap();
        reply.ok_json().unwrap();
        wait_running_version(&c, SCALED, count, version).await;
    }
    let deployment = wait_deployment(&c, SCALED, 2, DeploymentStatus::Successful).await;
    let group = &deployment.task_groups["g"];
    assert_eq!(
        (
            group.desired_total,
            group.placed_allocs,
            group.healthy_allocs,
            group.unhealthy_allocs
        ),
        (2, 2, 2, 0),
        "{deployment:?}"
    );
}
