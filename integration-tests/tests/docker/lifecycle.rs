//! A docker task's life: its output streamed to rotated log files, signals
//! and restarts asked through the CLI, a container killed from outside
//! restarted by the restart policy, an OOM kill recorded as `OOM Killed`,
//! and `job stop -purge` removing the containers within the kill timeout.

use std::time::{Duration, Instant};

use caravan_integration_tests::docker::{ContainerSweeper, containers_of_alloc, docker};
use caravan_integration_tests::{Progress, wait_for};
use serde_json::json;

use crate::{
    SECOND_NS, STEP, docker_cluster, docker_job, docker_task, register, running, task,
    the_container, wait_alloc,
};

/// `caravan alloc logs` of the alloc's task.
async fn logs(c: &caravan_integration_tests::Cluster, alloc_id: &str) -> String {
    let out = c.cli(&["alloc", "logs", alloc_id]).await.unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_rotate_and_signals_and_restarts_reach_the_container() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-life", "life-a", &[], &sweeper).await;
    // 2.5 MB of output, then a line per signal.
    let script = "yes xxxxxxxxxxxxxxx | head -c 2500000; echo; echo ready; \
                  trap 'echo got-usr1' USR1; while true; do sleep 0.1; done";
    let mut t = docker_task("busybox:1", script);
    t["LogConfig"] = json!({"MaxFiles": 2, "MaxFileSizeMB": 1});
    let job = docker_job("life", t);
    register(&c.http().unwrap(), &job).await;
    let alloc = running(&c, "life").await;
    let logs_dir = c
        .client_data_dir("life-a")
        .join("allocs")
        .join(&alloc.id)
        .join("alloc/logs");
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&logs_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("t.stdout."))
            .collect();
        names.sort();
        names
    };
    let dir = logs_dir.clone();
    wait_for("the output to rotate", STEP, async || {
        let newest = std::fs::read_to_string(dir.join("t.stdout.2")).unwrap_or_default();
        Ok(if newest.contains("ready") {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{:?}", files()))
        })
    })
    .await
    .unwrap();
    assert_eq!(
        files(),
        ["t.stdout.1", "t.stdout.2"],
        "two files kept of 1 MB each"
    );
    for f in files() {
        let size = std::fs::metadata(logs_dir.join(&f)).unwrap().len();
        assert!(size <= 1024 * 1024, "{f}: {size}");
    }
    assert!(logs(&c, &alloc.id).await.contains("ready"));

    let out = c
        .cli(&["alloc", "signal", "-s", "SIGUSR1", &alloc.id])
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (cc, id) = (&c, alloc.id.clone());
    wait_for("the signal to arrive", STEP, async || {
        Ok(if logs(cc, &id).await.contains("got-usr1") {
            Progress::Done(())
        } else {
            Progress::Waiting(String::new())
        })
    })
    .await
    .unwrap();
    // The task event travels apart from the output: wait for it too.
    wait_alloc(&c, "life", "with a Signaling event", |a| {
        task(a).events.iter().any(|e| e.r#type == "Signaling")
    })
    .await;

    let before = the_container(&alloc.id).await;
    let out = c.cli(&["alloc", "restart", &alloc.id]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let restarted = wait_alloc(&c, "life", "restarted", |a| {
        task(a).restarts == 1 && task(a).state == "running"
    })
    .await;
    let after = the_container(&restarted.id).await;
    assert_ne!(after, before, "a restart is a new container");
    assert!(
        task(&restarted)
            .events
            .iter()
            .any(|e| e.r#type == "Restart Signaled"),
        "{:?}",
        task(&restarted).events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_killed_from_outside_is_restarted_by_the_restart_policy() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-killed", "killed-a", &[], &sweeper).await;
    let mut job = docker_job("killed", docker_task("busybox:1", "exec sleep 300"));
    job["Job"]["TaskGroups"][0]["RestartPolicy"] =
        json!({"Attempts": 2, "Interval": 600 * SECOND_NS, "Delay": 0, "Mode": "fail"});
    register(&c.http().unwrap(), &job).await;
    let alloc = running(&c, "killed").await;
    let first = the_container(&alloc.id).await;
    docker(&["kill", &first]).unwrap();
    let again = wait_alloc(&c, "killed", "restarted", |a| {
        task(a).restarts == 1 && task(a).state == "running"
    })
    .await;
    let events = task(&again).events;
    let terminated = events
        .iter()
        .find(|e| e.r#type == "Terminated")
        .expect("the kill is recorded");
    assert_eq!(terminated.exit_code, 137, "{events:?}");
    assert!(
        events.iter().any(|e| e.r#type == "Restarting"),
        "{events:?}"
    );
    let second = the_container(&alloc.id).await;
    assert_ne!(second, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_is_recorded_as_oom_killed() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-oom", "oom-a", &[], &sweeper).await;
    let mut t = docker_task("busybox:1", "x=a; while true; do x=\"$x$x\"; done");
    t["Resources"] = json!({"CPU": 100, "MemoryMB": 16});
    register(&c.http().unwrap(), &docker_job("oom", t)).await;
    let dead = wait_alloc(&c, "oom", "failed", |a| task(a).state == "dead").await;
    let events = task(&dead).events;
    let terminated = events
        .iter()
        .find(|e| e.r#type == "Terminated")
        .unwrap_or_else(|| panic!("no Terminated event in {events:?}"));
    assert!(terminated.message.contains("OOM Killed"), "{terminated:?}");
    assert_eq!(terminated.exit_code, 137);
    assert!(task(&dead).failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_stop_purge_removes_the_containers_within_the_kill_timeout() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-purge", "purge-a", &[], &sweeper).await;
    // `sleep` as pid 1 ignores SIGTERM: only the kill timeout ends it.
    let t = docker_task("busybox:1", "exec sleep 300");
    register(&c.http().unwrap(), &docker_job("purged", t)).await;
    let alloc = running(&c, "purged").await;
    the_container(&alloc.id).await;
    let began = Instant::now();
    let out = c.cli(&["job", "stop", "-purge", "purged"]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = alloc.id.clone();
    wait_for("the container to be removed", STEP, async || {
        Ok(if containers_of_alloc(&id)?.is_empty() {
            Progress::Done(())
        } else {
            Progress::Waiting(String::new())
        })
    })
    .await
    .unwrap();
    let took = began.elapsed();
    eprintln!("job stop -purge to no container: {took:?} (kill timeout 1 s)");
    assert!(took < Duration::from_secs(5), "{took:?}");
}
