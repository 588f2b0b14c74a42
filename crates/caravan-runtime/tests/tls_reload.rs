//! Certificates that reload without a restart: a gRPC server of the
//! process's TLS, started with CA A's material, serves CA B's once its files
//! are overwritten — to peers that trust only B, while a connection made
//! before goes on — and keeps B's when a file is then half-written. The
//! process's own channels dial with the new material too.
//!
//! Its own test binary: `tls::install` sets the process's TLS once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use caravan_runtime::grpc;
use caravan_runtime::tls::certs::{self, CertRequest};
use caravan_runtime::tls::{self, RELOAD_PERIOD, Role, TlsConfig};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const SERVICE: &str = "caravan.v1.EvalBrokerService";

/// A CA in `dir` with a server and a CLI certificate it signs.
fn issue(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    certs::create_ca(dir, 10).unwrap();
    for role in [Role::Server, Role::Cli] {
        certs::create_cert(
            dir,
            &CertRequest {
                role,
                region: "global".into(),
                days: 10,
                dns_names: Vec::new(),
                ip_addresses: Vec::new(),
                ca_cert: dir.join(certs::CA_CERT_FILE),
                ca_key: dir.join(certs::CA_KEY_FILE),
            },
        )
        .unwrap();
    }
    dir.to_path_buf()
}

/// Writes `from`'s CA, server certificate and key where `config` points,
/// key first: a watcher looking in between sees a certificate without its
/// key, or a CA that did not sign it, and must refuse both.
fn overwrite(from: &Path, config: &TlsConfig) {
    let copy = |name: &str, to: &Path| std::fs::write(to, std::fs::read(from.join(name)).unwrap());
    copy("global-server-caravan-key.pem", &config.key_file).unwrap();
    copy("global-server-caravan.pem", &config.cert_file).unwrap();
    copy(certs::CA_CERT_FILE, &config.ca_file).unwrap();
}

/// A tonic channel (not the process's TLS) that trusts only `ca_dir`'s CA
/// and presents its CLI certificate.
fn dial(addr: &str, ca_dir: &Path) -> Channel {
    let read = |name: &str| std::fs::read(ca_dir.join(name)).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(certs::CA_CERT_FILE)))
        .identity(Identity::from_pem(
            read("global-cli-caravan.pem"),
            read("global-cli-caravan-key.pem"),
        ))
        .domain_name("server.global.caravan");
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect_lazy()
}

async fn healthy(channel: Channel) -> Result<(), tonic::Status> {
    let mut client = HealthClient::new(channel);
    let check = client.check(HealthCheckRequest {
        service: SERVICE.to_string(),
    });
    tokio::time::timeout(Duration::from_secs(3), check)
        .await
        .map_err(|_| tonic::Status::deadline_exceeded("no answer in 3 s"))?
        .map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_connections_get_the_new_certificates_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = issue(&dir.path().join("a"));
    let b = issue(&dir.path().join("b"));
    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).unwrap();
    let config = TlsConfig {
        enabled: true,
        ca_file: live.join("ca.pem"),
        cert_file: live.join("cert.pem"),
        key_file: live.join("key.pem"),
        ..TlsConfig::default()
    };
    overwrite(&a, &config);
    tls::install(&config).unwrap();

    let (listener, local) = grpc::bind("127.0.0.1:0").await.unwrap();
    let addr = local.to_string();
    let stop = CancellationToken::new();
    let router = grpc::router(&[SERVICE]).await.unwrap();
    let serving = tokio::spawn(grpc::serve(router, listener, stop.clone()));

    // CA A's peers get in, over the acceptor and over the process's own
    // channel; CA B's do not yet.
    let before = dial(&addr, &a);
    healthy(before.clone()).await.expect("a peer of CA A");
    healthy(grpc::channel(&addr).unwrap())
        .await
        .expect("the process's own channel");
    assert!(
        healthy(dial(&addr, &b)).await.is_err(),
        "a peer of CA B got in before the files changed"
    );

    overwrite(&b, &config);
    let started = Instant::now();
    let reloaded = loop {
        if healthy(dial(&addr, &b)).await.is_ok() {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < RELOAD_PERIOD * 5,
            "a peer of CA B still refused {:?} after the files changed",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("CA B's peers served {reloaded:?} after the files changed");

    // New connections of CA A are refused now, the one made before goes on,
    // and the process's own channels present B's certificate.
    assert!(
        healthy(dial(&addr, &a)).await.is_err(),
        "a new peer of CA A still got in"
    );
    healthy(before)
        .await
        .expect("the connection made before the reload");
    healthy(grpc::channel(&addr).unwrap())
        .await
        .expect("the process's own channel after the reload");

    // Half a certificate: refused, and B's material keeps serving.
    let cert = std::fs::read(&config.cert_file).unwrap();
    std::fs::write(&config.cert_file, &cert[..cert.len() / 2]).unwrap();
    tokio::time::sleep(RELOAD_PERIOD * 2).await;
    healthy(dial(&addr, &b))
        .await
        .expect("CA B's material after a half-written certificate");
    std::fs::write(&config.cert_file, b"not a certificate").unwrap();
    tokio::time::sleep(RELOAD_PERIOD * 2).await;
    healthy(dial(&addr, &b))
        .await
        .expect("CA B's material after a garbage certificate");

    stop.cancel();
    serving.await.unwrap().unwrap();
}

/// A handshake that fails (plaintext, here) does not stop the server from
/// accepting the next connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handshake_leaves_the_listener_accepting() {
    let dir = tempfile::tempdir().unwrap();
    let ca = issue(&dir.path().join("ca"));
    let config = TlsConfig {
        enabled: true,
        ca_file: ca.join(certs::CA_CERT_FILE),
        cert_file: ca.join("global-server-caravan.pem"),
        key_file: ca.join("global-server-caravan-key.pem"),
        ..TlsConfig::default()
    };
    let tls = tls::Tls::load(&config).unwrap();
    let (listener, local) = grpc::bind("127.0.0.1:0").await.unwrap();
    let mut incoming = tls::TlsIncoming::new(listener, tls.server_config());

    // Plaintext bytes, then a peer that says nothing and hangs up.
    use tokio::io::AsyncWriteExt;
    let mut plain = tokio::net::TcpStream::connect(local).await.unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    drop(tokio::net::TcpStream::connect(local).await.unwrap());

    let client = tls::Tls::load(&TlsConfig {
        cert_file: ca.join("global-cli-caravan.pem"),
        key_file: ca.join("global-cli-caravan-key.pem"),
        ..config
    })
    .unwrap();
    let dialled = tokio::spawn(async move {
        use tower::Service;
        let uri = format!("http://{local}").parse().unwrap();
        client.connector(Role::Server).call(uri).await
    });
    let accepted = tokio::time::timeout(Duration::from_secs(5), incoming.next())
        .await
        .expect("no connection accepted after the failed handshakes")
        .expect("the accept loop stopped");
    let peer = accepted.get_ref().1.peer_certificates().unwrap();
    assert_eq!(
        caravan_runtime::tls::roles::roles_of(&peer[0], "global"),
        [Role::Cli]
    );
    dialled.await.unwrap().expect("the TLS dial");
}
