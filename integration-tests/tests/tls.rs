//! Mutual TLS across the real binaries: a cluster whose every gRPC hop
//! requires a certificate signed by its CA runs a job through the CLI, and
//! refuses a peer from another CA, a client node's certificate at the
//! eval-broker, and plaintext.
//!
//! Needs the service binaries (`cargo build --workspace --bins`) and
//! `CARAVAN_TEST_ETCD`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use caravan_integration_tests::cluster::Service;
use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_proto::{AllocClientStatus, DequeueRequest};
use caravan_runtime::tls::Role;
use caravan_runtime::tls::certs::{self, CertRequest};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const JOB: &str = "tls-echo";

/// A channel to `addr` trusting `ca` and presenting `<stem>.pem`.
fn dial(addr: &str, ca: &Path, cert_dir: &Path, stem: &str) -> Channel {
    let read = |p: &Path| std::fs::read(p).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(ca)))
        .identity(Identity::from_pem(
            read(&cert_dir.join(format!("{stem}.pem"))),
            read(&cert_dir.join(format!("{stem}-key.pem"))),
        ))
        .domain_name("server.global.caravan");
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(Duration::from_secs(3))
        .connect_lazy()
}

fn dequeue() -> DequeueRequest {
    DequeueRequest {
        schedulers: vec!["service".to_string()],
        timeout_ns: 100_000_000,
        ack: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hop_requires_a_certificate_of_the_right_ca_and_role() {
    let mut c = Cluster::new("tls").await.unwrap();
    let tls = c.enable_tls().await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("tls-node", &[("drivers", "raw_exec")])
        .await
        .unwrap();

    // The whole pipeline over TLS: CLI → gateway → broker → worker →
    // applier, node ↔ gateway, and gateway → node for the logs.
    let job = jobs::service_job(
        JOB,
        1,
        jobs::raw_exec_task("echo hello over tls; exec sleep 300"),
    );
    let file = c.dir().join("job.json");
    std::fs::write(&file, serde_json::to_vec(&job).unwrap()).unwrap();
    let out = c
        .cli(&["job", "run", "-detach", file.to_str().unwrap()])
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "caravan job run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = c.state.clone();
    let alloc = wait_for("the job to run", Duration::from_secs(60), async || {
        let running = state.allocs().await?.into_iter().find(|a| {
            a.job_id == JOB && a.is_live() && a.client_status() == AllocClientStatus::Running
        });
        Ok(match running {
            Some(a) => Progress::Done(a),
            None => Progress::Waiting("no running allocation".into()),
        })
    })
    .await
    .unwrap();
    let logs = wait_for("the task's output", Duration::from_secs(30), async || {
        let out = c.cli(&["alloc", "logs", &alloc.id]).await?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        Ok(if stdout.contains("hello over tls") {
            Progress::Done(stdout)
        } else {
            Progress::Waiting(format!(
                "stdout {stdout:?}, stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })
    })
    .await
    .unwrap();
    assert!(logs.contains("hello over tls"));

    let broker = c.wait_leader(Service::EvalBroker).await.unwrap();
    let ca = tls.join(certs::CA_CERT_FILE);

    // A client node's certificate passes the handshake (same CA) and may
    // probe health, but the broker is the control plane's alone.
    let as_node = dial(&broker, &ca, &tls, "global-client-caravan");
    HealthClient::new(as_node.clone())
        .check(HealthCheckRequest::default())
        .await
        .expect("a client certificate of the cluster's CA is accepted for health");
    let refused = EvalBrokerServiceClient::new(as_node)
        .dequeue(dequeue())
        .await
        .expect_err("a client node dequeued evaluations");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("client.global.caravan")
            && refused
                .message()
                .contains("server.global.caravan is needed"),
        "{}",
        refused.message()
    );

    // A server certificate from another CA: the broker refuses the handshake.
    let other = c.dir().join("other-ca");
    std::fs::create_dir_all(&other).unwrap();
    certs::create_ca(&other, 10).unwrap();
    certs::create_cert(
        &other,
        &CertRequest {
            role: Role::Server,
            region: "global".into(),
            days: 10,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            ca_cert: other.join(certs::CA_CERT_FILE),
            ca_key: other.join(certs::CA_KEY_FILE),
        },
    )
    .unwrap();
    let stranger = dial(&broker, &ca, &other, "global-server-caravan");
    let refused = HealthClient::new(stranger)
        .check(HealthCheckRequest::default())
        .await
        .expect_err("a certificate of another CA was accepted");
    assert_ne!(refused.code(), tonic::Code::Ok);

    // Plaintext gets nowhere.
    let plain = Channel::from_shared(format!("http://{broker}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(3))
        .connect_lazy();
    HealthClient::new(plain)
        .check(HealthCheckRequest::default())
        .await
        .expect_err("a plaintext call was answered");

    // Nor does a CLI without certificates.
    let bare = tokio::process::Command::new(
        caravan_integration_tests::binaries::binary(
            &caravan_integration_tests::binaries::bin_dir().unwrap(),
            "caravan",
        )
        .unwrap(),
    )
    .args([
        "-grpc-address",
        &c.gateway_grpc().unwrap().to_string(),
        "job",
        "status",
    ])
    .env_remove("CARAVAN_CACERT")
    .env_remove("CARAVAN_CLIENT_CERT")
    .env_remove("CARAVAN_CLIENT_KEY")
    .output()
    .await
    .unwrap();
    assert!(
        !bare.status.success(),
        "a CLI without certificates listed jobs"
    );

    let out = c.cli(&["job", "stop", JOB]).await.unwrap();
    assert!(
        out.status.success(),
        "caravan job stop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
