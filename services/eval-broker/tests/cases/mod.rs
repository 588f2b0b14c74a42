//! Backend-neutral service tests of the eval broker: each case runs brokers
//! in-process on a fresh key prefix of the store it is given, talks to them
//! over gRPC, and checks the store directly. `mem.rs` and `etcd.rs`
//! instantiate every case through [`broker_cases!`].

pub mod blocked;
pub mod delivery;
pub mod drain;
pub mod failover;
pub mod gc;
pub mod nodes;
pub mod periodic;

use std::future::Future;
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

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Instantiates every case as a test: `broker_cases!(#[attr] store_fn)`
/// where `store_fn` is an async fn returning a fresh `Arc<dyn Store>`.
macro_rules! broker_cases {
    (#[$attr:meta] $backend:ident) => {
        $crate::cases::broker_cases!(@cases #[$attr] $backend;
            delivery {
                restores_evals_written_before_it_starts,
                dequeue_long_poll_times_out_empty_and_wakes_on_new_evals,
                worker_writes_need_the_live_token,
                ack_cancels_older_waiting_evals,
                delivery_limit_fails_the_eval_with_a_follow_up,
                nack_timeout_redelivers_and_reset_extends_it,
                a_completed_but_unacked_eval_is_not_redelivered,
            }
            blocked {
                a_blocked_eval_unblocks_when_a_node_registers,
                a_newer_blocked_eval_cancels_the_older,
                a_later_complete_eval_cancels_the_blocked_one,
                a_reblocked_eval_waits_for_capacity_again,
                plan_failure_blocks_are_retried_periodically,
            }
            failover {
                a_standby_names_the_leader_and_takes_over,
                a_crashed_leader_loses_nothing,
            }
            nodes {
                a_lost_heartbeat_marks_the_node_down_with_evals,
                a_node_without_heartbeat_at_restore_goes_down,
                a_node_with_many_jobs_goes_down_in_several_txns,
            }
            periodic {
                children_launch_on_schedule_with_version_and_eval,
                prohibit_overlap_waits_for_the_running_child,
                a_failover_catches_up_once_and_never_launches_twice,
                force_periodic_launches_now_and_checks_its_job,
            }
            gc {
                force_gc_takes_terminal_objects_and_keeps_what_lives,
                the_sweep_runs_on_its_interval_with_the_thresholds,
            }
            drain {
                a_passed_deadline_migrates_what_is_left_then_completes,
                a_drain_without_deadline_is_never_forced,
            }
        );
    };
    (@cases #[$attr:meta] $backend:ident; $($module:ident { $($case:ident),* $(,)? })*) => {
        $($(
            #[$attr]
            async fn $case() {
                $crate::cases::$module::$case($backend().await).await;
            }
        )*)*
    };
}
pub(crate) use broker_cases;

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
        eventually("the broker to lead", || {
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

    /// Long-polls for an eval of any scheduler type.
    pub async fn dequeue(&mut self, timeout: Duration) -> DequeueResponse {
        self.client
            .dequeue(DequeueRequest {
                schedulers: ["service", "batch", "system", "sysbatch"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
                timeout_ns: timeout.as_nanos() as i64,
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

    /// Acks a delivery.
    pub async fn ack(&mut self, eval_id: &str, token: &str) {
        self.client
            .ack(AckRequest {
                eval_id: eval_id.into(),
                token: token.into(),
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

/// Polls `check` until it holds, failing the test after the patience.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
pub async fn put<T: prost::Message>(store: &Arc<dyn Store>, key: Vec<u8>, msg: &T) -> Revision {
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

/// Polls `fetch` until it yields a value, failing the test after the
/// patience.
pub async fn wait_for<T, F, Fut>(what: &str, mut fetch: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = fetch().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the stored eval satisfies `check`; returns it.
pub async fn eval_becomes(
    store: &Arc<dyn Store>,
    ks: &Keyspace,
    id: &str,
    what: &str,
    check: impl Fn(&Evaluation) -> bool,
) -> Evaluation {
    wait_for(what, || async {
        read_eval(store, ks, id).await.filter(|e| check(e))
    })
    .await
}
