//! `ServiceRegistryService` over gRPC: thin handlers over
//! [`caravan_gateway_core::service_registry`], blocking as its HTTP routes do.

use caravan_proto::service_registry_service_server::ServiceRegistryService;
use caravan_proto::{
    GetServiceRequest, GetServiceResponse, ListServicesRequest, ListServicesResponse,
    NamespaceServiceList, ServiceListEntry,
};
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use crate::{list_scope, query};
use caravan_gateway_core::acl::ListScope;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::service_registry;

/// The service registry's reads.
#[derive(Debug, Clone)]
pub struct ServiceRegistryApi(pub Gateway);

#[tonic::async_trait]
impl ServiceRegistryService for ServiceRegistryApi {
    async fn list_services(
        &self,
        request: Request<ListServicesRequest>,
    ) -> Result<Response<ListServicesResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (list, meta) = service_registry::list(&self.0, &q).await?;
        let mut namespaces: Vec<NamespaceServiceList> = list
            .into_iter()
            .map(|ns| NamespaceServiceList {
                namespace: ns.namespace,
                services: ns
                    .services
                    .into_iter()
                    .map(|s| ServiceListEntry {
                        name: s.name,
                        tags: s.tags,
                    })
                    .collect(),
            })
            .collect();
        ListScope::keep(scope.as_ref(), &mut namespaces, |n| (&n.namespace, ""));
        Ok(Response::new(ListServicesResponse {
            namespaces,
            meta: Some(meta),
        }))
    }

    async fn get_service(
        &self,
        request: Request<GetServiceRequest>,
    ) -> Result<Response<GetServiceResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        if req.name.is_empty() {
            return Err(Status::invalid_argument("name: a service name is required"));
        }
        let q = query(&self.0, req.options);
        let tag = Some(req.tag.as_str()).filter(|t| !t.is_empty());
        let (instances, meta) = service_registry::get(&self.0, &req.name, tag, &q).await?;
        Ok(Response::new(GetServiceResponse {
            instances,
            meta: Some(meta),
        }))
    }
}
