//! The client's token against a dev cluster with ACLs: refused without one
//! or with a made-up one, accepted once bootstrapped.

#![allow(clippy::unwrap_used)]

use caravan_cli::DevCluster;
use caravan_client::proto::AclBootstrapRequest;
use caravan_client::proto::acl_service_client::AclServiceClient;
use caravan_client::{Client, Error};

use crate::common::options;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_carry_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(caravan_cli::DevOptions {
        acl_enabled: true,
        ..options(dir.path())
    })
    .await
    .expect("dev cluster starts");
    let anonymous = Client::connect(cluster.address()).await.unwrap();
    let err = anonymous.jobs().list("").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");

    let made_up = Client::builder()
        .address(cluster.address())
        .token("00000000-0000-0000-0000-000000000000")
        .build()
        .unwrap();
    let err = made_up.jobs().list("").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");

    // The services the client does not wrap go through its channel.
    let bootstrap = AclServiceClient::new(anonymous.grpc_channel())
        .bootstrap(AclBootstrapRequest {})
        .await
        .unwrap()
        .into_inner();
    let secret = bootstrap.token.unwrap().secret_id;
    let root = Client::builder()
        .address(cluster.address())
        .token(secret)
        .build()
        .unwrap();
    assert!(root.jobs().list("").await.unwrap().is_empty());
    let nodes = root.nodes().list("").await.unwrap();
    assert_eq!(nodes.len(), 1);
    cluster.stop().await.unwrap();
}
