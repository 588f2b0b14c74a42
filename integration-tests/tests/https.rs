//! The gateway's Nomad HTTP API over TLS (`tls.http`), as the real binary:
//! plain HTTP gets nowhere, HTTPS with the cluster's CA answers (the web UI
//! too), a client certificate of another CA is refused; with
//! `tls.verify_https_client` a client certificate signed by the CA is
//! required, and a `cli` one is enough; new files of another CA are served
//! without a restart.
//!
//! Needs the service binaries (`cargo build --workspace --bins`) and
//! `CARAVAN_TEST_ETCD`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::http::HttpApi;
use caravan_integration_tests::process::{self, ServiceProcess};
use caravan_integration_tests::{Progress, binaries, wait_for};
use caravan_runtime::names;
use caravan_runtime::tls::Role;
use caravan_runtime::tls::certs::{self, CertRequest};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

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

/// Starts an api-gateway binary with HTTPS from `tls`'s files and `extra`
/// settings; returns it with its HTTP address once that accepts.
async fn gateway(
    dir: &Path,
    tls: &Path,
    name: &str,
    extra: &[(&str, &str)],
) -> (ServiceProcess, SocketAddr) {
    let bins = binaries::bin_dir().unwrap();
    let binary = binaries::binary(&bins, &names::binary(names::API_GATEWAY)).unwrap();
    let (grpc, http) = (process::free_addr().unwrap(), process::free_addr().unwrap());
    let file = |name: &str| tls.join(name).display().to_string();
    let mut settings = vec![
        ("grpc_addr".to_string(), grpc.to_string()),
        ("http_addr".to_string(), http.to_string()),
        (
            "store.endpoints".to_string(),
            caravan_testkit::etcd_endpoints().join(","),
        ),
        (
            "store.prefix".to_string(),
            caravan_testkit::unique_prefix("https"),
        ),
        ("tls.http".to_string(), "true".to_string()),
        ("tls.ca_file".to_string(), file(certs::CA_CERT_FILE)),
        (
            "tls.cert_file".to_string(),
            file("global-server-caravan.pem"),
        ),
        (
            "tls.key_file".to_string(),
            file("global-server-caravan-key.pem"),
        ),
    ];
    settings.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let args: Vec<String> = settings
        .into_iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect();
    let mut gw = ServiceProcess::spawn(
        name,
        &binary,
        &args,
        grpc,
        dir.join(format!("{name}.log")),
        Duration::from_secs(5),
    )
    .unwrap();
    let started = wait_for(
        &format!("{name} to listen"),
        Duration::from_secs(30),
        async || {
            if let Some(status) = gw.exited() {
                anyhow::bail!("{name} exited ({status}): {}", gw.tail(40));
            }
            Ok(if process::accepts(http) && process::accepts(grpc) {
                Progress::Done(())
            } else {
                Progress::Waiting("not listening yet".into())
            })
        },
    )
    .await;
    if let Err(err) = started {
        panic!("{err:#}\n{}", gw.tail(40));
    }
    (gw, http)
}

/// `GET path` over HTTPS to `addr`, trusting `ca` and presenting
/// `<stem>.pem` from `cert_dir` when given, checking the address as curl
/// does (the certificates carry 127.0.0.1).
async fn https_get(
    addr: SocketAddr,
    ca: &Path,
    client: Option<(&Path, &str)>,
    path: &str,
) -> anyhow::Result<(u16, String)> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let config = match client {
        Some((dir, stem)) => builder.with_client_auth_cert(
            CertificateDer::pem_file_iter(dir.join(format!("{stem}.pem")))?
                .collect::<Result<Vec<_>, _>>()?,
            PrivateKeyDer::from_pem_file(dir.join(format!("{stem}-key.pem")))?,
        )?,
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let reply = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .map_err(|_| anyhow::anyhow!("no answer in 10 s"))??;
    let status = reply.status().as_u16();
    let body = reply.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_api_serves_https_and_can_require_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let tls = issue(&dir.path().join("tls"));
    let other = issue(&dir.path().join("other"));
    let ca = tls.join(certs::CA_CERT_FILE);

    // HTTPS; a client certificate is checked when presented.
    let (_gw, http) = gateway(dir.path(), &tls, "api-gateway-https", &[]).await;
    let plain = HttpApi::new(http).get("/v1/status/leader").await;
    assert!(
        plain.as_ref().is_err() || plain.as_ref().is_ok_and(|r| r.status != 200),
        "plain HTTP was answered: {plain:?}"
    );
    let (status, body) = https_get(http, &ca, None, "/v1/status/leader")
        .await
        .expect("HTTPS with the CA");
    assert_eq!(status, 200, "{body}");
    // The web UI comes over the same listener.
    let (status, body) = https_get(http, &ca, None, "/ui/jobs")
        .await
        .expect("the UI over HTTPS");
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("<!doctype html>"), "{body}");
    let (status, body) = https_get(
        http,
        &ca,
        Some((&tls, "global-cli-caravan")),
        "/v1/status/leader",
    )
    .await
    .expect("HTTPS with a cli certificate");
    assert_eq!(status, 200, "{body}");
    assert!(
        https_get(
            http,
            &ca,
            Some((&other, "global-cli-caravan")),
            "/v1/status/leader"
        )
        .await
        .is_err(),
        "a client certificate of another CA was accepted"
    );
    assert!(
        https_get(
            http,
            &other.join(certs::CA_CERT_FILE),
            None,
            "/v1/status/leader"
        )
        .await
        .is_err(),
        "a client trusting another CA accepted the gateway's certificate"
    );

    // verify_https_client: no certificate, no answer; any role of the CA
    // will do.
    let (verifying, http) = gateway(
        dir.path(),
        &tls,
        "api-gateway-verify",
        &[("tls.verify_https_client", "true")],
    )
    .await;
    let refused = https_get(http, &ca, None, "/v1/status/leader").await;
    assert!(
        refused.is_err(),
        "answered without a client certificate: {refused:?}"
    );
    let (status, body) = https_get(
        http,
        &ca,
        Some((&tls, "global-cli-caravan")),
        "/v1/status/leader",
    )
    .await
    .expect("HTTPS with a cli certificate");
    assert_eq!(status, 200, "{body}");
    let (status, _) = https_get(
        http,
        &ca,
        Some((&tls, "global-server-caravan")),
        "/v1/agent/self",
    )
    .await
    .expect("HTTPS with a server certificate");
    assert_eq!(status, 200);

    // New files of another CA: served without a restart, and logged.
    for name in [
        "global-server-caravan-key.pem",
        "global-server-caravan.pem",
        certs::CA_CERT_FILE,
    ] {
        std::fs::copy(other.join(name), tls.join(name)).unwrap();
    }
    let other_ca = other.join(certs::CA_CERT_FILE);
    wait_for(
        "the new certificates to be served",
        Duration::from_secs(15),
        async || {
            let reply = https_get(
                http,
                &other_ca,
                Some((&other, "global-cli-caravan")),
                "/v1/status/leader",
            )
            .await;
            Ok(match reply {
                Ok((200, _)) => Progress::Done(()),
                other => Progress::Waiting(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap();
    assert!(
        https_get(
            http,
            &ca,
            Some((&tls, "global-cli-caravan")),
            "/v1/status/leader"
        )
        .await
        .is_err(),
        "the old CA's client still got in"
    );
    let log = std::fs::read_to_string(&verifying.log).unwrap();
    assert!(log.contains("reloaded TLS certificates"), "{log}");
}

/// `tls.http` without the files stops the gateway at start, naming the key.
#[test]
fn https_without_files_is_a_configuration_error() {
    let bins = binaries::bin_dir().unwrap();
    let binary = binaries::binary(&bins, &names::binary(names::API_GATEWAY)).unwrap();
    let out = std::process::Command::new(binary)
        .args(["--set", "tls.http=true", "--check-config"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tls.http: "), "{stderr}");
}

/// Runs the `caravan` CLI with only `env` as its environment (of Caravan's
/// and Nomad's variables).
fn cli(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let bins = binaries::bin_dir().unwrap();
    let mut command = std::process::Command::new(binaries::binary(&bins, "caravan").unwrap());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CARAVAN_") || name.starts_with("NOMAD_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The CLI over HTTPS with Nomad's TLS variables: the gateway's CA and, when
/// it asks for one, a client certificate; a wrong CA or no certificate gets
/// nowhere, and `-tls-skip-verify` skips only the server's check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_speaks_https_with_nomads_tls_variables() {
    let dir = tempfile::tempdir().unwrap();
    let tls = issue(&dir.path().join("tls"));
    let other = issue(&dir.path().join("other"));
    let (_gw, http) = gateway(
        dir.path(),
        &tls,
        "api-gateway-cli",
        &[("tls.verify_https_client", "true")],
    )
    .await;
    let addr = format!("https://{http}");
    let file = |dir: &Path, name: &str| dir.join(name).display().to_string();
    let (ca, cert, key) = (
        file(&tls, certs::CA_CERT_FILE),
        file(&tls, "global-cli-caravan.pem"),
        file(&tls, "global-cli-caravan-key.pem"),
    );
    let text = |out: &std::process::Output| {
        format!(
            "{}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let full = [
        ("NOMAD_ADDR", addr.as_str()),
        ("NOMAD_CACERT", ca.as_str()),
        ("NOMAD_CLIENT_CERT", cert.as_str()),
        ("NOMAD_CLIENT_KEY", key.as_str()),
    ];
    let out = cli(&["job", "status"], &full);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "No running jobs"
    );

    // The same through the flags.
    let out = cli(
        &[
            "-address",
            &addr,
            "-ca-cert",
            &ca,
            "-client-cert",
            &cert,
            "-client-key",
            &key,
            "node",
            "status",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));

    // No client certificate: the gateway wants one.
    let out = cli(&["job", "status"], &full[..2]);
    assert!(!out.status.success(), "{}", text(&out));
    // No CA: refused before anything is sent.
    let out = cli(&["job", "status"], &[full[0], full[2], full[3]]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("-ca-cert"), "{}", text(&out));
    // Another CA: the gateway's certificate is not trusted.
    let other_ca = file(&other, certs::CA_CERT_FILE);
    let mut wrong = full;
    wrong[1] = ("NOMAD_CACERT", other_ca.as_str());
    let out = cli(&["job", "status"], &wrong);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("TLS handshake failed"),
        "{}",
        text(&out)
    );
    // Skipping the server's check leaves the client certificate to present.
    let mut skip = wrong;
    skip[1] = ("NOMAD_SKIP_VERIFY", "true");
    let out = cli(&["job", "status"], &skip);
    assert!(out.status.success(), "{}", text(&out));
}
