//! The compose stack of the tests: `compose up` of docker-compose.yml with
//! the test's overlay (and docker/server.yml for the server layout), waits
//! on its containers, its state read from etcd, and its removal.

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
pub(crate) const HEALTHY: Duration = Duration::from_secs(180);
/// Longest wait for a job to reach the state it should.
pub(crate) const JOB: Duration = Duration::from_secs(120);
/// Longest wait for a leader-elected service to elect another leader (its
/// lease is 10 s).
pub(crate) const FAILOVER: Duration = Duration::from_secs(60);
/// Every etcd member of the stack.
pub(crate) const ETCD: [&str; 3] = ["etcd-1", "etcd-2", "etcd-3"];
/// The stack's state prefix (docker/config/*.toml).
pub(crate) const PREFIX: &str = "/caravan";

/// Which control plane the stack runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// docker-compose.yml as it is: a container per service replica.
    Separate,
    /// With docker/server.yml: two `caravan server` containers instead of
    /// the eval-broker, plan-applier, deployment-watcher and
    /// scheduler-worker containers.
    Server,
}

impl Layout {
    /// The compose files added to docker-compose.yml and the test's overlay.
    fn files(self) -> &'static [&'static str] {
        match self {
            Layout::Separate => &[],
            Layout::Server => &["docker/server.yml"],
        }
    }

    /// Appended to the project's name, so the two never share containers.
    fn project_suffix(self) -> &'static str {
        match self {
            Layout::Separate => "",
            Layout::Server => "-server",
        }
    }
}

/// A compose project made from the root's docker-compose.yml and the test's
/// overlay (etcd's client ports published on loopback), removed with its
/// volumes when dropped. Named by `CARAVAN_COMPOSE_PROJECT`, else after the
/// test's process; its images' tag is `CARAVAN_TAG` (default `latest`).
pub(crate) struct Stack {
    project: String,
    layout: Layout,
    root: PathBuf,
    compose: Vec<String>,
    env: Vec<(String, String)>,
    pub(crate) http: SocketAddr,
    started: Instant,
}

impl Stack {
    /// `compose up -d` of a new project in `layout` on free loopback ports.
    pub(crate) fn up(layout: Layout) -> anyhow::Result<Stack> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the workspace root")?
            .to_path_buf();
        let http_port = free_port()?;
        let grpc_port = free_port()?;
        let tag = std::env::var("CARAVAN_TAG").unwrap_or_else(|_| "latest".into());
        let stack = Stack {
            project: format!(
                "{}{}",
                std::env::var("CARAVAN_COMPOSE_PROJECT")
                    .unwrap_or_else(|_| format!("caravan-test-{}", std::process::id())),
                layout.project_suffix()
            ),
            layout,
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
    pub(crate) fn step(&self, what: &str) {
        eprintln!(
            "[compose-test {:>6.1}s] {what}",
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Runs compose on the project with `args`; its standard output.
    pub(crate) fn compose_run(&self, args: &[&str]) -> anyhow::Result<String> {
        let (program, first) = self.compose.split_first().context("no compose command")?;
        let mut cmd = Command::new(program);
        cmd.args(first)
            .current_dir(&self.root)
            .args(["-p", &self.project])
            .args(["-f", "docker-compose.yml"])
            .args(["-f", "integration-tests/compose/test.yml"])
            .args(self.layout.files().iter().flat_map(|f| ["-f", f]))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        run(cmd)
    }

    /// The containers of a compose service, running or not.
    pub(crate) fn containers(&self, service: &str) -> anyhow::Result<Vec<String>> {
        Ok(self
            .compose_run(&["ps", "-q", service])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// The one container of a compose service.
    pub(crate) fn container(&self, service: &str) -> anyhow::Result<String> {
        let ids = self.containers(service)?;
        match ids.as_slice() {
            [one] => Ok(one.clone()),
            _ => anyhow::bail!("{service} has {} containers: {ids:?}", ids.len()),
        }
    }

    /// Waits until every container of `services` is running and healthy,
    /// `count` of them for a scaled one.
    pub(crate) async fn wait_healthy(&self, services: &[(&str, usize)]) -> anyhow::Result<()> {
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

    /// Starts a killed `container` of compose `service` again and waits
    /// until it is healthy.
    pub(crate) async fn restart(&self, service: &str, container: &str) -> anyhow::Result<()> {
        docker(&["start", container])?;
        self.wait_healthy(&[(service, 1)]).await?;
        self.step(&format!("{service} back and healthy"));
        Ok(())
    }

    /// The whole stack at its starting size.
    pub(crate) fn every_service(&self) -> Vec<(&'static str, usize)> {
        let mut all: Vec<(&str, usize)> = ETCD.iter().map(|m| (*m, 1)).collect();
        let control: &[&'static str] = match self.layout {
            Layout::Separate => &[
                "eval-broker-1",
                "eval-broker-2",
                "plan-applier-1",
                "plan-applier-2",
                "deployment-watcher-1",
                "deployment-watcher-2",
            ],
            Layout::Server => &["server-1", "server-2"],
        };
        all.extend(["api-gateway-1", "api-gateway-2"].map(|s| (s, 1)));
        all.extend(control.iter().map(|s| (*s, 1)));
        all.extend(["client-1", "client-2", "client-sim"].map(|s| (s, 1)));
        if self.layout == Layout::Separate {
            all.push(("scheduler-worker", 3));
        }
        all
    }

    /// The cluster's state, read through the etcd members' published ports.
    pub(crate) async fn state(&self) -> anyhow::Result<ClusterState> {
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
    pub(crate) fn etcd_leader(&self, ask: &str) -> anyhow::Result<String> {
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
    pub(crate) fn network(&self, container: &str) -> anyhow::Result<String> {
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
pub(crate) fn compose_command() -> Vec<String> {
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
pub(crate) fn docker(args: &[&str]) -> anyhow::Result<String> {
    let mut cmd = Command::new("docker");
    cmd.args(args);
    run(cmd)
}

/// Runs `cmd` to completion; its standard output, or an error with its
/// standard error.
pub(crate) fn run(mut cmd: Command) -> anyhow::Result<String> {
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
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(crate) fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The real nodes' names start with this (client-1, client-2), the
/// simulated ones' with `sim-`.
pub(crate) const REAL: &str = "client-";
pub(crate) const SIMULATED: &str = "sim-";

/// Waits until `count` of `job`'s allocations that are meant to run have
/// client status `status` on a node whose name starts with `nodes`, and no
/// other of its allocations is live (pending or running). Allocations that
/// were replaced (their node missed heartbeats while etcd failed over, say)
/// may stay behind, stopped: the invariants from etcd check none of them
/// shares a name with a live one.
pub(crate) async fn wait_allocs(
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
pub(crate) async fn register(http: &HttpApi, job: &Value) -> anyhow::Result<()> {
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
pub(crate) async fn run_batch(stack: &Stack, http: &HttpApi, id: &str) -> anyhow::Result<()> {
    let mut job = jobs::service_job(id, 1, jobs::raw_exec_task(&format!("echo {id} ran")));
    job["Job"]["Type"] = "batch".into();
    register(http, &job).await?;
    wait_allocs(http, id, 1, "complete", REAL).await?;
    stack.step(&format!("batch job {id} complete"));
    Ok(())
}

/// `compose up` of `layout`, every container healthy and the 102 nodes
/// (two real, 100 simulated) ready; the stack and its HTTP API.
pub(crate) async fn up_and_ready(layout: Layout) -> anyhow::Result<(Stack, HttpApi)> {
    let stack = Stack::up(layout).context("compose up")?;
    stack
        .wait_healthy(&stack.every_service())
        .await
        .context("the stack to come up healthy")?;
    stack.step("every container healthy");
    let http = HttpApi::new(stack.http);
    wait_nodes(&stack, &http, 102)
        .await
        .context("two real and 100 simulated nodes")?;
    Ok((stack, http))
}

/// Waits until `count` nodes are ready.
pub(crate) async fn wait_nodes(stack: &Stack, http: &HttpApi, count: usize) -> anyhow::Result<()> {
    wait_for(&format!("{count} ready nodes"), HEALTHY, async || {
        let nodes = http.get_json("/v1/nodes").await?;
        let ready = nodes.as_array().map_or(0, |n| {
            n.iter().filter(|n| field(n, "Status") == "ready").count()
        });
        Ok(if ready == count {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{ready} ready"))
        })
    })
    .await?;
    stack.step(&format!("{count} nodes ready"));
    Ok(())
}

/// Kills the container whose replica leads `service` (its advertised
/// address names its compose service) and waits for another leader; the
/// compose service and container killed.
pub(crate) async fn kill_leader(stack: &Stack, service: &str) -> anyhow::Result<(String, String)> {
    let state = stack
        .state()
        .await
        .context("etcd through its published ports")?;
    let leader = state
        .leader(service)
        .await?
        .with_context(|| format!("no {service} leader"))?;
    let compose_service = leader.split(':').next().unwrap_or_default().to_string();
    let container = stack.container(&compose_service)?;
    docker(&["kill", &container])?;
    stack.step(&format!("killed the {service} leader {compose_service}"));
    let next = wait_for(&format!("another {service} leader"), FAILOVER, async || {
        Ok(match state.leader(service).await? {
            Some(l) if l != leader => Progress::Done(l),
            other => Progress::Waiting(format!("{other:?}")),
        })
    })
    .await?;
    stack.step(&format!("{service} leader now {next}"));
    Ok((compose_service, container))
}

/// The invariants, read from etcd: every evaluation settles, no node is
/// over-committed, no two live allocations share a name.
pub(crate) async fn check_invariants(stack: &Stack) -> anyhow::Result<()> {
    let state = stack
        .state()
        .await
        .context("etcd through its published ports")?;
    let evals = wait_for("every eval to settle", JOB, async || {
        let evals = state.evals().await?;
        Ok(if evals_settled(&evals) {
            Progress::Done(evals)
        } else {
            Progress::Waiting(format!("{:?}", eval_histogram(&evals)))
        })
    })
    .await
    .context("no lost eval")?;
    let nodes = state.nodes().await?;
    let allocs = state.allocs().await?;
    let over = overcommitted_nodes(&nodes, &allocs);
    anyhow::ensure!(over.is_empty(), "over-committed nodes: {over:?}");
    let dups = duplicated_allocs(&allocs);
    anyhow::ensure!(dups.is_empty(), "duplicated allocation names: {dups:?}");
    stack.step(&format!(
        "invariants hold: {} nodes, allocs {:?}, evals {:?}",
        nodes.len(),
        alloc_histogram(&allocs),
        eval_histogram(&evals)
    ));
    Ok(())
}

/// The jobs both layouts run first: a raw_exec service job on the two real
/// nodes, a mock service job of 100 across the simulated ones (in their
/// node pool, written as an operator would), and a batch job.
pub(crate) async fn run_first_jobs(stack: &Stack, http: &HttpApi) -> anyhow::Result<()> {
    let web = jobs::service_job(
        "web",
        2,
        jobs::raw_exec_task("while true; do echo serving; sleep 5; done"),
    );
    register(http, &web).await?;
    wait_allocs(http, "web", 2, "running", REAL).await?;
    stack.step("service job web: 2 raw_exec allocations running");
    // A job in a pool that does not exist is refused; one that nodes
    // registered into exists already, but that gateway's cache may not
    // have them yet.
    let pool = http
        .put_json(
            "/v1/node/pool/simulated",
            &serde_json::json!({"Name": "simulated"}),
        )
        .await
        .context("the simulated node pool written")?;
    anyhow::ensure!((200..300).contains(&pool.status), "{}", pool.text());
    let mut fleet = jobs::service_job("fleet", 100, jobs::mock_task(100, 64));
    fleet["Job"]["NodePool"] = "simulated".into();
    register(http, &fleet).await?;
    wait_allocs(http, "fleet", 100, "running", SIMULATED).await?;
    stack.step("service job fleet: 100 mock allocations running");
    run_batch(stack, http, "batch-start").await
}

/// The first jobs still run as they should.
pub(crate) async fn first_jobs_still_run(http: &HttpApi) -> anyhow::Result<()> {
    wait_allocs(http, "web", 2, "running", REAL).await?;
    wait_allocs(http, "fleet", 100, "running", SIMULATED).await
}
