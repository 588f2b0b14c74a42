//! Service instances for `nomadService` and the services of a namespace for
//! `nomadServices`, read from the gateway's `ServiceRegistryService`.

use std::time::Duration;

use caravan_proto::service_registry_service_client::ServiceRegistryServiceClient;
use caravan_proto::{GetServiceRequest, ListServicesRequest};
use caravan_template::{DepValue, ServiceInstance, ServiceStub};
use tonic::Status;

use super::source::{Fetched, index, options, request};
use crate::node_api::NodeApi;

/// The instances of service `name` in `namespace` (only those tagged `tag`,
/// when given): at once, or with `after`, once they changed past it.
pub async fn instances(
    api: &NodeApi,
    token: Option<&str>,
    namespace: &str,
    name: &str,
    tag: Option<&str>,
    after: i64,
    wait: Option<Duration>,
) -> Result<Fetched, Status> {
    let resp = api
        .call("GetService", |conn| {
            let mut c = ServiceRegistryServiceClient::new(conn);
            let req = request(
                GetServiceRequest {
                    name: name.to_string(),
                    tag: tag.unwrap_or_default().to_string(),
                    options: Some(options(namespace, "", after, wait)),
                },
                token,
                wait,
            );
            async move { c.get_service(req).await.map(tonic::Response::into_inner) }
        })
        .await?;
    let instances = resp
        .instances
        .into_iter()
        .map(|r| ServiceInstance {
            id: r.id,
            service_name: r.service_name,
            namespace: r.namespace,
            node_id: r.node_id,
            datacenter: r.datacenter,
            job_id: r.job_id,
            alloc_id: r.alloc_id,
            tags: r.tags,
            address: r.address,
            port: u32::try_from(r.port).unwrap_or(0),
            create_index: index(r.create_revision),
            modify_index: index(r.modify_revision),
        })
        .collect();
    Ok(Fetched {
        value: DepValue::Service(instances),
        revision: resp.meta.map_or(0, |m| m.revision),
    })
}

/// The services of `namespace` with their tags, as [`instances`] reads.
pub async fn names(
    api: &NodeApi,
    token: Option<&str>,
    namespace: &str,
    after: i64,
    wait: Option<Duration>,
) -> Result<Fetched, Status> {
    let resp = api
        .call("ListServices", |conn| {
            let mut c = ServiceRegistryServiceClient::new(conn);
            let req = request(
                ListServicesRequest {
                    options: Some(options(namespace, "", after, wait)),
                },
                token,
                wait,
            );
            async move { c.list_services(req).await.map(tonic::Response::into_inner) }
        })
        .await?;
    let stubs = resp
        .namespaces
        .into_iter()
        .filter(|n| n.namespace == namespace)
        .flat_map(|n| n.services)
        .map(|s| ServiceStub {
            name: s.name,
            tags: s.tags,
        })
        .collect();
    Ok(Fetched {
        value: DepValue::Services(stubs),
        revision: resp.meta.map_or(0, |m| m.revision),
    })
}
