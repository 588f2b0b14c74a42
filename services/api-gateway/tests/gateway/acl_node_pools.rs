//! Node pool ACLs over HTTP, as Nomad enforces them: `read` to see a pool
//! (the list keeps to the pools a token reads), `write` to create or change
//! one (named by the URL or by the body), `delete` to delete it, and `node`
//! read beside pool `read` for a pool's nodes.

use caravan_store::MemStore;
use serde_json::{Value, json};
use std::sync::Arc;

use crate::acl::{bootstrap, call, client_token, put_policy, start};

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| p["Name"].as_str().unwrap())
        .collect()
}

fn pool(name: &str) -> Vec<u8> {
    json!({ "Name": name }).to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pool_rules_decide_who_sees_writes_and_deletes_a_pool() {
    let gw = start(Arc::new(MemStore::new()), "acl-node-pools").await;
    let root = bootstrap(&gw).await;
    for name in ["gpu-a", "batch"] {
        let path = format!("/v1/node/pool/{name}");
        let made = call(&gw, Some(&root), "PUT", &path, &pool(name)).await;
        assert_eq!(made.status, 200, "{}", made.text());
    }
    put_policy(
        &gw,
        &root,
        "gpu-admin",
        r#"
        node_pool "gpu-*" { policy = "write" }
        node_pool "default" { policy = "read" }
        node_pool "gpu-locked" { policy = "deny" }
        "#,
    )
    .await;
    let token = client_token(&gw, &root, &["gpu-admin"]).await;
    let admin = token["SecretID"].as_str().unwrap().to_string();
    let admin = Some(admin.as_str());

    // The list shows the pools the token reads; anonymous sees none.
    let list = call(&gw, admin, "GET", "/v1/node/pools", b"").await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(names(&list.json()), ["default", "gpu-a"]);
    let all = call(&gw, Some(&root), "GET", "/v1/node/pools", b"").await;
    assert_eq!(names(&all.json()), ["all", "batch", "default", "gpu-a"]);
    let anonymous = call(&gw, None, "GET", "/v1/node/pools", b"").await;
    assert_eq!(anonymous.status, 200, "{}", anonymous.text());
    assert_eq!(anonymous.json(), json!([]));

    // One pool: read where granted.
    let mine = call(&gw, admin, "GET", "/v1/node/pool/gpu-a", b"").await;
    assert_eq!(mine.status, 200, "{}", mine.text());
    let theirs = call(&gw, admin, "GET", "/v1/node/pool/batch", b"").await;
    assert_eq!(
        (theirs.status, theirs.text().as_str()),
        (403, "Permission denied")
    );

    // Writes: the pool the URL names, or the body's on /v1/node/pools.
    let made = call(&gw, admin, "PUT", "/v1/node/pools", &pool("gpu-b")).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let refused = call(&gw, admin, "PUT", "/v1/node/pools", &pool("batch-2")).await;
    assert_eq!(refused.status, 403);
    let refused = call(&gw, admin, "POST", "/v1/node/pool/batch", &pool("batch")).await;
    assert_eq!(refused.status, 403);
    let denied = call(
        &gw,
        admin,
        "PUT",
        "/v1/node/pool/gpu-locked",
        &pool("gpu-locked"),
    )
    .await;
    assert_eq!(denied.status, 403, "deny wins over the glob");
    let refused = call(&gw, admin, "PUT", "/v1/node/pool/default", &pool("default")).await;
    assert_eq!(refused.status, 403, "read only");
    let list = call(&gw, Some(&root), "GET", "/v1/node/pools", b"").await;
    assert_eq!(
        names(&list.json()),
        ["all", "batch", "default", "gpu-a", "gpu-b"]
    );

    // Deletes need `delete` (part of `write`).
    let gone = call(&gw, admin, "DELETE", "/v1/node/pool/gpu-b", b"").await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    let kept = call(&gw, admin, "DELETE", "/v1/node/pool/batch", b"").await;
    assert_eq!(kept.status, 403);

    // A pool's nodes need node read too; its jobs, list-jobs too.
    let nodes = call(&gw, admin, "GET", "/v1/node/pool/gpu-a/nodes", b"").await;
    assert_eq!(nodes.status, 403);
    let jobs = call(&gw, admin, "GET", "/v1/node/pool/gpu-a/jobs", b"").await;
    assert_eq!(jobs.status, 403);
    put_policy(
        &gw,
        &root,
        "pool-reader",
        r#"
        node_pool "gpu-a" { policy = "read" }
        node { policy = "read" }
        namespace "default" { policy = "read" }
        "#,
    )
    .await;
    let token = client_token(&gw, &root, &["pool-reader"]).await;
    let reader = token["SecretID"].as_str().unwrap().to_string();
    let reader = Some(reader.as_str());
    let nodes = call(&gw, reader, "GET", "/v1/node/pool/gpu-a/nodes", b"").await;
    assert_eq!(nodes.status, 200, "{}", nodes.text());
    let jobs = call(&gw, reader, "GET", "/v1/node/pool/gpu-a/jobs", b"").await;
    assert_eq!(jobs.status, 200, "{}", jobs.text());
    let other = call(&gw, reader, "GET", "/v1/node/pool/batch/nodes", b"").await;
    assert_eq!(other.status, 403);
    gw.stop().await;
}
