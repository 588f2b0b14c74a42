//! The gRPC layer: tonic service impls whose handlers only translate
//! messages and call the domain modules, and the router serving them all.

mod client;
mod cluster;
mod events;
mod jobs;

use caravan_proto::QueryOptions;
use caravan_proto::alloc_service_server::AllocServiceServer;
use caravan_proto::deployment_service_server::DeploymentServiceServer;
use caravan_proto::eval_service_server::EvalServiceServer;
use caravan_proto::event_service_server::EventServiceServer;
use caravan_proto::job_service_server::JobServiceServer;
use caravan_proto::node_client_service_server::NodeClientServiceServer;
use caravan_proto::node_service_server::NodeServiceServer;
use caravan_proto::status_service_server::StatusServiceServer;
use caravan_proto::system_service_server::SystemServiceServer;
use caravan_runtime::tonic_health;
use tonic::transport::server::Router;

pub use client::NodeClientApi;
pub use cluster::ClusterApi;
pub use events::EventApi;
pub use jobs::JobApi;

use crate::gateway::Gateway;
use crate::query::Query;

/// Resolves a request's query options against the gateway's limits.
pub(crate) fn query(gw: &Gateway, options: Option<QueryOptions>) -> Query {
    Query::new(options.as_ref(), gw.config.max_query_wait())
}

/// Every gRPC service of the gateway, with the standard health service.
pub async fn router(gw: &Gateway) -> Router {
    let limit = gw.config.max_body_bytes;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<JobServiceServer<JobApi>>().await;
    reporter
        .set_serving::<NodeClientServiceServer<NodeClientApi>>()
        .await;
    let cluster = ClusterApi(gw.clone());
    caravan_runtime::grpc::server()
        .add_service(health)
        .add_service(
            JobServiceServer::new(JobApi(gw.clone()))
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
        )
        .add_service(EvalServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX))
        .add_service(AllocServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX))
        .add_service(NodeServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX))
        .add_service(
            DeploymentServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX),
        )
        .add_service(
            EventServiceServer::new(EventApi(gw.clone())).max_encoding_message_size(usize::MAX),
        )
        .add_service(StatusServiceServer::new(cluster.clone()))
        .add_service(SystemServiceServer::new(cluster))
        .add_service(
            NodeClientServiceServer::new(NodeClientApi(gw.clone()))
                .max_decoding_message_size(limit.max(16 * 1024 * 1024))
                .max_encoding_message_size(usize::MAX),
        )
}
