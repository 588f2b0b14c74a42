//! Which roles may call which gRPC service, and the server layer that
//! refuses a peer whose certificate names another: a client node's
//! certificate, though signed by the same CA, cannot call the plan-applier.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use rustls_pki_types::{CertificateDer, DnsName, ServerName};
use tonic::codegen::http;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use webpki::EndEntityCert;

use super::Role;

const FROM_SERVERS: &[Role] = &[Role::Server];
const FROM_NODES: &[Role] = &[Role::Server, Role::Client];
const FROM_ANYONE: &[Role] = &[Role::Server, Role::Client, Role::Cli];

/// The roles that may call `service` (a fully qualified gRPC service name).
/// Services not named here are the control plane's own: servers only.
pub fn allowed(service: &str) -> &'static [Role] {
    let Some(name) = service.strip_prefix("caravan.v1.") else {
        // Health and reflection: any certificate the CA signed may probe.
        return if service.starts_with("grpc.") {
            FROM_ANYONE
        } else {
            FROM_SERVERS
        };
    };
    match name {
        // The gateway's public API.
        "JobService"
        | "EvalService"
        | "AllocService"
        | "NodeService"
        | "DeploymentService"
        | "StatusService"
        | "SystemService"
        | "EventService"
        | "VariableService"
        | "AclService"
        | "ServiceRegistryService" => FROM_ANYONE,
        // What client nodes call on the gateway.
        "NodeClientService" => FROM_NODES,
        // Internal services, and a node's own service (the gateway calls it).
        _ => FROM_SERVERS,
    }
}

/// The roles `cert` names in `region`, most trusted first (a certificate
/// may name several).
pub fn roles_of(cert: &CertificateDer<'_>, region: &str) -> Vec<Role> {
    let Ok(cert) = EndEntityCert::try_from(cert) else {
        return Vec::new();
    };
    Role::ALL
        .into_iter()
        .filter(|role| names_role(&cert, *role, region))
        .collect()
}

/// Whether `cert` names one of `roles` in `region`; stops at the first.
fn holds_any(cert: &CertificateDer<'_>, roles: &[Role], region: &str) -> bool {
    EndEntityCert::try_from(cert)
        .is_ok_and(|cert| roles.iter().any(|role| names_role(&cert, *role, region)))
}

fn names_role(cert: &EndEntityCert<'_>, role: Role, region: &str) -> bool {
    DnsName::try_from(role.dns_name(region)).is_ok_and(|name| {
        cert.verify_is_valid_for_subject_name(&ServerName::DnsName(name))
            .is_ok()
    })
}

/// Whether a peer presenting `certs` may call `path` (`/pkg.Service/Method`);
/// the refusal names the role found and the roles needed.
pub fn check(
    path: &str,
    certs: Option<&[CertificateDer<'static>]>,
    region: &str,
) -> Result<(), tonic::Status> {
    let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let needed = allowed(service);
    let leaf = certs.and_then(|c| c.first());
    if leaf.is_some_and(|leaf| holds_any(leaf, needed, region)) {
        return Ok(());
    }
    // Only a refusal needs every role the certificate names.
    let found = leaf.map(|leaf| roles_of(leaf, region)).unwrap_or_default();
    let names = |roles: &[Role]| {
        roles
            .iter()
            .map(|r| r.dns_name(region))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let found = if found.is_empty() {
        "no Caravan role".to_string()
    } else {
        names(&found)
    };
    Err(tonic::Status::permission_denied(format!(
        "{service}: the peer's certificate names {found}; {} is needed",
        names(needed)
    )))
}

/// A server layer checking each call's peer certificate against the
/// roles its service allows; with TLS off it passes every call.
#[derive(Debug, Clone, Default)]
pub struct RoleCheckLayer {
    region: Option<Arc<str>>,
}

impl RoleCheckLayer {
    /// Checks roles in `region`; `None` checks nothing (TLS off).
    pub fn new(region: Option<&str>) -> Self {
        RoleCheckLayer {
            region: region.map(Arc::from),
        }
    }
}

impl<S> tower::Layer<S> for RoleCheckLayer {
    type Service = RoleCheck<S>;

    fn layer(&self, inner: S) -> RoleCheck<S> {
        RoleCheck {
            inner,
            region: self.region.clone(),
        }
    }
}

/// The service [`RoleCheckLayer`] wraps around a server's routes.
#[derive(Debug, Clone)]
pub struct RoleCheck<S> {
    inner: S,
    region: Option<Arc<str>>,
}

impl<S, B> tower::Service<http::Request<B>> for RoleCheck<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if let Some(region) = &self.region {
            let certs = req
                .extensions()
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(TlsConnectInfo::peer_certs);
            if let Err(status) = check(
                req.uri().path(),
                certs.as_deref().map(Vec::as_slice),
                region,
            ) {
                tracing::warn!(path = %req.uri().path(), reason = %status.message(), "call refused");
                return Box::pin(std::future::ready(Ok(status.into_http())));
            }
        }
        Box::pin(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use rustls_pki_types::pem::PemObject;

    use super::super::certs::{self, CertRequest};
    use super::*;

    fn cert_of(role: Role, region: &str) -> CertificateDer<'static> {
        let dir = tempfile::tempdir().unwrap();
        certs::create_ca(dir.path(), 10).unwrap();
        let written = certs::create_cert(
            dir.path(),
            &CertRequest {
                role,
                region: region.to_string(),
                days: 10,
                dns_names: Vec::new(),
                ip_addresses: Vec::<IpAddr>::new(),
                ca_cert: dir.path().join(certs::CA_CERT_FILE),
                ca_key: dir.path().join(certs::CA_KEY_FILE),
            },
        )
        .unwrap();
        CertificateDer::from_pem_file(written.cert).unwrap()
    }

    #[test]
    fn each_service_names_the_roles_it_serves() {
        assert_eq!(allowed("caravan.v1.PlanApplierService"), [Role::Server]);
        assert_eq!(allowed("caravan.v1.EvalBrokerService"), [Role::Server]);
        assert_eq!(allowed("caravan.v1.ClientNodeService"), [Role::Server]);
        assert_eq!(
            allowed("caravan.v1.NodeClientService"),
            [Role::Server, Role::Client]
        );
        assert_eq!(allowed("caravan.v1.JobService"), Role::ALL);
        assert_eq!(
            allowed("caravan.v1.ServiceRegistryService"),
            Role::ALL,
            "a client node's template renderer reads services"
        );
        assert_eq!(allowed("grpc.health.v1.Health"), Role::ALL);
        assert_eq!(allowed("other.Unknown"), [Role::Server]);
    }

    #[test]
    fn a_certificate_is_held_to_the_role_it_names() {
        let client = cert_of(Role::Client, "global");
        assert_eq!(roles_of(&client, "global"), [Role::Client]);
        assert!(roles_of(&client, "europe").is_empty(), "another region");
        let chain = [client];
        check(
            "/caravan.v1.NodeClientService/Register",
            Some(&chain),
            "global",
        )
        .unwrap();
        check("/caravan.v1.JobService/Register", Some(&chain), "global").unwrap();
        let refused = check(
            "/caravan.v1.PlanApplierService/SubmitPlan",
            Some(&chain),
            "global",
        )
        .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(
            refused.message().contains("names client.global.caravan")
                && refused
                    .message()
                    .contains("server.global.caravan is needed"),
            "{}",
            refused.message()
        );

        let cli = [cert_of(Role::Cli, "global")];
        check("/caravan.v1.JobService/List", Some(&cli), "global").unwrap();
        let refused = check(
            "/caravan.v1.NodeClientService/Register",
            Some(&cli),
            "global",
        )
        .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);

        let server = [cert_of(Role::Server, "global")];
        check(
            "/caravan.v1.EvalBrokerService/Dequeue",
            Some(&server),
            "global",
        )
        .unwrap();
        check(
            "/caravan.v1.ClientNodeService/Logs",
            Some(&server),
            "global",
        )
        .unwrap();

        let none = check("/caravan.v1.JobService/List", None, "global").unwrap_err();
        assert!(
            none.message().contains("no Caravan role"),
            "{}",
            none.message()
        );
    }
}
