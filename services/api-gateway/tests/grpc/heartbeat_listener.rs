//! The heartbeat listener (`heartbeat_addr`): heartbeats only, answered by
//! the heartbeat thread while the gateway's main runtime is busy.

use std::sync::atomic::Ordering;
use std::time::Duration;

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{HeartbeatRequest, RegisterNodeRequest, WatchAllocationsRequest};
use tonic::Code;
use tonic::transport::Channel;

use crate::common::{Backend, TestGateway, from_elsewhere, node_secret, saturate_runtime};
use crate::fixtures::node;

async fn started(backend: Backend, name: &str) -> TestGateway {
    let gw = TestGateway::start_like_a_process(backend, name, |c| {
        c.heartbeat_addr = "127.0.0.1:0".into();
    })
    .await;
    NodeClientServiceClient::new(gw.channel().await)
        .register_node(RegisterNodeRequest {
            node: Some(node("n1")),
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap();
    gw
}

fn beat() -> HeartbeatRequest {
    HeartbeatRequest {
        node_id: "n1".into(),
        secret_id: node_secret("n1"),
    }
}

/// Sends one heartbeat to `addr` [`from_elsewhere`]; its answer (the
/// code, or OK) arrives on the returned channel.
fn heartbeat_from_elsewhere(addr: std::net::SocketAddr) -> std::sync::mpsc::Receiver<Code> {
    from_elsewhere(async move {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        match NodeClientServiceClient::new(channel)
            .heartbeat(beat())
            .await
        {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        }
    })
}

/// With every worker of the gateway's runtime taken, a heartbeat sent to
/// `grpc_addr` waits until they free up, while one sent to the heartbeat
/// listener is answered at once.
pub async fn heartbeats_are_answered_while_the_gateway_runtime_is_busy(backend: Backend) {
    let gw = started(backend, "hb-listener-busy").await;
    let listener = gw.bound.heartbeat.expect("heartbeat_addr was set");
    assert_eq!(
        heartbeat_from_elsewhere(listener).recv_timeout(Duration::from_secs(10)),
        Ok(Code::Ok)
    );

    let busy = saturate_runtime();
    let on_grpc_addr = heartbeat_from_elsewhere(gw.bound.grpc);
    let on_listener = heartbeat_from_elsewhere(listener).recv_timeout(Duration::from_secs(5));
    let grpc_while_busy = on_grpc_addr.recv_timeout(Duration::from_millis(500));
    busy.store(false, Ordering::Relaxed);

    assert_eq!(on_listener, Ok(Code::Ok), "the heartbeat listener stalled");
    assert!(
        grpc_while_busy.is_err(),
        "grpc_addr answered while every runtime worker spun: the test shows nothing"
    );
    assert_eq!(
        on_grpc_addr.recv_timeout(Duration::from_secs(10)),
        Ok(Code::Ok)
    );
    gw.stop().await;
}

/// Registrations, alloc streams and status updates belong on `grpc_addr`:
/// the listener refuses them, naming where to send them; an unknown node's
/// heartbeat is refused as on `grpc_addr`.
pub async fn the_heartbeat_listener_takes_heartbeats_only(backend: Backend) {
    let gw = started(backend, "hb-listener-only").await;
    let listener = gw.bound.heartbeat.expect("heartbeat_addr was set");
    let channel = Channel::from_shared(format!("http://{listener}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = NodeClientServiceClient::new(channel);
    let refused = client
        .register_node(RegisterNodeRequest {
            node: Some(node("n2")),
            secret_id: node_secret("n2"),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unimplemented);
    assert!(refused.message().contains("grpc_addr"), "{refused:?}");
    let refused = client
        .watch_allocations(WatchAllocationsRequest {
            node_id: "n1".into(),
            min_revision: 0,
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unimplemented);
    let unknown = client
        .heartbeat(HeartbeatRequest {
            node_id: "n9".into(),
            secret_id: node_secret("n9"),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    assert!(gw.node("n2").await.is_none());
    client.heartbeat(beat()).await.unwrap();
    gw.stop().await;
}
