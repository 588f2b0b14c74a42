//! The service registry over gRPC: registrations (written straight into the
//! store, as a node's would be) listed with their tags and read by name and
//! tag, and a blocking GetService woken by a new instance.

use std::time::Duration;

use caravan_proto::service_registry_service_client::ServiceRegistryServiceClient;
use caravan_proto::{
    GetServiceRequest, ListServicesRequest, QueryOptions, ServiceListEntry, ServiceRegistration,
};
use caravan_state::encode;
use caravan_store::{Op, Txn};
use tonic::Code;

use crate::common::{Backend, TestGateway};

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

fn get(name: &str, tag: &str, options: QueryOptions) -> GetServiceRequest {
    GetServiceRequest {
        name: name.into(),
        tag: tag.into(),
        options: Some(options),
    }
}

pub async fn services_are_listed_with_tags_and_read_by_name_and_tag(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-services").await;
    let mut registry = ServiceRegistryServiceClient::new(gw.channel().await);
    let a = instance("default", "web", "a1", 8001, &["v1", "canary"]);
    let b = instance("default", "web", "b2", 8002, &["v1"]);
    let db = instance("prod", "db", "c3", 5432, &["primary"]);
    for reg in [&a, &b, &db] {
        register(&gw, reg).await;
    }

    let list = registry
        .list_services(ListServicesRequest { options: None })
        .await
        .unwrap()
        .into_inner();
    assert!(list.meta.unwrap().revision > 0);
    assert_eq!(list.namespaces.len(), 1, "the default namespace only");
    assert_eq!(list.namespaces[0].namespace, "default");
    assert_eq!(
        list.namespaces[0].services,
        vec![ServiceListEntry {
            name: "web".into(),
            tags: vec!["canary".into(), "v1".into()],
        }]
    );
    let all = registry
        .list_services(ListServicesRequest {
            options: Some(QueryOptions {
                namespace: "*".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let namespaces: Vec<_> = all
        .namespaces
        .iter()
        .map(|n| n.namespace.as_str())
        .collect();
    assert_eq!(namespaces, vec!["default", "prod"]);

    let web = registry
        .get_service(get("web", "", QueryOptions::default()))
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<_> = web.instances.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids, vec![a.id.clone(), b.id.clone()]);
    assert_eq!(web.instances[0].port, 8001);
    assert_eq!(web.instances[0].namespace, "default");
    let canary = registry
        .get_service(get("web", "canary", QueryOptions::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(canary.instances.len(), 1);
    assert_eq!(canary.instances[0].id, a.id);
    let prod = registry
        .get_service(get(
            "db",
            "",
            QueryOptions {
                namespace: "prod".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(prod.instances.len(), 1);

    let err = registry
        .get_service(get("", "", QueryOptions::default()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("name"), "{}", err.message());
    let err = registry
        .get_service(get(
            "web",
            "",
            QueryOptions {
                namespace: "*".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("namespace"), "{}", err.message());
    gw.stop().await;
}

pub async fn a_blocking_get_service_is_woken_by_a_new_instance(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-services-blocking").await;
    let channel = gw.channel().await;
    let mut registry = ServiceRegistryServiceClient::new(channel.clone());
    let first = instance("default", "web", "a1", 8001, &[]);
    register(&gw, &first).await;
    let now = registry
        .get_service(get("web", "", QueryOptions::default()))
        .await
        .unwrap()
        .into_inner();
    let revision = now.meta.unwrap().revision;
    assert_eq!(now.instances.len(), 1);

    let mut blocked = ServiceRegistryServiceClient::new(channel);
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = blocked
            .get_service(get(
                "web",
                "",
                QueryOptions {
                    min_revision: revision,
                    wait_ns: 30_000_000_000,
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        (r, started.elapsed())
    });
    // The registration comes once the query waits: it must wake it, not meet it.
    gw.wait_blocked(1).await;
    assert!(!waiter.is_finished(), "the query waits for a change");
    // Another service's instance is not a change to `web`.
    register(&gw, &instance("default", "db", "c3", 5432, &[])).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "a change to another service does not wake it"
    );
    let second = instance("default", "web", "b2", 8002, &[]);
    register(&gw, &second).await;
    let (woken, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(woken.meta.unwrap().revision > revision);
    let ids: Vec<_> = woken.instances.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids, vec![first.id, second.id]);
    gw.stop().await;
}
