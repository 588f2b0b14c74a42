//! Scenario 2: an update whose tasks exit at once fails its deployment, and
//! auto_revert brings the last stable version back.

use caravan_integration_tests::jobs;
use caravan_proto::DeploymentStatus;
use serde_json::{Value, json};

use crate::{
    Reaper, SECOND_NS, job, pid_dir, raw_exec_cluster, register, set, sleeper_script,
    wait_deployment, wait_running_version,
};

const JOB: &str = "reverting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_update_is_reverted_to_the_stable_version() {
    let (c, _nodes) = raw_exec_cluster("revert", &["revert-a", "revert-b"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let spec = |script: &str| {
        let mut job = jobs::service_job(JOB, 2, jobs::raw_exec_task(script));
        set(
            &mut job,
            "/Job/TaskGroups/0/Update",
            json!({
                "MaxParallel": 1,
                "MinHealthyTime": SECOND_NS,
                "HealthyDeadline": 20 * SECOND_NS,
                "ProgressDeadline": 30 * SECOND_NS,
                "AutoRevert": true,
            }),
        );
        // A task that fails fails its alloc at once: no restarts, and no
        // rescheduling to blur the deployment's verdict.
        set(
            &mut job,
            "/Job/TaskGroups/0/RestartPolicy",
            json!({"Attempts": 0, "Interval": 60 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"}),
        );
        set(
            &mut job,
            "/Job/TaskGroups/0/ReschedulePolicy",
            json!({"Attempts": 0, "Unlimited": false}),
        );
        job
    };
    let good = sleeper_script(&pids_dir, "good");
    register(&http, &spec(&good)).await;
    wait_running_version(&c, JOB, 2, 0).await;
    wait_deployment(&c, JOB, 0, DeploymentStatus::Successful).await;

    register(&http, &spec("echo broken; exit 3")).await;
    let failed = wait_deployment(&c, JOB, 1, DeploymentStatus::Failed).await;
    assert!(failed.task_groups["g"].unhealthy_allocs >= 1, "{failed:?}");

    // The revert registers version 2 with version 0's tasks, and it runs.
    let allocs = wait_running_version(&c, JOB, 2, 2).await;
    let current = job(&c.state, JOB).await.unwrap().unwrap();
    assert_eq!(current.version, 2);
    let versions = http
        .get_json(&format!("/v1/job/{JOB}/versions"))
        .await
        .unwrap();
    let task_args = |v: &Value| v.pointer("/TaskGroups/0/Tasks/0/Config/args/1").cloned();
    let listed = versions["Versions"].as_array().unwrap();
    let by_version = |n: u64| {
        listed
            .iter()
            .find(|v| v["Version"].as_u64() == Some(n))
            .unwrap_or_else(|| panic!("no version {n} in {versions}"))
    };
    assert_eq!(task_args(by_version(2)), Some(Value::String(good.clone())));
    assert_eq!(task_args(by_version(1)), Some(json!("echo broken; exit 3")));
    for a in &allocs {
        assert_eq!(a.job_version, 2);
    }
}
