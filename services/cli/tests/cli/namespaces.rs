//! `namespace` and `node pool` against `caravan dev` over the HTTP API:
//! namespaces applied, listed, refused a job while they do not exist and a
//! delete while a job lives there; node pools applied and listed with their
//! nodes.

#![allow(clippy::unwrap_used)]

use caravan_cli::DevCluster;

use crate::common::{WAIT, cli, options};

fn job_in(namespace: &str) -> String {
    format!(
        r#"
variable "tag" {{
  default = "0"
}}
job "web" {{
  namespace = "{namespace}"
  group "web" {{
    task "web" {{
      driver = "mock"
      config {{
        run_for = "10m"
      }}
      resources {{
        cpu    = 10
        memory = 10
      }}
    }}
  }}
}}
"#
    )
}

/// A plain HTTP GET of `path` on `address` (`http://host:port`): status
/// and body.
async fn http_get(address: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn namespaces_and_node_pools_as_objects() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(options(dir.path()))
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let ok = |what: &str, (code, out, err): (u8, String, String)| {
        assert_eq!(code, 0, "{what}\nstdout:\n{out}\nstderr:\n{err}");
        out
    };

    let out = ok("list", cli(&address, &["namespace", "list"]).await);
    assert_eq!(
        out.trim(),
        "Name     Description\ndefault  Default shared namespace"
    );

    // A job into a namespace that does not exist fails with Nomad's words.
    let prod_job = dir.path().join("prod.hcl");
    std::fs::write(&prod_job, job_in("prod")).unwrap();
    let job_path = prod_job.to_str().unwrap();
    let (code, out, err) = cli(&address, &["job", "run", "-detach", job_path]).await;
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("job \"web\" is in nonexistent namespace \"prod\""),
        "{err}"
    );

    let out = ok(
        "apply",
        cli(
            &address,
            &["namespace", "apply", "-description", "Production", "prod"],
        )
        .await,
    );
    assert_eq!(out.trim(), "Successfully applied namespace \"prod\"!");
    let out = ok("list", cli(&address, &["namespace", "list"]).await);
    assert!(out.contains("prod     Production"), "{out}");
    let out = ok(
        "status",
        cli(&address, &["namespace", "status", "prod"]).await,
    );
    assert!(out.contains("Production"), "{out}");
    // Applied again (read, changed, written back whole).
    ok(
        "apply again",
        cli(
            &address,
            &["namespace", "apply", "-description", "Prod", "prod"],
        )
        .await,
    );
    let out = ok(
        "-json list",
        cli(&address, &["namespace", "list", "-json"]).await,
    );
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[1]["Name"], "prod");
    assert_eq!(listed[1]["Description"], "Prod");

    ok(
        "run",
        cli(
            &address,
            &["job", "run", "-detach", "-var", "tag=1", job_path],
        )
        .await,
    );
    // The run sent the file and its variables; the cluster keeps them.
    let (status, body) =
        http_get(&address, "/v1/job/web/submission?version=0&namespace=prod").await;
    assert_eq!(status, 200, "{body}");
    let sub: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(sub["Source"], job_in("prod"));
    assert_eq!(sub["Format"], "hcl2");
    assert_eq!(sub["VariableFlags"]["tag"], "1");
    let (code, _, err) = cli(&address, &["namespace", "delete", "prod"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("namespace \"prod\" has non-terminal jobs in regions: [global]"),
        "{err}"
    );
    ok(
        "purge",
        cli(
            &address,
            &[
                "job",
                "stop",
                "-namespace",
                "prod",
                "-purge",
                "-detach",
                "web",
            ],
        )
        .await,
    );
    // Its allocations stop once the scheduler has seen the purge; until
    // then the namespace is refused for them.
    let deadline = tokio::time::Instant::now() + WAIT;
    let out = loop {
        let (code, out, err) = cli(&address, &["namespace", "delete", "prod"]).await;
        if code == 0 {
            break out;
        }
        assert!(err.contains("has non-terminal allocations"), "{err}");
        assert!(tokio::time::Instant::now() < deadline, "{err}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(out.trim(), "Successfully deleted namespace \"prod\"!");
    let (code, _, err) = cli(&address, &["namespace", "delete", "default"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("can not delete default namespace"), "{err}");

    // Node pools: the built-in ones, one applied, and the dev node's.
    let pool = dir.path().join("gpu.hcl");
    std::fs::write(
        &pool,
        "node_pool \"gpu\" {\n  description = \"GPU nodes\"\n  meta {\n    team = \"ml\"\n  }\n}\n",
    )
    .unwrap();
    let out = ok(
        "pool apply",
        cli(&address, &["node", "pool", "apply", pool.to_str().unwrap()]).await,
    );
    assert_eq!(out.trim(), "Successfully applied node pool \"gpu\"!");
    let out = ok("pool list", cli(&address, &["node", "pool", "list"]).await);
    for want in ["all", "default", "gpu", "GPU nodes"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let out = ok(
        "pool nodes",
        cli(&address, &["node", "pool", "nodes", "default"]).await,
    );
    assert!(out.contains("ready"), "the dev node is in default: {out}");
    let out = ok(
        "pool nodes",
        cli(&address, &["node", "pool", "nodes", "gpu"]).await,
    );
    assert_eq!(out.trim(), "No nodes");
    let scheduled = dir.path().join("spread.hcl");
    std::fs::write(
        &scheduled,
        "node_pool \"spread\" {\n  scheduler_config {\n    scheduler_algorithm = \"spread\"\n  }\n}\n",
    )
    .unwrap();
    // A pool's scheduler algorithm is kept (the scheduler places the pool's
    // jobs with it); its memory oversubscription is refused by name.
    ok(
        "pool apply with a scheduler configuration",
        cli(
            &address,
            &["node", "pool", "apply", scheduled.to_str().unwrap()],
        )
        .await,
    );
    let out = ok(
        "pool info",
        cli(&address, &["node", "pool", "info", "spread"]).await,
    );
    assert!(
        out.ends_with("Scheduler Configuration\nScheduler Algorithm = spread\n"),
        "{out}"
    );
    std::fs::write(
        &scheduled,
        "node_pool \"spread\" {\n  scheduler_config {\n    memory_oversubscription_enabled = true\n  }\n}\n",
    )
    .unwrap();
    let (code, _, err) = cli(
        &address,
        &["node", "pool", "apply", scheduled.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("SchedulerConfiguration.MemoryOversubscriptionEnabled"),
        "{err}"
    );
    ok(
        "pool delete",
        cli(&address, &["node", "pool", "delete", "gpu"]).await,
    );
    cluster.stop().await.unwrap();
}
