//! A fake eval broker for tests of the services that call the broker (the
//! plan applier checks plan tokens with it, the scheduler worker dequeues
//! from it and writes evals back): it hands out queued evals with tokens,
//! checks the tokens it handed out, and records what callers wrote.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::eval_broker_service_server::{EvalBrokerService, EvalBrokerServiceServer};
use caravan_proto::{
    AckRequest, AckResponse, BrokerStatsRequest, BrokerStatsResponse, CreateEvalRequest,
    DequeueRequest, DequeueResponse, EvalWriteResponse, Evaluation, ForceGcRequest,
    ForceGcResponse, ForcePeriodicRequest, ForcePeriodicResponse, NackRequest, NackResponse,
    OutstandingResetRequest, OutstandingResetResponse, OutstandingResetsRequest,
    OutstandingResetsResponse, ReblockEvalRequest, UpdateEvalRequest,
};
use caravan_runtime::names::EVAL_BROKER;
use caravan_store::{Leadership, Store, election_name};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// The longest a dequeue long-polls, whatever the caller asks.
const LONGEST_POLL: Duration = Duration::from_millis(500);

/// What the fake broker holds and saw.
#[derive(Default)]
pub struct BrokerLog {
    /// Evals waiting to be dequeued.
    pub ready: VecDeque<Evaluation>,
    /// Outstanding evals and their tokens.
    pub outstanding: HashMap<String, String>,
    /// Acked eval ids, in order.
    pub acked: Vec<String>,
    /// `Ack` calls received: acks that did not ride on a dequeue.
    pub ack_calls: usize,
    /// Nacked eval ids, in order.
    pub nacked: Vec<String>,
    /// Evals written back through `UpdateEval`.
    pub updated: Vec<Evaluation>,
    /// Evals created through `CreateEval`.
    pub created: Vec<Evaluation>,
    /// Evals re-blocked through `ReblockEval`.
    pub reblocked: Vec<Evaluation>,
    /// Eval ids whose nack timer was reset, in order (refused ones too).
    pub resets: Vec<String>,
    /// Calls that reset nack timers (`OutstandingReset`, `OutstandingResets`).
    pub reset_calls: usize,
    /// `Dequeue` calls not answered yet.
    pub polls_in_flight: usize,
    next_token: u64,
}

/// Counts a `Dequeue` call in [`BrokerLog::polls_in_flight`] until it is
/// answered (or dropped with its connection).
struct InFlight(Arc<Mutex<BrokerLog>>);

impl InFlight {
    fn new(log: &Arc<Mutex<BrokerLog>>) -> Self {
        log.lock().polls_in_flight += 1;
        InFlight(Arc::clone(log))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().polls_in_flight -= 1;
    }
}

/// A broker handing out queued evals with tokens; clones share one log.
#[derive(Clone)]
pub struct FakeBroker {
    /// What it holds and saw.
    pub log: Arc<Mutex<BrokerLog>>,
    store: Arc<dyn Store>,
}

impl FakeBroker {
    /// A broker with nothing queued; dequeues answer the store's revision as
    /// the one to wait for.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            log: Arc::default(),
            store,
        }
    }

    /// Queues an eval for a worker.
    pub fn enqueue(&self, eval: Evaluation) {
        self.log.lock().ready.push_back(eval);
    }

    /// Makes `eval` outstanding with `token`, as if dequeued.
    pub fn grant(&self, eval: &str, token: &str) {
        self.log
            .lock()
            .outstanding
            .insert(eval.to_string(), token.to_string());
    }

    fn token_ok(&self, eval_id: &str, token: &str) -> Result<(), Status> {
        match self.log.lock().outstanding.get(eval_id) {
            Some(t) if t == token => Ok(()),
            _ => Err(Status::failed_precondition(format!(
                "eval {eval_id} is not outstanding with that token"
            ))),
        }
    }

    /// Acks a delivery, alone or carried by a dequeue.
    fn take_ack(&self, ack: AckRequest) -> Result<(), Status> {
        self.token_ok(&ack.eval_id, &ack.token)?;
        let mut log = self.log.lock();
        log.outstanding.remove(&ack.eval_id);
        log.acked.push(ack.eval_id);
        Ok(())
    }

    fn next_ready(&self) -> Option<(Evaluation, String)> {
        let mut log = self.log.lock();
        let eval = log.ready.pop_front()?;
        log.next_token += 1;
        let token = format!("token-{}", log.next_token);
        log.outstanding.insert(eval.id.clone(), token.clone());
        Some((eval, token))
    }
}

fn eval_of(eval: Option<Evaluation>) -> Result<Evaluation, Status> {
    eval.ok_or_else(|| Status::invalid_argument("eval: required"))
}

#[async_trait::async_trait]
impl EvalBrokerService for FakeBroker {
    async fn dequeue(
        &self,
        req: Request<DequeueRequest>,
    ) -> Result<Response<DequeueResponse>, Status> {
        let _in_flight = InFlight::new(&self.log);
        let req = req.into_inner();
        let ack_error = match req.ack {
            Some(ack) => self.take_ack(ack).err().map(|s| s.message().to_string()),
            None => None,
        }
        .unwrap_or_default();
        let asked = Duration::from_nanos(u64::try_from(req.timeout_ns).unwrap_or(0));
        let deadline = tokio::time::Instant::now() + asked.min(LONGEST_POLL);
        loop {
            if let Some((eval, token)) = self.next_ready() {
                let wait_revision = self.store.current_revision().await.unwrap_or(0);
                return Ok(Response::new(DequeueResponse {
                    eval: Some(eval),
                    token,
                    wait_revision,
                    ack_error,
                }));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Response::new(DequeueResponse {
                    ack_error,
                    ..Default::default()
                }));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn ack(&self, req: Request<AckRequest>) -> Result<Response<AckResponse>, Status> {
        self.log.lock().ack_calls += 1;
        self.take_ack(req.into_inner())?;
        Ok(Response::new(AckResponse {}))
    }

    async fn nack(&self, req: Request<NackRequest>) -> Result<Response<NackResponse>, Status> {
        let req = req.into_inner();
        self.token_ok(&req.eval_id, &req.token)?;
        let mut log = self.log.lock();
        log.outstanding.remove(&req.eval_id);
        log.nacked.push(req.eval_id);
        Ok(Response::new(NackResponse {}))
    }

    async fn outstanding_reset(
        &self,
        req: Request<OutstandingResetRequest>,
    ) -> Result<Response<OutstandingResetResponse>, Status> {
        let req = req.into_inner();
        {
            let mut log = self.log.lock();
            log.reset_calls += 1;
            log.resets.push(req.eval_id.clone());
        }
        self.token_ok(&req.eval_id, &req.token)?;
        Ok(Response::new(OutstandingResetResponse {}))
    }

    async fn outstanding_resets(
        &self,
        req: Request<OutstandingResetsRequest>,
    ) -> Result<Response<OutstandingResetsResponse>, Status> {
        self.log.lock().reset_calls += 1;
        let results = req
            .into_inner()
            .resets
            .into_iter()
            .map(|r| {
                self.log.lock().resets.push(r.eval_id.clone());
                self.token_ok(&r.eval_id, &r.token).into()
            })
            .collect();
        Ok(Response::new(OutstandingResetsResponse { results }))
    }

    async fn update_eval(
        &self,
        req: Request<UpdateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = eval_of(req.eval)?;
        self.token_ok(&eval.id, &req.token)?;
        self.log.lock().updated.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }

    async fn create_eval(
        &self,
        req: Request<CreateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = eval_of(req.eval)?;
        self.token_ok(&eval.previous_eval, &req.token)?;
        self.log.lock().created.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }

    async fn reblock_eval(
        &self,
        req: Request<ReblockEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = eval_of(req.eval)?;
        self.token_ok(&eval.id, &req.token)?;
        self.log.lock().reblocked.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }

    async fn stats(
        &self,
        _: Request<BrokerStatsRequest>,
    ) -> Result<Response<BrokerStatsResponse>, Status> {
        Ok(Response::new(BrokerStatsResponse::default()))
    }

    async fn force_periodic(
        &self,
        _: Request<ForcePeriodicRequest>,
    ) -> Result<Response<ForcePeriodicResponse>, Status> {
        Err(Status::unimplemented(
            "the fake broker launches no periodic jobs",
        ))
    }

    async fn force_gc(
        &self,
        _: Request<ForceGcRequest>,
    ) -> Result<Response<ForceGcResponse>, Status> {
        Err(Status::unimplemented("the fake broker collects no garbage"))
    }
}

/// A fake broker serving on a free loopback port as the broker leader under
/// a key prefix; dropping it stops the server.
pub struct BrokerHandle {
    /// The broker (its log is shared with the server).
    pub broker: FakeBroker,
    /// Its leadership of the `eval-broker` election.
    pub leadership: Leadership,
    /// Where it listens.
    pub addr: String,
    stop: CancellationToken,
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts a fake broker on a free loopback port and makes it the leader of
/// the `eval-broker` election under `prefix`, where the other services look
/// for the broker.
///
/// # Panics
///
/// Panics when the port cannot be bound or the campaign fails.
pub async fn start(store: &Arc<dyn Store>, prefix: &str) -> BrokerHandle {
    let broker = FakeBroker::new(store.clone());
    let stop = CancellationToken::new();
    let (listener, addr) = match caravan_runtime::grpc::bind("127.0.0.1:0").await {
        Ok(bound) => bound,
        Err(err) => panic!("cannot bind the fake broker: {err}"),
    };
    let router =
        caravan_runtime::grpc::server().add_service(EvalBrokerServiceServer::new(broker.clone()));
    tokio::spawn(caravan_runtime::grpc::serve(router, listener, stop.clone()));
    let addr = addr.to_string();
    let leadership = match Leadership::campaign(
        store.clone(),
        &election_name(prefix, EVAL_BROKER),
        &addr,
        Duration::from_secs(10),
    )
    .await
    {
        Ok(leadership) => leadership,
        Err(err) => panic!("the fake broker cannot campaign: {err}"),
    };
    BrokerHandle {
        broker,
        leadership,
        addr,
        stop,
    }
}
