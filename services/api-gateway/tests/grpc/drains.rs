//! Node drains over gRPC: a drain completes once nothing is left on the
//! node, at once if it had nothing.

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::node_service_client::NodeServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocUpdate, DrainStrategy, RegisterNodeRequest, SchedulingEligibility,
    UpdateAllocationsRequest, UpdateDrainRequest,
};
use tonic::transport::Channel;

use crate::common::{Backend, TestGateway, node_secret};
use crate::fixtures::{job, node, placed, register, store_running_on};

/// Nodes `n1`, running alloc `a1` of job `web`, and `n2`, running nothing,
/// both just told to drain within the hour; and a node client.
async fn drain_both(
    backend: Backend,
    name: &str,
) -> (TestGateway, NodeClientServiceClient<Channel>) {
    let gw = TestGateway::start(backend, name).await;
    let channel = gw.channel().await;
    let mut client = NodeClientServiceClient::new(channel.clone());
    let mut nodes = NodeServiceClient::new(channel.clone());
    for id in ["n1", "n2"] {
        client
            .register_node(RegisterNodeRequest {
                node: Some(node(id)),
                secret_id: node_secret(id),
            })
            .await
            .unwrap();
    }
    JobServiceClient::new(channel)
        .register_job(register(job("web", 1)))
        .await
        .unwrap();
    store_running_on(&gw, &nodes, "n1", vec![placed("a1", "n1", "web")]).await;
    let drain = DrainStrategy {
        deadline_ns: 3_600_000_000_000,
        ..Default::default()
    };
    for id in ["n1", "n2"] {
        nodes
            .update_drain(UpdateDrainRequest {
                node_id: id.into(),
                drain_strategy: Some(drain),
                mark_eligible: false,
            })
            .await
            .unwrap();
    }
    (gw, client)
}

pub async fn an_empty_node_is_drained_at_once_and_stays_ineligible(backend: Backend) {
    let (gw, _client) = drain_both(backend, "grpc-drain-empty").await;
    // n2 had nothing to move: drained at once, still ineligible.
    let n2 = gw.node("n2").await.unwrap();
    assert!(n2.drain_strategy.is_none());
    assert_eq!(n2.last_drain.as_ref().unwrap().status, "complete");
    assert_eq!(
        n2.scheduling_eligibility(),
        SchedulingEligibility::Ineligible
    );
    gw.stop().await;
}

pub async fn a_node_with_a_running_alloc_keeps_draining(backend: Backend) {
    let (gw, _client) = drain_both(backend, "grpc-drain-busy").await;
    assert!(gw.node("n1").await.unwrap().drain_strategy.is_some());
    gw.stop().await;
}

pub async fn a_drain_completes_when_the_last_alloc_finishes(backend: Backend) {
    let (gw, mut client) = drain_both(backend, "grpc-drain-complete").await;
    let mut done = AllocUpdate {
        alloc_id: "a1".into(),
        ..Default::default()
    };
    done.set_client_status(AllocClientStatus::Complete);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![done],
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap();
    let n1 = gw.node("n1").await.unwrap();
    assert!(n1.drain_strategy.is_none(), "{n1:?}");
    assert_eq!(n1.last_drain.unwrap().status, "complete");
    gw.stop().await;
}
