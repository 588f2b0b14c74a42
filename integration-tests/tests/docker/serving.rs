//! A container serving HTTP on a dynamic port: it answers on the host at the
//! port its alloc names, sees its env and `NOMAD_*` variables, has the
//! alloc's directories mounted, carries its limits and labels, and its
//! output reaches `alloc logs`.

use std::time::Instant;

use caravan_integration_tests::docker::{ContainerSweeper, inspect};
use serde_json::json;

use crate::{
    docker_cluster, docker_job, docker_task, eventually, host_port, http_get, register, running,
    the_container,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_answers_on_its_dynamic_port_with_env_dirs_limits_and_labels() {
    let sweeper = ContainerSweeper::default();
    let (c, node) = docker_cluster("docker-serve", "serve-a", &[], &sweeper).await;
    let script = "env > /local/index.html; echo shh > /secrets/s; echo shared > /alloc/data/shared; \
                  echo serving; exec httpd -f -p 8080 -h /local";
    let mut task = docker_task("busybox:1", script);
    task["Config"]["ports"] = json!(["http"]);
    task["Env"] = json!({"GREETING": "hello"});
    task["Config"]["labels"] = json!([{"team": "web"}]);
    let mut job = docker_job("web", task);
    job["Job"]["TaskGroups"][0]["Networks"] =
        json!([{"DynamicPorts": [{"Label": "http", "To": 8080}]}]);
    let http = c.http().unwrap();
    let began = Instant::now();
    register(&http, &job).await;
    let alloc = running(&c, "web").await;
    let port = host_port(&alloc, "http");
    eventually("the container to answer on its host port", || {
        http_get(port, "/index.html").is_some()
    })
    .await;
    eprintln!(
        "register to HTTP answer on port {port}: {:?}",
        began.elapsed()
    );
    let env = http_get(port, "/index.html").unwrap();
    for want in [
        "GREETING=hello".to_string(),
        format!("NOMAD_ALLOC_ID={}", alloc.id),
        "NOMAD_JOB_ID=web".to_string(),
        "NOMAD_TASK_NAME=t".to_string(),
        "NOMAD_ALLOC_DIR=/alloc".to_string(),
        "NOMAD_TASK_DIR=/local".to_string(),
        "NOMAD_SECRETS_DIR=/secrets".to_string(),
        "NOMAD_PORT_http=8080".to_string(),
        format!("NOMAD_HOST_PORT_http={port}"),
    ] {
        assert!(env.lines().any(|l| l == want), "{want} not in\n{env}");
    }
    let alloc_dir = c.client_data_dir("serve-a").join("allocs").join(&alloc.id);
    assert_eq!(
        std::fs::read_to_string(alloc_dir.join("alloc/data/shared")).unwrap(),
        "shared\n"
    );
    assert_eq!(
        std::fs::read_to_string(alloc_dir.join("t/secrets/s")).unwrap(),
        "shh\n"
    );

    let id = the_container(&alloc.id).await;
    let ci = inspect(&id);
    assert_eq!(ci["HostConfig"]["Memory"], 32 * 1024 * 1024, "{ci}");
    assert_eq!(ci["HostConfig"]["CpuShares"], 100);
    let labels = &ci["Config"]["Labels"];
    assert_eq!(labels["com.hashicorp.nomad.alloc_id"], alloc.id.as_str());
    assert_eq!(labels["com.hashicorp.nomad.job_id"], "web");
    assert_eq!(labels["com.hashicorp.nomad.task_group_name"], "g");
    assert_eq!(labels["com.hashicorp.nomad.task_name"], "t");
    assert_eq!(labels["com.hashicorp.nomad.node_id"], node.as_str());
    assert_eq!(labels["team"], "web");

    let out = c.cli(&["alloc", "logs", &alloc.id]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "serving");

    let stats = http
        .get_json(&format!("/v1/client/allocation/{}/stats", alloc.id))
        .await
        .unwrap();
    let rss = &stats["Tasks"]["t"]["ResourceUsage"]["MemoryStats"]["RSS"];
    assert!(rss.as_u64().is_some_and(|r| r > 0), "{stats}");
}
