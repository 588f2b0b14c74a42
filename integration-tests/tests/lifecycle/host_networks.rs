//! Issue 47's host networks with a real client: `host_network "lo"` (the
//! loopback block, so nothing leaves the machine) is resolved by the client,
//! a raw_exec task whose port asks for it sees the network's address in
//! `NOMAD_IP_<label>`, and a job asking for a network no node has is blocked
//! with the reason.

use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use serde_json::{Value, json};

use crate::{Reaper, STEP, pid_dir, register, wait_running_version};

/// A job `id` with one raw_exec task running `script` and a dynamic port
/// `http` on the host network `network`.
fn job_on(id: &str, network: &str, script: &str) -> Value {
    let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(script));
    job["Job"]["TaskGroups"][0]["Networks"] =
        json!([{"DynamicPorts": [{"Label": "http", "HostNetwork": network}]}]);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_on_a_host_network_binds_its_address_and_a_missing_one_blocks() {
    let mut c = Cluster::new("host-networks").await.unwrap();
    c.start_control_plane().await.unwrap();
    let node_id = c
        .start_client(
            "host-networks-node",
            &[
                ("drivers", "raw_exec"),
                ("host_network.lo.cidr", "127.0.0.0/8"),
                ("host_network.lo.reserved_ports", "22"),
            ],
        )
        .await
        .unwrap();
    let node = c
        .state
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.id == node_id)
        .unwrap();
    assert_eq!(
        node.host_networks
            .iter()
            .map(|n| (
                n.name.as_str(),
                n.address.as_str(),
                n.reserved_ports.as_str()
            ))
            .collect::<Vec<_>>(),
        vec![("lo", "127.0.0.1", "22")]
    );

    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    let out = dir.join("env.txt");
    let script = format!(
        "echo $$ > {pids}/$NOMAD_ALLOC_ID.pid; \
         echo \"$NOMAD_IP_http $NOMAD_HOST_IP_http $NOMAD_ADDR_http\" > {out}; exec sleep 300",
        pids = dir.display(),
        out = out.display()
    );
    register(&http, &job_on("on-lo", "lo", &script)).await;
    wait_running_version(&c, "on-lo", 1, 0).await;
    let line = wait_for("the task to write its env", STEP, async || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        Ok(if text.ends_with('\n') {
            Progress::Done(text)
        } else {
            Progress::Waiting(text)
        })
    })
    .await
    .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[..2], ["127.0.0.1", "127.0.0.1"], "{line}");
    assert!(fields[2].starts_with("127.0.0.1:"), "{line}");

    // A network no node has: the job is blocked, with Nomad's reason.
    let eval_id = register(&http, &job_on("nowhere", "public", "exec sleep 300")).await;
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
        metric["ConstraintFiltered"]["missing host network \"public\" for port \"http\""], 1,
        "{failed}"
    );
    assert!(
        failed["BlockedEval"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "{failed}"
    );
}
