//! `VariableService` over gRPC: thin handlers over [`caravan_gateway_core::vars`].

use caravan_proto::variable_service_server::VariableService;
use caravan_proto::{
    DeleteVariableRequest, DeleteVariableResponse, GetVariableRequest, GetVariableResponse,
    ListVariablesRequest, ListVariablesResponse, PutVariableRequest, PutVariableResponse,
};
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use crate::{list_scope, query};
use caravan_gateway_core::acl::ListScope;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::query::DEFAULT_NAMESPACE;
use caravan_gateway_core::vars;

/// The variables API.
#[derive(Debug, Clone)]
pub struct VariableApi(pub Gateway);

fn namespace_or_default(namespace: String) -> String {
    if namespace.is_empty() {
        DEFAULT_NAMESPACE.to_string()
    } else {
        namespace
    }
}

#[tonic::async_trait]
impl VariableService for VariableApi {
    async fn list_variables(
        &self,
        request: Request<ListVariablesRequest>,
    ) -> Result<Response<ListVariablesResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (mut variables, meta) = vars::list(&self.0, &q).await?;
        ListScope::keep(scope.as_ref(), &mut variables, |v| (&v.namespace, &v.path));
        Ok(Response::new(ListVariablesResponse {
            variables,
            meta: Some(meta),
        }))
    }

    async fn get_variable(
        &self,
        request: Request<GetVariableRequest>,
    ) -> Result<Response<GetVariableResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (variable, meta) = vars::get(&self.0, &req.path, &q).await?;
        Ok(Response::new(GetVariableResponse {
            variable: Some(variable),
            meta: Some(meta),
        }))
    }

    async fn put_variable(
        &self,
        request: Request<PutVariableRequest>,
    ) -> Result<Response<PutVariableResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let namespace = namespace_or_default(req.namespace);
        let w = vars::put(
            &self.0,
            &namespace,
            &req.path,
            req.items,
            req.cas,
            vars::LockOp::Write { id: None },
        )
        .await?;
        Ok(Response::new(PutVariableResponse {
            written: w.applied,
            variable: w.variable,
            revision: w.revision,
        }))
    }

    async fn delete_variable(
        &self,
        request: Request<DeleteVariableRequest>,
    ) -> Result<Response<DeleteVariableResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let namespace = namespace_or_default(req.namespace);
        let w = vars::delete(&self.0, &namespace, &req.path, req.cas, None).await?;
        Ok(Response::new(DeleteVariableResponse {
            deleted: w.applied,
            conflict: w.variable,
            revision: w.revision,
        }))
    }
}
