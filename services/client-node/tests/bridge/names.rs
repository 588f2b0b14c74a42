//! A group network's `hostname` and `dns` block: exec tasks get the
//! hostname in a UTS namespace of their own, docker tasks through the infra
//! container they join; both get a hosts file naming the alloc and the
//! resolv.conf of the `dns` block. A docker task with a `network_mode` of
//! its own stays out of the group's namespace, and one whose infra
//! container is gone cannot start again.

use super::*;
use caravan_proto::DnsConfig;

/// Writes what the task sees of its names into the alloc dir.
const SHOW_NAMES: &str = "hostname > $NOMAD_ALLOC_DIR/$NOMAD_TASK_NAME.hostname; \
                          cat /etc/hosts > $NOMAD_ALLOC_DIR/$NOMAD_TASK_NAME.hosts; \
                          cat /etc/resolv.conf > $NOMAD_ALLOC_DIR/$NOMAD_TASK_NAME.resolv; \
                          ls /sys/class/net > $NOMAD_ALLOC_DIR/$NOMAD_TASK_NAME.links; ";

fn named(mut j: Job, hostname: &str, dns: DnsConfig) -> Job {
    let net = &mut j.task_groups[0].networks[0];
    net.hostname = hostname.into();
    net.dns = Some(dns);
    j
}

/// What task `task` of alloc `a` wrote of `what`, once it has.
async fn seen(scene: &Scene, a: &Allocation, task: &str, what: &str) -> String {
    let path = scene.alloc_dir(a).join(format!("alloc/{task}.{what}"));
    until(&format!("{task} wrote its {what}"), WAIT, || {
        std::fs::read_to_string(&path).is_ok_and(|s| !s.is_empty())
    })
    .await;
    std::fs::read_to_string(&path).unwrap()
}

#[tokio::test]
async fn an_exec_task_gets_the_groups_hostname_hosts_and_resolv_conf() {
    if !ready() {
        return;
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_caravan-client-node"));
    let fp = caravan_client_node::driver::Driver::fingerprint(
        &caravan_client_node::driver::ExecDriver::new(bin, &Default::default()),
    )
    .await;
    assert!(
        fp.detected(),
        "exec driver not detected here: {}",
        fp.description
    );
    let node_hostname = nix::unistd::gethostname().unwrap();
    let scene = Scene::new().await;
    let mut conf = config(scene.gateway, scene.dir.path());
    conf.drivers = vec!["exec".into()];
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let mut t = sh_task("app", &format!("{SHOW_NAMES} while true; do sleep 1; done"));
    t.driver = "exec".into();
    let mut j = bridge_job("exec-names", false);
    j.task_groups[0].tasks = vec![t];
    let j = named(
        j,
        "web-${NOMAD_ALLOC_INDEX}",
        DnsConfig {
            servers: vec!["192.0.2.53".into()],
            searches: vec!["svc.example".into()],
            options: vec![],
        },
    );
    let a = bridge_alloc(&j, free_port());
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    scene.running(&a).await;

    assert_eq!(seen(&scene, &a, "app", "hostname").await.trim(), "web-0");
    let ip = Networks::new(scene.dir.path(), DEFAULT_PLUGIN_DIR)
        .load(&a.id)
        .expect("the alloc's network")
        .ip;
    assert!(!ip.is_empty());
    let hosts = seen(&scene, &a, "app", "hosts").await;
    assert!(hosts.contains(&format!("\n{ip} web-0\n")), "{hosts}");
    let resolv = seen(&scene, &a, "app", "resolv").await;
    assert!(resolv.contains("nameserver 192.0.2.53\n"), "{resolv}");
    assert!(resolv.contains("search svc.example\n"), "{resolv}");
    // The node's own name and files are untouched.
    assert_eq!(nix::unistd::gethostname().unwrap(), node_hostname);
    assert!(
        !std::fs::read_to_string("/etc/resolv.conf")
            .unwrap()
            .contains("192.0.2.53")
    );

    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![j.clone()]);
    until("complete after the stop", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn docker_tasks_share_the_infra_containers_hostname_and_one_of_their_own_stays_out() {
    if !ready() {
        return;
    }
    let scene = Scene::new().await;
    let (client, shutdown) = docker_client(&scene, "caravan/pause:1").await;
    let node_id = client.ready.node_ids[0].clone();
    let loop_forever = format!("{SHOW_NAMES} while true; do sleep 1; done");
    let mut j = bridge_job("docker-names", false);
    j.task_groups[0].tasks = vec![
        task(
            "web",
            "docker",
            vec![
                ("image", s("busybox:1")),
                ("command", s("sh")),
                ("args", list(&["-c", &loop_forever])),
                ("extra_hosts", list(&["db:10.1.2.3"])),
            ],
        ),
        task(
            "own",
            "docker",
            vec![
                ("image", s("busybox:1")),
                ("command", s("sh")),
                ("args", list(&["-c", &loop_forever])),
                ("network_mode", s("none")),
            ],
        ),
    ];
    let j = named(
        j,
        "shop",
        DnsConfig {
            options: vec!["ndots:3".into()],
            ..Default::default()
        },
    );
    let a = bridge_alloc(&j, free_port());
    scene.fake.push(&node_id, vec![a.clone()], vec![j.clone()]);
    scene.running(&a).await;

    let ip = Networks::new(scene.dir.path(), DEFAULT_PLUGIN_DIR)
        .load(&a.id)
        .expect("the alloc's network")
        .ip;
    assert_eq!(seen(&scene, &a, "web", "hostname").await.trim(), "shop");
    let hosts = seen(&scene, &a, "web", "hosts").await;
    assert!(hosts.contains(&format!("\n{ip} shop\n")), "{hosts}");
    assert!(hosts.contains("10.1.2.3 db\n"), "{hosts}");
    let links = seen(&scene, &a, "web", "links").await;
    assert!(
        links.contains("eth0"),
        "the joining task is on the bridge: {links}"
    );
    for task in ["web", "own"] {
        let resolv = seen(&scene, &a, task, "resolv").await;
        assert!(resolv.contains("options ndots:3\n"), "{task}: {resolv}");
    }
    // Its own network_mode = "none": loopback alone, the runtime's hostname.
    assert_eq!(seen(&scene, &a, "own", "links").await.trim(), "lo");
    assert_ne!(seen(&scene, &a, "own", "hostname").await.trim(), "shop");

    // The infra container gone, the task cannot rejoin the group's
    // namespace: its restart fails for good, saying why.
    let infra = format!("nomad_init_{}", a.id);
    let rm = std::process::Command::new("docker")
        .args(["rm", "-f", &infra])
        .output()
        .unwrap();
    assert!(rm.status.success(), "{rm:?}");
    let web = containers_of(&a.id)
        .into_iter()
        .find(|n| n.starts_with("web-"))
        .expect("the web container");
    let killed = std::process::Command::new("docker")
        .args(["kill", &web])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let said = |msg: &str| {
        scene.fake.update(&a.id).is_some_and(|u| {
            u.task_states.get("web").is_some_and(|s| {
                s.events
                    .iter()
                    .any(|e| e.driver_error.contains(msg) || e.message.contains(msg))
            })
        })
    };
    until("the restart fails naming the infra container", WAIT, || {
        said("infra container")
    })
    .await;

    scene
        .fake
        .push(&node_id, vec![stopped(a.clone())], vec![j.clone()]);
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}
