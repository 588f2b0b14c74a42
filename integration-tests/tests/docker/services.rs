//! A container's services: registered with the host's address and the mapped
//! host port (`address_mode = "host"`, and `auto` for a task that maps its
//! port), or with the container's own address and port (`driver`), each judged
//! by an http check the client runs against that address.

use caravan_integration_tests::docker::{ContainerSweeper, inspect};
use caravan_integration_tests::{HttpApi, Progress, wait_for};
use serde_json::{Value, json};

use crate::{
    SECOND_NS, STEP, docker_cluster, docker_job, docker_task, host_port, register, running,
    the_container,
};

/// The registrations of service `name`, once it has `n` of them whose checks
/// all pass.
async fn passing(http: &HttpApi, name: &str, n: usize) -> Vec<Value> {
    wait_for(
        &format!("{n} passing instances of {name}"),
        STEP,
        async || {
            let list = http.get_json(&format!("/v1/service/{name}")).await?;
            let regs = list.as_array().cloned().unwrap_or_default();
            let mut all_pass = regs.len() == n;
            for r in &regs {
                let alloc = r["AllocID"].as_str().unwrap_or_default();
                let checks = http
                    .get_json(&format!("/v1/client/allocation/{alloc}/checks"))
                    .await?;
                all_pass &= checks
                    .as_object()
                    .is_some_and(|m| !m.is_empty() && m.values().all(|c| c["Status"] == "success"));
            }
            Ok(if all_pass {
                Progress::Done(regs)
            } else {
                Progress::Waiting(list.to_string())
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_registers_its_host_port_or_its_own_address() {
    let sweeper = ContainerSweeper::default();
    let (c, _node) = docker_cluster("docker-services", "dsvc-a", &[], &sweeper).await;
    let mut task = docker_task(
        "busybox:1",
        "echo ok > /local/health; exec httpd -f -p 8080 -h /local",
    );
    task["Config"]["ports"] = json!(["http"]);
    let check = json!([{
        "Type": "http", "Path": "/health", "Interval": SECOND_NS, "Timeout": SECOND_NS,
    }]);
    task["Services"] = json!([
        { "Name": "web-host", "PortLabel": "http", "Provider": "nomad",
          "AddressMode": "host", "Checks": check },
        { "Name": "web-driver", "PortLabel": "http", "Provider": "nomad",
          "AddressMode": "driver",
          "Checks": [{ "Type": "http", "Path": "/health", "Interval": SECOND_NS,
                       "Timeout": SECOND_NS, "AddressMode": "driver" }] },
    ]);
    let mut job = docker_job("web", task);
    job["Job"]["TaskGroups"][0]["Networks"] =
        json!([{"DynamicPorts": [{"Label": "http", "To": 8080}]}]);
    let http = c.http().unwrap();
    register(&http, &job).await;
    let alloc = running(&c, "web").await;
    let port = host_port(&alloc, "http");

    let host = passing(&http, "web-host", 1).await;
    assert_eq!(host[0]["Port"].as_u64(), Some(u64::from(port)), "{host:?}");
    let driver = passing(&http, "web-driver", 1).await;
    assert_eq!(
        driver[0]["Port"], 8080,
        "the container's own port: {driver:?}"
    );
    let container = inspect(&the_container(&alloc.id).await);
    let settings = &container["NetworkSettings"];
    let container_ip = settings["IPAddress"]
        .as_str()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            settings["Networks"]
                .as_object()
                .and_then(|m| m.values().find_map(|e| e["IPAddress"].as_str()))
        })
        .expect("the container's address")
        .to_string();
    assert_eq!(driver[0]["Address"], container_ip.as_str(), "{driver:?}");
    assert_ne!(host[0]["Address"], container_ip.as_str(), "{host:?}");
}
