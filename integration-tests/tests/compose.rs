//! The docker-compose stack (`docker-compose.yml` at the root) runs jobs and
//! keeps running them while parts of it die: it comes up healthy, runs a
//! raw_exec service job on the two real nodes, a mock service job across the
//! 100 simulated ones and a batch job; then loses the eval-broker leader's
//! container, the etcd leader's container, has its scheduler-workers scaled
//! 3 → 5 → 2, and one etcd member cut off the network and reconnected,
//! running a batch job to completion after each; finally the invariants are
//! checked straight from etcd and the stack is removed with its volumes.
//!
//! It needs Docker, docker-compose (or Compose v2) and the images
//! `scripts/images` builds, so `cargo test` skips it; `scripts/compose-test`
//! builds the images and runs it. Every wait is bounded; the run takes about
//! two minutes on a two-core machine, 10-36 s of it with an etcd member cut off
//! (the script prints each step's time).

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, eval_histogram, evals_settled, overcommitted_nodes,
};
use caravan_integration_tests::{ClusterState, HttpApi, Progress, jobs, wait_for};
use caravan_state::Keyspace;
use caravan_store::{EtcdConfig, EtcdStore, Store};
use serde_json::Value;

/// Longest wait for the stack, or a restarted part of it, to be healthy.
const HEALTHY: Duration = Duration::from_secs(180);
/// Longest wait for a job to reach the state it should.
const JOB: Duration = Duration::from_secs(120);
/// Longest wait for a leader-elected service to elect another leader (its
/// lease is 10 s).
const FAILOVER: Duration = Duration::from_secs(60);
/// Every etcd member of the stack.
const ETCD: [&str; 3] = ["etcd-1", "etcd-2", "etcd-3"];
/// The stack's state prefix (docker/config/*.toml).
const PREFIX: &str = "/caravan";

/// A compose project made from the root's docker-compose.yml and the test's
/// overlay (etcd's client ports published on loopback), removed with its
/// volumes when dropped. Named by `CARAVAN_COMPOSE_PROJECT`, else after the
/// test's process; its images' tag is `CARAVAN_TAG` (default `latest`).
struct Stack {
    project: String,
    root: PathBuf,
    compose: Vec<String>,
    env: Vec<(String, String)>,
    http: SocketAddr,
    started: Instant,
}

impl Stack {
    /// `compose up -d` of a new project on free loopback ports.
    fn up() -> anyhow::Result<Stack> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the workspace root")?
            .to_path_buf();
        let http_port = free_port()?;
        let grpc_port = free_port()?;
        let tag = std::env::var("CARAVAN_TAG").unwrap_or_else(|_| "latest".into());
        let stack = Stack {
            project: std::env::var("CARAVAN_COMPOSE_PROJECT")
                .unwrap_or_else(|_| format!("caravan-test-{}", std::process::id())),
            root,
            compose: compose_command(),
            env: vec![
                ("CARAVAN_TAG".into(), tag),
                ("CARAVAN_PUBLISH".into(), "127.0.0.1".into()),
                ("CARAVAN_HTTP_PORT".into(), http_port.to_string()),
                ("CARAVAN_GRPC_PORT".into(), grpc_port.to_string()),
            ],
            http: SocketAddr::from(([127, 0, 0, 1], http_port)),
            started: Instant::now(),
        };
        stack.step(&format!(
            "compose up -d (project {}, images tag {})",
            stack.project, stack.env[0].1
        ));
        stack.compose_run(&["up", "-d"])?;
        Ok(stack)
    }

    /// Prints `what` with the time since the stack was started.
    fn step(&self, what: &str) {
        eprintln!(
            "[compose-test {:>6.1}s] {what}",
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Runs compose on the project with `args`; its standard output.
    fn compose_run(&self, args: &[&str]) -> anyhow::Result<String> {
        let (program, first) = self.compose.split_first().context("no compose command")?;
        let mut cmd = Command::new(program);
        cmd.args(first)
            .current_dir(&self.root)
            .args(["-p", &self.project])
            .args(["-f", "docker-compose.yml"])
            .args(["-f", "integration-tests/compose/test.yml"])
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        run(cmd)
    }

    /// The containers of a compose service, running or not.
    fn containers(&self, service: &str) -> anyhow::Result<Vec<String>> {
        Ok(self
            .compose_run(&["ps", "-q", service])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// The one container of a compose service.
    fn container(&self, service: &str) -> anyhow::Result<String> {
        let ids = self.containers(service)?;
        match ids.as_slice() {
            [one] => Ok(one.clone()),
            _ => anyhow::bail!("{service} has {} containers: {ids:?}", ids.len()),
        }
    }

    /// Waits until every container of `services` is running and healthy,
    /// `count` of them for a scaled one.
    async fn wait_healthy(&self, services: &[(&str, usize)]) -> anyhow::Result<()> {
        wait_for("the containers to be healthy", HEALTHY, async || {
            let mut unhealthy = Vec::new();
            for &(service, count) in services {
                let ids = self.containers(service)?;
                if ids.len() != count {
                    unhealthy.push(format!("{service}: {} of {count} containers", ids.len()));
                    continue;
                }
                for id in &ids {
                    let health = docker(&[
                        "inspect",
                        "--format",
                        "{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}",
                        id,
                    ])?;
                    if health.trim() != "running/healthy" {
                        unhealthy.push(format!("{service}: {}", health.trim()));
                    }
                }
            }
            Ok(if unhealthy.is_empty() {
                Progress::Done(())
            } else {
                Progress::Waiting(unhealthy.join(", "))
            })
        })
        .await
    }

    /// The whole stack at its starting size.
    fn every_service() -> Vec<(&'static str, usize)> {
        let mut all: Vec<(&str, usize)> = ETCD.iter().map(|m| (*m, 1)).collect();
        all.extend(
            [
                "api-gateway-1",
                "api-gateway-2",
                "eval-broker-1",
                "eval-broker-2",
                "plan-applier-1",
                "plan-applier-2",
                "deployment-watcher-1",
                "deployment-watcher-2",
                "client-1",
                "client-2",
                "client-sim",
            ]
            .map(|s| (s, 1)),
        );
        all.push(("scheduler-worker", 3));
        all
    }

    /// The cluster's state, read through the etcd members' published ports.
    async fn state(&self) -> anyhow::Result<ClusterState> {
        let mut endpoints = Vec::new();
        for member in ETCD {
            // A member that is down has no published port: use the others.
            if let Ok(out) = self.compose_run(&["port", member, "2379"]) {
                let addr = out.trim();
                if !addr.is_empty() {
                    endpoints.push(format!("http://{addr}"));
                }
            }
        }
        anyhow::ensure!(!endpoints.is_empty(), "no etcd member publishes its port");
        let store: Arc<dyn Store> =
            Arc::new(EtcdStore::connect_with(EtcdConfig::new(&endpoints)).await?);
        Ok(ClusterState::new(store, Keyspace::new(PREFIX)))
    }

    /// The compose service of the etcd leader, asked of a running member.
    fn etcd_leader(&self, ask: &str) -> anyhow::Result<String> {
        let endpoints = ETCD.map(|m| format!("http://{m}:2379")).join(",");
        let out = docker(&[
            "exec",
            &self.container(ask)?,
            "etcdctl",
            &format!("--endpoints={endpoints}"),
            "--command-timeout=3s",
            "endpoint",
            "status",
            "-w",
            "json",
        ])?;
        let statuses: Value = serde_json::from_str(&out).context("etcdctl's JSON")?;
        for s in statuses.as_array().context("a list of statuses")? {
            let status = &s["Status"];
            if status["header"]["member_id"].as_u64().is_some()
                && status["header"]["member_id"] == status["leader"]
            {
                let endpoint = s["Endpoint"].as_str().unwrap_or_default();
                if let Some(member) = ETCD.iter().find(|m| endpoint.contains(*m)) {
                    return Ok((*member).to_string());
                }
            }
        }
        anyhow::bail!("no member is its own leader: {out}")
    }

    /// The network the stack's containers share.
    fn network(&self, container: &str) -> anyhow::Result<String> {
        let out = docker(&[
            "inspect",
            "--format",
            "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}",
            container,
        ])?;
        out.split_whitespace()
            .next()
            .map(String::from)
            .context("the container is on no network")
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Ok(logs) = self.compose_run(&["logs", "--no-color", "--tail=25"])
        {
            eprintln!("--- the stack's last logs ---\n{logs}");
        }
        self.step("compose down -v");
        if let Err(err) = self.compose_run(&["down", "-v", "--remove-orphans", "--timeout", "10"]) {
            eprintln!("compose down failed: {err:#}");
        }
    }
}

/// `docker-compose` when installed, else Compose v2's `docker compose`.
fn compose_command() -> Vec<String> {
    let v1 = Command::new("docker-compose")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if v1 {
        vec!["docker-compose".into()]
    } else {
        vec!["docker".into(), "compose".into()]
    }
}

/// Runs `docker` with `args`; its standard output.
fn docker(args: &[&str]) -> anyhow::Result<String> {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    run(cmd)
}

/// Runs `cmd` to completion; its standard output, or an error with its
/// standard error.
fn run(mut cmd: Command) -> anyhow::Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("running {shown}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A loopback port nobody listens on.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The real nodes' names start with this (client-1, client-2), the
/// simulated ones' with `sim-`.
const REAL: &str = "client-";
const SIMULATED: &str = "sim-";

/// Waits until `count` of `job`'s allocations that are meant to run have
/// client status `status` on a node whose name starts with `nodes`, and no
/// other of its allocations is live (pending or running). Allocations that
/// were replaced (their node missed heartbeats while etcd failed over, say)
/// may stay behind, stopped: the invariants from etcd check none of them
/// shares a name with a live one.
async fn wait_allocs(
    http: &HttpApi,
    job: &str,
    count: usize,
    status: &str,
    nodes: &str,
) -> anyhow::Result<()> {
    let path = format!("/v1/job/{job}/allocations");
    let what = format!("{count} allocations of {job} {status} on {nodes}* nodes");
    wait_for(&what, JOB, async || {
        let allocs = http.get_json(&path).await?;
        let list = allocs.as_array().cloned().unwrap_or_default();
        let meant = |a: &&Value| field(a, "DesiredStatus") == "run";
        let matching = list
            .iter()
            .filter(meant)
            .filter(|a| {
                field(a, "ClientStatus") == status && field(a, "NodeName").starts_with(nodes)
            })
            .count();
        let live = list
            .iter()
            .filter(|a| matches!(field(a, "ClientStatus"), "pending" | "running"))
            .count();
        let live_wanted = if status == "running" { count } else { 0 };
        Ok(if matching == count && live == live_wanted {
            Progress::Done(())
        } else {
            let seen: Vec<String> = list
                .iter()
                .map(|a| {
                    let (name, node) = (field(a, "Name"), field(a, "NodeName"));
                    let desired = field(a, "DesiredStatus");
                    format!("{name}@{node}:{desired}/{}", field(a, "ClientStatus"))
                })
                .collect();
            Progress::Waiting(format!("{seen:?}"))
        })
    })
    .await
}

/// Registers `job` (Nomad's JSON) through the HTTP API, retrying while the
/// gateway cannot write (its store is failing over).
async fn register(http: &HttpApi, job: &Value) -> anyhow::Result<()> {
    wait_for("the job to be registered", JOB, async || {
        let reply = http.put_json("/v1/jobs", job).await?;
        Ok(if reply.status == 200 {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("HTTP {}: {}", reply.status, reply.text()))
        })
    })
    .await
}

/// A batch job of one raw_exec task that prints a line and exits, run to
/// completion.
async fn run_batch(stack: &Stack, http: &HttpApi, id: &str) -> anyhow::Result<()> {
    let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(&format!("echo {id} ran")));
    job["Job"]["Type"] = "batch".into();
    register(http, &job).await?;
    wait_allocs(http, id, 1, "complete", REAL).await?;
    stack.step(&format!("batch job {id} complete"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Docker and the images of scripts/images: run by scripts/compose-test"]
async fn the_compose_stack_runs_jobs_while_its_parts_die() {
    let stack = Stack::up().expect("compose up");
    stack
        .wait_healthy(&Stack::every_service())
        .await
        .expect("the stack to come up healthy");
    stack.step("every container healthy");
    let http = HttpApi::new(stack.http);
    wait_for("102 ready nodes", HEALTHY, async || {
        let nodes = http.get_json("/v1/nodes").await?;
        let ready = nodes.as_array().map_or(0, |n| {
            n.iter().filter(|n| field(n, "Status") == "ready").count()
        });
        Ok(if ready == 102 {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{ready} ready"))
        })
    })
    .await
    .expect("two real and 100 simulated nodes");
    stack.step("102 nodes ready (2 real, 100 simulated)");

    // Nomad Variables work: the gateways share the stack's key.
    let var = serde_json::json!({"Items": {"greeting": "hello"}});
    http.put_json("/v1/var/compose/check", &var)
        .await
        .and_then(|reply| reply.ok_json())
        .expect("a variable written");
    let read = http.get_json("/v1/var/compose/check").await.unwrap();
    assert_eq!(read["Items"]["greeting"], "hello", "{read}");
    stack.step("a Nomad Variable written and read back");

    // A service job on the real nodes, one across the simulated ones (their
    // node pool), and a batch job.
    let web = jobs::service_job(
        "web",
        2,
        jobs::raw_exec_task("while true; do echo serving; sleep 5; done"),
    );
    register(&http, &web).await.unwrap();
    wait_allocs(&http, "web", 2, "running", REAL).await.unwrap();
    stack.step("service job web: 2 raw_exec allocations running");
    // The simulated nodes' pool, written as an operator would (a job in a
    // pool that does not exist is refused; one that nodes registered into
    // exists already, but that gateway's cache may not have them yet).
    let pool = http
        .put_json(
            "/v1/node/pool/simulated",
            &serde_json::json!({"Name": "simulated"}),
        )
        .await
        .expect("the simulated node pool written");
    assert!((200..300).contains(&pool.status), "{}", pool.text());
    let mut fleet = jobs::service_job("fleet", 100, jobs::mock_task(100, 64));
    fleet["Job"]["NodePool"] = "simulated".into();
    register(&http, &fleet).await.unwrap();
    wait_allocs(&http, "fleet", 100, "running", SIMULATED)
        .await
        .unwrap();
    stack.step("service job fleet: 100 mock allocations running");
    run_batch(&stack, &http, "batch-start").await.unwrap();

    // The eval-broker leader's container dies.
    let state = stack
        .state()
        .await
        .expect("etcd through its published ports");
    let leader = state
        .leader("eval-broker")
        .await
        .unwrap()
        .expect("an eval-broker leader");
    let service = leader.split(':').next().unwrap_or_default().to_string();
    let container = stack.container(&service).unwrap();
    docker(&["kill", &container]).unwrap();
    stack.step(&format!("killed the eval-broker leader {service}"));
    let next = wait_for("another eval-broker leader", FAILOVER, async || {
        Ok(match state.leader("eval-broker").await? {
            Some(l) if l != leader => Progress::Done(l),
            other => Progress::Waiting(format!("{other:?}")),
        })
    })
    .await
    .unwrap();
    stack.step(&format!("eval-broker leader now {next}"));
    run_batch(&stack, &http, "batch-broker-killed")
        .await
        .unwrap();
    docker(&["start", &container]).unwrap();
    stack.wait_healthy(&[(service.as_str(), 1)]).await.unwrap();
    stack.step(&format!("{service} back and healthy"));

    // The etcd leader's container dies.
    let etcd_leader = stack.etcd_leader("etcd-1").unwrap();
    let container = stack.container(&etcd_leader).unwrap();
    docker(&["kill", &container]).unwrap();
    stack.step(&format!("killed the etcd leader {etcd_leader}"));
    run_batch(&stack, &http, "batch-etcd-killed").await.unwrap();
    docker(&["start", &container]).unwrap();
    stack
        .wait_healthy(&[(etcd_leader.as_str(), 1)])
        .await
        .unwrap();
    stack.step(&format!("{etcd_leader} back and healthy"));

    // Workers scaled up, then down.
    for replicas in [5, 2] {
        stack
            .compose_run(&[
                "up",
                "-d",
                "--no-deps",
                "--scale",
                &format!("scheduler-worker={replicas}"),
                "scheduler-worker",
            ])
            .unwrap();
        stack
            .wait_healthy(&[("scheduler-worker", replicas)])
            .await
            .unwrap();
        stack.step(&format!("scheduler-worker scaled to {replicas}"));
        run_batch(&stack, &http, &format!("batch-workers-{replicas}"))
            .await
            .unwrap();
    }

    // One etcd member cut off the network, then reconnected.
    let leader_now = stack.etcd_leader("etcd-1").unwrap();
    let cut = ETCD
        .iter()
        .find(|m| **m != leader_now)
        .copied()
        .unwrap_or("etcd-3");
    let container = stack.container(cut).unwrap();
    let network = stack.network(&container).unwrap();
    docker(&["network", "disconnect", &network, &container]).unwrap();
    stack.step(&format!("disconnected {cut} from {network}"));
    run_batch(&stack, &http, "batch-etcd-cut").await.unwrap();
    docker(&["network", "connect", "--alias", cut, &network, &container]).unwrap();
    stack.wait_healthy(&[(cut, 1)]).await.unwrap();
    stack.step(&format!("reconnected {cut}"));
    run_batch(&stack, &http, "batch-etcd-back").await.unwrap();

    // The invariants, from etcd.
    wait_allocs(&http, "web", 2, "running", REAL).await.unwrap();
    wait_allocs(&http, "fleet", 100, "running", SIMULATED)
        .await
        .unwrap();
    let state = stack
        .state()
        .await
        .expect("etcd through its published ports");
    let evals = wait_for("every eval to settle", JOB, async || {
        let evals = state.evals().await?;
        Ok(if evals_settled(&evals) {
            Progress::Done(evals)
        } else {
            Progress::Waiting(format!("{:?}", eval_histogram(&evals)))
        })
    })
    .await
    .expect("no lost eval");
    let nodes = state.nodes().await.unwrap();
    let allocs = state.allocs().await.unwrap();
    let over = overcommitted_nodes(&nodes, &allocs);
    assert!(over.is_empty(), "over-committed nodes: {over:?}");
    let dups = duplicated_allocs(&allocs);
    assert!(dups.is_empty(), "duplicated allocation names: {dups:?}");
    stack.step(&format!(
        "invariants hold: {} nodes, allocs {:?}, evals {:?}",
        nodes.len(),
        alloc_histogram(&allocs),
        eval_histogram(&evals)
    ));
}
