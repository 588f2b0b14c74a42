//! Backend-neutral service tests of the deployment watcher: each case runs
//! watchers in-process on a fresh key prefix of the store it is given,
//! writes jobs, deployments and allocations as the other services would,
//! steers over gRPC, and checks the store. `service.rs`
//! instantiates every case on both stores.

pub mod canaries;
pub mod failover;
pub mod failure;
pub mod rollout;
pub mod steering;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use caravan_deployment_watcher::{DeploymentWatcherConfig, DeploymentWatcherService};
use caravan_proto::deployment_watcher_service_client::DeploymentWatcherServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDeploymentStatus, AllocDesiredStatus, Allocation, Deployment,
    DeploymentState, DeploymentStatus, Evaluation, Job, JobType, TaskGroup, UpdateStrategy,
    WatcherFailRequest,
};
use caravan_runtime::service::Running;
use caravan_state::{Keyspace, Kind, StateObject, decode, encode};
use caravan_store::{Revision, Store};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub use caravan_testkit::wait::{PATIENCE, eventually};
/// One second in nanoseconds.
pub const SEC: i64 = 1_000_000_000;

/// A watcher running in-process.
pub struct Watcher {
    /// Where it listens.
    pub addr: SocketAddr,
    /// A client of it.
    pub client: DeploymentWatcherServiceClient<Channel>,
    shutdown: CancellationToken,
    running: Running<DeploymentWatcherService>,
}

impl Watcher {
    /// Stops the watcher gracefully (a leader resigns) and waits for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(PATIENCE, self.running.stopped()).await {
            Ok(Ok(())) => {}
            other => panic!("watcher did not stop cleanly: {other:?}"),
        }
    }

    /// Kills the watcher as a crash would: its task is dropped mid-flight,
    /// so it neither resigns nor finishes what it was writing.
    pub async fn kill(self) {
        self.running.abort().await;
    }

    /// Waits until this watcher leads: a request for an unknown deployment
    /// is answered NOT_FOUND rather than refused as a follower.
    pub async fn wait_leading(&mut self) {
        eventually("the watcher to lead", PATIENCE, || {
            let mut client = self.client.clone();
            async move {
                let answer = client
                    .fail(WatcherFailRequest {
                        deployment_id: "00000000-0000-0000-0000-000000000000".into(),
                    })
                    .await;
                matches!(answer, Err(s) if s.code() == tonic::Code::NotFound)
            }
        })
        .await;
    }
}

/// Settings that keep the tests fast.
pub fn fast_config(prefix: &str) -> DeploymentWatcherConfig {
    let mut config = DeploymentWatcherConfig {
        grpc_addr: "127.0.0.1:0".into(),
        leader_ttl_ms: 2_000,
        eval_batch_window_ms: 100,
        ..Default::default()
    };
    config.store.prefix = prefix.to_string();
    config
}

/// Starts a watcher on `store` with `config`.
pub async fn start(store: Arc<dyn Store>, config: DeploymentWatcherConfig) -> Watcher {
    let shutdown = CancellationToken::new();
    let running =
        caravan_runtime::service::start(DeploymentWatcherService, config, store, shutdown.clone())
            .await
            .expect("start the watcher");
    let addr = running.local_addr;
    let channel = caravan_runtime::grpc::channel(&addr.to_string()).expect("channel");
    Watcher {
        addr,
        client: DeploymentWatcherServiceClient::new(channel),
        shutdown,
        running,
    }
}

/// Starts a watcher with the fast settings and waits for it to lead.
pub async fn start_leader(store: Arc<dyn Store>, prefix: &str) -> Watcher {
    let mut watcher = start(store, fast_config(prefix)).await;
    watcher.wait_leading().await;
    watcher
}

/// The present time in unix nanoseconds.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap()
}

/// A fresh UUID.
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// One test's view of the store: its prefix and helpers to write and read.
pub struct World {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The test's key prefix.
    pub prefix: String,
    /// Its keyspace.
    pub ks: Keyspace,
}

impl World {
    /// A fresh prefix on `store`.
    pub fn new(store: Arc<dyn Store>, name: &str) -> Self {
        let prefix = caravan_testkit::unique_prefix(name);
        World {
            store,
            ks: Keyspace::new(&prefix),
            prefix,
        }
    }

    /// Writes a message at `key`; returns the revision.
    pub async fn put<T: StateObject>(&self, key: Vec<u8>, msg: &T) -> Revision {
        self.store.put(&key, &encode(msg), 0).await.expect("put")
    }

    /// Reads an object from the store.
    pub async fn get<T: StateObject>(&self, key: Vec<u8>) -> Option<T> {
        let kv = self.store.get(&key).await.expect("get")?;
        Some(decode(&kv).expect("decode"))
    }

    /// Writes `job` as its current version and version key, as a
    /// registration would.
    pub async fn put_job(&self, job: &Job) {
        self.put(
            self.ks.job_version(&job.namespace, &job.id, job.version),
            job,
        )
        .await;
        self.put(self.ks.job(&job.namespace, &job.id), job).await;
    }

    /// Writes a past version of a job.
    pub async fn put_version(&self, job: &Job) {
        self.put(
            self.ks.job_version(&job.namespace, &job.id, job.version),
            job,
        )
        .await;
    }

    /// The current job.
    pub async fn job(&self, id: &str) -> Job {
        self.get(self.ks.job("default", id)).await.expect("job")
    }

    /// A stored version of a job.
    pub async fn version(&self, id: &str, version: u64) -> Option<Job> {
        self.get(self.ks.job_version("default", id, version)).await
    }

    /// Writes a deployment.
    pub async fn put_deployment(&self, d: &Deployment) {
        self.put(self.ks.deployment(&d.id), d).await;
    }

    /// The stored deployment.
    pub async fn deployment(&self, id: &str) -> Deployment {
        self.get(self.ks.deployment(id)).await.expect("deployment")
    }

    /// Waits until the stored deployment satisfies `check`; returns it.
    pub async fn deployment_becomes(
        &self,
        id: &str,
        what: &str,
        check: impl Fn(&Deployment) -> bool,
    ) -> Deployment {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let d = self.deployment(id).await;
            if check(&d) {
                return d;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}; last {d:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Writes an allocation.
    pub async fn put_alloc(&self, a: &Allocation) {
        self.put(self.ks.alloc(&a.id), a).await;
    }

    /// Rewrites an allocation with its health reported, as the api-gateway
    /// does for the client.
    pub async fn report_health(&self, alloc_id: &str, healthy: bool) {
        let mut a: Allocation = self.get(self.ks.alloc(alloc_id)).await.expect("alloc");
        let status = a.deployment_status.get_or_insert_with(Default::default);
        status.healthy = Some(healthy);
        status.timestamp_unix_ns = now();
        a.create_revision = 0;
        a.modify_revision = 0;
        self.put_alloc(&a).await;
    }

    /// Every eval of the prefix created by the watcher for `deployment_id`.
    pub async fn watcher_evals(&self, deployment_id: &str) -> Vec<Evaluation> {
        let res = self
            .store
            .range(self.ks.range_of(Kind::Evals))
            .await
            .expect("range");
        res.kvs
            .iter()
            .map(|kv| decode::<Evaluation>(kv).expect("decode"))
            .filter(|e| e.triggered_by == "deployment-watcher" && e.deployment_id == deployment_id)
            .collect()
    }

    /// Waits for at least `n` watcher evals of `deployment_id`.
    pub async fn wait_evals(&self, deployment_id: &str, n: usize) -> Vec<Evaluation> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let evals = self.watcher_evals(deployment_id).await;
            if evals.len() >= n {
                return evals;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {n} evals of {deployment_id}; have {}",
                evals.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A service job `web` at `version` with one group of `count` and an update
/// block.
pub fn job(version: u64, count: i32, update: UpdateStrategy) -> Job {
    let mut job = Job {
        id: "web".into(),
        namespace: "default".into(),
        name: "web".into(),
        priority: 60,
        version,
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            update: Some(update),
            ..Default::default()
        }],
        ..Default::default()
    };
    job.meta.insert("version".into(), version.to_string());
    job.set_type(JobType::Service);
    job
}

/// An update block with `max_parallel` 2.
pub fn rolling() -> UpdateStrategy {
    UpdateStrategy {
        max_parallel: 2,
        health_check: "task_states".into(),
        min_healthy_time_ns: SEC,
        healthy_deadline_ns: 60 * SEC,
        progress_deadline_ns: 600 * SEC,
        ..Default::default()
    }
}

/// A running deployment of `job` whose one group wants `total`.
pub fn deployment(job: &Job, total: i32, update: &UpdateStrategy) -> Deployment {
    let mut d = Deployment {
        id: uuid(),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        status: DeploymentStatus::Running as i32,
        status_description: "Deployment is running".into(),
        eval_priority: job.priority,
        create_time_unix_ns: now(),
        ..Default::default()
    };
    d.task_groups.insert(
        "web".into(),
        DeploymentState {
            auto_revert: update.auto_revert,
            auto_promote: update.auto_promote,
            progress_deadline_ns: update.progress_deadline_ns,
            desired_total: total,
            desired_canaries: update.canary,
            ..Default::default()
        },
    );
    d
}

/// A running allocation of `d` with its health undecided.
pub fn alloc(d: &Deployment, index: usize) -> Allocation {
    Allocation {
        id: uuid(),
        name: format!("web.web[{index}]"),
        namespace: d.namespace.clone(),
        job_id: d.job_id.clone(),
        job_version: d.job_version,
        task_group: "web".into(),
        node_id: "n1".into(),
        deployment_id: d.id.clone(),
        deployment_status: Some(AllocDeploymentStatus::default()),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        create_time_unix_ns: now(),
        ..Default::default()
    }
}
