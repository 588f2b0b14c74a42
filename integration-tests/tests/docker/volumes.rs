//! Host volumes end to end: a client configures `host_volume.data`, a job
//! mounting it is placed there and writes into it, the job is stopped and
//! purged and run again, and the second run reads what the first wrote; a job asking for a
//! volume no node has is blocked with Nomad's reason.

use caravan_integration_tests::docker::ContainerSweeper;
use caravan_integration_tests::{Progress, wait_for};
use serde_json::json;

use crate::{
    STEP, docker_cluster, docker_job, docker_task, eventually, register, running, wait_alloc,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_volume_keeps_its_data_across_a_stop_and_a_new_run() {
    let sweeper = ContainerSweeper::default();
    let volume = tempfile::tempdir().unwrap();
    let path = volume.path().display().to_string();
    let (c, _) = docker_cluster(
        "docker-volumes",
        "vol-a",
        &[("host_volume.data.path", path.as_str())],
        &sweeper,
    )
    .await;
    let http = c.http().unwrap();

    // The node says it has the volume, as Nomad's /v1/node/<id> does.
    let nodes = http.get_json("/v1/nodes").await.unwrap();
    let node_id = nodes[0]["ID"].as_str().unwrap().to_string();
    let node = http.get_json(&format!("/v1/node/{node_id}")).await.unwrap();
    assert_eq!(node["HostVolumes"]["data"]["Path"], path.as_str(), "{node}");

    let job = |script: &str| {
        let mut t = docker_task("busybox:1", script);
        t["VolumeMounts"] = json!([{"Volume": "data", "Destination": "/data"}]);
        let mut job = docker_job("stateful", t);
        job["Job"]["TaskGroups"][0]["Volumes"] =
            json!({"data": {"Type": "host", "Source": "data"}});
        job
    };
    register(&http, &job("echo first-run > /data/state; exec sleep 300")).await;
    let first = running(&c, "stateful").await;
    let state = volume.path().join("state");
    let read = move || std::fs::read_to_string(&state).unwrap_or_default();
    let r = read.clone();
    eventually("the first run to write", move || r() == "first-run\n").await;
    // Purged, so the second run is version 0 of a new job: the node must
    // run its new script, not the first run's it still remembers.
    let out = c.cli(&["job", "stop", "-purge", "stateful"]).await.unwrap();
    assert!(out.status.success(), "{out:?}");

    // The second run reads what the first wrote, and adds to it.
    register(
        &http,
        &job("grep -q first-run /data/state && echo second-run >> /data/state; exec sleep 300"),
    )
    .await;
    let second = wait_alloc(&c, "stateful", "of the second run running", |a| {
        a.id != first.id && a.client_status() == caravan_proto::AllocClientStatus::Running
    })
    .await;
    let r = read.clone();
    let waited = caravan_integration_tests::wait_for(
        "the second run to add to the data",
        STEP,
        async || {
            Ok(if r() == "first-run\nsecond-run\n" {
                Progress::Done(())
            } else {
                Progress::Waiting(r())
            })
        },
    )
    .await;
    let logs = c
        .client_data_dir("vol-a")
        .join("allocs")
        .join(&second.id)
        .join("alloc/logs/t.stderr.0");
    assert!(
        waited.is_ok(),
        "{}; the task's stderr: {:?}",
        waited
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
        std::fs::read_to_string(logs)
    );

    // A volume no node has: the job is blocked, with the reason.
    let mut missing = job("exec sleep 300");
    missing["Job"]["ID"] = json!("nowhere");
    missing["Job"]["Name"] = json!("nowhere");
    missing["Job"]["TaskGroups"][0]["Volumes"] =
        json!({"data": {"Type": "host", "Source": "elsewhere"}});
    let registered = register(&http, &missing).await;
    let eval_id = registered["EvalID"].as_str().unwrap().to_string();
    let h = &http;
    let failed = wait_for(
        "the eval to record the failed placement",
        STEP,
        async || {
            let e = h.get_json(&format!("/v1/evaluation/{eval_id}")).await?;
            Ok(if e["FailedTGAllocs"].is_object() {
                Progress::Done(e)
            } else {
                Progress::Waiting(e["Status"].to_string())
            })
        },
    )
    .await
    .unwrap();
    let metric = &failed["FailedTGAllocs"]["g"];
    assert_eq!(
        metric["ConstraintFiltered"]["missing compatible host volumes"], 1,
        "{failed}"
    );
    assert!(
        failed["BlockedEval"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "{failed}"
    );
}
