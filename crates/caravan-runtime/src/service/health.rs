//! `<binary> health`: asks a replica's standard gRPC health service
//! (`grpc.health.v1.Health/Check`) whether it serves, for container
//! healthchecks and Kubernetes probes where no `grpc_health_probe` is at hand.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The flags of the `health` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    /// The replica's gRPC address, `host:port`; by default the configured
    /// `grpc_addr`, with 127.0.0.1 for an unspecified host (0.0.0.0, [::]).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
    /// The gRPC service to ask about; empty asks about the server as a whole.
    #[arg(long, default_value = "")]
    pub service: String,
    /// How long to wait for the connection and the answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    pub timeout_ms: u64,
}

/// The address to probe: `--addr`, else `grpc_addr` with a reachable host.
pub(super) fn probe_addr(args: &HealthArgs, grpc_addr: &str) -> anyhow::Result<String> {
    match &args.addr {
        Some(addr) => Ok(addr.clone()),
        None => reachable_addr(grpc_addr),
    }
}

/// The address a probe on this host dials for `grpc_addr`: 127.0.0.1 for
/// an unspecified host (0.0.0.0, [::]); an error for a port picked at start.
pub fn reachable_addr(grpc_addr: &str) -> anyhow::Result<String> {
    let bound: SocketAddr = grpc_addr.parse().map_err(|err| {
        anyhow::anyhow!("grpc_addr {grpc_addr:?} is not an address to probe ({err}); pass --addr")
    })?;
    if bound.port() == 0 {
        anyhow::bail!("grpc_addr {grpc_addr:?} picks a free port at start; pass --addr");
    }
    Ok(crate::grpc::advertise_addr("", bound))
}

/// Asks `addr` once and prints the answer: exits 0 only when it says
/// SERVING, 1 when it says anything else or cannot be asked.
pub(super) fn probe(name: &str, addr: &str, args: &HealthArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(err) => {
            eprintln!("{name} health: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let target = if args.service.is_empty() {
        "the server".to_string()
    } else {
        args.service.clone()
    };
    match runtime.block_on(check(addr, &args.service, timeout)) {
        Ok(ServingStatus::Serving) => {
            println!("{addr}: {target} is SERVING");
            ExitCode::SUCCESS
        }
        Ok(status) => {
            eprintln!("{addr}: {target} is {}", status.as_str_name());
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("{name} health: {addr}: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Asks the gRPC health service at `addr` about `service` (empty: the
/// server as a whole), over TLS when the process installed it: `Ok` only
/// when it answered SERVING, else what it answered or what went wrong.
pub async fn serving(addr: &str, service: &str, timeout: Duration) -> anyhow::Result<()> {
    let status = check(addr, service, timeout).await?;
    if status == ServingStatus::Serving {
        Ok(())
    } else {
        anyhow::bail!("{addr}: answered {}", status.as_str_name())
    }
}

async fn check(addr: &str, service: &str, timeout: Duration) -> anyhow::Result<ServingStatus> {
    let endpoint = crate::grpc::endpoint(addr)
        .map_err(|err| anyhow::anyhow!("not an address: {err}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let asked = async {
        // Over TLS with the process's files, checking the server role.
        let channel = match crate::tls::current() {
            Some(tls) => {
                endpoint
                    .connect_with_connector(tls.connector(crate::tls::Role::Server))
                    .await?
            }
            None => endpoint.connect().await?,
        };
        let reply = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: service.to_string(),
            })
            .await?
            .into_inner();
        anyhow::Ok(reply.status())
    };
    tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(addr: Option<&str>) -> HealthArgs {
        HealthArgs {
            addr: addr.map(String::from),
            service: String::new(),
            timeout_ms: 500,
        }
    }

    #[test]
    fn the_probed_address_comes_from_the_flag_or_the_configuration() {
        assert_eq!(probe_addr(&args(Some("a:1")), "0.0.0.0:9").unwrap(), "a:1");
        assert_eq!(
            probe_addr(&args(None), "0.0.0.0:4650").unwrap(),
            "127.0.0.1:4650"
        );
        assert_eq!(probe_addr(&args(None), "10.1.2.3:7").unwrap(), "10.1.2.3:7");
        let err = probe_addr(&args(None), "0.0.0.0:0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--addr"), "{err}");
        assert!(probe_addr(&args(None), "host:1").is_err());
    }

    #[tokio::test]
    async fn serving_only_when_the_health_service_says_so() {
        let (listener, local) = crate::grpc::bind("127.0.0.1:0").await.unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let router = crate::grpc::router(&["caravan.v1.Probe"]).await.unwrap();
        let serving = tokio::spawn(crate::grpc::serve(router, listener, stop.clone()));
        let addr = local.to_string();
        let second = Duration::from_secs(1);
        assert_eq!(
            check(&addr, "", second).await.unwrap(),
            ServingStatus::Serving
        );
        assert_eq!(
            check(&addr, "caravan.v1.Probe", second).await.unwrap(),
            ServingStatus::Serving
        );
        // The standard service answers NOT_FOUND for a service it does not know.
        assert!(check(&addr, "caravan.v1.Other", second).await.is_err());
        stop.cancel();
        serving.await.unwrap().unwrap();
        assert!(
            check(&addr, "", second).await.is_err(),
            "nobody listens any more"
        );
    }
}
