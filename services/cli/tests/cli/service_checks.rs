//! `alloc status` shows the latest results of an allocation's service
//! checks, read from its registrations (written here into the dev cluster's
//! etcd as a node's status report would write them), and `service info`
//! shows the instance.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::common::{WAIT, cli, eventually_some, options};
use caravan_cli::{Api, DevCluster, DevOptions};
use caravan_proto::{AllocClientStatus, CheckResult, ServiceRegistration};
use caravan_state::Keyspace;
use caravan_store::{EtcdStore, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alloc_status_shows_nomad_service_checks() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = caravan_testkit::unique_prefix("cli-checks");
    let cluster = DevCluster::start(DevOptions {
        etcd: caravan_testkit::etcd_endpoints(),
        prefix: prefix.clone(),
        ..options(dir.path())
    })
    .await
    .expect("dev cluster starts");
    let address = cluster.http_address();
    let api = Api::new(&cluster.address(), "default").unwrap();
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.hcl");
    let (code, out, err) = cli(
        &address,
        &["job", "run", "-detach", hello.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let alloc = eventually_some("the alloc to run", WAIT, || async {
        let allocs = api.job_allocations("hello").await.ok()?;
        allocs
            .into_iter()
            .find(|a| a.client_status() == AllocClientStatus::Running)
    })
    .await;
    let short = &alloc.id[..8];

    let (code, out, err) = cli(&address, &["alloc", "status", short]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("Nomad Service Checks"),
        "no checks, no section: {out}"
    );

    let check = |name: &str, task: &str, status: &str| CheckResult {
        check_name: name.into(),
        status: status.into(),
        mode: "healthiness".into(),
        group: alloc.task_group.clone(),
        task: task.into(),
        service: "hello-web".into(),
        ..Default::default()
    };
    let reg = ServiceRegistration {
        id: format!("_nomad-task-{}-hello-hello-web-http", alloc.id),
        service_name: "hello-web".into(),
        namespace: "default".into(),
        node_id: alloc.node_id.clone(),
        job_id: "hello".into(),
        alloc_id: alloc.id.clone(),
        address: "127.0.0.1".into(),
        port: 23_456,
        checks: vec![
            check("alive", "", "passing"),
            check("ready", "hello", "critical"),
        ],
        ..Default::default()
    };
    let store = EtcdStore::connect(&caravan_testkit::etcd_endpoints())
        .await
        .unwrap();
    let keys = Keyspace::new(&prefix);
    store
        .put(
            &keys.service("default", &reg.service_name, &reg.id),
            &caravan_state::encode(&reg),
            0,
        )
        .await
        .unwrap();

    let (code, out, err) = cli(&address, &["alloc", "status", short]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "\n\nNomad Service Checks:\n\
             Service    Task     Name   Mode         Status\n\
             hello-web  (group)  alive  healthiness  success\n\
             hello-web  hello    ready  healthiness  failure\n\n"
        ),
        "{out}"
    );
    let (code, out, err) = cli(&address, &["service", "info", "hello-web"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("127.0.0.1:23456"), "{out}");
    cluster.stop().await.unwrap();
}
