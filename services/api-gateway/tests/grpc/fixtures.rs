//! Jobs, nodes and placed allocations the gRPC cases share.

pub use crate::common::{job, register};

use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, Node};

/// A bare node in dc1.
pub fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        ..Default::default()
    }
}

/// A pending allocation of `job_id`'s group `web` on `node_id`.
pub fn placed(id: &str, node_id: &str, job_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: format!("{job_id}.web[0]"),
        namespace: "default".into(),
        job_id: job_id.into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

/// Stores `allocs` (all on `node_id`) as running, straight into the store,
/// and waits until the gateway lists the node with exactly that many.
pub async fn store_running_on(
    gw: &crate::common::TestGateway,
    nodes: &caravan_proto::node_service_client::NodeServiceClient<tonic::transport::Channel>,
    node_id: &str,
    allocs: Vec<Allocation>,
) {
    let count = allocs.len();
    for mut alloc in allocs {
        alloc.set_client_status(AllocClientStatus::Running);
        gw.store
            .put(&gw.keys.alloc(&alloc.id), &caravan_state::encode(&alloc), 0)
            .await
            .unwrap();
    }
    assert!(
        caravan_testkit::wait::holds_within(std::time::Duration::from_secs(5), || async {
            nodes
                .clone()
                .node_allocations(caravan_proto::NodeAllocationsRequest {
                    node_id: node_id.into(),
                    options: None,
                })
                .await
                .is_ok_and(|r| r.into_inner().allocs.len() == count)
        })
        .await
    );
}
