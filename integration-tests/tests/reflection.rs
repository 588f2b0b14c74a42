//! Every service binary serves gRPC server reflection, listing its own
//! Caravan service (so `grpcurl list` works against it), and the standard
//! health check, answering SERVING for that service. With
//! `CARAVAN_TEST_TLS=1` the calls present the CLI's certificate, as
//! `grpcurl -cacert -cert -key` would.
//!
//! Needs the service binaries (`cargo build --workspace --bins`) and
//! `CARAVAN_TEST_ETCD`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use caravan_integration_tests::{Cluster, Service};
use caravan_proto::{
    client_node_service_server, deployment_watcher_service_server, eval_broker_service_server,
    job_service_server, node_client_service_server, plan_applier_service_server,
    scheduler_worker_service_server,
};
use caravan_runtime::names;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

/// The gRPC services each service must list and report serving.
fn own_services() -> BTreeMap<&'static str, Vec<&'static str>> {
    BTreeMap::from([
        (
            names::API_GATEWAY,
            vec![
                job_service_server::SERVICE_NAME,
                node_client_service_server::SERVICE_NAME,
            ],
        ),
        (
            names::EVAL_BROKER,
            vec![eval_broker_service_server::SERVICE_NAME],
        ),
        (
            names::PLAN_APPLIER,
            vec![plan_applier_service_server::SERVICE_NAME],
        ),
        (
            names::SCHEDULER_WORKER,
            vec![scheduler_worker_service_server::SERVICE_NAME],
        ),
        (
            names::DEPLOYMENT_WATCHER,
            vec![deployment_watcher_service_server::SERVICE_NAME],
        ),
        (
            names::CLIENT_NODE,
            vec![client_node_service_server::SERVICE_NAME],
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_answers_reflection_and_the_health_check() {
    let mut c = Cluster::new("reflection").await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("reflection-node", &[]).await.unwrap();
    let own = own_services();
    let mut checked = Vec::new();
    for (process, addr) in c.grpc_addrs() {
        let (service, _ordinal) = process.rsplit_once('-').expect("<service>-<n>");
        let expected = own
            .get(service)
            .unwrap_or_else(|| panic!("{process} is no known service"));
        let channel = c
            .grpc_channel(Service::from_name(service).unwrap(), &addr.to_string())
            .unwrap();
        let listed = list_services(channel.clone()).await;
        for name in expected {
            assert!(
                listed.iter().any(|l| l == name),
                "{process} at {addr} lists {listed:?}, not {name}"
            );
            assert_eq!(
                health(channel.clone(), name).await,
                ServingStatus::Serving,
                "{process}: health of {name}"
            );
        }
        assert!(
            listed.iter().any(|l| l == "grpc.health.v1.Health"),
            "{listed:?}"
        );
        // The server as a whole.
        assert_eq!(
            health(channel, "").await,
            ServingStatus::Serving,
            "{process}"
        );
        checked.push(service.to_string());
        eprintln!("{process} at {addr}: {listed:?}");
    }
    checked.sort();
    let mut all: Vec<String> = names::ALL.iter().map(|s| s.to_string()).collect();
    all.sort();
    assert_eq!(checked, all, "every service checked once");
}

/// The services `channel`'s server lists through reflection (v1).
async fn list_services(channel: Channel) -> Vec<String> {
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .expect("reflection answers")
        .into_inner();
    let reply = replies
        .message()
        .await
        .expect("a reflection reply")
        .expect("the stream holds a reply");
    match reply.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("not a list of services: {other:?}"),
    }
}

/// What `grpc.health.v1.Health/Check` answers for `service`.
async fn health(channel: Channel, service: &str) -> ServingStatus {
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .expect("the health check answers")
        .into_inner()
        .status()
}
