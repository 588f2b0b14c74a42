//! The token check: as a plan arrives, before it is queued, the applier asks
//! the eval broker's leader to reset the eval's nack timer with the plan's
//! delivery token. A broker that no longer knows the token (the eval was
//! redelivered, or the broker failed over) refuses the plan, so a worker
//! holding a stale delivery cannot commit. Checks of plans arriving together
//! share one call.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_proto::{OutstandingResetRequest, OutstandingResetsRequest};
use caravan_runtime::leader::LeaderChannel;
use caravan_runtime::local::Transport;
use caravan_runtime::status::leader_hint;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tonic::{Code, Status};
use tracing::Instrument;

use crate::error::ApplierError;

/// How many times a token check follows a leader change before giving up.
const ATTEMPTS: usize = 3;

/// Pause before asking again when no broker leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Checks that a delivery token is outstanding, extending its nack timer.
#[async_trait]
pub trait TokenCheck: Send + Sync + 'static {
    /// `Ok` when the broker holds `token` for `eval_id`;
    /// [`ApplierError::TokenRefused`] when it does not;
    /// [`ApplierError::BrokerUnavailable`] when it could not be asked.
    async fn check(&self, eval_id: &str, token: &str) -> Result<(), ApplierError>;
}

/// The token check against the eval broker's leader over gRPC. Checks that
/// arrive while one call is out go together in the next
/// (`OutstandingResets`), each answered on its own.
pub struct BrokerTokens {
    inner: Arc<Inner>,
}

struct Inner {
    channel: LeaderChannel,
    timeout: Duration,
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    checks: Vec<Check>,
    /// A task is sending checks; it takes whatever waits when its call ends.
    sending: bool,
}

struct Check {
    eval_id: String,
    token: String,
    /// The caller's span: the call that carries this check continues the
    /// first check's trace.
    span: tracing::Span,
    answer: oneshot::Sender<Result<(), ApplierError>>,
}

impl BrokerTokens {
    /// Asks the leader `channel` follows, each call bounded by `timeout`.
    pub fn new(channel: LeaderChannel, timeout: Duration) -> Self {
        BrokerTokens {
            inner: Arc::new(Inner {
                channel,
                timeout,
                waiting: Mutex::new(Waiting::default()),
            }),
        }
    }
}

#[async_trait]
impl TokenCheck for BrokerTokens {
    async fn check(&self, eval_id: &str, token: &str) -> Result<(), ApplierError> {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut waiting = self.inner.waiting.lock();
            waiting.checks.push(Check {
                eval_id: eval_id.to_string(),
                token: token.to_string(),
                span: tracing::Span::current(),
                answer,
            });
            !std::mem::replace(&mut waiting.sending, true)
        };
        if start {
            // A task of its own, so a caller that goes away strands no one.
            tokio::spawn(self.inner.clone().send_all());
        }
        answered.await.unwrap_or_else(|_| {
            Err(ApplierError::BrokerUnavailable(
                "the token check was dropped".into(),
            ))
        })
    }
}

impl Inner {
    /// Sends what waits, call after call, until nothing does.
    async fn send_all(self: Arc<Self>) {
        loop {
            let checks = {
                let mut waiting = self.waiting.lock();
                if waiting.checks.is_empty() {
                    waiting.sending = false;
                    return;
                }
                std::mem::take(&mut waiting.checks)
            };
            let answers = async {
                if checks.len() == 1 {
                    vec![self.one(&checks[0].eval_id, &checks[0].token).await]
                } else {
                    self.many(&checks).await
                }
            }
            .instrument(checks[0].span.clone())
            .await;
            for (check, answer) in checks.into_iter().zip(answers) {
                let _ = check.answer.send(answer);
            }
        }
    }

    /// Several checks in one call; a broker without `OutstandingResets`
    /// gets them one by one.
    async fn many(&self, checks: &[Check]) -> Vec<Result<(), ApplierError>> {
        let request = OutstandingResetsRequest {
            resets: checks
                .iter()
                .map(|c| OutstandingResetRequest {
                    eval_id: c.eval_id.clone(),
                    token: c.token.clone(),
                })
                .collect(),
        };
        let called = self
            .call(|mut client, timeout| {
                let mut r = caravan_runtime::trace::request(request.clone());
                r.set_timeout(timeout);
                async move { client.outstanding_resets(r).await }
            })
            .await;
        match called {
            Ok(response) if response.results.len() == checks.len() => checks
                .iter()
                .zip(response.results)
                .map(|(c, r)| match Code::from_i32(r.code) {
                    Code::Ok => Ok(()),
                    code => Err(refused(&c.eval_id, code, &r.message)),
                })
                .collect(),
            Ok(response) => {
                let wrong = format!(
                    "{} answers to {} token checks",
                    response.results.len(),
                    checks.len()
                );
                checks
                    .iter()
                    .map(|_| Err(ApplierError::BrokerUnavailable(wrong.clone())))
                    .collect()
            }
            Err(Called::Refused(status)) if status.code() == Code::Unimplemented => {
                let mut out = Vec::with_capacity(checks.len());
                for c in checks {
                    out.push(self.one(&c.eval_id, &c.token).await);
                }
                out
            }
            Err(called) => checks
                .iter()
                .map(|c| Err(called.error(&c.eval_id)))
                .collect(),
        }
    }

    async fn one(&self, eval_id: &str, token: &str) -> Result<(), ApplierError> {
        let request = OutstandingResetRequest {
            eval_id: eval_id.to_string(),
            token: token.to_string(),
        };
        self.call(|mut client, timeout| {
            let mut r = caravan_runtime::trace::request(request.clone());
            r.set_timeout(timeout);
            async move { client.outstanding_reset(r).await }
        })
        .await
        .map(|_| ())
        .map_err(|called| called.error(eval_id))
    }

    /// Calls the broker's leader, following leader changes up to
    /// [`ATTEMPTS`] times.
    async fn call<T, F, Fut>(&self, call: F) -> Result<T, Called>
    where
        F: Fn(EvalBrokerServiceClient<Transport>, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut last = String::from("no attempt made");
        for _ in 0..ATTEMPTS {
            let channel = match self.channel.channel().await {
                Ok(c) => c,
                Err(status) => {
                    last = status.message().to_string();
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            match call(EvalBrokerServiceClient::new(channel), self.timeout).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => {
                    self.channel.on_error(&status);
                    match status.code() {
                        Code::Unavailable
                        | Code::DeadlineExceeded
                        | Code::Unknown
                        | Code::Cancelled => {
                            last = status.message().to_string();
                            if leader_hint(&status).is_none() {
                                tokio::time::sleep(RETRY_PAUSE).await;
                            }
                        }
                        _ => return Err(Called::Refused(status)),
                    }
                }
            }
        }
        Err(Called::Unavailable(last))
    }
}

/// Why a call to the broker has no answer.
enum Called {
    /// The broker answered with a refusal.
    Refused(Status),
    /// No broker leader answered.
    Unavailable(String),
}

impl Called {
    /// The answer to the check of `eval_id`.
    fn error(&self, eval_id: &str) -> ApplierError {
        match self {
            Called::Refused(status) => refused(eval_id, status.code(), status.message()),
            Called::Unavailable(last) => ApplierError::BrokerUnavailable(last.clone()),
        }
    }
}

/// The broker refused the delivery token of `eval_id`.
fn refused(eval_id: &str, code: Code, message: &str) -> ApplierError {
    ApplierError::TokenRefused {
        eval_id: eval_id.to_string(),
        reason: format!("{code:?}: {message}"),
    }
}

#[cfg(test)]
#[path = "tokens/tests.rs"]
mod tests;
