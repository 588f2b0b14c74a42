//! The client's token against a dev cluster with ACLs: refused without one
//! or with a made-up one, accepted once bootstrapped; policies and tokens
//! managed through the client, and variables with check-and-set.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use caravan_cli::DevCluster;
use caravan_client::proto::acl_service_client::AclServiceClient;
use caravan_client::proto::{AclBootstrapRequest, AclPolicy, AclToken};
use caravan_client::{Client, Error};

use crate::common::options;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_carry_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(caravan_cli::DevOptions {
        acl_enabled: true,
        ..options(dir.path())
    })
    .await
    .expect("dev cluster starts");
    let anonymous = Client::connect(cluster.address()).await.unwrap();
    let err = anonymous.jobs().list("").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");

    let made_up = Client::builder()
        .address(cluster.address())
        .token("00000000-0000-0000-0000-000000000000")
        .build()
        .unwrap();
    let err = made_up.jobs().list("").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");

    // The services the client does not wrap go through its channel.
    let bootstrap = AclServiceClient::new(anonymous.grpc_channel())
        .bootstrap(AclBootstrapRequest {})
        .await
        .unwrap()
        .into_inner();
    let secret = bootstrap.token.unwrap().secret_id;
    let root = Client::builder()
        .address(cluster.address())
        .token(secret)
        .build()
        .unwrap();
    assert!(root.jobs().list("").await.unwrap().is_empty());
    // With ACLs on, the dev cluster cannot wait for its node through the API,
    // so the node may register a moment after the cluster is up.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut nodes = root.nodes().list("").await.unwrap();
    while nodes.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        nodes = root.nodes().list("").await.unwrap();
    }
    assert_eq!(nodes.len(), 1);
    let err = root.acl().bootstrap().await.unwrap_err();
    assert!(
        err.code().is_some(),
        "a second bootstrap is refused: {err:?}"
    );

    // A read-only policy and a client token holding it.
    let rules = "namespace \"default\" {\n  policy = \"read\"\n}\n";
    root.acl()
        .upsert_policy(AclPolicy {
            name: "readonly".into(),
            rules: rules.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let bad = AclPolicy {
        name: "bad".into(),
        rules: "namespace \"default\" { policy = \"fly\" }".into(),
        ..Default::default()
    };
    let err = root.acl().upsert_policy(bad).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert_eq!(root.acl().policy("readonly").await.unwrap().rules, rules);
    assert_eq!(root.acl().policies().await.unwrap().len(), 1);
    let reader = root
        .acl()
        .upsert_token(AclToken {
            name: "reader".into(),
            r#type: "client".into(),
            policies: vec!["readonly".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let as_reader = Client::builder()
        .address(cluster.address())
        .token(reader.secret_id.clone())
        .build()
        .unwrap();
    assert_eq!(as_reader.acl().own_token().await.unwrap().name, "reader");
    assert!(as_reader.jobs().list("").await.unwrap().is_empty());
    let err = as_reader
        .jobs()
        .register(crate::common::service_job("web", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    assert!(root.acl().tokens().await.unwrap().len() >= 2);
    root.acl().delete_token(&reader.accessor_id).await.unwrap();
    assert!(
        root.acl()
            .token(&reader.accessor_id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    root.acl().delete_policy("readonly").await.unwrap();

    // Variables: a write, a check-and-set that loses, a delete.
    let vars = root.variables();
    let items = BTreeMap::from([("password".to_string(), "s3cret".to_string())]);
    let put = vars.put("app/db", items.clone(), None).await.unwrap();
    assert!(put.written);
    let read = vars.get("app/db").await.unwrap();
    assert_eq!(read.items, items);
    let revision = read.meta.unwrap().modify_revision;
    assert_eq!(vars.list("app/").await.unwrap().len(), 1);
    let other = BTreeMap::from([("password".to_string(), "other".to_string())]);
    let lost = vars.put("app/db", other, Some(0)).await.unwrap();
    assert!(
        !lost.written,
        "a create-only write of an existing variable loses"
    );
    assert_eq!(
        lost.variable.unwrap().items,
        items,
        "the winner is returned"
    );
    let kept = vars.delete("app/db", Some(revision + 100)).await.unwrap();
    assert!(!kept.deleted);
    assert!(vars.delete("app/db", Some(revision)).await.unwrap().deleted);
    assert!(vars.get("app/db").await.unwrap_err().is_not_found());
    cluster.stop().await.unwrap();
}
