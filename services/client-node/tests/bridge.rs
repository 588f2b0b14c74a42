//! `network { mode = "bridge" }` under the real client binary, as root with
//! the CNI plugins installed (failing elsewhere, naming what is missing): two groups both bind port
//! 8080 in their own namespaces and are reached at their own host ports,
//! sibling tasks reach each other over localhost, and neither a stop nor a
//! client killed mid-alloc leaves a namespace, veth or iptables rule behind.
//! All traffic is between this host and the `nomad` bridge.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "bridge/names.rs"]
mod names;

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_client_node::network::{DEFAULT_PLUGIN_DIR, Networks};
use caravan_proto::{
    AllocClientStatus, AllocatedPort, AllocatedSharedResources, Allocation, Job, JobType,
    NetworkResource, Port,
};
use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Serves `$NOMAD_TASK_DIR` (holding `id.txt`, the alloc's name) on 8080.
const SERVE: &str = "cd \"$NOMAD_TASK_DIR\" && echo \"$NOMAD_ALLOC_NAME\" > id.txt && \
                     env | grep '^NOMAD_' | sort > \"$NOMAD_ALLOC_DIR/env\" && \
                     exec python3 -m http.server 8080";

/// Fetches the sibling's `id.txt` over localhost into `$NOMAD_ALLOC_DIR/sibling`.
const FETCH: &str = r#"
import os, time, urllib.request
for _ in range(300):
    try:
        body = urllib.request.urlopen('http://localhost:8080/id.txt', timeout=1).read()
        open(os.environ['NOMAD_ALLOC_DIR'] + '/sibling', 'wb').write(body)
        break
    except Exception:
        time.sleep(0.1)
while True:
    time.sleep(1)
"#;

fn ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let plugins = ["bridge", "portmap", "firewall", "loopback", "host-local"]
        .iter()
        .all(|p| Path::new("/usr/lib/cni").join(p).is_file());
    let tools = which("python3") && which("iptables-save") && which("ip");
    assert!(
        root && plugins && tools,
        "needs root, the CNI plugins in /usr/lib/cni, python3, iptables and ip \
         (scripts/lib.sh installs them; CI runs as root)"
    );
    true
}

fn which(bin: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Lines of `iptables-save` that name `id` (CNI tags its rules with the
/// container id, the alloc's id here).
fn rules_naming(id: &str) -> usize {
    let out = std::process::Command::new("iptables-save")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(id))
        .count()
}

/// The host ends of veths on the `nomad` bridge.
fn bridge_veths() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show", "master", "nomad"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or_default().to_string())
        .collect()
}

/// The host end of the veth whose other end is `eth0` in the namespace
/// pinned at `netns` (`ip` prints that end as `eth0@if<host index>`).
fn veth_of(netns: &Path) -> Option<String> {
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(["ip", "-o", "link", "show", "eth0"])
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let index = line
        .split("@if")
        .nth(1)?
        .split(':')
        .next()?
        .trim()
        .to_string();
    let out = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(index.as_str()))
        .and_then(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or_default().to_string())
        .filter(|n| n.starts_with("veth"))
}

/// GETs `path` from `addr`; the body, if it answered 200.
fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    // python's http.server answers HTTP/1.0, busybox's httpd HTTP/1.1.
    (head.starts_with("HTTP/1.") && head.split(' ').nth(1) == Some("200"))
        .then(|| body.trim().to_string())
}

/// A host port nothing listens on.
fn free_port() -> u32 {
    loop {
        let p = 28000 + rand::random::<u32>() % 3000;
        if std::net::TcpListener::bind(("0.0.0.0", p as u16)).is_ok() {
            return p;
        }
    }
}

/// A bridge-mode job: an `http` port mapped from `host_port` to 8080, a web
/// task serving it and, with `sibling`, a task fetching it over localhost.
fn bridge_job(id: &str, sibling: bool) -> Job {
    let mut tasks = vec![sh_task("web", SERVE)];
    if sibling {
        tasks.push(task(
            "fetch",
            "raw_exec",
            vec![("command", s("python3")), ("args", list(&["-c", FETCH]))],
        ));
    }
    let mut j = job(id, JobType::Service, tasks);
    j.task_groups[0].networks = vec![NetworkResource {
        mode: "bridge".into(),
        dynamic_ports: vec![Port {
            label: "http".into(),
            to: 8080,
            ..Default::default()
        }],
        ..Default::default()
    }];
    j
}

fn bridge_alloc(job: &Job, host_port: u32) -> Allocation {
    let mut a = alloc(job, 0);
    if let Some(r) = a.allocated_resources.as_mut() {
        r.shared = Some(AllocatedSharedResources {
            ports: vec![AllocatedPort {
                label: "http".into(),
                value: host_port,
                to: 8080,
                host_ip: "127.0.0.1".into(),
            }],
            networks: job.task_groups[0].networks.clone(),
            ..Default::default()
        });
    }
    a
}

struct Scene {
    fake: FakeGateway,
    stop_fake: CancellationToken,
    gateway: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

/// A client-node process (the real binary) serving the scene's fake gateway.
struct ClientProcess(std::process::Child);

impl ClientProcess {
    /// SIGKILL: no shutdown, no cleanup.
    fn kill9(mut self) {
        kill(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL).unwrap();
        self.0.wait().unwrap();
    }

    /// SIGTERM, and wait for it to end.
    fn terminate(mut self) {
        kill(Pid::from_raw(self.0.id() as i32), Signal::SIGTERM).unwrap();
        self.0.wait().unwrap();
    }
}

/// A test that fails half way leaves no namespace, task or rule behind: the
/// processes in its allocs' namespaces are killed and the namespaces torn
/// down with the client's own code.
impl Drop for Scene {
    fn drop(&mut self) {
        let networks = Networks::new(self.dir.path(), DEFAULT_PLUGIN_DIR);
        for alloc in networks.allocs() {
            let netns = self.dir.path().join("netns").join(&alloc);
            if let Ok(ns) = std::fs::metadata(&netns) {
                kill_processes_in(ns.ino());
            }
            if let Err(e) = networks.teardown(&alloc) {
                eprintln!("cleanup of {alloc}: {e}");
            }
            // The containers of a docker test's alloc (infra included).
            for name in containers_of(&alloc) {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", &name])
                    .output();
            }
        }
    }
}

/// SIGKILLs every process whose network namespace has inode `ino`.
fn kill_processes_in(ino: u64) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if std::fs::metadata(p.path().join("ns/net")).is_ok_and(|m| m.ino() == ino) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Scene {
    async fn new() -> Scene {
        let stop_fake = CancellationToken::new();
        let fake = FakeGateway::new(Duration::from_secs(5));
        let gateway = fake.serve(stop_fake.clone()).await;
        Scene {
            fake,
            stop_fake,
            gateway,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn spawn_client(&self) -> ClientProcess {
        let conf = self.dir.path().join("client.toml");
        std::fs::write(
            &conf,
            format!(
                "servers = [\"{}\"]\ngrpc_addr = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\
                 name = \"test-node\"\ncpu_total_mhz = 4000\nmemory_mb = 8192\n\
                 disk_mb = 10000\ndrivers = [\"raw_exec\"]\nupdate_interval_ms = 50\n\
                 stop_tasks_on_shutdown = false\n",
                self.gateway,
                self.dir.path().display()
            ),
        )
        .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("client.log"))
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_caravan-client-node"))
            .arg("-c")
            .arg(&conf)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        ClientProcess(child)
    }

    async fn registered_node(&self) -> String {
        until("node registered", WAIT, || {
            !self.fake.seen.lock().registrations.is_empty()
        })
        .await;
        self.fake.seen.lock().registrations[0].id.clone()
    }

    fn netns(&self, a: &Allocation) -> PathBuf {
        self.dir.path().join("netns").join(&a.id)
    }

    fn alloc_dir(&self, a: &Allocation) -> PathBuf {
        self.dir.path().join("allocs").join(&a.id)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("client.log")).unwrap_or_default()
    }

    async fn running(&self, a: &Allocation) {
        let ok = caravan_testkit::wait::holds_within(WAIT, || {
            std::future::ready(self.fake.status(&a.id) == Some(AllocClientStatus::Running))
        })
        .await;
        assert!(
            ok,
            "alloc {} not running: {:?}\n{}",
            a.id,
            self.fake.update(&a.id),
            self.log()
        );
    }

    /// No namespace file, no veth, no iptables rule left for `a`.
    async fn nothing_left(&self, a: &Allocation, veth: &str) {
        until("the alloc's network is torn down", WAIT, || {
            !self.netns(a).exists()
                && rules_naming(&a.id) == 0
                && !bridge_veths().iter().any(|v| v == veth)
        })
        .await;
        assert!(
            !self
                .dir
                .path()
                .join("netns")
                .join(format!("{}.json", a.id))
                .exists()
        );
        eprintln!(
            "after teardown of {}: netns file {}, veth {veth} present {}, iptables rules naming it {}",
            a.id,
            self.netns(a).exists(),
            bridge_veths().iter().any(|v| v == veth),
            rules_naming(&a.id)
        );
    }
}

#[tokio::test]
async fn two_bridge_groups_bind_the_same_port_and_leave_nothing_behind() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let client = scene.spawn_client();
    let node_id = scene.registered_node().await;
    let node = scene.fake.seen.lock().registrations[0].clone();
    let modes: Vec<String> = node
        .resources
        .iter()
        .flat_map(|r| r.networks.iter().map(|n| n.mode.clone()))
        .collect();
    assert!(
        modes.iter().any(|m| m == "bridge"),
        "fingerprinted: {modes:?}"
    );

    let (port_a, port_b) = (free_port(), free_port());
    let (job_a, job_b) = (bridge_job("web-a", true), bridge_job("web-b", false));
    let (a, b) = (bridge_alloc(&job_a, port_a), bridge_alloc(&job_b, port_b));
    scene.fake.push(
        &node_id,
        vec![a.clone(), b.clone()],
        vec![job_a.clone(), job_b.clone()],
    );
    scene.running(&a).await;
    scene.running(&b).await;

    // Both serve 8080 inside; each is reached at its own host port, over
    // 127.0.0.1 (portmap's SNAT and route_localnet).
    let at = |p: u32| format!("127.0.0.1:{p}");
    until("a answers on its host port", WAIT, || {
        get(&at(port_a), "/id.txt").is_some()
    })
    .await;
    until("b answers on its host port", WAIT, || {
        get(&at(port_b), "/id.txt").is_some()
    })
    .await;
    assert_eq!(get(&at(port_a), "/id.txt").unwrap(), a.name);
    assert_eq!(get(&at(port_b), "/id.txt").unwrap(), b.name);
    // Not on the host's own 8080: nothing leaked into the host namespace.
    assert_ne!(
        get("127.0.0.1:8080", "/id.txt").as_deref(),
        Some(a.name.as_str())
    );

    // The sibling task reached the web task over localhost.
    let sibling = scene.alloc_dir(&a).join("alloc/sibling");
    let fetched = caravan_testkit::wait::holds_within(WAIT, || {
        std::future::ready(std::fs::read_to_string(&sibling).is_ok_and(|s| s.trim() == a.name))
    })
    .await;
    let logs = scene.alloc_dir(&a).join("alloc/logs");
    assert!(
        fetched,
        "the sibling did not fetch over localhost: {:?} {:?} {:?}",
        std::fs::read_to_string(logs.join("fetch.stderr.0")),
        std::fs::read_to_string(logs.join("web.stderr.0")),
        scene.fake.update(&a.id).map(|u| u.task_states)
    );

    // The environment names the alloc's address and both ports.
    let env = std::fs::read_to_string(scene.alloc_dir(&a).join("alloc/env")).unwrap();
    let var = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(var("NOMAD_ALLOC_IP_http").starts_with("172.26."), "{env}");
    assert_eq!(var("NOMAD_ALLOC_PORT_http"), "8080");
    assert_eq!(var("NOMAD_PORT_http"), "8080");
    assert_eq!(var("NOMAD_HOST_PORT_http"), port_a.to_string());
    assert_eq!(var("NOMAD_ADDR_http"), format!("127.0.0.1:{port_a}"));
    assert_eq!(
        var("NOMAD_ALLOC_ADDR_http"),
        format!("{}:8080", var("NOMAD_ALLOC_IP_http"))
    );

    let (veth_a, veth_b) = (
        veth_of(&scene.netns(&a)).unwrap(),
        veth_of(&scene.netns(&b)).unwrap(),
    );
    assert!(bridge_veths().contains(&veth_a) && bridge_veths().contains(&veth_b));
    assert!(rules_naming(&a.id) > 0 && rules_naming(&b.id) > 0);

    // Stopping a tears down its network at once; b stays up.
    scene.fake.push(
        &node_id,
        vec![stopped(a.clone()), b.clone()],
        vec![job_a.clone(), job_b.clone()],
    );
    until("a complete", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    scene.nothing_left(&a, &veth_a).await;
    assert!(get(&at(port_a), "/id.txt").is_none());
    assert_eq!(get(&at(port_b), "/id.txt").unwrap(), b.name);

    // b is garbage collected (gone from the node's set) without a stop first.
    scene.fake.push(&node_id, vec![], vec![]);
    scene.nothing_left(&b, &veth_b).await;
    client.terminate();
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn a_client_killed_mid_alloc_cleans_up_after_its_restart() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let first = scene.spawn_client();
    let node_id = scene.registered_node().await;
    let port = free_port();
    let (job_a, job_b) = (bridge_job("kept", false), bridge_job("gone", false));
    let (a, b) = (
        bridge_alloc(&job_a, port),
        bridge_alloc(&job_b, free_port()),
    );
    scene.fake.push(
        &node_id,
        vec![a.clone(), b.clone()],
        vec![job_a.clone(), job_b.clone()],
    );
    scene.running(&a).await;
    scene.running(&b).await;
    until("a answers", WAIT, || {
        get(&format!("127.0.0.1:{port}"), "/id.txt").is_some()
    })
    .await;
    let (veth_a, veth_b) = (
        veth_of(&scene.netns(&a)).unwrap(),
        veth_of(&scene.netns(&b)).unwrap(),
    );
    first.kill9();

    // While the client is down: a is still served, b is removed by the servers.
    assert_eq!(
        get(&format!("127.0.0.1:{port}"), "/id.txt").unwrap(),
        a.name
    );
    scene
        .fake
        .push(&node_id, vec![a.clone()], vec![job_a.clone()]);
    let second = scene.spawn_client();
    // b's namespace belongs to no alloc the client runs: swept.
    scene.nothing_left(&b, &veth_b).await;
    scene.running(&a).await;
    assert_eq!(
        get(&format!("127.0.0.1:{port}"), "/id.txt").unwrap(),
        a.name,
        "the kept alloc's network survived the restart"
    );

    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![job_a.clone()]);
    until("a complete", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    scene.nothing_left(&a, &veth_a).await;
    second.terminate();
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn an_exec_task_runs_in_the_group_namespace() {
    if !ready() {
        return;
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_caravan-client-node"));
    let fp = caravan_client_node::driver::Driver::fingerprint(
        &caravan_client_node::driver::ExecDriver::new(bin, &Default::default()),
    )
    .await;
    if !fp.detected() {
        eprintln!("skipped: exec driver not detected here: {}", fp.description);
        return;
    }
    let scene = Scene::new().await;
    let mut conf = config(scene.gateway, scene.dir.path());
    conf.drivers = vec!["exec".into()];
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let mut t = sh_task(
        "isolated",
        "cat /proc/net/dev > /alloc/netdev; while true; do sleep 1; done",
    );
    t.driver = "exec".into();
    let mut j = bridge_job("exec-bridge", false);
    j.task_groups[0].tasks = vec![t];
    let a = bridge_alloc(&j, free_port());
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    scene.running(&a).await;
    let netdev = scene.alloc_dir(&a).join("alloc/netdev");
    until("the task listed its interfaces", WAIT, || {
        std::fs::read_to_string(&netdev).is_ok_and(|s| s.contains("lo:"))
    })
    .await;
    let seen = std::fs::read_to_string(&netdev).unwrap();
    let links: Vec<&str> = seen
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(links.len(), 2, "loopback and eth0 only: {seen}");
    assert!(links.contains(&"eth0") && links.contains(&"lo"), "{seen}");
    let veth = veth_of(&scene.netns(&a)).unwrap();
    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![j.clone()]);
    until("complete after the stop", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    scene.nothing_left(&a, &veth).await;
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

/// Serves `id.txt` (the alloc's name) on 8080 with busybox's httpd.
const DOCKER_SERVE: &str = "mkdir -p /tmp/www && echo \"$NOMAD_ALLOC_NAME\" > /tmp/www/id.txt && \
                            exec httpd -f -p 8080 -h /tmp/www";

/// Containers on this host labelled for alloc `id` (none without docker).
fn containers_of(id: &str) -> Vec<String> {
    let Ok(out) = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("label=com.hashicorp.nomad.alloc_id={id}"),
        ])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A client running raw_exec and docker, with `infra_image`.
async fn docker_client(scene: &Scene, infra_image: &str) -> (Client, CancellationToken) {
    assert!(
        which("docker"),
        "needs docker and scripts/test-images (busybox:1, caravan/pause:1)"
    );
    let mut conf = config(scene.gateway, scene.dir.path());
    conf.drivers = vec!["raw_exec".into(), "docker".into()];
    conf.plugin.docker.infra_image = infra_image.into();
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    (client, shutdown)
}

/// A bridge job whose `web` task is a busybox:1 container serving 8080 and
/// whose raw_exec `fetch` task reads it over localhost.
fn docker_bridge_job(id: &str) -> Job {
    let mut j = bridge_job(id, true);
    j.task_groups[0].tasks[0] = task(
        "web",
        "docker",
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            ("args", list(&["-c", DOCKER_SERVE])),
        ],
    );
    j
}

#[tokio::test]
async fn a_docker_task_in_a_bridge_group_shares_the_infra_containers_namespace() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let (client, shutdown) = docker_client(&scene, "caravan/pause:1").await;
    let node_id = client.ready.node_ids[0].clone();
    let port = free_port();
    let j = docker_bridge_job("docker-bridge");
    let a = bridge_alloc(&j, port);
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    scene.running(&a).await;

    // Reached at its host port, through the infra container's namespace.
    let addr = format!("127.0.0.1:{port}");
    until("the container answers on its host port", WAIT, || {
        get(&addr, "/id.txt").is_some()
    })
    .await;
    assert_eq!(get(&addr, "/id.txt").unwrap(), a.name);
    let names = containers_of(&a.id);
    assert!(
        names.contains(&format!("nomad_init_{}", a.id)),
        "the infra container is there: {names:?}"
    );

    // The raw_exec sibling reached the container over localhost.
    let sibling = scene.alloc_dir(&a).join("alloc/sibling");
    let fetched = caravan_testkit::wait::holds_within(WAIT, || {
        std::future::ready(std::fs::read_to_string(&sibling).is_ok_and(|s| s.trim() == a.name))
    })
    .await;
    assert!(
        fetched,
        "the sibling did not fetch over localhost: {:?}",
        scene.fake.update(&a.id).map(|u| u.task_states)
    );
    let veth = veth_of(&scene.netns(&a)).unwrap();

    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![j.clone()]);
    until("complete after the stop", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    scene.nothing_left(&a, &veth).await;
    until("no container of the alloc is left", WAIT, || {
        !containers_of(&a.id)
            .iter()
            .any(|n| n.starts_with("nomad_init_"))
    })
    .await;
    assert!(get(&addr, "/id.txt").is_none());
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn a_missing_infra_image_fails_setup_and_nothing_runs() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let (client, shutdown) = docker_client(&scene, "caravan/no-such-pause:0").await;
    let node_id = client.ready.node_ids[0].clone();
    let j = docker_bridge_job("docker-no-infra");
    let a = bridge_alloc(&j, free_port());
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    until("alloc failed", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Failed)
    })
    .await;
    let u = scene.fake.update(&a.id).unwrap();
    for name in ["web", "fetch"] {
        let state = &u.task_states[name];
        let setup = state
            .events
            .iter()
            .find(|e| e.r#type == "Setup Failure")
            .unwrap_or_else(|| panic!("{name}: {state:?}"));
        assert!(
            setup
                .message
                .contains("infra_image \"caravan/no-such-pause:0\" is not on this node"),
            "{setup:?}"
        );
        assert!(
            !state.events.iter().any(|e| e.r#type == "Started"),
            "{state:?}"
        );
    }
    assert!(!scene.netns(&a).exists());
    assert!(containers_of(&a.id).is_empty());
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn a_none_group_has_loopback_alone() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let shutdown = CancellationToken::new();
    let client = start(config(scene.gateway, scene.dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let mut j = job(
        "isolated",
        JobType::Service,
        vec![sh_task(
            "t",
            "cat /proc/net/dev > $NOMAD_ALLOC_DIR/netdev; sleep 30",
        )],
    );
    j.task_groups[0].networks = vec![NetworkResource {
        mode: "none".into(),
        ..Default::default()
    }];
    let a = alloc(&j, 0);
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    scene.running(&a).await;
    let netdev = scene.alloc_dir(&a).join("alloc/netdev");
    until("the task listed its interfaces", WAIT, || {
        std::fs::read_to_string(&netdev).is_ok_and(|s| s.contains("lo:"))
    })
    .await;
    let seen = std::fs::read_to_string(&netdev).unwrap();
    let links: Vec<&str> = seen
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(links, ["lo"], "{seen}");
    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![j.clone()]);
    until("the namespace is gone after the stop", WAIT, || {
        !scene.netns(&a).exists()
    })
    .await;
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}
