//! Calls to the eval broker and the plan applier leaders, found through the
//! store's leader keys. Refusals that cannot have been acted on (a follower
//! naming the leader, no leader elected, no connection to the leader) are
//! retried; a plan whose outcome is unknown is reported as such, never
//! resubmitted blindly.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_proto::plan_applier_service_client::PlanApplierServiceClient;
use caravan_proto::plan_applier_service_server::PlanApplierService;
use caravan_proto::*;
use caravan_runtime::Backoff;
use caravan_runtime::leader::LeaderChannel;
use caravan_runtime::local::Transport;
use caravan_runtime::names::PLAN_APPLIER;
use caravan_runtime::status::{is_not_leader, not_applied};
use tokio::time::Instant;
use tonic::{Code, Status};

use crate::error::WorkerError;

/// The largest message exchanged with the applier: plans of thousands of
/// allocations exceed tonic's default of 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// `SubmitPlan`'s gRPC path, as direct calls are counted by.
const SUBMIT_PLAN: &str = "/caravan.v1.PlanApplierService/SubmitPlan";

/// First pause before asking again.
const BACKOFF_MIN: Duration = Duration::from_millis(20);
/// Longest pause between attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One delivery of an evaluation: what acks and nacks name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The evaluation delivered.
    pub eval_id: String,
    /// The broker's token for this delivery.
    pub token: String,
    /// The highest revision the delivery's writes committed at, 0 before
    /// any: the broker holds the job's next delivery to it.
    pub written_revision: i64,
}

/// Whether a status is a refusal by a replica that does not lead (or the
/// absence of a leader), told by its code and metadata: the request was not
/// acted on.
fn refused_by_follower(status: &Status) -> bool {
    is_not_leader(status)
}

/// Whether a call failed while connecting (say, to a leader that just
/// died and whose key has not expired yet): the request never left this
/// process, so it cannot have been acted on.
fn never_sent(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        if err.is::<tonic::ConnectError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Pauses between attempts: doubling from 20 ms to 1 s.
fn backoff() -> Backoff {
    Backoff::new(BACKOFF_MIN, BACKOFF_MAX)
}

/// The eval broker's leader.
#[derive(Clone)]
pub struct BrokerClient {
    channel: LeaderChannel,
    rpc_timeout: Duration,
    leader_wait: Duration,
}

impl BrokerClient {
    /// Calls the leader `channel` follows.
    pub fn new(channel: LeaderChannel, rpc_timeout: Duration, leader_wait: Duration) -> Self {
        BrokerClient {
            channel,
            rpc_timeout,
            leader_wait,
        }
    }

    /// Calls the broker, following leader changes and retrying UNAVAILABLE
    /// for up to the leader wait.
    async fn call<T, F, Fut>(&self, timeout: Duration, call: F) -> Result<T, WorkerError>
    where
        F: Fn(EvalBrokerServiceClient<Transport>, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + self.leader_wait;
        let mut backoff = backoff();
        loop {
            let status = match self.channel.channel().await {
                Ok(ch) => match call(EvalBrokerServiceClient::new(ch), timeout).await {
                    Ok(resp) => return Ok(resp.into_inner()),
                    Err(status) => status,
                },
                Err(status) => status,
            };
            self.channel.on_error(&status);
            if status.code() != Code::Unavailable || Instant::now() >= deadline {
                return Err(WorkerError::Broker(status));
            }
            // Even with a hint: a replica still taking office names itself.
            backoff.wait().await;
        }
    }

    /// Long-polls for an evaluation of one of `schedulers`, acknowledging
    /// the finished delivery `ack` (eval id, token) first when given.
    pub async fn dequeue(
        &self,
        schedulers: &[String],
        timeout: Duration,
        ack: Option<&Delivery>,
    ) -> Result<DequeueResponse, WorkerError> {
        let req = DequeueRequest {
            schedulers: schedulers.to_vec(),
            timeout_ns: i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX),
            ack: ack.map(|d| AckRequest {
                eval_id: d.eval_id.clone(),
                token: d.token.clone(),
                written_revision: d.written_revision,
            }),
        };
        self.call(timeout + self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.dequeue(r).await }
        })
        .await
    }

    /// Acknowledges a processed evaluation.
    pub async fn ack(&self, delivery: &Delivery) -> Result<(), WorkerError> {
        let req = AckRequest {
            eval_id: delivery.eval_id.clone(),
            token: delivery.token.clone(),
            written_revision: delivery.written_revision,
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.ack(r).await }
        })
        .await
        .map(|_| ())
    }

    /// Hands an evaluation back for redelivery.
    pub async fn nack(&self, delivery: &Delivery) -> Result<(), WorkerError> {
        let req = NackRequest {
            eval_id: delivery.eval_id.clone(),
            token: delivery.token.clone(),
            written_revision: delivery.written_revision,
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.nack(r).await }
        })
        .await
        .map(|_| ())
    }

    /// Extends the nack timeout of an evaluation being processed.
    pub async fn outstanding_reset(&self, eval_id: &str, token: &str) -> Result<(), WorkerError> {
        let req = OutstandingResetRequest {
            eval_id: eval_id.into(),
            token: token.into(),
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.outstanding_reset(r).await }
        })
        .await
        .map(|_| ())
    }

    /// Writes the processed evaluation's new state.
    pub async fn update_eval(&self, eval: Evaluation, token: &str) -> Result<i64, WorkerError> {
        let req = UpdateEvalRequest {
            eval: Some(eval),
            token: token.into(),
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.update_eval(r).await }
        })
        .await
        .map(|r| r.revision)
    }

    /// Creates an evaluation (blocked, follow-up, rolling).
    pub async fn create_eval(&self, eval: Evaluation, token: &str) -> Result<i64, WorkerError> {
        let req = CreateEvalRequest {
            eval: Some(eval),
            token: token.into(),
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.create_eval(r).await }
        })
        .await
        .map(|r| r.revision)
    }

    /// Puts a blocked evaluation back into the blocked set.
    pub async fn reblock_eval(&self, eval: Evaluation, token: &str) -> Result<i64, WorkerError> {
        let req = ReblockEvalRequest {
            eval: Some(eval),
            token: token.into(),
        };
        self.call(self.rpc_timeout, |mut c, t| {
            let mut r = caravan_runtime::trace::request(req.clone());
            r.set_timeout(t);
            async move { c.reblock_eval(r).await }
        })
        .await
        .map(|r| r.revision)
    }
}

/// What became of a submitted plan.
#[derive(Debug)]
pub enum Submitted {
    /// The applier answered: what it committed.
    Result(Box<PlanResult>),
    /// The applier failed after accepting the plan (leadership lost, store
    /// trouble): it may or may not have committed. Refresh to the store's
    /// current revision and plan again; the applier's per-job freshness
    /// check refuses a plan computed before a commit that did happen.
    Unknown(Status),
}

/// The plan applier's leader.
#[derive(Clone)]
pub struct ApplierClient {
    channel: LeaderChannel,
    rpc_timeout: Duration,
    leader_wait: Duration,
}

impl ApplierClient {
    /// Calls the leader `channel` follows.
    pub fn new(channel: LeaderChannel, rpc_timeout: Duration, leader_wait: Duration) -> Self {
        ApplierClient {
            channel,
            rpc_timeout,
            leader_wait,
        }
    }

    /// Submits a plan. Refusals by followers are retried at the leader; a
    /// failure after acceptance comes back as [`Submitted::Unknown`].
    pub async fn submit(&self, plan: Plan) -> Result<Submitted, WorkerError> {
        let deadline = Instant::now() + self.leader_wait;
        let mut backoff = backoff();
        let request = SubmitPlanRequest { plan: Some(plan) };
        loop {
            let status = match self.channel.channel().await {
                Ok(ch) => match self.call(ch, &request).await {
                    Ok(result) => return Ok(Submitted::Result(Box::new(result))),
                    Err(status) => {
                        self.channel.on_error(&status);
                        if status.code() == Code::Unavailable
                            && !refused_by_follower(&status)
                            && !never_sent(&status)
                            && !not_applied(&status)
                        {
                            return Ok(Submitted::Unknown(status));
                        }
                        status
                    }
                },
                Err(status) => status,
            };
            // Refusals that wrote nothing (a follower, a connection never
            // made, an applier that could not check the token while the
            // broker changes leader) are retried, not counted as attempts.
            if !refused_by_follower(&status) && !never_sent(&status) && !not_applied(&status) {
                return Err(WorkerError::Applier(status));
            }
            if Instant::now() >= deadline {
                return Err(WorkerError::NoLeader(PLAN_APPLIER));
            }
            backoff.wait().await;
        }
    }

    /// One call of `SubmitPlan`: straight to the handler when the leader is
    /// the applier of this process (the plan as it stands, not encoded and
    /// decoded again), else through `ch`.
    async fn call(&self, ch: Transport, request: &SubmitPlanRequest) -> Result<PlanResult, Status> {
        let answer = match self.channel.local_handler::<Arc<dyn PlanApplierService>>() {
            Some(applier) => {
                let r = tonic::Request::new(request.clone());
                caravan_runtime::local::call_handler(
                    SUBMIT_PLAN,
                    self.rpc_timeout,
                    applier.submit_plan(r),
                )
                .await?
            }
            None => {
                let mut client = PlanApplierServiceClient::new(ch)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES);
                let mut r = caravan_runtime::trace::request(request.clone());
                r.set_timeout(self.rpc_timeout);
                client.submit_plan(r).await?
            }
        };
        Ok(answer.into_inner().result.unwrap_or_default())
    }

    /// Waits until an applier leader is known again (after a failure of
    /// unknown outcome), for up to the leader wait.
    pub async fn await_leader(&self) -> Result<(), WorkerError> {
        let deadline = Instant::now() + self.leader_wait;
        let mut backoff = backoff();
        loop {
            match self.channel.channel().await {
                Ok(_) => return Ok(()),
                Err(_) if Instant::now() < deadline => backoff.wait().await,
                Err(_) => return Err(WorkerError::NoLeader(PLAN_APPLIER)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follower_refusals_are_told_apart_from_failures_after_acceptance() {
        let hinted = caravan_runtime::status::not_leader(PLAN_APPLIER, Some("10.0.0.1:4651"));
        assert!(refused_by_follower(&hinted));
        assert!(refused_by_follower(&caravan_runtime::status::not_leader(
            PLAN_APPLIER,
            None
        )));
        // The words of a refusal without its marker are not one.
        assert!(!refused_by_follower(&Status::unavailable(
            "plan-applier: no leader elected"
        )));
        assert!(!refused_by_follower(&Status::unavailable(
            "plan-applier: leadership lost; the plan was not committed"
        )));
        assert!(!refused_by_follower(&Status::unavailable(
            "transport error"
        )));
        assert!(!refused_by_follower(&Status::failed_precondition("token")));
    }

    /// An applier answering with what it was handed; `over_port` tells the
    /// path a call took.
    struct Applier {
        over_port: bool,
    }

    #[async_trait::async_trait]
    impl PlanApplierService for Applier {
        async fn submit_plan(
            &self,
            request: tonic::Request<SubmitPlanRequest>,
        ) -> Result<tonic::Response<SubmitPlanResponse>, Status> {
            if self.over_port {
                return Err(Status::internal("decoded from the port's body"));
            }
            let plan = request.into_inner().plan.unwrap_or_default();
            Ok(tonic::Response::new(SubmitPlanResponse {
                result: Some(PlanResult {
                    rejected_nodes: vec![plan.eval_id],
                    ..Default::default()
                }),
            }))
        }
    }

    /// A worker whose applier leader is a handler of its own process hands
    /// it the plan as built: the port's service (which would decode it) is
    /// never called.
    #[tokio::test]
    async fn a_plan_for_an_applier_of_this_process_goes_to_its_handler() {
        use caravan_proto::plan_applier_service_server::PlanApplierServiceServer;
        use caravan_store::{MemStore, Store};
        use tokio_util::sync::CancellationToken;

        caravan_runtime::local::enable();
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let address = "worker-test-applier:1";
        let handler: Arc<dyn PlanApplierService> = Arc::new(Applier { over_port: false });
        let _registered = caravan_runtime::local::register(
            address,
            PlanApplierServiceServer::new(Applier { over_port: true }),
        )
        .expect("enabled")
        .with_handler(handler);
        let (stop, leads) = (
            CancellationToken::new(),
            Arc::new(tokio::sync::Notify::new()),
        );
        let leading = {
            let (store, stop, leads) = (store.clone(), stop.clone(), leads.clone());
            tokio::spawn(async move {
                caravan_runtime::leader::serve_as_leader(
                    store,
                    "/w",
                    PLAN_APPLIER,
                    address,
                    Duration::from_secs(5),
                    stop,
                    |_l, stop| {
                        leads.notify_one();
                        async move { stop.cancelled().await }
                    },
                )
                .await
            })
        };
        tokio::time::timeout(Duration::from_secs(2), leads.notified())
            .await
            .expect("leads");
        let client = ApplierClient::new(
            LeaderChannel::new(store, "/w", PLAN_APPLIER),
            Duration::from_secs(2),
            Duration::from_secs(2),
        );
        let plan = Plan {
            eval_id: "e1".into(),
            ..Default::default()
        };
        match client.submit(plan).await.expect("answered") {
            Submitted::Result(result) => assert_eq!(result.rejected_nodes, vec!["e1"]),
            Submitted::Unknown(status) => panic!("not answered by the handler: {status:?}"),
        }
        stop.cancel();
        leading.await.unwrap();
    }

    #[tokio::test]
    async fn a_refused_connection_is_told_apart_from_a_failure_after_sending() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let channel = caravan_runtime::grpc::channel(&addr.to_string()).unwrap();
        let status = PlanApplierServiceClient::new(channel)
            .submit_plan(SubmitPlanRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(never_sent(&status), "{status:?}");
        assert!(!never_sent(&Status::unavailable("transport error")));
        assert!(!never_sent(&Status::unavailable(
            "plan-applier: leadership lost; the plan was not committed"
        )));
    }
}
