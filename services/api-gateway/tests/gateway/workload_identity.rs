//! Workload identities end to end on one gateway: a node has its task's
//! identity signed, the token verifies against `/.well-known/jwks.json`,
//! reads its own job's variables (and no others') over HTTP and gRPC with
//! ACLs on, and stops working once its allocation is stopped.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use caravan_api_gateway::VariableKey;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::service_registry_service_client::ServiceRegistryServiceClient;
use caravan_proto::variable_service_client::VariableServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, GetServiceRequest, GetVariableRequest, Job,
    ListServicesRequest, Node, RegisterNodeRequest, SignIdentitiesRequest, WorkloadIdentity,
};
use caravan_state::encode;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Code, Request};

use crate::acl::{bootstrap, call};
use crate::common::{Backend, HttpAnswer, TestGateway, node_secret};

type NodeClient = NodeClientServiceClient<Channel>;

async fn start(backend: Backend, name: &str, acl: bool, issuer: &str) -> TestGateway {
    let key = VariableKey::generate();
    let issuer = issuer.to_string();
    TestGateway::start_with(backend.store().await, name, |c| {
        c.acl.enabled = acl;
        c.variables_key = key;
        c.oidc_issuer = issuer;
    })
    .await
}

/// Job `id` at version 0 with group `web` of task `app`, which declares a
/// `vault` identity besides its default one.
fn job(id: &str) -> Job {
    let mut job = crate::common::job(id, 1);
    job.namespace = "default".into();
    job.task_groups[0].tasks[0].identities = vec![WorkloadIdentity {
        name: "vault".into(),
        audience: vec!["vault.io".into()],
        ttl_ns: 3_600_000_000_000,
        ..Default::default()
    }];
    job
}

fn alloc(id: &str, node_id: &str, job_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: format!("{job_id}.web[0]"),
        namespace: "default".into(),
        job_id: job_id.into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Running);
    a
}

/// Stores job `web` and its alloc `a1` on node `n1`, registers `n1`, and
/// waits until the gateway's cache has the alloc.
async fn placed(gw: &TestGateway) -> NodeClient {
    let web = job("web");
    gw.store
        .put(&gw.keys.job_version("default", "web", 0), &encode(&web), 0)
        .await
        .unwrap();
    gw.store
        .put(&gw.keys.job("default", "web"), &encode(&web), 0)
        .await
        .unwrap();
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&alloc("a1", "n1", "web")), 0)
        .await
        .unwrap();
    let mut client = NodeClientServiceClient::new(gw.channel().await);
    for id in ["n1", "n2"] {
        client
            .register_node(RegisterNodeRequest {
                node: Some(Node {
                    id: id.into(),
                    name: id.into(),
                    datacenter: "dc1".into(),
                    ..Default::default()
                }),
                secret_id: node_secret(id),
            })
            .await
            .unwrap();
    }
    client
}

fn sign_request(node: &str, alloc: &str, task: &str, names: &[&str]) -> SignIdentitiesRequest {
    SignIdentitiesRequest {
        node_id: node.into(),
        secret_id: node_secret(node),
        alloc_id: alloc.into(),
        task: task.into(),
        identities: names.iter().map(|n| n.to_string()).collect(),
    }
}

async fn sign(client: &mut NodeClient, names: &[&str]) -> Vec<(String, String)> {
    client
        .sign_identities(sign_request("n1", "a1", "app", names))
        .await
        .unwrap()
        .into_inner()
        .identities
        .into_iter()
        .map(|s| (s.name, s.jwt))
        .collect()
}

/// Decodes `token` with the key `/.well-known/jwks.json` names by its kid.
async fn verify_with_jwks(gw: &TestGateway, token: &str, aud: &str) -> Value {
    let jwks = gw.http("GET", "/.well-known/jwks.json", b"").await;
    assert_eq!(jwks.status, 200, "{}", jwks.text());
    let jwks = jwks.json();
    let header = jsonwebtoken::decode_header(token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::EdDSA);
    let kid = header.kid.unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid.as_str())
        .expect("the token's kid is in the JWKS");
    assert_eq!(
        (&jwk["kty"], &jwk["crv"], &jwk["alg"], &jwk["use"]),
        (
            &json!("OKP"),
            &json!("Ed25519"),
            &json!("EdDSA"),
            &json!("sig")
        )
    );
    let x = jwk["x"].as_str().unwrap();
    assert_eq!(URL_SAFE_NO_PAD.decode(x).unwrap().len(), 32);
    let key = jsonwebtoken::DecodingKey::from_ed_components(x).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.required_spec_claims.clear();
    validation.set_audience(&[aud]);
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .expect("the token verifies against the JWKS")
        .claims
}

async fn wait_for_status(gw: &TestGateway, token: &str, path: &str, status: u16) -> HttpAnswer {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let answer = call(gw, Some(token), "GET", path, b"").await;
        if answer.status == status || std::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn put_var(gw: &TestGateway, root: &str, path: &str) {
    let body = json!({"Items": {"k": path}}).to_string();
    let answer = call(
        gw,
        Some(root),
        "PUT",
        &format!("/v1/var/{path}"),
        body.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
}

pub async fn a_signed_identity_verifies_against_the_jwks(backend: Backend) {
    let gw = start(backend, "wid-jwks", false, "").await;
    let mut client = placed(&gw).await;
    let signed = sign(&mut client, &[]).await;
    assert_eq!(signed.len(), 1);
    assert_eq!(signed[0].0, "default");
    let claims = verify_with_jwks(&gw, &signed[0].1, "nomadproject.io").await;
    assert_eq!(claims["nomad_namespace"], "default");
    assert_eq!(claims["nomad_job_id"], "web");
    assert_eq!(claims["nomad_allocation_id"], "a1");
    assert_eq!(claims["nomad_task"], "app");
    assert_eq!(claims["sub"], "global:default:web:web:app:default");
    assert_eq!(claims["aud"], json!(["nomadproject.io"]));
    assert!(claims["iat"].is_i64() && claims["nbf"].is_i64() && claims["jti"].is_string());
    assert!(
        claims.get("exp").is_none(),
        "the default identity lives with its alloc"
    );

    // A declared identity: its own audience and TTL.
    let both = sign(&mut client, &["default", "vault"]).await;
    assert_eq!(both.len(), 2);
    assert_eq!(both[1].0, "vault");
    let vault = verify_with_jwks(&gw, &both[1].1, "vault.io").await;
    assert_eq!(vault["sub"], "global:default:web:web:app:vault");
    let ttl = vault["exp"].as_i64().unwrap() - vault["iat"].as_i64().unwrap();
    assert!((3600..=3601).contains(&ttl), "{ttl}");

    // OIDC discovery is off without an issuer, as Nomad's.
    let off = gw
        .http("GET", "/.well-known/openid-configuration", b"")
        .await;
    assert_eq!(off.status, 404);
    gw.stop().await;
}

pub async fn only_the_node_of_a_running_alloc_gets_its_identities(backend: Backend) {
    let gw = start(backend, "wid-sign", true, "").await;
    let mut client = placed(&gw).await;
    let code = |r: Result<tonic::Response<_>, tonic::Status>| r.map(drop).unwrap_err().code();
    // Another node, a wrong secret.
    let other = client
        .sign_identities(sign_request("n2", "a1", "app", &[]))
        .await;
    assert_eq!(code(other), Code::PermissionDenied);
    let mut forged = sign_request("n1", "a1", "app", &[]);
    forged.secret_id = node_secret("n2");
    assert_eq!(
        code(client.sign_identities(forged).await),
        Code::PermissionDenied
    );
    // Unknown task, identity, alloc; missing fields.
    let task = client
        .sign_identities(sign_request("n1", "a1", "nope", &[]))
        .await
        .unwrap_err();
    assert_eq!(task.code(), Code::InvalidArgument);
    assert!(task.message().contains("task"), "{}", task.message());
    let name = client
        .sign_identities(sign_request("n1", "a1", "app", &["consul"]))
        .await
        .unwrap_err();
    assert_eq!(name.code(), Code::InvalidArgument);
    assert!(name.message().contains("identities"), "{}", name.message());
    let missing = client
        .sign_identities(sign_request("n1", "a9", "app", &[]))
        .await;
    assert_eq!(code(missing), Code::NotFound);
    let empty = client
        .sign_identities(sign_request("n1", "", "app", &[]))
        .await
        .unwrap_err();
    assert!(empty.message().contains("alloc_id"), "{}", empty.message());
    // A stopped alloc gets none.
    let mut stopped = alloc("a1", "n1", "web");
    stopped.set_desired_status(AllocDesiredStatus::Stop);
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&stopped), 0)
        .await
        .unwrap();
    let refused = client
        .sign_identities(sign_request("n1", "a1", "app", &[]))
        .await;
    assert_eq!(code(refused), Code::PermissionDenied);
    gw.stop().await;
}

pub async fn a_task_reads_its_own_variables_until_its_alloc_stops(backend: Backend) {
    let gw = start(backend, "wid-acl", true, "https://caravan.example/").await;
    let root = bootstrap(&gw).await;
    let mut client = placed(&gw).await;
    for path in [
        "nomad/jobs",
        "nomad/jobs/web",
        "nomad/jobs/web/web/app",
        "nomad/jobs/web/deeper/x",
        "nomad/jobs/db",
        "app/secret",
    ] {
        put_var(&gw, &root, path).await;
    }
    let token = sign(&mut client, &[]).await.remove(0).1;
    let claims = verify_with_jwks(&gw, &token, "nomadproject.io").await;
    assert_eq!(claims["iss"], "https://caravan.example/");

    // Its own job's, group's and task's paths, read only.
    let own = wait_for_status(&gw, &token, "/v1/var/nomad/jobs/web", 200).await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["Items"]["k"], "nomad/jobs/web");
    for path in ["nomad/jobs", "nomad/jobs/web/web/app"] {
        let r = call(&gw, Some(&token), "GET", &format!("/v1/var/{path}"), b"").await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    for path in ["nomad/jobs/db", "app/secret", "nomad/jobs/web/deeper/x"] {
        let r = call(&gw, Some(&token), "GET", &format!("/v1/var/{path}"), b"").await;
        assert_eq!(r.status, 403, "{path}: {}", r.text());
    }
    let write = call(
        &gw,
        Some(&token),
        "PUT",
        "/v1/var/nomad/jobs/web",
        br#"{"Items":{"k":"v"}}"#,
    )
    .await;
    assert_eq!(write.status, 403);
    // Nothing else: no jobs, no nodes; but services, as Nomad's.
    assert_eq!(
        call(&gw, Some(&token), "GET", "/v1/jobs", b"").await.status,
        403
    );
    assert_eq!(
        call(&gw, Some(&token), "GET", "/v1/nodes", b"")
            .await
            .status,
        403
    );
    let services = call(&gw, Some(&token), "GET", "/v1/services", b"").await;
    assert_eq!(services.status, 200, "{}", services.text());
    // The list shows its own paths only.
    let listed = call(&gw, Some(&token), "GET", "/v1/vars?prefix=nomad/jobs", b"").await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let mut paths: Vec<String> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        ["nomad/jobs", "nomad/jobs/web", "nomad/jobs/web/web/app"]
    );

    // The same over gRPC, the token in the metadata.
    let mut vars = VariableServiceClient::new(gw.channel().await);
    let get = |path: &str| {
        let mut r = Request::new(GetVariableRequest {
            path: path.into(),
            options: None,
        });
        r.metadata_mut()
            .insert("x-nomad-token", token.parse().unwrap());
        r
    };
    let got = vars.get_variable(get("nomad/jobs/web")).await.unwrap();
    let got = got.into_inner().variable.unwrap();
    assert_eq!(got.items["k"], "nomad/jobs/web");
    let denied = vars.get_variable(get("nomad/jobs/db")).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    // Services, as a template's nomadService reads them.
    let mut services = ServiceRegistryServiceClient::new(gw.channel().await);
    let mut asked = Request::new(GetServiceRequest {
        name: "db".into(),
        ..Default::default()
    });
    asked
        .metadata_mut()
        .insert("x-nomad-token", token.parse().unwrap());
    services.get_service(asked).await.unwrap();
    let mut listed = Request::new(ListServicesRequest::default());
    listed
        .metadata_mut()
        .insert("x-nomad-token", token.parse().unwrap());
    services.list_services(listed).await.unwrap();

    // A forged token (another key) is refused.
    let mut forged = token.clone();
    let cut = forged.rfind('.').unwrap() + 1;
    forged.replace_range(
        cut..cut + 2,
        if &token[cut..cut + 2] == "AA" {
            "BB"
        } else {
            "AA"
        },
    );
    let bad = call(&gw, Some(&forged), "GET", "/v1/var/nomad/jobs/web", b"").await;
    assert_eq!(bad.status, 403);
    assert!(
        bad.text().contains("invalid workload identity"),
        "{}",
        bad.text()
    );

    // The alloc stops: the token is worthless at once, on both APIs.
    let mut stopped = alloc("a1", "n1", "web");
    stopped.set_desired_status(AllocDesiredStatus::Stop);
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&stopped), 0)
        .await
        .unwrap();
    let after = wait_for_status(&gw, &token, "/v1/var/nomad/jobs/web", 403).await;
    assert_eq!(after.status, 403, "{}", after.text());
    assert!(
        after.text().contains("allocation is stopped"),
        "{}",
        after.text()
    );
    let grpc_after = vars.get_variable(get("nomad/jobs/web")).await.unwrap_err();
    assert_eq!(grpc_after.code(), Code::PermissionDenied);
    // Gone altogether (garbage collected): refused the same way.
    gw.store
        .delete(caravan_store::Range::key(gw.keys.alloc("a1")))
        .await
        .unwrap();
    let gone = wait_for_status(&gw, &token, "/v1/var/nomad/jobs/web", 403).await;
    assert!(
        gone.text().contains("allocation is stopped"),
        "{}",
        gone.text()
    );

    // OIDC discovery names the issuer and where its keys are.
    let oidc = gw
        .http("GET", "/.well-known/openid-configuration", b"")
        .await;
    assert_eq!(oidc.status, 200, "{}", oidc.text());
    let oidc = oidc.json();
    assert_eq!(oidc["issuer"], "https://caravan.example/");
    assert_eq!(
        oidc["jwks_uri"],
        "https://caravan.example/.well-known/jwks.json"
    );
    assert_eq!(
        oidc["id_token_signing_alg_values_supported"],
        json!(["EdDSA"])
    );
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::workload_identity;
    a_signed_identity_verifies_against_the_jwks,
    only_the_node_of_a_running_alloc_gets_its_identities,
    a_task_reads_its_own_variables_until_its_alloc_stops,
);
