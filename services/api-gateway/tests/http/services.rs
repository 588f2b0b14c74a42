//! Service discovery over HTTP: registrations (written here straight into
//! the store, as a node's would be) read by name in Nomad's JSON, filtered
//! by tag, chosen by rendezvous hash, listed per namespace with their tags,
//! deleted by id, and a blocking read woken by a new instance.

use std::time::Duration;

use caravan_proto::ServiceRegistration;
use caravan_state::encode;
use caravan_store::{Op, Txn};
use serde_json::json;

use crate::common::{self, Backend, TestGateway};

fn instance(ns: &str, name: &str, alloc: &str, port: i32, tags: &[&str]) -> ServiceRegistration {
    ServiceRegistration {
        id: format!("_nomad-task-{alloc}-server-{name}-http"),
        service_name: name.into(),
        namespace: ns.into(),
        node_id: "node-1".into(),
        datacenter: "dc1".into(),
        job_id: "app".into(),
        alloc_id: alloc.into(),
        tags: tags.iter().map(|t| (*t).to_string()).collect(),
        address: "127.0.0.1".into(),
        port,
        ..Default::default()
    }
}

async fn register(gw: &TestGateway, reg: &ServiceRegistration) {
    let key = gw.keys.service(&reg.namespace, &reg.service_name, &reg.id);
    gw.store
        .txn(Txn::new().and_then(Op::put(key, encode(reg))))
        .await
        .unwrap();
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["ID"].as_str().unwrap().to_string())
        .collect()
}

pub async fn instances_read_by_name_listed_with_tags_and_deleted(backend: Backend) {
    let gw = TestGateway::start(backend, "http-services").await;
    let a = instance("default", "web", "a1", 8001, &["v1", "canary"]);
    let b = instance("default", "web", "b2", 8002, &["v1"]);
    let db = instance("prod", "db", "c3", 5432, &["primary"]);
    for reg in [&a, &b, &db] {
        register(&gw, reg).await;
    }

    let r = gw.http("GET", "/v1/service/web", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("X-Nomad-Index").is_some());
    let list = r.json();
    assert_eq!(ids(&list), vec![a.id.clone(), b.id.clone()]);
    let first = &list[0];
    assert_eq!(first["ServiceName"], "web");
    assert_eq!(first["Namespace"], "default");
    assert_eq!(first["NodeID"], "node-1");
    assert_eq!(first["Datacenter"], "dc1");
    assert_eq!(first["JobID"], "app");
    assert_eq!(first["AllocID"], "a1");
    assert_eq!(first["Address"], "127.0.0.1");
    assert_eq!(first["Port"], 8001);
    assert_eq!(first["Tags"], json!(["v1", "canary"]));
    assert!(first["CreateIndex"].as_u64().unwrap() > 0);

    let r = gw.http("GET", "/v1/service/web?tag=canary", b"").await;
    assert_eq!(ids(&r.json()), vec![a.id.clone()]);
    let r = gw
        .http("GET", "/v1/service/web?choose=1%7Ccaller", b"")
        .await;
    assert_eq!(r.json().as_array().unwrap().len(), 1);
    let again = gw
        .http("GET", "/v1/service/web?choose=1%7Ccaller", b"")
        .await;
    assert_eq!(
        ids(&r.json()),
        ids(&again.json()),
        "the same key, the same pick"
    );
    let r = gw.http("GET", "/v1/service/web?choose=one", b"").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("<number>|<key>"), "{}", r.text());
    let r = gw.http("GET", "/v1/service/db", b"").await;
    assert_eq!(r.json(), json!([]), "db lives in prod");
    let r = gw.http("GET", "/v1/service/db?namespace=prod", b"").await;
    assert_eq!(ids(&r.json()), vec![db.id.clone()]);

    let r = gw.http("GET", "/v1/services", b"").await;
    assert_eq!(
        r.json(),
        json!([{"Namespace": "default", "Services": [
            {"ServiceName": "web", "Tags": ["canary", "v1"]}
        ]}])
    );
    let r = gw.http("GET", "/v1/services?prefix=we", b"").await;
    assert_eq!(r.json()[0]["Services"].as_array().unwrap().len(), 1);
    let r = gw.http("GET", "/v1/services?prefix=db", b"").await;
    assert_eq!(r.json(), json!([]), "no service of default starts with db");
    let r = gw.http("GET", "/v1/services?namespace=*", b"").await;
    let namespaces: Vec<_> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["Namespace"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(namespaces, vec!["default", "prod"]);

    let r = gw
        .http("DELETE", &format!("/v1/service/web/{}", a.id), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/service/web", b"").await;
    assert_eq!(ids(&r.json()), vec![b.id.clone()]);
    let r = gw
        .http("DELETE", &format!("/v1/service/web/{}", a.id), b"")
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = gw.http("GET", "/v1/service/", b"").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("missing service name"), "{}", r.text());
    gw.stop().await;
}

pub async fn a_blocking_read_wakes_when_an_instance_registers(backend: Backend) {
    let gw = TestGateway::start(backend, "http-services-blocking").await;
    register(&gw, &instance("default", "web", "a1", 8001, &[])).await;
    let r = gw.http("GET", "/v1/service/web", b"").await;
    let index: u64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();

    let addr = gw.bound.http;
    let waiter = tokio::spawn(async move {
        common::http(
            addr,
            "GET",
            &format!("/v1/service/web?index={index}&wait=30s"),
            b"",
        )
        .await
    });
    gw.wait_blocked(1).await;
    assert!(!waiter.is_finished(), "the read waits for a change");
    // An instance of another service does not end the wait of this one...
    register(&gw, &instance("default", "db", "c3", 5432, &[])).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "another service's change is not this one's"
    );
    // ...a new instance of it does.
    register(&gw, &instance("default", "web", "b2", 8002, &[])).await;
    let r = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken")
        .unwrap();
    let woken: u64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();
    assert!(woken > index);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    gw.stop().await;
}
