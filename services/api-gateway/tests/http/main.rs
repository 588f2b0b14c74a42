//! The Nomad-compatible HTTP API, in-process, against the embedded store and
//! etcd: Nomad JSON in and out, blocking queries, the 400s that write
//! nothing, plans, node operations and the logs proxy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

use std::pin::Pin;
use std::time::Duration;

use caravan_proto::client_node_service_server::{ClientNodeService, ClientNodeServiceServer};
use caravan_proto::deployment_watcher_service_server::{
    DeploymentWatcherService, DeploymentWatcherServiceServer,
};
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, DeploymentStatus, DriverInfo,
    LogChunk, Node, NodeResources, ReadLogsRequest, RegisterNodeRequest, WatcherAllocHealthRequest,
    WatcherFailRequest, WatcherPauseRequest, WatcherPromoteRequest, WatcherResponse,
};
use caravan_state::{Kind, encode};
use caravan_testkit::wait::holds_within;
use common::{Backend, TestGateway};
use futures::Stream;
use serde_json::{Value, json};

fn nomad_job(id: &str, count: i64) -> Value {
    json!({
        "Job": {
            "ID": id,
            "Name": id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [{
                "Name": "web",
                "Count": count,
                "Tasks": [{
                    "Name": "app",
                    "Driver": "mock",
                    "Config": {"run_for": "10s"},
                    "Resources": {"CPU": 100, "MemoryMB": 64}
                }]
            }]
        }
    })
}

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn client_node(id: &str, http_addr: &str) -> Node {
    let mut node = Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        http_addr: http_addr.into(),
        resources: Some(NodeResources {
            cpu_mhz: 4000,
            memory_mb: 8192,
            disk_mb: 100_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    node.attributes.insert("driver.mock".into(), "1".into());
    node.attributes.insert("kernel.name".into(), "linux".into());
    node.drivers.insert(
        "mock".into(),
        DriverInfo {
            detected: true,
            healthy: true,
            ..Default::default()
        },
    );
    node
}

async fn register_node(gw: &TestGateway, node: Node) {
    NodeClientServiceClient::new(gw.channel().await)
        .register_node(RegisterNodeRequest { node: Some(node) })
        .await
        .unwrap();
}

async fn register_and_read_back_in_nomad_json(backend: Backend) {
    let gw = TestGateway::start(backend, "http-register").await;
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 2)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let reg = r.json();
    let eval_id = reg["EvalID"].as_str().unwrap().to_string();
    assert!(!eval_id.is_empty());
    assert!(reg["JobModifyIndex"].as_u64().unwrap() > 0);
    assert!(r.header("X-Nomad-Index").is_some());

    let r = gw.http("GET", "/v1/job/web", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("X-Nomad-KnownLeader"), Some("true"));
    let job = r.json();
    assert_eq!(job["ID"], "web");
    assert_eq!(job["Type"], "service");
    assert_eq!(job["Version"], 0);
    assert_eq!(job["Status"], "pending");
    assert_eq!(job["TaskGroups"][0]["Count"], 2);
    assert_eq!(job["TaskGroups"][0]["Tasks"][0]["Driver"], "mock");
    assert_eq!(job["JobModifyIndex"], reg["JobModifyIndex"]);
    assert!(job["CreateIndex"].as_u64().unwrap() > 0);

    let list = gw.http("GET", "/v1/jobs?prefix=we", b"").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["ID"], "web");
    assert_eq!(list[0]["JobSummary"]["Summary"]["web"]["Running"], 0);
    assert_eq!(
        gw.http("GET", "/v1/jobs?prefix=zz", b"").await.json(),
        json!([])
    );

    let evals = gw.http("GET", "/v1/job/web/evaluations", b"").await.json();
    assert_eq!(evals[0]["ID"], eval_id.as_str());
    assert_eq!(evals[0]["Status"], "pending");
    assert_eq!(evals[0]["TriggeredBy"], "job-register");
    let eval = gw
        .http("GET", &format!("/v1/evaluation/{eval_id}"), b"")
        .await;
    assert_eq!(eval.json()["JobID"], "web");
    assert_eq!(
        gw.http("GET", "/v1/job/web/allocations", b"").await.json(),
        json!([])
    );
    let versions = gw.http("GET", "/v1/job/web/versions", b"").await.json();
    assert_eq!(versions["Versions"][0]["Version"], 0);
    let summary = gw.http("GET", "/v1/job/web/summary", b"").await.json();
    assert_eq!(summary["JobID"], "web");

    // The path must name the body's job.
    let r = gw
        .http("POST", "/v1/job/other", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());

    let r = gw.http("GET", "/v1/job/nope", b"").await;
    assert_eq!(r.status, 404);
    let r = gw.http("DELETE", "/v1/job/web?purge=true", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.json()["EvalID"].as_str().unwrap().is_empty());
    assert!(gw.job("web").await.is_none());
    gw.stop().await;
}

async fn bad_input_is_400_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-bad").await;
    let mut no_driver = nomad_job("web", 1);
    no_driver["Job"]["TaskGroups"][0]["Tasks"][0]
        .as_object_mut()
        .unwrap()
        .remove("Driver");
    let mut bad_regexp = nomad_job("web", 1);
    bad_regexp["Job"]["Constraints"] =
        json!([{"LTarget": "${attr.kernel.name}", "RTarget": "[linux", "Operand": "regexp"}]);
    let mut cpu_zero = nomad_job("web", 1);
    cpu_zero["Job"]["TaskGroups"][0]["Tasks"][0]["Resources"]["CPU"] = json!(0);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed JSON", b"{\"Job\": {\"ID\": ".to_vec(), "JSON"),
        ("task without driver", body(&no_driver), "driver"),
        ("negative count", body(&nomad_job("web", -1)), "count"),
        ("bad regexp", body(&bad_regexp), "regular expression"),
        ("cpu 0", body(&cpu_zero), "cpu"),
        ("no Job", b"{\"Jobs\": {}}".to_vec(), "Job"),
    ];
    for (what, payload, needle) in cases {
        let r = gw.http("PUT", "/v1/jobs", &payload).await;
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        assert!(
            r.text().to_lowercase().contains(&needle.to_lowercase()),
            "{what}: {:?} does not mention {needle}",
            r.text()
        );
    }
    // A 10 MB job: refused before it is parsed.
    let mut huge = nomad_job("web", 1);
    huge["Job"]["Meta"] = json!({"blob": "x".repeat(10 * 1024 * 1024)});
    let r = gw.http("PUT", "/v1/jobs", &body(&huge)).await;
    assert!(
        r.status == 400 || r.status == 413,
        "{}: {}",
        r.status,
        r.text()
    );
    assert_eq!(gw.key_count().await, 0, "nothing may be written");

    // Validation reports problems in the answer.
    let r = gw
        .http("POST", "/v1/validate/job", &body(&nomad_job("web", -1)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(!v["ValidationErrors"].as_array().unwrap().is_empty());
    assert!(v["Error"].as_str().unwrap().contains("count"));
    let ok = gw
        .http("POST", "/v1/validate/job", &body(&nomad_job("web", 1)))
        .await
        .json();
    assert_eq!(ok["ValidationErrors"], json!([]));
    // Bad query parameters are 400 too.
    let r = gw.http("GET", "/v1/jobs?index=abc", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("index"));
    let r = gw.http("GET", "/v1/jobs?wait=forever", b"").await;
    assert_eq!(r.status, 400);
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

async fn blocking_queries_over_http(backend: Backend) {
    let gw = TestGateway::start(backend, "http-blocking").await;
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    let first = gw.http("GET", "/v1/jobs", b"").await;
    let index: u64 = first.header("X-Nomad-Index").unwrap().parse().unwrap();
    let started = tokio::time::Instant::now();
    let idle = gw
        .http("GET", &format!("/v1/jobs?index={index}&wait=300ms"), b"")
        .await;
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(idle.header("X-Nomad-Index").unwrap(), index.to_string());

    let addr = gw.bound.http;
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = common::http(
            addr,
            "GET",
            &format!("/v1/jobs?index={index}&wait=30s"),
            b"",
        )
        .await;
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("api", 1)))
        .await;
    let (r, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let new_index: u64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();
    assert!(new_index > index);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    gw.stop().await;
}

async fn parse_and_plan(backend: Backend) {
    let gw = TestGateway::start(backend, "http-plan").await;
    let hcl = r#"
job "web" {
  datacenters = ["dc1"]
  group "web" {
    count = 3
    task "app" {
      driver = "mock"
      config { run_for = "10s" }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"#;
    let r = gw
        .http(
            "POST",
            "/v1/jobs/parse",
            &body(&json!({"JobHCL": hcl, "Canonicalize": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let parsed = r.json();
    assert_eq!(parsed["ID"], "web");
    assert_eq!(parsed["TaskGroups"][0]["Count"], 3);
    let r = gw
        .http("POST", "/v1/jobs/parse", &body(&json!({"JobHCL": "job {"})))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());

    register_node(&gw, client_node("n1", "")).await;
    let plan = gw
        .http(
            "POST",
            "/v1/job/web/plan",
            &body(&json!({"Job": parsed, "Diff": true})),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.text());
    let plan = plan.json();
    assert_eq!(
        plan["Annotations"]["DesiredTGUpdates"]["web"]["Place"], 3,
        "{plan:#}"
    );
    assert_eq!(plan["Diff"]["Type"], "Added");
    assert_eq!(plan["FailedTGAllocs"], Value::Null);
    assert_eq!(gw.job("web").await, None, "a plan writes nothing");
    assert!(gw.evals().await.is_empty());
    gw.stop().await;
}

fn placed(id: &str, node_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: "web.web[0]".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Running);
    a
}

async fn nodes_and_allocations(backend: Backend) {
    let gw = TestGateway::start(backend, "http-nodes").await;
    register_node(&gw, client_node("n1", "")).await;
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&placed("a1", "n1")), 0)
        .await
        .unwrap();
    let nodes = gw.http("GET", "/v1/nodes?resources=true", b"").await.json();
    assert_eq!(nodes[0]["ID"], "n1");
    assert_eq!(nodes[0]["Status"], "ready");
    assert_eq!(nodes[0]["NodeResources"]["Cpu"]["CpuShares"], 4000);

    let allocs = gw.http("GET", "/v1/node/n1/allocations", b"").await.json();
    assert_eq!(allocs[0]["ID"], "a1");
    assert_eq!(allocs[0]["Job"]["ID"], "web");
    let stub = gw.http("GET", "/v1/allocations", b"").await.json();
    assert_eq!(stub[0]["ClientStatus"], "running");
    assert_eq!(stub[0]["JobType"], "service");

    let r = gw
        .http(
            "POST",
            "/v1/node/n1/eligibility",
            &body(&json!({"Eligibility": "maybe"})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/eligibility",
            &body(&json!({"Eligibility": "ineligible"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/drain",
            &body(&json!({"DrainSpec": {"Deadline": 3_600_000_000_000i64, "IgnoreSystemJobs": false}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let drain = r.json();
    assert_eq!(
        drain["EvalIDs"].as_array().unwrap().len(),
        1,
        "one job on the node"
    );
    let node = gw.http("GET", "/v1/node/n1", b"").await.json();
    assert_eq!(node["SchedulingEligibility"], "ineligible");
    assert_eq!(
        node["DrainStrategy"]["DrainSpec"]["Deadline"],
        3_600_000_000_000i64
    );
    let stored = gw.node("n1").await.unwrap();
    let d = stored.drain_strategy.unwrap();
    assert_eq!(
        d.force_deadline_unix_ns - d.started_at_unix_ns,
        3_600_000_000_000
    );
    let evals = gw.evals().await;
    assert!(
        evals
            .iter()
            .any(|e| e.triggered_by == "node-drain" && e.node_id == "n1")
    );
    // Eligible while draining is refused; cancelling with MarkEligible works.
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/eligibility",
            &body(&json!({"Eligibility": "eligible"})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/drain",
            &body(&json!({"DrainSpec": null, "MarkEligible": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let node = gw.node("n1").await.unwrap();
    assert!(node.drain_strategy.is_none());
    assert_eq!(node.last_drain.unwrap().status, "canceled");

    let r = gw.http("POST", "/v1/allocation/a1/stop", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let eval_id = r.json()["EvalID"].as_str().unwrap().to_string();
    let allocs: Vec<Allocation> = gw.objects(gw.keys.prefix_of(Kind::Allocs)).await;
    assert_eq!(allocs[0].desired_transition.unwrap().migrate, Some(true));
    let stop_eval = gw
        .evals()
        .await
        .into_iter()
        .find(|e| e.id == eval_id)
        .unwrap();
    assert_eq!(stop_eval.triggered_by, "alloc-stop");
    assert_eq!(
        gw.http("POST", "/v1/allocation/zzz/stop", b"").await.status,
        404
    );
    assert_eq!(gw.http("GET", "/v1/node/zzz", b"").await.status, 404);

    let leader = gw.http("GET", "/v1/status/leader", b"").await.json();
    assert_eq!(leader, json!(gw.bound.grpc.to_string()));
    let me = gw.http("GET", "/v1/agent/self", b"").await.json();
    assert_eq!(me["member"]["Status"], "alive");
    let members = gw.http("GET", "/v1/agent/members", b"").await.json();
    assert_eq!(members["Members"].as_array().unwrap().len(), 1);
    gw.stop().await;
}

/// A client node that serves one fixed log.
struct FakeNode;

type Chunks = Pin<Box<dyn Stream<Item = Result<LogChunk, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl ClientNodeService for FakeNode {
    type ReadLogsStream = Chunks;

    async fn read_logs(
        &self,
        request: tonic::Request<ReadLogsRequest>,
    ) -> Result<tonic::Response<Chunks>, tonic::Status> {
        let req = request.into_inner();
        let text = format!("{} of {} says hello\n", req.stream, req.task);
        let chunks = vec![
            Ok(LogChunk {
                data: text.as_bytes()[..5].to_vec(),
                offset: 0,
            }),
            Ok(LogChunk {
                data: text.as_bytes()[5..].to_vec(),
                offset: 5,
            }),
        ];
        Ok(tonic::Response::new(Box::pin(futures::stream::iter(
            chunks,
        ))))
    }
}

async fn logs_are_proxied_from_the_node(backend: Backend) {
    let gw = TestGateway::start(backend, "http-logs").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_addr = listener.local_addr().unwrap();
    let stop = gw.shutdown.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ClientNodeServiceServer::new(FakeNode))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                stop.cancelled_owned(),
            ),
    );
    register_node(&gw, client_node("n1", &node_addr.to_string())).await;
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&placed("a1", "n1")), 0)
        .await
        .unwrap();
    let seen = holds_within(Duration::from_secs(5), || async {
        gw.http("GET", "/v1/allocation/a1", b"").await.status == 200
    })
    .await;
    assert!(seen);
    let r = gw
        .http(
            "GET",
            "/v1/client/fs/logs/a1?task=app&type=stderr&plain=true",
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "stderr of app says hello\n");
    let framed = gw
        .http("GET", "/v1/client/fs/logs/a1?task=app&type=stdout", b"")
        .await;
    assert_eq!(framed.status, 200);
    assert!(framed.text().contains("\"Offset\":5"), "{}", framed.text());
    assert_eq!(
        gw.http("GET", "/v1/client/fs/logs/a1?task=nope", b"")
            .await
            .status,
        400
    );
    assert_eq!(
        gw.http("GET", "/v1/client/fs/logs/zzz?task=app", b"")
            .await
            .status,
        404
    );

    let mut allocs =
        caravan_proto::alloc_service_client::AllocServiceClient::new(gw.channel().await);
    let mut stream = allocs
        .read_logs(ReadLogsRequest {
            alloc_id: "a1".into(),
            task: "app".into(),
            stream: "stdout".into(),
            follow: false,
            offset: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut data = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        data.extend(chunk.data);
    }
    assert_eq!(
        String::from_utf8(data).unwrap(),
        "stdout of app says hello\n"
    );
    gw.stop().await;
}

async fn operator_config_and_node_purge(backend: Backend) {
    let gw = TestGateway::start(backend, "http-operator").await;
    let conf = gw
        .http("GET", "/v1/operator/scheduler/configuration", b"")
        .await
        .json();
    assert_eq!(conf["SchedulerConfig"]["SchedulerAlgorithm"], "binpack");
    assert_eq!(
        conf["SchedulerConfig"]["PreemptionConfig"]["SystemSchedulerEnabled"],
        true
    );
    let r = gw
        .http(
            "PUT",
            "/v1/operator/scheduler/configuration",
            &body(&json!({"SchedulerAlgorithm": "fastest"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("SchedulerAlgorithm"));
    let r = gw
        .http(
            "PUT",
            "/v1/operator/scheduler/configuration?cas=0",
            &body(&json!({"SchedulerAlgorithm": "spread", "RejectJobRegistration": true})),
        )
        .await;
    assert_eq!(r.json()["Updated"], true, "{}", r.text());
    let r = gw
        .http(
            "PUT",
            "/v1/operator/scheduler/configuration?cas=0",
            &body(&json!({"SchedulerAlgorithm": "binpack"})),
        )
        .await;
    assert_eq!(r.json()["Updated"], false, "the check-and-set lost");
    let conf = gw
        .http("GET", "/v1/operator/scheduler/configuration", b"")
        .await
        .json();
    assert_eq!(conf["SchedulerConfig"]["SchedulerAlgorithm"], "spread");
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(r.status, 403, "registration is refused: {}", r.text());
    assert!(gw.job("web").await.is_none());

    register_node(&gw, client_node("n1", "")).await;
    let m = gw.http("GET", "/v1/metrics", b"").await.json();
    let nodes = m["Gauges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["Name"] == "caravan.api_gateway.nodes")
        .unwrap();
    assert_eq!(nodes["Value"], 1.0);
    let prom = gw.http("GET", "/v1/metrics?format=prometheus", b"").await;
    assert!(
        prom.text().contains("caravan_api_gateway_nodes 1"),
        "{}",
        prom.text()
    );
    let r = gw.http("POST", "/v1/node/n1/evaluate", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("POST", "/v1/node/n1/purge", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.node("n1").await.is_none());
    assert!(
        gw.store
            .get(&gw.keys.heartbeat("n1"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(gw.http("POST", "/v1/node/n1/purge", b"").await.status, 404);
    gw.stop().await;
}

/// A deployment-watcher leader that records what it was asked.
#[derive(Clone, Default)]
struct FakeWatcher {
    promoted: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl DeploymentWatcherService for FakeWatcher {
    async fn promote(
        &self,
        request: tonic::Request<WatcherPromoteRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        self.promoted
            .lock()
            .push(request.into_inner().deployment_id);
        Ok(tonic::Response::new(WatcherResponse {
            eval_id: "e-promote".into(),
            revision: 42,
        }))
    }
    async fn fail(
        &self,
        _request: tonic::Request<WatcherFailRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Err(tonic::Status::failed_precondition(
            "deployment is not active",
        ))
    }
    async fn pause(
        &self,
        _request: tonic::Request<WatcherPauseRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Ok(tonic::Response::new(WatcherResponse::default()))
    }
    async fn set_alloc_health(
        &self,
        _request: tonic::Request<WatcherAllocHealthRequest>,
    ) -> Result<tonic::Response<WatcherResponse>, tonic::Status> {
        Ok(tonic::Response::new(WatcherResponse::default()))
    }
}

async fn deployments_are_steered_through_the_watcher(backend: Backend) {
    let gw = TestGateway::start(backend, "http-deployments").await;
    let watcher = FakeWatcher::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(DeploymentWatcherServiceServer::new(watcher.clone()))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                gw.shutdown.clone().cancelled_owned(),
            ),
    );
    let lease = gw.store.lease_grant(30).await.unwrap();
    gw.store
        .campaign(
            &gw.keys.leader("deployment-watcher"),
            addr.to_string().as_bytes(),
            lease.id,
        )
        .await
        .unwrap();
    let mut d = Deployment {
        id: "d1".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        ..Default::default()
    };
    d.set_status(DeploymentStatus::Running);
    gw.store
        .put(&gw.keys.deployment("d1"), &encode(&d), 0)
        .await
        .unwrap();
    let listed = holds_within(Duration::from_secs(5), || async {
        gw.http("GET", "/v1/deployments", b"").await.json() != json!([])
    })
    .await;
    assert!(listed);
    let got = gw.http("GET", "/v1/deployment/d1", b"").await.json();
    assert_eq!(got["Status"], "running");
    assert_eq!(got["JobID"], "web");
    let r = gw
        .http(
            "POST",
            "/v1/deployment/promote/d1",
            &body(&json!({"All": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["EvalID"], "e-promote");
    assert_eq!(watcher.promoted.lock().as_slice(), ["d1".to_string()]);
    let r = gw.http("POST", "/v1/deployment/fail/d1", b"").await;
    assert_eq!(
        r.status,
        400,
        "the watcher's refusal is passed on: {}",
        r.text()
    );
    assert!(r.text().contains("not active"));
    let r = gw.http("POST", "/v1/deployment/promote/nope", b"").await;
    assert_eq!(r.status, 404);
    gw.store.lease_revoke(lease.id).await.unwrap();
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate;
    register_and_read_back_in_nomad_json,
    bad_input_is_400_and_writes_nothing,
    blocking_queries_over_http,
    parse_and_plan,
    nodes_and_allocations,
    logs_are_proxied_from_the_node,
    operator_config_and_node_purge,
    deployments_are_steered_through_the_watcher,
);
