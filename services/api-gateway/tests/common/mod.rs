//! A gateway running in-process on a store of the test's choice, with a
//! gRPC channel and a minimal HTTP/1.1 client to drive it.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use caravan_api_gateway::{ApiGatewayService, Bound, GatewayConfig, GatewayStore};
use caravan_proto::{
    Evaluation, Job, JobType, Node, RegisterJobRequest, Resources, Task, TaskGroup,
};
use caravan_runtime::service::{Running, StoreAccess};
use caravan_state::{Keyspace, StateObject, decode};
use caravan_store::{Range, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub use caravan_testkit::Backend;

/// A running gateway.
pub struct TestGateway {
    pub bound: Bound,
    pub store: Arc<dyn Store>,
    pub keys: Keyspace,
    pub shutdown: CancellationToken,
    running: Option<Running<ApiGatewayService>>,
}

impl TestGateway {
    /// Starts a gateway on a fresh store of `backend` under a unique prefix.
    pub async fn start(backend: Backend, name: &str) -> TestGateway {
        Self::start_with(backend.store().await, name, |_| {}).await
    }

    /// Starts a gateway on `store` with `tweak` applied to its configuration.
    pub async fn start_with(
        store: Arc<dyn Store>,
        name: &str,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> TestGateway {
        let (config, prefix) = Self::config(name, tweak);
        Self::start_on(store.clone().into(), store, config, prefix).await
    }

    /// Starts a gateway on `backend` the way its process does: on etcd
    /// with a second connection for heartbeats, driven by their thread.
    pub async fn start_like_a_process(
        backend: Backend,
        name: &str,
        tweak: impl FnOnce(&mut GatewayConfig),
    ) -> TestGateway {
        let (mut config, prefix) = Self::config(name, tweak);
        let store = backend.store().await;
        let gateway_store = match backend {
            Backend::Mem => store.clone().into(),
            Backend::Etcd => {
                config.store.endpoints = caravan_testkit::etcd_endpoints();
                let never = CancellationToken::new();
                let reach = <GatewayStore as StoreAccess<GatewayConfig>>::reach(&config, &never);
                tokio::time::timeout(Duration::from_secs(10), reach)
                    .await
                    .expect("etcd not reached in time")
                    .expect("etcd not reached")
            }
        };
        Self::start_on(gateway_store, store, config, prefix).await
    }

    fn config(name: &str, tweak: impl FnOnce(&mut GatewayConfig)) -> (GatewayConfig, String) {
        let prefix = caravan_testkit::unique_prefix(name);
        let mut config = GatewayConfig {
            grpc_addr: "127.0.0.1:0".into(),
            http_addr: "127.0.0.1:0".into(),
            ..Default::default()
        };
        config.store.prefix = prefix.clone();
        tweak(&mut config);
        (config, prefix)
    }

    async fn start_on(
        gateway_store: GatewayStore,
        store: Arc<dyn Store>,
        config: GatewayConfig,
        prefix: String,
    ) -> TestGateway {
        let shutdown = CancellationToken::new();
        let started = caravan_runtime::service::start(
            ApiGatewayService,
            config,
            gateway_store,
            shutdown.clone(),
        );
        let running = tokio::time::timeout(Duration::from_secs(10), started)
            .await
            .expect("gateway did not start in time")
            .expect("gateway failed before binding");
        let bound = running.ready;
        TestGateway {
            bound,
            store,
            keys: Keyspace::new(&prefix),
            shutdown,
            running: Some(running),
        }
    }

    /// A channel to the gRPC API.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.bound.grpc))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    /// Stops the gateway and waits for it to finish.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let running = self.running.take().expect("stopped twice");
        tokio::time::timeout(Duration::from_secs(10), running.stopped())
            .await
            .expect("gateway did not stop in time")
            .expect("gateway failed");
    }

    /// The store's revision now: a subscription from it sees every write
    /// made after this call, however late its watch opens.
    pub async fn revision(&self) -> i64 {
        self.store.range(self.keys.range()).await.unwrap().revision
    }

    /// Waits until `n` blocking queries of this gateway wait for a change,
    /// as its `caravan_gateway_blocking_queries` gauge shows: a write after
    /// this wakes them, where one before would answer them at once.
    pub async fn wait_blocked(&self, n: i64) {
        let want = format!("caravan_gateway_blocking_queries {n}");
        caravan_testkit::wait::eventually(
            &format!("{n} blocking queries to wait"),
            caravan_testkit::wait::PATIENCE,
            || async {
                let metrics = self.http("GET", "/metrics", b"").await;
                metrics.text().lines().any(|l| l.trim() == want)
            },
        )
        .await;
    }

    /// Every key under the prefix.
    pub async fn key_count(&self) -> usize {
        self.store.range(self.keys.range()).await.unwrap().kvs.len()
    }

    /// Every stored allocation, its record folded with its client's
    /// statuses.
    pub async fn allocs(&self) -> Vec<caravan_proto::Allocation> {
        use caravan_state::Kind;
        let records = self
            .store
            .range(Range::prefix(self.keys.prefix_of(Kind::Allocs)))
            .await
            .unwrap();
        let mut statuses = Vec::new();
        for kind in [Kind::AllocStatus, Kind::JobStatus] {
            let read = self
                .store
                .range(Range::prefix(self.keys.prefix_of(kind)).at_revision(records.revision))
                .await
                .unwrap();
            statuses.extend(read.kvs);
        }
        caravan_state::fold_listed(
            &self.keys,
            &records.kvs,
            &statuses,
            caravan_state::AllocDetail::Full,
        )
        .unwrap()
    }

    /// Every object stored under `prefix`, decoded.
    pub async fn objects<T: StateObject>(&self, prefix: Vec<u8>) -> Vec<T> {
        let res = self.store.range(Range::prefix(prefix)).await.unwrap();
        res.kvs.iter().map(|kv| decode::<T>(kv).unwrap()).collect()
    }

    /// The stored job.
    pub async fn job(&self, id: &str) -> Option<Job> {
        let kv = self
            .store
            .get(&self.keys.job("default", id))
            .await
            .unwrap()?;
        Some(decode(&kv).unwrap())
    }

    /// The stored node.
    pub async fn node(&self, id: &str) -> Option<Node> {
        let kv = self.store.get(&self.keys.node(id)).await.unwrap()?;
        Some(decode(&kv).unwrap())
    }

    /// Every stored evaluation.
    pub async fn evals(&self) -> Vec<Evaluation> {
        self.objects(self.keys.prefix_of(caravan_state::Kind::Evals))
            .await
    }

    /// Sends one HTTP request and reads the whole answer.
    pub async fn http(&self, method: &str, path: &str, body: &[u8]) -> HttpAnswer {
        http(self.bound.http, method, path, body).await
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A minimal HTTP/1.1 client: one request per connection.
pub async fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &[u8]) -> HttpAnswer {
    http_with(addr, method, path, &[], body).await
}

/// [`http`] with extra request headers.
pub async fn http_with(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpAnswer {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server may answer (e.g. 413) before reading a large body.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    parse(&raw)
}

fn parse(raw: &[u8]) -> HttpAnswer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        body = dechunk(&body);
    }
    HttpAnswer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
}

/// The runtime threads of the tests' tokio runtime
/// (`backend_cases!` runs each case on two).
const RUNTIME_WORKERS: usize = 2;

/// Takes every worker of the current runtime until the returned flag is
/// cleared: a gateway saturated by alloc streams, cache updates and
/// status writes.
pub fn saturate_runtime() -> Arc<AtomicBool> {
    let busy = Arc::new(AtomicBool::new(true));
    let spinning = Arc::new(AtomicUsize::new(0));
    for _ in 0..RUNTIME_WORKERS {
        let (busy, spinning) = (Arc::clone(&busy), Arc::clone(&spinning));
        tokio::spawn(async move {
            spinning.fetch_add(1, Ordering::SeqCst);
            while busy.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
    }
    while spinning.load(Ordering::SeqCst) < RUNTIME_WORKERS {
        std::thread::yield_now();
    }
    busy
}

/// Runs `request` on a thread and runtime of its own (the test's may be
/// saturated); its output arrives on the returned channel.
pub fn from_elsewhere<T, F>(request: F) -> std::sync::mpsc::Receiver<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = tx.send(runtime.block_on(request));
    });
    rx
}

/// Sends one HTTP request to `addr` [`from_elsewhere`].
pub fn http_from_elsewhere(
    addr: std::net::SocketAddr,
    method: &'static str,
    path: &'static str,
    body: Vec<u8>,
) -> std::sync::mpsc::Receiver<HttpAnswer> {
    from_elsewhere(async move { http(addr, method, path, &body).await })
}

/// The secret the tests' node `node_id` registers and calls with.
pub fn node_secret(node_id: &str) -> String {
    format!("secret-of-{node_id}")
}

/// A service job of `count` instances of one `mock` task.
pub fn job(id: &str, count: i32) -> Job {
    let mut job = Job {
        id: id.into(),
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "app".into(),
                driver: "mock".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 64,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    job.set_type(JobType::Service);
    job
}

/// A plain registration of `job`.
pub fn register(job: Job) -> RegisterJobRequest {
    RegisterJobRequest {
        job: Some(job),
        ..Default::default()
    }
}
