//! The dev cluster's client node through the client: eligibility, a drain
//! started and cancelled, and an unknown node.

#![allow(clippy::unwrap_used)]

use caravan_client::Client;
use caravan_client::proto::{DrainStrategy, NodeStatus, SchedulingEligibility};

use crate::common::cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_made_ineligible_drained_and_undrained() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = Client::connect(cluster.address()).await.unwrap();
    let id = cluster.addresses.node_id.clone();

    let node = client.nodes().get(&id).await.unwrap();
    assert_eq!(node.status(), NodeStatus::Ready);
    assert_eq!(client.nodes().list(&id[..8]).await.unwrap().len(), 1);
    assert!(client.nodes().allocations(&id).await.unwrap().is_empty());

    client.nodes().set_eligibility(&id, false).await.unwrap();
    let node = client.nodes().get(&id).await.unwrap();
    assert_eq!(
        node.scheduling_eligibility(),
        SchedulingEligibility::Ineligible
    );
    client.nodes().set_eligibility(&id, true).await.unwrap();
    let node = client.nodes().get(&id).await.unwrap();
    assert_eq!(
        node.scheduling_eligibility(),
        SchedulingEligibility::Eligible
    );

    let hour = std::time::Duration::from_secs(3600).as_nanos() as i64;
    let drain = DrainStrategy {
        deadline_ns: hour,
        ..Default::default()
    };
    client.nodes().drain(&id, Some(drain), false).await.unwrap();
    let node = client.nodes().get(&id).await.unwrap();
    // A node with nothing on it may finish draining at once.
    assert!(
        node.drain_strategy.is_some() || node.last_drain.is_some(),
        "{node:?}"
    );
    assert_eq!(
        node.scheduling_eligibility(),
        SchedulingEligibility::Ineligible
    );
    client.nodes().drain(&id, None, true).await.unwrap();
    let node = client.nodes().get(&id).await.unwrap();
    assert!(node.drain_strategy.is_none(), "{node:?}");
    assert_eq!(
        node.scheduling_eligibility(),
        SchedulingEligibility::Eligible
    );

    let unknown = "00000000-0000-0000-0000-000000000000";
    assert!(
        client
            .nodes()
            .get(unknown)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        client
            .nodes()
            .drain(unknown, None, false)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        client
            .nodes()
            .set_eligibility(unknown, false)
            .await
            .unwrap_err()
            .is_not_found()
    );
    cluster.stop().await.unwrap();
}
