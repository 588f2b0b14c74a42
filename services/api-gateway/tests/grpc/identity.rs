//! Node identity on the node-facing API: the secret recorded at a node's
//! first registration is the only way to act as that node afterwards.

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::node_service_client::NodeServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocUpdate, Allocation, GetNodeRequest, HeartbeatRequest, ListNodesRequest,
    Node, NodeStatus, RegisterNodeRequest, UpdateAllocationsRequest, WatchAllocationsRequest,
};
use caravan_state::encode;
use sha2::{Digest, Sha256};
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::common::{Backend, TestGateway, node_secret};
use crate::fixtures::{node, placed};

type Client = NodeClientServiceClient<Channel>;

async fn start(backend: Backend, name: &str) -> (TestGateway, Client) {
    let gw = TestGateway::start(backend, name).await;
    let client = NodeClientServiceClient::new(gw.channel().await);
    (gw, client)
}

async fn register(client: &mut Client, id: &str, secret: &str) -> Result<(), Status> {
    client
        .register_node(RegisterNodeRequest {
            node: Some(node(id)),
            secret_id: secret.into(),
        })
        .await
        .map(drop)
}

async fn heartbeat(client: &mut Client, id: &str, secret: &str) -> Result<(), Status> {
    client
        .heartbeat(HeartbeatRequest {
            node_id: id.into(),
            secret_id: secret.into(),
        })
        .await
        .map(drop)
}

async fn report_complete(client: &mut Client, secret: &str) -> Result<(), Status> {
    let mut update = AllocUpdate {
        alloc_id: "a1".into(),
        ..Default::default()
    };
    update.set_client_status(AllocClientStatus::Complete);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![update],
            secret_id: secret.into(),
        })
        .await
        .map(drop)
}

fn hex_sha256(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn assert_denied(status: &Status, node_id: &str) {
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains(&format!("node {node_id}")),
        "the refusal names the node: {}",
        status.message()
    );
}

async fn stored_alloc(gw: &TestGateway) -> Allocation {
    gw.allocs().await.remove(0)
}

pub async fn a_node_id_is_not_registered_again_with_another_secret(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-reregister").await;
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    let before = gw.node("n1").await.unwrap();
    let err = register(&mut client, "n1", "an impostor's secret")
        .await
        .unwrap_err();
    assert_denied(&err, "n1");
    let after = gw.node("n1").await.unwrap();
    assert_eq!(after.secret_hash, hex_sha256(&node_secret("n1")));
    assert_eq!(
        after.modify_revision, before.modify_revision,
        "the impostor wrote nothing"
    );
    // The node itself registers again as often as it likes.
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    heartbeat(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    gw.stop().await;
}

pub async fn a_new_node_must_present_a_secret(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-no-secret").await;
    let err = register(&mut client, "n1", "").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("secret_id"), "{}", err.message());
    assert!(gw.node("n1").await.is_none(), "nothing was written");
    gw.stop().await;
}

pub async fn heartbeats_with_a_wrong_or_missing_secret_are_refused(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-heartbeat").await;
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    let wrong = heartbeat(&mut client, "n1", &node_secret("n2"))
        .await
        .unwrap_err();
    assert_denied(&wrong, "n1");
    let missing = heartbeat(&mut client, "n1", "").await.unwrap_err();
    assert_denied(&missing, "n1");
    assert!(missing.message().contains("missing secret_id"));
    heartbeat(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    gw.stop().await;
}

pub async fn updates_and_alloc_streams_with_a_wrong_secret_are_refused(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-updates").await;
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&placed("a1", "n1", "web")), 0)
        .await
        .unwrap();
    let err = report_complete(&mut client, "guessed").await.unwrap_err();
    assert_denied(&err, "n1");
    assert_eq!(
        stored_alloc(&gw).await.client_status(),
        AllocClientStatus::Pending,
        "the forged report wrote nothing"
    );
    let err = client
        .watch_allocations(WatchAllocationsRequest {
            node_id: "n1".into(),
            min_revision: 0,
            secret_id: "guessed".into(),
        })
        .await
        .unwrap_err();
    assert_denied(&err, "n1");
    // A node nobody registered has no allocations to read.
    let err = client
        .watch_allocations(WatchAllocationsRequest {
            node_id: "n9".into(),
            min_revision: 0,
            secret_id: node_secret("n9"),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    report_complete(&mut client, &node_secret("n1"))
        .await
        .unwrap();
    assert_eq!(
        stored_alloc(&gw).await.client_status(),
        AllocClientStatus::Complete
    );
    gw.stop().await;
}

pub async fn a_node_stored_before_secrets_records_the_first_one_presented(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-upgrade").await;
    // A node as a gateway without node secrets stored it.
    let mut legacy = node("n1");
    legacy.set_status(NodeStatus::Ready);
    gw.store
        .put(&gw.keys.node("n1"), &encode(&legacy), 0)
        .await
        .unwrap();
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&placed("a1", "n1", "web")), 0)
        .await
        .unwrap();
    // Until it registers with a secret, its (old) client's calls go through.
    report_complete(&mut client, "").await.unwrap();
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    assert_eq!(
        gw.node("n1").await.unwrap().secret_hash,
        hex_sha256(&node_secret("n1"))
    );
    // From then on the recorded secret is required.
    assert_denied(&heartbeat(&mut client, "n1", "").await.unwrap_err(), "n1");
    assert_denied(
        &register(&mut client, "n1", "another").await.unwrap_err(),
        "n1",
    );
    heartbeat(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    gw.stop().await;
}

pub async fn the_secret_hash_never_leaves_the_servers(backend: Backend) {
    let (gw, mut client) = start(backend, "grpc-identity-hidden").await;
    register(&mut client, "n1", &node_secret("n1"))
        .await
        .unwrap();
    let hash = hex_sha256(&node_secret("n1"));
    assert_eq!(gw.node("n1").await.unwrap().secret_hash, hash);
    let mut nodes = NodeServiceClient::new(gw.channel().await);
    let got: Node = nodes
        .get_node(GetNodeRequest {
            node_id: "n1".into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner()
        .node
        .unwrap();
    assert!(got.secret_hash.is_empty());
    let listed = nodes
        .list_nodes(ListNodesRequest { options: None })
        .await
        .unwrap()
        .into_inner()
        .nodes;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].secret_hash.is_empty());
    let answer = gw.http("GET", "/v1/node/n1", b"").await;
    assert_eq!(answer.status, 200);
    let body = String::from_utf8_lossy(&answer.body);
    assert!(!body.contains(&hash), "{body}");
    gw.stop().await;
}
