//! What templates read, fetched from the api-gateways as the task (its
//! identity's token): Variables through `VariableService`, service
//! instances through `ServiceRegistryService`. A read with a revision
//! blocks until something it covers changes past that revision (or the
//! wait is up), so one loop per dependency watches it.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_proto::variable_service_client::VariableServiceClient;
use caravan_proto::{GetVariableRequest, ListVariablesRequest, QueryOptions};
use caravan_template::{Dep, DepValue, Variable, VariableMeta};
use tonic::{Code, Status};

use crate::node_api::NodeApi;

/// Longest a blocking read waits before it answers unchanged.
pub const BLOCK_WAIT: Duration = Duration::from_secs(60);

/// One dependency's value, with the revision its read reflects.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub value: DepValue,
    pub revision: i64,
}

pub(super) fn request<T>(msg: T, token: Option<&str>, wait: Option<Duration>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token
        && let Ok(v) = t.parse()
    {
        req.metadata_mut().insert("x-nomad-token", v);
    }
    req.set_timeout(wait.unwrap_or_default() + Duration::from_secs(10));
    req
}

pub(super) fn options(
    namespace: &str,
    prefix: &str,
    after: i64,
    wait: Option<Duration>,
) -> QueryOptions {
    QueryOptions {
        namespace: namespace.to_string(),
        min_revision: after,
        wait_ns: wait.map_or(0, |w| i64::try_from(w.as_nanos()).unwrap_or(i64::MAX)),
        prefix: prefix.to_string(),
    }
}

pub(super) fn index(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// Reads `dep` now, or, with `after`, once something it covers changed past
/// that revision (at most [`BLOCK_WAIT`] later).
pub async fn fetch(
    api: &NodeApi,
    token: Option<&str>,
    dep: &Dep,
    after: Option<i64>,
) -> Result<Fetched, Status> {
    let wait = after.map(|_| BLOCK_WAIT);
    let after = after.unwrap_or(0);
    match dep {
        Dep::Var { namespace, path } => {
            // The list over the path's prefix blocks whether or not the
            // variable exists, and tells whether it does.
            let (metas, revision) = list_vars(api, token, namespace, path, after, wait).await?;
            if !metas.iter().any(|m| &m.path == path) {
                return Ok(Fetched {
                    value: DepValue::Var(None),
                    revision,
                });
            }
            let var = get_var(api, token, namespace, path).await?;
            Ok(Fetched {
                value: DepValue::Var(var),
                revision,
            })
        }
        Dep::VarList { namespace, prefix } => {
            let (metas, revision) = list_vars(api, token, namespace, prefix, after, wait).await?;
            Ok(Fetched {
                value: DepValue::VarList(metas),
                revision,
            })
        }
        Dep::Service {
            namespace,
            name,
            tag,
        } => {
            super::services::instances(api, token, namespace, name, tag.as_deref(), after, wait)
                .await
        }
        Dep::Services { namespace } => {
            super::services::names(api, token, namespace, after, wait).await
        }
    }
}

async fn list_vars(
    api: &NodeApi,
    token: Option<&str>,
    namespace: &str,
    prefix: &str,
    after: i64,
    wait: Option<Duration>,
) -> Result<(Vec<VariableMeta>, i64), Status> {
    let resp = api
        .call("ListVariables", |conn| {
            let mut c = VariableServiceClient::new(conn);
            let req = request(
                ListVariablesRequest {
                    options: Some(options(namespace, prefix, after, wait)),
                },
                token,
                wait,
            );
            async move { c.list_variables(req).await.map(tonic::Response::into_inner) }
        })
        .await?;
    let metas = resp
        .variables
        .into_iter()
        .map(|m| VariableMeta {
            namespace: m.namespace,
            path: m.path,
            create_index: index(m.create_revision),
            modify_index: index(m.modify_revision),
        })
        .collect();
    Ok((metas, resp.meta.map_or(0, |m| m.revision)))
}

async fn get_var(
    api: &NodeApi,
    token: Option<&str>,
    namespace: &str,
    path: &str,
) -> Result<Option<Variable>, Status> {
    let got = api
        .call("GetVariable", |conn| {
            let mut c = VariableServiceClient::new(conn);
            let req = request(
                GetVariableRequest {
                    path: path.to_string(),
                    options: Some(options(namespace, "", 0, None)),
                },
                token,
                None,
            );
            async move { c.get_variable(req).await.map(tonic::Response::into_inner) }
        })
        .await;
    let resp = match got {
        Ok(r) => r,
        // Deleted between the list and the read.
        Err(s) if s.code() == Code::NotFound => return Ok(None),
        Err(s) => return Err(s),
    };
    let Some(var) = resp.variable else {
        return Ok(None);
    };
    let meta = var.meta.unwrap_or_default();
    Ok(Some(Variable {
        namespace: meta.namespace,
        path: meta.path,
        items: var.items.into_iter().collect::<BTreeMap<_, _>>(),
        create_index: index(meta.create_revision),
        modify_index: index(meta.modify_revision),
    }))
}
