//! Caravan on an etcd that serves clients over TLS only and requires a
//! client certificate signed by its CA (`--client-cert-auth`): the store
//! works through every kind of request, a client without a certificate,
//! with one of another CA, or trusting another CA is refused with a message
//! saying why, and a whole cluster places a job through it.
//!
//! Needs the `etcd` binary on `PATH`; the cluster test also needs the
//! service binaries (`cargo build --workspace --bins`) and starts its own
//! etcd (`CARAVAN_TEST_ETCD` is not used).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::{Cluster, EtcdProcess, EtcdTlsFiles, Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::AllocClientStatus;
use caravan_store::{
    Compare, CompareOp, EtcdConfig, EtcdStore, EventKind, Op, Range, Store, StoreError, Txn,
};
use futures::StreamExt;

/// How long a refused client may try before it reports.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// A config for `etcd` whose connect timeout is short: used by clients
/// that are to be refused, so they give up quickly.
fn refused_config(etcd: &EtcdProcess) -> EtcdConfig {
    let mut config = etcd.etcd_config();
    config.connect_timeout = REFUSAL_TIMEOUT;
    config
}

/// The error connecting with `config` fails with.
async fn refusal(config: EtcdConfig) -> StoreError {
    match EtcdStore::connect_with(config).await {
        Ok(_) => panic!("etcd accepted a client it should refuse"),
        Err(err) => err,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_works_over_tls_with_a_client_certificate() {
    let etcd = EtcdProcess::start_tls().await.unwrap();
    assert!(
        etcd.endpoint().starts_with("https://"),
        "{}",
        etcd.endpoint()
    );
    let store: Arc<dyn Store> =
        Arc::new(EtcdStore::connect_with(etcd.etcd_config()).await.unwrap());

    // A watch opened first sees the writes below.
    let start = store.current_revision().await.unwrap() + 1;
    let mut watch = store.watch(b"/tls/", start).await.unwrap();

    // Put and get.
    let put_at = store.put(b"/tls/a", b"1", 0).await.unwrap();
    let got = store.get(b"/tls/a").await.unwrap().unwrap();
    assert_eq!(
        (got.value.as_slice(), got.mod_revision),
        (&b"1"[..], put_at)
    );

    // A transaction whose condition holds, then one whose does not.
    let txn = Txn::new()
        .when(Compare::value("/tls/a", CompareOp::Equal, "1"))
        .and_then(Op::put("/tls/b", "2"))
        .or_else(Op::put("/tls/b", "wrong"));
    assert!(store.txn(txn).await.unwrap().succeeded);
    let txn = Txn::new()
        .when(Compare::absent("/tls/a"))
        .and_then(Op::put("/tls/b", "wrong"));
    assert!(!store.txn(txn).await.unwrap().succeeded);
    let both = store.range(Range::prefix("/tls/")).await.unwrap();
    let values: Vec<&[u8]> = both.kvs.iter().map(|kv| kv.value.as_slice()).collect();
    assert_eq!(values, [&b"1"[..], &b"2"[..]]);

    // A key on a lease goes when the lease is revoked.
    let lease = store.lease_grant(30).await.unwrap();
    store.put(b"/tls/leased", b"x", lease.id).await.unwrap();
    assert!(store.lease_keep_alive(lease.id).await.unwrap() > 0);
    store.lease_revoke(lease.id).await.unwrap();
    assert_eq!(store.get(b"/tls/leased").await.unwrap(), None);

    // The watch delivered every change, in order.
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let batch = tokio::time::timeout(Duration::from_secs(10), watch.stream.next())
            .await
            .expect("the watch delivers within 10 s")
            .expect("the watch stays open")
            .unwrap();
        seen.extend(
            batch
                .events
                .into_iter()
                .map(|e| (e.kind, String::from_utf8(e.kv.key).unwrap())),
        );
    }
    assert_eq!(
        seen,
        [
            (EventKind::Put, "/tls/a".to_string()),
            (EventKind::Put, "/tls/b".to_string()),
            (EventKind::Put, "/tls/leased".to_string()),
            (EventKind::Delete, "/tls/leased".to_string()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_certificate_is_refused() {
    let etcd = EtcdProcess::start_tls().await.unwrap();
    let mut config = refused_config(&etcd);
    config.tls.as_mut().unwrap().client_cert = None;
    let err = refusal(config).await;
    let message = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    // etcd refuses after the TLS 1.3 handshake: its alert (which Go's TLS
    // sends as CertificateRequired or BadCertificate) names the reason when
    // it reaches the client; when the connection closes first, the message
    // says what the likely reason is.
    assert!(
        message.contains(etcd.endpoint())
            && (message.contains("CertificateRequired")
                || message.contains("BadCertificate")
                || message.contains("no client certificate is configured")),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_of_another_ca_is_refused() {
    let etcd = EtcdProcess::start_tls().await.unwrap();
    let other = tempfile::tempdir().unwrap();
    let other_ca = EtcdTlsFiles::create(other.path()).unwrap();
    let mut config = refused_config(&etcd);
    config.tls.as_mut().unwrap().client_cert = other_ca.etcd_tls().client_cert;
    let err = refusal(config).await;
    let message = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    // etcd's alert, or the likely reason when the connection closes first.
    assert!(
        message.contains("BadCertificate")
            || message.contains("not signed by its --trusted-ca-file"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_is_refused() {
    let etcd = EtcdProcess::start_tls().await.unwrap();
    let other = tempfile::tempdir().unwrap();
    let other_ca = EtcdTlsFiles::create(other.path()).unwrap();
    let mut config = refused_config(&etcd);
    config.tls.as_mut().unwrap().ca_file = other_ca.ca_file.clone();
    let err = refusal(config).await;
    let message = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    // rustls's reason: another CA of the same name (as `caravan tls ca
    // create` names every CA) fails on the signature, an unrelated one as
    // an unknown issuer.
    assert!(message.contains("invalid peer certificate"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_to_a_tls_etcd_is_refused() {
    let etcd = EtcdProcess::start_tls().await.unwrap();
    let mut config = refused_config(&etcd);
    config.tls = None;
    let err = refusal(config).await;
    assert!(
        matches!(&err, StoreError::InvalidArgument(m) if m.contains("no CA")),
        "{err:?}"
    );
}

/// The control plane and a client node around a TLS etcd: every service
/// that keeps state gets the `[store]` TLS settings and a job is placed
/// and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_places_a_job_through_a_tls_etcd() {
    const JOB: &str = "etcd-tls-echo";
    let etcd = EtcdProcess::start_tls().await.unwrap();
    let mut c = Cluster::on_etcd_process("etcd-tls", &etcd).await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("etcd-tls-node", &[("drivers", "mock")])
        .await
        .unwrap();
    let job = jobs::service_job(JOB, 2, jobs::mock_task(100, 64));
    let reply = c
        .http()
        .unwrap()
        .put_json("/v1/jobs", &job)
        .await
        .unwrap()
        .ok_json()
        .unwrap();
    jobs::eval_id(&reply).unwrap();
    let state = c.state.clone();
    let running = wait_for(
        "both allocations to run",
        Duration::from_secs(60),
        async || {
            let running = state
                .allocs()
                .await?
                .into_iter()
                .filter(|a| {
                    a.job_id == JOB
                        && a.is_live()
                        && a.client_status() == AllocClientStatus::Running
                })
                .count();
            Ok(if running == 2 {
                Progress::Done(running)
            } else {
                Progress::Waiting(format!("{running} of 2 running"))
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(running, 2);
}
