//! Service discovery over HTTP: registrations (written here straight into
//! the store, as a node's would be) read by name in Nomad's JSON, filtered
//! by tag, chosen by rendezvous hash, listed per namespace with their tags,
//! deleted by id, and a blocking read woken by a new instance; and a node's
//! own registrations, sent with its status reports over gRPC, read back,
//! with their checks and their events, until it reports them gone.

use std::time::Duration;

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocUpdate, CheckResult, ServiceRegistration, UpdateAllocationsRequest,
};
use caravan_state::encode;
use caravan_store::{Op, Txn};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, Backend, TestGateway, node_secret};
use crate::fixtures::{body, client_node, nomad_job, placed, register_node};

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

/// Node n1's report that `a1` is `status`, registering and deregistering
/// the instances given.
async fn report(
    gw: &TestGateway,
    status: AllocClientStatus,
    registered: Vec<ServiceRegistration>,
    deregistered: Vec<ServiceRegistration>,
) -> Result<i64, tonic::Status> {
    let mut update = AllocUpdate {
        alloc_id: "a1".into(),
        registered,
        deregistered,
        ..Default::default()
    };
    update.set_client_status(status);
    NodeClientServiceClient::new(gw.channel().await)
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![update],
            secret_id: node_secret("n1"),
        })
        .await
        .map(|r| r.into_inner().revision)
}

/// The events of the NDJSON stream at `path`, once `want` arrived (or ten
/// seconds passed).
async fn stream_events(gw: &TestGateway, path: &str, want: usize) -> Vec<Value> {
    let mut stream = TcpStream::connect(gw.bound.http).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while events.len() < want && tokio::time::Instant::now() < deadline {
        let mut buf = [0u8; 8192];
        let n = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf))
            .await
            .unwrap_or(Ok(0))
            .unwrap();
        raw.extend_from_slice(&buf[..n]);
        events = String::from_utf8_lossy(&raw)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
            .flat_map(|v| v["Events"].as_array().cloned().unwrap_or_default())
            .collect();
    }
    events
}

/// A node reports its allocation running with an instance of `web`: the
/// instance is served by name, filled from the allocation, with its check
/// results under the allocation's checks and a `ServiceRegistration` event;
/// a registration of another allocation is refused by field; the report
/// that the allocation completed, with the instance deregistered, removes
/// it (a `ServiceDeregistration` event).
pub async fn a_nodes_instance_rides_its_status_reports_until_deregistered(backend: Backend) {
    let gw = TestGateway::start(backend, "http-services-reported").await;
    register_node(&gw, client_node("n1", "127.0.0.1:1")).await;
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut pending = placed("a1", "n1");
    pending.set_client_status(AllocClientStatus::Pending);
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&pending), 0)
        .await
        .unwrap();
    let from = gw.revision().await;

    let mut web = instance("ignored", "web", "a1", 24_567, &["http", "v1"]);
    web.job_id = "someone-elses".into();
    web.checks = vec![CheckResult {
        check_name: "alive".into(),
        status: "passing".into(),
        mode: "healthiness".into(),
        output: "HTTP GET: 200 OK".into(),
        status_code: 200,
        timestamp: 1_700_000_000,
        group: "web".into(),
        task: "app".into(),
        service: "web".into(),
    }];
    let stranger = instance("default", "db", "b2", 5432, &[]);
    let err = report(
        &gw,
        AllocClientStatus::Running,
        vec![web.clone(), stranger],
        Vec::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(
        err.message()
            .starts_with("updates[0].registered[1].alloc_id"),
        "{err:?}"
    );
    let r = gw.http("GET", "/v1/service/web", b"").await;
    assert_eq!(
        r.json(),
        json!([]),
        "nothing of a refused report is written"
    );

    report(
        &gw,
        AllocClientStatus::Running,
        vec![web.clone()],
        Vec::new(),
    )
    .await
    .unwrap();
    let r = gw.http("GET", "/v1/service/web", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let list = r.json();
    assert_eq!(ids(&list), vec![web.id.clone()]);
    let got = &list[0];
    assert_eq!(got["ServiceName"], "web");
    assert_eq!(got["Namespace"], "default", "the allocation's namespace");
    assert_eq!(got["JobID"], "web", "the allocation's job");
    assert_eq!(got["NodeID"], "n1");
    assert_eq!(got["Datacenter"], "dc1", "the node's datacenter");
    assert_eq!(got["AllocID"], "a1");
    assert_eq!(got["Address"], "127.0.0.1");
    assert_eq!(got["Port"], 24_567);
    assert_eq!(got["Tags"], json!(["http", "v1"]));
    let r = gw.http("GET", "/v1/allocation/a1", b"").await;
    assert_eq!(r.json()["ClientStatus"], "running", "the status went along");

    let r = gw.http("GET", "/v1/client/allocation/a1/checks", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let checks = r.json();
    let checks = checks.as_object().unwrap();
    assert_eq!(checks.len(), 1, "{checks:?}");
    let (id, alive) = checks.iter().next().unwrap();
    assert_eq!(alive["ID"], *id);
    assert_eq!(alive["Check"], "alive");
    assert_eq!(alive["Status"], "success");
    assert_eq!(alive["StatusCode"], 200);
    assert_eq!(alive["Service"], "web");
    assert_eq!(alive["Group"], "web");
    assert_eq!(alive["Task"], "app");
    let r = gw
        .http("GET", "/v1/client/allocation/nope/checks", b"")
        .await;
    assert_eq!(r.status, 404, "{}", r.text());

    report(
        &gw,
        AllocClientStatus::Complete,
        Vec::new(),
        vec![web.clone()],
    )
    .await
    .unwrap();
    let r = gw.http("GET", "/v1/service/web", b"").await;
    assert_eq!(r.json(), json!([]), "gone with the report that it stopped");
    let r = gw.http("GET", "/v1/services", b"").await;
    assert_eq!(r.json(), json!([]));

    // The same again from the revision before: one event each way.
    let events = stream_events(
        &gw,
        &format!("/v1/event/stream?topic=Service:web&index={from}"),
        2,
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e["Type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ServiceRegistration", "ServiceDeregistration"],
        "{events:#?}"
    );
    assert_eq!(events[0]["Topic"], "Service");
    assert_eq!(events[0]["Key"], web.id);
    assert_eq!(events[0]["Namespace"], "default");
    assert_eq!(events[0]["FilterKeys"], json!(["web", "web"]));
    assert_eq!(events[0]["Payload"]["Service"]["Port"], 24_567);
    assert_eq!(events[0]["Payload"]["Service"]["JobID"], "web");
    assert_eq!(events[1]["Payload"]["Service"]["ID"], web.id);
    let others = stream_events(
        &gw,
        &format!("/v1/event/stream?topic=Service:db&index={from}"),
        1,
    )
    .await;
    assert!(others.is_empty(), "{others:#?}");
    gw.stop().await;
}
