//! Cluster status over gRPC: leaders are read from the store's elections.

use caravan_proto::LeadersRequest;
use caravan_proto::status_service_client::StatusServiceClient;

use crate::common::{Backend, TestGateway};

pub async fn no_leaders_are_reported_before_any_election(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-leaders-none").await;
    let mut status = StatusServiceClient::new(gw.channel().await);
    let none = status
        .leaders(LeadersRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(none.leaders.is_empty());
    gw.stop().await;
}

pub async fn an_elected_leader_is_reported_by_service(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-leaders").await;
    let mut status = StatusServiceClient::new(gw.channel().await);
    let lease = gw.store.lease_grant(10).await.unwrap();
    gw.store
        .campaign(&gw.keys.leader("eval-broker"), b"10.0.0.1:4650", lease.id)
        .await
        .unwrap();
    let some = status
        .leaders(LeadersRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        some.leaders.get("eval-broker").map(String::as_str),
        Some("10.0.0.1:4650")
    );
    gw.store.lease_revoke(lease.id).await.unwrap();
    gw.stop().await;
}
