//! Issue 43's scenarios: services registered by real clients for raw_exec tasks,
//! found through `/v1/service/<name>` by another task and by `caravan service info`,
//! judged by their http checks (deployments with `health_check = "checks"` roll
//! forward or revert on them; `check_restart` restarts a failing server), and gone
//! again when their job stops or their node is lost.

use std::path::Path;

use caravan_integration_tests::{Cluster, HttpApi, Progress, jobs, wait_for};
use caravan_proto::{AllocClientStatus, DeploymentStatus, NodeStatus};
use serde_json::{Value, json};

use crate::{
    Reaper, SECOND_NS, STEP, job_allocs, pid_dir, raw_exec_cluster, register, running, set,
    wait_deployment, wait_running_version,
};

/// A raw_exec server task: records its pid, writes `health` (unless `healthy` is
/// false) and an index into `<dir>/<alloc id>`, and serves that directory on the
/// group's dynamic port `http`.
fn server_task(dir: &Path, healthy: bool) -> Value {
    let root = format!("{}/$NOMAD_ALLOC_ID", dir.display());
    let health = if healthy { "echo ok > health; " } else { "" };
    let script = format!(
        "echo $$ > {}/$NOMAD_ALLOC_ID.pid; mkdir -p {root} && cd {root} && \
         echo hello-from-web > index.html && {health}exec python3 -m http.server $NOMAD_PORT_http",
        dir.display()
    );
    let mut task = jobs::raw_exec_task(&script);
    task["Name"] = json!("server");
    task
}

/// A group of one server, its port and a service `name` with an http check on
/// `/health`, deployed one at a time with `health_check = "checks"`.
fn web_job(id: &str, name: &str, server: Value) -> Value {
    let mut job = jobs::service_job(id, 1, server);
    set(
        &mut job,
        "/Job/TaskGroups/0/Networks",
        json!([{ "DynamicPorts": [{ "Label": "http" }] }]),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Services",
        json!([{
            "Name": name,
            "PortLabel": "http",
            "Provider": "nomad",
            "Tags": ["web"],
            "Checks": [{
                "Name": "health",
                "Type": "http",
                "Path": "/health",
                "Interval": SECOND_NS,
                "Timeout": SECOND_NS,
            }],
        }]),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({
            "MaxParallel": 1,
            "HealthCheck": "checks",
            "MinHealthyTime": SECOND_NS,
            "HealthyDeadline": 10 * SECOND_NS,
            "ProgressDeadline": 15 * SECOND_NS,
            "AutoRevert": true,
        }),
    );
    job
}

/// The registrations of service `name`, as `/v1/service/<name>` lists them.
async fn instances(http: &HttpApi, name: &str) -> Vec<Value> {
    let reply = http.get_json(&format!("/v1/service/{name}")).await.unwrap();
    reply.as_array().cloned().unwrap_or_default()
}

/// Waits until service `name` has instances of exactly the allocs `alloc_ids`.
async fn wait_instances(http: &HttpApi, name: &str, alloc_ids: &[String]) -> Vec<Value> {
    let mut want: Vec<String> = alloc_ids.to_vec();
    want.sort();
    wait_for(
        &format!("service {name} to list allocs {want:?}"),
        STEP,
        async || {
            let list = instances(http, name).await;
            let mut got: Vec<String> = list
                .iter()
                .map(|r| r["AllocID"].as_str().unwrap_or_default().to_string())
                .collect();
            got.sort();
            Ok(if got == want {
                Progress::Done(list)
            } else {
                Progress::Waiting(format!("{got:?}"))
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_registered_checked_and_found_by_another_task() {
    let (c, _nodes) = raw_exec_cluster("services-found", &["svc-a"]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    let found = dir.join("found.txt");
    // The finder knows the gateway and the service's name, nothing of the server:
    // it asks the registry for an instance and fetches the server's index from it.
    let finder = format!(
        r#"exec python3 -c '
import json, sys, time, urllib.request
for _ in range(200):
    try:
        regs = json.load(urllib.request.urlopen("{gw}/v1/service/web"))
        if regs:
            r = regs[0]
            body = urllib.request.urlopen("http://%s:%d/" % (r["Address"], r["Port"])).read()
            open("{found}", "wb").write(body)
            break
    except Exception as e:
        print(e, file=sys.stderr)
    time.sleep(0.2)
time.sleep(300)
'"#,
        gw = c.nomad_addr().unwrap(),
        found = found.display()
    );
    let mut finder_task = jobs::raw_exec_task(&finder);
    finder_task["Name"] = json!("finder");
    let mut job = web_job("web", "web", server_task(&dir, true));
    job["Job"]["TaskGroups"][0]["Tasks"]
        .as_array_mut()
        .unwrap()
        .push(finder_task);
    register(&http, &job).await;
    let allocs = wait_running_version(&c, "web", 1, 0).await;
    let alloc = &allocs[0];
    // Healthy only once its check passes (health_check = "checks").
    wait_deployment(&c, "web", 0, DeploymentStatus::Successful).await;

    let regs = wait_instances(&http, "web", std::slice::from_ref(&alloc.id)).await;
    let reg = &regs[0];
    let port = alloc
        .allocated_resources
        .as_ref()
        .and_then(|r| r.shared.as_ref())
        .and_then(|s| s.ports.iter().find(|p| p.label == "http"))
        .map(|p| i64::from(p.value))
        .expect("the alloc's http port");
    assert_eq!(reg["Port"].as_i64(), Some(port), "{reg}");
    assert_eq!(reg["JobID"], "web", "{reg}");
    assert_eq!(reg["Namespace"], "default", "{reg}");
    assert_eq!(reg["Tags"], json!(["web"]), "{reg}");
    assert_eq!(reg["NodeID"], alloc.node_id.as_str(), "{reg}");
    assert!(
        reg["ID"]
            .as_str()
            .unwrap()
            .starts_with(&format!("_nomad-task-{}-", alloc.id)),
        "{reg}"
    );

    // The other task found the server through the registry.
    wait_for("the finder to fetch the server's index", STEP, async || {
        Ok(match std::fs::read_to_string(&found) {
            Ok(body) => Progress::Done(body),
            Err(e) => Progress::Waiting(e.to_string()),
        })
    })
    .await
    .map(|body| assert_eq!(body.trim(), "hello-from-web"))
    .unwrap();

    // The CLI shows the instance's address and port.
    let nomad_addr = c.nomad_addr().unwrap();
    let env = [("NOMAD_ADDR", nomad_addr.as_str())];
    let out = c
        .cli_nomad_env(&["service", "info", "web"], &env)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let address = format!("{}:{port}", reg["Address"].as_str().unwrap());
    assert!(text.contains(&address), "{address} in {text}");

    // The check's result is the alloc's, as Nomad's client serves it.
    let checks = http
        .get_json(&format!("/v1/client/allocation/{}/checks", alloc.id))
        .await
        .unwrap();
    let results: Vec<&Value> = checks.as_object().unwrap().values().collect();
    assert_eq!(results.len(), 1, "{checks}");
    assert_eq!(results[0]["Status"], "success", "{checks}");
    let status = c
        .cli_nomad_env(&["alloc", "status", &alloc.id], &env)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("Nomad Service Checks"), "{text}");

    // A changed tag is an in-place update: the same alloc's instance is
    // rewritten with the new version's tags.
    set(
        &mut job,
        "/Job/TaskGroups/0/Services/0/Tags",
        json!(["web", "v2"]),
    );
    register(&http, &job).await;
    wait_for("the instance to carry the new tags", STEP, async || {
        let list = instances(&http, "web").await;
        Ok(match list.as_slice() {
            [r] if r["Tags"] == json!(["web", "v2"]) && r["AllocID"] == alloc.id.as_str() => {
                Progress::Done(())
            }
            other => Progress::Waiting(format!("{other:?}")),
        })
    })
    .await
    .unwrap();

    // Stopping the job takes its instance away.
    http.request(hyper::Method::DELETE, "/v1/job/web", None)
        .await
        .unwrap();
    wait_instances(&http, "web", &[]).await;
    assert!(instances(&http, "web").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_whose_check_fails_is_reverted_and_one_that_passes_rolls_forward() {
    let (c, _nodes) = raw_exec_cluster("services-revert", &["rev-a"]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    let spec = |healthy: bool, version: &str| {
        let mut server = server_task(&dir, healthy);
        server["Env"] = json!({ "VERSION": version });
        web_job("shop", "shop", server)
    };
    register(&http, &spec(true, "1")).await;
    wait_running_version(&c, "shop", 1, 0).await;
    wait_deployment(&c, "shop", 0, DeploymentStatus::Successful).await;

    // Version 1 runs but never passes its check: its deployment fails, and the
    // stable version comes back as version 2.
    register(&http, &spec(false, "2")).await;
    wait_deployment(&c, "shop", 1, DeploymentStatus::Failed).await;
    let allocs = wait_running_version(&c, "shop", 1, 2).await;
    let regs = wait_instances(&http, "shop", &[allocs[0].id.clone()]).await;
    assert_eq!(regs.len(), 1);

    // Version 3 passes its check and rolls forward.
    register(&http, &spec(true, "3")).await;
    wait_deployment(&c, "shop", 3, DeploymentStatus::Successful).await;
    let allocs = wait_running_version(&c, "shop", 1, 3).await;
    wait_instances(&http, "shop", &[allocs[0].id.clone()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_restart_restarts_a_server_whose_check_fails() {
    let (c, _nodes) = raw_exec_cluster("services-restart", &["cr-a"]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    let mut job = web_job("flaky", "flaky", server_task(&dir, true));
    set(
        &mut job,
        "/Job/TaskGroups/0/Services/0/Checks/0/CheckRestart",
        json!({ "Limit": 2, "Grace": SECOND_NS }),
    );
    register(&http, &job).await;
    let alloc = wait_running_version(&c, "flaky", 1, 0).await.remove(0);
    wait_deployment(&c, "flaky", 0, DeploymentStatus::Successful).await;

    // The health file goes: the check fails twice in a row, the task restarts,
    // and its new run writes the file again.
    std::fs::remove_file(dir.join(&alloc.id).join("health")).unwrap();
    let state = c.state.clone();
    let restarted = wait_for(
        "the server to be restarted by its check",
        STEP,
        async || {
            let allocs = job_allocs(&state, "flaky").await?;
            let a = allocs.iter().find(|a| a.id == alloc.id).cloned();
            Ok(match a.as_ref().and_then(|a| a.task_states.get("server")) {
                Some(s) if s.restarts >= 1 && s.state == "running" => Progress::Done(s.clone()),
                other => Progress::Waiting(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap();
    assert!(
        restarted
            .events
            .iter()
            .any(|e| e.r#type == "Restart Signaled" && e.message.contains("health")),
        "{:?}",
        restarted.events
    );
    assert!(dir.join(&alloc.id).join("health").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_nodes_instances_are_removed_and_its_replacement_registers() {
    let (mut c, nodes) = raw_exec_cluster("services-loss", &["sl-a", "sl-b"]).await;
    let dir = pid_dir(&c);
    let _reaper = Reaper(dir.clone());
    let http = c.http().unwrap();
    let mut job = web_job("keep", "keep", server_task(&dir, true));
    set(&mut job, "/Job/TaskGroups/0/Count", json!(2));
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({ "MaxParallel": 0 }),
    );
    register(&http, &job).await;
    let before = wait_running_version(&c, "keep", 2, 0).await;
    let ids: Vec<String> = before.iter().map(|a| a.id.clone()).collect();
    wait_instances(&http, "keep", &ids).await;
    let lost: Vec<String> = before
        .iter()
        .filter(|a| a.node_id == nodes[0])
        .map(|a| a.id.clone())
        .collect();
    assert_eq!(lost.len(), 1, "one alloc per node");

    c.crash_client("sl-a").unwrap();
    wait_node_down(&c, &nodes[0]).await;
    let state = c.state.clone();
    let replaced = wait_for("the lost alloc to be replaced", STEP, async || {
        let allocs = job_allocs(&state, "keep").await?;
        let lost_now = allocs
            .iter()
            .any(|a| a.id == lost[0] && a.client_status() == AllocClientStatus::Lost);
        let live = running(&allocs);
        Ok(if lost_now && live.len() == 2 {
            Progress::Done(live)
        } else {
            Progress::Waiting(crate::describe(&allocs))
        })
    })
    .await
    .unwrap();
    let live_ids: Vec<String> = replaced.iter().map(|a| a.id.clone()).collect();
    assert!(!live_ids.contains(&lost[0]));
    wait_instances(&http, "keep", &live_ids).await;
}

async fn wait_node_down(c: &Cluster, node_id: &str) {
    let state = c.state.clone();
    wait_for("the node to be down", STEP, async || {
        let nodes = state.nodes().await?;
        Ok(match nodes.iter().find(|n| n.id == node_id) {
            Some(n) if n.status() == NodeStatus::Down => Progress::Done(()),
            other => Progress::Waiting(format!("{:?}", other.map(|n| n.status()))),
        })
    })
    .await
    .unwrap();
}
