//! The gRPC layer: tonic service impls whose handlers only translate
//! messages and call the domain modules, and the router serving them all.

mod acl;
pub mod acl_guard;
mod cluster;
mod events;
mod jobs;
mod services;
mod targets;
mod vars;

use caravan_proto::QueryOptions;
use caravan_proto::acl_service_server::{self, AclServiceServer};
use caravan_proto::alloc_service_server::{self, AllocServiceServer};
use caravan_proto::deployment_service_server::{self, DeploymentServiceServer};
use caravan_proto::eval_service_server::{self, EvalServiceServer};
use caravan_proto::event_service_server::{self, EventServiceServer};
use caravan_proto::job_service_server::{self, JobServiceServer};
use caravan_proto::node_service_server::{self, NodeServiceServer};
use caravan_proto::service_registry_service_server::{self, ServiceRegistryServiceServer};
use caravan_proto::status_service_server::{self, StatusServiceServer};
use caravan_proto::system_service_server::{self, SystemServiceServer};
use caravan_proto::variable_service_server::{self, VariableServiceServer};
use caravan_runtime::grpc::Router;

use acl::AclApi;
use acl_guard::Guarded;
use cluster::ClusterApi;
use events::EventApi;
use jobs::JobApi;
use services::ServiceRegistryApi;
use vars::VariableApi;

use caravan_gateway_core::acl::ListScope;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::query::Query;

/// Resolves a request's query options against the gateway's limits.
pub(crate) fn query(gw: &Gateway, options: Option<QueryOptions>) -> Query {
    Query::new(options.as_ref(), gw.config.max_query_wait())
}

/// The [`ListScope`] the ACL guard handed a list method's request: with
/// it the answer keeps to what the caller may read.
pub(crate) fn list_scope<T>(request: &tonic::Request<T>) -> Option<ListScope> {
    request.extensions().get::<ListScope>().cloned()
}

/// The public gRPC services (the node-facing one is `caravan-gateway-node`'s).
pub const SERVICES: &[&str] = &[
    job_service_server::SERVICE_NAME,
    eval_service_server::SERVICE_NAME,
    alloc_service_server::SERVICE_NAME,
    node_service_server::SERVICE_NAME,
    deployment_service_server::SERVICE_NAME,
    event_service_server::SERVICE_NAME,
    status_service_server::SERVICE_NAME,
    system_service_server::SERVICE_NAME,
    variable_service_server::SERVICE_NAME,
    acl_service_server::SERVICE_NAME,
    service_registry_service_server::SERVICE_NAME,
];

/// `router` with every public gRPC service added, each behind the ACL guard
/// (which passes requests through when ACLs are off).
pub fn routes(router: Router, gw: &Gateway) -> Router {
    let limit = gw.config.max_body_bytes;
    let cluster = ClusterApi(gw.clone());
    router
        .add_service(Guarded::new(
            JobServiceServer::new(JobApi(gw.clone()))
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(
            EvalServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(
            AllocServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(
            NodeServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(
            DeploymentServiceServer::new(cluster.clone()).max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(
            EventServiceServer::new(EventApi(gw.clone())).max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(StatusServiceServer::new(cluster.clone()), gw))
        .add_service(Guarded::new(SystemServiceServer::new(cluster), gw))
        .add_service(Guarded::new(
            VariableServiceServer::new(VariableApi(gw.clone()))
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
            gw,
        ))
        .add_service(Guarded::new(AclServiceServer::new(AclApi(gw.clone())), gw))
        .add_service(Guarded::new(
            ServiceRegistryServiceServer::new(ServiceRegistryApi(gw.clone()))
                .max_encoding_message_size(usize::MAX),
            gw,
        ))
}
