//! Namespaces and node pools as objects over HTTP: Nomad's JSON, the
//! built-in ones that cannot be deleted, jobs refused in a namespace that
//! does not exist (over HTTP and gRPC), deletes refused while something
//! still lives there, and the fields Caravan does not honour refused by
//! name. Also the variable lock operations, refused rather than taken for
//! plain writes.

use caravan_proto::job_service_client::JobServiceClient;
use serde_json::{Value, json};

use crate::common::{self, Backend, TestGateway};
use crate::fixtures::{body, client_node, nomad_job, register_node};

async fn put(gw: &TestGateway, path: &str, v: Value) -> common::HttpAnswer {
    gw.http("PUT", path, &body(&v)).await
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v["Name"].as_str().unwrap().to_string())
        .collect()
}

pub async fn namespaces_are_objects_with_a_default_that_stays(backend: Backend) {
    let gw = TestGateway::start(backend, "http-ns-objects").await;
    let r = gw.http("GET", "/v1/namespaces", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(names(&r.json()), vec!["default"]);
    assert_eq!(r.json()[0]["Description"], "Default shared namespace");

    let r = put(
        &gw,
        "/v1/namespace/prod",
        json!({"Name": "prod", "Description": "Production", "Meta": {"team": "a"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let written: u64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();
    let r = gw.http("GET", "/v1/namespace/prod", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ns = r.json();
    assert_eq!(ns["Description"], "Production");
    assert_eq!(ns["Meta"]["team"], "a");
    assert_eq!(ns["CreateIndex"].as_u64(), Some(written));
    assert_eq!(ns["Quota"], "");
    // What a read answers is accepted back whole (`namespace apply` does it).
    let mut again = ns.clone();
    again["Description"] = json!("Production, again");
    let r = put(&gw, "/v1/namespace/prod", again).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/namespaces?prefix=pr", b"").await;
    assert_eq!(names(&r.json()), vec!["prod"]);
    assert_eq!(r.json()[0]["Description"], "Production, again");
    assert_eq!(r.json()[0]["CreateIndex"].as_u64(), Some(written));

    let r = gw.http("GET", "/v1/namespace/nope", b"").await;
    assert_eq!((r.status, r.text().as_str()), (404, "Namespace not found"));
    let r = gw.http("DELETE", "/v1/namespace/default", b"").await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("can not delete default namespace"),
        "{}",
        r.text()
    );
    let r = put(&gw, "/v1/namespace/other", json!({"Name": "prod"})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("Namespace name does not match request path")
    );
    let r = put(&gw, "/v1/namespace/a_b", json!({"Name": "a_b"})).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("invalid name \"a_b\""), "{}", r.text());

    let r = gw.http("DELETE", "/v1/namespace/prod", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/namespaces", b"").await;
    assert_eq!(names(&r.json()), vec!["default"]);
}

pub async fn fields_caravan_does_not_honour_are_refused_by_name(backend: Backend) {
    let gw = TestGateway::start(backend, "http-ns-refused").await;
    for (v, field) in [
        (json!({"Name": "q", "Quota": "small"}), "Quota"),
        (
            json!({"Name": "q", "Capabilities": {"EnabledTaskDrivers": ["docker"]}}),
            "Capabilities",
        ),
        (
            json!({"Name": "q", "NodePoolConfiguration": {"Default": "gpu"}}),
            "NodePoolConfiguration",
        ),
        (json!({"Name": "q", "Colour": "red"}), "Colour"),
    ] {
        let r = put(&gw, "/v1/namespace/q", v).await;
        assert_eq!(r.status, 400, "{field}: {}", r.text());
        assert!(r.text().contains(field), "{field}: {}", r.text());
    }
    let r = gw.http("GET", "/v1/namespace/q", b"").await;
    assert_eq!(r.status, 404, "nothing was written");
}

pub async fn jobs_need_their_namespace_to_exist(backend: Backend) {
    let gw = TestGateway::start(backend, "http-ns-jobs").await;
    let mut job = nomad_job("web", 1);
    job["Job"]["Namespace"] = json!("prod");
    let r = put(&gw, "/v1/jobs", job.clone()).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.text(), "job \"web\" is in nonexistent namespace \"prod\"");
    // The query's namespace is the job's when the body names none.
    let r = put(&gw, "/v1/jobs?namespace=qa", nomad_job("web", 1)).await;
    assert_eq!(r.text(), "job \"web\" is in nonexistent namespace \"qa\"");
    // Over gRPC alike.
    let mut grpc_job = common::job("web", 1);
    grpc_job.namespace = "prod".into();
    let err = JobServiceClient::new(gw.channel().await)
        .register_job(common::register(grpc_job))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("nonexistent namespace \"prod\""));
    assert!(gw.evals().await.is_empty(), "nothing was written");

    let r = put(&gw, "/v1/namespace/prod", json!({"Name": "prod"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = put(&gw, "/v1/jobs", job).await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Many registrations into one namespace at once (their transactions
    // share the namespace's compare, and may share a group commit).
    let many = (0..16).map(|i| {
        let mut job = nomad_job(&format!("burst-{i}"), 1);
        job["Job"]["Namespace"] = json!("prod");
        let gw = &gw;
        async move { gw.http("PUT", "/v1/jobs", &body(&job)).await }
    });
    for r in futures::future::join_all(many).await {
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = gw.http("GET", "/v1/jobs?namespace=prod", b"").await;
    assert_eq!(r.json().as_array().unwrap().len(), 17);

    let r = gw.http("DELETE", "/v1/namespace/prod", b"").await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("namespace \"prod\" has non-terminal jobs in regions: [global]"),
        "{}",
        r.text()
    );
    for id in std::iter::once("web".to_string()).chain((0..16).map(|i| format!("burst-{i}"))) {
        let path = format!("/v1/job/{id}?namespace=prod&purge=true");
        let r = gw.http("DELETE", &path, b"").await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = gw.http("DELETE", "/v1/namespace/prod", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut job = nomad_job("web2", 1);
    job["Job"]["Namespace"] = json!("prod");
    let r = put(&gw, "/v1/jobs", job).await;
    assert_eq!(
        r.status,
        400,
        "a deleted namespace takes no jobs: {}",
        r.text()
    );
}

pub async fn node_pools_are_objects_beside_the_built_in_ones(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-pools").await;
    let r = gw.http("GET", "/v1/node/pools", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(names(&r.json()), vec!["all", "default"]);

    let r = put(
        &gw,
        "/v1/node/pool/gpu",
        json!({"Name": "gpu", "Description": "GPUs", "Meta": {"k": "v"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/node/pool/gpu", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Description"], "GPUs");
    assert_eq!(r.json()["SchedulerConfiguration"], Value::Null);
    let r = gw.http("GET", "/v1/node/pool/nope", b"").await;
    assert_eq!((r.status, r.text().as_str()), (404, "node pool not found"));

    // A pool's own scheduler algorithm is kept; memory oversubscription
    // per pool is refused by name.
    let r = put(
        &gw,
        "/v1/node/pool/gpu",
        json!({"Name": "gpu", "SchedulerConfiguration": {"SchedulerAlgorithm": "spread"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/node/pool/gpu", b"").await;
    assert_eq!(
        r.json()["SchedulerConfiguration"],
        json!({"SchedulerAlgorithm": "spread", "MemoryOversubscriptionEnabled": null})
    );
    let r = put(
        &gw,
        "/v1/node/pool/gpu",
        json!({"Name": "gpu", "SchedulerConfiguration": {"MemoryOversubscriptionEnabled": true}}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("SchedulerConfiguration.MemoryOversubscriptionEnabled"),
        "{}",
        r.text()
    );
    let r = put(&gw, "/v1/node/pool/all", json!({"Name": "all"})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("modifying node pool \"all\" is not allowed")
    );

    // A node in the pool: listed under it and under `all`, and the pool
    // cannot go while it is there.
    let mut node = client_node("n1", "127.0.0.1:1");
    node.node_pool = "gpu".into();
    register_node(&gw, node).await;
    register_node(&gw, client_node("n2", "127.0.0.1:1")).await;
    let ids = |v: Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n["ID"].as_str().unwrap().to_string())
            .collect()
    };
    let r = gw.http("GET", "/v1/node/pool/gpu/nodes", b"").await;
    assert_eq!(ids(r.json()), vec!["n1"]);
    let r = gw.http("GET", "/v1/node/pool/all/nodes", b"").await;
    assert_eq!(ids(r.json()), vec!["n1", "n2"]);
    let r = gw
        .http("GET", "/v1/node/pool/gpu/nodes?prefix=n", b"")
        .await;
    assert_eq!(r.status, 400);

    // A job in a pool that does not exist is refused, in Nomad's words.
    let mut job = nomad_job("lost", 1);
    job["Job"]["NodePool"] = json!("nowhere");
    let r = put(&gw, "/v1/jobs", job).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text()
            .contains("job \"lost\" is in nonexistent node pool \"nowhere\""),
        "{}",
        r.text()
    );

    let mut job = nomad_job("trainer", 1);
    job["Job"]["NodePool"] = json!("gpu");
    assert_eq!(put(&gw, "/v1/jobs", job).await.status, 200);
    let r = gw.http("GET", "/v1/node/pool/gpu/jobs", b"").await;
    assert_eq!(r.json()[0]["ID"], "trainer");
    let r = gw.http("GET", "/v1/node/pool/default/jobs", b"").await;
    assert_eq!(r.json(), json!([]));

    let r = gw.http("DELETE", "/v1/node/pool/gpu", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("node pool \"gpu\" has nodes in regions"));
    assert!(r.text().contains("has non-terminal jobs"), "{}", r.text());
    let r = gw.http("DELETE", "/v1/node/pool/default", b"").await;
    assert_eq!(r.status, 400);

    // A node's own pool exists without being written.
    let mut node = client_node("n3", "127.0.0.1:1");
    node.node_pool = "edge".into();
    register_node(&gw, node).await;
    let r = gw.http("GET", "/v1/node/pools", b"").await;
    assert_eq!(names(&r.json()), vec!["all", "default", "edge", "gpu"]);
    let r = gw.http("DELETE", "/v1/node/pool/spare", b"").await;
    assert_eq!(r.status, 404);
}

/// Nomad's variable locks: acquire (the gateway makes the holder's ID),
/// a second acquire refused (409), writes and deletes refused without the
/// lock's ID, renew and release by the holder only, and the items kept
/// across a release.
pub async fn variable_locks_are_taken_renewed_and_released(backend: Backend) {
    let key = caravan_api_gateway::VariableKey::generate();
    let gw = TestGateway::start_with(backend.store().await, "http-var-locks", |c| {
        c.variables_key = key
    })
    .await;
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-acquire",
        json!({"Items": {"k": "v"}, "Lock": {"TTL": "15s", "LockDelay": "10s"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let held = r.json();
    let id = held["Lock"]["ID"].as_str().expect("a lock ID").to_string();
    assert_eq!(held["Lock"]["TTL"], "15s");
    assert_eq!(held["Lock"]["LockDelay"], "10s");
    assert_eq!(held["Items"]["k"], "v");

    // Someone else: no second lock, no write, no delete.
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-acquire",
        json!({"Items": {"k": "mine"}}),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.text());
    let r = put(&gw, "/v1/var/locks/a", json!({"Items": {"k": "x"}})).await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("locked variable"), "{}", r.text());
    let r = gw.http("DELETE", "/v1/var/locks/a", b"").await;
    assert_eq!(r.status, 409, "{}", r.text());
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-renew",
        json!({"Lock": {"ID": "not-the-holder"}}),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.text());
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-release",
        json!({"Lock": {"ID": "not-the-holder"}}),
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.text());

    // The holder writes, renews and releases; the items stay.
    let r = put(
        &gw,
        "/v1/var/locks/a",
        json!({"Items": {"k": "v2"}, "Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Lock"]["ID"], id.as_str());
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-renew",
        json!({"Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Lock"]["ID"], id.as_str());
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-release",
        json!({"Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json().get("Lock").is_none(), "{}", r.text());
    let r = gw.http("GET", "/v1/var/locks/a", b"").await;
    assert_eq!(r.json()["Items"]["k"], "v2");
    assert!(r.json().get("Lock").is_none());
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-release",
        json!({"Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 409, "no lock to release: {}", r.text());
    assert!(r.text().contains("doesn't hold a lock"), "{}", r.text());

    // A lock taken without items keeps the variable's (Nomad's `var lock`
    // sends none).
    let r = put(&gw, "/v1/var/locks/a?lock-acquire", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Items"]["k"], "v2");
    let id = r.json()["Lock"]["ID"].as_str().unwrap().to_string();
    let r = put(
        &gw,
        "/v1/var/locks/a?lock-release",
        json!({"Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Bad requests name what is wrong.
    for (path, body, says) in [
        (
            "/v1/var/locks/b?lock-acquire&lock-release",
            json!({}),
            "multiple lock operations",
        ),
        (
            "/v1/var/locks/b?lock-acquire&cas=0",
            json!({}),
            "CAS can't be used",
        ),
        (
            "/v1/var/locks/b?lock-acquire",
            json!({"Items": {"k": "v"}, "Lock": {"TTL": "1s"}}),
            "Lock TTL",
        ),
        ("/v1/var/locks/b?lock-renew", json!({}), "Lock.ID"),
    ] {
        let r = put(&gw, path, body).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(r.text().contains(says), "{path}: {}", r.text());
    }
    let r = put(
        &gw,
        "/v1/var/locks/none?lock-renew",
        json!({"Lock": {"ID": id}}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text());

    // Unlocked, the variable is anyone's again.
    let r = gw.http("DELETE", "/v1/var/locks/a", b"").await;
    assert_eq!(r.status, 204, "{}", r.text());
}
