//! The banner `caravan dev` prints: where each service listens and what to
//! try first.

use caravan_runtime::names::{
    API_GATEWAY, CLIENT_NODE, DEPLOYMENT_WATCHER, EVAL_BROKER, PLAN_APPLIER, SCHEDULER_WORKER,
};

use super::DevAddresses;
use crate::format::{short_id, table};

/// The banner: where each service listens and what to try.
pub fn banner(addresses: &DevAddresses, store: &str) -> String {
    let a = addresses;
    let rows = vec![
        vec![
            API_GATEWAY.to_string(),
            format!("gRPC {}", a.gateway_grpc),
            format!("HTTP {}", a.gateway_http),
        ],
        vec![
            EVAL_BROKER.to_string(),
            format!("gRPC {}", a.eval_broker),
            String::new(),
        ],
        vec![
            PLAN_APPLIER.to_string(),
            format!("gRPC {}", a.plan_applier),
            String::new(),
        ],
        vec![
            SCHEDULER_WORKER.to_string(),
            format!("gRPC {}", a.scheduler_worker),
            format!("{} workers", a.workers),
        ],
        vec![
            DEPLOYMENT_WATCHER.to_string(),
            format!("gRPC {}", a.deployment_watcher),
            String::new(),
        ],
        vec![
            CLIENT_NODE.to_string(),
            format!("gRPC {}", a.client_node),
            format!("node {} ({})", short_id(&a.node_id), a.drivers.join(", ")),
        ],
    ];
    let services: String = table(rows)
        .replace("<none>", "")
        .lines()
        .map(|l| format!("    {}\n", l.trim_end()))
        .collect();
    // The CLI speaks the HTTP API at http://127.0.0.1:4646 unless told otherwise.
    let address = if a.gateway_http.port() == 4646 && a.gateway_http.ip().is_loopback() {
        String::new()
    } else {
        format!(" -address http://{}", a.gateway_http)
    };
    let docker = if a.drivers.iter().any(|d| d == "docker") {
        format!(
            "\n==> The Docker daemon answers: docker tasks run here (caravan{address} job run examples/redis.nomad.hcl)"
        )
    } else {
        "\n==> The Docker daemon does not answer (/var/run/docker.sock): no docker driver"
            .to_string()
    };
    format!(
        "==> Caravan dev cluster running (state {store}); Ctrl-C stops everything\n\
         {services}    data dir {}\n\
         ==> Try: caravan{address} job run examples/hello.hcl{docker}",
        a.data_dir.display()
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_banner_lists_every_service_and_the_hint() {
        let a = DevAddresses {
            gateway_grpc: "127.0.0.1:4647".parse().unwrap(),
            gateway_http: "127.0.0.1:4646".parse().unwrap(),
            eval_broker: "127.0.0.1:4650".parse().unwrap(),
            plan_applier: "127.0.0.1:4651".parse().unwrap(),
            scheduler_worker: "127.0.0.1:4652".parse().unwrap(),
            deployment_watcher: "127.0.0.1:4653".parse().unwrap(),
            workers: 2,
            client_node: "127.0.0.1:4660".parse().unwrap(),
            node_id: "f7476465-0000".into(),
            drivers: vec!["raw_exec".into(), "mock".into()],
            data_dir: PathBuf::from("/tmp/d"),
        };
        let text = banner(&a, "in memory");
        assert!(text.starts_with("==> Caravan dev cluster running (state in memory)"));
        assert!(
            text.contains("    api-gateway         gRPC 127.0.0.1:4647  HTTP 127.0.0.1:4646\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    client-node         gRPC 127.0.0.1:4660  node f7476465 (raw_exec, mock)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("==> Try: caravan job run examples/hello.hcl\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "==> The Docker daemon does not answer (/var/run/docker.sock): no docker driver"
            ),
            "{text}"
        );
        let mut other = a;
        other.gateway_http = "127.0.0.1:5000".parse().unwrap();
        other.drivers.insert(0, "docker".into());
        let text = banner(&other, "x");
        assert!(
            text.contains("caravan -address http://127.0.0.1:5000 job run examples/hello.hcl"),
            "{text}"
        );
        assert!(text.contains("(docker, raw_exec, mock)"), "{text}");
        assert!(
            text.ends_with("docker tasks run here (caravan -address http://127.0.0.1:5000 job run examples/redis.nomad.hcl)"),
            "{text}"
        );
    }
}
