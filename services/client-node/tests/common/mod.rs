//! An in-process fake of the api-gateway's node API that records what client
//! nodes send and lets a test push alloc sets; plus job and alloc builders.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use caravan_client_node::{ClientConfig, ClientNodeService};
use caravan_proto::node_client_service_server::{NodeClientService, NodeClientServiceServer};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocUpdate, AllocatedResources, AllocatedTaskResources,
    Allocation, HeartbeatRequest, HeartbeatResponse, Job, JobType, Node, NodeAllocations,
    RegisterNodeRequest, RegisterNodeResponse, RestartPolicy, Task, TaskGroup,
    UpdateAllocationsRequest, UpdateAllocationsResponse, WatchAllocationsRequest,
};
use caravan_runtime::service::{NoStore, Running};
use parking_lot::Mutex;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::WatchStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// What the fake saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub registrations: Vec<Node>,
    pub heartbeats: HashMap<String, u32>,
    pub update_calls: Vec<UpdateAllocationsRequest>,
    /// Newest update per alloc, in the order received.
    pub latest: HashMap<String, AllocUpdate>,
    /// Every client status each alloc went through, in order.
    pub history: HashMap<String, Vec<AllocClientStatus>>,
    /// Nodes whose next heartbeat gets NOT_FOUND.
    pub forgotten: HashSet<String>,
    /// UpdateAllocations calls still to fail with UNAVAILABLE.
    pub fail_updates: u32,
    /// The secret each call presented, by call (`register`, `heartbeat`,
    /// `watch`, `update`).
    pub secrets: Vec<(&'static str, String)>,
    /// The `min_revision` of each alloc stream opened, in order.
    pub watch_min_revisions: Vec<i64>,
}

/// The fake gateway.
#[derive(Clone)]
pub struct FakeGateway {
    pub seen: Arc<Mutex<Seen>>,
    sets: Arc<Mutex<HashMap<String, watch::Sender<NodeAllocations>>>>,
    revision: Arc<Mutex<i64>>,
    pub ttl: Duration,
}

impl FakeGateway {
    pub fn new(ttl: Duration) -> Self {
        FakeGateway {
            seen: Arc::default(),
            sets: Arc::default(),
            revision: Arc::new(Mutex::new(1)),
            ttl,
        }
    }

    /// Serves the fake on a free loopback port until `stop`.
    pub async fn serve(&self, stop: CancellationToken) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = NodeClientServiceServer::new(self.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stop.cancelled_owned(),
                )
                .await
                .unwrap();
        });
        addr
    }

    fn sender(&self, node_id: &str) -> watch::Sender<NodeAllocations> {
        self.sets
            .lock()
            .entry(node_id.to_string())
            .or_insert_with(|| watch::channel(NodeAllocations::default()).0)
            .clone()
    }

    /// Makes `allocs` (with `jobs`) the node's alloc set.
    pub fn push(&self, node_id: &str, allocs: Vec<Allocation>, jobs: Vec<Job>) -> i64 {
        let rev = {
            let mut r = self.revision.lock();
            *r += 1;
            *r
        };
        let allocs = allocs
            .into_iter()
            .map(|mut a| {
                a.node_id = node_id.to_string();
                a.modify_revision = rev;
                a
            })
            .collect();
        // The fake sends whole sets only, as a gateway's first message.
        self.sender(node_id).send_replace(NodeAllocations {
            allocs,
            revision: rev,
            jobs,
            full: true,
            ..Default::default()
        });
        rev
    }

    /// Ends the node's open alloc streams (as a gateway that died would)
    /// and makes `set` what the next stream starts from: e.g. an older whole
    /// set, as a gateway whose cache lags would send.
    pub fn end_streams_with(&self, node_id: &str, set: NodeAllocations) {
        // Dropping the old sender ends every stream subscribed to it.
        self.sets
            .lock()
            .insert(node_id.to_string(), watch::channel(set).0);
    }

    /// The alloc set last pushed to `node_id`.
    pub fn current(&self, node_id: &str) -> NodeAllocations {
        self.sender(node_id).borrow().clone()
    }

    /// The newest reported client status of an alloc.
    pub fn status(&self, alloc_id: &str) -> Option<AllocClientStatus> {
        self.seen
            .lock()
            .latest
            .get(alloc_id)
            .map(|u| u.client_status())
    }

    /// The newest reported update of an alloc.
    pub fn update(&self, alloc_id: &str) -> Option<AllocUpdate> {
        self.seen.lock().latest.get(alloc_id).cloned()
    }
}

#[tonic::async_trait]
impl NodeClientService for FakeGateway {
    type WatchAllocationsStream =
        std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<NodeAllocations, Status>> + Send>>;

    async fn register_node(
        &self,
        request: Request<RegisterNodeRequest>,
    ) -> Result<Response<RegisterNodeResponse>, Status> {
        let req = request.into_inner();
        let node = req
            .node
            .ok_or_else(|| Status::invalid_argument("node: required"))?;
        let mut seen = self.seen.lock();
        seen.secrets.push(("register", req.secret_id));
        seen.forgotten.remove(&node.id);
        seen.registrations.push(node);
        Ok(Response::new(RegisterNodeResponse {
            heartbeat_ttl_ns: self.ttl.as_nanos() as i64,
            revision: 1,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let req = request.into_inner();
        let id = req.node_id;
        let mut seen = self.seen.lock();
        seen.secrets.push(("heartbeat", req.secret_id));
        if seen.forgotten.contains(&id) || !seen.registrations.iter().any(|n| n.id == id) {
            return Err(Status::not_found(format!("node {id}")));
        }
        *seen.heartbeats.entry(id).or_default() += 1;
        Ok(Response::new(HeartbeatResponse {
            heartbeat_ttl_ns: self.ttl.as_nanos() as i64,
        }))
    }

    async fn watch_allocations(
        &self,
        request: Request<WatchAllocationsRequest>,
    ) -> Result<Response<Self::WatchAllocationsStream>, Status> {
        let req = request.into_inner();
        {
            let mut seen = self.seen.lock();
            seen.secrets.push(("watch", req.secret_id.clone()));
            seen.watch_min_revisions.push(req.min_revision);
        }
        let rx = self.sender(&req.node_id).subscribe();
        // As the gateway: never a set older than what the node has seen.
        let stream = WatchStream::new(rx)
            .filter(move |set| set.revision >= req.min_revision)
            .map(Ok);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn update_allocations(
        &self,
        request: Request<UpdateAllocationsRequest>,
    ) -> Result<Response<UpdateAllocationsResponse>, Status> {
        let req = request.into_inner();
        let mut seen = self.seen.lock();
        seen.secrets.push(("update", req.secret_id.clone()));
        if seen.fail_updates > 0 {
            seen.fail_updates -= 1;
            return Err(Status::unavailable("fake outage"));
        }
        for u in &req.updates {
            seen.history
                .entry(u.alloc_id.clone())
                .or_default()
                .push(u.client_status());
            seen.latest.insert(u.alloc_id.clone(), u.clone());
        }
        seen.update_calls.push(req);
        Ok(Response::new(UpdateAllocationsResponse { revision: 1 }))
    }

    /// Names each identity after what it identifies: not a JWT, but what
    /// a test needs to see which token reached which task.
    async fn sign_identities(
        &self,
        request: Request<caravan_proto::SignIdentitiesRequest>,
    ) -> Result<Response<caravan_proto::SignIdentitiesResponse>, Status> {
        let req = request.into_inner();
        self.seen
            .lock()
            .secrets
            .push(("sign", req.secret_id.clone()));
        let names = if req.identities.is_empty() {
            vec!["default".to_string()]
        } else {
            req.identities
        };
        let identities = names
            .into_iter()
            .map(|name| caravan_proto::SignedIdentity {
                jwt: format!("{}.{}.{name}", req.alloc_id, req.task),
                name,
            })
            .collect();
        Ok(Response::new(caravan_proto::SignIdentitiesResponse {
            identities,
        }))
    }
}

pub use caravan_testkit::wait::until;

/// A client config pointing at `gateway`, with its data in `data_dir`.
pub fn config(gateway: SocketAddr, data_dir: &Path) -> ClientConfig {
    ClientConfig {
        servers: vec![gateway.to_string()],
        grpc_addr: "127.0.0.1:0".into(),
        data_dir: data_dir.to_path_buf(),
        name: "test-node".into(),
        cpu_total_mhz: 4000,
        memory_mb: 8192,
        disk_mb: 10_000,
        stop_tasks_on_shutdown: true,
        task_supervisor: env!("CARGO_BIN_EXE_caravan-client-node").into(),
        drivers: vec!["raw_exec".into(), "mock".into()],
        ..Default::default()
    }
}

/// A client node running in-process.
pub type Client = Running<ClientNodeService>;

/// Starts a client node with `config` until `shutdown`; returns once its
/// nodes run.
pub async fn start(config: ClientConfig, shutdown: CancellationToken) -> anyhow::Result<Client> {
    caravan_runtime::service::start(ClientNodeService, config, NoStore, shutdown).await
}

/// Stops a client and waits for it.
pub async fn stop(client: Client, shutdown: CancellationToken) {
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), client.stopped())
        .await
        .expect("client stops in time")
        .expect("client stops cleanly");
}

/// A real client node against a fresh fake gateway, with its data in a
/// temporary dir: what most tests start with.
pub struct Scene {
    pub fake: FakeGateway,
    pub client: Client,
    pub node_id: String,
    pub dir: tempfile::TempDir,
    shutdown: CancellationToken,
    stop_fake: CancellationToken,
}

impl Scene {
    /// Starts the fake gateway (heartbeat TTL 5 s) and a client registered with it.
    pub async fn start() -> Scene {
        let stop_fake = CancellationToken::new();
        let fake = FakeGateway::new(Duration::from_secs(5));
        let addr = fake.serve(stop_fake.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let shutdown = CancellationToken::new();
        let client = start(config(addr, dir.path()), shutdown.clone())
            .await
            .unwrap();
        let node_id = client.ready.node_ids[0].clone();
        Scene {
            fake,
            client,
            node_id,
            dir,
            shutdown,
            stop_fake,
        }
    }

    /// Stops the client, then the fake gateway.
    pub async fn stop(self) {
        stop(self.client, self.shutdown).await;
        self.stop_fake.cancel();
    }
}

pub fn s(v: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(v.to_string())),
    }
}

pub fn n(v: f64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(v)),
    }
}

pub fn list(items: &[&str]) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue {
            values: items.iter().map(|i| s(i)).collect(),
        })),
    }
}

/// A task with a driver and config.
pub fn task(name: &str, driver: &str, config: Vec<(&str, Value)>) -> Task {
    Task {
        name: name.into(),
        driver: driver.into(),
        config: Some(Struct {
            fields: config
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<BTreeMap<_, _>>(),
        }),
        kill_timeout_ns: 2_000_000_000,
        ..Default::default()
    }
}

/// A raw_exec task running `/bin/sh -c script`.
pub fn sh_task(name: &str, script: &str) -> Task {
    task(
        name,
        "raw_exec",
        vec![("command", s("/bin/sh")), ("args", list(&["-c", script]))],
    )
}

/// A one-group job of `tasks`.
pub fn job(id: &str, kind: JobType, tasks: Vec<Task>) -> Job {
    let mut j = Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        version: 0,
        task_groups: vec![TaskGroup {
            name: id.into(),
            count: 1,
            tasks,
            restart_policy: Some(RestartPolicy {
                attempts: 2,
                interval_ns: 60_000_000_000,
                delay_ns: 100_000_000,
                mode: "fail".into(),
                on_success: false,
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    j.set_type(kind);
    j
}

/// Alloc `index` of `job`'s first group, desired running.
pub fn alloc(job: &Job, index: u32) -> Allocation {
    let group = &job.task_groups[0];
    let mut a = Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        name: format!("{}.{}[{index}]", job.id, group.name),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        task_group: group.name.clone(),
        alloc_modify_revision: 5,
        allocated_resources: Some(AllocatedResources {
            tasks: group
                .tasks
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        AllocatedTaskResources {
                            cpu_mhz: 100,
                            memory_mb: 64,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            shared: None,
        }),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

/// The same alloc, asked to stop.
pub fn stopped(mut a: Allocation) -> Allocation {
    a.set_desired_status(AllocDesiredStatus::Stop);
    a.alloc_modify_revision += 1;
    a
}
