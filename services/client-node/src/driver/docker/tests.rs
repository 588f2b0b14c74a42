//! The docker driver against this machine's Docker daemon and the images
//! `scripts/test-images` builds (`busybox:1`, `redis:7`). Each test runs
//! as a node of its own id, and removes every container labelled with it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_proto::{AllocatedPort, Allocation, Job, Node, Task, TaskGroup};
use nix::sys::signal::Signal;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

use super::*;
use crate::alloc_dir::{AllocDir, TaskDirs};
use crate::driver::{ExecRequest, TaskConfig, TaskResources};
use crate::task_env::TaskEnv;

/// Removes every container of the test's node, however the test ends.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label={}={}", labels::NODE_ID, self.0);
        let listed = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output();
        if let Ok(out) = listed {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", id])
                    .output();
            }
        }
    }
}

/// A test's node: its driver, data dir and cleanup.
struct Fixture {
    driver: DockerDriver,
    dir: tempfile::TempDir,
    node_id: String,
    _cleanup: Cleanup,
}

fn fixture_with(config: DockerConfig) -> Fixture {
    let node_id = uuid::Uuid::new_v4().to_string();
    let ctx = DriverContext {
        supervisor: "/bin/true".into(),
        node_id: node_id.clone(),
        node_name: "docker-test".into(),
        plugins: crate::driver::PluginConfigs {
            docker: config,
            ..Default::default()
        },
    };
    Fixture {
        driver: DockerDriver::new(&ctx),
        dir: tempfile::tempdir().unwrap(),
        _cleanup: Cleanup(node_id.clone()),
        node_id,
    }
}

fn fixture() -> Fixture {
    fixture_with(DockerConfig::default())
}

fn s(v: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(v.to_string())),
    }
}

fn list(items: &[&str]) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue {
            values: items.iter().map(|i| s(i)).collect(),
        })),
    }
}

fn block(pairs: &[(&str, Value)]) -> Value {
    Value {
        kind: Some(Kind::StructValue(Struct {
            fields: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        })),
    }
}

/// A free port on loopback.
fn free_port() -> u32 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    u32::from(l.local_addr().unwrap().port())
}

impl Fixture {
    /// The spec of task `t` of a new alloc running `config`, with one group
    /// port `http` (host `port`, container 8080).
    fn spec(&self, config: Vec<(&str, Value)>, port: u32) -> TaskSpec {
        let alloc_id = uuid::Uuid::new_v4().to_string();
        let alloc = Allocation {
            id: alloc_id.clone(),
            name: "web.g[0]".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        let job = Job {
            id: "web".into(),
            name: "web".into(),
            ..Default::default()
        };
        let group = TaskGroup {
            name: "g".into(),
            ..Default::default()
        };
        let mut task = Task {
            name: "t".into(),
            ..Default::default()
        };
        task.env = BTreeMap::from([("GREETING".to_string(), "hello".to_string())]);
        let ad = AllocDir::new(self.dir.path(), &alloc_id).unwrap();
        ad.build(["t"]).unwrap();
        let dirs = ad.task("t").unwrap();
        let env = TaskEnv::build(
            Arc::new(Node::default()),
            &alloc,
            &job,
            &group,
            &task,
            Some(&dirs),
            true,
        );
        TaskSpec {
            alloc_id,
            task: "t".into(),
            config: TaskConfig(Struct {
                fields: config
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            }),
            env: Some(env),
            dirs: Some(dirs),
            logs: Default::default(),
            user: String::new(),
            resources: Some(Arc::new(TaskResources {
                job_id: "web".into(),
                job_name: "web".into(),
                namespace: "default".into(),
                group: "g".into(),
                cpu_mhz: 250,
                memory_mb: 64,
                node_cpu_mhz: 4000,
                node_cores: 2,
                group_ports: vec![AllocatedPort {
                    label: "http".into(),
                    value: port,
                    to: 8080,
                    host_ip: "127.0.0.1".into(),
                }],
                node_ip: "127.0.0.1".into(),
                ..Default::default()
            })),
            volume_mounts: Vec::new(),
            netns: None,
            group_net: Default::default(),
        }
    }
}

fn dirs(spec: &TaskSpec) -> TaskDirs {
    spec.dirs.clone().unwrap()
}

fn container_id(h: &dyn TaskHandle) -> String {
    DockerState::decode(&h.state()).unwrap().container_id
}

/// `docker inspect` of a container, as JSON.
fn inspect(id: &str) -> serde_json::Value {
    let out = std::process::Command::new("docker")
        .args(["inspect", id])
        .output()
        .unwrap();
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    all.get(0).cloned().unwrap_or_default()
}

/// Waits until `f` holds, for up to 20 s.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

fn http_get(port: u32, path: &str) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", u16::try_from(port).ok()?)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    out.contains("200 OK").then_some(out)
}

/// Runs `command` in `h`: exit code, stdout, stderr.
async fn exec_in(
    h: &dyn TaskHandle,
    command: &[&str],
    stdin: Option<&'static [u8]>,
) -> (i32, String, String) {
    let (out_w, mut out_r) = tokio::io::duplex(1 << 16);
    let (err_w, mut err_r) = tokio::io::duplex(1 << 16);
    let mut req = ExecRequest::new(
        command.iter().map(|c| c.to_string()).collect(),
        out_w,
        err_w,
    );
    if let Some(input) = stdin {
        req = req.with_stdin(input);
    }
    let code = h.exec(req).await.unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    tokio::io::AsyncReadExt::read_to_string(&mut out_r, &mut out)
        .await
        .unwrap();
    tokio::io::AsyncReadExt::read_to_string(&mut err_r, &mut err)
        .await
        .unwrap();
    (code, out, err)
}

#[tokio::test]
async fn a_container_serves_on_its_port_with_env_dirs_limits_and_labels() {
    let f = fixture();
    let port = free_port();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("httpd")),
            ("args", list(&["-f", "-p", "8080", "-h", "/local"])),
            ("ports", list(&["http"])),
            ("labels", block(&[("team", s("web"))])),
        ],
        port,
    );
    let d = dirs(&spec);
    std::fs::write(d.local_dir.join("index.html"), "hi from local\n").unwrap();
    let h = f.driver.start(spec.clone()).await.unwrap();
    let id = container_id(h.as_ref());
    eventually("the container answers on its host port", || {
        http_get(port, "/index.html").is_some_and(|b| b.contains("hi from local"))
    })
    .await;
    let (code, env, _) = exec_in(h.as_ref(), &["env"], None).await;
    assert_eq!(code, 0);
    for want in [
        "GREETING=hello".to_string(),
        format!("NOMAD_ALLOC_ID={}", spec.alloc_id),
        "NOMAD_TASK_NAME=t".to_string(),
        "NOMAD_ALLOC_DIR=/alloc".to_string(),
        "NOMAD_TASK_DIR=/local".to_string(),
        "NOMAD_SECRETS_DIR=/secrets".to_string(),
    ] {
        assert!(env.lines().any(|l| l == want), "{want} not in {env}");
    }
    let (code, _, _) = exec_in(
        h.as_ref(),
        &[
            "sh",
            "-c",
            "echo a > /alloc/data/a && echo s > /secrets/s && test -f /local/index.html",
        ],
        None,
    )
    .await;
    assert_eq!(code, 0);
    assert!(d.alloc_dir.join("data/a").exists());
    assert!(d.secrets_dir.join("s").exists());
    let c = inspect(&id);
    assert_eq!(c["HostConfig"]["Memory"], 64 * 1024 * 1024);
    assert_eq!(c["HostConfig"]["CpuShares"], 250);
    let l = &c["Config"]["Labels"];
    assert_eq!(l[labels::ALLOC_ID], spec.alloc_id.as_str());
    assert_eq!(l[labels::JOB_ID], "web");
    assert_eq!(l[labels::GROUP], "g");
    assert_eq!(l[labels::TASK], "t");
    assert_eq!(l["team"], "web");
    assert_eq!(c["Name"], format!("/t-{}", spec.alloc_id));
    // Its own address on the bridge: what `address_mode = "driver"` advertises.
    let ip = c["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        .as_str()
        .unwrap_or_default();
    assert!(!ip.is_empty(), "{c}");
    assert_eq!(h.driver_ip().as_deref(), Some(ip));
    let usage = h.stats(4000).await.unwrap();
    let mem = usage.resource_usage.unwrap().memory_stats.unwrap();
    assert!(mem.usage > 0, "{mem:?}");
    // httpd ignores SIGTERM as pid 1: the kill timeout ends it.
    let began = Instant::now();
    let r = h.stop(Signal::SIGTERM, Duration::from_millis(500)).await;
    assert!(began.elapsed() >= Duration::from_millis(500));
    assert_eq!(r.exit_code, 137, "{r:?}");
    f.driver.release(&spec).await;
    assert!(inspect(&id).is_null(), "released: the container is removed");
}

#[tokio::test]
async fn output_goes_to_the_tasks_log_files_and_the_exit_code_is_kept() {
    let f = fixture();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            (
                "args",
                list(&["-c", "echo out-line; echo err-line >&2; exit 3"]),
            ),
        ],
        free_port(),
    );
    let d = dirs(&spec);
    let h = f.driver.start(spec.clone()).await.unwrap();
    let r = h.wait().await;
    assert_eq!((r.exit_code, r.oom_killed), (3, false), "{r:?}");
    assert_eq!(std::fs::read_to_string(&d.stdout).unwrap(), "out-line\n");
    assert_eq!(std::fs::read_to_string(&d.stderr).unwrap(), "err-line\n");
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn exec_gives_the_exit_code_and_reads_stdin() {
    let f = fixture();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sleep")),
            ("args", list(&["300"])),
        ],
        free_port(),
    );
    let h = f.driver.start(spec.clone()).await.unwrap();
    let (code, _, _) = exec_in(h.as_ref(), &["sh", "-c", "exit 7"], None).await;
    assert_eq!(code, 7);
    let (code, out, err) = exec_in(
        h.as_ref(),
        &["sh", "-c", "tr a-z A-Z; echo done >&2"],
        Some(b"from stdin\n"),
    )
    .await;
    assert_eq!((code, out.trim(), err.trim()), (0, "FROM STDIN", "done"));
    h.stop(Signal::SIGKILL, Duration::from_secs(1)).await;
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn exec_with_a_terminal_is_resized() {
    let f = fixture();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sleep")),
            ("args", list(&["300"])),
        ],
        free_port(),
    );
    let h = f.driver.start(spec.clone()).await.unwrap();
    let (out_w, mut out_r) = tokio::io::duplex(1 << 16);
    let (sizes, resize) = tokio::sync::mpsc::channel(4);
    sizes
        .send(crate::driver::TtySize {
            height: 33,
            width: 99,
        })
        .await
        .unwrap();
    // The command waits for its input, by when the daemon has sized it.
    let (mut typed, input) = tokio::io::duplex(64);
    let req = ExecRequest::new(
        vec!["sh".into(), "-c".into(), "read go; stty size".into()],
        out_w,
        tokio::io::sink(),
    )
    .with_stdin(input)
    .with_tty(resize);
    let running = tokio::spawn({
        let h = h.clone();
        async move { h.exec(req).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::io::AsyncWriteExt::write_all(&mut typed, b"go\n")
        .await
        .unwrap();
    let code = running.await.unwrap().unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut out_r, &mut out)
        .await
        .unwrap();
    assert_eq!(code, 0, "{out:?}");
    assert!(out.contains("33 99"), "{out:?}");
    drop(sizes);
    h.stop(Signal::SIGKILL, Duration::from_secs(1)).await;
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn signals_reach_the_container_and_a_handled_kill_signal_stops_it() {
    let f = fixture();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            (
                "args",
                list(&["-c", "trap 'echo got-usr1' USR1; trap 'echo bye; exit 0' INT; echo ready; while true; do sleep 0.1; done"]),
            ),
        ],
        free_port(),
    );
    let d = dirs(&spec);
    let h = f.driver.start(spec.clone()).await.unwrap();
    eventually("ready", || {
        std::fs::read_to_string(&d.stdout).is_ok_and(|o| o.contains("ready"))
    })
    .await;
    h.signal(Signal::SIGUSR1).await.unwrap();
    eventually("the signal arrived", || {
        std::fs::read_to_string(&d.stdout).is_ok_and(|o| o.contains("got-usr1"))
    })
    .await;
    let r = h.stop(Signal::SIGINT, Duration::from_secs(10)).await;
    assert_eq!(r.exit_code, 0, "{r:?}");
    eventually("bye", || {
        std::fs::read_to_string(&d.stdout).is_ok_and(|o| o.contains("bye"))
    })
    .await;
    assert!(
        h.signal(Signal::SIGUSR1).await.is_err(),
        "not running any more"
    );
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn an_oom_kill_is_recorded() {
    let f = fixture();
    let mut spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            (
                "args",
                list(&["-c", "x=a; while true; do x=\"$x$x\"; done"]),
            ),
        ],
        free_port(),
    );
    Arc::make_mut(spec.resources.as_mut().unwrap()).memory_mb = 16;
    let h = f.driver.start(spec.clone()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), h.wait())
        .await
        .unwrap();
    assert!(r.oom_killed, "{r:?}");
    assert_eq!(r.err.as_deref(), Some("OOM Killed"));
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn a_new_client_finds_the_same_container_and_orphans_go() {
    let f = fixture();
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sleep")),
            ("args", list(&["300"])),
        ],
        free_port(),
    );
    let h = f.driver.start(spec.clone()).await.unwrap();
    let id = container_id(h.as_ref());
    // Another driver, as a restarted client has.
    let again = fixture_with(DockerConfig::default());
    let recovered = again.driver.recover(&spec, &h.state()).await.unwrap();
    assert_eq!(container_id(recovered.as_ref()), id);
    let adopted = again.driver.adopt(&spec).await.unwrap();
    assert_eq!(container_id(adopted.as_ref()), id, "found by its name");
    let gone = HandleState::new(
        NAME,
        handle::STATE_VERSION,
        serde_json::to_vec(&DockerState {
            container_id: "0123456789ab".into(),
            image: "busybox:1".into(),
            started_at_unix_ns: 0,
        })
        .unwrap(),
    );
    assert!(again.driver.recover(&spec, &gone).await.is_none());
    // An alloc the node still runs keeps its container; one it does not, not.
    f.driver.remove_orphans(&|a: &str| a == spec.alloc_id).await;
    assert!(!inspect(&id).is_null());
    f.driver.remove_orphans(&|_: &str| false).await;
    assert!(inspect(&id).is_null(), "the orphan's container is removed");
    let r = tokio::time::timeout(Duration::from_secs(10), recovered.wait())
        .await
        .unwrap();
    assert!(r.err.is_some() || r.exit_code != 0, "{r:?}");
    let _ = &f.node_id;
}

#[tokio::test]
async fn bad_images_and_host_volumes_fail_the_start_by_name() {
    let f = fixture();
    let spec = f.spec(
        vec![("image", s("caravan-test/no-such-image:1"))],
        free_port(),
    );
    let e = f.driver.start(spec).await.unwrap_err();
    assert!(e.recoverable, "{e}");
    assert!(
        e.message
            .starts_with("Failed to pull `caravan-test/no-such-image:1`"),
        "{e}"
    );
    let spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("volumes", list(&["/etc:/host-etc"])),
        ],
        free_port(),
    );
    let e = f.driver.start(spec).await.unwrap_err();
    assert!(!e.recoverable);
    assert!(e.message.contains("volumes are not enabled"), "{e}");
    let enabled = fixture_with(DockerConfig {
        volumes: config::VolumesConfig { enabled: true },
        ..Default::default()
    });
    let spec = enabled.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            (
                "args",
                list(&[
                    "-c",
                    "cat /host/hostname > /local/seen; cat /shared/x > /local/rel",
                ]),
            ),
            ("volumes", list(&["/etc:/host:ro", "local:/shared"])),
            (
                "mount",
                block(&[("type", s("tmpfs")), ("target", s("/scratch"))]),
            ),
        ],
        free_port(),
    );
    let d = dirs(&spec);
    std::fs::write(d.local_dir.join("x"), "relative\n").unwrap();
    let h = enabled.driver.start(spec.clone()).await.unwrap();
    assert_eq!(h.wait().await.exit_code, 0);
    assert!(
        !std::fs::read_to_string(d.local_dir.join("seen"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        std::fs::read_to_string(d.local_dir.join("rel")).unwrap(),
        "relative\n"
    );
    enabled.driver.release(&spec).await;
}

#[tokio::test]
async fn the_fingerprint_follows_the_daemon() {
    let f = fixture();
    let fp = f.driver.fingerprint().await;
    assert_eq!(fp.health, Health::Healthy, "{fp:?}");
    assert!(!fp.attributes["driver.docker.version"].is_empty());
    assert!(fp.attributes.contains_key("driver.docker.os_type"));
    let nowhere = fixture_with(DockerConfig {
        endpoint: "unix:///nonexistent/docker.sock".into(),
        ..Default::default()
    });
    let fp = nowhere.driver.fingerprint().await;
    assert_eq!(fp.health, Health::Undetected);
    assert_eq!(fp.description, UNREACHABLE);
}

#[tokio::test]
async fn the_options_nomad_jobs_use_reach_the_container() {
    let f = fixture();
    let mut spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("entrypoint", list(&["/bin/sh", "-c"])),
            ("args", list(&["sleep 300"])),
            ("work_dir", s("/local")),
            ("hostname", s("web-1")),
            (
                "init",
                Value {
                    kind: Some(Kind::BoolValue(true)),
                },
            ),
            (
                "cpu_hard_limit",
                Value {
                    kind: Some(Kind::BoolValue(true)),
                },
            ),
            ("dns_servers", list(&["127.0.0.53"])),
            ("extra_hosts", list(&["db.internal:10.0.0.9"])),
            (
                "pids_limit",
                Value {
                    kind: Some(Kind::NumberValue(64.0)),
                },
            ),
            (
                "readonly_rootfs",
                Value {
                    kind: Some(Kind::BoolValue(true)),
                },
            ),
            (
                "shm_size",
                Value {
                    kind: Some(Kind::NumberValue(65536.0)),
                },
            ),
            ("sysctl", block(&[("net.core.somaxconn", s("1024"))])),
            ("ulimit", block(&[("nofile", s("2048:4096"))])),
            (
                "healthchecks",
                block(&[(
                    "disable",
                    Value {
                        kind: Some(Kind::BoolValue(true)),
                    },
                )]),
            ),
            (
                "mount",
                block(&[("type", s("tmpfs")), ("target", s("/scratch"))]),
            ),
        ],
        free_port(),
    );
    {
        let r = Arc::make_mut(spec.resources.as_mut().unwrap());
        r.memory_max_mb = 128;
        r.cores = vec![0];
    }
    let h = f.driver.start(spec.clone()).await.unwrap();
    let c = inspect(&container_id(h.as_ref()));
    let hc = &c["HostConfig"];
    assert_eq!(
        hc["Memory"],
        128 * 1024 * 1024,
        "memory_max is the hard limit"
    );
    assert_eq!(
        hc["MemoryReservation"],
        64 * 1024 * 1024,
        "memory the soft one"
    );
    assert_eq!(hc["CpusetCpus"], "0");
    assert_eq!(hc["CpuPeriod"], 100_000);
    // 250 of 4,000 MHz on two cores.
    assert_eq!(hc["CpuQuota"], 12_500);
    assert_eq!(hc["Init"], true);
    assert_eq!(hc["Dns"][0], "127.0.0.53");
    assert_eq!(hc["ExtraHosts"][0], "db.internal:10.0.0.9");
    assert_eq!(hc["PidsLimit"], 64);
    assert_eq!(hc["ReadonlyRootfs"], true);
    assert_eq!(hc["ShmSize"], 65536);
    assert_eq!(hc["Sysctls"]["net.core.somaxconn"], "1024");
    assert_eq!(hc["Ulimits"][0]["Name"], "nofile");
    assert_eq!(hc["Ulimits"][0]["Hard"], 4096);
    assert_eq!(c["Config"]["Hostname"], "web-1");
    assert_eq!(c["Config"]["WorkingDir"], "/local");
    assert_eq!(c["Config"]["Entrypoint"][0], "/bin/sh");
    assert_eq!(c["Config"]["Healthcheck"]["Test"][0], "NONE");
    assert_eq!(c["State"]["Running"], true, "{c}");
    h.stop(Signal::SIGKILL, Duration::from_secs(1)).await;
    f.driver.release(&spec).await;
}

#[tokio::test]
async fn host_volumes_are_bind_mounted_at_their_destination() {
    let f = fixture();
    let data = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    std::fs::write(certs.path().join("ca.pem"), "a certificate\n").unwrap();
    let mut spec = f.spec(
        vec![
            ("image", s("busybox:1")),
            ("command", s("sh")),
            (
                "args",
                list(&[
                    "-c",
                    "cat /etc/certs/ca.pem && echo written > /data/out && \
                     if touch /etc/certs/x 2>/dev/null; then exit 9; fi",
                ]),
            ),
        ],
        free_port(),
    );
    spec.volume_mounts = vec![
        crate::driver::VolumeMountSpec {
            host_path: data.path().to_path_buf(),
            destination: "/data".into(),
            read_only: false,
        },
        crate::driver::VolumeMountSpec {
            host_path: certs.path().to_path_buf(),
            destination: "/etc/certs".into(),
            read_only: true,
        },
    ];
    let d = dirs(&spec);
    let h = f.driver.start(spec.clone()).await.unwrap();
    let r = h.wait().await;
    assert_eq!(
        r.exit_code,
        0,
        "{r:?}: {}",
        std::fs::read_to_string(&d.stderr).unwrap_or_default()
    );
    assert_eq!(
        std::fs::read_to_string(&d.stdout).unwrap(),
        "a certificate\n"
    );
    assert_eq!(
        std::fs::read_to_string(data.path().join("out")).unwrap(),
        "written\n",
        "the writable volume holds what the task wrote"
    );
    f.driver.release(&spec).await;

    let mut bad = f.spec(vec![("image", s("busybox:1"))], free_port());
    bad.volume_mounts = vec![crate::driver::VolumeMountSpec {
        host_path: data.path().to_path_buf(),
        destination: "relative".into(),
        read_only: false,
    }];
    let Err(err) = f.driver.start(bad).await else {
        panic!("a relative destination must be refused")
    };
    assert!(err.message.contains("must be an absolute path"), "{err:?}");
}
