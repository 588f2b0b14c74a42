//! Nomad Variables over HTTP: writes and reads in Nomad's JSON, items
//! encrypted at rest, check-and-set conflicts as 409, Nomad's path rules,
//! blocking lists, and a gateway holding another key refusing clearly.

use std::time::Duration;

use caravan_api_gateway::VariableKey;
use caravan_proto::variable_service_client::VariableServiceClient;
use caravan_proto::{PutVariableRequest, Variable};
use serde_json::{Value, json};

use crate::common::{self, Backend, TestGateway};
use crate::fixtures::body;

async fn start(backend: Backend, name: &str) -> TestGateway {
    let key = VariableKey::generate();
    TestGateway::start_with(backend.store().await, name, |c| c.variables_key = key).await
}

async fn put(gw: &TestGateway, url: &str, v: Value) -> common::HttpAnswer {
    gw.http("PUT", url, &body(&v)).await
}

fn index_of(r: &common::HttpAnswer) -> u64 {
    r.header("X-Nomad-Index").unwrap().parse().unwrap()
}

pub async fn a_variable_reads_back_with_its_items_and_indexes(backend: Backend) {
    let gw = start(backend, "http-vars-roundtrip").await;
    let r = put(
        &gw,
        "/v1/var/example/first",
        json!({"Items": {"user": "test", "password": "test123"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let written = r.json();
    assert_eq!(written["Path"], "example/first");
    assert_eq!(written["Namespace"], "default");
    assert_eq!(written["Items"]["user"], "test");
    let modify = written["ModifyIndex"].as_u64().unwrap();
    assert!(modify > 0);
    assert_eq!(written["CreateIndex"], written["ModifyIndex"]);
    assert_eq!(index_of(&r), modify);
    assert!(written["CreateTime"].as_i64().unwrap() > 0);

    let r = gw.http("GET", "/v1/var/example/first", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let read = r.json();
    assert_eq!(read["Items"]["password"], "test123");
    assert_eq!(read["ModifyIndex"].as_u64().unwrap(), modify);
    assert!(index_of(&r) >= modify);

    // An update keeps the create index and time.
    let r = put(
        &gw,
        "/v1/var/example/first",
        json!({"Items": {"user": "other"}}),
    )
    .await;
    let updated = r.json();
    assert!(updated["ModifyIndex"].as_u64().unwrap() > modify);
    assert_eq!(updated["CreateIndex"], written["CreateIndex"]);
    assert_eq!(updated["CreateTime"], written["CreateTime"]);
    let read = gw.http("GET", "/v1/var/example/first", b"").await.json();
    assert_eq!(read["Items"], json!({"user": "other"}));

    let r = gw.http("GET", "/v1/var/no_exist", b"").await;
    assert_eq!(r.status, 404, "{}", r.text());
    gw.stop().await;
}

pub async fn items_are_encrypted_at_rest_and_metadata_is_not(backend: Backend) {
    let gw = start(backend, "http-vars-sealed").await;
    put(
        &gw,
        "/v1/var/db/creds",
        json!({"Items": {"password": "hunter2-very-secret"}}),
    )
    .await;
    let kv = gw
        .store
        .get(&gw.keys.var("default", "db/creds"))
        .await
        .unwrap()
        .expect("the variable is stored under vars/<ns>/<path>");
    let raw = String::from_utf8_lossy(&kv.value);
    assert!(!raw.contains("hunter2"), "items stored in clear: {raw}");
    assert!(
        !raw.contains("password"),
        "item keys stored in clear: {raw}"
    );
    let stored: Variable = caravan_state::decode(&kv).unwrap();
    assert_eq!(stored.path, "db/creds");
    assert_eq!(stored.key_id.len(), 16);
    assert!(stored.create_time > 0);
    gw.stop().await;
}

pub async fn a_gateway_with_another_key_refuses_clearly(backend: Backend) {
    let store = backend.store().await;
    let writer_key = VariableKey::generate();
    let gw = TestGateway::start_with(store.clone(), "http-vars-wrong-key", |c| {
        c.variables_key = writer_key
    })
    .await;
    put(&gw, "/v1/var/app", json!({"Items": {"k": "v"}})).await;
    let prefix = gw.keys.prefix().to_string();
    gw.stop().await;

    let other = VariableKey::generate();
    let gw = TestGateway::start_with(store.clone(), "unused", |c| {
        c.variables_key = other;
        c.store.prefix = prefix.clone();
    })
    .await;
    let r = gw.http("GET", "/v1/var/app", b"").await;
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("was encrypted with key"), "{}", r.text());
    // Lists need no key: the metadata is in clear.
    let r = gw.http("GET", "/v1/vars", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()[0]["Path"], "app");
    gw.stop().await;

    let gw = TestGateway::start_with(store, "unused", |c| c.store.prefix = prefix.clone()).await;
    let r = put(&gw, "/v1/var/app2", json!({"Items": {"k": "v"}})).await;
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.text().contains("variables_key"), "{}", r.text());
    gw.stop().await;
}

pub async fn check_and_set_conflicts_answer_409_with_the_current_variable(backend: Backend) {
    let gw = start(backend, "http-vars-cas").await;
    let r = put(&gw, "/v1/var/cas?cas=0", json!({"Items": {"a": "1"}})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let first = r.json()["ModifyIndex"].as_u64().unwrap();

    // cas=0 means "must not exist".
    let r = put(&gw, "/v1/var/cas?cas=0", json!({"Items": {"a": "2"}})).await;
    assert_eq!(r.status, 409, "{}", r.text());
    let conflict = r.json();
    assert_eq!(conflict["ModifyIndex"].as_u64().unwrap(), first);
    assert_eq!(conflict["Items"]["a"], "1");
    assert_eq!(index_of(&r), first);

    let r = put(
        &gw,
        &format!("/v1/var/cas?cas={}", first + 1000),
        json!({"Items": {"a": "3"}}),
    )
    .await;
    assert_eq!(r.status, 409);
    let r = put(
        &gw,
        &format!("/v1/var/cas?cas={first}"),
        json!({"Items": {"a": "4"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let second = r.json()["ModifyIndex"].as_u64().unwrap();

    // A missing variable conflicts with a non-zero cas as a zero value.
    let r = put(&gw, "/v1/var/absent?cas=5", json!({"Items": {"a": "1"}})).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["Path"], "absent");
    assert_eq!(r.json()["ModifyIndex"], 0);

    // Deletes: a stale index loses, the current one wins, 204.
    let r = gw
        .http("DELETE", &format!("/v1/var/cas?cas={first}"), b"")
        .await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(r.json()["ModifyIndex"].as_u64().unwrap(), second);
    let r = gw
        .http("DELETE", &format!("/v1/var/cas?cas={second}"), b"")
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
    assert_eq!(gw.http("GET", "/v1/var/cas", b"").await.status, 404);
    // Deleting what is gone succeeds, as in Nomad.
    assert_eq!(gw.http("DELETE", "/v1/var/cas", b"").await.status, 204);
    gw.stop().await;
}

pub async fn concurrent_check_and_set_writes_let_exactly_one_win(backend: Backend) {
    let gw = start(backend, "http-vars-race").await;
    let addr = gw.bound.http;
    let writers: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let v = json!({"Items": {"writer": i.to_string()}});
                common::http(addr, "PUT", "/v1/var/race?cas=0", &body(&v))
                    .await
                    .status
            })
        })
        .collect();
    let mut won = 0;
    for w in writers {
        match w.await.unwrap() {
            200 => won += 1,
            409 => {}
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(won, 1);
    gw.stop().await;
}

pub async fn lists_filter_by_prefix_and_namespace(backend: Backend) {
    let gw = start(backend, "http-vars-list").await;
    let r = put(&gw, "/v1/namespace/team", json!({"Name": "team"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    for (url, items) in [
        ("/v1/var/example/first", json!({"a": "1"})),
        (
            "/v1/var/example/second?namespace=default",
            json!({"a": "2"}),
        ),
        ("/v1/var/other", json!({"a": "3"})),
        ("/v1/var/example/first?namespace=team", json!({"a": "4"})),
    ] {
        let r = put(&gw, url, json!({"Items": items})).await;
        assert_eq!(r.status, 200, "{url}: {}", r.text());
    }
    let r = gw.http("GET", "/v1/vars", b"").await;
    let paths: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(paths, ["example/first", "example/second", "other"]);
    assert!(
        r.json()[0].get("Items").is_none(),
        "lists carry metadata only"
    );
    let r = gw.http("GET", "/v1/vars?prefix=example/f", b"").await;
    assert_eq!(r.json().as_array().unwrap().len(), 1);
    let r = gw.http("GET", "/v1/vars?prefix=no_exist_var", b"").await;
    assert_eq!(r.json(), json!([]));
    let r = gw.http("GET", "/v1/vars?namespace=team", b"").await;
    assert_eq!(r.json()[0]["Namespace"], "team");
    let r = gw
        .http("GET", "/v1/vars?namespace=*&prefix=example", b"")
        .await;
    let all: Vec<(String, String)> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["Namespace"].as_str().unwrap().to_string(),
                v["Path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        all,
        [
            ("default".to_string(), "example/first".to_string()),
            ("default".to_string(), "example/second".to_string()),
            ("team".to_string(), "example/first".to_string()),
        ]
    );
    let r = gw
        .http("GET", "/v1/var/example/first?namespace=team", b"")
        .await;
    assert_eq!(r.json()["Items"]["a"], "4");
    gw.stop().await;
}

/// Variables, like jobs, go only into a namespace that exists (Nomad writes
/// them anywhere, a bug it tracks as hashicorp/nomad#15379), over HTTP and
/// over gRPC, locks included; once the namespace is made they are written.
pub async fn writes_need_their_namespace_to_exist(backend: Backend) {
    let gw = start(backend, "http-vars-ns").await;
    let refused = "variable \"app/db\" is in nonexistent namespace \"prod\"";
    for url in [
        "/v1/var/app/db?namespace=prod",
        "/v1/var/app/db?namespace=prod&cas=0",
        "/v1/var/app/db?namespace=prod&lock-acquire",
    ] {
        let r = put(&gw, url, json!({"Items": {"k": "v"}})).await;
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert_eq!(r.text(), refused, "{url}");
    }
    let mut vars = VariableServiceClient::new(gw.channel().await);
    let write = PutVariableRequest {
        namespace: "prod".into(),
        path: "app/db".into(),
        items: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    };
    let err = vars.put_variable(write.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(err.message(), refused);
    let r = gw.http("GET", "/v1/vars?namespace=*", b"").await;
    assert_eq!(r.json(), json!([]), "nothing was written");

    let r = put(&gw, "/v1/namespace/prod", json!({"Name": "prod"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = put(
        &gw,
        "/v1/var/app/db?namespace=prod",
        json!({"Items": {"k": "v"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let written = vars.put_variable(write).await.unwrap().into_inner();
    assert!(written.written);
    gw.stop().await;
}

pub async fn bad_paths_and_bodies_are_400_naming_the_field(backend: Backend) {
    let gw = start(backend, "http-vars-bad").await;
    let long = "a".repeat(129);
    for (url, v, field) in [
        (
            "/v1/var/a.b".to_string(),
            json!({"Items": {"k": "v"}}),
            "Path",
        ),
        (
            "/v1/var/a/../b".to_string(),
            json!({"Items": {"k": "v"}}),
            "Path",
        ),
        (
            format!("/v1/var/{long}"),
            json!({"Items": {"k": "v"}}),
            "Path",
        ),
        (
            "/v1/var/nomad".to_string(),
            json!({"Items": {"k": "v"}}),
            "Path",
        ),
        ("/v1/var/ok".to_string(), json!({"Items": {}}), "Items"),
        ("/v1/var/ok".to_string(), json!({}), "Items"),
        (
            "/v1/var/ok".to_string(),
            json!({"Items": {"k": 1}}),
            "Items.k",
        ),
        (
            "/v1/var/ok".to_string(),
            json!({"Items": {"k": "x".repeat(70_000)}}),
            "Items",
        ),
        (
            "/v1/var/ok?cas=-1".to_string(),
            json!({"Items": {"k": "v"}}),
            "cas",
        ),
        (
            "/v1/var/ok?namespace=*".to_string(),
            json!({"Items": {"k": "v"}}),
            "Namespace",
        ),
    ] {
        let r = put(&gw, &url, v).await;
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert!(
            r.text().starts_with(&format!("{field}: ")),
            "{url}: {}",
            r.text()
        );
    }
    // Reads and deletes look a path up as Nomad does: one no write could
    // create is simply not there.
    assert_eq!(gw.http("GET", "/v1/var/a.b", b"").await.status, 404);
    assert_eq!(gw.http("DELETE", "/v1/var/a.b", b"").await.status, 204);
    let r = gw.http("PUT", "/v1/var/ok", b"[1]").await;
    assert_eq!(r.status, 400);
    let r = gw.http("GET", "/v1/var/", b"").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(gw.http("GET", "/v1/vars", b"").await.json(), json!([]));
    gw.stop().await;
}

pub async fn a_blocking_list_wakes_on_a_variable_change_only(backend: Backend) {
    let gw = start(backend, "http-vars-blocking").await;
    put(&gw, "/v1/var/one", json!({"Items": {"a": "1"}})).await;
    let r = gw.http("GET", "/v1/vars", b"").await;
    let index = index_of(&r);

    // Nothing changes: the query waits out its wait.
    let started = tokio::time::Instant::now();
    let idle = gw
        .http("GET", &format!("/v1/vars?index={index}&wait=300ms"), b"")
        .await;
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(idle.json().as_array().unwrap().len(), 1);

    let addr = gw.bound.http;
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = common::http(
            addr,
            "GET",
            &format!("/v1/vars?index={index}&wait=30s"),
            b"",
        )
        .await;
        (r, started.elapsed())
    });
    // The write comes once the query waits: it must wake it, not meet it.
    gw.wait_blocked(1).await;
    assert!(!waiter.is_finished(), "the query waits for a change");
    // A variable of another prefix-less list still counts; a delete too.
    let r = gw.http("DELETE", "/v1/var/one", b"").await;
    assert_eq!(r.status, 204);
    let (r, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(index_of(&r) > index);
    assert_eq!(r.json(), json!([]));
    gw.stop().await;
}
