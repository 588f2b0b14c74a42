//! Backend-neutral service tests of the eval broker: each case runs brokers
//! in-process on a fresh key prefix of the store it is given, talks to them
//! over gRPC, and checks the store directly. `service.rs`
//! instantiates every case on both stores.

pub mod blocked;
pub mod delivery;
pub mod drain;
pub mod failover;
pub mod gc;
pub mod nodes;
pub mod periodic;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use caravan_eval_broker::{EvalBrokerConfig, EvalBrokerService};
use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_proto::{
    AckRequest, BrokerStatsRequest, BrokerStatsResponse, DequeueRequest, DequeueResponse,
    EvalStatus, Evaluation,
};
use caravan_runtime::service::Running;
use caravan_state::{Keyspace, decode, encode};
use caravan_store::{Revision, Store};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

pub use caravan_testkit::wait::{PATIENCE, eventually, eventually_some};

/// A broker running in-process.
pub struct Broker {
    /// Where it listens.
    pub addr: SocketAddr,
    /// A client of it.
    pub client: EvalBrokerServiceClient<Channel>,
    shutdown: CancellationToken,
    running: Running<EvalBrokerService>,
}

impl Broker {
    /// Stops the broker gracefully (a leader resigns) and waits for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(PATIENCE, self.running.stopped()).await {
            Ok(Ok(())) => {}
            other => panic!("broker did not stop cleanly: {other:?}"),
        }
    }

    /// Drops the broker mid-flight, as a crash would: nothing is resigned or
    /// acked.
    pub async fn crash(self) {
        self.running.abort().await;
    }

    /// Waits until this broker leads with its queues restored.
    pub async fn wait_leading(&mut self) {
        eventually("the broker to lead", PATIENCE, || {
            let mut client = self.client.clone();
            async move { client.stats(BrokerStatsRequest {}).await.is_ok() }
        })
        .await;
    }

    /// The broker's counts.
    pub async fn stats(&mut self) -> BrokerStatsResponse {
        self.client
            .stats(BrokerStatsRequest {})
            .await
            .expect("stats")
            .into_inner()
    }

    /// Waits until the broker's counts pass `test`.
    pub async fn stats_become(&self, what: &str, test: impl Fn(&BrokerStatsResponse) -> bool) {
        let test = &test;
        eventually(what, PATIENCE, || {
            let mut b = self.client.clone();
            async move {
                b.stats(BrokerStatsRequest {})
                    .await
                    .is_ok_and(|s| test(&s.into_inner()))
            }
        })
        .await;
    }

    /// Long-polls for an eval of any scheduler type.
    pub async fn dequeue(&mut self, timeout: Duration) -> DequeueResponse {
        self.client
            .dequeue(DequeueRequest {
                schedulers: ["service", "batch", "system", "sysbatch"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
                timeout_ns: timeout.as_nanos() as i64,
                ack: None,
            })
            .await
            .expect("dequeue")
            .into_inner()
    }

    /// Dequeues an eval that must come within the test's patience.
    pub async fn take(&mut self) -> (Evaluation, String, Revision) {
        let got = self.dequeue(PATIENCE).await;
        let eval = got.eval.expect("an eval within the patience");
        (eval, got.token, got.wait_revision)
    }

    /// What its `/metrics` listener serves: the process registry as text.
    pub async fn scrape(&self) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.running.metrics_addr.expect("a metrics listener");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: broker\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
        answer
    }

    /// Acks a delivery.
    pub async fn ack(&mut self, eval_id: &str, token: &str) {
        self.client
            .ack(AckRequest {
                eval_id: eval_id.into(),
                token: token.into(),
                ..Default::default()
            })
            .await
            .expect("ack");
    }
}

/// Settings that keep the tests fast.
pub fn fast_config(prefix: &str) -> EvalBrokerConfig {
    let mut config = EvalBrokerConfig {
        grpc_addr: "127.0.0.1:0".into(),
        leader_ttl_ms: 2_000,
        nack_timeout_ms: 5_000,
        initial_nack_delay_ms: 50,
        subsequent_nack_delay_ms: 100,
        failed_follow_up_base_ms: 60_000,
        failed_follow_up_jitter_ms: 1_000,
        ..Default::default()
    };
    config.store.prefix = prefix.to_string();
    config
}

/// Starts a broker on `store` with `config`.
pub async fn start(store: Arc<dyn Store>, config: EvalBrokerConfig) -> Broker {
    let shutdown = CancellationToken::new();
    let running =
        caravan_runtime::service::start(EvalBrokerService, config, store, shutdown.clone())
            .await
            .expect("start the broker");
    let addr = running.local_addr;
    let channel = caravan_runtime::grpc::channel(&addr.to_string()).expect("channel");
    Broker {
        addr,
        client: EvalBrokerServiceClient::new(channel),
        shutdown,
        running,
    }
}

/// Starts a broker with the fast settings and waits for it to lead.
pub async fn start_leader(store: Arc<dyn Store>, prefix: &str) -> Broker {
    let mut broker = start(store, fast_config(prefix)).await;
    broker.wait_leading().await;
    broker
}

/// A fresh UUID.
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A pending eval of `job` as the api-gateway would write it.
pub fn pending_eval(job: &str, kind: &str, priority: i32) -> Evaluation {
    Evaluation {
        id: uuid(),
        namespace: "default".into(),
        job_id: job.into(),
        r#type: kind.into(),
        priority,
        triggered_by: "job-register".into(),
        status: EvalStatus::Pending as i32,
        ..Default::default()
    }
}

/// Writes a message at `key`; returns the revision.
pub async fn put<T: caravan_state::StateObject>(
    store: &Arc<dyn Store>,
    key: Vec<u8>,
    msg: &T,
) -> Revision {
    store.put(&key, &encode(msg), 0).await.expect("put")
}

/// Writes an eval directly, as the api-gateway does.
pub async fn put_eval(store: &Arc<dyn Store>, ks: &Keyspace, eval: &Evaluation) -> Revision {
    put(store, ks.eval(&eval.id), eval).await
}

/// Reads an eval from the store.
pub async fn read_eval(store: &Arc<dyn Store>, ks: &Keyspace, id: &str) -> Option<Evaluation> {
    let kv = store.get(&ks.eval(id)).await.expect("get")?;
    Some(decode(&kv).expect("decode"))
}

/// Every eval under the prefix.
pub async fn all_evals(store: &Arc<dyn Store>, ks: &Keyspace) -> Vec<Evaluation> {
    let res = store
        .range(ks.range_of(caravan_state::Kind::Evals))
        .await
        .expect("range");
    res.kvs
        .iter()
        .map(|kv| decode(kv).expect("decode"))
        .collect()
}

/// Waits until the stored eval satisfies `check`; returns it.
pub async fn eval_becomes(
    store: &Arc<dyn Store>,
    ks: &Keyspace,
    id: &str,
    what: &str,
    check: impl Fn(&Evaluation) -> bool,
) -> Evaluation {
    eventually_some(what, PATIENCE, || async {
        read_eval(store, ks, id).await.filter(|e| check(e))
    })
    .await
}
