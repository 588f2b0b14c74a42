//! ACLs over gRPC: lists over every namespace (`namespace = "*"`) answer
//! what the token may read, a token with no read is refused, and the guard
//! reads no request's body (a large one goes to the method unread).

use std::sync::Arc;

use caravan_proto::eval_service_client::EvalServiceClient;
use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{
    LeadersResponse, ListEvaluationsRequest, ListJobsRequest, ListJobsResponse, QueryOptions,
};
use caravan_store::MemStore;
use serde_json::json;
use tonic::Request;
use tonic::transport::Channel;

use crate::common::{HttpAnswer, TestGateway, http_with};

async fn start(name: &str) -> TestGateway {
    TestGateway::start_with(Arc::new(MemStore::new()), name, |c| c.acl.enabled = true).await
}

/// A successful HTTP call as `token`.
async fn http(gw: &TestGateway, token: &str, method: &str, path: &str, body: &str) -> HttpAnswer {
    let answer = http_with(
        gw.bound.http,
        method,
        path,
        &[("X-Nomad-Token", token)],
        body.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{method} {path}: {}", answer.text());
    answer
}

/// A client token holding a new policy with `rules`.
async fn token_with(gw: &TestGateway, root: &str, name: &str, rules: &str) -> String {
    let policy = json!({"Name": name, "Rules": rules}).to_string();
    http(gw, root, "PUT", &format!("/v1/acl/policy/{name}"), &policy).await;
    let token = json!({"Name": name, "Type": "client", "Policies": [name]}).to_string();
    let token = http(gw, root, "POST", "/v1/acl/token", &token).await.json();
    token["SecretID"].as_str().unwrap().to_string()
}

fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("x-nomad-token", token.parse().unwrap());
    request
}

fn every_namespace() -> Option<QueryOptions> {
    Some(QueryOptions {
        namespace: "*".into(),
        ..Default::default()
    })
}

async fn list_jobs(channel: &Channel, token: &str) -> Result<ListJobsResponse, tonic::Status> {
    let request = ListJobsRequest {
        options: every_namespace(),
    };
    JobServiceClient::new(channel.clone())
        .list_jobs(with_token(request, token))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_over_every_namespace_keep_to_what_the_token_reads() {
    let gw = start("grpc-acl-lists").await;
    let root = http(&gw, "", "POST", "/v1/acl/bootstrap", "").await.json();
    let root = root["SecretID"].as_str().unwrap().to_string();
    for (id, ns) in [("web-a", "a"), ("web-b", "b")] {
        let made = json!({ "Name": ns }).to_string();
        http(&gw, &root, "PUT", &format!("/v1/namespace/{ns}"), &made).await;
        let job = json!({"Job": {
            "ID": id, "Namespace": ns, "Type": "batch",
            "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
                "Name": "t", "Driver": "mock", "Resources": {"CPU": 100, "MemoryMB": 32}
            }]}]
        }});
        http(&gw, &root, "PUT", "/v1/jobs", &job.to_string()).await;
    }
    let reader = token_with(
        &gw,
        &root,
        "a-reader",
        r#"namespace "a" { policy = "read" }"#,
    )
    .await;
    let nodes_only = token_with(&gw, &root, "nodes", r#"node { policy = "read" }"#).await;
    let channel = gw.channel().await;

    let all = list_jobs(&channel, &root).await.unwrap();
    assert_eq!(all.jobs.len(), 2);
    let mine = list_jobs(&channel, &reader).await.unwrap();
    let ids: Vec<(&str, &str)> = mine
        .jobs
        .iter()
        .map(|j| (j.namespace.as_str(), j.id.as_str()))
        .collect();
    assert_eq!(ids, [("a", "web-a")]);
    let evals = EvalServiceClient::new(channel.clone())
        .list_evaluations(with_token(
            ListEvaluationsRequest {
                options: every_namespace(),
            },
            &reader,
        ))
        .await
        .unwrap()
        .into_inner()
        .evals;
    assert_eq!(evals.len(), 1, "{evals:?}");
    assert_eq!(evals[0].namespace, "a");

    let refused = list_jobs(&channel, &nodes_only).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let anonymous = list_jobs(&channel, "").await.unwrap_err();
    assert_eq!(anonymous.code(), tonic::Code::PermissionDenied);
    gw.stop().await;
}

/// A message whose only field is one `LeadersRequest` does not know, to
/// make a request as large as wanted.
#[derive(Clone, PartialEq, prost::Message)]
struct Padded {
    #[prost(bytes = "vec", tag = "15")]
    pad: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_that_reads_no_message_takes_a_large_body_unread() {
    let gw = start("grpc-acl-unread").await;
    let mut grpc = tonic::client::Grpc::new(gw.channel().await);
    grpc.ready().await.unwrap();
    // Seven messages of 3 MiB: each within a message's limit, together
    // more than any one request the gateway would read whole.
    let messages = (0..7).map(|_| Padded {
        pad: vec![7; 3 * 1024 * 1024],
    });
    let path = "/caravan.v1.StatusService/Leaders".parse().unwrap();
    let codec = tonic_prost::ProstCodec::<Padded, LeadersResponse>::default();
    let answer = grpc
        .client_streaming(Request::new(futures::stream::iter(messages)), path, codec)
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    gw.stop().await;
}

/// Writes a registration of service `name` in `ns` straight into the store, as
/// a node's would be.
async fn register_instance(gw: &TestGateway, ns: &str, name: &str) {
    let reg = caravan_proto::ServiceRegistration {
        id: format!("_nomad-task-a-{ns}-server-{name}-http"),
        service_name: name.into(),
        namespace: ns.into(),
        alloc_id: format!("a-{ns}"),
        ..Default::default()
    };
    let key = gw.keys.service(ns, name, &reg.id);
    gw.store
        .txn(
            caravan_store::Txn::new()
                .and_then(caravan_store::Op::put(key, caravan_state::encode(&reg))),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_registry_reads_need_read_job_in_the_namespace() {
    use caravan_proto::service_registry_service_client::ServiceRegistryServiceClient;
    use caravan_proto::{GetServiceRequest, ListServicesRequest};

    let gw = start("grpc-acl-services").await;
    let root = http(&gw, "", "POST", "/v1/acl/bootstrap", "").await.json();
    let root = root["SecretID"].as_str().unwrap().to_string();
    for ns in ["a", "b"] {
        let made = json!({ "Name": ns }).to_string();
        http(&gw, &root, "PUT", &format!("/v1/namespace/{ns}"), &made).await;
        register_instance(&gw, ns, "web").await;
    }
    let reader = token_with(
        &gw,
        &root,
        "a-reader",
        r#"namespace "a" { policy = "read" }"#,
    )
    .await;
    let mut registry = ServiceRegistryServiceClient::new(gw.channel().await);

    let listed = registry
        .list_services(with_token(
            ListServicesRequest {
                options: every_namespace(),
            },
            &reader,
        ))
        .await
        .unwrap()
        .into_inner();
    let namespaces: Vec<_> = listed
        .namespaces
        .iter()
        .map(|n| n.namespace.as_str())
        .collect();
    assert_eq!(namespaces, ["a"], "the list keeps to what the token reads");

    let get = |ns: &str| GetServiceRequest {
        name: "web".into(),
        options: Some(QueryOptions {
            namespace: ns.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let read = registry
        .get_service(with_token(get("a"), &reader))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.instances.len(), 1);
    let refused = registry
        .get_service(with_token(get("b"), &reader))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let anonymous = registry
        .get_service(with_token(get("a"), ""))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), tonic::Code::PermissionDenied);
    gw.stop().await;
}
