//! ACLs over HTTP, in-process: every route against the route table with no
//! token, a read-only token and a management token; bootstrap once; policy
//! and token round trips; the anonymous policy; lists and the event stream
//! filtered to what a token may read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use caravan_api_gateway::{ACL_ROUTES, AclNeed};
use caravan_store::{MemStore, Store};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::{Backend, HttpAnswer, TestGateway, http_with};
use crate::events::read_events;

pub(crate) async fn start(store: Arc<dyn Store>, name: &str) -> TestGateway {
    TestGateway::start_with(store, name, |c| c.acl.enabled = true).await
}

/// A request with `token` in `X-Nomad-Token` (none: anonymous).
pub(crate) async fn call(
    gw: &TestGateway,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &[u8],
) -> HttpAnswer {
    let headers: Vec<(&str, &str)> = token.map(|t| ("X-Nomad-Token", t)).into_iter().collect();
    http_with(gw.bound.http, method, path, &headers, body).await
}

/// Creates namespace `ns` with the management token `root`.
async fn make_namespace(gw: &TestGateway, root: &str, ns: &str) {
    let made = json!({ "Name": ns }).to_string();
    let path = format!("/v1/namespace/{ns}");
    let answer = call(gw, Some(root), "PUT", &path, made.as_bytes()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
}

pub(crate) async fn bootstrap(gw: &TestGateway) -> String {
    let answer = call(gw, None, "POST", "/v1/acl/bootstrap", b"").await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let token = answer.json();
    assert_eq!(token["Type"], "management");
    assert_eq!(token["Policies"], Value::Null, "Go's nil list");
    token["SecretID"].as_str().unwrap().to_string()
}

pub(crate) async fn put_policy(gw: &TestGateway, root: &str, name: &str, rules: &str) {
    let body = json!({"Name": name, "Description": "", "Rules": rules}).to_string();
    let path = format!("/v1/acl/policy/{name}");
    let answer = call(gw, Some(root), "PUT", &path, body.as_bytes()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
}

pub(crate) async fn client_token(gw: &TestGateway, root: &str, policies: &[&str]) -> Value {
    let body = json!({"Name": "t", "Type": "client", "Policies": policies}).to_string();
    let answer = call(gw, Some(root), "POST", "/v1/acl/token", body.as_bytes()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

fn job(id: &str, namespace: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"Job": {
        "ID": id,
        "Namespace": namespace,
        "Type": "batch",
        "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
            "Name": "t", "Driver": "mock", "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }}))
    .unwrap()
}

const READ_ONLY: &str = r#"
namespace "*" {
  policy = "read"
  variables {
    path "*" { capabilities = ["read"] }
  }
}
node { policy = "read" }
agent { policy = "read" }
operator { policy = "read" }
node_pool "*" { policy = "read" }
"#;

/// Whether the read-only policy grants `need` (with the route's dummy
/// values, handler-checked routes naming someone else's object refuse).
fn read_only_allows(need: AclNeed, pattern: &str) -> bool {
    match need {
        AclNeed::Public => true,
        AclNeed::Token => !pattern.contains('{'),
        AclNeed::Ns(cap) => [
            "list-jobs",
            "parse-job",
            "read-job",
            "read-job-scaling",
            "list-scaling-policies",
            "read-scaling-policy",
        ]
        .contains(&cap),
        AclNeed::NodeRead | AclNeed::AgentRead | AclNeed::OperatorRead => true,
        AclNeed::Var(cap) => cap == "read" || cap == "list",
        AclNeed::AnyRead | AclNeed::NamespaceAny | AclNeed::ServiceRead => true,
        AclNeed::NodePool(cap) => cap == "read",
        AclNeed::PoolNodes | AclNeed::PoolJobs => true,
        AclNeed::NodeWrite
        | AclNeed::AgentWrite
        | AclNeed::OperatorWrite
        | AclNeed::Management
        | AclNeed::Exec => false,
    }
}

/// The route's pattern with its parameters filled with names of nothing.
pub(crate) fn concrete(pattern: &str) -> String {
    pattern
        .replace("{id}", "no-such-thing")
        .replace("{alloc_id}", "00000000-0000-0000-0000-000000000000")
        .replace("{name}", "no-such-policy")
        .replace("{accessor}", "00000000-0000-0000-0000-000000000000")
        .replace("{*path}", "some/var")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_obeys_the_acl_table() {
    let gw = start(Arc::new(MemStore::new()), "acl-table").await;
    let root = bootstrap(&gw).await;
    put_policy(&gw, &root, "readonly", READ_ONLY).await;
    let reader = client_token(&gw, &root, &["readonly"]).await;
    let reader = reader["SecretID"].as_str().unwrap().to_string();
    let mut checked = 0;
    for rule in ACL_ROUTES {
        let method = if rule.method == "*" {
            "GET"
        } else {
            rule.method
        };
        let path = concrete(rule.pattern);
        // Bootstrapping again is refused whoever asks (checked below).
        let anonymous = call(&gw, None, method, &path, b"").await;
        // The list of node pools is anyone's, cut to what they may read.
        let public = rule.op.need == AclNeed::Public
            || (rule.op.list && matches!(rule.op.need, AclNeed::NodePool(_)));
        assert_eq!(
            anonymous.status == 403,
            !public,
            "{method} {path} without a token: {} {}",
            anonymous.status,
            anonymous.text()
        );
        if rule.pattern == "/v1/event/stream" {
            // A stream that is allowed never ends; it is tested below.
            continue;
        }
        let read = call(&gw, Some(&reader), method, &path, b"").await;
        let want = read_only_allows(rule.op.need, rule.pattern);
        assert_eq!(
            read.status != 403,
            want,
            "{method} {path} with a read-only token: {} {}",
            read.status,
            read.text()
        );
        if !want {
            assert_eq!(read.text(), "Permission denied", "{method} {path}");
        }
        let managed = call(&gw, Some(&root), method, &path, b"").await;
        assert_ne!(
            managed.status,
            403,
            "{method} {path} with a management token: {}",
            managed.text()
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} routes checked");
    // A secret nobody holds is refused with Nomad's words.
    let unknown = call(&gw, Some("not-a-secret"), "GET", "/v1/jobs", b"").await;
    assert_eq!(unknown.status, 403);
    assert_eq!(unknown.text(), "ACL token not found");
    gw.stop().await;
}

async fn bootstrap_and_round_trips(backend: Backend) {
    let gw = start(backend.store().await, "acl-crud").await;
    let root = bootstrap(&gw).await;
    let again = call(&gw, None, "POST", "/v1/acl/bootstrap", b"").await;
    assert_eq!(again.status, 400);
    assert!(
        again.text().contains("ACL bootstrap already done"),
        "{}",
        again.text()
    );

    // Policies: HCL and JSON rules, a parse error named, list and read.
    put_policy(
        &gw,
        &root,
        "dev",
        r#"namespace "default" { policy = "write" }"#,
    )
    .await;
    put_policy(
        &gw,
        &root,
        "ops",
        r#"{"node": {"policy": "write"}, "agent": {"policy": "read"}}"#,
    )
    .await;
    // Empty rules are accepted, as Nomad (and python-nomad's suite) do.
    put_policy(&gw, &root, "empty", "").await;
    let bad = json!({"Name": "bad", "Rules": r#"namespace "x" { policy = "fly" }"#}).to_string();
    let answer = call(
        &gw,
        Some(&root),
        "PUT",
        "/v1/acl/policy/bad",
        bad.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.text().contains("Invalid namespace policy"),
        "{}",
        answer.text()
    );
    let mismatch = json!({"Name": "other", "Rules": "node { policy = \"read\" }"}).to_string();
    let answer = call(
        &gw,
        Some(&root),
        "PUT",
        "/v1/acl/policy/dev",
        mismatch.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 400);
    let list = call(&gw, Some(&root), "GET", "/v1/acl/policies", b"")
        .await
        .json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["Name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["dev", "empty", "ops"]);
    assert!(list[0].get("Rules").is_none(), "stubs carry no rules");
    let dev = call(&gw, Some(&root), "GET", "/v1/acl/policy/dev", b"").await;
    assert_eq!(dev.status, 200);
    assert_eq!(
        dev.json()["Rules"],
        r#"namespace "default" { policy = "write" }"#
    );
    assert!(dev.json()["CreateIndex"].as_u64().unwrap() > 0);

    // A token may name a policy that does not exist yet (as in Nomad).
    let token = client_token(&gw, &root, &["dev", "readonly"]).await;
    let secret = token["SecretID"].as_str().unwrap().to_string();
    let accessor = token["AccessorID"].as_str().unwrap().to_string();
    assert_eq!(token["Type"], "client");
    assert_eq!(token["ExpirationTime"], Value::Null);
    assert!(token["CreateTime"].as_str().unwrap().ends_with('Z'));
    let tokens = call(&gw, Some(&root), "GET", "/v1/acl/tokens", b"")
        .await
        .json();
    let listed: Vec<&Value> = tokens
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["AccessorID"] == accessor.as_str())
        .collect();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].get("SecretID").is_none(), "{tokens}");
    assert_eq!(tokens.as_array().unwrap().len(), 2, "bootstrap + client");
    let path = format!("/v1/acl/token/{accessor}");
    let read = call(&gw, Some(&root), "GET", &path, b"").await.json();
    assert_eq!(read["SecretID"], "", "stored secrets are hashes");
    assert_eq!(read["Policies"], json!(["dev", "readonly"]));
    // Self echoes the presented secret; Bearer works as X-Nomad-Token.
    let bearer = format!("Bearer {secret}");
    let me = http_with(
        gw.bound.http,
        "GET",
        "/v1/acl/token/self",
        &[("Authorization", bearer.as_str())],
        b"",
    )
    .await;
    assert_eq!(me.status, 200, "{}", me.text());
    assert_eq!(me.json()["SecretID"], secret.as_str());
    assert_eq!(me.json()["AccessorID"], accessor.as_str());
    // The client token sees its own policies only, and may not write them.
    let own = call(&gw, Some(&secret), "GET", "/v1/acl/policies", b"")
        .await
        .json();
    assert_eq!(own.as_array().unwrap().len(), 1, "{own}");
    let other = call(&gw, Some(&secret), "GET", "/v1/acl/policy/ops", b"").await;
    assert_eq!(other.status, 403);
    let write = call(&gw, Some(&secret), "DELETE", "/v1/acl/policy/dev", b"").await;
    assert_eq!(write.status, 403);
    // Its policy lets it register in default, not read nodes.
    let registered = call(
        &gw,
        Some(&secret),
        "PUT",
        "/v1/jobs",
        &job("web", "default"),
    )
    .await;
    assert_eq!(registered.status, 200, "{}", registered.text());
    let nodes = call(&gw, Some(&secret), "GET", "/v1/nodes", b"").await;
    assert_eq!(nodes.status, 403);

    // Update: new name and policies, same secret.
    let update = json!({"AccessorID": accessor, "Name": "renamed", "Type": "client",
                        "Policies": ["ops"]})
    .to_string();
    let updated = call(&gw, Some(&root), "PUT", &path, update.as_bytes()).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["Name"], "renamed");
    let nodes = call(&gw, Some(&secret), "GET", "/v1/nodes", b"").await;
    assert_eq!(nodes.status, 200, "the new policy applies at once");
    let jobs = call(
        &gw,
        Some(&secret),
        "PUT",
        "/v1/jobs",
        &job("web2", "default"),
    )
    .await;
    assert_eq!(jobs.status, 403);

    // Delete: the secret stops working; deleting again is an error.
    let deleted = call(&gw, Some(&root), "DELETE", &path, b"").await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    let gone = call(&gw, Some(&secret), "GET", "/v1/nodes", b"").await;
    assert_eq!(
        (gone.status, gone.text().as_str()),
        (403, "ACL token not found")
    );
    let twice = call(&gw, Some(&root), "DELETE", &path, b"").await;
    assert_eq!(twice.status, 400);
    let missing = call(&gw, Some(&root), "GET", &path, b"").await;
    assert_eq!(missing.status, 404);
    let dropped = call(&gw, Some(&root), "DELETE", "/v1/acl/policy/dev", b"").await;
    assert_eq!(dropped.status, 200);
    let dropped = call(&gw, Some(&root), "GET", "/v1/acl/policy/dev", b"").await;
    assert_eq!(dropped.status, 404);

    // Secrets are stored hashed: no stored value holds one.
    let stored = gw.store.range(gw.keys.range()).await.unwrap();
    for kv in &stored.kvs {
        let text = String::from_utf8_lossy(&kv.value);
        assert!(!text.contains(&root), "secret stored in clear");
    }
    gw.stop().await;
}

async fn anonymous_policy_and_filtered_lists(backend: Backend) {
    let gw = start(backend.store().await, "acl-anon").await;
    let root = bootstrap(&gw).await;
    let none = call(&gw, None, "GET", "/v1/jobs", b"").await;
    assert_eq!(none.status, 403);
    put_policy(
        &gw,
        &root,
        "anonymous",
        r#"namespace "default" { policy = "read" }"#,
    )
    .await;
    let anon = call(&gw, None, "GET", "/v1/jobs", b"").await;
    assert_eq!(anon.status, 200, "{}", anon.text());
    let write = call(&gw, None, "PUT", "/v1/jobs", &job("x", "default")).await;
    assert_eq!(write.status, 403);

    let mut evals = Vec::new();
    make_namespace(&gw, &root, "prod").await;
    for (id, ns) in [("web", "default"), ("api", "prod")] {
        let answer = call(&gw, Some(&root), "PUT", "/v1/jobs", &job(id, ns)).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        evals.push(answer.json()["EvalID"].as_str().unwrap().to_string());
    }
    put_policy(
        &gw,
        &root,
        "default-writer",
        r#"namespace "default" { policy = "write" }"#,
    )
    .await;
    let writer = client_token(&gw, &root, &["default-writer"]).await;
    let writer = writer["SecretID"].as_str().unwrap().to_string();
    // `?namespace=*` lists only what the token may read.
    let all = call(&gw, Some(&root), "GET", "/v1/jobs?namespace=*", b"")
        .await
        .json();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    let mine = call(&gw, Some(&writer), "GET", "/v1/jobs?namespace=*", b"")
        .await
        .json();
    let ids: Vec<&str> = mine
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["ID"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["web"]);
    let theirs = call(&gw, Some(&writer), "GET", "/v1/jobs?namespace=prod", b"").await;
    assert_eq!(theirs.status, 403);
    // Lists and search are filtered; elsewhere `*` needs a management token.
    let search = call(
        &gw,
        Some(&writer),
        "GET",
        "/v1/search?prefix=&context=jobs&namespace=*",
        b"",
    )
    .await;
    assert_eq!(search.status, 200, "{}", search.text());
    assert_eq!(search.json()["Matches"], json!({"jobs": ["web"]}));
    let summary = call(
        &gw,
        Some(&writer),
        "GET",
        "/v1/job/web/summary?namespace=*",
        b"",
    )
    .await;
    assert_eq!(summary.status, 403);
    // An object named by id is checked in its own namespace.
    let own_eval = format!("/v1/evaluation/{}", evals[0]);
    let own_eval = call(&gw, Some(&writer), "GET", &own_eval, b"").await;
    assert_eq!(own_eval.status, 200, "{}", own_eval.text());
    let prod_eval = format!("/v1/evaluation/{}", evals[1]);
    let prod_eval = call(&gw, Some(&writer), "GET", &prod_eval, b"").await;
    assert_eq!(prod_eval.status, 403);
    // A body naming another namespace is checked there too.
    let smuggled = call(&gw, Some(&writer), "PUT", "/v1/jobs", &job("sneak", "prod")).await;
    assert_eq!(smuggled.status, 403);
    gw.stop().await;
}

/// A search as `token` (`POST` with `request` as its body).
async fn search(gw: &TestGateway, token: &str, path: &str, request: Value) -> HttpAnswer {
    call(
        gw,
        Some(token),
        "POST",
        path,
        request.to_string().as_bytes(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_shows_only_what_the_token_may_read() {
    let gw = start(Arc::new(MemStore::new()), "acl-search").await;
    let root = bootstrap(&gw).await;
    for (id, ns) in [("web-a", "a"), ("web-b", "b")] {
        make_namespace(&gw, &root, ns).await;
        let answer = call(&gw, Some(&root), "PUT", "/v1/jobs", &job(id, ns)).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    put_policy(
        &gw,
        &root,
        "a-reader",
        r#"namespace "a" { policy = "read" }"#,
    )
    .await;
    put_policy(&gw, &root, "nodes", r#"node { policy = "read" }"#).await;
    let reader = client_token(&gw, &root, &["a-reader"]).await;
    let reader = reader["SecretID"].as_str().unwrap().to_string();
    let nodes = client_token(&gw, &root, &["nodes"]).await;
    let nodes = nodes["SecretID"].as_str().unwrap().to_string();

    let all = json!({"Prefix": "web", "Context": "all"});
    let everything = search(&gw, &root, "/v1/search?namespace=*", all.clone()).await;
    assert_eq!(
        everything.json()["Matches"]["jobs"],
        json!(["web-a", "web-b"])
    );
    assert!(everything.json()["Matches"].get("nodes").is_some());
    for ns in ["*", "a"] {
        let path = format!("/v1/search?namespace={ns}");
        let found = search(&gw, &reader, &path, all.clone()).await;
        assert_eq!(found.status, 200, "{ns}: {}", found.text());
        let found = found.json();
        assert_eq!(found["Matches"]["jobs"], json!(["web-a"]), "{ns}: {found}");
        assert_eq!(found["Truncations"]["jobs"], false);
        // Without node read the nodes context is left out.
        assert!(found["Matches"].get("nodes").is_none(), "{ns}: {found}");
        assert!(found["Truncations"].get("nodes").is_none(), "{ns}: {found}");
        let path = format!("/v1/search/fuzzy?namespace={ns}");
        let text = json!({"Text": "web", "Context": "all"});
        let fuzzy = search(&gw, &reader, &path, text).await;
        assert_eq!(fuzzy.status, 200, "{ns}: {}", fuzzy.text());
        let fuzzy = fuzzy.json();
        let ids: Vec<&str> = fuzzy["Matches"]["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["ID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["web-a"], "{ns}");
        assert!(fuzzy["Matches"].get("nodes").is_none());
    }
    let namespaces = search(
        &gw,
        &reader,
        "/v1/search?namespace=*",
        json!({"Prefix": "", "Context": "namespaces"}),
    )
    .await;
    assert_eq!(namespaces.json()["Matches"]["namespaces"], json!(["a"]));
    // A namespace the token cannot read, a context it cannot read, or no
    // read at all: refused.
    let other = search(&gw, &reader, "/v1/search?namespace=b", all.clone()).await;
    assert_eq!(
        (other.status, other.text().as_str()),
        (403, "Permission denied")
    );
    let node_search = json!({"Prefix": "", "Context": "nodes"});
    let refused = search(&gw, &reader, "/v1/search?namespace=a", node_search.clone()).await;
    assert_eq!(refused.status, 403);
    let allowed = search(&gw, &nodes, "/v1/search", node_search).await;
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    let only_nodes = search(&gw, &nodes, "/v1/search?namespace=*", all.clone()).await;
    let only_nodes = only_nodes.json();
    let keys: Vec<&String> = only_nodes["Matches"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["nodes"]);
    let anonymous = call(
        &gw,
        None,
        "POST",
        "/v1/search?namespace=*",
        all.to_string().as_bytes(),
    )
    .await;
    assert_eq!(anonymous.status, 403);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_shows_only_what_the_token_may_read() {
    let gw = start(Arc::new(MemStore::new()), "acl-events").await;
    let root = bootstrap(&gw).await;
    put_policy(
        &gw,
        &root,
        "default-reader",
        r#"namespace "default" { policy = "read" }"#,
    )
    .await;
    let reader = client_token(&gw, &root, &["default-reader"]).await;
    let reader = reader["SecretID"].as_str().unwrap().to_string();
    let refused = call(&gw, None, "GET", "/v1/event/stream?namespace=*", b"").await;
    assert_eq!(refused.status, 403);
    let mut stream = TcpStream::connect(gw.bound.http).await.unwrap();
    // From the revision before the writes: the stream sees them however
    // late its watch opens.
    let from = gw.revision().await;
    let request = format!(
        "GET /v1/event/stream?namespace=*&topic=Job&index={from} HTTP/1.1\r\nHost: x\r\nX-Nomad-Token: {reader}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    make_namespace(&gw, &root, "prod").await;
    for (id, ns) in [("hidden", "prod"), ("shown", "default")] {
        let answer = call(&gw, Some(&root), "PUT", "/v1/jobs", &job(id, ns)).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    // Events come in revision order: the hidden job, written first, would
    // come before the one shown.
    let events = read_events(&mut stream, 1).await;
    let keys: Vec<&str> = events.iter().map(|e| e["Key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["shown"], "{events:#?}");
    drop(stream);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_off_change_nothing() {
    let gw = TestGateway::start(Backend::Mem, "acl-off").await;
    let jobs = gw.http("GET", "/v1/jobs", b"").await;
    assert_eq!(jobs.status, 200);
    let boot = gw.http("POST", "/v1/acl/bootstrap", b"").await;
    assert_eq!(
        (boot.status, boot.text().as_str()),
        (400, "ACL support disabled")
    );
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::acl;
    bootstrap_and_round_trips,
    anonymous_policy_and_filtered_lists,
);

mod grpc {
    use caravan_proto::acl_service_client::AclServiceClient;
    use caravan_proto::job_service_client::JobServiceClient;
    use caravan_proto::{
        AclBootstrapRequest, AclPolicy, AclToken, AclTokenSelfRequest, Job, ListJobsRequest,
        QueryOptions, RegisterJobRequest, UpsertAclPolicyRequest, UpsertAclTokenRequest,
    };
    use caravan_store::MemStore;
    use std::sync::Arc;
    use tonic::{Code, Request};

    use super::start;

    fn with_token<T>(message: T, secret: &str) -> Request<T> {
        let mut req = Request::new(message);
        req.metadata_mut()
            .insert("x-nomad-token", secret.parse().unwrap());
        req
    }

    fn list(namespace: &str) -> ListJobsRequest {
        ListJobsRequest {
            options: Some(QueryOptions {
                namespace: namespace.into(),
                ..Default::default()
            }),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_need_a_token_allowed_to_make_them() {
        let gw = start(Arc::new(MemStore::new()), "acl-grpc").await;
        let channel = gw.channel().await;
        let mut acl = AclServiceClient::new(channel.clone());
        let mut jobs = JobServiceClient::new(channel);
        let refused = jobs.list_jobs(list("default")).await.unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
        let root = acl
            .bootstrap(AclBootstrapRequest {})
            .await
            .unwrap()
            .into_inner()
            .token
            .unwrap();
        assert_eq!(root.r#type, "management");
        let again = acl.bootstrap(AclBootstrapRequest {}).await.unwrap_err();
        assert!(
            again.message().contains("ACL bootstrap already done"),
            "{again:?}"
        );
        let secret = root.secret_id.clone();
        jobs.list_jobs(with_token(list("default"), &secret))
            .await
            .unwrap();
        let unknown = jobs
            .list_jobs(with_token(list("default"), "nope"))
            .await
            .unwrap_err();
        assert_eq!(unknown.message(), "ACL token not found");

        let policy = AclPolicy {
            name: "reader".into(),
            rules: r#"namespace "default" { policy = "read" }"#.into(),
            ..Default::default()
        };
        acl.upsert_policy(with_token(
            UpsertAclPolicyRequest {
                policy: Some(policy),
            },
            &secret,
        ))
        .await
        .unwrap();
        let bad = acl
            .upsert_policy(with_token(
                UpsertAclPolicyRequest {
                    policy: Some(AclPolicy {
                        name: "bad".into(),
                        rules: "namespace \"x\" { policy = \"fly\" }".into(),
                        ..Default::default()
                    }),
                },
                &secret,
            ))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
        let reader = acl
            .upsert_token(with_token(
                UpsertAclTokenRequest {
                    token: Some(AclToken {
                        name: "r".into(),
                        r#type: "client".into(),
                        policies: vec!["reader".into()],
                        ..Default::default()
                    }),
                },
                &secret,
            ))
            .await
            .unwrap()
            .into_inner()
            .token
            .unwrap();
        let me = acl
            .token_self(with_token(AclTokenSelfRequest {}, &reader.secret_id))
            .await
            .unwrap()
            .into_inner()
            .token
            .unwrap();
        assert_eq!(me.accessor_id, reader.accessor_id);
        // Reads in default pass; a write, or another namespace, does not.
        jobs.list_jobs(with_token(list("default"), &reader.secret_id))
            .await
            .unwrap();
        let other = jobs
            .list_jobs(with_token(list("prod"), &reader.secret_id))
            .await
            .unwrap_err();
        assert_eq!(other.code(), Code::PermissionDenied);
        // Every namespace lists what the token reads (here: nothing yet).
        let every = jobs
            .list_jobs(with_token(list("*"), &reader.secret_id))
            .await
            .unwrap();
        assert!(every.into_inner().jobs.is_empty());
        let write = jobs
            .register_job(with_token(
                RegisterJobRequest {
                    job: Some(Job {
                        id: "x".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                &reader.secret_id,
            ))
            .await
            .unwrap_err();
        assert_eq!(write.code(), Code::PermissionDenied, "{write:?}");
        // Bearer works too.
        let mut req = Request::new(list("default"));
        let bearer = format!("Bearer {}", reader.secret_id);
        req.metadata_mut()
            .insert("authorization", bearer.parse().unwrap());
        jobs.list_jobs(req).await.unwrap();
        gw.stop().await;
    }
}
